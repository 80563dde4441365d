/* test_plan: the generator's units, without a GPU: tunable values against their declared constraints, the
   emitted prelude (constants, vector widths, entry points from the declarations), the template checks, the
   step's memory layout (no two buffers overlap unless the plan says they share, sizes from the model's own
   formulas), the kernels' launch geometry covering their work, and the round trip through the resolved
   config.lua giving the same plan. Runs from the repository root (tests/run.sh does). */
#include "gen/config.h"
#include "tests/check.h"
#include "gen/emit.h"
#include "gen/plan.h"
#include "common/files.h"
#include "kernel_ids.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

static Config cfg;
static Plan plan;

/* tiny.lua with overrides (NULL-terminated), planned for sm_90; 0 on success, else err */
static int make(const char *path, const char *const *sets, Err *err) {
    int n = 0;
    while (sets && sets[n]) n++;
    if (config_load(&cfg, path, sets, n, err)) return -1;
    return plan_make_train(&plan, &cfg, "sm_90", NULL, err);
}

static void test_tunable_out_of_range_rejected(void) {
    static const char *const bad[][2] = {{"tune.layernorm.BLOCK_SIZE=100", "multiple of 32"},
                                          {"tune.layernorm.BLOCK_SIZE=4096", "from 32 to 1024"},
                                          {"tune.bias.ROW_SPLITS=70000", "from 1 to 65535"},
                                          {"tune.grad_norm.GRID_SIZE={256, 70000}", "from 1 to 65536"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Err err = {{0}};
        const char *sets[] = {bad[i][0], NULL};
        int rc = make("configs/tiny.lua", sets, &err);
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(bad[i][0], '=') - bad[i][0]), bad[i][0]);
        CHECK(rc != 0, "%s was accepted", bad[i][0]);
        CHECK(strstr(err.msg, key) && strstr(err.msg, bad[i][1]) && strstr(err.msg, "configs/tiny.lua"),
              "%s: the message should name the file, %s and '%s': %s", bad[i][0], key, bad[i][1], err.msg);
    }
}

static void test_tunable_in_range_used(void) {
    Err err = {{0}};
    const char *sets[] = {"tune.layernorm.BLOCK_SIZE=512", "tune.layernorm.BWD_BLOCK_SIZE={128, 512}", NULL};
    if (make("configs/tiny.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
    const PlanKernel *k = &plan.kernels[K_LAYERNORM_FORWARD];
    const PlanFamily *m = &plan.families[k->family];
    CHECK(m->tunables[0].value == 512 && !strcmp(m->tunables[0].origin, "config"), "BLOCK_SIZE %d (%s)", m->tunables[0].value,
          m->tunables[0].origin);
    CHECK(m->tunables[1].value == 128 && m->tunables[1].n_candidates == 2, "BWD_BLOCK_SIZE %d, %d candidates",
          m->tunables[1].value, m->tunables[1].n_candidates);
    CHECK(k->dims.block == 512, "layernorm_forward block %u", k->dims.block);
    CHECK(plan.kernels[K_LAYERNORM_BACKWARD].dims.block == 128, "layernorm_backward block %u", plan.kernels[K_LAYERNORM_BACKWARD].dims.block);
}

static void test_unknown_family_and_tunable(void) {
    Err err = {{0}};
    const char *s1[] = {"tune.layernrom.BLOCK_SIZE=256", NULL};
    CHECK(make("configs/tiny.lua", s1, &err) && strstr(err.msg, "no such kernel family") && strstr(err.msg, "layernorm"),
          "unknown family: %s", err.msg);
    const char *s2[] = {"tune.layernorm.BLOK_SIZE=256", NULL};
    CHECK(make("configs/tiny.lua", s2, &err) && strstr(err.msg, "no such tunable") && strstr(err.msg, "BWD_BLOCK_SIZE"),
          "unknown tunable: %s", err.msg);
}

/* The prelude of every module: the config's constants, the vector widths by the one rule, and one entry
   point per declared kernel with the declared parameters. */
static void test_prelude(void) {
    Err err = {{0}};
    const char *sets[] = {"precision=bf16", "train.seq_len=60", "model.max_seq_len=64", "train.total_batch_size=480", "tune.gelu.BLOCK_SIZE=128", NULL};
    if (make("configs/tiny.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
    for (int i = 0; i < plan.n_families; i++) {
        const PlanFamily *m = &plan.families[i];
        char *src = emit_family(&plan, m, NULL, &err);
        if (!src) { CHECK(0, "%s: %s", m->decl->family, err.msg); continue; }
        char want[512];
        snprintf(want, sizeof want, "constexpr int C = %d;", cfg.model.n_embd);
        CHECK(strstr(src, want), "%s: no '%s'", m->decl->family, want);
        CHECK(strstr(src, "typedef __nv_bfloat16 floatX;"), "%s: floatX is not bf16", m->decl->family);
        CHECK(strstr(src, "constexpr int X128 = 8;") && strstr(src, "constexpr int VEC_C = 8;"), "%s: 128-bit widths", m->decl->family);
        CHECK(strstr(src, "constexpr int VEC_T = 1;"), "%s: T=60 is no multiple of 8: VEC_T must be 1", m->decl->family);
        for (int t = 0; t < m->n_tunables; t++) {
            snprintf(want, sizeof want, "constexpr int %s = %d;", m->decl->tunables[t].name, m->tunables[t].value);
            CHECK(strstr(src, want), "%s: no '%s'", m->decl->family, want);
        }
        for (const KernelDecl *k = m->decl->kernels; k < m->decl->kernels + FAMILY_MAX_KERNELS && k->name; k++) {
            char sig[1024];
            const char *min_blocks = kernel_min_blocks_name(m->decl, k), *cluster = kernel_cluster_name(m->decl, k);
            char cl[96] = "";
            if (cluster) snprintf(cl, sizeof cl, " CLUSTER_DIMS(%s)", cluster);
            int len = snprintf(sig, sizeof sig, "#define KERNEL_%s extern \"C\" __global__ void __launch_bounds__(%s%s%s)%s \\\n    %s(",
                               k->name, kernel_bounds_name(m->decl, k), min_blocks ? ", " : "", min_blocks ? min_blocks : "",
                               cl, k->name);
            for (int p = 0; p < KERNEL_MAX_PARAMS && k->params[p].name; p++) {
                char one[128];
                kernel_param_cuda(&k->params[p], one, sizeof one);
                len += snprintf(sig + len, sizeof sig - len, "%s%s", p ? ", " : "", one);
            }
            snprintf(sig + len, sizeof sig - len, ")\n");
            CHECK(strstr(src, sig), "%s: no entry point\n%s", m->decl->family, sig);
        }
        if (!strcmp(m->decl->family, "gelu")) CHECK(strstr(src, "constexpr int BLOCK_SIZE = 128;   // config"), "gelu: the config's block");
        free(src);
    }
}

/* A template that lacks a declared kernel's body, or declares an entry point of its own, is refused. */
/* The attention family's defaults depend on the shape (gen/kernels.c): 128-row tiles and warps of 32 rows with
   tensor cores and a head size of at most 64, for the tunables the config leaves alone and only where the
   family's check accepts the whole set; the declared defaults elsewhere. */
static const PlanFamily *attention_module(void) {
    for (int i = 0; i < plan.n_families; i++)
        if (!strcmp(plan.families[i].decl->family, "attention")) return &plan.families[i];
    return NULL;
}
static void test_attention_shape_defaults(void) {
    static const struct {
        const char *sets[4];
        int want[6];   /* Q_TILE, KV_TILE, BWD_TILE, BWD_INNER, Q_WARP_ROWS, BWD_WARP_ROWS */
    } cases[] = {
        {{"precision=bf16", "train.seq_len=256", "model.max_seq_len=256"}, {128, 64, 128, 32, 32, 32}},
        {{"precision=fp16", "train.seq_len=256", "model.max_seq_len=256", "tune.attention.KV_TILE=32"}, {128, 32, 128, 32, 32, 32}},
        {{"precision=fp32", "train.seq_len=256", "model.max_seq_len=256"}, {64, 64, 64, 64, 16, 16}},
        {{"precision=bf16", "train.seq_len=64", "model.max_seq_len=64"}, {64, 64, 64, 64, 16, 16}},            /* T < 128 */
        {{"precision=bf16", "train.seq_len=256", "model.max_seq_len=256", "model.n_head=1"}, {64, 64, 64, 64, 16, 16}},  /* HS 128 */
        /* the config's BWD_INNER 64 does not go with warps of 32 rows: the declared defaults stay */
        {{"precision=bf16", "train.seq_len=256", "model.max_seq_len=256", "tune.attention.BWD_INNER=64"}, {64, 64, 64, 64, 16, 16}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *sets[6] = {"train.total_batch_size=2048"};
        for (int i = 0; i < 4 && cases[c].sets[i]; i++) sets[i + 1] = cases[c].sets[i];
        Err err = {{0}};
        if (make("configs/tiny.lua", sets, &err)) { CHECK(0, "case %zu: %s", c, err.msg); continue; }
        const PlanFamily *m = attention_module();
        if (!m) { CHECK(0, "no attention module"); return; }
        for (int t = 0; t < 6; t++) {
            const PlanTunable *tu = &m->tunables[t];
            CHECK(tu->value == cases[c].want[t], "case %zu: %s = %d, expected %d", c, m->decl->tunables[t].name, tu->value,
                  cases[c].want[t]);
            const char *name = m->decl->tunables[t].name, *origin = tu->value != m->decl->tunables[t].dflt
                                                                     ? "default for this shape" : "default";
            char key[64];
            snprintf(key, sizeof key, "tune.attention.%s=", name);
            for (int i = 0; i < 4 && cases[c].sets[i]; i++)
                if (!strncmp(cases[c].sets[i], key, strlen(key))) origin = "config";
            CHECK(!strcmp(tu->origin, origin), "case %zu: %s from '%s', expected '%s'", c, name, tu->origin, origin);
        }
    }
    /* set by hand, warps of 32 rows with head size 128 are refused, with the reason */
    const char *sets[] = {"precision=bf16", "model.n_head=1", "tune.attention.BWD_WARP_ROWS=32", "tune.attention.BWD_INNER=32", NULL};
    Err err = {{0}};
    CHECK(make("configs/tiny.lua", sets, &err) != 0 && strstr(err.msg, "BWD_WARP_ROWS 32 needs a head size of at most 64"),
          "BWD_WARP_ROWS 32 at head size 128: %s", err.msg);
}

/* Both directions on wgmma (FWD_SM, BWD_SM 90) are the default on sm_90 only, at head size 64 in 16 bits, the
   forward with 128-row query tiles; not a direction whose tiles the config set to ones its kernels do not take (the
   backward takes 64-row tiles only). Set by hand where it cannot run, it is refused. */
static void test_attention_wgmma_default(void) {
    static const struct {
        const char *arch, *extra;
        int fwd_sm, q_tile, q_warp_rows, bwd_sm, bwd_tile, bwd_inner, bwd_warp_rows;
    } cases[] = {
        {"sm_90", NULL, 90, 128, 16, 90, 64, 64, 16},
        {"sm_80", NULL, 80, 128, 32, 80, 128, 32, 32},
        {"sm_90", "tune.attention.BWD_INNER=32", 90, 128, 16, 80, 128, 32, 32},
        {"sm_90", "tune.attention.BWD_TILE=128", 90, 128, 16, 80, 128, 32, 32},
        {"sm_90", "tune.attention.Q_TILE=64", 90, 64, 16, 90, 64, 64, 16},
        {"sm_90", "tune.attention.Q_WARP_ROWS=32", 80, 128, 32, 90, 64, 64, 16},
        {"sm_90", "tune.attention.KV_TILE=32", 80, 128, 32, 90, 64, 64, 16},
        {"sm_90", "precision=fp32", 80, 64, 16, 80, 64, 64, 16},
    };
    enum { Q_TILE = 0, Q_WARP_ROWS = 4, BWD_TILE = 2, BWD_INNER = 3, BWD_WARP_ROWS = 5, FWD_SM = 6, BWD_SM = 7 };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *sets[] = {"precision=bf16", "train.seq_len=256", "model.max_seq_len=256", "model.n_head=2",
                              "train.total_batch_size=2048", cases[c].extra, NULL};
        Err err = {{0}};
        int n = cases[c].extra ? 6 : 5;
        if (config_load(&cfg, "configs/tiny.lua", sets, n, &err) || plan_make_train(&plan, &cfg, cases[c].arch, NULL, &err)) {
            CHECK(0, "case %zu: %s", c, err.msg);
            continue;
        }
        const PlanFamily *m = attention_module();
        if (!m) { CHECK(0, "no attention module"); return; }
        CHECK(!strcmp(m->decl->tunables[BWD_SM].name, "BWD_SM") && !strcmp(m->decl->tunables[FWD_SM].name, "FWD_SM") &&
              !strcmp(m->decl->tunables[Q_WARP_ROWS].name, "Q_WARP_ROWS"), "the attention's tunables moved: %s, %s, %s",
              m->decl->tunables[FWD_SM].name, m->decl->tunables[BWD_SM].name, m->decl->tunables[Q_WARP_ROWS].name);
        const int got[7] = {m->tunables[FWD_SM].value, m->tunables[Q_TILE].value, m->tunables[Q_WARP_ROWS].value,
                            m->tunables[BWD_SM].value, m->tunables[BWD_TILE].value, m->tunables[BWD_INNER].value,
                            m->tunables[BWD_WARP_ROWS].value};
        const int want[7] = {cases[c].fwd_sm, cases[c].q_tile, cases[c].q_warp_rows, cases[c].bwd_sm, cases[c].bwd_tile,
                             cases[c].bwd_inner, cases[c].bwd_warp_rows};
        CHECK(!memcmp(got, want, sizeof got), "case %zu (%s, %s): FWD_SM %d Q_TILE %d Q_WARP_ROWS %d BWD_SM %d BWD_TILE %d "
              "BWD_INNER %d BWD_WARP_ROWS %d, expected %d %d %d %d %d %d %d", c, cases[c].arch,
              cases[c].extra ? cases[c].extra : "-", got[0], got[1], got[2], got[3], got[4], got[5], got[6], want[0], want[1],
              want[2], want[3], want[4], want[5], want[6]);
        /* the backward's blocks a multiprocessor (__launch_bounds__' second argument): two of wgmma's */
        const int blocks = (int)m->env.derived[2], want_blocks = got[3] == 90 ? 2 : 1;
        CHECK(!strcmp(m->decl->derived_names[2], "BWD_BLOCKS") && blocks == want_blocks, "case %zu: %s = %d, expected %d", c,
              m->decl->derived_names[2], blocks, want_blocks);
    }
    const char *fp32[] = {"precision=fp32", "tune.attention.BWD_SM=90", NULL};
    Err err = {{0}};
    CHECK(make("configs/tiny.lua", fp32, &err) != 0 && strstr(err.msg, "BWD_SM 90 (Hopper's wgmma) needs bf16 or fp16"),
          "BWD_SM 90 in fp32: %s", err.msg);
    const char *tile128[] = {"precision=bf16", "model.n_head=2", "tune.attention.BWD_SM=90", "tune.attention.BWD_TILE=128", NULL};
    CHECK(make("configs/tiny.lua", tile128, &err) != 0 && strstr(err.msg, "BWD_TILE 64") &&
          strstr(err.msg, "(head size 64, BWD_INNER 64, BWD_TILE 128,"), "BWD_SM 90 at BWD_TILE 128: %s", err.msg);
    const char *hs32[] = {"precision=bf16", "tune.attention.FWD_SM=90", NULL};
    CHECK(make("configs/tiny.lua", hs32, &err) != 0 && strstr(err.msg, "FWD_SM 90 (Hopper's wgmma) needs") &&
          strstr(err.msg, "head size 32"), "FWD_SM 90 at head size 32: %s", err.msg);
}

/* layernorm_backward's dynamic shared memory (gen/kernels.c, ln_derive). Stages: at C = 768 in 16 bits with rows
   to spare, two stages a warp of three rows; not at C = 1024, where they measured slower, nor in fp32 (not
   measured), nor with one row a warp. Sums (BWD_SUMS 2, the default where a lane holds more than 24 values of a row):
   2 * values * 32 floats a warp; refused where that exceeds a block's shared memory, and then not the default. */
static void test_layernorm_backward_smem(void) {
    static const struct { const char *path, *set1, *set2; int sums; unsigned smem; } cases[] = {
        /* 16 bits at C <= 768: blocks of 4 warps (ln_shape_defaults) */
        {"configs/gpt2-124M.lua", "precision=bf16", NULL, 1, 4 * 2 * 3 * 768 * 2},
        {"configs/gpt2-124M.lua", "precision=fp16", NULL, 1, 4 * 2 * 3 * 768 * 2},
        {"configs/gpt2-124M.lua", "precision=bf16", "tune.layernorm.BWD_BLOCK_SIZE=256", 1, 8 * 2 * 3 * 768 * 2},
        {"configs/gpt2-124M.lua", "precision=fp32", NULL, 1, 0},
        {"configs/gpt2-124M.lua", "precision=bf16", "tune.layernorm.BWD_SUMS=2", 2, 4 * 2 * 24 * 32 * 4},
        {"configs/gpt2-350M.lua", "precision=bf16", NULL, 2, 8 * 2 * 32 * 32 * 4},
        {"configs/gpt2-350M.lua", "precision=fp32", NULL, 2, 8 * 2 * 32 * 32 * 4},
        {"configs/gpt2-350M.lua", "precision=bf16", "tune.layernorm.BWD_SUMS=1", 1, 0},
        {"configs/gpt2-1558M.lua", "precision=bf16", NULL, 2, 8 * 2 * 56 * 32 * 4},
        {"configs/tiny.lua", "precision=bf16", NULL, 1, 0},
        /* C = 2048 with 16 warps: 16 * 2 * 64 * 32 * 4 = 256 KiB of sums do not fit, so the sums stay in registers */
        {"configs/gpt2-350M.lua", "model.n_embd=2048", "tune.layernorm.BWD_BLOCK_SIZE=512", 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *sets[] = {cases[c].set1, cases[c].set2, NULL};
        Err err = {{0}};
        if (make(cases[c].path, sets, &err)) { CHECK(0, "%s: %s", cases[c].path, err.msg); continue; }
        const PlanKernel *k = &plan.kernels[K_LAYERNORM_BACKWARD];
        const PlanFamily *ln = NULL;
        for (int i = 0; i < plan.n_families; i++) if (!strcmp(plan.families[i].decl->family, "layernorm")) ln = &plan.families[i];
        CHECK(ln && ln->tunables[2].value == cases[c].sums && k->dims.smem == cases[c].smem,
              "%s %s %s: layernorm_backward has BWD_SUMS %d and %u bytes of shared memory, expected %d and %u",
              cases[c].path, cases[c].set1, cases[c].set2 ? cases[c].set2 : "", ln ? ln->tunables[2].value : -1,
              k->dims.smem, cases[c].sums, cases[c].smem);
    }
    /* the backward's blocks: 128 threads, four a multiprocessor, where the sums stay in registers in 16 bits; a block
       size set alone keeps 512 threads a multiprocessor */
    static const struct { const char *path, *set; int block, min_blocks; } blocks[] = {
        {"configs/gpt2-124M.lua", "precision=bf16", 128, 4}, {"configs/gpt2-124M.lua", "precision=fp32", 256, 1},
        {"configs/gpt2-350M.lua", "precision=bf16", 256, 1},
        {"configs/gpt2-124M.lua", "tune.layernorm.BWD_BLOCK_SIZE=256", 256, 2},
        {"configs/gpt2-124M.lua", "tune.layernorm.BWD_BLOCK_SIZE=512", 512, 1}};
    for (size_t c = 0; c < sizeof blocks / sizeof blocks[0]; c++) {
        const char *one[] = {blocks[c].set, NULL};
        Err err = {{0}};
        if (make(blocks[c].path, one, &err)) { CHECK(0, "%s: %s", blocks[c].path, err.msg); continue; }
        const PlanFamily *ln = NULL;
        for (int i = 0; i < plan.n_families; i++) if (!strcmp(plan.families[i].decl->family, "layernorm")) ln = &plan.families[i];
        CHECK(ln && plan.kernels[K_LAYERNORM_BACKWARD].dims.block == (unsigned)blocks[c].block &&
              ln->env.derived[2] == blocks[c].min_blocks, "%s %s: layernorm_backward blocks of %u, %lld a multiprocessor; "
              "expected %d and %d", blocks[c].path, blocks[c].set, plan.kernels[K_LAYERNORM_BACKWARD].dims.block,
              ln ? ln->env.derived[2] : -1, blocks[c].block, blocks[c].min_blocks);
    }
    const char *sets[] = {"model.n_embd=2048", "tune.layernorm.BWD_BLOCK_SIZE=512", "tune.layernorm.BWD_SUMS=2", NULL};
    Err err = {{0}};
    const char *many[] = {"tune.layernorm.BWD_SM_THREADS=4096", NULL};
    CHECK(make("configs/gpt2-124M.lua", many, &err) != 0 && strstr(err.msg, "BWD_SM_THREADS") && strstr(err.msg, "2048"),
          "BWD_SM_THREADS 4096: %s", err.msg);
    CHECK(make("configs/gpt2-350M.lua", sets, &err) != 0 && strstr(err.msg, "BWD_SUMS=2") && strstr(err.msg, "262144"),
          "BWD_SUMS=2 at C=2048 and 16 warps: %s", err.msg);
}

static void test_template_checks(void) {
    char dir[] = "/tmp/gpt2gen-tpl-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    Err err = {{0}};
    if (make("configs/tiny.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    const PlanFamily *gelu = NULL;
    for (int i = 0; i < plan.n_families; i++) if (!strcmp(plan.families[i].decl->family, "gelu")) gelu = &plan.families[i];
    char *text = template_load(NULL, "templates/gelu.cu", &err), path[512], common[512];
    snprintf(path, sizeof path, "%s/gelu.cu", dir);
    snprintf(common, sizeof common, "%s/common.cuh", dir);
    char *ctext = template_load(NULL, "templates/common.cuh", &err);
    FILE *f = fopen(common, "w");
    if (f) { fputs(ctext, f); fclose(f); }
    static const char *const edits[][3] = {{"KERNEL(gelu_backward)", "__global__ void gelu_backward_x()", "KERNEL(gelu_backward)"},
                                           {"KERNEL(gelu_forward)", "extern \"C\" __global__ void extra() {}\nKERNEL(gelu_forward)", "own"}};
    for (int e = 0; e < 2; e++) {
        char *at = strstr(text, edits[e][0]);
        if (!at) { CHECK(0, "templates/gelu.cu has no %s", edits[e][0]); break; }
        f = fopen(path, "w");
        if (!f) { CHECK(0, "cannot write %s", path); break; }
        fprintf(f, "%.*s%s%s", (int)(at - text), text, edits[e][1], at + strlen(edits[e][0]));
        fclose(f);
        char *src = emit_family(&plan, gelu, dir, &err);
        CHECK(!src && strstr(err.msg, "templates/gelu.cu") && strstr(err.msg, edits[e][2]), "edit %d: %s", e, src ? "accepted" : err.msg);
        free(src);
    }
    unlink(path);
    unlink(common);
    rmdir(dir);
    free(text);
    free(ctext);
}

/* Buffers never overlap unless one lies inside the buffer it shares; offsets are aligned; the arena holds
   them all; the categories add up; sizes follow the model. For every ready config and recompute level. */
static void check_memory(const char *what) {
    const PlanMemory *mem = &plan.memory;
    size_t x = cfg.model.precision == PREC_FP32 ? 4 : 2, B = cfg.run.train.batch_size, T = cfg.run.train.seq_len, C = cfg.model.n_embd;
    size_t L = cfg.model.n_layer, NH = cfg.model.n_head, Vp = cfg.model.padded_vocab_size;
    GPT2Shape s = config_shape(&cfg);
    size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, NULL), cats[MEM_CATEGORIES] = {0};
    for (int i = 0; i < BUF_COUNT; i++) {
        const PlanBuffer *a = &mem->buffers[i];
        CHECK(a->name != NULL, "%s: buffer %d has no name", what, i);
        if (!a->bytes) continue;
        CHECK(a->offset % MEM_ALIGN == 0, "%s: %s at %zu is not aligned", what, a->name, a->offset);
        CHECK(a->offset + a->bytes <= mem->arena_bytes, "%s: %s ends past the arena", what, a->name);
        if (a->shares >= 0) {
            const PlanBuffer *h = &mem->buffers[a->shares];
            CHECK(a->offset >= h->offset && a->offset + a->bytes <= h->offset + h->bytes, "%s: %s is not inside %s", what, a->name, h->name);
        } else {
            cats[a->category] += a->bytes;
        }
        for (int j = 0; j < i; j++) {
            const PlanBuffer *b = &mem->buffers[j];
            if (!b->bytes || a->shares == j || b->shares == i) continue;   /* one lies inside the other, by plan */
            int overlap = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            CHECK(!overlap, "%s: %s and %s overlap", what, a->name, b->name);
        }
    }
    for (int c = 0; c < MEM_CATEGORIES; c++)
        CHECK(cats[c] == mem->category_bytes[c], "%s: category %s adds up to %zu, the plan says %zu", what,
              memory_category_name(c), cats[c], mem->category_bytes[c]);
    size_t master = cfg.model.precision != PREC_FP32 && cfg.run.train.master_weights ? np * 4 : 0;
    CHECK(mem->buffers[BUF_PARAMS].bytes == np * x && mem->buffers[BUF_GRADS].bytes == np * x, "%s: parameters", what);
    CHECK(mem->category_bytes[MEM_OPTIMIZER] == np * 8 + master, "%s: optimizer state", what);
    CHECK(mem->buffers[BUF_ATT_STATS].bytes == L * B * NH * T * 4, "%s: att_stats, a float per query row", what);
    /* no buffer holds (B,NH,T,T) scores, for one layer or all */
    for (int i = 0; i < BUF_COUNT; i++) {
        size_t per_layer = mem->buffers[i].layer_bytes ? mem->buffers[i].layer_bytes : mem->buffers[i].bytes;
        CHECK(per_layer != B * NH * T * T * x && per_layer != B * NH * T * T * 4, "%s: %s has the size of the attention "
              "scores (%zu bytes)", what, mem->buffers[i].name, per_layer);
    }
    size_t R = (size_t)plan.classifier_rows;
    CHECK(R >= 1 && (B * T) % R == 0 && mem->buffers[BUF_LOGITS].bytes == R * Vp * x, "%s: logits of a chunk of %zu rows",
          what, R);
    size_t ln_layers = cfg.run.train.recompute >= 2 ? 1 : L, gelu_layers = cfg.run.train.recompute >= 1 ? 1 : L;
    CHECK(mem->buffers[BUF_LN1].bytes == ln_layers * B * T * C * x, "%s: ln1 for recompute=%d", what, cfg.run.train.recompute);
    CHECK(mem->buffers[BUF_FCH_GELU].bytes == gelu_layers * B * T * 4 * C * x, "%s: fch_gelu for recompute=%d", what,
          cfg.run.train.recompute);
    CHECK(mem->buffers[BUF_LN_SCRATCH].bytes == (size_t)plan.kernels[K_LAYERNORM_BACKWARD].dims.grid[0] * 2 * C * 4,
          "%s: ln_scratch follows layernorm_backward's grid", what);
}

static void test_memory_layout(void) {
    static const char *const configs[] = {"configs/tiny.lua", "configs/gpt2-124M.lua", "configs/gpt2-350M.lua",
                                          "configs/gpt2-1558M.lua", "configs/gpt3-125M.lua"};
    static const char *const recompute[] = {"train.recompute=0", "train.recompute=1", "train.recompute=2"};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        for (int r = 0; r < 3; r++) {
            Err err = {{0}};
            const char *sets[] = {recompute[r], NULL};
            if (make(configs[i], sets, &err)) { CHECK(0, "%s", err.msg); continue; }
            char what[128];
            snprintf(what, sizeof what, "%s %s", configs[i], recompute[r]);
            check_memory(what);
        }
    /* the layers' backward scratch lies inside the logits where it fits (gpt2-124M), else on its own */
    Err err = {{0}};
    if (!make("configs/gpt2-124M.lua", NULL, &err))
        CHECK(plan.memory.buffers[BUF_ATT_DDOT].shares == BUF_LOGITS, "gpt2-124M: att_ddot should share the logits buffer");
    const char *small_vocab[] = {"model.vocab_size=256", NULL};
    if (!make("configs/tiny.lua", small_vocab, &err))
        CHECK(plan.memory.buffers[BUF_ATT_DDOT].shares == -1, "V=256: the backward scratch cannot fit in the logits");
}

/* The classifier a chunk of rows at a time: the largest divisor of B*T not above CHUNK_ROWS; the logits buffer and
   the classifier's matmuls follow it, also when the tuner changes it (plan_set_tunables). */
static int classifier_family(void) {
    for (int i = 0; i < plan.n_families; i++)
        if (!strcmp(plan.families[i].decl->family, "classifier")) return i;
    return -1;
}
static void test_classifier_chunks(void) {
    Err err = {{0}};
    if (make("configs/gpt2-124M.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    size_t Vp = (size_t)plan.model.padded_vocab_size, BT = (size_t)plan.step.B * plan.step.T;
    CHECK(plan.classifier_rows == 8192 && plan.memory.buffers[BUF_LOGITS].bytes == 8192 * Vp * 2,
          "gpt2-124M: chunks of %d rows, logits %zu bytes (want 8192 rows)", plan.classifier_rows,
          plan.memory.buffers[BUF_LOGITS].bytes);
    const PlanMatmul *mm = plan.matmuls;
    CHECK(mm[MM_CLASSIFIER].n == 8192 && mm[MM_CLASSIFIER_DINP].n == 8192 && mm[MM_CLASSIFIER_DW].k == 8192 &&
          mm[MM_CLASSIFIER].per_step == (int)(BT / 8192) && mm[MM_CLASSIFIER_DW].per_step == (int)(BT / 8192),
          "gpt2-124M: the classifier's matmuls per chunk (n=%d, dW k=%d, %d per step)", mm[MM_CLASSIFIER].n,
          mm[MM_CLASSIFIER_DW].k, mm[MM_CLASSIFIER].per_step);
    CHECK(plan.kernels[K_CLASSIFIER_FORWARD].dims.grid[0] == 8192, "the classifier kernel: a block per row of a chunk");
    /* 8*64 = 512 rows: 160 is no divisor, 128 is the largest below it */
    const char *sets[] = {"tune.classifier.CHUNK_ROWS=160", NULL};
    if (make("configs/tiny.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.classifier_rows == 128 && plan.matmuls[MM_CLASSIFIER].per_step == 4, "tiny, CHUNK_ROWS 160: %d rows, %d chunks",
          plan.classifier_rows, plan.matmuls[MM_CLASSIFIER].per_step);
    /* more rows than B*T: one chunk of them all */
    if (make("configs/tiny.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.classifier_rows == 512, "tiny: one chunk of its 512 rows, not %d", plan.classifier_rows);
    int f = classifier_family();
    int v[FAMILY_MAX_TUNABLES];
    for (int t = 0; t < plan.families[f].n_tunables; t++) v[t] = plan.families[f].tunables[t].value;
    v[1] = 64;   /* CHUNK_ROWS */
    size_t arena = plan.memory.arena_bytes;
    CHECK_OK(plan_set_tunables(&plan, f, v, "tune-db", &err), &err);
    CHECK(plan.classifier_rows == 64 && plan.matmuls[MM_CLASSIFIER].n == 64 && plan.matmuls[MM_CLASSIFIER].per_step == 8 &&
          plan.memory.buffers[BUF_LOGITS].bytes == 64 * Vp * 4 && plan.memory.arena_bytes < arena,
          "plan_set_tunables: %d rows, matmul n=%d x%d, logits %zu bytes", plan.classifier_rows, plan.matmuls[MM_CLASSIFIER].n,
          plan.matmuls[MM_CLASSIFIER].per_step, plan.memory.buffers[BUF_LOGITS].bytes);
    /* a decode plan has no classifier family: its logits are its B rows */
    Plan dec;
    if (plan_make_decode(&dec, &cfg, 3, 0, "sm_90", &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(dec.classifier_rows == 3 && dec.matmuls[MM_CLASSIFIER].n == 3, "decode plan of 3 rows: %d rows", dec.classifier_rows);
}

/* SECOND_PASS 2 keeps the classifier's row in shared memory where two blocks of it fit a multiprocessor: GPT-2's
   vocabulary in 16 bits (ceil(50257 / 8) packets of 16 bytes), not in fp32 (201,040 bytes) nor with SECOND_PASS 1,
   the default; a vocabulary of 256 columns in fp32 does fit */
static void test_classifier_row_smem(void) {
    static const struct { const char *path, *sets[4]; unsigned smem; } cases[] = {
        {"configs/gpt2-124M.lua", {"tune.classifier.SECOND_PASS=2", NULL}, 6283 * 16},
        {"configs/gpt2-124M.lua", {NULL}, 0},
        {"configs/gpt2-124M.lua", {"tune.classifier.SECOND_PASS=2", "precision=fp32", NULL}, 0},
        {"configs/gpt2-124M.lua", {"tune.classifier.SECOND_PASS=2", "tune.classifier.BLOCK_SIZE=1024", NULL}, 6283 * 16},
        {"configs/tiny.lua", {"tune.classifier.SECOND_PASS=2", "precision=fp32", "model.vocab_size=256", NULL}, 256 * 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Err err = {{0}};
        if (make(cases[i].path, cases[i].sets, &err)) { CHECK(0, "%s: %s", cases[i].path, err.msg); continue; }
        CHECK(plan.kernels[K_CLASSIFIER_FORWARD].dims.smem == cases[i].smem, "%s %s: %u bytes of shared memory, want %u",
              cases[i].path, cases[i].sets[0] ? cases[i].sets[0] : "", plan.kernels[K_CLASSIFIER_FORWARD].dims.smem,
              cases[i].smem);
    }
}

/* sample --decode persistent (RunSpec.decode): a decode plan of 1 or 2 rows on sm_90 runs the step as one persistent
   kernel (the decode_step family, its barrier's memory); 3 rows, sm_80 or the default keep the op list's kernels,
   without the family; the decode family overlaps its launches on sm_90 only. The op list's decode linears draw a
   greedy step inside the classifier (a key per row); the persistent step and 3 or 16 rows (cuBLASLt's linears)
   do not, unless the run asks for the decode linears at any rows (sample --decode linears) */
static void test_decode_persistent(void) {
    static Config cfg;
    Err err = {{0}};
    if (config_load(&cfg, "configs/gpt2-124M.lua", NULL, 0, &err)) { CHECK(0, "%s", err.msg); return; }
    static const struct { int decode, rows; const char *arch; int persistent, overlap, fused; } cases[] = {
        {DECODE_PERSISTENT, 1, "sm_90", 1, 1, 0}, {DECODE_PERSISTENT, 2, "sm_90", 1, 1, 0},
        {DECODE_PERSISTENT, 3, "sm_90", 0, 1, 0}, {DECODE_PERSISTENT, 1, "sm_80", 0, 0, 1},
        {DECODE_KERNELS, 1, "sm_90", 0, 1, 1}, {DECODE_KERNELS, 16, "sm_90", 0, 1, 0},
        {DECODE_LINEARS, 16, "sm_90", 0, 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg.run.decode = cases[i].decode;
        Plan p;
        if (plan_make_decode(&p, &cfg, cases[i].rows, 0, cases[i].arch, &err)) { CHECK(0, "%s", err.msg); return; }
        int fam = 0;
        for (int f = 0; f < p.n_families; f++) fam |= !strcmp(p.families[f].decl->family, "decode_step");
        CHECK(p.decode_persistent == cases[i].persistent && fam == cases[i].persistent && p.overlap == cases[i].overlap &&
              (p.memory.buffers[BUF_GRID_SYNC].bytes == 8) == cases[i].persistent,
              "case %zu (%d rows, %s): persistent %d, decode_step family %d, overlap %d, barrier %zu bytes", i,
              cases[i].rows, cases[i].arch, p.decode_persistent, fam, p.overlap, p.memory.buffers[BUF_GRID_SYNC].bytes);
        size_t keys = p.memory.buffers[BUF_DECODE_BEST].bytes;
        CHECK(p.decode_greedy_fused == cases[i].fused && keys == (size_t)cases[i].fused * cases[i].rows * 8,
              "case %zu (%d rows, %s): greedy draw in the classifier %d, its keys %zu bytes", i, cases[i].rows,
              cases[i].arch, p.decode_greedy_fused, keys);
    }
}

/* train.gelu: the training plan's fc and fcproj-dinp matmuls carry the GELU epilogues, or plain ones beside our
   kernels, or (split) a plain fc beside our forward kernel and the DGELU epilogue backward; a forward plan (no gelu
   kernels) always the epilogue. */
static void test_gelu_path(void) {
    static const struct { const char *set; GeluPath want; int fwd_kernel, bwd_kernel; } cases[] = {
        {"train.gelu=epilogue", GELU_EPILOGUE, 0, 0}, {"train.gelu=kernel", GELU_KERNEL, 1, 1},
        {"train.gelu=split", GELU_SPLIT, 1, 0}};
    Err err = {{0}};
    for (int i = 0; i < 3; i++) {
        const char *sets[] = {cases[i].set, NULL};
        if (make("configs/gpt2-124M.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
        CHECK(plan.gelu == cases[i].want && !strcmp(plan.gelu_origin, "config"), "%s: the plan's gelu is %s (%s)", cases[i].set,
              gelu_path_name(plan.gelu), plan.gelu_origin);
        CHECK(gelu_forward_in_kernel(plan.gelu) == cases[i].fwd_kernel &&
              gelu_backward_in_kernel(plan.gelu) == cases[i].bwd_kernel, "%s: forward in kernel %d, backward %d",
              cases[i].set, gelu_forward_in_kernel(plan.gelu), gelu_backward_in_kernel(plan.gelu));
        CHECK(plan.matmuls[MM_FC].epilogue == (cases[i].fwd_kernel ? EPI_NONE : EPI_GELU_AUX) && plan.matmuls[MM_FC].bias &&
              plan.matmuls[MM_FCPROJ_DINP].epilogue == (cases[i].bwd_kernel ? EPI_NONE : EPI_DGELU),
              "%s: fc epilogue %d, fcproj dinp epilogue %d", cases[i].set, plan.matmuls[MM_FC].epilogue,
              plan.matmuls[MM_FCPROJ_DINP].epilogue);
        Plan fwd;
        StepShape st = step_forward(&cfg, 2, 64, 0);
        if (plan_make(&fwd, &cfg, "eval", &st, "sm_90", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
        CHECK(fwd.gelu == GELU_EPILOGUE && fwd.matmuls[MM_FC].epilogue == EPI_GELU_AUX, "%s: a forward plan's GELU is "
              "the epilogue", cases[i].set);
    }
    if (make("configs/gpt2-124M.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(!strcmp(plan.gelu_origin, "auto"), "train.gelu's default is auto, not %s", plan.gelu_origin);
    const char *bad[] = {"train.gelu=fast", NULL};
    CHECK(make("configs/gpt2-124M.lua", bad, &err) != 0 && strstr(err.msg, "train.gelu"), "train.gelu = \"fast\" was "
          "accepted (%s)", err.msg);
}

/* train.gelu = "auto" for a relative's ReLU^2 MLP: fc_gemm's fused matmuls with ReLU^2 where they run (Hopper, 16
   bits, a hidden size of 4C), else the epilogues */
static void test_gelu_auto_relu2(void) {
    static const struct { const char *arch, *prec, *ffn; GeluPath want; } cases[] = {
        {"sm_90", "precision=bf16", "model.n_ffn=3072", GELU_FUSED}, {"sm_90", "precision=fp16", "model.n_ffn=3072", GELU_FUSED},
        {"sm_90", "precision=fp32", "model.n_ffn=3072", GELU_EPILOGUE}, {"sm_80", "precision=bf16", "model.n_ffn=3072", GELU_EPILOGUE},
        {"sm_90", "precision=bf16", "model.n_ffn=2048", GELU_EPILOGUE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Err err = {{0}};
        const char *sets[] = {"model.mlp=relu2", "model.bias=false", cases[i].prec, cases[i].ffn};
        if (config_load(&cfg, "configs/gpt2-124M.lua", sets, 4, &err) ||
            plan_make_train(&plan, &cfg, cases[i].arch, NULL, &err)) { CHECK(0, "%s", err.msg); continue; }
        CHECK(plan.gelu == cases[i].want && !strcmp(plan.gelu_origin, "auto"), "ReLU^2, %s, %s, %s: the plan's gelu is %s",
              cases[i].arch, cases[i].prec, cases[i].ffn, gelu_path_name(plan.gelu));
    }
}

/* train.gelu = "fused" (templates/fc_gemm.cu): on sm_90 in 16 bits both fc-shaped matmuls leave cuBLASLt (their
   entries are not called), and the plan has fcproj's transposed weight and the fc bias gradient's partials (a 128-row
   tile each); refused in fp32 and on another arch, with the reason; a forward plan keeps the epilogue. */
static void test_gelu_fused(void) {
    Err err = {{0}};
    const char *sets[] = {"train.gelu=fused", NULL};
    if (make("configs/gpt2-124M.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
    const PlanBuffer *b = plan.memory.buffers;
    size_t C = 768, rows = (size_t)plan.step.B * plan.step.T;
    CHECK(plan.gelu == GELU_FUSED && gelu_fused(plan.gelu) && !gelu_forward_in_kernel(plan.gelu) &&
          !gelu_backward_in_kernel(plan.gelu), "the plan's gelu is %s", gelu_path_name(plan.gelu));
    CHECK(plan.matmuls[MM_FC].per_step == 0 && plan.matmuls[MM_FCPROJ_DINP].per_step == 0 &&
          plan.matmuls[MM_FCPROJ_DW].per_step == plan.model.n_layer, "per step: fc %d, fcproj dinp %d, fcproj dW %d",
          plan.matmuls[MM_FC].per_step, plan.matmuls[MM_FCPROJ_DINP].per_step, plan.matmuls[MM_FCPROJ_DW].per_step);
    CHECK(b[BUF_FCPROJ_WT].bytes == 4 * C * C * 2 && b[BUF_FC_PARTIALS].bytes == (rows + 127) / 128 * 4 * C * 4,
          "fcproj_wt %zu bytes, fc_partials %zu", b[BUF_FCPROJ_WT].bytes, b[BUF_FC_PARTIALS].bytes);
    size_t fused_arena = plan.memory.arena_bytes;
    const char *epi[] = {"train.gelu=epilogue", NULL};
    if (make("configs/gpt2-124M.lua", epi, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.memory.buffers[BUF_FCPROJ_WT].bytes == 0 && plan.memory.buffers[BUF_FC_PARTIALS].bytes == 0 &&
          plan.memory.arena_bytes < fused_arena, "the epilogue path has no fused scratch (%zu, %zu)",
          plan.memory.buffers[BUF_FCPROJ_WT].bytes, plan.memory.buffers[BUF_FC_PARTIALS].bytes);
    plan_set_gelu(&plan, GELU_FUSED, "test");
    CHECK(plan.memory.arena_bytes == fused_arena && plan.matmuls[MM_FC].per_step == 0,
          "plan_set_gelu: arena %zu against %zu", plan.memory.arena_bytes, fused_arena);
    /* a relative with GPT-2's MLP keeps the epilogues whatever is asked, its matmuls with them (the GELU in fc's) */
    const char *rms[] = {"model.norm=rmsnorm", NULL};
    if (make("configs/gpt2-124M.lua", rms, &err)) { CHECK(0, "%s", err.msg); return; }
    plan_set_gelu(&plan, GELU_KERNEL, "test");
    CHECK(plan.gelu == GELU_EPILOGUE && plan.matmuls[MM_FC].epilogue == EPI_GELU_AUX && plan.matmuls[MM_FC].per_step > 0,
          "an RMSNorm model asked for the kernel path: %s, fc's epilogue %d", gelu_path_name(plan.gelu), plan.matmuls[MM_FC].epilogue);
    /* the family's constraints: a producer warpgroup takes one block a multiprocessor and the epilogue through shared
       memory; stages that do not fit */
    const char *two[] = {"train.gelu=fused", "tune.fc_gemm.WARPGROUPS=3", "tune.fc_gemm.SM_BLOCKS=2", NULL};
    CHECK(make("configs/gpt2-124M.lua", two, &err) != 0 && strstr(err.msg, "WARPGROUPS 3"), "WARPGROUPS 3 with two blocks: %s",
          err.msg);
    const char *straight[] = {"train.gelu=fused", "tune.fc_gemm.WARPGROUPS=3", "tune.fc_gemm.SM_BLOCKS=1",
                              "tune.fc_gemm.EPI_BYTES=4", NULL};
    CHECK(make("configs/gpt2-124M.lua", straight, &err) != 0 && strstr(err.msg, "EPI_BYTES 16"),
          "WARPGROUPS 3 with the epilogue's 4-byte accesses (its stores are TMA's, from shared memory): %s", err.msg);
    const char *big[] = {"train.gelu=fused", "tune.fc_gemm.TILE_N=256", "tune.fc_gemm.STAGES=6", "tune.fc_gemm.SM_BLOCKS=1", NULL};
    CHECK(make("configs/gpt2-124M.lua", big, &err) != 0 && strstr(err.msg, "shared memory"), "6 stages of TILE_N 256: %s",
          err.msg);
    const char *persistent[] = {"train.gelu=fused", "tune.fc_gemm.WARPGROUPS=3", "tune.fc_gemm.SM_BLOCKS=1", NULL};
    if (make("configs/gpt2-124M.lua", persistent, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.kernels[K_FC_GELU_FORWARD].dims.grid[0] == 132 && plan.kernels[K_FC_GELU_FORWARD].dims.block == 384 &&
          plan.kernels[K_FC_GELU_FORWARD].dims.grid[1] == 1, "WARPGROUPS 3: grid %u x %u, block %u (132 persistent blocks "
          "of 384 expected)", plan.kernels[K_FC_GELU_FORWARD].dims.grid[0], plan.kernels[K_FC_GELU_FORWARD].dims.grid[1],
          plan.kernels[K_FC_GELU_FORWARD].dims.block);
    const char *pair128[] = {"train.gelu=fused", "tune.fc_gemm.CLUSTER=2", "tune.fc_gemm.TILE_N=128", NULL};
    CHECK(make("configs/gpt2-124M.lua", pair128, &err) != 0 && strstr(err.msg, "CLUSTER 2"), "CLUSTER 2 with TILE_N 128: %s",
          err.msg);
    /* a tile for each consumer warpgroup: 128 x 128 only, on TMA, no clusters; its two epilogues' shared memory */
    const char *pp256[] = {"train.gelu=fused", "tune.fc_gemm.TILE_WARPGROUPS=1", NULL};
    CHECK(make("configs/gpt2-124M.lua", pp256, &err) != 0 && strstr(err.msg, "TILE_WARPGROUPS 1"),
          "TILE_WARPGROUPS 1 with TILE_N 256: %s", err.msg);
    const char *pp2[] = {"train.gelu=fused", "tune.fc_gemm.TILE_WARPGROUPS=1", "tune.fc_gemm.TILE_N=128",
                         "tune.fc_gemm.WARPGROUPS=2", "tune.fc_gemm.SM_BLOCKS=2", NULL};
    CHECK(make("configs/gpt2-124M.lua", pp2, &err) != 0 && strstr(err.msg, "TILE_WARPGROUPS 1"),
          "TILE_WARPGROUPS 1 with WARPGROUPS 2: %s", err.msg);
    const char *pp5[] = {"train.gelu=fused", "tune.fc_gemm.TILE_WARPGROUPS=1", "tune.fc_gemm.TILE_N=128",
                         "tune.fc_gemm.STAGES=5", NULL};
    CHECK(make("configs/gpt2-124M.lua", pp5, &err) != 0 && strstr(err.msg, "shared memory"),
          "TILE_WARPGROUPS 1 with 5 stages (5 x 32 KiB and two epilogues of 32 KiB): %s", err.msg);
    const char *pp[] = {"train.gelu=fused", "tune.fc_gemm.TILE_WARPGROUPS=1", "tune.fc_gemm.TILE_N=128",
                        "tune.fc_gemm.STAGES=4", NULL};
    if (make("configs/gpt2-124M.lua", pp, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.kernels[K_FC_GELU_FORWARD].dims.smem == 4 * 32768 + 2 * 32768 + 8 * 128 * 4 + 1024,
          "TILE_WARPGROUPS 1, 4 stages: %u bytes of shared memory", plan.kernels[K_FC_GELU_FORWARD].dims.smem);
    /* pairs of blocks on row tiles m, m + 1: 3 row tiles (300 rows) and 640 / 256 = 3 column tiles make 2 x 3 pairs */
    const char *pairs[] = {"train.gelu=fused", "tune.fc_gemm.CLUSTER=2", "model.n_embd=160", "model.n_head=5",
                           "train.batch_size=3", "train.seq_len=100", "train.total_batch_size=300", NULL};
    if (make("configs/gpt2-124M.lua", pairs, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.kernels[K_FC_GELU_FORWARD].dims.grid[0] == 12, "CLUSTER 2 at 300 rows: grid %u (12 blocks expected)",
          plan.kernels[K_FC_GELU_FORWARD].dims.grid[0]);
    const char *fp32[] = {"train.gelu=fused", "precision=fp32", NULL};
    CHECK(make("configs/gpt2-124M.lua", fp32, &err) != 0 && strstr(err.msg, "train.gelu") && strstr(err.msg, "fp32"),
          "fused in fp32: %s", err.msg);
    if (config_load(&cfg, "configs/gpt2-124M.lua", sets, 1, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan_make_train(&plan, &cfg, "sm_80", NULL, &err) != 0 && strstr(err.msg, "sm_80"), "fused on sm_80: %s", err.msg);
    Plan fwd;
    StepShape st = step_forward(&cfg, 2, 64, 0);
    if (plan_make(&fwd, &cfg, "eval", &st, "sm_90", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(fwd.gelu == GELU_EPILOGUE && fwd.memory.buffers[BUF_FCPROJ_WT].bytes == 0, "a forward plan's GELU is the "
          "epilogue");
}

/* train.streams: a training plan's backward on two streams by default, with the side stream's own cuBLASLt workspace
   and bias scratch; one stream without them; a forward plan has one; 3 is refused. */
static void test_streams(void) {
    Err err = {{0}};
    if (make("configs/gpt2-124M.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    const PlanBuffer *b = plan.memory.buffers;
    CHECK(plan.streams == 2 && b[BUF_CUBLASLT_WORKSPACE_SIDE].bytes == CUBLASLT_WORKSPACE_BYTES &&
          b[BUF_BIAS_SCRATCH_SIDE].bytes == b[BUF_BIAS_SCRATCH].bytes && b[BUF_BIAS_SCRATCH].bytes > 0,
          "default: %d streams, side workspace %zu bytes, side bias scratch %zu (bias scratch %zu)", plan.streams,
          b[BUF_CUBLASLT_WORKSPACE_SIDE].bytes, b[BUF_BIAS_SCRATCH_SIDE].bytes, b[BUF_BIAS_SCRATCH].bytes);
    size_t two = plan.memory.arena_bytes;
    const char *one[] = {"train.streams=1", NULL};
    if (make("configs/gpt2-124M.lua", one, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.streams == 1 && !b[BUF_CUBLASLT_WORKSPACE_SIDE].bytes && !b[BUF_BIAS_SCRATCH_SIDE].bytes &&
          plan.memory.arena_bytes < two, "train.streams=1: %d streams, side buffers %zu and %zu bytes", plan.streams,
          b[BUF_CUBLASLT_WORKSPACE_SIDE].bytes, b[BUF_BIAS_SCRATCH_SIDE].bytes);
    Plan fwd;
    StepShape st = step_forward(&cfg, 2, 64, 0);
    if (plan_make(&fwd, &cfg, "eval", &st, "sm_90", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(fwd.streams == 1 && !fwd.memory.buffers[BUF_CUBLASLT_WORKSPACE_SIDE].bytes, "a forward plan: %d streams", fwd.streams);
    const char *bad[] = {"train.streams=3", NULL};
    CHECK(make("configs/gpt2-124M.lua", bad, &err) != 0 && strstr(err.msg, "train.streams"), "train.streams = 3 was "
          "accepted (%s)", err.msg);
}

/* train.cuda_graph: a training plan's micro-step is a CUDA graph by default, not with train.cuda_graph = false; a
   forward plan never (eval and sampling launch op by op, the decode step has its own graph); a number is refused. */
static void test_graph_flag(void) {
    Err err = {{0}};
    if (make("configs/gpt2-124M.lua", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.graph == 1, "default: graph %d", plan.graph);
    Plan fwd;
    StepShape st = step_forward(&cfg, 2, 64, 0);
    if (plan_make(&fwd, &cfg, "eval", &st, "sm_90", NULL, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(fwd.graph == 0, "a forward plan: graph %d", fwd.graph);
    const char *off[] = {"train.cuda_graph=false", NULL};
    if (make("configs/gpt2-124M.lua", off, &err)) { CHECK(0, "%s", err.msg); return; }
    CHECK(plan.graph == 0, "train.cuda_graph=false: graph %d", plan.graph);
    const char *bad[] = {"train.cuda_graph=2", NULL};
    CHECK(make("configs/gpt2-124M.lua", bad, &err) != 0 && strstr(err.msg, "cuda_graph"), "train.cuda_graph = 2 was "
          "accepted (%s)", err.msg);
}

/* Several ranks: the parameters and gradients padded to equal shards (ranks_padded); under ZeRO-1 a rank keeps 1/N of
   the AdamW state and master weights, under ZeRO-0 all of it; the layout checks hold either way. */
static void test_memory_of_ranks(void) {
    for (int zero = 0; zero <= 1; zero++)
        for (int n = 2; n <= 8; n *= 2) {
            char g[48], z[48];
            snprintf(g, sizeof g, "train.num_gpus=%d", n);
            snprintf(z, sizeof z, "train.zero_stage=%d", zero);
            const char *sets[] = {g, z, "train.total_batch_size=1048576", NULL};
            Err err = {{0}};
            if (make("configs/gpt2-124M.lua", sets, &err)) { CHECK(0, "%s", err.msg); continue; }
            const PlanMemory *mem = &plan.memory;
            GPT2Shape s = config_shape(&cfg);
            size_t sz[NUM_PARAM_TENSORS], np = gpt2_param_sizes(&s, sz, NULL), pad = ranks_padded(np, n);
            size_t opt = zero ? pad / (size_t)n : np;
            CHECK(pad >= np && pad % ((size_t)n * RANKS_SHARD_ALIGN) == 0 && pad - np < (size_t)n * RANKS_SHARD_ALIGN,
                  "N=%d: %zu parameters padded to %zu", n, np, pad);
            CHECK(mem->buffers[BUF_PARAMS].bytes == pad * 2 && mem->buffers[BUF_GRADS].bytes == pad * 2,
                  "N=%d ZeRO-%d: parameters %zu and gradients %zu bytes, expected %zu", n, zero,
                  mem->buffers[BUF_PARAMS].bytes, mem->buffers[BUF_GRADS].bytes, pad * 2);
            CHECK(mem->category_bytes[MEM_OPTIMIZER] == opt * 12, "N=%d ZeRO-%d: optimizer state %zu bytes, expected %zu", n,
                  zero, mem->category_bytes[MEM_OPTIMIZER], opt * 12);
            char what[64];
            snprintf(what, sizeof what, "gpt2-124M N=%d ZeRO-%d", n, zero);
            for (int i = 0; i < BUF_COUNT; i++) {
                const PlanBuffer *a = &mem->buffers[i];
                CHECK(!a->bytes || a->offset + a->bytes <= mem->arena_bytes, "%s: %s ends past the arena", what, a->name);
            }
        }
}

/* Each kernel's launch covers its work: one thread (or warp, or block) for every element (row, packet). */
static void test_geometry_covers_work(void) {
    Err err = {{0}};
    const char *sets[] = {"train.batch_size=3", "train.seq_len=40", "model.max_seq_len=64", "train.total_batch_size=120",
                          "eval.sample_tokens=16", NULL};
    if (make("configs/tiny.lua", sets, &err)) { CHECK(0, "%s", err.msg); return; }
    long long BT = 3 * 40, C = cfg.model.n_embd, NH = cfg.model.n_head, HS = C / NH;
    const PlanKernel *k = plan.kernels;
    CHECK((long long)k[K_ENCODER_FORWARD].dims.grid[0] * k[K_ENCODER_FORWARD].dims.block * 4 >= BT * C, "encoder_forward");
    CHECK((long long)k[K_LAYERNORM_FORWARD].dims.grid[0] * (k[K_LAYERNORM_FORWARD].dims.block / 32) >= BT, "layernorm_forward");
    CHECK((long long)k[K_LAYERNORM_BACKWARD_REDUCE].dims.grid[0] * k[K_LAYERNORM_BACKWARD_REDUCE].dims.block >= C, "reduce");
    /* flash attention: tiles of 16 rows per warp cover T, a block per (tile, head, batch row) */
    for (int id = K_FLASH_FORWARD; id <= K_FLASH_BACKWARD_DKDV; id++) {
        CHECK((long long)k[id].dims.grid[0] * (k[id].dims.block / 32) * 16 >= 40 && k[id].dims.grid[1] == NH &&
              k[id].dims.grid[2] == 3, "%s grid (%u,%u,%u) block %u", k[id].decl->name, k[id].dims.grid[0],
              k[id].dims.grid[1], k[id].dims.grid[2], k[id].dims.block);
    }
    (void)HS;
    CHECK(k[K_CLASSIFIER_FORWARD].dims.grid[0] == BT, "classifier: a block per row");
    LaunchDims a = plan_launch_dims(&plan, K_ADAMW_UPDATE, 1000003);
    CHECK((long long)a.grid[0] * a.block >= 1000003 && (long long)(a.grid[0] - 1) * a.block < 1000003, "adamw grid %u", a.grid[0]);
    LaunchDims b = plan_launch_dims(&plan, K_BIAS_BACKWARD_PARTIAL, 3 * C);
    CHECK((long long)b.grid[0] * 32 * 4 >= 3 * C && b.grid[1] == (unsigned)plan.families[k[K_BIAS_BACKWARD_PARTIAL].family].tunables[1].value,
          "bias partial grid (%u,%u)", b.grid[0], b.grid[1]);
    LaunchDims w = plan_launch_dims(&plan, K_ENCODER_BACKWARD_WTE, 77);
    CHECK(w.grid[0] == 77 && (long long)w.grid[1] * w.block * 4 >= C && w.block % 32 == 0, "wte grid (%u,%u) block %u",
          w.grid[0], w.grid[1], w.block);
}

/* Rebuilding from the resolved config.lua gives the same plan.txt (but for the line naming the config file). */
static char *plan_text(const char *dir) {
    Err err = {{0}};
    snprintf(plan.build_dir, sizeof plan.build_dir, "%s", dir);
    const Plan *plans[1] = {&plan};
    if (plan_write(plans, 1, &err)) return NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    char *t = read_file(path, NULL, &err);
    unlink(path);
    char *nl = t ? strchr(t, '\n') : NULL;
    if (nl) memmove(t, nl + 1, strlen(nl + 1) + 1);
    return t;
}

static void test_round_trip_same_plan(void) {
    char dir[] = "/tmp/gpt2gen-plan-XXXXXX";
    if (!mkdtemp(dir)) { CHECK(0, "mkdtemp"); return; }
    Err err = {{0}};
    const char *sets[] = {"tune.layernorm.BLOCK_SIZE=512", "tune.layernorm.BWD_BLOCK_SIZE=128", "tune.bias.ROW_SPLITS={32, 64}",
                          "train.recompute=2", NULL};
    char *a = NULL, *b = NULL, cfg_path[512];
    if (make("configs/gpt2-124M.lua", sets, &err) || !(a = plan_text(dir))) { CHECK(0, "first plan: %s", err.msg); goto out; }
    snprintf(cfg_path, sizeof cfg_path, "%s/config.lua", dir);
    FILE *f = fopen(cfg_path, "w");
    if (!f) { CHECK(0, "cannot write %s", cfg_path); goto out; }
    config_write_lua(&cfg, f);
    fclose(f);
    if (make(cfg_path, NULL, &err) || !(b = plan_text(dir))) { CHECK(0, "plan from %s: %s", cfg_path, err.msg); goto out; }
    CHECK(!strcmp(a, b), "the plans differ:\n--- from configs/gpt2-124M.lua\n%s\n--- from %s\n%s", a, cfg_path, b);
out:
    unlink(cfg_path);
    rmdir(dir);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    RUN(test_tunable_out_of_range_rejected);
    RUN(test_tunable_in_range_used);
    RUN(test_unknown_family_and_tunable);
    RUN(test_prelude);
    RUN(test_attention_shape_defaults);
    RUN(test_attention_wgmma_default);
    RUN(test_template_checks);
    RUN(test_layernorm_backward_smem);
    RUN(test_memory_layout);
    RUN(test_memory_of_ranks);
    RUN(test_classifier_chunks);
    RUN(test_classifier_row_smem);
    RUN(test_gelu_path);
    RUN(test_gelu_fused);
    RUN(test_gelu_auto_relu2);
    RUN(test_streams);
    RUN(test_graph_flag);
    RUN(test_decode_persistent);
    RUN(test_geometry_covers_work);
    RUN(test_round_trip_same_plan);
    return check_summary();
}
