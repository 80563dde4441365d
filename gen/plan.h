/* plan: everything derived from the model, one step shape (gen/step.h) and the arch, plus the tuning database:
   the kernel families to generate (each family of gen/kernels.c at this shape: its template compiled to one
   CUBIN, which the runtime loads as one CUDA module), each one's tunables, every kernel's launch
   geometry, the matmuls and their algorithms, the attention path, and the buffer layout of one step. It is the one
   home of every decision: the config is only read when the plan is made, and the runtime creates a backend from a
   plan alone. One model has several plans (its training step, the forward that samples from it), held side by
   side in one process; a build writes each as a section of build/<name>/plan.txt for people. */
#ifndef GPT2GEN_PLAN_H
#define GPT2GEN_PLAN_H
#include "gen/spec.h"
#include "gen/kernels.h"
#include "gen/matmuls.h"
#include "gen/memory.h"
#include "gen/schedule.h"
#include "gen/step.h"
#include <stddef.h>

#define PLAN_MAX_FAMILIES 16
#define PLAN_MAX_KERNELS 64
#define PLAN_DECODE_LINEAR_ROWS 2
#define PLAN_WHY_MAX 256   /* Plan.attention_why */

typedef struct {
    int value;              /* the config's tune value, else the declaration's default */
    int n_candidates;       /* candidates for sweeps: the config's list, else the declaration's */
    int candidates[16];
    const char *origin;     /* "default", "default for this shape", "config" or "tune-db" */
    int fixed;              /* the config sets it to one value: sweeps leave it */
} PlanTunable;

typedef struct {
    const FamilyDecl *decl;
    PlanTunable tunables[FAMILY_MAX_TUNABLES];
    int n_tunables;
    KernelEnv env;          /* shape, tunable values and derived constants, for geometry rules */
    char source_path[1100]; /* build/<name>/kernels/<family>.cu (another plan than the training one: kernels/<plan>/) */
    char cubin_path[1100];  /* the same with .<arch>.cubin: for people; the runtime loads CUBINs by content */
} PlanFamily;

typedef struct {
    const KernelDecl *decl;
    int family;             /* index into Plan.families; -1: a kernel of a family this plan does not have */
    LaunchDims dims;        /* the launch; for a kernel with a size parameter, at size 1 (the rule is per call) */
} PlanKernel;

typedef struct Plan Plan;
/* What the machine that runs a plan serves, as the caller knows it: gen/ decides from these facts and never asks the
   GPU itself. cli/ fills it for the backend a plan set is for (cli/plans.c: runtime/gpu.h's cuda_plan_facts; in a
   process that must not start CUDA, from a child process: cli/train.c); NULL facts, or a NULL function: no cuDNN
   here (no GPU, the CPU backend). */
typedef struct PlanFacts {
    /* 1 where cuDNN's fused attention serves plan's step here (its B, T, heads, head size, precision and
       determinism); 0 where not, with why (one line) */
    int (*cudnn_attention)(void *ctx, const Plan *plan, char *why, size_t n);
    void *ctx;
} PlanFacts;

struct Plan {
    char name[32];          /* what it is for: "train", "sample"; its section of plan.txt */
    GPT2Shape model;
    StepShape step;
    char config_name[128];  /* the config's name and file, for messages */
    char config_path[CONFIG_PATH_MAX];
    /* The config it was made from, for the build's own files (config.lua, the sources' first lines) and the tuner:
       the runtime never reads it. */
    const struct Config *cfg;
    char build_dir[256];    /* build/<name> */
    char arch[16];          /* sm_XX the CUBINs are for */
    /* the attention path, final when the plan is made (plan_decide_attention, gen/plan_attention.c): ATTN_CUDNN
       (cuDNN's fused attention) or ATTN_FLASH (our template; a decode step's is templates/decode.cu's split
       attention), never ATTN_AUTO; the runtime runs it as it is. attention_asked is what its origin asked for: the
       config's attention ("config": "cudnn" or "flash", which must be had; "auto": ATTN_AUTO, the plan's choice) or
       the tuning database's path ("tuning database", for attention = "auto"; where cuDNN cannot serve, the
       template); "decode step" for a decode plan. attention_why says why, in a few words, for plan.txt and the
       runtime's message. */
    AttentionPath attention;
    const char *attention_origin;
    AttentionPath attention_asked;
    char attention_why[PLAN_WHY_MAX];
    /* the training step's cuDNN attention backward writes dQ directly (equal inputs, equal bits), else accumulates
       it with atomics (train.deterministic = false); every other step has no backward and says 1 */
    int deterministic;
    /* a decode step's linears: templates/decode.cu's decode_ln_linear and decode_linear_residual (the LayerNorm before
       and the residual add after in the same kernel; gen/schedule.c, decode_block), which stream each weight once for the rows
       (faster at B <= PLAN_DECODE_LINEAR_ROWS: docs/kernels-and-tuning.md; at any B with RunSpec.decode
       DECODE_LINEARS), else the plan's cuBLASLt matmuls */
    int decode_linear;
    /* a decode step's kernels of the families that wait for the grid before them (FamilyDecl.launch LAUNCH_OVERLAP) are
       launched with programmatic dependent launch, each starting while the one before it ends: on sm_90 and later,
       where the PTX has griddepcontrol (docs/kernels-and-tuning.md, "Decode") */
    int overlap;
    /* a decode step of few rows (decode_linear) on sm_90 as one persistent kernel, where the run asks for it
       (RunSpec.decode): the decode_step family (launched cooperatively) in place of the forward's ops */
    int decode_persistent;
    /* a greedy decode step on the decode linears (not persistent) draws inside its classifier: decode_ln_linear folds
       each row's logits into one greedy key (BUF_DECODE_BEST), decode_advance writes the token, and no sample_tokens
       runs (templates/decode.cu, greedy_key; the run decides greedy: runtime/cuda/decode.c) */
    int decode_greedy_fused;
    /* grouped-query attention (n_kv_head < n_head) on cuDNN's attention, whose graph takes a k and v head per query
       head: kv_expand (templates/rope.cu) repeats each kv head for its query heads into BUF_QKV_X before it,
       kv_reduce sums the gradients of the repeats back (runtime/cuda/arch.c). Set with the attention path
       (plan_attention.c). Our flash template and a decode step's kernels read the NKV heads of qkv as they are
       (templates/attention.cu, decode.cu), and the decode cache holds NKV heads */
    int kv_expand;
    /* the training step's GELU (config.h, GeluPath): GELU_EPILOGUE or GELU_KERNEL, and who chose it: "config", or
       "auto" (plan.c, gelu_auto: by shape, from measurements); every other step has it in the epilogue */
    GeluPath gelu;
    const char *gelu_origin;
    /* the training step's backward on two streams (train.streams = 2: the weight-gradient matmuls, bias gradients
       and the GELU recompute on a side stream, runtime/cuda/step.c), else 1; every other step has 1 */
    int streams;
    /* the training micro-step recorded once as a CUDA graph and replayed (train.cuda_graph; runtime/cuda/step.c
       says where it is not: a profile, several ranks, GPT2GEN_SYNC); every other step has 0 */
    int graph;
    /* rows of logits per chunk of the classifier (a divisor of B*T; the classifier family's CHUNK, else B*T): the
       logits buffer holds one chunk (runtime/cuda/classifier.c) */
    int classifier_rows;
    int n_families;
    PlanFamily families[PLAN_MAX_FAMILIES];
    int n_kernels;          /* every declared kernel, indexed by its id (K_* of kernel_ids.h), whether or not the
                               plan has its family (a plan has the families its step calls: FamilyDecl.steps) */
    PlanKernel kernels[PLAN_MAX_KERNELS];
    PlanMatmul matmuls[MM_COUNT];
    PlanMemory memory;
    OpSchedule schedule;    /* the step as ops (gen/schedule.h): what the backends run, in order */
};

/* Builds the plan called name for step, the model of cfg, and arch (e.g. "sm_90"), for a machine that serves facts
   (may be NULL: no cuDNN). Tunables come from the declarations and the config's tune table; a value outside its
   declared constraints is an error naming the key and the allowed values; so is attention = "cudnn" where facts say
   cuDNN cannot serve the step. */
int  plan_make(Plan *plan, const struct Config *cfg, const char *name, const StepShape *step, const char *arch,
               const PlanFacts *facts, Err *err);
/* a training plan's GELU path (and who chose it): its matmul entries and memory follow */
void plan_set_gelu(Plan *plan, GeluPath gelu, const char *origin);
/* Decides the attention path (Plan.attention, attention_why) from what plan->attention_origin asked for
   (attention_asked), the plan's kernels and facts (NULL: no cuDNN): gen/plan_attention.c. plan_make calls it, and
   tune_db_apply where the database names a path. -1 and err naming the config where it asked for "cudnn" and facts
   say cuDNN cannot serve. */
int  plan_decide_attention(Plan *plan, const PlanFacts *facts, Err *err);
/* The training plan ("train") of cfg. */
int  plan_make_train(Plan *plan, const struct Config *cfg, const char *arch, const PlanFacts *facts, Err *err);
/* The plan that samples text during training ("decode"): one row decoding against its key/value cache, run with
   the training plan's weights (its prompt is one token, so it needs no prefill). A decode step's attention is
   templates/decode.cu's whatever the machine serves: it needs no facts. */
int  plan_make_sample(Plan *plan, const struct Config *cfg, const char *arch, Err *err);
/* Sampling's plans (runtime/sample/sampler.h): "decode", B rows one token at a time, and "prefill", B rows of T
   prompt positions into the decode plan's cache; shared_weights: they run with another backend's. */
int  plan_make_decode(Plan *plan, const struct Config *cfg, int B, int shared_weights, const char *arch, Err *err);
int  plan_make_prefill(Plan *plan, const struct Config *cfg, int B, int T, int shared_weights, const char *arch,
                       const PlanFacts *facts, Err *err);
/* Gives family fam its tunable values (declaration order), marking changed ones with origin (when not NULL), and
   recomputes its derived constants and launches. A combination the family's check or the launch limits refuse is
   an error, and the family stays as it was. */
int  plan_set_tunables(Plan *plan, int fam, const int *values, const char *origin, Err *err);
/* Writes the plans as the sections of build/<name>/plan.txt (the first plan's build_dir). */
int  plan_write(const Plan *const *plans, int n, Err *err);
/* The launch of kernel id for a call whose size parameter is size. */
LaunchDims plan_launch_dims(const Plan *plan, int id, long long size);
#endif
