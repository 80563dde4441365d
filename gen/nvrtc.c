#include "gen/nvrtc.h"
#include "common/files.h"
#include "common/sha256.h"
#include "common/clock.h"
#include <stdio.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef GPT2GEN_CUDA_HOME
#define GPT2GEN_CUDA_HOME "/usr/local/cuda"
#endif

static const char *cuda_home(void) {
    const char *h = getenv("CUDA_HOME");
    return h && *h ? h : GPT2GEN_CUDA_HOME;
}

void nvrtc_version_string(char *out, size_t n) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    snprintf(out, n, "%d.%d", major, minor);
}

const char *nvrtc_cache_dir(void) {
    const char *d = getenv("GPT2GEN_CACHE");
    return d && *d ? d : "build/cache";
}

/* The options, one string each; the same list goes into the cache key. */
static int compile_options(const char *arch, char opts[8][1100]) {
    int n = 0;
    snprintf(opts[n++], 1100, "-arch=%s", arch);
    snprintf(opts[n++], 1100, "-std=c++17");
    snprintf(opts[n++], 1100, "-I%s/include", cuda_home());
    snprintf(opts[n++], 1100, "-I%s/include/cccl", cuda_home());
    snprintf(opts[n++], 1100, "-lineinfo");
    snprintf(opts[n++], 1100, "-default-device");        /* unannotated helpers (constexpr functions) are device code */
    snprintf(opts[n++], 1100, "-diag-suppress=177");     /* the prelude declares every shape constant; not all are used */
    return n;
}

static void cache_key(CompileJob *j, char opts[8][1100], int nopts) {
    Sha256 s;
    char ver[32];
    nvrtc_version_string(ver, sizeof ver);
    sha256_init(&s);
    sha256_update(&s, "gpt2gen-cubin-v1", 16);
    sha256_update(&s, ver, strlen(ver) + 1);
    sha256_update(&s, j->arch, strlen(j->arch) + 1);
    for (int i = 0; i < nopts; i++) sha256_update(&s, opts[i], strlen(opts[i]) + 1);
    sha256_update(&s, j->source, strlen(j->source));
    sha256_hex(&s, j->key);
}

static int compile_one(CompileJob *j, const char *cache_dir) {
    double t0 = now_seconds();
    char opts[8][1100];
    int nopts = compile_options(j->arch, opts);
    cache_key(j, opts, nopts);
    char cpath[2048];
    snprintf(cpath, sizeof cpath, "%s/%s.cubin", cache_dir, j->key);
    size_t len;
    Err ignore;
    char *cached = file_exists(cpath) ? read_file(cpath, &len, &ignore) : NULL;
    if (cached && len > 0) {
        j->cubin = cached; j->cubin_size = len; j->from_cache = 1;
        j->seconds = now_seconds() - t0;
        return 0;
    }
    free(cached);

    nvrtcProgram prog;
    const char *fname = strrchr(j->source_path, '/');
    nvrtcResult r = nvrtcCreateProgram(&prog, j->source, fname ? fname + 1 : j->source_path, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return err_set(&j->err, "%s: nvrtcCreateProgram: %s", j->source_path, nvrtcGetErrorString(r));
    const char *optp[8];
    for (int i = 0; i < nopts; i++) optp[i] = opts[i];
    r = nvrtcCompileProgram(prog, nopts, optp);
    if (r != NVRTC_SUCCESS) {
        size_t loglen = 0;
        nvrtcGetProgramLogSize(prog, &loglen);
        char *log = xmalloc(loglen + 1);
        nvrtcGetProgramLog(prog, log);
        log[loglen] = 0;
        err_set(&j->err, "%s: NVRTC could not compile module \"%s\" for %s (lines below are template file(line)):\n%s",
                j->source_path, j->name, j->arch, log);
        free(log);
        nvrtcDestroyProgram(&prog);
        return -1;
    }
    nvrtcGetCUBINSize(prog, &j->cubin_size);
    j->cubin = xmalloc(j->cubin_size);
    nvrtcGetCUBIN(prog, j->cubin);
    nvrtcDestroyProgram(&prog);
    /* a failed cache write only costs a recompile next time */
    if (mkdir_p(cache_dir, &ignore) == 0) write_file_atomic(cpath, j->cubin, j->cubin_size, &ignore);
    j->seconds = now_seconds() - t0;
    return 0;
}

typedef struct { CompileJob *jobs; int n; int next; const char *cache_dir; pthread_mutex_t lock; } Queue;

static void *worker(void *arg) {
    Queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        int i = q->next++;
        pthread_mutex_unlock(&q->lock);
        if (i >= q->n) return NULL;
        q->jobs[i].failed = compile_one(&q->jobs[i], q->cache_dir) != 0;
    }
}

int nvrtc_compile_all(CompileJob *jobs, int n, const char *cache_dir, int threads, Err *err) {
    Queue q = {jobs, n, 0, cache_dir, PTHREAD_MUTEX_INITIALIZER};
    if (threads < 1) threads = 1;
    if (threads > n) threads = n;
    pthread_t tid[64];
    if (threads > 64) threads = 64;
    for (int i = 1; i < threads; i++) pthread_create(&tid[i], NULL, worker, &q);
    worker(&q);
    for (int i = 1; i < threads; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < n; i++)
        if (jobs[i].failed) { *err = jobs[i].err; return -1; }
    return 0;
}
