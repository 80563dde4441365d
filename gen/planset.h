/* planset: every plan a command runs, made in one place from the config (its ModelSpec and RunSpec), the shapes
   the command asks for, the tuning database and the GPU's facts. Every decision is taken here, once per plan:
   tunables, matmul algorithms, the attention path, the GELU path, the classifier chunk (gen/plan.h). runtime/
   takes a PlanSet and a RunSpec; it never makes a plan.

   The plans, by what they are for:
   - "train": the training step (PlanRequest.train);
   - "decode": rows rows, one token each against their key/value cache (PlanRequest.decode_rows); training's
     samples use a one-row decode plan;
   - "prefill" and "forward" (PlanRequest.prompts): the same rows, one plan per bucket of positions (a power of
     two from 64 to maxT): the prompt's positions into the decode plan's cache, and the uncached forward that
     sampling compares with;
   - "eval": eval_rows rows per forward, one plan per bucket as above (evaluation, tools/dump_logits).
   Plans are cheap: a backend compiles a plan's kernels (through the kernel cache) only when it is made from it.
   Which backend holds the weights: the training plan's when there is one, else the decode plan's, else the eval
   plan's; every other plan runs on them (StepShape.shared_weights). */
#ifndef GPT2GEN_PLANSET_H
#define GPT2GEN_PLANSET_H
#include "gen/plan.h"
#include "gen/tune_db.h"

#define PLANSET_MAX_BUCKETS 12   /* 64 .. 2^17 positions */

typedef struct {
    int train;          /* 1: the training step */
    int decode_rows;    /* > 0: the decode plan of these rows */
    int eval_rows;      /* > 0: eval plans of these rows */
    int prompts;        /* with decode_rows: the prefill and uncached forward plans of every bucket, for prompts of
                           more than one token (`gpt2gen sample`); training's samples start from one token */
    int positions;      /* with decode_rows: the positions a row needs (its prompt and new tokens): the cache holds
                           their bucket (planset_bucket), and prompts get the buckets up to it; 0: the model's context */
} PlanRequest;

/* What the plans are made with besides the config. */
typedef struct {
    char arch[16];              /* sm_XX the kernels are built for */
    const PlanFacts *facts;     /* the GPU's facts (gen/plan.h); NULL: none known (no GPU, the CPU backend) */
    /* the tuning database and this machine's key in it; db NULL: the default variants */
    const TuneDb *db;
    const TuneEnv *env;
    const char *cublaslt;
} PlanInputs;

typedef struct PlanSet {
    Plan *train, *decode;                     /* NULL where not asked for */
    int n_buckets;
    int bucket_T[PLANSET_MAX_BUCKETS];        /* 64, 128, ... maxT */
    Plan *prefill[PLANSET_MAX_BUCKETS], *forward[PLANSET_MAX_BUCKETS], *eval[PLANSET_MAX_BUCKETS];
    /* what the database gave the first plan made (train, else decode, else eval's first bucket), and its notes
       on stale records (other plans' would repeat them) */
    TuneApplied applied;
} PlanSet;

/* Makes the plans req asks for from cfg. Notes on the database's stale or broken records go to msgs (may be
   NULL). An error (a tunable or path the config sets that this GPU or shape cannot have) names the config. */
int  planset_make(PlanSet *ps, const struct Config *cfg, const PlanRequest *req, const PlanInputs *in, FILE *msgs, Err *err);
void planset_free(PlanSet *ps);
/* The bucket for n positions (n rounded up to a power of two, at least 64, at most maxT), as an index into the
   bucket arrays, for a plan set with buckets. */
int  planset_bucket(const PlanSet *ps, int n);
/* The plans to build ahead, for `gpt2gen build` and train: train and decode, those that exist; returns how many. */
int  planset_ahead(const PlanSet *ps, const Plan *out[2]);
#endif
