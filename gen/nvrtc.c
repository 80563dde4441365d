/* nvrtc: see nvrtc.h. NVRTC is loaded with dlopen (nvrtc_load), so that gpt2gen builds and runs where the CUDA
   toolkit is not installed; its few types and functions are declared here from its documented C API (nvrtc.h of
   CUDA 12 and 13). */
#include "gen/nvrtc.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/clock.h"
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GPT2GEN_CUDA_HOME
#define GPT2GEN_CUDA_HOME "/usr/local/cuda"
#endif

/* A cache entry is one file, <cache>/<key>.entry, written atomically (write_file_atomic): a text header, then
   the CUBIN:
       gpt2gen kernel cache entry 1
       key <the key, as in the file name>
       size <bytes of CUBIN>
       sha256 <SHA-256 of the CUBIN>
       <an empty line>
   An entry is used only when the header is exactly that, the key is this job's, the CUBIN has that size and
   hash, and it passes cubin_check. Anything else is reported on stderr (one line naming the file and what is
   wrong), compiled again and written back over it. */
#define ENTRY_MAGIC "gpt2gen kernel cache entry 1"
#define ENTRY_HEADER_MAX 256
#define ENTRY_MAX_BYTES ((size_t)256 << 20)   /* no CUBIN comes near this; a larger entry is not read */
#define PATH_BYTES 4096                        /* common/files.c's path buffers */

static const char *cuda_home(const Env *env) {
    const char *h = env_or_defaults(env)->cuda_home;
    return h ? h : GPT2GEN_CUDA_HOME;
}

/* ---------------------------------------------------------------- NVRTC, loaded at run time */

typedef int nvrtcResult;   /* an enum in nvrtc.h; 0 is NVRTC_SUCCESS */
enum { NVRTC_SUCCESS = 0 };
typedef struct NvrtcProgramOpaque *nvrtcProgram;

typedef struct {
    void *lib;
    nvrtcResult (*nvrtcVersion)(int *major, int *minor);
    const char *(*nvrtcGetErrorString)(nvrtcResult r);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *prog, const char *src, const char *name, int num_headers,
                                      const char *const *headers, const char *const *include_names);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options, const char *const *options);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char *log);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t *size);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char *cubin);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *prog);
} NvrtcLib;
#define NVRTC_FUNCS(X) X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
    X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcDestroyProgram)

static NvrtcLib nv;   /* set once, under nv_lock; read-only after */
static pthread_mutex_t nv_lock = PTHREAD_MUTEX_INITIALIZER;

/* The library at name, with every function; 1 when it cannot be opened, -1 with err when it lacks one. */
static int nvrtc_open(const char *name, Err *err) {
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) return 1;
    NvrtcLib L = {.lib = h};
#define LOAD(fn) \
    *(void **)&L.fn = dlsym(h, #fn); \
    if (!L.fn) { dlclose(h); return err_set(err, "%s lacks %s: NVRTC of CUDA 12 or later is needed", name, #fn); }
    NVRTC_FUNCS(LOAD)
#undef LOAD
    nv = L;
    return 0;
}

/* NVRTC opens its builtins (libnvrtc-builtins.so.<major>.<minor>) by that name, which the loader looks for on its
   own path only; opened first from the folder of the NVRTC at path, the name is there already. Where this does not
   open, NVRTC says what is missing when it compiles. */
static void builtins_preload(const char *path) {
    const char *slash = strrchr(path, '/');
    int major = 0, minor = 0;
    if (!slash || nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return;
    char b[PATH_BYTES];
    int len = snprintf(b, sizeof b, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - path), path, major, minor);
    if (len > 0 && len < (int)sizeof b) dlopen(b, RTLD_NOW | RTLD_LOCAL);   /* kept open, as NVRTC is */
}

/* GPT2GEN_NVRTC_LIBRARY's file, else libnvrtc.so.13, .so.12 and .so in CUDA_HOME/lib64, then on the loader's path */
static int nvrtc_find(const Env *env, Err *err) {
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    const char *given = env_or_defaults(env)->nvrtc_library, *home = cuda_home(env);
    if (given && !strcmp(given, "none"))
        return err_set(err, "NVRTC not found (GPT2GEN_NVRTC_LIBRARY=none hides it)");
    if (given) {
        int rc = nvrtc_open(given, err);
        if (rc > 0) err_set(err, "NVRTC not found: GPT2GEN_NVRTC_LIBRARY=%s cannot be loaded (%s)", err_show(given), dlerror());
        if (rc == 0) builtins_preload(given);
        return rc ? -1 : 0;
    }
    char path[PATH_BYTES];
    for (int i = 0; i < 3; i++) {
        int len = snprintf(path, sizeof path, "%s/lib64/%s", home, names[i]), rc;
        if (len > 0 && len < (int)sizeof path && (rc = nvrtc_open(path, err)) <= 0) {
            if (rc == 0) builtins_preload(path);
            return rc;
        }
    }
    for (int i = 0; i < 3; i++) {
        int rc = nvrtc_open(names[i], err);
        if (rc <= 0) return rc;
    }
    return err_set(err, "NVRTC not found (looked in %s/lib64 and on the loader's path for libnvrtc.so.13, .so.12 and "
                   ".so): install the CUDA toolkit (12 or 13) or set CUDA_HOME", err_show(home));
}

int nvrtc_load(const Env *env, Err *err) {
    pthread_mutex_lock(&nv_lock);
    int rc = nv.lib ? 0 : nvrtc_find(env, err);
    pthread_mutex_unlock(&nv_lock);
    return rc;
}

int nvrtc_ready(const Env *env, Err *err) {
    if (nvrtc_load(env, err)) return -1;
    const char *home = cuda_home(env);
    char path[PATH_BYTES];
    int len = snprintf(path, sizeof path, "%s/include/cuda_bf16.h", home);
    struct stat st;
    if (len < 0 || len >= (int)sizeof path || stat(path, &st) != 0)
        return err_set(err, "NVRTC is there, but not the CUDA headers it compiles against (no %s/include/cuda_bf16.h): "
                       "install the CUDA toolkit (12 or 13) or set CUDA_HOME", err_show(home));
    return 0;
}

void nvrtc_version_string(const Env *env, char *out, size_t n) {
    int major = 0, minor = 0;
    Err ignore;
    if (nvrtc_load(env, &ignore) || nv.nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) { snprintf(out, n, "none"); return; }
    snprintf(out, n, "%d.%d", major, minor);
}

const char *nvrtc_cache_dir(const Env *env) {
    const char *d = env_or_defaults(env)->cache;
    return d ? d : "build/cache";
}

/* Formats into why (a message, so truncation only shortens it); returns -1. */
static int why_set(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_set(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The options, one string each; the same list goes into the cache key. -1 when one does not fit. */
#define OPT_BYTES 1100
static int compile_options(const char *arch, const char *home, char opts[8][OPT_BYTES], int *nopts, Err *err) {
    int n = 0, len[8];
    /* sm_90 compiles as sm_90a, Hopper's own target: the same code for every kernel, plus the wgmma instructions
       that the attention's FWD_SM and BWD_SM = 90 variants use (sm_90a code runs on compute capability 9.0 only, as sm_90's
       CUBINs do) */
    len[n] = snprintf(opts[n], OPT_BYTES, "-arch=%s%s", arch, strcmp(arch, "sm_90") ? "" : "a"); n++;
    len[n] = snprintf(opts[n], OPT_BYTES, "-std=c++17"); n++;
    len[n] = snprintf(opts[n], OPT_BYTES, "-I%s/include", home); n++;
    len[n] = snprintf(opts[n], OPT_BYTES, "-I%s/include/cccl", home); n++;
    len[n] = snprintf(opts[n], OPT_BYTES, "-lineinfo"); n++;
    len[n] = snprintf(opts[n], OPT_BYTES, "-default-device"); n++;        /* unannotated helpers (constexpr functions) are device code */
    len[n] = snprintf(opts[n], OPT_BYTES, "-diag-suppress=177"); n++;     /* the prelude declares every shape constant; not all are used */
    for (int i = 0; i < n; i++)
        if (len[i] < 0 || len[i] >= OPT_BYTES)
            return err_set(err, "NVRTC option '%.60s...' is longer than %d characters (is CUDA_HOME or --arch that long?)",
                           opts[i], OPT_BYTES - 1);
    *nopts = n;
    return 0;
}

static void cache_key(CompileJob *j, char opts[8][OPT_BYTES], int nopts, const char *ver) {
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, "gpt2gen-cubin-v1", 16);
    sha256_update(&s, ver, strlen(ver) + 1);
    sha256_update(&s, j->arch, strlen(j->arch) + 1);
    for (int i = 0; i < nopts; i++) sha256_update(&s, opts[i], strlen(opts[i]) + 1);
    sha256_update(&s, j->source, strlen(j->source));
    sha256_hex(&s, j->key);
}

static void sha256_of(const void *data, size_t n, char hex[65]) {
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, data, n);
    sha256_hex(&s, hex);
}

static int inside(uint64_t off, uint64_t len, size_t n) { return off <= n && len <= n - off; }

/* 0 when p[0..n) is a 64-bit little-endian ELF file for CUDA whose header sizes are ELF64's and whose
   program headers, section headers and section contents all lie inside it; else -1 and why. */
static int cubin_check(const unsigned char *p, size_t n, char *why, size_t nwhy) {
    Elf64_Ehdr eh;
    if (n < sizeof eh) return why_set(why, nwhy, "%zu bytes, too short for an ELF header", n);
    memcpy(&eh, p, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG)) return why_set(why, nwhy, "not an ELF file (no ELF magic)");
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) return why_set(why, nwhy, "not a 64-bit ELF file");
    if (eh.e_ident[EI_DATA] != ELFDATA2LSB) return why_set(why, nwhy, "not a little-endian ELF file");
    if (eh.e_machine != EM_CUDA) return why_set(why, nwhy, "ELF machine %d, not CUDA (%d)", eh.e_machine, EM_CUDA);
    if (eh.e_ehsize != sizeof eh || eh.e_shentsize != sizeof(Elf64_Shdr) || (eh.e_phnum && eh.e_phentsize != sizeof(Elf64_Phdr)))
        return why_set(why, nwhy, "ELF header with wrong entry sizes");
    if (eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum) return why_set(why, nwhy, "ELF file without a section name table");
    if (!inside(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr), n))
        return why_set(why, nwhy, "ELF section headers run past the end (%zu bytes)", n);
    if (!inside(eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr), n))
        return why_set(why, nwhy, "ELF program headers run past the end (%zu bytes)", n);
    for (int i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, p + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && !inside(sh.sh_offset, sh.sh_size, n))
            return why_set(why, nwhy, "ELF section %d runs past the end (%zu bytes)", i, n);
    }
    return 0;
}

static int entry_header(char *out, size_t n, const char *key, size_t size, const char *sha) {
    return snprintf(out, n, "%s\nkey %s\nsize %zu\nsha256 %s\n\n", ENTRY_MAGIC, key, size, sha);
}

/* Reads the whole regular file at path, at most max bytes, without blocking (common/files.c: a FIFO or device is
   refused, not read from). 0 with *data (malloc'd) and *n; 1 when there is no such file; -1 with why. */
static int read_regular(const char *path, size_t max, char **data, size_t *n, char *why, size_t nwhy) {
    Err err;
    *data = read_file_at(AT_FDCWD, path, max, n, &err);
    if (*data) return 0;
    if (errno == ENOENT || errno == ENOTDIR) return 1;   /* a cache folder that is not one: see the note */
    if (errno == EISDIR || errno == EINVAL) return why_set(why, nwhy, "not a regular file");
    size_t len = strlen(path);                         /* the message without its "path: " */
    const char *msg = !strncmp(err.msg, path, len) && err.msg[len] == ':' ? err.msg + len + 2 : err.msg;
    return why_set(why, nwhy, "%s", msg);
}

/* Looks up key's entry at path: 0 with j->cubin on a good entry, 1 when there is none, -1 with why when it is
   there but cannot be read or is not a good entry (see the format above). */
static int read_entry(const char *path, CompileJob *j, char *why, size_t nwhy) {
    char *buf = NULL;
    size_t n = 0;
    int rc = read_regular(path, ENTRY_HEADER_MAX + ENTRY_MAX_BYTES, &buf, &n, why, nwhy);
    if (rc) return rc;
    char hdr[ENTRY_HEADER_MAX + 1], key[65] = "", sha[65] = "", want[ENTRY_HEADER_MAX];
    size_t size = 0;
    const char *end = memmem(buf, n < ENTRY_HEADER_MAX ? n : ENTRY_HEADER_MAX, "\n\n", 2);
    size_t hlen = end ? (size_t)(end - buf) + 2 : 0;
    if (n < sizeof ENTRY_MAGIC || memcmp(buf, ENTRY_MAGIC "\n", sizeof ENTRY_MAGIC))
        rc = why_set(why, nwhy, "not a cache entry (no '" ENTRY_MAGIC "' header)");
    else if (hlen) {
        memcpy(hdr, buf, hlen);
        hdr[hlen] = 0;
    }
    if (rc == 0 && (!hlen || sscanf(hdr, ENTRY_MAGIC "\nkey %64s\nsize %zu\nsha256 %64s", key, &size, sha) != 3
                    || entry_header(want, sizeof want, key, size, sha) != (int)hlen || memcmp(want, hdr, hlen)))
        rc = why_set(why, nwhy, "malformed header");
    if (rc == 0 && strcmp(key, j->key)) rc = why_set(why, nwhy, "holds the kernel of key %.16s..., not this one", key);
    if (rc == 0 && n - hlen != size)
        rc = why_set(why, nwhy, "%s: %zu bytes of CUBIN, the header says %zu", n - hlen < size ? "truncated" : "too long",
                     n - hlen, size);
    char have[65];
    if (rc == 0) sha256_of(buf + hlen, size, have);
    if (rc == 0 && strcmp(have, sha)) rc = why_set(why, nwhy, "the CUBIN's SHA-256 is not the one in its header");
    if (rc == 0) rc = cubin_check((const unsigned char *)buf + hlen, size, why, nwhy);
    if (rc == 0) {
        j->cubin = xmalloc(size);
        memcpy(j->cubin, buf + hlen, size);
        j->cubin_size = size;
    }
    free(buf);
    return rc;
}

/* Writes j's CUBIN as the entry at path, atomically. */
static int write_entry(const char *path, const char *cache_dir, const CompileJob *j, Err *err) {
    char sha[65], hdr[ENTRY_HEADER_MAX];
    sha256_of(j->cubin, j->cubin_size, sha);
    size_t hlen = (size_t)entry_header(hdr, sizeof hdr, j->key, j->cubin_size, sha);
    char *buf = xmalloc(hlen + j->cubin_size);
    memcpy(buf, hdr, hlen);
    memcpy(buf + hlen, j->cubin, j->cubin_size);
    int rc = mkdir_p(cache_dir, err);
    /* an entry's name holding what is not a file (a FIFO, a link) is a damaged entry of the cache's own: the name is
       removed (nothing is written through it), since the writer replaces only regular files */
    struct stat st;
    if (rc == 0 && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) unlink(path);
    if (rc == 0) rc = write_file_atomic(path, buf, hlen + j->cubin_size, err);
    free(buf);
    return rc;
}

/* What the workers share. cache_fail counts the entries that could not be written; cache_err is the first. */
typedef struct {
    CompileJob *jobs;
    int n, next;
    const char *cache_dir, *cuda_home;
    char version[32];   /* NVRTC's, for the cache key */
    pthread_mutex_t lock;
    int cache_fail;
    Err cache_err;
} Queue;

static void cache_failed(Queue *q, const Err *e) {
    pthread_mutex_lock(&q->lock);
    if (q->cache_fail++ == 0) q->cache_err = *e;
    pthread_mutex_unlock(&q->lock);
}

static int compile_one(CompileJob *j, Queue *q) {
    double t0 = now_seconds();
    char opts[8][OPT_BYTES];
    int nopts;
    if (compile_options(j->arch, q->cuda_home, opts, &nopts, &j->err)) return -1;
    cache_key(j, opts, nopts, q->version);
    /* room for the ".tmp.<pid>" that write_file_atomic adds */
    char cpath[PATH_BYTES];
    int plen = snprintf(cpath, sizeof cpath, "%s/%s.entry", q->cache_dir, j->key);
    int use_cache = plen > 0 && plen + 32 < (int)sizeof cpath;
    Err cerr;
    if (!use_cache) err_set(&cerr, "%.200s...: the cache path is too long", q->cache_dir);
    char why[512];
    int found = use_cache ? read_entry(cpath, j, why, sizeof why) : 1;
    if (found == 0) {
        j->from_cache = 1;
        j->seconds = now_seconds() - t0;
        return 0;
    }
    if (found < 0) fprintf(stderr, "gpt2gen: kernel cache: %s: %s; compiling it again\n", cpath, why);

    nvrtcProgram prog;
    const char *fname = strrchr(j->source_path, '/');
    nvrtcResult r = nv.nvrtcCreateProgram(&prog, j->source, fname ? fname + 1 : j->source_path, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return err_set(&j->err, "%s: nvrtcCreateProgram: %s", j->source_path, nv.nvrtcGetErrorString(r));
    const char *optp[8];
    for (int i = 0; i < nopts; i++) optp[i] = opts[i];
    r = nv.nvrtcCompileProgram(prog, nopts, optp);
    if (r != NVRTC_SUCCESS) {
        size_t loglen = 0;
        nv.nvrtcGetProgramLogSize(prog, &loglen);
        char *log = xmalloc(loglen + 1);
        nv.nvrtcGetProgramLog(prog, log);
        log[loglen] = 0;
        err_set(&j->err, "%s: NVRTC could not compile module \"%s\" for %s (lines below are template file(line)):\n%s",
                j->source_path, j->name, j->arch, log);
        free(log);
        nv.nvrtcDestroyProgram(&prog);
        return -1;
    }
    nv.nvrtcGetCUBINSize(prog, &j->cubin_size);
    j->cubin = xmalloc(j->cubin_size);
    nv.nvrtcGetCUBIN(prog, j->cubin);
    nv.nvrtcDestroyProgram(&prog);
    /* what is cached must pass the check a cached entry gets */
    if (cubin_check((const unsigned char *)j->cubin, j->cubin_size, why, sizeof why))
        return err_set(&j->err, "%s: NVRTC's CUBIN for module \"%s\" is not a valid CUBIN: %s", j->source_path, j->name, why);
    /* a cache that cannot be written costs a recompile next time, not this build */
    if (!use_cache || write_entry(cpath, q->cache_dir, j, &cerr)) cache_failed(q, &cerr);
    j->seconds = now_seconds() - t0;
    return 0;
}

static void *worker(void *arg) {
    Queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        int i = q->next++;
        pthread_mutex_unlock(&q->lock);
        if (i >= q->n) return NULL;
        q->jobs[i].failed = compile_one(&q->jobs[i], q) != 0;
    }
}


int nvrtc_compile_all(CompileJob *jobs, int n, const Env *env, int threads, Err *err) {
    if (nvrtc_load(env, err)) return -1;
    Queue q = {jobs, n, 0, nvrtc_cache_dir(env), cuda_home(env), "", PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};
    nvrtc_version_string(env, q.version, sizeof q.version);
    if (threads < 1) threads = 1;
    if (threads > n) threads = n;
#ifdef __SANITIZE_ADDRESS__
    /* Under AddressSanitizer (`make sanitize`) every compile runs on this thread: after a worker thread has compiled
       with NVRTC, LeakSanitizer's check at exit crashes now and then ("Tracer caught signal 11"), failing a run
       that found nothing. The workers' queue is the same code either way. */
    threads = 1;
#endif
    pthread_t tid[64];
    if (threads > 64) threads = 64;
    int started = 1;   /* this thread is a worker too; a thread that cannot start leaves its share to the others */
    while (started < threads && pthread_create(&tid[started], NULL, worker, &q) == 0) started++;
    worker(&q);
    for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
    if (q.cache_fail)
        fprintf(stderr, "gpt2gen: note: %d of %d kernels not written to the kernel cache (%s); the build goes on\n",
                q.cache_fail, n, q.cache_err.msg);
    for (int i = 0; i < n; i++)
        if (jobs[i].failed) { *err = jobs[i].err; return -1; }
    return 0;
}
