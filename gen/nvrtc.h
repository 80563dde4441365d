/* nvrtc: kernel source -> CUBIN for one arch, with a disk cache keyed by a hash of everything that changes
   the output (source, options, arch, NVRTC version). Independent modules compile in parallel.
   The cache never hands out a bad CUBIN: an entry is used only when its header, key, size and SHA-256 agree
   and the CUBIN is a well-formed 64-bit CUDA ELF file; a bad or unreadable entry is reported on stderr,
   compiled again and written back atomically. A cache that cannot be written is a note, not an error.
   NVRTC itself is loaded at run time (nvrtc_load), so that a machine without the CUDA toolkit builds and runs
   gpt2gen (on the CPU backend) and generates the sources, only not compile them. */
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
   Returns 0 when all succeeded; otherwise -1 and err holds the first failure (NVRTC not found, a compile error, or
   a CUDA_HOME too long for the options). */
int  nvrtc_compile_all(CompileJob *jobs, int n, const Env *env, int threads, Err *err);
/* Loads NVRTC once per process: env's GPT2GEN_NVRTC_LIBRARY ("none" hides it), else libnvrtc.so.13, .so.12 or .so
   from env's CUDA_HOME/lib64 (default: the CUDA_HOME gpt2gen was built with), else from the loader's path. -1 and
   err "NVRTC not found (looked in ...): install the CUDA toolkit ..." without it. Later calls use the library
   loaded first. */
int  nvrtc_load(const Env *env, Err *err);
/* nvrtc_load, and the CUDA headers the kernels include at env's CUDA_HOME/include: what a compile needs; -1 and err
   saying which is missing. */
int  nvrtc_ready(const Env *env, Err *err);
/* "13.0"; "none" when NVRTC cannot be loaded (nvrtc_load) */
void nvrtc_version_string(const Env *env, char *out, size_t n);
/* The cache folder: env's GPT2GEN_CACHE, else build/cache (env NULL: the defaults). */
const char *nvrtc_cache_dir(const Env *env);
#endif
