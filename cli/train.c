/* gpt2gen train: build, then train on the CUDA backend (or the CPU one). */
#include "cli/commands.h"
#include "gen/build.h"
#include "common/files.h"
#include "runtime/gpu.h"
#include "runtime/ranks/comm_socket.h"
#include "runtime/ranks/launch.h"
#include "runtime/train/rundir.h"
#include "runtime/train/train.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *TRAIN_USAGE =
    "usage: gpt2gen train CONFIG.lua [--backend auto|cpu|cuda] [--gpus N] [--set KEY=VALUE]... [--arch sm_XX]\n"
    "                     [--resume|--fresh|--again] [-q]\n"
    "       gpt2gen CONFIG.lua [options]\n"
    "\n"
    "Builds the kernels (as `gpt2gen build`) and trains the model the config describes: gradient accumulation\n"
    "to train.total_batch_size, the LR schedule, validation every eval.val_every steps, samples every\n"
    "eval.sample_every steps, checkpoints every checkpoint.every steps and at the end, into checkpoint.dir\n"
    "(default runs/<name>/), with metrics.jsonl (one JSON object per line) beside them.\n"
    "\n"
    "options:\n"
    "  --backend B       auto (default: CUDA where there is a GPU, else the CPU backend), cpu or cuda\n"
    "  --gpus N          train on N GPUs of this machine, a process each (= --set train.num_gpus=N): data\n"
    "                    parallel over NCCL, ZeRO-1 by train.zero_stage; on the CPU backend, N ranks are\n"
    "                    emulated in one process\n"
    "  --set KEY=VALUE   override a config value, e.g. --set train.steps=100 (repeatable)\n"
    "  --resume          continue from the newest complete, valid checkpoint in checkpoint.dir\n"
    "                    (= --set checkpoint.resume=true); a finished run says so and exits 0. Without\n"
    "                    --resume or --fresh, a checkpoint.dir that holds checkpoints is refused (the\n"
    "                    message says what it holds), and so is one another run is using\n"
    "  --fresh           start over: first remove the earlier run's checkpoints, metrics.jsonl and plot.svg\n"
    "                    from checkpoint.dir (nothing else there), and say so\n"
    "  --again           run the config again (tools/quickstart.sh): continue the run in checkpoint.dir if it\n"
    "                    is unfinished (as --resume), start it over if it is finished (as --fresh); says which\n"
    "  --arch sm_XX      target arch for the kernels\n"
    "  --no-tune-db      ignore the tuning database (build/tune-db.txt, made by `gpt2gen tune`)\n"
    "  -q                no per-step progress lines\n"
    "\n"
    "Ctrl-C stops after the current step and saves a checkpoint first. A run that fails before its first step\n"
    "leaves no run folder behind (when it made the folder). data.tokenizer must name a tokenizer file where\n"
    "samples are on (eval.sample_every > 0), or be \"none\": samples then print as token ids.\n"
    "\n"
    "Several nodes: start the same command under torchrun, mpirun or srun, one process per GPU; the rank and\n"
    "world size come from the launcher (train.num_gpus follows the world size). Rank 0 hands the others NCCL's\n"
    "id over TCP where MASTER_ADDR and MASTER_PORT (or GPT2GEN_RENDEZVOUS=tcp://HOST:PORT) are set, else\n"
    "through a file in checkpoint.dir on a file system every node shares (or GPT2GEN_NCCL_ID_FILE).\n"
    "GPT2GEN_JOIN_TIMEOUT bounds the join, GPT2GEN_NCCL_TIMEOUT (seconds, default 600) every later wait.\n";

/* Runs ask(arg, answer) in a child process and reads its n bytes of answer back: what the launcher's parent learns of
   the GPUs, it asks this way, as it must not start the CUDA driver itself before it forks (a child of a process that
   has cannot use CUDA). 0, or -1 where no whole answer came. */
static int ask_child(void (*ask)(void *arg, void *answer), void *arg, void *answer, size_t n) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { close(fd[0]); close(fd[1]); return -1; }
    if (pid == 0) {
        close(fd[0]);
        ask(arg, answer);
        _exit(write(fd[1], answer, n) == (ssize_t)n ? 0 : 1);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t k;
    while (got < n && (k = read(fd[0], (char *)answer + got, n - got)) > 0) got += (size_t)k;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return got == n ? 0 : -1;
}

static void ask_gpus(void *env, void *answer) { cuda_probe(answer, env); }

static int probe_gpus(CudaProbe *p, const Env *env, Err *err) {
    if (ask_child(ask_gpus, (void *)env, p, sizeof *p))
        return err_set(err, "could not ask for the GPUs (the probe process failed)");
    if (p->count < 1) return err_set(err, "%s", p->why[0] ? p->why : "no GPU");
    return 0;
}

/* The plans' facts in the launcher's parent (PlanFacts, gen/plan.h): GPU 0's answer for a plan, from a child process
   (ask_child) */
typedef struct { const Env *env; const Plan *plan; } FactsQuestion;
typedef struct { int serves; char why[PLAN_WHY_MAX]; } FactsAnswer;

static void ask_cudnn(void *arg, void *answer) {
    const FactsQuestion *q = arg;
    FactsAnswer *a = answer;
    CudaFacts cf;
    const PlanFacts *f = cuda_plan_facts(&cf, q->env, 0);
    a->why[0] = 0;
    a->serves = f->cudnn_attention(f->ctx, q->plan, a->why, sizeof a->why) == 1;
}

static int cudnn_in_child(void *env, const Plan *plan, char *why, size_t n) {
    FactsQuestion q = {env, plan};
    FactsAnswer a;
    memset(&a, 0, sizeof a);
    if (ask_child(ask_cudnn, &q, &a, sizeof a)) {
        snprintf(why, n, "cuDNN's attention could not be asked about (the probe process failed)");
        return 0;
    }
    snprintf(why, n, "%s", a.why);
    return a.serves;
}

/* This machine has n GPUs or more, asked through probe_gpus (where p has not been filled yet: p->count < 0); what
   names the request in the message ("--gpus 2", "train.num_gpus = 2"). 0, or 1 after the one message. */
static int have_gpus(CudaProbe *p, int n, const char *what, const Env *env) {
    Err err;
    if (p->count < 0 && probe_gpus(p, env, &err)) {
        p->count = 0;
        fprintf(stderr, "gpt2gen: %s: %s\n", what, err.msg);
        return EXIT_FAIL;
    }
    if (p->count < n) {
        fprintf(stderr, "gpt2gen: %s, but this machine has %d GPU%s: ask for at most %d, or start more processes on other "
                "nodes with mpirun or srun\n", what, p->count, p->count == 1 ? "" : "s", p->count);
        return EXIT_FAIL;
    }
    return 0;
}

/* The world's id: ctx is the Env on the CPU backend (a socket's path under TMPDIR), NULL on the GPU (NCCL's). */
static int make_id(void *id, size_t len, void *ctx, Err *err) {
    return ctx ? comm_socket_id(id, len, ((const Env *)ctx)->tmpdir, err) : nccl_unique_id(id, err);
}

/* The plans of the run (train_plan_request), for arch (NULL: as args_plan picks it). */
static int train_plans(const Args *a, const Config *cfg, const char *arch, PlanSet *ps) {
    PlanRequest req = train_plan_request(&cfg->run);
    return arch ? args_make_plans(a, cfg, arch, &req, ps) : args_plan(a, cfg, &req, ps);
}

/* `--gpus N` (or train.num_gpus = N) on the GPU: builds once, then a process per GPU (runtime/ranks/launch.h). With
   backend "cpu" (GPT2GEN_CPU_PROCESSES=1: a test hook, the multi-process loop without GPUs), a process per rank on
   the CPU backend, joined through runtime/ranks/comm_socket.h instead of the ranks emulated in one process. */
static int train_local(Args *a, Config *cfg, PlanSet *ps, const char *backend, CudaProbe *p, int fresh) {
    Err err;
    int n = cfg->run.train.num_gpus, cpu = !strcmp(backend, "cpu"), rc;
    if (!cpu) {
        char what[64];
        snprintf(what, sizeof what, "train.num_gpus = %d", n);
        if ((rc = have_gpus(p, n, what, a->env))) return rc;
        if (!a->arch) a->arch = p->arch;   /* GPU 0's, as the one-process path does */
        if (p->key_ok) { a->machine = &p->key; a->machine_cublaslt = p->cublaslt; }
    }
    PlanFacts facts = {cudnn_in_child, (void *)a->env};   /* the callback reads the Env only */
    if (!cpu) a->facts = &facts;
    if ((rc = train_plans(a, cfg, NULL, ps))) return rc;
    if (!cpu && (nccl_load(a->env, NULL, &err) || args_build_plans(a, ps, a->quiet, &err))) {
        fprintf(stderr, "gpt2gen: %s\n", err.msg);
        return EXIT_FAIL;
    }
    int rank;
    static unsigned char id[NCCL_ID_BYTES];
    rc = launch_local(n, 10.0, NCCL_ID_BYTES, make_id, cpu ? (void *)a->env : NULL, &rank, id, &err);
    if (rc == -1) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    if (rc != LAUNCH_CHILD) return rc;
    TrainOptions opt = {cpu ? "cpu" : "cuda", a->quiet, rank, n, rank, id, a->env, NULL, fresh};
    return train_run(&cfg->run, ps, &opt);
}

/* The id through a file in checkpoint.dir (runtime/ranks/launch.h): rank 0 builds, writes it and waits for every
   rank's answer; the others wait for it and then build (from the kernel cache rank 0 filled). path: the id file. */
static int join_id_file(Args *a, const LaunchEnv *le, Config *cfg, PlanSet *ps, int cpu, unsigned char *id, char *path,
                        Err *err) {
    double timeout = a->env->join_timeout;
    if (mkdir_p(cfg->run.checkpoint.dir, err) ||
        launch_id_file_path(le, a->env->nccl_id_file, cfg->run.checkpoint.dir, path, RUNDIR_PATH_MAX, err))
        return -1;
    if (le->rank != 0)
        return launch_share_id_file(path, le, id, NCCL_ID_BYTES, timeout, err) || (!cpu && args_build_plans(a, ps, 1, err)) ? -1 : 0;
    char note[RUNDIR_PATH_MAX + 128];
    /* a stale id file goes first: the other ranks would wait on it while rank 0 builds */
    int rc = launch_id_file_claim(path, note, sizeof note, err);
    if (!rc && note[0]) fprintf(stderr, "gpt2gen: rank 0: note: %s\n", note);
    rc = rc || (!cpu && args_build_plans(a, ps, a->quiet, err)) || make_id(id, NCCL_ID_BYTES, cpu ? (void *)a->env : NULL, err) ||
         launch_share_id_file(path, le, id, NCCL_ID_BYTES, timeout, err) ||
         launch_id_file_answers(path, le->world, timeout, err);   /* a rank that refused it: stop now */
    if (rc) launch_id_file_remove(path);   /* a refused or timed-out join leaves no id file */
    return rc ? -1 : 0;
}

/* The id over TCP (runtime/ranks/launch.h): rank 0 takes its port first (a port in use is said before anything is
   built), builds, and hands the id to every rank that joins; the others build once they have it. On the CPU backend
   the id is rank 0's address for the ranks' own connections (comm_socket_tcp_id), at the rendezvous's port. */
static int join_tcp(Args *a, const LaunchEnv *le, PlanSet *ps, int cpu, unsigned char *id, Err *err) {
    double timeout = a->env->join_timeout;
    if (le->rank != 0)
        return launch_share_id_tcp(le, -1, id, NCCL_ID_BYTES, timeout, err) || (!cpu && args_build_plans(a, ps, 1, err)) ? -1 : 0;
    int lfd = launch_tcp_listen(le, err);
    if (lfd < 0) return -1;
    if ((!cpu && args_build_plans(a, ps, a->quiet, err)) ||
        (cpu ? comm_socket_tcp_id(id, NCCL_ID_BYTES, le->rdv_host, le->rdv_port, err) : nccl_unique_id(id, err))) {
        close(lfd);
        return -1;
    }
    return launch_share_id_tcp(le, lfd, id, NCCL_ID_BYTES, timeout, err);
}

/* One process of several that a launcher started (mpirun, srun, torchrun, a PyTorchJob): the ranks meet over TCP where
   there is a rendezvous (le->rdv_port), else through NCCL's own bootstrap where NCCL_COMM_ID is set (every rank
   makes the same id from it, as NCCL documents), else through the id file. */
static int train_launched(Args *a, const LaunchEnv *le, Config *cfg, PlanSet *ps, const char *backend,
                          int fresh) {
    Err err;
    int cpu = !strcmp(backend, "cpu");
    CudaFacts facts;   /* this rank's GPU: no process forks here */
    if (!cpu) a->facts = cuda_plan_facts(&facts, a->env, le->local_rank);
    int rc = train_plans(a, cfg, NULL, ps);
    if (rc) return rc;
    char path[RUNDIR_PATH_MAX] = "";
    static unsigned char id[NCCL_ID_BYTES];
    if (!cpu && nccl_load(a->env, NULL, &err)) rc = -1;
    else if (le->rdv_port) rc = join_tcp(a, le, ps, cpu, id, &err);
    else if (!cpu && a->env->nccl_comm_id)
        rc = nccl_unique_id(id, &err) || args_build_plans(a, ps, le->rank != 0 || a->quiet, &err) ? -1 : 0;
    else rc = join_id_file(a, le, cfg, ps, cpu, id, path, &err);
    if (rc) {
        fprintf(stderr, "gpt2gen: rank %d: %s\n", le->rank, err.msg);
        return EXIT_FAIL;
    }
    /* rank 0 removes the id file once every rank has joined (train_run), before anything can _exit */
    const char *id_file = le->rank == 0 && path[0] ? path : NULL;
    TrainOptions opt = {cpu ? "cpu" : "cuda", a->quiet, le->rank, le->world, le->local_rank, id, a->env, id_file, fresh};
    rc = train_run(&cfg->run, ps, &opt);
    if (id_file) launch_id_file_remove(id_file);
    return rc;
}

/* --fresh and --again, train's own options, out of argv before the options the config commands share are parsed
   (an option's value, as in `--set --fresh`, stays where it is). */
static void train_options(int *argc, char **argv, int *fresh, int *again) {
    int k = 1;
    *fresh = *again = 0;
    for (int i = 1; i < *argc; i++) {
        const char *s = argv[i];
        int takes_value = !strcmp(s, "--set") || !strcmp(s, "--arch") || !strcmp(s, "-j") || !strcmp(s, "--backend") ||
                          !strcmp(s, "--gpus");
        if (!strcmp(s, "--fresh")) *fresh = 1;
        else if (!strcmp(s, "--again")) *again = 1;
        else {
            argv[k++] = argv[i];
            if (takes_value && i + 1 < *argc) argv[k++] = argv[++i];
        }
    }
    *argc = k;
}

/* What checkpoint.dir holds of an earlier run decides, before anything is built: without --resume or --fresh, a
   folder with checkpoints is refused, in words (what is there, what to pass); --again continues an unfinished run
   (as --resume) and starts a finished one over (as --fresh), and says which. The run folder's lock and its checks
   come later (runtime/train/rundir.h), and hold whatever happens in between. */
static int check_run_dir(Config *cfg, int *fresh, int again) {
    if (*fresh && cfg->run.checkpoint.resume) {
        fprintf(stderr, "gpt2gen train: --fresh starts over and --resume (checkpoint.resume) continues: pass one of them\n");
        return EXIT_USAGE;
    }
    int newest, held = rundir_held(cfg->run.checkpoint.dir, &newest);
    if (!held || cfg->run.checkpoint.resume || *fresh) return 0;
    const char *dir = cfg->run.checkpoint.dir;
    char what[128];
    rundir_held_text(held, newest, cfg->run.train.steps, what, sizeof what);
    if (again && newest >= cfg->run.train.steps) {
        printf("%s holds a finished run (%s): starting over (--resume with a larger train.steps trains on instead)\n",
               err_show(dir), what);
        *fresh = 1;
    } else if (again) {
        printf("%s holds an unfinished run (%s): continuing it (--fresh starts over instead)\n", err_show(dir), what);
        cfg->run.checkpoint.resume = 1;
    } else {
        Err err;
        rundir_refuse(err_show(dir), held, newest, cfg->run.train.steps, &err);
        fprintf(stderr, "gpt2gen: %s\n", err.msg);
        return EXIT_FAIL;
    }
    return 0;
}

/* Started by mpirun or srun (or our own launcher, le->world > 1): the launcher's world is train.num_gpus, set as one
   more --set. 0, else the exit code of a usage error (printed). */
static int launcher_world(Args *a, const LaunchEnv *le, const char *backend, int cpu_processes, int again) {
    static char world_set[32];
    if (le->world > 1) {
        if (a->gpus && a->gpus != le->world) {
            fprintf(stderr, "gpt2gen: --gpus %d, but %s started %d processes: leave --gpus out under a launcher\n",
                    a->gpus, le->how, le->world);
            return EXIT_USAGE;
        }
        if (!strcmp(backend, "cpu") && !cpu_processes && !le->rdv_port) {   /* CPU ranks meet over TCP, or as a test hook */
            fprintf(stderr, "gpt2gen: %s started %d processes: several processes train on GPUs only (or on the CPU with a "
                    "TCP rendezvous: MASTER_ADDR and MASTER_PORT)\n", le->how, le->world);
            return EXIT_USAGE;
        }
        snprintf(world_set, sizeof world_set, "train.num_gpus=%d", le->world);
        if (a->n_sets == ARGS_MAX_SETS) { fprintf(stderr, "gpt2gen train: too many --set options\n"); return EXIT_USAGE; }
        a->sets[a->n_sets++] = world_set;
    }
    if (again && le->world > 1) {   /* each process would decide on its own, while rank 0 removes files */
        fprintf(stderr, "gpt2gen train: --again: under %s, pass --resume or --fresh\n", le->how);
        return EXIT_USAGE;
    }
    return 0;
}

/* One process trains: on the GPU or the CPU (--backend, or auto: the GPU where there is one), one rank or several
   ranks emulated on the CPU. */
static int train_here(Args *a, Config *cfg, PlanSet *ps, const char *backend, int fresh) {
    Err err;
    int rc;
    char arch[16];
    /* several ranks in one process run only as the CPU emulation, asked for by name */
    /* a config limit, as the others are: exit code 2 */
    if (train_check_ranks(&cfg->run, cfg->path, backend, 1, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    int gpu = strcmp(backend, "cpu") && cuda_device_arch(0, arch, &err) == 0;
    if (!strcmp(backend, "auto")) {
        if (gpu) backend = "cuda";
        else if (cfg->run.attention == ATTN_CUDNN) {   /* asked for by name: no quiet fallback to the CPU */
            fprintf(stderr, "gpt2gen: %s: attention = \"cudnn\" needs the CUDA backend: %s\n", cfg->path, err.msg);
            return EXIT_FAIL;
        } else { printf("%s: training on the CPU backend (fp32)\n", err.msg); backend = "cpu"; }
    }
    if (!strcmp(backend, "cuda")) {   /* asked for by name: no GPU is one message, before anything is built */
        Err why;
        if (cuda_backend_built(&why)) { fprintf(stderr, "gpt2gen: --backend cuda: %s\n", why.msg); return EXIT_FAIL; }
        if (!gpu) { fprintf(stderr, "gpt2gen: --backend cuda: %s\n", err.msg); return EXIT_FAIL; }
    }
    a->no_arch_note = !gpu;   /* the CPU backend runs no kernels: an arch would say nothing */
    CudaFacts facts;
    a->facts = backend_plan_facts(&facts, backend, a->env, 0);
    if ((rc = train_plans(a, cfg, NULL, ps))) return rc;
    if (!strcmp(backend, "cuda")) {
        /* the kernels must be for this GPU: a config's or --arch's other target is rebuilt for it */
        if (gpu && strcmp(arch, ps->train->arch)) {
            printf("note: building for GPU 0's %s instead of %s\n", arch, ps->train->arch);
            planset_free(ps);
            if ((rc = train_plans(a, cfg, arch, ps))) return rc;
        }
        if (args_build_plans(a, ps, a->quiet, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    }
    TrainOptions opt = {backend, a->quiet, 0, 1, 0, NULL, a->env, NULL, fresh};
    return train_run(&cfg->run, ps, &opt);
}

int cmd_train(int argc, char **argv, const Env *env) {
    /* a closed standard output (`| head`, a dead tee or ssh session) fails its writes instead of killing the run
       (runtime/train/train.c gives it up and trains on); the ranks' processes inherit this */
    signal(SIGPIPE, SIG_IGN);
    /* a line at a time, so that a log of both streams (2>&1 | tee) has the messages in the order they were made */
    setvbuf(stdout, NULL, _IOLBF, 0);
    Args a;
    int fresh, again;
    train_options(&argc, argv, &fresh, &again);
    int rc = args_parse(argc, argv, env, &a, "train");
    if (rc) return rc;
    if (a.help) { fputs(TRAIN_USAGE, stdout); return 0; }
    const char *backend = a.backend ? a.backend : "auto";
    if (strcmp(backend, "auto") && strcmp(backend, "cpu") && strcmp(backend, "cuda")) {
        fprintf(stderr, "gpt2gen train: --backend: expected auto, cpu or cuda, got '%s'\n", err_show(backend));
        return EXIT_USAGE;
    }
    static Config cfg;
    static PlanSet ps;   /* the training step, the decode plan that samples, eval.hellaswag's */
    Err err;
    /* started by mpirun or srun (or our own launcher): the launcher's world is train.num_gpus */
    const LaunchEnv le = a.env->launch;
    int cpu_processes = a.env->cpu_processes;
    if ((rc = launcher_world(&a, &le, backend, cpu_processes, again))) return rc;
    /* --gpus N asks for GPUs: whether there are N is the first thing to say (the config's checks depend on N) */
    static CudaProbe probe = {.count = -1};
    int processes = strcmp(backend, "cpu") || cpu_processes;   /* several ranks: a process each */
    if (a.gpus > 1 && le.world <= 1 && strcmp(backend, "cpu")) {
        char what[32];
        snprintf(what, sizeof what, "--gpus %d", a.gpus);
        if ((rc = have_gpus(&probe, a.gpus, what, a.env))) return rc;
    }
    /* the config, once; no CUDA in this process yet: several GPUs on one machine fork first, then make the plan */
    if (config_load(&cfg, a.config, a.sets, a.n_sets, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_USAGE; }
    /* what the run needs from files, before anything is built: the tokenizer of its samples, the run folder */
    if (train_check_tokenizer(&cfg.run, cfg.path, &err)) { fprintf(stderr, "gpt2gen: %s\n", err.msg); return EXIT_FAIL; }
    if ((rc = check_run_dir(&cfg, &fresh, again))) return rc;
    if (le.world > 1) rc = train_launched(&a, &le, &cfg, &ps, !strcmp(backend, "cpu") ? "cpu" : "cuda", fresh);
    else if (cfg.run.train.num_gpus > 1 && processes)
        rc = train_local(&a, &cfg, &ps, !strcmp(backend, "cpu") ? "cpu" : "cuda", &probe, fresh);
    else rc = train_here(&a, &cfg, &ps, backend, fresh);
    planset_free(&ps);
    return rc;
}

