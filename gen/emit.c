#include "gen/emit.h"
#include "common/files.h"
#include <stdio.h>
#include "gen/templates.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define COMMON_TEMPLATE "templates/common.cuh"

/* The file a template is read from: <dir>/<its base name> under GPT2GEN_TEMPLATES, else its own path (the copy
   embedded in the binary); the #line directives name it, so that NVRTC's errors point at the file read. */
static const char *template_file(const char *dir, const char *template_path, char *out, size_t cap) {
    const char *base = strrchr(template_path, '/');
    if (!dir || !*dir) return template_path;
    snprintf(out, cap, "%s/%s", dir, base ? base + 1 : template_path);
    return out;
}

/* the most a template may hold (docs/data.md, "Limits of the files gpt2gen reads") */
enum { TEMPLATE_FILE_MAX = 4 << 20 };

char *template_load(const char *dir, const char *template_path, Err *err) {
    char buf[2048];
    const char *path = template_file(dir, template_path, buf, sizeof buf);
    if (path != template_path) return read_file_max(path, TEMPLATE_FILE_MAX, NULL, err);
    for (const EmbeddedFile *f = gpt2gen_templates; f->path; f++)
        if (!strcmp(f->path, template_path)) return xstrdup(f->text);
    err_set(err, "%s: no such template in this build of gpt2gen", template_path);
    return NULL;
}

/* a growing string */
typedef struct { char *s; size_t len, cap; } Buf;
static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + need + 1 > b->cap) {
        b->cap = (b->len + need + 1) * 2;
        char *ns = realloc(b->s, b->cap);
        if (!ns) { fprintf(stderr, "gpt2gen: out of host memory\n"); exit(EXIT_FAIL); }
        b->s = ns;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += need;
}

/* Every declared kernel must have its KERNEL(name) body in the template, and the template must declare
   no entry point of its own: the signatures come from the declarations alone. */
static int check_template(const PlanFamily *m, const char *body, Err *err) {
    const FamilyDecl *f = m->decl;
    for (const KernelDecl *k = f->kernels; k < f->kernels + FAMILY_MAX_KERNELS && k->name; k++) {
        char want[96];
        snprintf(want, sizeof want, "KERNEL(%s)", k->name);
        if (!strstr(body, want))
            return err_set(err, "%s: no %s body for the kernel that gen/kernels.c declares", f->template_path, want);
    }
    if (strstr(body, "extern \"C\""))
        return err_set(err, "%s: declares an extern \"C\" entry point of its own; declare kernels in gen/kernels.c "
                       "and write their bodies as KERNEL(name) { ... }", f->template_path);
    return 0;
}

/* The prelude's entry point of kernel k: a macro the template's KERNEL(name) expands to. */
static void emit_entry(Buf *b, const FamilyDecl *f, const KernelDecl *k) {
    buf_printf(b, "// grid %s\n", k->geometry_doc);
    const char *min_blocks = kernel_min_blocks_name(f, k), *cluster = kernel_cluster_name(f, k);
    char cl[96] = "";
    if (cluster) snprintf(cl, sizeof cl, " CLUSTER_DIMS(%s)", cluster);
    buf_printf(b, "#define KERNEL_%s extern \"C\" __global__ void __launch_bounds__(%s%s%s)%s \\\n    %s(", k->name,
               kernel_bounds_name(f, k), min_blocks ? ", " : "", min_blocks ? min_blocks : "", cl, k->name);
    for (int i = 0; i < KERNEL_MAX_PARAMS && k->params[i].name; i++) {
        char p[128];
        kernel_param_cuda(&k->params[i], p, sizeof p);
        buf_printf(b, "%s%s", i ? ", " : "", p);
    }
    buf_printf(b, ")\n");
}

/* The architecture's constants (docs/model.md, "Architectures"), for a model that is not GPT-2 (GPT-2's sources stay
   as they were): every choice a constant of the source, never a branch at run time. */
static void emit_arch(Buf *b, const Plan *plan, const KernelEnv *e) {
    const GPT2Shape *s = &plan->model;
    buf_printf(b, "\n// ---- the architecture (model keys beyond GPT-2's; docs/model.md, \"Architectures\")\n");
    buf_printf(b, "#define ARCH_CONSTANTS 1   // templates shared with GPT-2 take NKV, QKVW (decode.cu) and SOFTCAP "
               "(classifier.cu) from here\n");
    buf_printf(b, "constexpr int NKV = %lld;     // model.n_kv_head: the keys' and values' heads\n", e->NKV);
    buf_printf(b, "constexpr int QKVW = %lld;    // qkv's features, (NH + 2 NKV) HS: q's heads, then k's, then v's\n",
               (e->NH + 2 * e->NKV) * e->HS);
    buf_printf(b, "constexpr int FFN = %lld;     // model.n_ffn: the MLP's hidden size\n", e->FFN);
    buf_printf(b, "constexpr int VEC_FFN = %d;\nconstexpr int VEC_QKVW = %d;\n", kernel_vec(e->x128, e->FFN),
               kernel_vec(e->x128, (e->NH + 2 * e->NKV) * e->HS));
    buf_printf(b, "constexpr float NORM_EPS = %.9ef;   // model.norm_eps\n", (double)gpt2_norm_eps(s));
    buf_printf(b, "constexpr double ROPE_THETA = %.17e;   // model.rope_theta\n", gpt2_rope_theta(s));
    buf_printf(b, "constexpr float SOFTCAP = %.9ef;   // model.logit_softcap (0: none)\n", s->logit_softcap);
    buf_printf(b, "constexpr bool QK_ROPE = %s;   // QK-norm's kernels also apply RoPE (gpt2_qk_norm_rotates)\n",
               gpt2_qk_norm_rotates(s) ? "true" : "false");
    buf_printf(b, "constexpr bool FC_RELU2 = %s;   // model.mlp = \"relu2\" (fc_gemm.cu's activation)\n",
               s->mlp == MLP_RELU2 ? "true" : "false");
    buf_printf(b, "constexpr bool FC_BIAS = %s;   // model.bias\n", s->no_bias ? "false" : "true");
    buf_printf(b, "constexpr bool NORM_RMS = %s;   // model.norm = \"rmsnorm\"\n", s->norm == NORM_RMSNORM ? "true" : "false");
    buf_printf(b, "constexpr bool QK_NORM = %s;   // model.qk_norm\n", s->qk_norm ? "true" : "false");
    buf_printf(b, "constexpr bool POS_ROPE = %s;   // model.position = \"rope\"\n", s->position == POS_ROPE ? "true" : "false");
    buf_printf(b, "constexpr int MLP_KIND = %d;   // model.mlp: 0 gelu, 1 relu2, 2 swiglu\n",
               s->mlp == MLP_RELU2 ? 1 : s->mlp == MLP_SWIGLU ? 2 : 0);
    buf_printf(b, "// RoPE's positions: from the cache's position (a decode step, a prefill), else from 0\n");
    buf_printf(b, "constexpr bool ROPE_AT_POS = %s;\n",
               plan->step.kind == STEP_DECODE || plan->step.fills_cache ? "true" : "false");
}

char *emit_family(const Plan *plan, const PlanFamily *m, const char *dir, Err *err) {
    const FamilyDecl *f = m->decl;
    Precision prec = plan->step.precision;
    char *common = template_load(dir, COMMON_TEMPLATE, err);
    if (!common) return NULL;
    char *body = template_load(dir, f->template_path, err);
    if (!body || check_template(m, body, err)) { free(common); free(body); return NULL; }
    int n_kernels = 0;
    while (n_kernels < FAMILY_MAX_KERNELS && f->kernels[n_kernels].name) n_kernels++;
    Buf b = {0};
    buf_printf(&b, "// Generated by gpt2gen from %s for config \"%s\" (%s).\n", f->template_path, plan->config_name,
               plan->config_path);
    buf_printf(&b, "// Do not edit: change the template or the config and run `gpt2gen build %s`.\n", plan->config_path);
    buf_printf(&b, "// Kernel family \"%s\" of plan \"%s\": %d kernel%s, for %s.\n\n", f->family, plan->name, n_kernels,
               n_kernels == 1 ? "" : "s", plan->arch);
    buf_printf(&b, "#include <cuda_bf16.h>\n");
    if (prec == PREC_FP16) buf_printf(&b, "#include <cuda_fp16.h>\n");
    const KernelEnv *e = &m->env;
    buf_printf(&b, "\n// ---- shape and precision, from the config and the plan's step (%s)\n", step_kind_name(plan->step.kind));
    buf_printf(&b, "constexpr int B = %lld;       // rows per step (training: train.batch_size)\n", e->B);
    buf_printf(&b, "constexpr int T = %lld;       // tokens per row (training: train.seq_len)\n", e->T);
    buf_printf(&b, "constexpr int C = %lld;       // model.n_embd\n", e->C);
    buf_printf(&b, "constexpr int NH = %lld;      // model.n_head\n", e->NH);
    buf_printf(&b, "constexpr int HS = %lld;      // head size, C / NH\n", e->HS);
    buf_printf(&b, "constexpr int L = %lld;       // model.n_layer\n", e->L);
    buf_printf(&b, "constexpr int V = %lld;       // model.vocab_size\n", e->V);
    buf_printf(&b, "constexpr int Vp = %lld;      // vocab padded to a multiple of 128\n", e->Vp);
    buf_printf(&b, "constexpr int maxT = %lld;    // model.max_seq_len\n", e->maxT);
    buf_printf(&b, "constexpr int cacheT = %lld;  // positions of a row's key/value cache (decode, prefill; else maxT)\n", e->cacheT);
    if (prec == PREC_BF16) buf_printf(&b, "typedef __nv_bfloat16 floatX;\n#define PRECISION_BF16 1\n");
    else if (prec == PREC_FP16) buf_printf(&b, "typedef __half floatX;\n#define PRECISION_FP16 1\n");
    else buf_printf(&b, "typedef float floatX;\n#define PRECISION_FP32 1\n");
    buf_printf(&b, "\n// ---- vector widths: floatX elements per access, 128 bits when a row's length allows it\n");
    buf_printf(&b, "constexpr int X128 = %d;\n", e->x128);
    const struct { const char *name; long long n; } widths[] = {{"C", e->C}, {"4C", 4 * e->C}, {"HS", e->HS}, {"T", e->T}, {"Vp", e->Vp}};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        buf_printf(&b, "constexpr int VEC_%s = %d;\n", widths[i].name, kernel_vec(e->x128, widths[i].n));
    if (!gpt2_is_gpt2(&plan->model)) emit_arch(&b, plan, e);
    if (m->n_tunables) buf_printf(&b, "\n// ---- tunables of %s (gen/kernels.c)\n", f->family);
    for (int i = 0; i < m->n_tunables; i++)
        buf_printf(&b, "constexpr int %s = %d;   // %s\n", f->tunables[i].name, m->tunables[i].value, m->tunables[i].origin);
    for (int i = 0; i < FAMILY_MAX_DERIVED && f->derived_names[i]; i++)
        buf_printf(&b, "constexpr long long %s = %lld;   // derived (gen/kernels.c)\n", f->derived_names[i], e->derived[i]);
    buf_printf(&b, "\n// ---- entry points, as gen/kernels.c declares them; the template writes KERNEL(name) { body }\n");
    buf_printf(&b, "#define KERNEL(name) KERNEL_##name\n");
    buf_printf(&b, "// a kernel's thread-block cluster (gen/kernels.c: a family that derives CLUSTER_BLOCKS), where the GPU has them\n"
                   "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900\n#define CLUSTER_DIMS(n) __cluster_dims__(n, 1, 1)\n"
                   "#else\n#define CLUSTER_DIMS(n)\n#endif\n");
    for (int i = 0; i < n_kernels; i++) emit_entry(&b, f, &f->kernels[i]);
    /* #line makes NVRTC's errors name the template file and its own line numbers */
    char file[2048];
    buf_printf(&b, "\n// ---- %s\n#line 1 \"%s\"\n%s", COMMON_TEMPLATE, template_file(dir, COMMON_TEMPLATE, file, sizeof file), common);
    if (b.s[b.len - 1] != '\n') buf_printf(&b, "\n");
    buf_printf(&b, "\n// ---- %s\n#line 1 \"%s\"\n%s", f->template_path, template_file(dir, f->template_path, file, sizeof file), body);
    if (b.s[b.len - 1] != '\n') buf_printf(&b, "\n");
    free(common);
    free(body);
    return b.s;
}
