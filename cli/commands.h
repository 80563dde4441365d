/* commands: the gpt2gen command line, one file per command (cli/<command>.c), and what they share
   (cli/args.c): the options of the config commands, loading the config and making the plan.
   Every command returns its exit code: 0 ok, 1 failure, 2 bad usage or bad config. */
#ifndef GPT2GEN_COMMANDS_H
#define GPT2GEN_COMMANDS_H
#include "gen/config.h"
#include "gen/plan.h"
#include "gen/tune_db.h"

int cmd_build(int argc, char **argv);     /* argv[0] is the command's name */
int cmd_train(int argc, char **argv);
int cmd_test(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_tune(int argc, char **argv);

#define ARGS_MAX_SETS 64     /* --set options (and --resume) on one command line */
#define ARGS_MAX_JOBS 1024   /* -j */
#define ARGS_MAX_GPUS 256    /* --gpus: processes one node starts (runtime/ranks/launch.h) */
typedef struct {
    const char *backend;
    const char *config;
    const char *arch;
    const char *sets[ARGS_MAX_SETS];
    int n_sets;
    int jobs;
    int quiet;
    int no_tune_db;      /* --no-tune-db: the default variants, whatever the tuning database holds */
    int untuned;         /* gpt2gen tune: the plan without the database, silently (it is the baseline) */
    int help;
    int gpus;            /* --gpus N (0: not given); it sets train.num_gpus = N */
    char gpus_set[32];   /* that --set */
    const Env *env;      /* the environment (common/env.h), as args_use_env gave it */
} Args;

/* The environment every Args carries (read once by main). */
void args_use_env(const Env *env);

/* Parses the options shared by the config commands. Returns 0, or 2 after printing a usage error. */
int args_parse(int argc, char **argv, Args *a, const char *cmd);
/* Loads the config and makes the plan for the arch cuda_pick_arch chooses (args_plan). Errors here are the
   user's input: the message is printed and the result is 2. */
int args_load_and_plan(const Args *a, Config *cfg, Plan *plan);
/* The plan of a config already loaded, then the tuning database applied (unless untuned); 2 as above. */
int args_plan(const Args *a, Config *cfg, Plan *plan);
/* Applies the tuning database (gen/tune_db.h) to plan, unless --no-tune-db, and says so in one line (unless -q;
   and not where there is no GPU and no database); a stale or corrupt database is reported and ignored. A database choice of attention path sets cfg->attention
   (for attention = "auto" only). */
void args_tune_db(const Args *a, Config *cfg, Plan *plan);
/* args_tune_db keys the database with this machine as given (probed by a child process) instead of probing it. */
void args_use_tune_env(const TuneEnv *env, const char *cublaslt);
/* parse, load, plan, generate and compile; usage is printed for --help (*done set, returns 0). */
int args_build(int argc, char **argv, const char *cmd, const char *usage, Config *cfg, Plan *plan, int *done);
#endif
