/* env: the environment, read and checked once (see env.h). */
#include "common/env.h"
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a variable's value; NULL when it is unset or empty (the default) */
static const char *value(const char *name) {
    const char *s = getenv(name);
    return s && *s ? s : NULL;
}

static int boolean(const char *name, int dflt, int *out, Err *err) {
    const char *s = value(name);
    *out = dflt;
    if (!s) return 0;
    if (strcmp(s, "0") && strcmp(s, "1")) return err_set(err, "%s=\"%.100s\": expected 0 or 1", name, s);
    *out = s[0] == '1';
    return 0;
}

static int seconds(const char *name, double dflt, double *out, Err *err) {
    const char *s = value(name);
    *out = dflt;
    if (!s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !(v > 0) || v > 1e7)
        return err_set(err, "%s=\"%.100s\": expected a positive number of seconds (at most 1e7), e.g. 600", name, s);
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------- the launchers */

/* One launcher's variables: rank, world size, local rank, and one more that has to be set too (NULL: none). */
typedef struct { const char *how, *rank, *world, *local, *also; int local_optional; } Launcher;

static const Launcher launchers[] = {
    {"gpt2gen", "GPT2GEN_RANK", "GPT2GEN_WORLD", "GPT2GEN_LOCAL_RANK", NULL, 0},
    /* first after our own: torchrun started inside srun or mpirun has both sets, and its own ranks are the ranks */
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "WORLD_SIZE", 1},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", NULL, 0},
    {"mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", NULL, 0},
    /* srun sets SLURM_STEP_ID; a batch script has SLURM_PROCID (0) and SLURM_NTASKS without being N processes */
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_ID", 0},
};
enum { N_LAUNCHERS = sizeof launchers / sizeof launchers[0] };

static int integer(const char *name, int *out, Err *err) {
    const char *s = getenv(name);
    if (!s) return err_set(err, "%s is not set", name);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < INT_MIN || v > INT_MAX)
        return err_set(err, "%s=\"%.100s\" is not an integer", name, s);
    *out = (int)v;
    return 0;
}

static const char *either(const char *a, const char *b) {
    const char *s = value(a);
    return s ? s : b && value(b) ? value(b) : "";
}

/* launcher l's rank, world and local rank, checked */
static int launcher_read(const Launcher *l, LaunchEnv *le, Err *err) {
    le->local_rank = 0;
    if (integer(l->rank, &le->rank, err) || integer(l->world, &le->world, err) ||
        ((!l->local_optional || getenv(l->local)) && integer(l->local, &le->local_rank, err)))
        return -1;
    if (le->world < 1) return err_set(err, "%s=%d: the number of ranks must be at least 1", l->world, le->world);
    if (le->rank < 0 || le->rank >= le->world)
        return err_set(err, "%s=%d: the rank must be in [0, %d) (%s=%d)", l->rank, le->rank, le->world, l->world, le->world);
    if (le->local_rank < 0) return err_set(err, "%s=%d: the local rank must be at least 0", l->local, le->local_rank);
    le->how = l->how;
    return 0;
}

/* l's set and o's, both present, describe the same processes: the same rank and world; or torchrun (l) started
   one agent per task of o, each starting LOCAL_WORLD_SIZE ranks */
static int launchers_agree(const Launcher *l, const LaunchEnv *le, const Launcher *o, const LaunchEnv *other, Err *err) {
    int per = 0;
    if (!strcmp(l->how, "torchrun") && value("GROUP_RANK") && value("LOCAL_WORLD_SIZE")) {
        if (integer("LOCAL_WORLD_SIZE", &per, err)) return -1;
        if (per < 1 || (long)other->world * per != le->world)
            return err_set(err, "%s=%d tasks of LOCAL_WORLD_SIZE=%d ranks each, but WORLD_SIZE=%d: torchrun started by "
                           "%s must start the same number of ranks in every task", o->world, other->world, per,
                           le->world, o->how);
        return 0;
    }
    if (other->rank != le->rank)
        return err_set(err, "%s=%d and %s=%d disagree: one launcher's variables, or the same rank in both", l->rank,
                       le->rank, o->rank, other->rank);
    if (other->world != le->world)
        return err_set(err, "%s=%d and %s=%d disagree: one launcher's variables, or the same world size in both",
                       l->world, le->world, o->world, other->world);
    return 0;
}

static void launch_job(const Launcher *l, LaunchEnv *le) {
    if (!strcmp(l->rank, "OMPI_COMM_WORLD_RANK"))
        snprintf(le->job, sizeof le->job, "%s", either("OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"));
    else if (!strcmp(l->rank, "PMI_RANK"))
        snprintf(le->job, sizeof le->job, "%s", either("PMI_KVSNAME", "PMIX_NAMESPACE"));
    else if (!strcmp(l->how, "srun") && *either("SLURM_JOB_ID", NULL))
        snprintf(le->job, sizeof le->job, "%.60s.%.60s", either("SLURM_JOB_ID", NULL), either("SLURM_STEP_ID", NULL));
    else if (!strcmp(l->how, "torchrun"))
        snprintf(le->job, sizeof le->job, "%s", either("TORCHELASTIC_RUN_ID", NULL));
}

/* the launcher's restart count: a rank of an earlier attempt of the job is a stale one */
static int launch_attempt(LaunchEnv *le, Err *err) {
    const char *name = value("TORCHELASTIC_RESTART_COUNT") ? "TORCHELASTIC_RESTART_COUNT" :
                       value("SLURM_RESTART_COUNT") ? "SLURM_RESTART_COUNT" : NULL;
    if (!name) return 0;
    if (integer(name, &le->attempt, err)) return -1;
    return le->attempt < 0 ? err_set(err, "%s=%d: expected a count, 0 or more", name, le->attempt) : 0;
}

static int launch_read(LaunchEnv *le, Err *err) {
    const Launcher *own = &launchers[0];   /* gpt2gen's own variables come as three, or not at all */
    if (!getenv(own->rank) && (getenv(own->world) || getenv(own->local)))
        return err_set(err, "%s is set without %s: set %s, %s and %s together (gpt2gen's launcher does), or none of them",
                       getenv(own->world) ? own->world : own->local, own->rank, own->rank, own->world, own->local);
    const Launcher *l = NULL;
    for (int i = 0; i < N_LAUNCHERS; i++) {
        const Launcher *o = &launchers[i];
        if (!getenv(o->rank) || (o->also && !getenv(o->also))) continue;
        LaunchEnv other;
        if (launcher_read(o, l ? &other : le, err)) return -1;
        if (!l) { l = o; continue; }
        if (launchers_agree(l, le, o, &other, err)) return -1;
    }
    if (!l) return 0;
    launch_job(l, le);
    return launch_attempt(le, err);
}

/* ---------------------------------------------------------------- the TCP rendezvous */

/* a host name or address as a variable gives it: letters, digits, '.', '-', '_', ':' ([v6] without brackets) */
static int host_read(const char *name, const char *whole, const char *s, size_t n, LaunchEnv *le, Err *err) {
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') { s++; n -= 2; }
    int ok = n > 0 && n < sizeof le->rdv_host;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
             s[i] == '.' || s[i] == '-' || s[i] == '_' || s[i] == ':';
    if (!ok) return err_set(err, "%s=\"%.100s\": expected rank 0's host name or address, e.g. node17 or 10.0.0.5", name, whole);
    memcpy(le->rdv_host, s, n);
    le->rdv_host[n] = 0;
    return 0;
}

static int port_read(const char *name, const char *whole, const char *s, int *port, Err *err) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 1 || v > ENV_PORT_MAX)
        return err_set(err, "%s=\"%.100s\": expected a TCP port, 1 to %d", name, whole, ENV_PORT_MAX);
    *port = (int)v;
    return 0;
}

static int rendezvous_read(LaunchEnv *le, Err *err) {
    const char *spec = value("GPT2GEN_RENDEZVOUS"), *addr = value("MASTER_ADDR"), *port = value("MASTER_PORT");
    if (spec) {
        const char *colon = strrchr(spec, ':');
        le->rdv_from = "GPT2GEN_RENDEZVOUS";
        if (strncmp(spec, "tcp://", 6) || !colon || colon < spec + 6 || (strchr(spec + 6, ']') && colon < strchr(spec + 6, ']')))
            return err_set(err, "GPT2GEN_RENDEZVOUS=\"%.100s\": expected tcp://HOST:PORT, e.g. tcp://node17:29400", spec);
        return host_read("GPT2GEN_RENDEZVOUS", spec, spec + 6, (size_t)(colon - spec - 6), le, err) ||
               port_read("GPT2GEN_RENDEZVOUS", spec, colon + 1, &le->rdv_port, err) ? -1 : 0;
    }
    if (le->world < 2 || (!addr && !port)) return 0;   /* read where it is used: several ranks */
    if (!addr || !port)
        return err_set(err, "%s is set but %s is not: rank 0's address takes both (torchrun sets both)",
                       addr ? "MASTER_ADDR" : "MASTER_PORT", addr ? "MASTER_PORT" : "MASTER_ADDR");
    le->rdv_from = "MASTER_ADDR and MASTER_PORT";
    if (host_read("MASTER_ADDR", addr, addr, strlen(addr), le, err) || port_read("MASTER_PORT", port, port, &le->rdv_port, err))
        return -1;
    if (!strcmp(either("TORCHELASTIC_USE_AGENT_STORE", NULL), "True")) {   /* torchrun's own store holds MASTER_PORT */
        if (le->rdv_port == ENV_PORT_MAX)
            return err_set(err, "MASTER_PORT=%d: torchrun's store holds it, and gpt2gen takes the next port: pick a lower one", le->rdv_port);
        le->rdv_port++;
        le->rdv_from = "MASTER_ADDR and MASTER_PORT + 1 (torchrun's store holds MASTER_PORT)";
    }
    return 0;
}

/* ---------------------------------------------------------------- all of them */

void env_defaults(Env *env) {
    memset(env, 0, sizeof *env);
    env->lock_timeout = ENV_LOCK_TIMEOUT_DEFAULT;
    env->nccl_timeout = ENV_NCCL_TIMEOUT_DEFAULT;
    env->join_timeout = ENV_NCCL_TIMEOUT_DEFAULT;
    env->comm_overlap = 1;
    env->tmpdir = "/tmp";
    env->launch.world = 1;
    env->launch.how = "none";
}

const Env *env_or_defaults(const Env *env) {
    static Env defaults;
    if (env) return env;
    if (!defaults.launch.how) env_defaults(&defaults);
    return &defaults;
}

int env_read(Env *env, Err *err) {
    env_defaults(env);
    env->cuda_home = value("CUDA_HOME");
    env->nvrtc_library = value("GPT2GEN_NVRTC_LIBRARY");
    env->cache = value("GPT2GEN_CACHE");
    env->templates = value("GPT2GEN_TEMPLATES");
    env->tune_db = value("GPT2GEN_TUNE_DB");
    env->tune_env = value("GPT2GEN_TUNE_ENV");
    env->cudnn_library = value("GPT2GEN_CUDNN_LIBRARY");
    env->nccl_library = value("GPT2GEN_NCCL_LIBRARY");
    env->nccl_id_file = value("GPT2GEN_NCCL_ID_FILE");
    env->nccl_comm_id = value("NCCL_COMM_ID");
    env->test_overflow = value("GPT2GEN_TEST_OVERFLOW");
    if (value("TMPDIR")) env->tmpdir = value("TMPDIR");
    if (seconds("GPT2GEN_LOCK_TIMEOUT", ENV_LOCK_TIMEOUT_DEFAULT, &env->lock_timeout, err) ||
        seconds("GPT2GEN_NCCL_TIMEOUT", ENV_NCCL_TIMEOUT_DEFAULT, &env->nccl_timeout, err) ||
        boolean("GPT2GEN_SYNC", 0, &env->sync, err) || boolean("GPT2GEN_PROFILE", 0, &env->profile, err) ||
        boolean("GPT2GEN_QUEUE_PROFILE", 0, &env->queue_profile, err) ||
        boolean("GPT2GEN_CUDNN_DEBUG", 0, &env->cudnn_debug, err) ||
        boolean("GPT2GEN_COMM_OVERLAP", 1, &env->comm_overlap, err) ||
        boolean("GPT2GEN_CPU_PROCESSES", 0, &env->cpu_processes, err) ||
        boolean("GPT2GEN_GPU_SHARED", 0, &env->gpu_shared, err) ||
        seconds("GPT2GEN_JOIN_TIMEOUT", env->nccl_timeout, &env->join_timeout, err))
        return -1;
    return launch_read(&env->launch, err) || rendezvous_read(&env->launch, err) ? -1 : 0;
}
