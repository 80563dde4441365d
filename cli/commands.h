/* commands: the gpt2gen command line, one file per command (cli/<command>.c), and what they share
   (cli/args.c): the options of the config commands, loading the config and making the plan.
   Every command returns its exit code: 0 ok, 1 failure, 2 bad usage or bad config. */
#ifndef GPT2GEN_COMMANDS_H
#define GPT2GEN_COMMANDS_H
#include "gen/config.h"
#include "gen/planset.h"
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
/* Checked before any backend is made: the arenas of plans[0..n) (those that live at once) fit where they will run:
   GPU 0's free memory where backend is not "cpu" and there is a GPU, else this process's host memory (physical
   memory, and its address-space limit). Else -1 and one message naming opt (--batch, --rows) and rows, the bytes
   needed and free, and the most rows that fit (weights and workspaces kept, the rest scaled by rows). */
int cli_check_memory(const Plan *const *plans, int n, const char *opt, long rows, const char *backend, Err *err);
/* The arch to compile for: given (--arch), else the GPU's (sm_90 without one, or on the CPU backend). */
void cli_pick_arch(const char *backend, const char *given, char arch[16]);
/* The checkpoint's parameters into backend be (whose model it must be). */
int cli_load_weights(Backend *be, const char *checkpoint, Err *err);

/* How a command's plans take the tuning database (cli/plans.c). */
typedef struct {
    const Env *env;                /* GPT2GEN_TUNE_DB, GPT2GEN_TUNE_ENV (never NULL) */
    int off;                       /* the default variants: --no-tune-db, the tuner's baseline, the CPU backend */
    const char *off_note;          /* with off: what to say why (NULL: nothing) */
    FILE *say;                     /* where the one line on the database goes; NULL: nowhere */
    int only_applied;              /* say it only where the database gave something */
    const TuneEnv *machine;        /* this machine as a child process probed it (cli/train.c); NULL: probe it here */
    const char *machine_cublaslt;
    const PlanFacts *facts;        /* what the machine the plans run on serves (gen/plan.h); NULL: no cuDNN */
} CliTuning;
/* The plans req asks for of cfg, for arch, with the tuning database as t says (a stale or corrupt database is
   reported on stderr and ignored; the database's choices are the plans', the config is never changed). */
int cli_plans(const Config *cfg, const PlanRequest *req, const char *arch, const CliTuning *t, PlanSet *ps, Err *err);

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
    const TuneEnv *machine;        /* this machine as a child process probed it (cli/train.c): CliTuning's */
    const char *machine_cublaslt;
} Args;


/* Parses the options shared by the config commands. Returns 0, or 2 after printing a usage error. */
int args_parse(int argc, char **argv, const Env *env, Args *a, const char *cmd);
/* Loads the config and makes the plans req asks for (args_plan). Errors here are the user's input: the message is
   printed and the result is 2. */
int args_load_and_plan(const Args *a, Config *cfg, const PlanRequest *req, PlanSet *ps);
/* The plans req asks for of a config already loaded, for the arch cuda_pick_arch chooses, with the tuning
   database (unless --no-tune-db or untuned), which is said in one line (unless -q); 2 as above. */
int args_plan(const Args *a, const Config *cfg, const PlanRequest *req, PlanSet *ps);
/* The same for arch. */
int args_make_plans(const Args *a, const Config *cfg, const char *arch, const PlanRequest *req, PlanSet *ps);
/* Builds the plans built ahead (planset_ahead): gen/build.h's build_plans with -j and the environment. */
int args_build_plans(const Args *a, const PlanSet *ps, int quiet, Err *err);
/* parse, load, plan and compile; usage is printed for --help (*done set, returns 0). */
int args_build(int argc, char **argv, const Env *env, const char *cmd, const char *usage, Config *cfg,
               const PlanRequest *req, PlanSet *ps, int *done);
#endif
