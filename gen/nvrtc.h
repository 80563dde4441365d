/* nvrtc: kernel source -> CUBIN for one arch, with a disk cache keyed by a hash of everything that changes
   the output (source, options, arch, NVRTC version). Independent modules compile in parallel.
   The cache never hands out a bad CUBIN: an entry is used only when its header, key, size and SHA-256 agree
   and the CUBIN is a well-formed 64-bit CUDA ELF file; a bad or unreadable entry is reported on stderr,
   compiled again and written back atomically. A cache that cannot be written is a note, not an error. */
#ifndef GPT2GEN_NVRTC_H
#define GPT2GEN_NVRTC_H
#include "common/env.h"
#include "common/err.h"

typedef struct {
    /* in */
    const char *name;          /* module name, for messages */
    const char *source;        /* full source text */
    const char *source_path;   /* where the source was written, for messages */
    const char *arch;          /* "sm_90" */
    /* out */
    char key[65];              /* cache key */
    int from_cache;
    double seconds;
    char *cubin;               /* malloc'd */
    size_t cubin_size;
    int failed;
    Err err;
} CompileJob;

/* Compiles every job (threads at a time) against env's CUDA_HOME (NULL: the defaults); uses and fills the cache
   in nvrtc_cache_dir(env).
   Returns 0 when all succeeded; otherwise -1 and err holds the first failure (a compile error, or a CUDA_HOME
   too long for the options). */
int  nvrtc_compile_all(CompileJob *jobs, int n, const Env *env, int threads, Err *err);
/* "13.0" */
void nvrtc_version_string(char *out, size_t n);
/* The cache folder: env's GPT2GEN_CACHE, else build/cache (env NULL: the defaults). */
const char *nvrtc_cache_dir(const Env *env);
#endif
