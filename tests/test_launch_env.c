/* Launching ranks, the environment (common/env.h, runtime/ranks/launch.h): the rank from each launcher's
   variables, which launcher wins, and the values that are refused. The launcher itself and the id file:
   test_launch.c. */
#include "runtime/ranks/launch.h"
#include "common/clock.h"
#include "common/files.h"
#include "tests/check.h"
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/launch_env.h"

static void test_env_none(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(le.rank == 0 && le.world == 1 && le.local_rank == 0 && !strcmp(le.how, "none") && !le.job[0],
          "rank %d world %d local %d how %s job '%s'", le.rank, le.world, le.local_rank, le.how, le.job);
    /* a batch script: SLURM_PROCID without a step is one process */
    set3("SLURM_PROCID", "0", "SLURM_NTASKS", "8", "SLURM_LOCALID", "0");
    setenv("SLURM_JOB_ID", "77", 1);
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(le.world == 1 && !strcmp(le.how, "none"), "sbatch without srun: world %d how %s", le.world, le.how);
    env_restore();
}

static void test_env_launchers(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    struct { const char *vars[3], *vals[3], *job_var, *job_val, *job2_var, *job2_val, *how, *job; int rank, world, local; } cases[] = {
        {{"GPT2GEN_RANK", "GPT2GEN_WORLD", "GPT2GEN_LOCAL_RANK"}, {"2", "4", "2"}, NULL, NULL, NULL, NULL, "gpt2gen", "", 2, 4, 2},
        {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}, {"5", "16", "1"},
         "OMPI_MCA_ess_base_jobid", "3141", "PMIX_NAMESPACE", "ns", "mpirun", "3141", 5, 16, 1},
        {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"}, {"0", "2", "0"},
         "PMIX_NAMESPACE", "prterun-host-123@1", NULL, NULL, "mpirun", "prterun-host-123@1", 0, 2, 0},
        {{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}, {"3", "8", "3"}, "PMI_KVSNAME", "kvs_42_0", NULL, NULL, "mpirun", "kvs_42_0", 3, 8, 3},
        {{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}, {"1", "2", "1"}, NULL, NULL, NULL, NULL, "mpirun", "", 1, 2, 1},
        {{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"}, {"9", "12", "1"}, "SLURM_JOB_ID", "123", "SLURM_STEP_ID", "4",
         "srun", "123.4", 9, 12, 1},
        {{"RANK", "WORLD_SIZE", "LOCAL_RANK"}, {"11", "16", "3"}, "TORCHELASTIC_RUN_ID", "run7", NULL, NULL, "torchrun", "run7", 11, 16, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        env_unset_all();
        for (int k = 0; k < 3; k++) setenv(cases[i].vars[k], cases[i].vals[k], 1);
        if (cases[i].job_var) setenv(cases[i].job_var, cases[i].job_val, 1);
        if (cases[i].job2_var) setenv(cases[i].job2_var, cases[i].job2_val, 1);
        CHECK_OK(launch_env(&le, &err), &err);
        CHECK(le.rank == cases[i].rank && le.world == cases[i].world && le.local_rank == cases[i].local &&
              !strcmp(le.how, cases[i].how) && !strcmp(le.job, cases[i].job),
              "case %zu (%s): rank %d world %d local %d how %s job '%s'", i, cases[i].vars[0], le.rank, le.world,
              le.local_rank, le.how, le.job);
    }
    env_restore();
}

/* The first launcher in the list wins: ours over Open MPI over MPICH over srun. */
/* launchers that are all set agree, and the first names the run; launchers that disagree are an error naming both */
static void test_env_precedence(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    set3("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "1");
    setenv("SLURM_STEP_ID", "0", 1);
    set3("PMI_RANK", "1", "PMI_SIZE", "2", "MPI_LOCALRANKID", "1");
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(!strcmp(le.how, "mpirun") && le.rank == 1 && le.world == 2, "MPICH over srun: %s rank %d", le.how, le.rank);
    set3("GPT2GEN_RANK", "1", "GPT2GEN_WORLD", "2", "GPT2GEN_LOCAL_RANK", "1");
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(!strcmp(le.how, "gpt2gen") && le.rank == 1 && !le.job[0], "ours over all: %s rank %d job '%s'", le.how, le.rank, le.job);
    set3("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "0");
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "GPT2GEN_RANK=1 and OMPI_COMM_WORLD_RANK=0 disagree"), "rank: %s", err.msg);
    set3("OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "4", "OMPI_COMM_WORLD_LOCAL_RANK", "1");
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "GPT2GEN_WORLD=2 and OMPI_COMM_WORLD_SIZE=4 disagree"), "world: %s", err.msg);
    env_restore();
}

static void test_env_bad_values(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    struct { const char *rank, *world, *local, *want; } cases[] = {
        {"x", "4", "0", "GPT2GEN_RANK=\"x\" is not an integer"},
        {"", "4", "0", "GPT2GEN_RANK=\"\" is not an integer"},
        {"1", "4 ", "0", "GPT2GEN_WORLD=\"4 \" is not an integer"},
        {"1", "99999999999", "0", "GPT2GEN_WORLD=\"99999999999\" is not an integer"},
        {"0", "0", "0", "GPT2GEN_WORLD=0"},
        {"4", "4", "0", "GPT2GEN_RANK=4"},
        {"-1", "4", "0", "GPT2GEN_RANK=-1"},
        {"1", "4", "-2", "GPT2GEN_LOCAL_RANK=-2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set3("GPT2GEN_RANK", cases[i].rank, "GPT2GEN_WORLD", cases[i].world, "GPT2GEN_LOCAL_RANK", cases[i].local);
        err.msg[0] = 0;
        CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, cases[i].want), "case %zu: wanted '%s', got '%s'", i,
              cases[i].want, err.msg);
    }
    env_unset_all();
    setenv("SLURM_PROCID", "0", 1); setenv("SLURM_STEP_ID", "0", 1); setenv("SLURM_LOCALID", "0", 1);
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "SLURM_NTASKS is not set"), "missing world: %s", err.msg);
    /* gpt2gen's own variables without the rank (issue 42: GPT2GEN_WORLD=0 alone was taken as no launcher) */
    env_unset_all();
    setenv("GPT2GEN_WORLD", "0", 1);
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "GPT2GEN_WORLD is set without GPT2GEN_RANK"), "world alone: %s", err.msg);
    env_unset_all();
    setenv("GPT2GEN_LOCAL_RANK", "1", 1);
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "GPT2GEN_LOCAL_RANK is set without GPT2GEN_RANK"), "local alone: %s", err.msg);
    env_restore();
}

/* torchrun's set (and Kubeflow's PyTorchJob's, without LOCAL_RANK), and the TCP rendezvous's address: read where
   there are several ranks, both variables or neither, GPT2GEN_RENDEZVOUS first, the port after torchrun's store */
static void test_env_torchrun(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    setenv("RANK", "3", 1);   /* RANK alone is not torchrun's */
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(!strcmp(le.how, "none") && le.world == 1, "RANK alone: %s world %d", le.how, le.world);
    setenv("WORLD_SIZE", "4", 1);   /* a PyTorchJob: one process per pod, local rank 0 */
    setenv("MASTER_ADDR", "trainer-master-0", 1); setenv("MASTER_PORT", "23456", 1);
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(!strcmp(le.how, "torchrun") && le.rank == 3 && le.world == 4 && le.local_rank == 0 && le.rdv_port == 23456 &&
          !strcmp(le.rdv_host, "trainer-master-0") && le.attempt == 0,
          "PyTorchJob: %s rank %d world %d local %d at %s:%d", le.how, le.rank, le.world, le.local_rank, le.rdv_host, le.rdv_port);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1); setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(le.rdv_port == 23457 && le.attempt == 2, "agent store: port %d attempt %d", le.rdv_port, le.attempt);
    setenv("GPT2GEN_RENDEZVOUS", "tcp://[::1]:40000", 1);
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(le.rdv_port == 40000 && !strcmp(le.rdv_host, "::1"), "GPT2GEN_RENDEZVOUS first: %s:%d", le.rdv_host, le.rdv_port);
    struct { const char *var, *val, *want; } bad[] = {
        {"GPT2GEN_RENDEZVOUS", "node:1", "GPT2GEN_RENDEZVOUS=\"node:1\": expected tcp://HOST:PORT"},
        {"GPT2GEN_RENDEZVOUS", "tcp://node:0", "GPT2GEN_RENDEZVOUS=\"tcp://node:0\": expected a TCP port, 1 to 65535"},
        {"GPT2GEN_RENDEZVOUS", "tcp://no de:5", "GPT2GEN_RENDEZVOUS=\"tcp://no de:5\": expected rank 0's host name"},
        {"MASTER_PORT", "70000", "MASTER_PORT=\"70000\": expected a TCP port, 1 to 65535"},
        {"MASTER_ADDR", "a/b", "MASTER_ADDR=\"a/b\": expected rank 0's host name or address"},
        {"LOCAL_RANK", "-1", "LOCAL_RANK=-1: the local rank must be at least 0"},
        {"TORCHELASTIC_RESTART_COUNT", "x", "TORCHELASTIC_RESTART_COUNT=\"x\" is not an integer"},
    };
    unsetenv("GPT2GEN_RENDEZVOUS");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *old = getenv(bad[i].var);
        char *keep = old ? xstrdup(old) : NULL;
        setenv(bad[i].var, bad[i].val, 1);
        err.msg[0] = 0;
        CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, bad[i].want), "case %zu: wanted '%s', got '%s'", i, bad[i].want, err.msg);
        if (keep) setenv(bad[i].var, keep, 1); else unsetenv(bad[i].var);
        free(keep);
    }
    unsetenv("MASTER_ADDR");
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "MASTER_PORT is set but MASTER_ADDR is not"), "half: %s", err.msg);
    unsetenv("MASTER_PORT");
    env_restore();
}

/* torchrun beside another launcher: the same processes agree; torchrun inside srun (one agent per task) checks the
   sizes: SLURM_NTASKS agents of LOCAL_WORLD_SIZE ranks are WORLD_SIZE */
static void test_env_torchrun_nested(void) {
    env_clear();
    LaunchEnv le;
    Err err;
    set3("RANK", "1", "WORLD_SIZE", "2", "LOCAL_RANK", "1");
    set3("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "0");
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "RANK=1 and OMPI_COMM_WORLD_RANK=0 disagree"), "same processes: %s", err.msg);
    env_unset_all();
    set3("RANK", "13", "WORLD_SIZE", "16", "LOCAL_RANK", "5");
    setenv("GROUP_RANK", "1", 1); setenv("LOCAL_WORLD_SIZE", "8", 1);
    set3("SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0");
    setenv("SLURM_STEP_ID", "0", 1); setenv("SLURM_JOB_ID", "9", 1);
    CHECK_OK(launch_env(&le, &err), &err);
    CHECK(!strcmp(le.how, "torchrun") && le.rank == 13 && le.world == 16 && le.local_rank == 5,
          "torchrun in srun: %s rank %d world %d local %d", le.how, le.rank, le.world, le.local_rank);
    setenv("SLURM_NTASKS", "3", 1);
    CHECK(launch_env(&le, &err) == -1 && strstr(err.msg, "SLURM_NTASKS=3 tasks of LOCAL_WORLD_SIZE=8 ranks each, but WORLD_SIZE=16"),
          "sizes: %s", err.msg);
    env_restore();
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_env_none);
    RUN(test_env_launchers);
    RUN(test_env_precedence);
    RUN(test_env_bad_values);
    RUN(test_env_torchrun);
    RUN(test_env_torchrun_nested);
    return check_summary();
}
