/* shard: reading and writing llm.c token shards (see shard.h). */
#include "runtime/data/shard.h"
#include "common/files.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the llm.c shard format is little-endian; this reader assumes a little-endian host"
#endif

int shard_write(const char *path, const uint16_t *toks, size_t n, Err *err) {
    if (n > SHARD_MAX_TOKENS) return err_set(err, "%s: %zu tokens; a shard holds at most %u", err_show(path), n, SHARD_MAX_TOKENS);
    int32_t header[256] = {SHARD_MAGIC, SHARD_VERSION, (int32_t)n};
    AtomicFile af;
    if (atomic_open(&af, path, err)) return -1;
    if (fwrite(header, sizeof header, 1, af.f) != 1 || (n && fwrite(toks, sizeof *toks, n, af.f) != n)) {
        atomic_abort(&af);
        return err_set(err, "%s: write failed: %s", err_show(path), strerror(errno));
    }
    return atomic_commit(&af, err);
}

/* Reads and checks the header; *n gets the token count. */
static int read_header(FILE *f, const char *path, long long file_bytes, size_t *n, Err *err) {
    int32_t h[256];
    if (file_bytes < SHARD_HEADER_BYTES || fread(h, sizeof h, 1, f) != 1)
        return err_set(err, "%s: %lld bytes; expected a token shard (a %d-byte header, then uint16 tokens)", err_show(path), file_bytes, SHARD_HEADER_BYTES);
    if (h[0] != SHARD_MAGIC) return err_set(err, "%s: not a token shard (magic %d, expected %d)", err_show(path), h[0], SHARD_MAGIC);
    if (h[1] != SHARD_VERSION) return err_set(err, "%s: token shard version %d; expected %d", err_show(path), h[1], SHARD_VERSION);
    if (h[2] < 0) return err_set(err, "%s: header says %d tokens; expected a count >= 0", err_show(path), h[2]);
    long long body = file_bytes - SHARD_HEADER_BYTES;
    long long held = body / 2;
    if (held < h[2]) return err_set(err, "%s: truncated: header says %d tokens, file holds %lld", err_show(path), h[2], held);
    if (body != 2LL * h[2]) return err_set(err, "%s: header says %d tokens, file holds %lld bytes more than that", err_show(path), h[2], body - 2LL * h[2]);
    *n = (size_t)h[2];
    return 0;
}

static int check_ids(const char *path, const uint16_t *toks, size_t n, int vocab_size, Err *err) {
    if (vocab_size <= 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (toks[i] >= vocab_size)
            return err_set(err, "%s: token at position %zu is %u; expected ids below the vocab size %d", err_show(path), i, toks[i], vocab_size);
    return 0;
}

/* Opens a shard and checks its header against the file; on success f is at the first token. */
static int open_checked(const char *path, FILE **f, size_t *n, Err *err) {
    *f = fopen_regular(path, "a token shard", err);
    if (!*f) return -1;
    struct stat st;
    int rc = fstat(fileno(*f), &st) != 0 ? err_set(err, "%s: cannot stat: %s", err_show(path), strerror(errno))
                                        : read_header(*f, path, (long long)st.st_size, n, err);
    if (rc) { fclose(*f); *f = NULL; }
    return rc;
}

int shard_read_header(const char *path, size_t *n, Err *err) {
    FILE *f;
    if (open_checked(path, &f, n, err)) return -1;
    fclose(f);
    return 0;
}

int shard_read(const char *path, uint16_t **toks, size_t *n, int vocab_size, Err *err) {
    *toks = NULL; *n = 0;
    FILE *f;
    size_t count = 0;
    if (open_checked(path, &f, &count, err)) return -1;
    uint16_t *buf = xmalloc(count ? count * sizeof *buf : 1);
    int rc = count && fread(buf, sizeof *buf, count, f) != count ? err_set(err, "%s: read error after the header", err_show(path)) : 0;
    fclose(f);
    if (rc == 0) rc = check_ids(path, buf, count, vocab_size, err);
    if (rc) { free(buf); return -1; }
    *toks = buf; *n = count;
    return 0;
}
