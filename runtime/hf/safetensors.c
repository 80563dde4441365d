/* safetensors: read and write Hugging Face's tensor files (see safetensors.h). The host is little-endian, like
   the files, so the header length and the data are read and written as they are. */
#include "runtime/hf/safetensors.h"
#include "common/bf16.h"
#include "common/fp16.h"
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CHUNK = 1 << 16 };   /* elements converted at a time */

/* Every byte-sized dtype of the safetensors format; gpt2gen reads the three float ones. */
static const struct { const char *name; int size; StDtype kind; } DTYPES[] = {
    {"F32", 4, ST_F32}, {"F16", 2, ST_F16}, {"BF16", 2, ST_BF16},
    {"F64", 8, ST_OTHER}, {"I64", 8, ST_OTHER}, {"U64", 8, ST_OTHER}, {"I32", 4, ST_OTHER}, {"U32", 4, ST_OTHER},
    {"I16", 2, ST_OTHER}, {"U16", 2, ST_OTHER}, {"I8", 1, ST_OTHER}, {"U8", 1, ST_OTHER}, {"BOOL", 1, ST_OTHER},
    {"F8_E4M3", 1, ST_OTHER}, {"F8_E5M2", 1, ST_OTHER},
};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

const char *st_dtype_name(StDtype d) { return d == ST_F32 ? "F32" : d == ST_F16 ? "F16" : d == ST_BF16 ? "BF16" : "?"; }

static int elem_size(StDtype d) { return d == ST_F32 ? 4 : 2; }

/* ---------- reading ---------- */

/* reads exactly n bytes at offset off */
static int read_at(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        p += got; n -= (size_t)got; off += (uint64_t)got;
    }
    return 0;
}

/* A JSON integer that is >= 0, as uint64; -1 if it is not one. */
static int json_count(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

/* One tensor's entry of the header, checked on its own and against the data's length. */
static int parse_entry(const StFile *f, const char *name, const json_t *e, StTensor *t, Err *err) {
    const char *nm = err_show(name);
    if (!json_is_object(e)) return err_set(err, "%s: tensor %s: its header entry is not an object", err_show(f->path), nm);
    const json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"), *of = json_object_get(e, "data_offsets");
    if (!json_is_string(dt)) return err_set(err, "%s: tensor %s: no \"dtype\" string", f->path, nm);
    int k = 0;
    while (k < N_DTYPES && strcmp(DTYPES[k].name, json_string_value(dt))) k++;
    if (k == N_DTYPES)
        return err_set(err, "%s: tensor %s: unknown dtype '%s' (known: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, ...)", err_show(f->path), nm, err_show(json_string_value(dt)));
    snprintf(t->dtype, sizeof t->dtype, "%s", DTYPES[k].name);
    t->kind = DTYPES[k].kind;
    t->elem_size = DTYPES[k].size;
    if (!json_is_array(sh)) return err_set(err, "%s: tensor %s: no \"shape\" array", f->path, nm);
    if (json_array_size(sh) > ST_MAX_DIMS)
        return err_set(err, "%s: tensor %s: %zu dimensions, at most %d are supported", err_show(f->path), nm, json_array_size(sh), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(sh);
    t->count = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t n;
        if (json_count(json_array_get(sh, (size_t)d), &n))
            return err_set(err, "%s: tensor %s: shape entry %d is not a non-negative integer", err_show(f->path), nm, d);
        if (__builtin_mul_overflow(t->count, n, &t->count))
            return err_set(err, "%s: tensor %s: the shape's element count overflows", err_show(f->path), nm);
        t->shape[d] = (int64_t)n;
    }
    if (!json_is_array(of) || json_array_size(of) != 2 || json_count(json_array_get(of, 0), &t->begin) ||
        json_count(json_array_get(of, 1), &t->end))
        return err_set(err, "%s: tensor %s: \"data_offsets\" is not [begin, end] of non-negative integers", f->path, nm);
    if (t->begin > t->end || t->end > f->data_len)
        return err_set(err, "%s: tensor %s: data_offsets [%llu, %llu] outside the data (%llu bytes after the header)", err_show(f->path), nm, (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)f->data_len);
    uint64_t bytes;
    if (__builtin_mul_overflow(t->count, (uint64_t)t->elem_size, &bytes) || bytes != t->end - t->begin)
        return err_set(err, "%s: tensor %s: its shape holds %llu %s elements, %llu bytes, but data_offsets give %llu bytes", err_show(f->path), nm, (unsigned long long)t->count, t->dtype, (unsigned long long)t->count * (unsigned long long)t->elem_size,
                       (unsigned long long)(t->end - t->begin));
    t->name = xstrdup(name);
    return 0;
}

/* qsort_r's order of tensor indices of file ctx: by their first byte */
static int by_begin(const void *a, const void *b, void *ctx) {
    const StFile *f = ctx;
    const StTensor *x = &f->t[*(const int *)a], *y = &f->t[*(const int *)b];
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* No two tensors share a byte (empty ones take none). */
static int check_overlap(StFile *f, Err *err) {
    int *idx = xmalloc((size_t)(f->n ? f->n : 1) * sizeof *idx), m = 0;
    for (int i = 0; i < f->n; i++)
        if (f->t[i].end > f->t[i].begin) idx[m++] = i;
    qsort_r(idx, (size_t)m, sizeof *idx, by_begin, f);
    int rc = 0;
    for (int i = 1; i < m && !rc; i++) {
        const StTensor *p = &f->t[idx[i - 1]], *q = &f->t[idx[i]];
        if (p->end > q->begin)
            rc = err_set(err, "%s: tensor %s: data_offsets [%llu, %llu] overlap those of tensor %s [%llu, %llu]", err_show(f->path),
                         err_show(q->name), (unsigned long long)q->begin, (unsigned long long)q->end, err_show(p->name),
                         (unsigned long long)p->begin, (unsigned long long)p->end);
    }
    free(idx);
    return rc;
}

static int parse_header(StFile *f, const char *text, size_t len, Err *err) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return err_set(err, "%s: the header is not valid JSON: %s (line %d, column %d)", err_show(f->path), je.text, je.line, je.column);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_set(err, "%s: the header is not a JSON object", err_show(f->path));
    } else {
        f->t = xcalloc(json_object_size(root) + 1, sizeof *f->t);
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            if (!strcmp(key, "__metadata__")) {
                if (!json_is_object(v)) { rc = err_set(err, "%s: \"__metadata__\" is not an object", f->path); break; }
                continue;
            }
            if ((rc = parse_entry(f, key, v, &f->t[f->n], err))) break;
            f->n++;
        }
    }
    json_decref(root);
    return rc ? rc : check_overlap(f, err);
}

int st_open(StFile *f, const char *path, Err *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    snprintf(f->path, sizeof f->path, "%s", path);
    FILE *fp = fopen_regular(path, "a safetensors file", err);
    if (!fp) return -1;
    f->fd = dup(fileno(fp));
    fclose(fp);
    if (f->fd < 0) return err_set(err, "%s: cannot open: %s", err_show(path), strerror(errno));
    struct stat st;
    uint64_t n;
    if (fstat(f->fd, &st) != 0) { err_set(err, "%s: cannot stat: %s", err_show(path), strerror(errno)); goto fail; }
    uint64_t size = (uint64_t)st.st_size;
    if (size < 8 || read_at(f->fd, &n, 8, 0)) {
        err_set(err, "%s: truncated: %llu bytes, a safetensors file starts with an 8-byte header length", err_show(path),
                (unsigned long long)size);
        goto fail;
    }
    if (n > size - 8) {
        err_set(err, "%s: the header length is %llu bytes, more than the %llu bytes after it: truncated, or not a "
                "safetensors file", err_show(path), (unsigned long long)n, (unsigned long long)(size - 8));
        goto fail;
    }
    if (n > ST_MAX_HEADER) {
        err_set(err, "%s: the header length is %llu bytes, more than the %u the format allows", err_show(path),
                (unsigned long long)n, ST_MAX_HEADER);
        goto fail;
    }
    f->data_start = 8 + n;
    f->data_len = size - f->data_start;
    char *text = xmalloc(n + 1);
    if (read_at(f->fd, text, n, 8)) { free(text); err_set(err, "%s: read error in the header", err_show(path)); goto fail; }
    text[n] = 0;
    int rc = parse_header(f, text, n, err);
    free(text);
    if (!rc) return 0;
fail:
    st_close(f);
    return -1;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

int st_read_f32(const StFile *f, const StTensor *t, float *out, Err *err) {
    if (t->kind == ST_OTHER)
        return err_set(err, "%s: tensor %s: dtype %s, expected F32, F16 or BF16", err_show(f->path), err_show(t->name), t->dtype);
    if (t->kind == ST_F32) {
        if (read_at(f->fd, out, t->count * 4, f->data_start + t->begin))
            return err_set(err, "%s: tensor %s: read error (the file changed?)", err_show(f->path), err_show(t->name));
        return 0;
    }
    uint16_t *buf = xmalloc(CHUNK * sizeof *buf);
    int rc = 0;
    for (uint64_t i = 0; i < t->count && !rc; i += CHUNK) {
        size_t k = t->count - i < CHUNK ? (size_t)(t->count - i) : CHUNK;
        if (read_at(f->fd, buf, k * 2, f->data_start + t->begin + i * 2))
            rc = err_set(err, "%s: tensor %s: read error (the file changed?)", err_show(f->path), err_show(t->name));
        else x16_to_f32_array(t->kind == ST_F16, out + i, buf, k);
    }
    free(buf);
    return rc;
}

void st_close(StFile *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

/* ---------- writing ---------- */

int st_write_begin(StWriter *w, const char *path, const StSpec *specs, int n, StDtype dtype, Err *err) {
    memset(w, 0, sizeof *w);
    w->dtype = dtype;
    w->n = n;
    w->count = xcalloc((size_t)(n ? n : 1), sizeof *w->count);
    json_t *root = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(root, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        json_t *e = json_object(), *shape = json_array(), *offs = json_array();
        uint64_t c = 1;
        for (int d = 0; d < specs[i].ndim; d++) {
            c *= (uint64_t)specs[i].shape[d];
            json_array_append_new(shape, json_integer(specs[i].shape[d]));
        }
        w->count[i] = c;
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += c * (uint64_t)elem_size(dtype);
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_object_set_new(e, "dtype", json_string(st_dtype_name(dtype)));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets", offs);
        json_object_set_new(root, specs[i].name, e);
    }
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) { free(w->count); w->count = NULL; return err_set(err, "%s: cannot make the JSON header", err_show(path)); }
    size_t len = strlen(text);
    uint64_t padded = (len + 7) / 8 * 8;   /* the data starts at a multiple of 8 */
    if (atomic_open(&w->af, path, err)) { free(text); free(w->count); w->count = NULL; return -1; }
    int bad = fwrite(&padded, 8, 1, w->af.f) != 1 || fwrite(text, 1, len, w->af.f) != len;
    for (size_t i = len; i < padded && !bad; i++) bad = fputc(' ', w->af.f) == EOF;
    free(text);
    w->buf = xmalloc(CHUNK * sizeof *w->buf);
    if (bad) {
        int e = errno;
        st_write_abort(w);
        return err_set(err, "%s: write failed: %s", err_show(path), strerror(e));
    }
    return 0;
}

int st_write_tensor(StWriter *w, const float *data, uint64_t count, Err *err) {
    if (w->next >= w->n || count != w->count[w->next])
        return err_set(err, "%s: tensor %d of %d given %llu elements, declared %llu", err_show(w->af.path), w->next + 1, w->n,
                       (unsigned long long)count, w->next < w->n ? (unsigned long long)w->count[w->next] : 0ull);
    int bad = 0;
    if (w->dtype == ST_F32) bad = fwrite(data, 4, count, w->af.f) != count;
    for (uint64_t i = 0; w->dtype != ST_F32 && i < count && !bad; i += CHUNK) {
        size_t k = count - i < CHUNK ? (size_t)(count - i) : CHUNK;
        x16_from_f32_array(w->dtype == ST_F16, w->buf, data + i, k);
        bad = fwrite(w->buf, 2, k, w->af.f) != k;
    }
    if (bad) return err_set(err, "%s: write failed: %s", err_show(w->af.path), strerror(errno));
    w->next++;
    return 0;
}

int st_write_end(StWriter *w, Err *err) {
    int rc;
    if (w->next != w->n) {
        rc = err_set(err, "%s: %d of %d tensors written", err_show(w->af.path), w->next, w->n);
        atomic_abort(&w->af);
    } else {
        rc = atomic_commit(&w->af, err);
    }
    free(w->count); free(w->buf);
    w->count = NULL; w->buf = NULL;
    return rc;
}

void st_write_abort(StWriter *w) {
    if (w->af.f) atomic_abort(&w->af);
    free(w->count); free(w->buf);
    w->count = NULL; w->buf = NULL;
}
