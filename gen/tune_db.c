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
#include <sys/stat.h>
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

static const char *const statuses[] = {"ok", "mismatch", "compile", "launch", NULL};   /* what a tune writes */

int tune_record_parse(const char *line, TuneRecord *r, char *why, size_t n) {
    memset(r, 0, sizeof *r);
    r->us = r->default_us = -1;
    for (const char *c = line; *c; c++)
        if ((unsigned char)*c < ' ' || *c == 0x7f) {
            snprintf(why, n, "a control byte 0x%02x at column %d", (unsigned char)*c, (int)(c - line) + 1);
            return -1;
        }
    static const char *const value_names[3] = {"us", "default_us", "status"};
    unsigned seen = 0;
    int word = 0;
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
            int f = 0;   /* 0 us, 1 default_us, 2 status, 3 + i key field i */
            while (f < 3 + TUNE_KEY_FIELDS && strcmp(tok, f < 3 ? value_names[f] : tune_key_names[f - 3])) f++;
            if (f == 3 + TUNE_KEY_FIELDS) { snprintf(why, n, "unknown field '%.40s'", tok); return -1; }
            if (seen >> f & 1) { snprintf(why, n, "%.40s= twice", tok); return -1; }
            seen |= 1u << f;
            if (f < 2 && parse_time(v, f ? &r->default_us : &r->us)) { snprintf(why, n, "%s: '%.40s' is not a time", tok, v); return -1; }
            if (f == 2 && copy_word(r->status, sizeof r->status, v, strlen(v))) { snprintf(why, n, "bad status"); return -1; }
            if (f >= 3 && copy_word(r->key.f[f - 3], TUNE_FIELD_MAX, v, strlen(v))) { snprintf(why, n, "%s: empty or too long", tok); return -1; }
        }
        word++;
        p += len;
        if (*p == ' ') p++;
    }
    if (word < 4) { snprintf(why, n, "%d fields, expected at least 4 (record what name variant)", word); return -1; }
    if (strcmp(r->record, "measure") && strcmp(r->record, "best")) { snprintf(why, n, "record '%s': expected measure or best", r->record); return -1; }
    if (strcmp(r->what, "kernel") && strcmp(r->what, "matmul") && strcmp(r->what, "attention") && strcmp(r->what, "gelu")) {
        snprintf(why, n, "'%s': expected kernel, matmul, attention or gelu", r->what);
        return -1;
    }
    if (!(seen & 1)) { snprintf(why, n, "no us="); return -1; }
    if (!r->status[0]) { snprintf(why, n, "no status="); return -1; }
    int st = 0;
    while (statuses[st] && strcmp(statuses[st], r->status)) st++;
    if (!statuses[st]) { snprintf(why, n, "status '%s': expected ok, mismatch, compile or launch", r->status); return -1; }
    for (int i = 0; i < TUNE_KEY_FIELDS; i++)
        if (!(seen >> (3 + i) & 1)) { snprintf(why, n, "no %s= (the key)", tune_key_names[i]); return -1; }
    return 0;
}

/* ---------------------------------------------------------------- the file */

void tune_db_free(TuneDb *db) {
    free(db->r);
    free(db->slot);
    db->r = NULL;
    db->slot = NULL;
    db->n = db->cap = db->nslot = 0;
}

/* The corrupt lines of a load: the first TUNE_DB_SAY_CORRUPT said one by one, more as one line for the file (a
   binary file is not thousands of messages). */
typedef struct { int line[TUNE_DB_SAY_CORRUPT]; char why[TUNE_DB_SAY_CORRUPT][256]; } Corrupt;

static void corrupt_note(TuneDb *db, Corrupt *c, int line, const char *why) {
    if (db->corrupt < TUNE_DB_SAY_CORRUPT) {
        c->line[db->corrupt] = line;
        snprintf(c->why[db->corrupt], sizeof c->why[0], "%s", why);
    }
    db->corrupt++;
}

static void corrupt_say(const TuneDb *db, const Corrupt *c, FILE *msgs) {
    if (!msgs) return;
    if (db->corrupt > TUNE_DB_SAY_CORRUPT) {
        fprintf(msgs, "tune db %s: %d corrupt lines ignored, the first at line %d: %s (not a tuning database? "
                "`gpt2gen tune` rewrites it)\n", db->path, db->corrupt, c->line[0], c->why[0]);
        return;
    }
    for (int i = 0; i < db->corrupt; i++) fprintf(msgs, "tune db %s:%d: %s; line ignored\n", db->path, c->line[i], c->why[i]);
}

/* the file's text, at most TUNE_DB_MAX_BYTES; NULL (and a message) when there is none to read */
static char *db_text(TuneDb *db, size_t *len, FILE *msgs) {
    Err err;
    char *text = read_file_at(AT_FDCWD, db->path, TUNE_DB_MAX_BYTES, len, &err);
    if (text) return text;
    struct stat st;
    db->missing = errno == ENOENT;
    db->oversized = !db->missing && stat(db->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > TUNE_DB_MAX_BYTES;
    if (!msgs) return NULL;
    if (db->oversized)
        fprintf(msgs, "tune db %s: %lld bytes, past the tuning database's limit of %u MiB (docs/kernels-and-tuning.md);"
                " ignored, default variants (remove it: `gpt2gen tune` makes a new one)\n", db->path,
                (long long)st.st_size, TUNE_DB_MAX_BYTES >> 20);
    else fprintf(msgs, "tune db %s: %s; default variants (run `gpt2gen tune` to make it)\n", db->path,
                 db->missing ? "not found" : err.msg);
    return NULL;
}

void tune_db_load(TuneDb *db, const char *path, FILE *msgs) {
    memset(db, 0, sizeof *db);
    snprintf(db->path, sizeof db->path, "%s", path);
    size_t len;
    char *text = db_text(db, &len, msgs);
    if (!text) return;
    Corrupt bad;
    int line = 0;
    for (char *p = text; p < text + len;) {
        char *e = memchr(p, '\n', (size_t)(text + len - p));
        int complete = e != NULL;
        if (!e) e = text + len;
        char *next = e + 1;
        if (complete && e > p && e[-1] == '\r') e--;   /* CRLF */
        *e = 0;
        line++;
        char why[256];
        TuneRecord r;
        if (!*p || *p == '#') { p = next; continue; }
        if (memchr(p, 0, (size_t)(e - p))) snprintf(why, sizeof why, "a NUL byte");
        else if (!complete) snprintf(why, sizeof why, "the last line is cut short (no newline): a tune was killed while writing it?");
        else if (tune_record_parse(p, &r, why, sizeof why) == 0) {
            r.line = line;
            tune_db_put(db, &r);
            p = next;
            continue;
        }
        corrupt_note(db, &bad, line, why);
        p = next;
    }
    corrupt_say(db, &bad, msgs);
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
    fprintf(af.f, "# gpt2gen tuning database (docs/kernels-and-tuning.md): one record per line, by `gpt2gen tune`\n");
    char line[2048];
    unsigned char *keep = tune_db_newest(db);
    for (int i = 0; i < db->n; i++) {
        if (!keep[i]) continue;
        tune_record_format(&db->r[i], line, sizeof line);
        fprintf(af.f, "%s\n", line);
    }
    free(keep);
    return atomic_commit(&af, err);
}

const TuneRecord *tune_db_find(const TuneDb *db, const char *record, const char *what, const char *name,
                               const char *variant, const TuneKey *key, const TuneRecord **stale) {
    if (stale) *stale = NULL;
    if (variant || !strcmp(record, "best")) {   /* one entry: found at once; a stale one only by a scan */
        TuneRecord want;
        memset(&want, 0, sizeof want);
        snprintf(want.record, sizeof want.record, "%s", record);
        snprintf(want.what, sizeof want.what, "%s", what);
        snprintf(want.name, sizeof want.name, "%s", name);
        snprintf(want.variant, sizeof want.variant, "%s", variant ? variant : "");
        want.key = *key;
        const TuneRecord *r = tune_db_lookup(db, &want);
        if (r && (!variant || !strcmp(r->variant, variant))) return r;
        if (!stale) return NULL;
    }
    for (int i = 0; i < db->n; i++) {
        const TuneRecord *r = &db->r[i];
        if (strcmp(r->record, record) || strcmp(r->what, what) || strcmp(r->name, name)) continue;
        if (variant && strcmp(r->variant, variant)) continue;
        int same = 1;
        for (int f = 0; f < TUNE_KEY_FIELDS && same; f++) same = !strcmp(r->key.f[f], key->f[f]);
        if (same) return r;
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
static void template_hash(const char *dir, const char *template_path, char *out, size_t n) {
    const char *paths[2] = {"templates/common.cuh", template_path};
    Sha256 s;
    sha256_init(&s);
    for (int i = 0; i < 2; i++) {
        Err err;
        char *t = template_load(dir, paths[i], &err);
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
    template_hash(env->templates, plan->families[fam].decl->template_path, k->f[6], TUNE_FIELD_MAX);
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

void tune_key_gelu(TuneKey *k, const TuneEnv *env, const Plan *plan) {
    for (int i = 0; i < plan->n_families; i++)
        if (!strcmp(plan->families[i].decl->family, "gelu")) { tune_key_kernel(k, env, plan, i); return; }
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
