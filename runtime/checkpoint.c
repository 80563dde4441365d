/* checkpoint: read and write llm.c model checkpoints (see checkpoint.h). The host is little-endian, like
   the files, so headers and fp32 bodies are read and written as they are. */
#include "runtime/checkpoint.h"
#include "common/bf16.h"
#include "common/files.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

enum { HEADER_BYTES = CHECKPOINT_HEADER_INTS * 4, CONVERT_CHUNK = 1 << 16 };

static size_t num_params(const GPT2Shape *s) {
    size_t sz[NUM_PARAM_TENSORS];
    return gpt2_param_sizes(s, sz, NULL);
}

/* Shape fields, named as the config names them, for messages. */
static const char *const field_names[6] = {"max_seq_len", "vocab_size", "padded_vocab_size", "n_layer", "n_head",
                                           "n_embd"};

static void shape_fields(const GPT2Shape *s, int f[6]) {
    f[0] = s->max_seq_len; f[1] = s->vocab_size; f[2] = s->padded_vocab_size;
    f[3] = s->n_layer; f[4] = s->n_head; f[5] = s->n_embd;
}

int checkpoint_check_shape(const char *path, const GPT2Shape *s, const char *where, Err *err) {
    int f[6];
    shape_fields(s, f);
    for (int i = 0; i < 6; i++)
        if (f[i] < 1) return err_set(err, "%s: %s is %d %s, expected a positive number", err_show(path), field_names[i], f[i], where);
    if (s->padded_vocab_size < s->vocab_size)
        return err_set(err, "%s: padded_vocab_size %d is smaller than vocab_size %d %s", err_show(path), s->padded_vocab_size, s->vocab_size, where);
    /* Reject absurd shapes before any size arithmetic could overflow (2^50 parameters is ~10^15). */
    double C = s->n_embd, approx = ((double)s->padded_vocab_size + s->max_seq_len + 2) * C + (double)s->n_layer * (12 * C * C + 13 * C);
    if (approx > 1125899906842624.0)
        return err_set(err, "%s: implausible shape %s (~%.3g parameters)", err_show(path), where, approx);
    if (s->n_embd % s->n_head)
        return err_set(err, "%s: n_embd %d is not a multiple of n_head %d %s", err_show(path), s->n_embd, s->n_head, where);
    return 0;
}

/* The architecture's fields (checkpoint.h) into base[0..17]: a checkpoint's at its int 8, a resume state's at 40 */
void checkpoint_arch_put(int32_t *base, const GPT2Shape *s) {
    base[0] = CHECKPOINT_ARCH_LAYOUT; base[1] = s->norm; base[2] = s->position; base[3] = s->mlp;
    base[4] = gpt2_kv_heads(s); base[5] = gpt2_ffn(s); base[6] = s->qk_norm; base[7] = !s->no_bias; base[8] = !s->untied;
    double d[3] = {gpt2_norm_eps(s), gpt2_rope_theta(s), s->logit_softcap};
    memcpy(base + 12, d, sizeof d);
}

int checkpoint_arch_get(const int32_t *base, GPT2Shape *s, const char *path, Err *err) {
    double d[3];
    memcpy(d, base + 12, sizeof d);
    if (base[0] != CHECKPOINT_ARCH_LAYOUT)
        return err_set(err, "%s: architecture layout %d in the header, expected %d", err_show(path), (int)base[0],
                       CHECKPOINT_ARCH_LAYOUT);
    if ((unsigned)base[1] > NORM_RMSNORM || (unsigned)base[2] > POS_ROPE || (unsigned)base[3] > MLP_SWIGLU ||
        (unsigned)base[6] > 1 || (unsigned)base[7] > 1 || (unsigned)base[8] > 1 || base[4] < 1 || base[4] > s->n_head ||
        s->n_head % base[4] || base[5] < 1 || base[5] > (1 << 24) || !(d[0] > 0 && d[0] < 1) || !(d[1] > 0) || !(d[2] >= 0))
        return err_set(err, "%s: the model's architecture in the header is out of range (docs/model.md)", err_show(path));
    s->norm = base[1]; s->position = base[2]; s->mlp = base[3]; s->n_kv_head = base[4]; s->n_ffn = base[5];
    s->qk_norm = base[6]; s->no_bias = !base[7]; s->untied = !base[8];
    s->norm_eps = d[0]; s->rope_theta = d[1]; s->logit_softcap = d[2];
    return 0;
}

/* Opens path and validates its header against the file size; on success *f is positioned at the body. */
static int open_checked(const char *path, FILE **f, GPT2Shape *shape, int *is_bf16, Err *err) {
    *f = fopen_regular(path, "a model checkpoint", err);
    if (!*f) return -1;
    struct stat st;
    int32_t h[CHECKPOINT_HEADER_INTS];
    int rc = -1;
    if (fstat(fileno(*f), &st) != 0) { err_set(err, "%s: cannot stat: %s", err_show(path), strerror(errno)); goto out; }
    if (st.st_size < HEADER_BYTES || fread(h, 4, CHECKPOINT_HEADER_INTS, *f) != CHECKPOINT_HEADER_INTS) {
        err_set(err, "%s: truncated: %lld bytes, a model checkpoint has a %d-byte header", err_show(path),
                (long long)st.st_size, HEADER_BYTES);
        goto out;
    }
    if (h[0] != CHECKPOINT_MAGIC) {
        err_set(err, "%s: bad magic %d, expected %d (an llm.c model checkpoint)", err_show(path), (int)h[0], CHECKPOINT_MAGIC);
        goto out;
    }
    int arch = h[1] == CHECKPOINT_ARCH_FP32 || h[1] == CHECKPOINT_ARCH_BF16;
    if (h[1] != CHECKPOINT_FP32 && h[1] != CHECKPOINT_BF16 && !arch) {
        err_set(err, "%s: checkpoint version %d, expected %d (fp32) or %d (bf16), or %d and %d (another architecture)",
                err_show(path), (int)h[1], CHECKPOINT_FP32, CHECKPOINT_BF16, CHECKPOINT_ARCH_FP32, CHECKPOINT_ARCH_BF16);
        goto out;
    }
    GPT2Shape s = gpt2_shape(h[2], h[3], h[7], h[4], h[5], h[6]);
    if (checkpoint_check_shape(path, &s, "in the checkpoint header", err) || (arch && checkpoint_arch_get(h + 8, &s, path, err))) goto out;
    int bf16 = h[1] == CHECKPOINT_BF16 || h[1] == CHECKPOINT_ARCH_BF16;
    unsigned long long want = HEADER_BYTES + (unsigned long long)num_params(&s) * (bf16 ? 2 : 4);
    if ((unsigned long long)st.st_size != want) {
        err_set(err, "%s: %s: %lld bytes, expected %llu (the 1024-byte header + %zu %s parameters)", err_show(path),
                (unsigned long long)st.st_size < want ? "truncated" : "has trailing data",
                (long long)st.st_size, want, num_params(&s), bf16 ? "bf16" : "fp32");
        goto out;
    }
    *shape = s;
    *is_bf16 = bf16;
    rc = 0;
out:
    if (rc) { fclose(*f); *f = NULL; }
    return rc;
}

int checkpoint_read_header(const char *path, GPT2Shape *shape, int *is_bf16, Err *err) {
    FILE *f;
    int bf16;
    if (open_checked(path, &f, shape, &bf16, err)) return -1;
    fclose(f);
    if (is_bf16) *is_bf16 = bf16;
    return 0;
}

int checkpoint_match_shape(const char *path, const GPT2Shape *got, const GPT2Shape *expect, const char *what, Err *err) {
    int g[6], e[6];
    shape_fields(got, g);
    shape_fields(expect, e);
    for (int i = 0; i < 6; i++)
        if (g[i] != e[i])
            return err_set(err, "%s: %s is %d in the %s, the config says %d", err_show(path), field_names[i], g[i], what, e[i]);
    int32_t ha[CHECKPOINT_HEADER_INTS] = {0}, hb[CHECKPOINT_HEADER_INTS] = {0};
    checkpoint_arch_put(ha, got);
    checkpoint_arch_put(hb, expect);
    if (memcmp(ha, hb, sizeof ha))
        return err_set(err, "%s: the model's architecture in the %s (%s) is not the config's (%s): model.norm, position, mlp, "
                       "n_ffn, n_kv_head, qk_norm, bias, tie_embeddings, norm_eps, rope_theta or logit_softcap differ",
                       err_show(path), what, gpt2_is_gpt2(got) ? "GPT-2" : "another", gpt2_is_gpt2(expect) ? "GPT-2" : "another");
    return 0;
}

static int read_body(const char *path, FILE *f, float *params, size_t n, int bf16, Err *err) {
    if (!bf16) {
        if (fread(params, sizeof(float), n, f) != n) return err_set(err, "%s: read error in the parameters", err_show(path));
        return 0;
    }
    uint16_t *buf = xmalloc(CONVERT_CHUNK * sizeof(uint16_t));
    for (size_t i = 0; i < n; i += CONVERT_CHUNK) {
        size_t k = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        if (fread(buf, sizeof(uint16_t), k, f) != k) { free(buf); return err_set(err, "%s: read error in the parameters", err_show(path)); }
        bf16_to_f32_array(params + i, buf, k);
    }
    free(buf);
    return 0;
}

int checkpoint_check_finite(const char *path, const GPT2Shape *s, const float *params, Err *err) {
    size_t sz[NUM_PARAM_TENSORS], off[NUM_PARAM_TENSORS];
    gpt2_param_sizes(s, sz, off);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        for (size_t i = 0; i < sz[t]; i++) {
            float v = params[off[t] + i];
            if (isfinite(v)) continue;
            size_t per = gpt2_param_per_layer(t) ? sz[t] / (size_t)s->n_layer : sz[t];
            char layer[32] = "";
            if (gpt2_param_per_layer(t)) snprintf(layer, sizeof layer, " of layer %zu", i / per);
            return err_set(err, "%s: tensor %s%s holds %s at element %zu: weights must be finite numbers (a run that "
                           "diverged?)", err_show(path), gpt2_param_names[t], layer, isnan(v) ? "NaN" : "an infinity",
                           i % per);
        }
    return 0;
}

int checkpoint_load(const char *path, const GPT2Shape *expect, float *params, Err *err) {
    FILE *f;
    GPT2Shape s;
    int bf16;
    if (open_checked(path, &f, &s, &bf16, err)) return -1;
    int rc = expect ? checkpoint_match_shape(path, &s, expect, "checkpoint", err) : 0;
    if (!rc) rc = read_body(path, f, params, num_params(&s), bf16, err);
    fclose(f);
    if (!rc) rc = checkpoint_check_finite(path, &s, params, err);
    return rc;
}

static int write_body(FILE *f, const float *params, size_t n, int bf16) {
    if (!bf16) return fwrite(params, sizeof(float), n, f) == n ? 0 : -1;
    uint16_t *buf = xmalloc(CONVERT_CHUNK * sizeof(uint16_t));
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i += CONVERT_CHUNK) {
        size_t k = n - i < CONVERT_CHUNK ? n - i : CONVERT_CHUNK;
        bf16_from_f32_array(buf, params + i, k);
        if (fwrite(buf, sizeof(uint16_t), k, f) != k) rc = -1;
    }
    free(buf);
    return rc;
}

int checkpoint_save(const char *path, const GPT2Shape *shape, const float *params, int as_bf16, Err *err) {
    if (checkpoint_check_shape(path, shape, "in the shape to save", err)) return -1;
    int32_t h[CHECKPOINT_HEADER_INTS] = {0};
    h[0] = CHECKPOINT_MAGIC;
    int arch = !gpt2_is_gpt2(shape);   /* GPT-2's stays llm.c's header, byte for byte */
    h[1] = arch ? (as_bf16 ? CHECKPOINT_ARCH_BF16 : CHECKPOINT_ARCH_FP32) : as_bf16 ? CHECKPOINT_BF16 : CHECKPOINT_FP32;
    if (arch) checkpoint_arch_put(h + 8, shape);
    h[2] = shape->max_seq_len; h[3] = shape->vocab_size; h[4] = shape->n_layer;
    h[5] = shape->n_head; h[6] = shape->n_embd; h[7] = shape->padded_vocab_size;
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (fwrite(h, sizeof h, 1, af.f) != 1 || write_body(af.f, params, num_params(shape), as_bf16)) {
        int e = errno;
        atomic_abort(&af);
        return err_set(err, "%s: write failed: %s (the previous file, if any, is untouched)", err_show(path), strerror(e));
    }
    return atomic_commit(&af, err);
}
