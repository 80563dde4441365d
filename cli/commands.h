/* commands: the gpt2gen command line, one file per command (cli/<command>.c), and what they share
   (cli/args.c): the options of the config commands, loading the config and making the plan.
   Every command returns its exit code: 0 ok, 1 failure, 2 bad usage or bad config. */
#ifndef GPT2GEN_COMMANDS_H
#define GPT2GEN_COMMANDS_H
#include "gen/config.h"
#include "gen/plan.h"
#include "gen/tune_db.h"
#include "runtime/backend.h"

int cmd_build(int argc, char **argv, const Env *env);   /* argv[0] is the command's name; env: main read it once */
int cmd_train(int argc, char **argv, const Env *env);
int cmd_test(int argc, char **argv, const Env *env);
int cmd_prepare(int argc, char **argv);
int cmd_tune(int argc, char **argv, const Env *env);
int cmd_sample(int argc, char **argv, const Env *env);
int cmd_eval(int argc, char **argv, const Env *env);
int cmd_export(int argc, char **argv);   /* cli/hf.c: Hugging Face folders */
int cmd_import(int argc, char **argv);
int cmd_plot(int argc, char **argv);     /* cli/plot.c: the SVG of runs */

/* The commands that take a checkpoint (cli/model.c). The config of the checkpoint's model (its header's shape, in
   precision: a ModelSpec through the same checks as a config's, gen/config.h) with a default RunSpec; errors name
   the checkpoint. */
int cli_checkpoint_config(Config *cfg, const GPT2Shape *shape, const char *precision, const char *checkpoint, Err *err);
/* The tokenizer file: given (--tokenizer) when not NULL, else tokenizer.bin or gpt2_tokenizer.bin beside the
   checkpoint, else the default data set's (data/fortunes/tokenizer.bin); buf holds the path made. */
const char *cli_pick_tokenizer(const char *given, const char *checkpoint, char *buf, size_t n);
/* The arch to compile for: given (--arch), else the GPU's (sm_90 without one, or on the CPU backend). */
void cli_pick_arch(const char *backend, const char *given, char arch[16]);
/* The checkpoint's parameters into backend be (whose model it must be). */
int cli_load_weights(Backend *be, const char *checkpoint, Err *err);

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
    int no_arch_note;    /* no "arch sm_XX (...)" line: training on the CPU, tune without a GPU (it says nothing there) */
    int help;
    int gpus;            /* --gpus N (0: not given); it sets train.num_gpus = N */
    char gpus_set[32];   /* that --set */
    const Env *env;      /* the environment (common/env.h), as main read it (never NULL) */
    const PlanFacts *facts;        /* what the machine the plans run on serves (gen/plan.h); NULL: no cuDNN (the CPU backend) */
    const TuneEnv *machine;        /* this machine as a child process probed it (cli/train.c), for args_tune_db; */
    const char *machine_cublaslt;  /* NULL: args_tune_db probes it (in a process that may start CUDA) */
} Args;


/* Parses the options shared by the config commands. Returns 0, or 2 after printing a usage error. */
int args_parse(int argc, char **argv, const Env *env, Args *a, const char *cmd);
/* Loads the config and makes its plans (args_plan). Errors here are the user's input: the message is printed and
   the result is 2. */
int args_load_and_plan(const Args *a, Config *cfg, Plan *plan, Plan *sample);
/* The training plan of a config already loaded, and its sampling plan where sample is not NULL, for the arch
   cuda_pick_arch chooses, with the tuning database (unless untuned); 2 as above. */
int args_plan(const Args *a, const Config *cfg, Plan *plan, Plan *sample);
/* The plans of cfg for arch (sample may be NULL) and a->facts, with the tuning database; 2 after printing an error
   (attention = "cudnn" where the facts say cuDNN cannot serve is one). */
int args_make_plans(const Args *a, const Config *cfg, const char *arch, Plan *plan, Plan *sample);
/* Builds the plans (sample may be NULL): gen/build.h's build_plans with -j and the environment. */
int args_build_plans(const Args *a, const Plan *plan, const Plan *sample, int quiet, Err *err);
/* Applies the tuning database (gen/tune_db.h) to plan (and to sample, where not NULL), unless --no-tune-db, and
   says so in one line (unless -q; and not where there is no GPU and no database); a stale or corrupt database is
   reported and ignored. The database's choices are the plans' (an attention path only for attention = "auto", and
   its cuDNN only where a->facts say it serves): the config is never changed. */
void args_tune_db(const Args *a, Plan *plan, Plan *sample);
/* parse, load, plan (for GPU 0 as this process sees it: cuda_plan_facts), generate and compile (the sampling plan
   too where sample is not NULL); usage is printed for --help (*done set, returns 0). */
int args_build(int argc, char **argv, const Env *env, const char *cmd, const char *usage, Config *cfg, Plan *plan, Plan *sample,
               int *done);
#endif
