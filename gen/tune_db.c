/* tune_db: the tuning database file and its keys (see tune_db.h). */
#include "gen/tune_db.h"
#include "gen/emit.h"
#include "common/files.h"
#include "common/sha256.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const tune_key_names[TUNE_KEY_FIELDS] = {"gpu", "arch", "driver", "cuda", "nvrtc", "cudnn", "template",
                                                     "shape", "precision"};

const char *tune_db_path(const Env *env) {
    const char *p = env_or_defaults(env)->tune_db;
    return p ? p : "build/tune-db.txt";
}

/* a field value without spaces, '=' or control bytes ("NVIDIA H200" -> "NVIDIA_H200"), never empty */
static void field_set(char *dst, size_t n, const char *src) {
    size_t j = 0;
    for (const char *s = src; *s && j + 1 < n; s++) dst[j++] = (unsigned char)*s <= ' ' || *s == '=' ? '_' : *s;
    if (!j && n > 4) { memcpy(dst, "none", 5); return; }
    dst[j] = 0;
}

void tune_db_name(const char *name, char *out, size_t n) { field_set(out, n, name); }

/* ---------------------------------------------------------------- records as lines */

void tune_record_format(const TuneRecord *r, char *out, size_t n) {
    int len = snprintf(out, n, "%s %s %s %s us=%.3f status=%s", r->record, r->what, r->name, r->variant, r->us, r->status);
    if (r->default_us >= 0 && len > 0 && (size_t)len < n) len += snprintf(out + len, n - len, " default_us=%.3f", r->default_us);
    for (int i = 0; i < TUNE_KEY_FIELDS && len > 0 && (size_t)len < n; i++)
        len += snprintf(out + len, n - len, " %s=%s", tune_key_names[i], r->key.f[i]);
}

static int parse_time(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 1e12) return -1;
    *out = v;
    return 0;
}

static int copy_word(char *dst, size_t n, const char *src, size_t len) {
    if (!len || len >= n) return -1;
    memcpy(dst, src, len);
    dst[len] = 0;
    return 0;
}

int tune_record_parse(const char *line, TuneRecord *r, char *why, size_t n) {
    memset(r, 0, sizeof *r);
    r->us = r->default_us = -1;
    int have[TUNE_KEY_FIELDS] = {0}, word = 0, have_us = 0;
    const char *p = line;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!len) { snprintf(why, n, "two spaces in a row"); return -1; }
        char tok[512];
        if (copy_word(tok, sizeof tok, p, len)) { snprintf(why, n, "a field of %zu characters", len); return -1; }
        if (word < 4) {
            char *dst[4] = {r->record, r->what, r->name, r->variant};
            size_t cap[4] = {sizeof r->record, sizeof r->what, sizeof r->name, sizeof r->variant};
            if (copy_word(dst[word], cap[word], tok, len)) { snprintf(why, n, "field %d is too long", word + 1); return -1; }
        } else {
            char *eq = strchr(tok, '=');
            if (!eq) { snprintf(why, n, "'%.40s' is not key=value", tok); return -1; }
            *eq = 0;
            const char *v = eq + 1;
            int known = 0;
            if (!strcmp(tok, "us")) { known = 1; have_us = 1; if (parse_time(v, &r->us)) { snprintf(why, n, "us: '%.40s' is not a time", v); return -1; } }
            else if (!strcmp(tok, "default_us")) { known = 1; if (parse_time(v, &r->default_us)) { snprintf(why, n, "default_us: '%.40s' is not a time", v); return -1; } }
            else if (!strcmp(tok, "status")) { known = 1; if (copy_word(r->status, sizeof r->status, v, strlen(v))) { snprintf(why, n, "bad status"); return -1; } }
            for (int i = 0; i < TUNE_KEY_FIELDS && !known; i++)
                if (!strcmp(tok, tune_key_names[i])) {
                    known = have[i] = 1;
                    if (copy_word(r->key.f[i], TUNE_FIELD_MAX, v, strlen(v))) { snprintf(why, n, "%s: empty or too long", tok); return -1; }
                }
            if (!known) { snprintf(why, n, "unknown field '%.40s'", tok); return -1; }
        }
        word++;
        p += len;
        if (*p == ' ') p++;
    }
    if (word < 4) { snprintf(why, n, "%d fields, expected at least 4 (record what name variant)", word); return -1; }
    if (strcmp(r->record, "measure") && strcmp(r->record, "best")) { snprintf(why, n, "record '%s': expected measure or best", r->record); return -1; }
    if (strcmp(r->what, "kernel") && strcmp(r->what, "matmul") && strcmp(r->what, "attention")) {
        snprintf(why, n, "'%s': expected kernel, matmul or attention", r->what);
        return -1;
    }
    if (!have_us) { snprintf(why, n, "no us="); return -1; }
    if (!r->status[0]) { snprintf(why, n, "no status="); return -1; }
    for (int i = 0; i < TUNE_KEY_FIELDS; i++)
        if (!have[i]) { snprintf(why, n, "no %s= (the key)", tune_key_names[i]); return -1; }
    return 0;
}

/* ---------------------------------------------------------------- the file */

void tune_db_free(TuneDb *db) {
    free(db->r);
    db->r = NULL;
    db->n = db->cap = 0;
}

static int same_record(const TuneRecord *a, const TuneRecord *b) {
    return !strcmp(a->record, b->record) && !strcmp(a->what, b->what) && !strcmp(a->name, b->name) &&
           !strcmp(a->variant, b->variant) && !memcmp(&a->key, &b->key, sizeof a->key);
}
static int same_entry(const TuneRecord *a, const TuneRecord *b) {   /* best: one per what, name and key */
    if (strcmp(a->record, "best") || strcmp(b->record, "best")) return same_record(a, b);
    return !strcmp(a->what, b->what) && !strcmp(a->name, b->name) && !memcmp(&a->key, &b->key, sizeof a->key);
}

void tune_db_put(TuneDb *db, const TuneRecord *r) {
    for (int i = 0; i < db->n; i++)
        if (same_entry(&db->r[i], r)) { db->r[i] = *r; return; }
    if (db->n == db->cap) {
        int cap = db->cap ? 2 * db->cap : 64;
        TuneRecord *grown = realloc(db->r, (size_t)cap * sizeof *grown);
        if (!grown) { fprintf(stderr, "gpt2gen: out of host memory for the tuning database\n"); exit(EXIT_FAIL); }
        db->r = grown;
        db->cap = cap;
    }
    db->r[db->n++] = *r;
}

void tune_db_load(TuneDb *db, const char *path, FILE *msgs) {
    memset(db, 0, sizeof *db);
    snprintf(db->path, sizeof db->path, "%s", path);
    size_t len;
    Err err;
    char *text = read_file(path, &len, &err);
    if (!text) {
        db->missing = errno == ENOENT;
        if (msgs) fprintf(msgs, "tune db %s: %s; default variants (run `gpt2gen tune` to make it)\n", path,
                          db->missing ? "not found" : err.msg);
        return;
    }
    int line = 0;
    for (char *p = text; p < text + len;) {
        char *e = memchr(p, '\n', (size_t)(text + len - p));
        int complete = e != NULL;
        if (!e) e = text + len;
        *e = 0;
        line++;
        char why[256];
        TuneRecord r;
        if (!*p || *p == '#') { p = e + 1; continue; }
        if (memchr(p, 0, (size_t)(e - p))) snprintf(why, sizeof why, "a NUL byte");
        else if (!complete) snprintf(why, sizeof why, "the last line is cut short (no newline): a tune was killed while writing it?");
        else if (tune_record_parse(p, &r, why, sizeof why) == 0) {
            r.line = line;
            tune_db_put(db, &r);
            p = e + 1;
            continue;
        }
        db->corrupt++;
        if (msgs) fprintf(msgs, "tune db %s:%d: %s; line ignored\n", path, line, why);
        p = e + 1;
    }
    free(text);
}

int tune_db_append(const TuneDb *db, const TuneRecord *r, Err *err) {
    char line[2048];
    tune_record_format(r, line, sizeof line);
    int fd = open(db->path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) return err_set(err, "%s: cannot append to the tuning database: %s", db->path, strerror(errno));
    /* a file a killed writer left without its last newline: start on a line of our own */
    off_t end = lseek(fd, 0, SEEK_END);
    char last = '\n';
    if (end > 0) {
        int rfd = open(db->path, O_RDONLY);
        if (rfd >= 0) { if (pread(rfd, &last, 1, end - 1) != 1) last = '\n'; close(rfd); }
    }
    size_t n = strlen(line);
    line[n++] = '\n';
    int rc = (last != '\n' && write(fd, "\n", 1) != 1) || write(fd, line, n) != (ssize_t)n || fsync(fd) != 0;
    close(fd);
    return rc ? err_set(err, "%s: cannot append to the tuning database: %s", db->path, strerror(errno)) : 0;
}

int tune_db_rewrite(const TuneDb *db, Err *err) {
    AtomicFile af;
    if (atomic_open(&af, db->path, err)) return -1;
    fprintf(af.f, "# gpt2gen tuning database (README.md, \"Tuning\"): one record per line, written by `gpt2gen tune`\n");
    char line[2048];
    for (int i = 0; i < db->n; i++) {
        tune_record_format(&db->r[i], line, sizeof line);
        fprintf(af.f, "%s\n", line);
    }
    return atomic_commit(&af, err);
}

const TuneRecord *tune_db_find(const TuneDb *db, const char *record, const char *what, const char *name,
                               const char *variant, const TuneKey *key, const TuneRecord **stale) {
    if (stale) *stale = NULL;
    for (int i = 0; i < db->n; i++) {
        const TuneRecord *r = &db->r[i];
        if (strcmp(r->record, record) || strcmp(r->what, what) || strcmp(r->name, name)) continue;
        if (variant && strcmp(r->variant, variant)) continue;
        if (!memcmp(&r->key, key, sizeof *key)) return r;
        int same_config = !strcmp(r->key.f[7], key->f[7]) && !strcmp(r->key.f[8], key->f[8]);
        if (stale && (!*stale || same_config)) *stale = r;
    }
    return NULL;
}

void tune_key_diff(const TuneKey *a, const TuneKey *b, char *out, size_t n) {
    static const char *const what[TUNE_KEY_FIELDS] = {"another GPU", "another arch", "another driver",
                                                      "another CUDA", "another NVRTC", "another cuDNN",
                                                      "another template", "another shape", "another precision"};
    for (int i = 0; i < TUNE_KEY_FIELDS; i++)
        if (strcmp(a->f[i], b->f[i])) {
            snprintf(out, n, "%s: %s=%.60s (here %.60s)", what[i], tune_key_names[i], a->f[i], b->f[i]);
            return;
        }
    snprintf(out, n, "the same key");
}

/* ---------------------------------------------------------------- keys */

static void key_env(TuneKey *k, const TuneEnv *env, const Plan *plan) {
    memset(k, 0, sizeof *k);
    const char *v[6] = {env->gpu, env->arch, env->driver, env->cuda, env->nvrtc, env->cudnn};
    for (int i = 0; i < 6; i++) field_set(k->f[i], TUNE_FIELD_MAX, v[i]);
    field_set(k->f[8], TUNE_FIELD_MAX, precision_name(plan->step.precision));
}

/* the first 16 hex digits of the SHA-256 of the texts a module is made of (its template and common.cuh) */
static void template_hash(const char *template_path, char *out, size_t n) {
    const char *paths[2] = {"templates/common.cuh", template_path};
    Sha256 s;
    sha256_init(&s);
    for (int i = 0; i < 2; i++) {
        Err err;
        char *t = template_load(paths[i], &err);
        if (t) { sha256_update(&s, t, strlen(t)); free(t); }
        else sha256_update(&s, "missing", 7);
    }
    char hex[65];
    sha256_hex(&s, hex);
    snprintf(out, n, "%.16s", hex);
}

static void shape_of(const Plan *p, char *out, size_t n) {
    snprintf(out, n, "B%d,T%d,C%d,NH%d,L%d,V%d,maxT%d,recompute%d", p->step.B, p->step.T, p->model.n_embd,
             p->model.n_head, p->model.n_layer, p->model.vocab_size, p->model.max_seq_len, p->step.recompute);
}

void tune_key_kernel(TuneKey *k, const TuneEnv *env, const Plan *plan, int fam) {
    key_env(k, env, plan);
    template_hash(plan->families[fam].decl->template_path, k->f[6], TUNE_FIELD_MAX);
    shape_of(plan, k->f[7], TUNE_FIELD_MAX);
}

void tune_key_matmul(TuneKey *k, const TuneEnv *env, const Plan *plan, int id, const char *cublaslt) {
    key_env(k, env, plan);
    snprintf(k->f[6], TUNE_FIELD_MAX, "cublasLt%s", cublaslt);
    const PlanMatmul *m = &plan->matmuls[id];
    snprintf(k->f[7], TUNE_FIELD_MAX, "m%d,n%d,k%d,op%c%c,batch%d,bias%d,epi%d,acc%d", m->m, m->n, m->k,
             m->transA ? 'T' : 'N', m->transB ? 'T' : 'N', m->batch, m->bias, (int)m->epilogue, m->accumulate);
}

void tune_key_attention(TuneKey *k, const TuneEnv *env, const Plan *plan) {
    for (int i = 0; i < plan->n_families; i++)
        if (!strcmp(plan->families[i].decl->family, "attention")) { tune_key_kernel(k, env, plan, i); return; }
    key_env(k, env, plan);
}

int tune_env_parse(TuneEnv *env, const char *s, char *why, size_t n) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) { snprintf(why, n, "'%s' is not key=value", tok); return -1; }
        *eq = 0;
        char *fields[6] = {env->gpu, env->arch, env->driver, env->cuda, env->nvrtc, env->cudnn};
        size_t caps[6] = {sizeof env->gpu, sizeof env->arch, sizeof env->driver, sizeof env->cuda, sizeof env->nvrtc,
                          sizeof env->cudnn};
        int i = 0;
        while (i < 6 && strcmp(tok, tune_key_names[i])) i++;
        if (i == 6) { snprintf(why, n, "unknown field '%s' (gpu, arch, driver, cuda, nvrtc, cudnn)", tok); return -1; }
        field_set(fields[i], caps[i], eq + 1);
    }
    return 0;
}
