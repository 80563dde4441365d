/* launch_env: what the tests of launching ranks share: the launcher's part of the environment as gpt2gen reads it,
   and the launchers' variables saved, cleared and put back around a test. */
#ifndef GPT2GEN_TEST_LAUNCH_ENV_H
#define GPT2GEN_TEST_LAUNCH_ENV_H
#include "common/env.h"
#include "common/files.h"
#include <stdlib.h>

/* the launcher's part of the environment, read as gpt2gen reads it (common/env.h) */
static inline int launch_env(LaunchEnv *le, Err *err) {
    Env e;
    int rc = env_read(&e, err);
    *le = e.launch;
    return rc;
}

static const char *env_names[] = {
    "GPT2GEN_RANK", "GPT2GEN_WORLD", "GPT2GEN_LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_KVSNAME",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID", "SLURM_STEP_ID", "GPT2GEN_NCCL_ID_FILE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GPT2GEN_RENDEZVOUS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE", "GROUP_RANK", "LOCAL_WORLD_SIZE", "SLURM_RESTART_COUNT",
};
enum { N_ENV = sizeof env_names / sizeof env_names[0] };
static char *env_saved[N_ENV];

static inline void env_clear(void) {
    for (int i = 0; i < N_ENV; i++) {
        const char *v = getenv(env_names[i]);
        env_saved[i] = v ? xstrdup(v) : NULL;
        unsetenv(env_names[i]);
    }
}

static inline void env_restore(void) {
    for (int i = 0; i < N_ENV; i++) {
        if (env_saved[i]) setenv(env_names[i], env_saved[i], 1);
        else unsetenv(env_names[i]);
        free(env_saved[i]);
        env_saved[i] = NULL;
    }
}

static inline void env_unset_all(void) {
    for (int i = 0; i < N_ENV; i++) unsetenv(env_names[i]);
}

static inline void set3(const char *a, const char *av, const char *b, const char *bv, const char *c, const char *cv) {
    setenv(a, av, 1); setenv(b, bv, 1); setenv(c, cv, 1);
}
#endif
