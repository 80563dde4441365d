/* cudnn_attention: cuDNN's composite attention graphs through the backend API (see cudnn_attention.h). This
   file loads the library and its function table, opens an attention object for one shape (the version's
   checks; its graphs are built in runtime/cuda/cudnn_graph.c and planned in runtime/cuda/cudnn_plan.c) and
   runs the plans. Only the header's types and enum values are used from cuDNN 9.19's headers, and only ones
   that cuDNN 9.0 already had, so a newer header than the loaded library does no harm. */
#include "runtime/cuda/cudnn_attention.h"
#include "runtime/cuda/cudnn_internal.h"
#include <cudnn_graph.h>
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the library ---- */

static void last_error(const CudnnLib *L, char *buf, size_t n) {
    buf[0] = 0;
    if (L->cudnnGetLastErrorString) L->cudnnGetLastErrorString(buf, n);
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}

void cudnn_status_text(const CudnnLib *L, cudnnStatus_t st, char *buf, size_t n) {
    char detail[384];
    last_error(L, detail, sizeof detail);
    snprintf(buf, n, "%s%s%s%s", L->cudnnGetErrorString(st), detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}


static int say(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (why && n) vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

static int load_library(CudnnAttention *a, const char *name, char *why, size_t n) {
    if (name && strcmp(name, "none") == 0) return say(why, n, "cuDNN is hidden: GPT2GEN_CUDNN_LIBRARY=none");
    if (!name) name = "libcudnn.so.9";
    snprintf(a->libname, sizeof a->libname, "%s", name);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return say(why, n, "cuDNN not found: %s could not be loaded (%s); install cuDNN 9 or name its library in "
                           "GPT2GEN_CUDNN_LIBRARY", name, dlerror());
    CudnnLib L = {.lib = h};
#define LOAD(fn) \
    L.fn = (__typeof__(L.fn))dlsym(h, CUDNN_STR(fn)); \
    if (!L.fn) { dlclose(h); return say(why, n, "%s lacks %s: not a cuDNN 9 library", name, CUDNN_STR(fn)); }
    CUDNN_FUNCS(LOAD)
#undef LOAD
    L.cudnnGetLastErrorString = (__typeof__(L.cudnnGetLastErrorString))dlsym(h, "cudnnGetLastErrorString");
    a->L = L;
    return 0;
}

int cudnn_attention_takes(int B, int T, int NH, int HS, Precision prec, char *why, size_t why_n) {
    if (prec != PREC_BF16 && prec != PREC_FP16) { say(why, why_n, "cuDNN flash attention needs bf16 or fp16"); return 0; }
    if (B < 1 || T < 2 || NH < 1) { say(why, why_n, "cuDNN attention refuses the shape B=%d T=%d NH=%d", B, T, NH); return 0; }
    if (HS < 8 || HS % 8 != 0 || HS > 256) {
        say(why, why_n, "cuDNN attention refuses head size %d: it takes multiples of 8 up to 256", HS);
        return 0;
    }
    return 1;
}

CudnnAttention *cudnn_attention_open(int B, int T, int NH, int HS, Precision prec, int deterministic, const Env *env,
                                     char *why, size_t why_n) {
    if (!cudnn_attention_takes(B, T, NH, HS, prec, why, why_n)) return NULL;
    CudnnAttention *a = xcalloc(1, sizeof *a);
    a->B = B; a->T = T; a->NH = NH; a->HS = HS; a->prec = prec; a->deterministic = deterministic;
    a->debug = env_or_defaults(env)->cudnn_debug;
    if (load_library(a, env_or_defaults(env)->cudnn_library, why, why_n)) { free(a); return NULL; }
    a->version = a->L.cudnnGetVersion();
    const int major = (int)(a->version / 10000), minor = (int)(a->version % 10000 / 100), patch = (int)(a->version % 100);
    snprintf(a->description, sizeof a->description, "cuDNN %d.%d.%d (%s)", major, minor, patch, a->libname);
    if (a->version < 90000) {
        say(why, why_n, "%s is too old: attention needs cuDNN 9.0 or newer", a->description);
        goto fail;
    }
    if (a->version < 91501 && T % 128 != 0) {
        say(why, why_n, "%s refuses T=%d: its attention backward can give NaN when T is not a multiple of 128 "
                        "(fixed in cuDNN 9.15.1)", a->description, T);
        goto fail;
    }
    a->scale = 1.0f / sqrtf((float)HS);
    a->neg_inf = a->version < 91000 ? -FLT_MAX : -INFINITY;
    a->one = 1.0f;
    cudnnStatus_t st = a->L.cudnnCreate(&a->handle);
    if (st != CUDNN_STATUS_SUCCESS) {
        char text[400];
        cudnn_status_text(&a->L, st, text, sizeof text);
        say(why, why_n, "%s: cudnnCreate failed: %s", a->description, text);
        a->handle = NULL;
        goto fail;
    }
    char reason[1024];
    if (cudnn_attention_build_graphs(a, reason, sizeof reason)) {
        say(why, why_n, "%s, B=%d T=%d NH=%d HS=%d %s: %s", a->description, B, T, NH, HS,
            prec == PREC_FP16 ? "fp16" : "bf16", reason);
        goto fail;
    }
    /* the nondeterministic backward's dQ accumulator lies in the workspace, past what its plan asks for */
    size_t bwd_bytes = (size_t)a->bwd.workspace;
    if (!deterministic) {
        a->dq_accum_offset = (bwd_bytes + 255) & ~(size_t)255;
        a->dq_accum_bytes = (size_t)B * NH * T * HS * sizeof(float);
        bwd_bytes = a->dq_accum_offset + a->dq_accum_bytes;
    }
    a->workspace_bytes = (size_t)a->fwd.workspace > bwd_bytes ? (size_t)a->fwd.workspace : bwd_bytes;
    if (a->bwd.nondeterministic) {
        size_t len = strlen(a->description);
        snprintf(a->description + len, sizeof a->description - len, ", backward not deterministic");
    }
    return a;
fail:
    cudnn_attention_close(a);
    return NULL;
}

size_t cudnn_attention_workspace_bytes(const CudnnAttention *a) { return a->workspace_bytes; }

const char *cudnn_attention_describe(const CudnnAttention *a) { return a->description; }

static int execute(CudnnAttention *a, const Graph *g, CUstream s, const int64_t *uids, void **ptrs, int n,
                   CUdeviceptr workspace, Err *err) {
    const CudnnLib *L = &a->L;
    char text[400];
    cudnnStatus_t st = L->cudnnSetStream(a->handle, s);
    if (st != CUDNN_STATUS_SUCCESS) {
        cudnn_status_text(L, st, text, sizeof text);
        return err_set(err, "cuDNN attention %s: cudnnSetStream: %s", g->name, text);
    }
    cudnnBackendDescriptor_t pack = NULL;
    void *ws = (void *)(uintptr_t)workspace;
    const char *step = "creating the variant pack";
    st = L->cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "setting the variant pack";
        st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
        if (st == CUDNN_STATUS_SUCCESS)
            st = L->cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
        if (st == CUDNN_STATUS_SUCCESS) { step = "finalizing the variant pack"; st = L->cudnnBackendFinalize(pack); }
        if (st == CUDNN_STATUS_SUCCESS) { step = "cudnnBackendExecute"; st = L->cudnnBackendExecute(a->handle, g->plan, pack); }
    }
    if (st != CUDNN_STATUS_SUCCESS) cudnn_status_text(L, st, text, sizeof text);
    if (pack) L->cudnnBackendDestroyDescriptor(pack);
    if (st != CUDNN_STATUS_SUCCESS) return err_set(err, "cuDNN attention %s: %s: %s", g->name, step, text);
    return 0;
}

#define DEV(p) ((void *)(uintptr_t)(p))

int cudnn_attention_forward(CudnnAttention *a, CUstream s, CUdeviceptr out, CUdeviceptr stats, CUdeviceptr qkv,
                            CUdeviceptr workspace, Err *err) {
    const size_t third = (size_t)a->NH * a->HS * 2;   /* bytes of C 16-bit values */
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_STATS, UID_SCALE, UID_NEG_INF};
    void *ptrs[] = {DEV(qkv), DEV(qkv + third), DEV(qkv + 2 * third), DEV(out), DEV(stats), &a->scale, &a->neg_inf};
    return execute(a, &a->fwd, s, uids, ptrs, (int)(sizeof uids / sizeof uids[0]), workspace, err);
}

int cudnn_attention_backward(CudnnAttention *a, CUstream s, CUdeviceptr dqkv, CUdeviceptr qkv, CUdeviceptr out,
                             CUdeviceptr dout, CUdeviceptr stats, CUdeviceptr softmax_sum, CUdeviceptr workspace,
                             Err *err) {
    const size_t third = (size_t)a->NH * a->HS * 2;
    const CUdeviceptr acc = workspace + a->dq_accum_offset;
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_DO, UID_STATS, UID_SCALE, UID_NEG_INF, UID_ONE,
                      UID_SOFTMAX_SUM, UID_DQ, UID_DK, UID_DV, UID_DQ_ACCUM};
    void *ptrs[] = {DEV(qkv), DEV(qkv + third), DEV(qkv + 2 * third), DEV(out), DEV(dout), DEV(stats), &a->scale,
                    &a->neg_inf, &a->one, DEV(softmax_sum), DEV(dqkv), DEV(dqkv + third), DEV(dqkv + 2 * third),
                    DEV(acc)};
    /* cuDNN clears the accumulator itself from 9.6 (cudnn-frontend stopped clearing it there) */
    if (a->dq_accum_bytes && a->version < 90600 &&
        cuda_check(cu.cuMemsetD8Async(acc, 0, a->dq_accum_bytes, s), "clearing cuDNN's dQ accumulator", err))
        return -1;
    return execute(a, &a->bwd, s, uids, ptrs, (int)(sizeof uids / sizeof uids[0]) - (a->dq_accum_bytes ? 0 : 1),
                   workspace, err);
}

void cudnn_attention_close(CudnnAttention *a) {
    if (!a) return;
    if (a->L.lib) {
        g_free(&a->fwd);
        g_free(&a->bwd);
        if (a->handle) a->L.cudnnDestroy(a->handle);
    }
    if (a->L.lib) dlclose(a->L.lib);
    free(a);
}
