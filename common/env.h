/* env: every environment variable gpt2gen reads, read and checked once at start (cli/main.c) into one Env that
 * is passed down (the build's, the backend's and the training loop's options); nothing else calls getenv.
 * docs/environment.md lists them with what each accepts. */
#ifndef GPT2GEN_ENV_H
#define GPT2GEN_ENV_H
#include "common/err.h"

/* Where this process's rank comes from (runtime/ranks/launch.h): the launcher's variables. */
typedef struct {
    int rank, world, local_rank;   /* local_rank: this node's GPU ordinal for this rank */
    const char *how;               /* "none" (a single process), "gpt2gen" (launch_local), "mpirun", "srun", "torchrun" */
    char job[128];                 /* the launcher's job id (it names the id file), "" if none */
    int attempt;                   /* the launcher's restart count (TORCHELASTIC_RESTART_COUNT, SLURM_RESTART_COUNT), 0 */
    /* The TCP rendezvous (runtime/ranks/launch.h), where rank 0 listens: port 0 when there is none (the id file) */
    char rdv_host[256];
    int rdv_port;
    const char *rdv_from;          /* the variables it came from, for messages */
} LaunchEnv;

#define ENV_LOCK_TIMEOUT_DEFAULT 600.0   /* seconds */
#define ENV_NCCL_TIMEOUT_DEFAULT 600.0   /* seconds */
#define ENV_PORT_MAX 65535

typedef struct {
    /* the build (gen/) */
    const char *cuda_home;       /* CUDA_HOME: the toolkit NVRTC compiles against (default: the one gpt2gen was built with) */
    const char *nvrtc_library;   /* GPT2GEN_NVRTC_LIBRARY (default: libnvrtc in CUDA_HOME, else the loader's; "none" hides it) */
    const char *cache;           /* GPT2GEN_CACHE: the CUBIN cache folder (default build/cache) */
    const char *templates;       /* GPT2GEN_TEMPLATES: read the templates from this folder (NULL: the built-in ones) */
    const char *tune_db;         /* GPT2GEN_TUNE_DB: the tuning database (default build/tune-db.txt) */
    const char *tune_env;        /* GPT2GEN_TUNE_ENV: test hook naming the machine's key fields (NULL: none) */
    double lock_timeout;         /* GPT2GEN_LOCK_TIMEOUT: seconds to wait for another build of the name */
    /* the CUDA backend (runtime/cuda/) */
    int sync;                    /* GPT2GEN_SYNC: synchronize after every launch */
    int profile;                 /* GPT2GEN_PROFILE: the per-op profile */
    int queue_profile;           /* GPT2GEN_QUEUE_PROFILE: how far the host runs ahead of the GPU in a micro-step */
    const char *cudnn_library;   /* GPT2GEN_CUDNN_LIBRARY (default libcudnn.so.9; "none" hides cuDNN) */
    int cudnn_debug;             /* GPT2GEN_CUDNN_DEBUG: cuDNN's engine choice on stderr */
    const char *nccl_library;    /* GPT2GEN_NCCL_LIBRARY (default libnccl.so.2) */
    double nccl_timeout;         /* GPT2GEN_NCCL_TIMEOUT: seconds any wait on the other ranks may take */
    const char *nccl_id_file;    /* GPT2GEN_NCCL_ID_FILE (NULL: <checkpoint.dir>/.nccl-id-<job>) */
    const char *nccl_comm_id;    /* NCCL_COMM_ID: NCCL's own bootstrap address (NULL: none): every rank makes the id */
    double join_timeout;         /* GPT2GEN_JOIN_TIMEOUT: seconds the ranks' join may take (default GPT2GEN_NCCL_TIMEOUT) */
    /* training (runtime/train/, cli/train.c) */
    const char *test_overflow;   /* GPT2GEN_TEST_OVERFLOW: test hook, steps whose backward overflows (NULL: none) */
    int comm_overlap;            /* GPT2GEN_COMM_OVERLAP: the gradients' averaging overlaps the backward (default 1) */
    int cpu_processes;           /* GPT2GEN_CPU_PROCESSES: ranks on the CPU backend as processes (default 0) */
    /* the GPU tests (tune/step_test.c) */
    int gpu_shared;              /* GPT2GEN_GPU_SHARED: test hook, other processes share the GPU: no check of its free memory */
    const char *tmpdir;          /* TMPDIR: where the CPU ranks' socket goes (default /tmp) */
    LaunchEnv launch;            /* the launcher's variables */
} Env;

/* Reads every variable from the environment and checks it against what it accepts; -1 and err naming the
 * variable, its value and what it accepts (for launchers that disagree, both variables). An empty value is
 * the default. The launchers, the first whose rank variable is set giving the rank:
 *   GPT2GEN_RANK, GPT2GEN_WORLD, GPT2GEN_LOCAL_RANK              "gpt2gen" (launch_local's children), no job
 *   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK                      "mpirun" (Open MPI); job OMPI_MCA_ess_base_jobid
 *                                                                 or PMIX_NAMESPACE
 *   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID                           "mpirun" (MPICH, Intel MPI); job PMI_KVSNAME or
 *                                                                 PMIX_NAMESPACE, else none
 *   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, with SLURM_STEP_ID "srun"; job SLURM_JOB_ID.SLURM_STEP_ID
 *   RANK, WORLD_SIZE, LOCAL_RANK (optional: 0)                    "torchrun" (also Kubeflow's PyTorchJob, which sets no
 *                                                                 LOCAL_RANK); job TORCHELASTIC_RUN_ID; RANK counts
 *                                                                 only with WORLD_SIZE
 * (a batch script outside srun has SLURM_PROCID but no step id: it is one process). None of them: rank 0 of a
 * world of 1 on GPU 0, how "none". Every launcher that is set must be complete (rank, world and local rank
 * integers, world >= 1, rank in [0, world), local rank >= 0) and agree with the others on the rank and world.
 * torchrun inside srun or mpirun (one torchrun per task, started with GROUP_RANK and LOCAL_WORLD_SIZE): torchrun's
 * variables give the rank, and the outer launcher's world times LOCAL_WORLD_SIZE must be WORLD_SIZE.
 * The TCP rendezvous, for a world of several: GPT2GEN_RENDEZVOUS=tcp://HOST:PORT, else MASTER_ADDR and MASTER_PORT
 * (both or neither; under torchrun's agent store, TORCHELASTIC_USE_AGENT_STORE=True, torchrun holds MASTER_PORT on
 * rank 0's node and gpt2gen takes the port after it, MASTER_PORT + 1). */
int env_read(Env *env, Err *err);
/* The defaults, as if no variable were set. */
void env_defaults(Env *env);
/* env, or the defaults where env is NULL (tests that set nothing pass NULL). */
const Env *env_or_defaults(const Env *env);
#endif
