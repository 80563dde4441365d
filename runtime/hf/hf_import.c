/* hf_import: a Hugging Face folder of GPT2LMHeadModel, LlamaForCausalLM or Qwen3ForCausalLM (config.json and model.safetensors, or model.safetensors.index.json and
   its shards) read into our model checkpoint (hf.h). Every tensor is checked against the shape config.json gives
   before anything is written; the checkpoint is written to a temporary name and renamed. */
#include "runtime/hf/hf.h"
#include "common/files.h"
#include "runtime/checkpoint.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SHARDS = 1024 };

typedef struct {
    char dir[4096];
    int n;                  /* files */
    StFile *f;
    json_t *weight_map;     /* sharded: the index's {tensor: file}; NULL for one model.safetensors */
    char index[4200];       /* the index's path, for messages */
} Source;

static void source_close(Source *src) {
    for (int i = 0; i < src->n; i++) st_close(&src->f[i]);
    free(src->f);
    json_decref(src->weight_map);
    memset(src, 0, sizeof *src);
}

/* the shard called name (a plain file name in dir), opened once */
static int open_shard(Source *src, const char *name, Err *err) {
    for (int i = 0; i < src->n; i++) {
        const char *slash = strrchr(src->f[i].path, '/');
        if (!strcmp(slash ? slash + 1 : src->f[i].path, name)) return i;
    }
    if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return err_set(err, "%s: the weight map names the file '%s': expected a file name in the same folder", err_show(src->index),
                       err_show(name));
    if (src->n == MAX_SHARDS) return err_set(err, "%s: more than %d shard files", err_show(src->index), MAX_SHARDS);
    char path[8300];
    snprintf(path, sizeof path, "%s/%s", src->dir, name);
    if (st_open(&src->f[src->n], path, err)) return -1;
    return src->n++;
}

static int open_source(Source *src, const char *dir, Err *err) {
    memset(src, 0, sizeof *src);
    snprintf(src->dir, sizeof src->dir, "%s", dir);
    src->f = xcalloc(MAX_SHARDS, sizeof *src->f);
    char one[4200];
    snprintf(one, sizeof one, "%s/model.safetensors", dir);
    snprintf(src->index, sizeof src->index, "%s/model.safetensors.index.json", dir);
    if (file_exists(one)) {
        if (st_open(&src->f[0], one, err)) return -1;
        src->n = 1;
        return 0;
    }
    if (!file_exists(src->index)) {
        char bin[4200];
        snprintf(bin, sizeof bin, "%s/pytorch_model.bin", dir);
        if (file_exists(bin))
            return err_set(err, "%s: only safetensors import, and the folder has no model.safetensors (nor an index): "
                           "save the model with save_pretrained(dir, safe_serialization=True)", err_show(bin));
        return err_set(err, "%s: no model.safetensors or model.safetensors.index.json in the folder", err_show(dir));
    }
    size_t len;
    char *text = read_file_max(src->index, 16u << 20, &len, err);
    if (!text) return -1;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) return err_set(err, "%s: not valid JSON: %s (line %d, column %d)", err_show(src->index), je.text, je.line, je.column);
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) { json_decref(root); return err_set(err, "%s: no \"weight_map\" object", src->index); }
    src->weight_map = json_incref(map);
    json_decref(root);
    const char *key;
    json_t *v;
    json_object_foreach(src->weight_map, key, v) {
        if (!json_is_string(v)) return err_set(err, "%s: weight_map: tensor %s: its file is not a string", err_show(src->index), err_show(key));
        if (open_shard(src, json_string_value(v), err) < 0) return -1;
    }
    return 0;
}

/* Where tensor name is: *file and its entry there; 0 when it is nowhere (and not in the weight map). */
static int locate(const Source *src, const char *name, int *file, const StTensor **t, Err *err) {
    if (!src->weight_map) {
        *file = 0;
        *t = st_find(&src->f[0], name);
        return *t ? 1 : 0;
    }
    const json_t *v = json_object_get(src->weight_map, name);
    if (!v) return 0;
    for (int i = 0; i < src->n; i++) {
        const char *slash = strrchr(src->f[i].path, '/');
        if (strcmp(slash + 1, json_string_value(v))) continue;
        *file = i;
        if ((*t = st_find(&src->f[i], name))) return 1;
        return err_set(err, "%s: tensor %s is not in it, though %s says it is", err_show(src->f[i].path), err_show(name), src->index);
    }
    return 0;
}

static int shape_matches(const StTensor *st, const HfTensor *t) {
    if (st->ndim != t->ndim) return 0;
    for (int d = 0; d < t->ndim; d++)
        if (st->shape[d] != t->shape[d]) return 0;
    return 1;
}

static void shape_text(char *out, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(out + k, n - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < n) snprintf(out + k, n - k, "]");
}

/* A tensor the folder may hold besides ours: buffers older transformers saved (GPT-2's attention masks, Llama's
   rotary inv_freq), and a tied lm_head. */
static int ignorable(const GPT2Shape *s, const char *name) {
    size_t n = strlen(name);
    static const char *const gpt2[] = {".attn.bias", ".attn.masked_bias", NULL}, *const llama[] = {".rotary_emb.inv_freq", NULL};
    for (const char *const *e = gpt2_is_gpt2(s) ? gpt2 : llama; *e; e++) {
        size_t k = strlen(*e);
        if (n > k && !strcmp(name + n - k, *e)) return 1;
    }
    return !s->untied && !strcmp(name, "lm_head.weight");
}

/* Every tensor of every file is one of ours (under prefix), or one ignorable: anything else is another model. */
static int check_unexpected(const Source *src, const GPT2Shape *s, const HfTensor *t, int n, const char *prefix, Err *err) {
    size_t pl = strlen(prefix);
    for (int i = 0; i < src->n; i++)
        for (int j = 0; j < src->f[i].n; j++) {
            const char *name = src->f[i].t[j].name;
            if (ignorable(s, name)) continue;
            int ours = 0;
            if (!strncmp(name, prefix, pl))
                for (int k = 0; k < n && !ours; k++) ours = !strcmp(name + pl, t[k].name);
            if (ours) continue;
            if (gpt2_is_gpt2(s))
                return err_set(err, "%s: tensor %s is not part of a GPT2LMHeadModel (expected only %swte.weight, "
                               "%sh.N..., %sln_f..., lm_head.weight)", err_show(src->f[i].path), err_show(name), prefix, prefix, prefix);
            char why[256];
            return err_set(err, "%s: tensor %s is not part of the %s that config.json describes (its biases, "
                           "tie_word_embeddings and layers say which tensors it has)", err_show(src->f[i].path),
                           err_show(name), hf_class_name(hf_family(s, why, sizeof why)));
        }
    return 0;
}

/* Every value of tensor name (read from path) a finite number: a NaN or an infinity is an error naming both */
static int all_finite(const char *path, const char *name, const float *v, size_t n, Err *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return err_set(err, "%s: tensor %s holds %s at element %zu: weights must be finite numbers", err_show(path),
                           err_show(name), isnan(v[i]) ? "NaN" : "an infinity", i);
    return 0;
}

/* lm_head.weight of a tied model, where there is one: it must be wte (t0, already read into params); buf has room */
static int check_lm_head(const Source *src, const GPT2Shape *s, const HfTensor *t0, const float *params, float *buf,
                         const char *prefix, Err *err) {
    int file, rc = 0;
    if (s->untied) return 0;   /* one of the model's own tensors */
    const StTensor *st;
    int found = locate(src, "lm_head.weight", &file, &st, err);
    if (found <= 0) return found;
    char want[64], got[64];
    shape_text(want, sizeof want, t0->ndim, t0->shape);
    if (!shape_matches(st, t0)) {
        shape_text(got, sizeof got, st->ndim, st->shape);
        rc = err_set(err, "%s: tensor lm_head.weight has shape %s, expected %s (wte's)", err_show(src->f[file].path), got, want);
    } else if (!(rc = st_read_f32(&src->f[file], st, buf, err))) {
        if (memcmp(buf, params, hf_tensor_elems(t0) * sizeof *buf) && gpt2_is_gpt2(s))
            rc = err_set(err, "%s: lm_head.weight differs from %swte.weight: gpt2gen's model ties them (the output "
                         "layer is the embedding), so this model cannot be imported", err_show(src->f[file].path), prefix);
        else if (memcmp(buf, params, hf_tensor_elems(t0) * sizeof *buf))
            rc = err_set(err, "%s: lm_head.weight differs from %s, though config.json ties them (tie_word_embeddings "
                         "is true), so this model cannot be imported", err_show(src->f[file].path), t0->name);
    }
    return rc;
}

/* Every tensor of shape s found with its shape, and nothing else there; with params, each read into them (checked
   finite) and lm_head checked against wte. */
static int read_tensors(const Source *src, const GPT2Shape *s, const char *config, float *params, HfReport *r, Err *err) {
    int n = hf_tensor_count(s), rc = 0;
    HfTensor *t = xmalloc((size_t)n * sizeof *t);
    hf_tensors(s, t);
    /* GPT2LMHeadModel's tensors are under "transformer."; GPT2Model's (and the Hub's gpt2) have no prefix */
    int file;
    const StTensor *st;
    const char *prefix = hf_prefix(s);
    int has = *prefix ? locate(src, "transformer.wte.weight", &file, &st, err) : 1;
    if (has < 0) { free(t); return -1; }
    if (!has) {
        if ((has = locate(src, "wte.weight", &file, &st, err)) < 0) { free(t); return -1; }
        if (has) prefix = "";
    }
    size_t most = 0;
    for (int i = 0; i < n; i++)
        if (hf_tensor_elems(&t[i]) > most) most = hf_tensor_elems(&t[i]);
    float *buf = params ? xmalloc(most * sizeof *buf) : NULL;   /* the tensors' shapes, checked first, bound it */
    rc = check_unexpected(src, s, t, n, prefix, err);
    for (int i = 0; i < n && !rc; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, t[i].name);
        int found = locate(src, name, &file, &st, err);
        char want[64], got[64];
        shape_text(want, sizeof want, t[i].ndim, t[i].shape);
        if (found < 0) rc = -1;
        else if (!found)
            rc = err_set(err, "%s: missing tensor %s (shape %s, for the model of %s)",
                         src->weight_map ? src->index : src->f[0].path, name, want, config);
        else if (!shape_matches(st, &t[i])) {
            shape_text(got, sizeof got, st->ndim, st->shape);
            rc = err_set(err, "%s: tensor %s has shape %s, expected %s (the model of %s)", err_show(src->f[file].path), name, got, want,
                         config);
        } else if (params && !(rc = st_read_f32(&src->f[file], st, buf, err)) &&
                   !(rc = all_finite(src->f[file].path, name, buf, hf_tensor_elems(&t[i]), err))) {
            hf_scatter(s, &t[i], buf, params);
            r->params += hf_tensor_elems(&t[i]);
        }
    }
    if (!rc && params) rc = check_lm_head(src, s, &t[0], params, buf, prefix, err);
    for (int i = 0; i < src->n && !rc && params; i++)
        for (int j = 0; j < src->f[i].n; j++) r->ignored += ignorable(s, src->f[i].t[j].name);
    free(buf);
    free(t);
    return rc;
}

int hf_import(const char *dir, const char *out, int as_bf16, int force, HfReport *r, Err *err) {
    memset(r, 0, sizeof *r);
    char config[4200];
    if ((size_t)snprintf(config, sizeof config, "%s/config.json", dir) >= 4096) return err_set(err, "%s: path too long", err_show(dir));
    GPT2Shape s;
    if (hf_read_config(config, &s, err)) return -1;
    r->shape = s;
    if (file_exists(out) && !force) return err_set(err, "%s exists: give --force to replace it", err_show(out));
    Source src;
    /* every tensor's name and shape first, without reading: the shapes then hold, in the files, the weights that the
       shape of config.json asks memory for, so that a hostile config.json cannot ask for terabytes */
    if (open_source(&src, dir, err) || read_tensors(&src, &s, config, NULL, r, err)) { source_close(&src); return -1; }
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, NULL);
    float *params = xcalloc(np, sizeof *params);   /* wte's padding rows stay zero */
    int rc = read_tensors(&src, &s, config, params, r, err);
    source_close(&src);
    if (!rc) rc = checkpoint_save(out, &s, params, as_bf16, err);
    free(params);
    return rc;
}
