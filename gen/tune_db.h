/* tune_db: the tuning database, a readable text file (default build/tune-db.txt, or $GPT2GEN_TUNE_DB), and the
   variants `gpt2gen tune` sweeps.

   One record per line, fields separated by single spaces:
       <record> <what> <name> <variant> us=<time> status=<word> [default_us=<time>] <key fields>
   record:  "measure" (one variant timed; what an interrupted tune resumes from) or "best" (the choice)
   what:    "kernel" (a kernel family; variant "BLOCK_SIZE=512,BWD_BLOCK_SIZE=256"), "matmul" (a plan matmul;
            variant "algo=<index among cuBLASLt's heuristics>,id=..,tile=..,stages=..,splitk=..,reduction=..,
            swizzle=..,custom=..,cluster=..") or "attention" (variant "path=cudnn" or "path=flash")
   status:  ok, or why the variant was rejected: mismatch, compile, launch
   key:     gpu= arch= driver= cuda= nvrtc= cudnn= template= shape= precision= (spaces in values become '_')
   Lines starting with '#' and blank lines are comments; a line may end in CRLF. A record is used only when every
   key field equals this machine's and this plan's, and a best record only when its status is ok and its variant
   is inside its domain; a record that differs is stale, a line that does not parse is corrupt: both are reported
   (one line each, naming the file and line; past TUNE_DB_SAY_CORRUPT corrupt lines, one line for the file) and
   ignored, never fatal. A file past TUNE_DB_MAX_BYTES is not read: one message, and the database is empty. */
#ifndef GPT2GEN_TUNE_DB_H
#define GPT2GEN_TUNE_DB_H
#include "common/env.h"
#include "gen/plan.h"
#include <stdio.h>

#define TUNE_DB_MAX_BYTES (4u << 20)   /* docs/kernels-and-tuning.md, "Tuning" */
#define TUNE_DB_SAY_CORRUPT 5          /* corrupt lines reported one by one; more: one line for the file */
#define TUNE_KEY_FIELDS 9
#define TUNE_FIELD_MAX 160
extern const char *const tune_key_names[TUNE_KEY_FIELDS];   /* gpu arch driver cuda nvrtc cudnn template shape precision */

/* What a record is keyed by, as strings (no spaces). */
typedef struct { char f[TUNE_KEY_FIELDS][TUNE_FIELD_MAX]; } TuneKey;
/* The machine part of a key: the GPU and the library versions ("none" where one is missing); and where the
   templates whose text a kernel's key hashes are read from (GPT2GEN_TEMPLATES; NULL: the built-in ones). */
typedef struct { char gpu[TUNE_FIELD_MAX], arch[16], driver[32], cuda[32], nvrtc[32], cudnn[32]; const char *templates; } TuneEnv;

typedef struct {
    char record[16], what[16], name[48], variant[256], status[16];
    double us, default_us;   /* default_us < 0: absent */
    TuneKey key;
    int line;                /* in the file it was read from; 0 when made here */
    long order;              /* when tune_db_put last put it: the newest is the largest */
} TuneRecord;

typedef struct {
    char path[1024];
    int n, cap;
    TuneRecord *r;
    int *slot, nslot;        /* the index (gen/tune_index.c): record i + 1 by the hash of its entry; 0: empty */
    long puts;               /* records put so far (TuneRecord.order) */
    int corrupt;             /* lines reported and ignored */
    int missing;             /* the file did not exist */
    int oversized;           /* the file was past TUNE_DB_MAX_BYTES, and not read */
} TuneDb;

/* The database's path: env's GPT2GEN_TUNE_DB, else build/tune-db.txt (env NULL: the defaults). */
const char *tune_db_path(const Env *env);
/* Reads path, in time linear in its size. Never fails: a missing, unreadable or oversized file gives an empty
   database (and a line on msgs); a line that does not parse is reported on msgs ("FILE:LINE: why; ignored", or
   past TUNE_DB_SAY_CORRUPT of them, one line "N corrupt lines ignored, the first at line L: why") and skipped.
   msgs may be NULL. */
void tune_db_load(TuneDb *db, const char *path, FILE *msgs);
void tune_db_free(TuneDb *db);
/* Adds r to db (replacing a record of the same entry: the same record, what, name and key, and for a measure
   record the same variant), in constant time (gen/tune_index.c). */
void tune_db_put(TuneDb *db, const TuneRecord *r);
/* The record of want's entry; NULL when none. */
const TuneRecord *tune_db_lookup(const TuneDb *db, const TuneRecord *want);
/* Which records a rewrite keeps (an array of db->n flags, malloc'd): the newest of each record, what, name (and
   for measure records variant), GPU, arch, shape and precision; older ones, for other driver or library versions
   or another template, are superseded. */
unsigned char *tune_db_newest(const TuneDb *db);
/* Appends r as one line to db->path and flushes it to disk, so a killed tune keeps what it measured. */
int  tune_db_append(const TuneDb *db, const TuneRecord *r, Err *err);
/* Writes the records of db that tune_db_newest keeps to db->path atomically (a temporary file, then rename). */
int  tune_db_rewrite(const TuneDb *db, Err *err);
/* The record for (record, what, name[, variant]) whose key equals key; NULL when none. When there is none but some
   record for it has another key, *stale is one such (for a message: one of the same shape and precision, an
   out-of-date one, where there is one), else NULL. variant NULL: any. */
const TuneRecord *tune_db_find(const TuneDb *db, const char *record, const char *what, const char *name,
                               const char *variant, const TuneKey *key, const TuneRecord **stale);
/* "other gpu: NVIDIA_A100 (here NVIDIA_H200)": the first key field in which a and b differ. */
void tune_key_diff(const TuneKey *a, const TuneKey *b, char *out, size_t n);
/* name as a record's name field: spaces become '_' ("classifier dinp" -> "classifier_dinp") */
void tune_db_name(const char *name, char *out, size_t n);
/* One record as its line (without the newline). */
void tune_record_format(const TuneRecord *r, char *out, size_t n);
/* Parses one line; -1 and why when it is not a record. */
int  tune_record_parse(const char *line, TuneRecord *r, char *why, size_t n);

/* Keys for the plan's kernel family (its index in the plan), matmul (MatmulId) and attention path choice. cublaslt: the
   cuBLASLt version (the matmuls' "template"). */
void tune_key_kernel(TuneKey *k, const TuneEnv *env, const Plan *plan, int fam);
void tune_key_matmul(TuneKey *k, const TuneEnv *env, const Plan *plan, int id, const char *cublaslt);
void tune_key_attention(TuneKey *k, const TuneEnv *env, const Plan *plan);
/* The GELU path's (train.gelu = "auto"): the gelu family's key (the shape, its template) */
void tune_key_gelu(TuneKey *k, const TuneEnv *env, const Plan *plan);
/* The environment from "gpu=.. arch=.. driver=.. cuda=.. nvrtc=.. cudnn=.." (the test hook $GPT2GEN_TUNE_ENV names
   a machine this way); fields it leaves out keep their value. -1 when a field is unknown. */
int  tune_env_parse(TuneEnv *env, const char *s, char *why, size_t n);

/* Variants of a family: every combination of its tunables' candidates (the config's lists, else the declared
   ones) that the declarations allow (each TunableDecl's range and multiple, the family's check, the launch
   limits). The family's current values come first. Returns how many were written (at most max); *refused counts
   the combinations the constraints refused. */
#define TUNE_MAX_VARIANTS 1024
typedef struct { int v[FAMILY_MAX_TUNABLES]; } TuneVariant;
int  tune_variants(const Plan *plan, int fam, TuneVariant *out, int max, int *refused);
/* "BLOCK_SIZE=512,BWD_BLOCK_SIZE=256" */
void tune_variant_name(const PlanFamily *m, const int *values, char *out, size_t n);
/* Parses a variant name of m back into values; -1 when it does not name every tunable of m with an allowed value. */
int  tune_variant_parse(const PlanFamily *m, const char *name, int *values);

/* What `gpt2gen build` and `train` take from the database (gen/tune_apply.c). */
typedef struct {
    int kernels, matmuls, attention, gelu;   /* entries used */
    int stale, overridden;               /* entries ignored: stale; kernel tunables the config sets itself */
    int other_config;                    /* of the stale: records for other shapes or precisions (other configs) */
    char other_example[400];
    AttentionPath attention_path;        /* when attention: the plan's path after the database's choice (the
                                            template where the database's cuDNN cannot serve: msgs says so) */
    GeluPath gelu_path;                  /* when gelu: the training step's GELU the database chose */
} TuneApplied;
/* Applies db's best records that match env and plan: kernel tunables the config does not set, matmul algorithms,
   and (for attention = "auto") the attention path, decided again with facts (plan_decide_attention: the database's
   cuDNN only where facts say it serves; NULL: no cuDNN), (for train.gelu = "auto") the GELU's. Stale records are
   reported on msgs: one line each for this shape and precision (another GPU, driver, library or template), one line
   in all for other shapes or precisions. */
void tune_db_apply(const TuneDb *db, const TuneEnv *env, Plan *plan, const char *cublaslt, const PlanFacts *facts,
                   TuneApplied *out, FILE *msgs);
/* Parses a matmul variant string into t; -1 when it is not one. */
int  tune_algo_parse(const char *variant, MatmulAlgoChoice *t);
void tune_algo_format(const MatmulAlgoChoice *t, char *out, size_t n);
#endif
