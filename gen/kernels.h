/* kernels: every kernel family and every kernel, declared once (gen/kernels.c).
 *
 * A family is one template (templates/<family>.cu) compiled to one module. Its declaration holds:
 *   - its tunables: name, default, candidates for sweeps, and the constraints a value must meet;
 *   - derived constants: values computed here from the shape and the tunables, emitted into the prelude,
 *     so that the kernel and the host (launch geometry, scratch sizes) use one rule;
 *   - its kernels: name, typed parameters, the tunable in __launch_bounds__, and the launch geometry rule.
 * From this come: the entry points in the generated source (the prelude defines KERNEL_<name> as the
 * extern "C" signature; the template writes `KERNEL(name) { body }`), the typed launchers of the runtime
 * (build/gen/kernel_launch.h, written by tools/kernel_launchers.c), the plan's launch geometry and the GPU
 * tests' coverage check. Adding a kernel = its declaration (gen/kernels.c; its geometry rule, where no family's
 * rule fits, in gen/kernel_rules.c) + its body in the template. */
#ifndef GPT2GEN_KERNELS_H
#define GPT2GEN_KERNELS_H
#include "gen/step.h"

#define KERNEL_MAX_PARAMS 16
#define FAMILY_MAX_TUNABLES 8
#define FAMILY_MAX_KERNELS 8
#define FAMILY_MAX_DERIVED 4

/* parameter types: floatX pointers, fp32 pointers, int32 pointers (const or not), scalars, uint64 pointers, and TMA
   tensor maps */
typedef enum { KP_X, KP_CX, KP_F32, KP_CF32, KP_I32, KP_CI32, KP_INT, KP_I64, KP_FLOAT, KP_U64,
               KP_TMAP /* a TMA tensor map (templates/common.cuh TensorMap), passed by value */ } KernelParamType;
typedef struct { KernelParamType type; const char *name; } KernelParam;

typedef struct {
    const char *name;          /* NULL ends the list */
    int dflt;
    int candidates[8];         /* for sweeps; 0 ends the list */
    int min, max, multiple_of; /* the allowed values: min <= v <= max, v % multiple_of == 0 */
} TunableDecl;

/* What geometry rules and derived constants see: the plan's model and step shape and one module's values. */
typedef struct {
    long long B, T, C, NH, HS, L, V, Vp, maxT;
    long long NKV, FFN;                    /* keys' and values' heads, the MLP's hidden size (GPT-2: NH, 4C) */
    long long cacheT;                      /* the positions of a row's key/value cache (StepShape.cache_T), else maxT */
    int x128;                              /* floatX elements in 128 bits */
    int sm;                                /* the plan's arch as a number (90 for sm_90) where shape defaults are
                                              chosen; 0 elsewhere (kernel_env leaves it so) */
    int tun[FAMILY_MAX_TUNABLES];          /* tunable values, in declaration order */
    long long derived[FAMILY_MAX_DERIVED]; /* derived constants, in declaration order */
} KernelEnv;

/* smem: dynamic shared memory in bytes (0 for most kernels) */
typedef struct { unsigned grid[3]; unsigned block; unsigned smem; } LaunchDims;
/* the most dynamic shared memory a block may ask for (sm_90: 227 KiB) */
#define KERNEL_MAX_SMEM (227 * 1024)

#define BOUNDS_DERIVED(i) (FAMILY_MAX_TUNABLES + (i))   /* a derived constant in __launch_bounds__ */
typedef struct {
    const char *name;                      /* the extern "C" function; NULL ends the list */
    KernelParam params[KERNEL_MAX_PARAMS]; /* name NULL ends the list */
    int bounds;                            /* the tunable (index) in __launch_bounds__, or BOUNDS_DERIVED(i) */
    int size_param;                        /* -1, or the scalar parameter (index) the grid depends on */
    LaunchDims (*geometry)(const KernelEnv *e, long long size);   /* size: that parameter's value */
    const char *geometry_doc;              /* the rule in words, for plan.txt and the launchers */
    /* BOUNDS_DERIVED(i): a derived constant as __launch_bounds__' second argument, the blocks a multiprocessor is to
       hold at once (ptxas keeps the registers a thread to what lets them); 0: none. Where the family also derives
       CLUSTER_BLOCKS, such a kernel runs in thread-block clusters of that many blocks along x (__cluster_dims__ on
       sm_90 and later; its grid is a multiple of it) */
    int min_blocks;
} KernelDecl;

typedef struct {
    const char *family;                    /* NULL ends the table */
    const char *template_path;
    const char *doc;
    TunableDecl tunables[FAMILY_MAX_TUNABLES];
    const char *derived_names[FAMILY_MAX_DERIVED];
    void (*derive)(KernelEnv *e);          /* fills e->derived; NULL when none */
    /* constraints across values (shared memory, ...): NULL when met, else why not (written into why) */
    const char *(*check)(const KernelEnv *e, char *why, size_t n);
    KernelDecl kernels[FAMILY_MAX_KERNELS];
    /* defaults that depend on the shape (NULL when none): changes tun, which holds the declared defaults; the
       plan takes them for the tunables the config leaves alone, where check accepts the result */
    void (*shape_defaults)(const KernelEnv *e, int *tun);
    /* the steps that call this family (STEP_BIT of STEP_*, STEP_PREFILL; 0: every step); their plans have it */
    unsigned steps;
    /* how its kernels are launched:
       LAUNCH_PLAIN        one after another on the stream
       LAUNCH_OVERLAP      each kernel begins by waiting for the grid before it on the stream (grid_dependency_wait,
                           templates/common.cuh; it may prefetch what no earlier kernel writes before that), so a
                           plan that says so (Plan.overlap) launches them with programmatic dependent launch: a kernel
                           starts while the one before it ends, and its launch and prologue are hidden
       LAUNCH_COOPERATIVE  every block resident at once (its kernels sync the grid); the family is in a plan only
                           where the plan runs it (Plan.decode_persistent) */
    int launch;
    /* the models whose plans have the family (NULL: every model): GPT-2's relatives' families are in their plans
       only, so that GPT-2's plans and sources stay as they were */
    int (*in_model)(const GPT2Shape *model);
} FamilyDecl;
enum { LAUNCH_PLAIN, LAUNCH_OVERLAP, LAUNCH_COOPERATIVE };
#define STEP_BIT(k) (1u << (k))
#define STEP_PREFILL (1u << 8)   /* a forward that fills a cache (StepShape.fills_cache), beside STEP_FORWARD's bit */
/* 1 when step calls family f */
static inline int family_in_step(const FamilyDecl *f, const StepShape *step) {
    unsigned bits = STEP_BIT(step->kind) | (step->fills_cache ? STEP_PREFILL : 0);
    return !f->steps || (f->steps & bits);
}
/* 1 when model's plans have family f */
static inline int family_in_model(const FamilyDecl *f, const GPT2Shape *model) { return !f->in_model || f->in_model(model); }

extern const FamilyDecl kernel_families[];

/* the rows of templates/fc_gemm.cu's tiles (two warpgroups of 64): the fc bias gradient has a partial per such tile */
#define FC_GEMM_TILE_ROWS 128
/* 1 where templates/fc_gemm.cu's kernels run (train.gelu = "fused"): Hopper (sm 90), 16-bit */
int  fc_gemm_fits(const GPT2Shape *model, const StepShape *step, int sm);
int  kernel_fcg_relu2(const GPT2Shape *model);   /* a ReLU^2 MLP that fc_gemm's matmuls take (of 4C) */
/* The one vector-width rule: elements per access for rows of n elements, 128 bits when n allows it. */
int  kernel_vec(int x128, long long n);
/* The environment of family f for the model and step with tunable values tun (declaration order); fills derived. */
KernelEnv kernel_env(const GPT2Shape *model, const StepShape *step, const FamilyDecl *f, const int *tun);
/* Kernels are numbered over the whole table in declaration order (the K_* ids of kernel_launch.h). */
int  kernel_count(void);
const KernelDecl *kernel_decl(int id, const FamilyDecl **family);
/* NULL when CUDA can launch d, else why not. */
const char *kernel_dims_valid(const LaunchDims *d);
/* 1 when v meets t's constraints. */
int  tunable_allowed(const TunableDecl *t, int v);
/* the name in k's __launch_bounds__: a tunable's or a derived constant's */
const char *kernel_bounds_name(const FamilyDecl *f, const KernelDecl *k);
/* the name of k's min_blocks (a derived constant), or NULL where it has none */
const char *kernel_min_blocks_name(const FamilyDecl *f, const KernelDecl *k);
const char *kernel_cluster_name(const FamilyDecl *f, const KernelDecl *k);   /* "CLUSTER_BLOCKS", or NULL: no cluster */
/* "a multiple of 32 from 32 to 1024" */
void tunable_describe(const TunableDecl *t, char *out, size_t n);
/* "floatX *out" / "const float *mean" / "int n_buckets" */
void kernel_param_cuda(const KernelParam *p, char *out, size_t n);
static inline unsigned ceil_div_u(long long a, long long b) { return (unsigned)((a + b - 1) / b); }
#endif
