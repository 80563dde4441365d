/* config: a Lua 5.4 config read into a Config against the schema, and validated once. This file holds the
 * schema (every key, its type, default and range; gen/config_schema.h) and the entry point, config_load: the
 * config runs in the sandbox (gen/sandbox.c), its values are read (gen/config_read.c: every key is checked,
 * unknown keys get a did-you-mean, every value's type and range), then checked across fields and the derived
 * values filled in (gen/config_validate.c). */
#include "gen/config.h"
#include "gen/config_internal.h"
#include "gen/config_schema.h"
#include "gen/sandbox.h"
#include "common/files.h"
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the schema */

const char *const PRECISIONS[] = {"fp32", "bf16", "fp16", NULL};
const char *const ATTENTIONS[] = {"auto", "cudnn", "flash", NULL};
static const char *const SCHEDULES[] = {"cosine", "linear", "constant", "wsd", NULL};
static const char *const GELU_PATHS[] = {"auto", "epilogue", "kernel", "split", "fused", NULL};
static const char *const ARCHITECTURES[] = {"gpt2", NULL};   /* ModelArchitecture, index = value */
static const char *const NORMS[] = {"layernorm", "rmsnorm", NULL};           /* NormKind */
static const char *const POSITIONS[] = {"learned", "rope", NULL};            /* PositionKind */
static const char *const MLPS[] = {"gelu", "relu2", "swiglu", NULL};         /* MlpKind */

#define F_INT(sec, k, d, mn, mx) {#k, VAL_INT, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, mn, mx}
#define F_NUM(sec, k, d, mn)  {#k, VAL_NUM, offsetof(Config, sec.k), 0, d, NULL, mn, 0}
#define F_STR(sec, k, d)      {#k, VAL_STR, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0, 0}
#define F_BOOL(sec, k, d)     {#k, VAL_BOOL, offsetof(Config, sec.k), sizeof(((Config *)0)->sec.k), d, NULL, 0, 0}

/* Every int's range fits its field; the products of several are checked in config_validate()
   (gen/config_validate.c). train.steps stops one short of INT_MAX: the training loop counts up to it, inclusive,
   in an int. */
static const Field MODEL_FIELDS[] = {
    {"architecture", VAL_ENUM, offsetof(Config, model.architecture), 0, "gpt2", ARCHITECTURES, 0, 0},
    F_INT(model, n_layer, NULL, 1, INT_MAX), F_INT(model, n_head, NULL, 1, INT_MAX), F_INT(model, n_embd, NULL, 1, INT_MAX),
    F_INT(model, max_seq_len, "1024", 1, INT_MAX), F_INT(model, vocab_size, "50257", 2, INT_MAX),
    {"norm", VAL_ENUM, offsetof(Config, model.norm), 0, "layernorm", NORMS, 0, 0}, F_NUM(model, norm_eps, "1e-5", 0),
    {"position", VAL_ENUM, offsetof(Config, model.position), 0, "learned", POSITIONS, 0, 0},
    F_NUM(model, rope_theta, "10000", 0), {"mlp", VAL_ENUM, offsetof(Config, model.mlp), 0, "gelu", MLPS, 0, 0},
    F_INT(model, n_ffn, "0", 0, INT_MAX) /* 0: 4 * n_embd */, F_INT(model, n_kv_head, "0", 0, INT_MAX) /* 0: n_head */,
    F_BOOL(model, qk_norm, "false"), F_BOOL(model, bias, "true"), F_BOOL(model, tie_embeddings, "true"),
    F_NUM(model, logit_softcap, "0", 0), {0}};
static const Field TRAIN_FIELDS[] = {
    F_INT(run.train, batch_size, "4", 1, INT_MAX), F_INT(run.train, seq_len, "0", 0, INT_MAX),
    F_INT(run.train, total_batch_size, "0", 0, LONG_MAX)   /* 0: derived */,
    F_INT(run.train, steps, "1000", 1, INT_MAX - 1), F_NUM(run.train, lr, "6e-4", 0),
    {"schedule", VAL_ENUM, offsetof(Config, run.train.schedule), 0, "cosine", SCHEDULES, 0, 0},
    F_INT(run.train, warmup, "0", 0, INT_MAX), F_NUM(run.train, final_lr_frac, "0", 0), F_NUM(run.train, weight_decay, "0.1", 0),
    F_NUM(run.train, grad_clip, "1.0", 0), F_NUM(run.train, beta1, "0.9", 0), F_NUM(run.train, beta2, "0.95", 0),
    F_NUM(run.train, eps, "1e-8", 0), F_INT(run.train, seed, "1337", 0, LONG_MAX), F_INT(run.train, recompute, "1", 0, INT_MAX),
    {"gelu", VAL_ENUM, offsetof(Config, run.train.gelu), 0, "auto", GELU_PATHS, 0, 0}, F_BOOL(run.train, deterministic, "true"),
    F_BOOL(run.train, master_weights, "true"), F_BOOL(run.train, overfit_batch, "false"), F_INT(run.train, num_gpus, "1", 1, INT_MAX),
    F_INT(run.train, zero_stage, "1", 0, 1), F_INT(run.train, streams, "2", 1, 2), F_BOOL(run.train, cuda_graph, "true"),
    F_NUM(run.train, loss_scale, "65536", 1), F_INT(run.train, loss_scale_interval, "1000", 1, INT_MAX), {0}};
static const Field DATA_FIELDS[] = {
    F_STR(run.data, train, "data/fortunes/train_*.bin"), F_STR(run.data, val, "data/fortunes/val_*.bin"),
    F_STR(run.data, tokenizer, "data/fortunes/tokenizer.bin"), {0}};
static const Field EVAL_FIELDS[] = {
    F_INT(run.eval, val_every, "250", 0, INT_MAX), F_INT(run.eval, val_batches, "20", 0, INT_MAX),
    F_INT(run.eval, sample_every, "500", 0, INT_MAX), F_INT(run.eval, sample_tokens, "64", 0, INT_MAX),
    F_NUM(run.eval, temperature, "1.0", 0), F_STR(run.eval, hellaswag, ""), F_INT(run.eval, hellaswag_every, "0", 0, INT_MAX), {0}};
static const Field CHECKPOINT_FIELDS[] = {
    F_STR(run.checkpoint, dir, ""), F_INT(run.checkpoint, every, "0", 0, INT_MAX), F_STR(run.checkpoint, init, ""),
    F_BOOL(run.checkpoint, resume, "false"), {0}};

const Section SECTIONS[] = {
    {"model", MODEL_FIELDS}, {"train", TRAIN_FIELDS}, {"data", DATA_FIELDS},
    {"eval", EVAL_FIELDS}, {"checkpoint", CHECKPOINT_FIELDS}, {NULL, NULL}};
const char *const TOP_KEYS[] = {"name", "model", "precision", "train", "data", "eval", "checkpoint", "tune", "arch", "attention", NULL};

/* ---------------------------------------------------------------- entry point */

int config_load(Config *cfg, const char *path, const char *const *overrides, int n_overrides, Err *err) {
    memset(cfg, 0, sizeof *cfg);
    size_t len = strlen(path);
    if (len >= sizeof cfg->path)
        return err_set(err, "%s: the config path is %zu characters long: at most %zu", err_show(path), len, sizeof cfg->path - 1);
    memcpy(cfg->path, path, len + 1);
    const char *why = file_missing_why(path);
    if (*why) return err_set(err, "%s: %s", path, !strcmp(why, "no such file") ? "no such config file" : why);
    if (sandbox_run(path, overrides, n_overrides, config_read, cfg, err)) return -1;
    return config_validate(cfg, err);
}

const char *precision_name(Precision p) { return PRECISIONS[p]; }
const char *gelu_path_name(GeluPath g) { return GELU_PATHS[g]; }
const char *attention_name(AttentionPath a) { return ATTENTIONS[a]; }

int config_tunable(const Config *cfg, const char *family, const char *name, int dflt) {
    for (int i = 0; i < cfg->run.n_tunables; i++)
        if (!strcmp(cfg->run.tunables[i].family, family) && !strcmp(cfg->run.tunables[i].name, name))
            return cfg->run.tunables[i].values[0];
    return dflt;
}

GPT2Shape config_shape(const Config *cfg) { return model_spec_shape(&cfg->model); }

int precision_parse(const char *name, Precision *p) {
    for (int i = 0; PRECISIONS[i]; i++)
        if (!strcmp(PRECISIONS[i], name)) { *p = (Precision)i; return 0; }
    return -1;
}

/* ---------------------------------------------------------------- a Config without a config file */

/* The field's default text into the Config at base (a key the schema gives a default). */
static void field_default(char *base, const Field *f) {
    char *at = base + f->off;
    switch (f->kind) {
    case VAL_INT:
        if (f->size == sizeof(int)) *(int *)at = (int)strtoll(f->dflt, NULL, 10);
        else *(long *)at = strtol(f->dflt, NULL, 10);
        break;
    case VAL_NUM: *(double *)at = strtod(f->dflt, NULL); break;
    case VAL_STR: snprintf(at, f->size, "%s", f->dflt); break;
    case VAL_BOOL: *(int *)at = !strcmp(f->dflt, "true"); break;
    case VAL_ENUM:
        for (int i = 0; f->choices[i]; i++)
            if (!strcmp(f->choices[i], f->dflt)) *(int *)at = i;
        break;
    }
}

void run_spec_defaults(RunSpec *run) {
    Config c;   /* only its run part is read */
    memset(&c, 0, sizeof c);
    for (const Section *s = SECTIONS; s->name; s++)
        for (const Field *f = s->fields; f->key; f++)
            if (f->dflt && f->off >= offsetof(Config, run)) field_default((char *)&c, f);
    c.run.attention = ATTN_AUTO;
    *run = c.run;
}

int config_from_specs(Config *cfg, const char *name, const char *path, const ModelSpec *m, const RunSpec *run, Err *err) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->name, sizeof cfg->name, "%s", name);
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    cfg->model = *m;
    cfg->run = *run;
    return config_validate(cfg, err);
}
