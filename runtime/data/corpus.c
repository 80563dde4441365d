/* corpus: prepare's inputs, folders expanded and gzip/zstd undone (see corpus.h). */
#include "runtime/data/corpus.h"
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

/* ---------- names ---------- */

static const char *shown_name(const char *path) { return strcmp(path, "-") ? path : "standard input"; }

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcasecmp(s + n - k, suffix);
}

enum { COMP_NONE, COMP_GZIP, COMP_ZSTD };

static int named_compression(const char *path) {
    if (ends_with(path, ".gz") || ends_with(path, ".tgz")) return COMP_GZIP;
    if (ends_with(path, ".zst") || ends_with(path, ".zstd")) return COMP_ZSTD;
    return COMP_NONE;
}

CorpusKind corpus_kind(const char *path) {
    char base[4096];
    snprintf(base, sizeof base, "%s", path);
    static const char *comp[] = {".gz", ".zst", ".zstd"};
    for (size_t i = 0; i < sizeof comp / sizeof comp[0]; i++)
        if (ends_with(base, comp[i])) { base[strlen(base) - strlen(comp[i])] = 0; break; }
    return ends_with(base, ".jsonl") || ends_with(base, ".ndjson") || ends_with(base, ".json") ? CORPUS_JSONL : CORPUS_TEXT;
}

/* Why a file of this name is not read, or NULL: archives and compressions other than gzip and zstd. */
static const char *refused_name(const char *path) {
    static const char *archives[] = {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", ".zip", ".7z"};
    for (size_t i = 0; i < sizeof archives / sizeof archives[0]; i++)
        if (ends_with(path, archives[i]))
            return "an archive, which prepare does not unpack: unpack it (tar xf, unzip) and give the folder";
    static const char *others[] = {".xz", ".bz2", ".lz4", ".lzma"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        if (ends_with(path, others[i]))
            return "a compression prepare does not read (it reads gzip and zstd): decompress it into standard input, "
                   "e.g. xz -dc FILE | gpt2gen prepare - -o DIR";
    return NULL;
}

/* ---------- the list of files ---------- */

static void list_add(CorpusList *l, char *path, int input, long long size) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->files = realloc(l->files, (size_t)l->cap * sizeof *l->files);
        if (!l->files) { fprintf(stderr, "out of host memory for a list of %d files\n", l->cap); abort(); }
    }
    l->files[l->n++] = (CorpusFile){.path = path, .input = input, .size = size};
    if (size < 0) l->total = -1;
    else if (l->total >= 0) l->total += size;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const CorpusFile *)a)->path, ((const CorpusFile *)b)->path);
}

/* The folders being read, from the input down: a link back to one of them would never end. */
typedef struct { dev_t dev; ino_t ino; } DirId;

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    char *p = xmalloc(n + strlen(name) + 2);
    sprintf(p, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
    return p;
}

static int walk(const char *dir, int input, DirId *stack, int depth, const DirId *skip, CorpusList *l, Err *err) {
    DIR *d = opendir(dir);
    if (!d) return err_set(err, "%s: cannot read the folder: %s", err_show(dir), strerror(errno));
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;                      /* ., .., and hidden files and folders */
        char *path = join(dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) {
            rc = err_set(err, "%s: cannot open: %s", err_show(path), strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            int loop = skip && skip->dev == st.st_dev && skip->ino == st.st_ino;   /* (or the output folder) */
            for (int k = 0; k <= depth; k++) loop |= stack[k].dev == st.st_dev && stack[k].ino == st.st_ino;
            if (!loop && depth + 1 >= 64) rc = err_set(err, "%s: folders nested more than 64 deep", err_show(path));
            else if (!loop) {
                stack[depth + 1] = (DirId){st.st_dev, st.st_ino};
                rc = walk(path, input, stack, depth + 1, skip, l, err);
            }
        } else if (S_ISREG(st.st_mode)) {
            if (access(path, R_OK) != 0) rc = err_set(err, "%s: cannot open: %s", err_show(path), strerror(errno));
            else { list_add(l, path, input, (long long)st.st_size); path = NULL; }
        }                                                        /* FIFOs, devices, sockets in a folder: skipped */
        free(path);
        errno = 0;
    }
    if (rc == 0 && errno) rc = err_set(err, "%s: cannot read the folder: %s", err_show(dir), strerror(errno));
    closedir(d);
    return rc;
}

static int add_input(const char *in, int input, const DirId *skip, CorpusList *l, Err *err) {
    if (!strcmp(in, "-")) { list_add(l, xstrdup(in), input, -1); return 0; }
    struct stat st;
    if (stat(in, &st) != 0) return err_set(err, "%s: cannot open: %s", err_show(in), strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        DirId stack[64] = {{st.st_dev, st.st_ino}};
        int first = l->n;
        if (walk(in, input, stack, 0, skip, l, err)) return -1;
        if (l->n == first) return err_set(err, "%s: a folder with no files to read (names starting with '.' are skipped)", err_show(in));
        qsort(l->files + first, (size_t)(l->n - first), sizeof *l->files, by_path);
        return 0;
    }
    if (access(in, R_OK) != 0) return err_set(err, "%s: cannot open: %s", err_show(in), strerror(errno));
    if (S_ISSOCK(st.st_mode) || S_ISBLK(st.st_mode)) return err_set(err, "%s: a socket or block device, not a file of text", err_show(in));
    list_add(l, xstrdup(in), input, S_ISREG(st.st_mode) ? (long long)st.st_size : -1);
    return 0;
}

int corpus_list(char *const *inputs, int n_inputs, const char *exclude, CorpusList *list, Err *err) {
    *list = (CorpusList){0};
    struct stat ex;
    DirId skip, *skipp = NULL;
    if (exclude && stat(exclude, &ex) == 0 && S_ISDIR(ex.st_mode)) { skip = (DirId){ex.st_dev, ex.st_ino}; skipp = &skip; }
    for (int i = 0; i < n_inputs; i++) {
        const char *why = refused_name(inputs[i]);
        if (why) { corpus_list_free(list); return err_set(err, "%s: %s", err_show(inputs[i]), why); }
        if (add_input(inputs[i], i, skipp, list, err)) { corpus_list_free(list); return -1; }
    }
    int kept = 0;
    for (int i = 0; i < list->n; i++) {         /* files found in folders that are not read: skipped, counted */
        CorpusFile *f = &list->files[i];
        if (!refused_name(f->path)) { list->files[kept++] = *f; continue; }
        if (!list->skipped++) snprintf(list->first_skipped, sizeof list->first_skipped, "%s", f->path);
        if (list->total >= 0) list->total -= f->size;
        free(f->path);
    }
    list->n = kept;
    char *has = xcalloc((size_t)n_inputs + 1, 1);
    for (int k = 0; k < list->n; k++) has[list->files[k].input] = 1;
    int empty = 0;
    while (empty < n_inputs && has[empty]) empty++;
    free(has);
    if (empty < n_inputs) {
        err_set(err, "%s: a folder with only files that prepare does not read (archives; compressions other than "
                "gzip and zstd), e.g. %s", err_show(inputs[empty]), list->first_skipped);
        corpus_list_free(list);
        return -1;
    }
    return 0;
}

void corpus_list_free(CorpusList *list) {
    for (int i = 0; i < list->n; i++) free(list->files[i].path);
    free(list->files);
    *list = (CorpusList){0};
}

/* ---------- reading ---------- */

#define IN_BYTES (1u << 16)

struct CorpusReader {
    char          *name;                /* for messages */
    FILE          *f;
    int            is_stdin, comp, eof;
    unsigned char *in;                  /* what was read from the file and not yet used: in[pos..len) */
    size_t         pos, len;
    long long      raw;
    z_stream       z;
    int            member_done;         /* gzip: the member ended; more input starts another */
    ZSTD_DStream  *zs;
    size_t         zs_left;             /* zstd: the last call's hint; 0 when every frame so far is complete */
};

/* More of the file into in[], once what was there is used. */
static int refill(CorpusReader *r, Err *err) {
    if (r->pos < r->len || r->eof) return 0;
    r->pos = 0;
    r->len = fread(r->in, 1, IN_BYTES, r->f);
    r->raw += (long long)r->len;
    if (r->len < IN_BYTES) {
        if (ferror(r->f)) return err_set(err, "%s: read error: %s", err_show(r->name), strerror(errno));
        r->eof = 1;
    }
    return 0;
}

/* The compression the first bytes show, or -1 + err for a format that is not read. */
static int sniff(CorpusReader *r, Err *err) {
    const unsigned char *b = r->in;
    size_t n = r->len;
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) return COMP_GZIP;
    if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return COMP_ZSTD;
    if (n >= 6 && !memcmp(b, "\xfd" "7zXZ\0", 6))
        return err_set(err, "%s: xz-compressed data, which prepare does not read (it reads gzip and zstd): "
                       "xz -dc FILE | gpt2gen prepare - -o DIR", err_show(r->name));
    if (n >= 4 && !memcmp(b, "PK\x03\x04", 4))
        return err_set(err, "%s: a zip archive, which prepare does not unpack: unzip it and give the folder", err_show(r->name));
    return COMP_NONE;
}

CorpusReader *corpus_open(const char *path, Err *err) {
    CorpusReader *r = xcalloc(1, sizeof *r);
    r->name = xstrdup(shown_name(path));
    r->is_stdin = !strcmp(path, "-");
    r->f = r->is_stdin ? stdin : fopen(path, "rb");
    r->in = xmalloc(IN_BYTES);
    if (!r->f) { err_set(err, "%s: cannot open: %s", err_show(r->name), strerror(errno)); corpus_close(r); return NULL; }
    int named = r->is_stdin ? COMP_NONE : named_compression(path);
    if (refill(r, err) || (r->comp = sniff(r, err)) < 0) { corpus_close(r); return NULL; }
    if (named != COMP_NONE && r->comp != named) {
        err_set(err, "%s: named as %s-compressed, but it does not start as %s data does", err_show(r->name),
                named == COMP_GZIP ? "gzip" : "zstd", named == COMP_GZIP ? "gzip" : "zstd");
        corpus_close(r);
        return NULL;
    }
    if (r->comp == COMP_GZIP && inflateInit2(&r->z, 16 + MAX_WBITS) != Z_OK) {
        err_set(err, "%s: cannot start zlib's gzip decompression", err_show(r->name));
        r->comp = COMP_NONE;
        corpus_close(r);
        return NULL;
    }
    if (r->comp == COMP_ZSTD) {
        if (!(r->zs = ZSTD_createDStream()) || ZSTD_isError(ZSTD_initDStream(r->zs))) {
            err_set(err, "%s: cannot start zstd decompression", err_show(r->name));
            corpus_close(r);
            return NULL;
        }
        r->zs_left = 1;
    }
    return r;
}

static long read_plain(CorpusReader *r, char *buf, size_t n, Err *err) {
    if (refill(r, err)) return -1;
    size_t k = r->len - r->pos < n ? r->len - r->pos : n;
    memcpy(buf, r->in + r->pos, k);
    r->pos += k;
    return (long)k;
}

static long read_gzip(CorpusReader *r, char *buf, size_t n, Err *err) {
    r->z.next_out = (unsigned char *)buf;
    r->z.avail_out = (uInt)n;
    while (r->z.avail_out == n) {
        if (refill(r, err)) return -1;
        if (r->member_done) {
            if (r->pos == r->len) return 0;                     /* the last member ended with the file */
            inflateReset(&r->z);                               /* another member follows */
            r->member_done = 0;
        }
        if (r->pos == r->len) return err_set(err, "%s: truncated gzip data (the file ends inside it)", err_show(r->name));
        r->z.next_in = r->in + r->pos;
        r->z.avail_in = (uInt)(r->len - r->pos);
        int ret = inflate(&r->z, Z_NO_FLUSH);
        r->pos = r->len - r->z.avail_in;
        if (ret == Z_STREAM_END) r->member_done = 1;
        else if (ret != Z_OK && ret != Z_BUF_ERROR)
            return err_set(err, "%s: damaged gzip data (%s)", err_show(r->name), r->z.msg ? r->z.msg : "zlib error");
    }
    return (long)(n - r->z.avail_out);
}

static long read_zstd(CorpusReader *r, char *buf, size_t n, Err *err) {
    ZSTD_outBuffer out = {buf, n, 0};
    while (out.pos == 0) {
        if (refill(r, err)) return -1;
        if (r->pos == r->len && r->zs_left == 0) break;         /* every frame complete: the end */
        ZSTD_inBuffer in = {r->in + r->pos, r->len - r->pos, 0};
        size_t ret = ZSTD_decompressStream(r->zs, &out, &in);
        r->pos += in.pos;
        if (ZSTD_isError(ret)) return err_set(err, "%s: damaged zstd data (%s)", err_show(r->name), ZSTD_getErrorName(ret));
        r->zs_left = ret;
        if (out.pos == 0 && in.pos == 0 && r->pos == r->len && r->eof)
            return err_set(err, "%s: truncated zstd data (the file ends inside a frame)", err_show(r->name));
    }
    return (long)out.pos;
}

long corpus_read(CorpusReader *r, char *buf, size_t n, Err *err) {
    if (n > (1u << 30)) n = 1u << 30;
    if (r->comp == COMP_GZIP) return read_gzip(r, buf, n, err);
    if (r->comp == COMP_ZSTD) return read_zstd(r, buf, n, err);
    return read_plain(r, buf, n, err);
}

long long corpus_raw_bytes(const CorpusReader *r) { return r->raw; }

const char *corpus_compression(const CorpusReader *r) {
    return r->comp == COMP_GZIP ? "gzip" : r->comp == COMP_ZSTD ? "zstd" : NULL;
}

void corpus_close(CorpusReader *r) {
    if (!r) return;
    if (r->comp == COMP_GZIP) inflateEnd(&r->z);
    if (r->zs) ZSTD_freeDStream(r->zs);
    if (r->f && !r->is_stdin) fclose(r->f);
    free(r->in);
    free(r->name);
    free(r);
}
