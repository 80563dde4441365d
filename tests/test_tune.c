/* test_tune: the tuning database without a GPU (gen/tune_db.h): records round trip through the file; a record
   for another GPU, driver, CUDA, NVRTC, cuDNN, template, shape or precision is stale (ignored, with a message);
   truncated, garbage and bad-number lines are reported and ignored, never fatal; appends survive a cut-short
   line; the variants `gpt2gen tune` sweeps respect every declared constraint; and applying the database to a
   plan takes its values, except where the config sets a tunable itself; two steps' first losses agree within the
   precision's relative tolerance, and a NaN never agrees, nor passes the kernel tests' comparison. Runs from the
   repository root. */
#include "tests/check.h"
#include "tests/tune_db_test.h"
#include "tests/plan_facts.h"
#include "tune/families.h"
#include "tune/measure.h"
#include "tune/harness.h"
#include <math.h>
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_round_trip(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneDb db;
    unlink(path);
    tune_db_load(&db, path, NULL);
    CHECK(db.missing && db.n == 0, "a missing file: missing %d, %d records", db.missing, db.n);
    TuneRecord a = best_kernel("layernorm", "BLOCK_SIZE=512,BWD_BLOCK_SIZE=128,BWD_SUMS=1,BWD_SM_THREADS=512", &ENV);
    TuneRecord b = a;
    snprintf(b.record, sizeof b.record, "measure");
    snprintf(b.status, sizeof b.status, "mismatch");
    b.default_us = -1;
    tune_db_put(&db, &a);
    tune_db_put(&db, &b);
    CHECK_OK(tune_db_rewrite(&db, &err), &err);
    tune_db_free(&db);
    FILE *msgs = tmpfile();
    tune_db_load(&db, path, msgs);
    CHECK(db.n == 2 && db.corrupt == 0 && ftell(msgs) == 0, "%d records, %d corrupt after the round trip", db.n, db.corrupt);
    const TuneRecord *r = tune_db_find(&db, "best", "kernel", "layernorm", NULL, &a.key, NULL);
    CHECK(r && !strcmp(r->variant, a.variant) && r->us == a.us && r->default_us == a.default_us,
          "the best record came back as %s", r ? r->variant : "nothing");
    r = tune_db_find(&db, "measure", "kernel", "layernorm", a.variant, &a.key, NULL);
    CHECK(r && !strcmp(r->status, "mismatch") && r->default_us < 0, "the measure record came back wrong");
    /* appending keeps what is there, and a second best for the same key replaces the first */
    TuneRecord c = best_kernel("gelu", "BLOCK_SIZE=128", &ENV);
    CHECK_OK(tune_db_append(&db, &c, &err), &err);
    tune_db_free(&db);
    tune_db_load(&db, path, NULL);
    CHECK(db.n == 3, "%d records after an append", db.n);
    TuneRecord d = best_kernel("gelu", "BLOCK_SIZE=1024", &ENV);
    tune_db_put(&db, &d);
    CHECK(db.n == 3 && !strcmp(tune_db_find(&db, "best", "kernel", "gelu", NULL, &d.key, NULL)->variant, "BLOCK_SIZE=1024"),
          "a new best did not replace the old one");
    tune_db_free(&db);
    fclose(msgs);
}

static void test_stale(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneRecord base = best_kernel("layernorm", "BLOCK_SIZE=512,BWD_BLOCK_SIZE=128,BWD_SUMS=1", &ENV);
    static const char *const why[TUNE_KEY_FIELDS] = {"another GPU", "another arch", "another driver", "another CUDA",
                                                     "another NVRTC", "another cuDNN", "another template",
                                                     "another shape", "another precision"};
    for (int f = 0; f < TUNE_KEY_FIELDS; f++) {
        TuneRecord r = base;
        snprintf(r.key.f[f], TUNE_FIELD_MAX, "other%d", f);
        TuneDb db;
        memset(&db, 0, sizeof db);
        snprintf(db.path, sizeof db.path, "%s", path);
        tune_db_put(&db, &r);
        CHECK_OK(tune_db_rewrite(&db, &err), &err);
        tune_db_free(&db);
        tune_db_load(&db, path, NULL);
        CHECK_OK(make(NULL, &err), &err);
        int before = plan.families[module_of("layernorm")].tunables[0].value;
        TuneApplied ap;
        char text[1024];
        apply_capture(&db, &ap, text, sizeof text);
        CHECK(ap.kernels == 0 && ap.stale == 1, "field %s: %d used, %d stale", tune_key_names[f], ap.kernels, ap.stale);
        CHECK(plan.families[module_of("layernorm")].tunables[0].value == before, "a stale %s record was applied", tune_key_names[f]);
        CHECK(strstr(text, why[f]) && strstr(text, path) && strstr(text, "ignored"), "field %s: the message was: %s",
              tune_key_names[f], text);
        tune_db_free(&db);
    }
}

/* records of other configs (shapes) sharing the database: one line in all, not one per record */
static void test_other_configs_one_line(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneDb db;
    memset(&db, 0, sizeof db);
    snprintf(db.path, sizeof db.path, "%s", path);
    const char *fams[3] = {"layernorm", "gelu", "adamw"};
    const char *vars[3] = {"BLOCK_SIZE=512,BWD_BLOCK_SIZE=128,BWD_SUMS=1", "BLOCK_SIZE=128", "BLOCK_SIZE=256"};
    for (int i = 0; i < 3; i++) {
        TuneRecord r = best_kernel(fams[i], vars[i], &ENV);
        snprintf(r.key.f[7], TUNE_FIELD_MAX, "B64,T1024,C768,NH12,L12,V50257,maxT1024,recompute1");
        tune_db_put(&db, &r);
    }
    TuneRecord gpu = best_kernel("encoder", "BLOCK_SIZE=128", &ENV);
    snprintf(gpu.key.f[0], TUNE_FIELD_MAX, "NVIDIA_A100");
    tune_db_put(&db, &gpu);
    TuneApplied ap;
    char text[2048];
    apply_capture(&db, &ap, text, sizeof text);
    int lines = 0;
    for (char *p = text; *p; p++) lines += *p == '\n';
    CHECK(ap.kernels == 0 && ap.stale == 4 && ap.other_config == 3, "%d used, %d stale, %d other configs", ap.kernels,
          ap.stale, ap.other_config);
    CHECK(lines == 2 && strstr(text, "3 records for other shapes or precisions ignored") && strstr(text, "another GPU"),
          "the messages were: %s", text);
    tune_db_free(&db);
}

static void test_corrupt(void) {
    static const char *const bad[][2] = {
        {"best kernel layernorm BLOCK_SIZE=512 us=abc status=ok", "not a time"},
        {"best kernel layernorm BLOCK_SIZE=512 us=-4 status=ok", "not a time"},
        {"best kernel layernorm BLOCK_SIZE=512 us=1e999 status=ok", "not a time"},
        {"garbage", "expected at least 4"},
        {"best kernel layernorm", "expected at least 4"},
        {"frobnicate kernel layernorm X=1 us=1 status=ok", "expected measure or best"},
        {"best kernel layernorm X=1 us=1 status=ok flavour=sweet", "unknown field"},
        {"best kernel layernorm X=1 us=1 status=ok", "no gpu="},
        {"best kernel layernorm X=1 status=ok  gpu=a", "two spaces"},
        {"best kernel layernorm X=1 us=1 us=2 status=ok", "us= twice"},
    };
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneRecord good = best_kernel("gelu", "BLOCK_SIZE=128", &ENV);
    char line[2048];
    tune_record_format(&good, line, sizeof line);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[4096];
        snprintf(text, sizeof text, "# comment\n%s\n%s\n", bad[i][0], line);
        write_text(text);
        FILE *msgs = tmpfile();
        TuneDb db;
        tune_db_load(&db, path, msgs);
        char out[1024];
        stream_text(msgs, out, sizeof out);
        fclose(msgs);
        CHECK(db.corrupt == 1 && db.n == 1, "'%s': %d corrupt, %d kept", bad[i][0], db.corrupt, db.n);
        CHECK(strstr(out, bad[i][1]) && strstr(out, ":2:"), "'%s': the message was: %s", bad[i][0], out);
        tune_db_free(&db);
    }
    /* truncated: the last line cut short (a killed tune), and binary junk */
    size_t cut = strlen(line) / 2;
    char text[4096];
    snprintf(text, sizeof text, "%s\n%.*s", line, (int)cut, line);
    write_text(text);
    TuneDb db;
    FILE *msgs = tmpfile();
    tune_db_load(&db, path, msgs);
    CHECK(db.n == 1 && db.corrupt == 1, "truncated: %d kept, %d corrupt", db.n, db.corrupt);
    /* an append after a cut-short line starts on a line of its own, and both good records load */
    TuneRecord other = best_kernel("adamw", "BLOCK_SIZE=256", &ENV);
    CHECK_OK(tune_db_append(&db, &other, &err), &err);
    tune_db_free(&db);
    tune_db_load(&db, path, msgs);
    CHECK(db.n == 2 && db.corrupt == 1, "after an append: %d kept, %d corrupt", db.n, db.corrupt);
    tune_db_free(&db);
    char junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (char)(i * 37 + 1);
    Err e2;
    write_file_atomic(path, junk, sizeof junk, &e2);
    tune_db_load(&db, path, msgs);
    CHECK(db.n == 0 && db.corrupt >= 1, "junk: %d kept, %d corrupt", db.n, db.corrupt);
    tune_db_free(&db);
    fclose(msgs);
    /* a variant that names no allowed value is reported at apply time, not applied */
    TuneRecord wrong = best_kernel("layernorm", "BLOCK_SIZE=100,BWD_BLOCK_SIZE=128,BWD_SUMS=1", &ENV);
    memset(&db, 0, sizeof db);
    tune_db_put(&db, &wrong);
    TuneApplied ap;
    msgs = tmpfile();
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, msgs);
    CHECK(ap.kernels == 0 && ftell(msgs) > 0, "a variant with a disallowed value was applied");
    fclose(msgs);
    tune_db_free(&db);
}

static void test_variants_respect_constraints(void) {
    Err err = {{0}};
    const char *sets[] = {"precision=bf16", NULL};
    CHECK_OK(make(sets, &err), &err);
    static TuneVariant v[TUNE_MAX_VARIANTS];
    for (int i = 0; i < plan.n_families; i++) {
        const PlanFamily *m = &plan.families[i];
        int refused = 0, n = tune_variants(&plan, i, v, TUNE_MAX_VARIANTS, &refused);
        int combos = 1;
        for (int t = 0; t < m->n_tunables; t++) combos *= m->tunables[t].n_candidates > 0 ? m->tunables[t].n_candidates : 1;
        CHECK(n >= 1 && n + refused <= combos + 1, "%s: %d variants + %d refused of %d combinations", m->decl->family, n,
              refused, combos);
        for (int t = 0; t < m->n_tunables; t++)
            CHECK(v[0].v[t] == m->tunables[t].value, "%s: the first variant is not the plan's own", m->decl->family);
        for (int j = 0; j < n; j++) {
            for (int t = 0; t < m->n_tunables; t++)
                CHECK(tunable_allowed(&m->decl->tunables[t], v[j].v[t]), "%s: %s=%d is not allowed", m->decl->family,
                      m->decl->tunables[t].name, v[j].v[t]);
            KernelEnv env = kernel_env(&plan.model, &plan.step, m->decl, v[j].v);
            char why[512];
            CHECK(!m->decl->check || !m->decl->check(&env, why, sizeof why), "%s: a variant the check refuses: %s",
                  m->decl->family, why);
            for (int k = 0; k < j; k++)
                CHECK(memcmp(&v[j], &v[k], sizeof v[j]), "%s: variant %d repeats %d", m->decl->family, j, k);
            char name[256];
            int back[FAMILY_MAX_TUNABLES] = {0};
            tune_variant_name(m, v[j].v, name, sizeof name);
            CHECK(tune_variant_parse(m, name, back) == 0 && !memcmp(back, v[j].v, sizeof(int) * m->n_tunables),
                  "%s: '%s' does not parse back", m->decl->family, name);
        }
    }
    /* the attention family's check refuses Q_TILE not a multiple of Q_WARP_ROWS: Q_TILE 16 or 48 with 32 */
    const char *sets1[] = {"precision=bf16", "tune.attention.Q_TILE={64, 16, 48}", "tune.attention.Q_WARP_ROWS={16, 32}", NULL};
    CHECK_OK(make(sets1, &err), &err);
    int ai = module_of("attention"), refused = 0;
    int na = tune_variants(&plan, ai, v, TUNE_MAX_VARIANTS, &refused);
    for (int j = 0; j < na; j++)
        CHECK(v[j].v[0] % v[j].v[4] == 0, "Q_TILE %d with Q_WARP_ROWS %d was offered", v[j].v[0], v[j].v[4]);
    CHECK(refused >= 2, "%d attention combinations refused by the constraints, expected at least 2", refused);
    /* the config's tune table: a list widens or narrows, one value fixes */
    const char *sets2[] = {"tune.layernorm.BLOCK_SIZE={64, 96}", "tune.layernorm.BWD_BLOCK_SIZE=512", "tune.layernorm.BWD_SUMS=1",
                           "tune.layernorm.BWD_SM_THREADS=1024", NULL};
    CHECK_OK(make(sets2, &err), &err);
    int n = tune_variants(&plan, module_of("layernorm"), v, TUNE_MAX_VARIANTS, &refused);
    CHECK(n == 2 && v[0].v[0] == 64 && v[1].v[0] == 96 && v[0].v[1] == 512 && v[1].v[1] == 512 && v[0].v[3] == 1024 &&
          v[1].v[3] == 1024, "config lists: %d variants (%d,%d)", n, v[0].v[0], v[0].v[1]);
}

static void test_apply_and_config_wins(void) {
    Err err = {{0}};
    CHECK_OK(make(NULL, &err), &err);
    TuneDb db;
    memset(&db, 0, sizeof db);
    TuneRecord a = best_kernel("layernorm", "BLOCK_SIZE=512,BWD_BLOCK_SIZE=128,BWD_SUMS=1,BWD_SM_THREADS=512", &ENV);
    TuneRecord b = best_kernel("gelu", "BLOCK_SIZE=1024", &ENV);
    tune_db_put(&db, &a);
    tune_db_put(&db, &b);
    TuneRecord mm = tune_record("best", "matmul", "", "algo=2,id=31,tile=20,stages=8,splitk=-1,reduction=2,swizzle=0,custom=0,cluster=32");
    tune_db_name(plan.matmuls[MM_CLASSIFIER_DINP].name, mm.name, sizeof mm.name);   /* a name with a space */
    tune_key_matmul(&mm.key, &ENV, &plan, MM_CLASSIFIER_DINP, "130100");
    tune_db_put(&db, &mm);
    snprintf(db.path, sizeof db.path, "%s", path);   /* through the file */
    CHECK_OK(tune_db_rewrite(&db, &err), &err);
    tune_db_free(&db);
    tune_db_load(&db, path, NULL);
    CHECK(db.n == 3 && db.corrupt == 0, "%d records, %d corrupt", db.n, db.corrupt);
    TuneApplied ap;
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    const PlanFamily *ln = &plan.families[module_of("layernorm")];
    CHECK(ap.kernels == 2 && ap.matmuls == 1, "%d kernel families, %d matmuls applied", ap.kernels, ap.matmuls);
    CHECK(ln->tunables[0].value == 512 && ln->tunables[1].value == 128 && !strcmp(ln->tunables[0].origin, "tune-db"),
          "layernorm got %d, %d (%s)", ln->tunables[0].value, ln->tunables[1].value, ln->tunables[0].origin);
    CHECK(plan.kernels[0].dims.block > 0 && ln->env.tun[0] == 512, "the launches were not recomputed");
    const MatmulAlgoChoice *c = &plan.matmuls[MM_CLASSIFIER_DINP].algo;
    CHECK(c->set && c->index == 2 && c->id == 31 && c->tile == 20 && c->splitk == -1 && c->cluster == 32 &&
          c->m == plan.matmuls[MM_CLASSIFIER_DINP].m &&
          !plan.matmuls[MM_QKV].algo.set,
          "the matmul choice came back as set %d index %d id %d", c->set, c->index, c->id);
    /* another cuBLASLt: that record is stale */
    CHECK_OK(make(NULL, &err), &err);
    tune_db_apply(&db, &ENV, &plan, "130200", NULL, &ap, NULL);
    CHECK(ap.matmuls == 0 && ap.stale == 1, "a record for another cuBLASLt was used");
    /* the config's own value wins over the database */
    const char *sets[] = {"tune.layernorm.BLOCK_SIZE=64", NULL};
    CHECK_OK(make(sets, &err), &err);
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    ln = &plan.families[module_of("layernorm")];
    CHECK(ln->tunables[0].value == 64 && ln->tunables[1].value == 128 && ap.overridden == 1,
          "with the config's BLOCK_SIZE=64: %d, %d (%d overridden)", ln->tunables[0].value, ln->tunables[1].value, ap.overridden);
    tune_db_free(&db);
}

static void test_env_hook(void) {
    TuneEnv env = ENV;
    char why[256];
    CHECK(tune_env_parse(&env, "gpu=NVIDIA_A100 driver=12040", why, sizeof why) == 0 && !strcmp(env.gpu, "NVIDIA_A100") &&
          !strcmp(env.driver, "12040") && !strcmp(env.arch, "sm_90"), "the hook gave gpu %s driver %s", env.gpu, env.driver);
    CHECK(tune_env_parse(&env, "colour=blue", why, sizeof why) != 0 && strstr(why, "unknown field"), "colour= was taken");
}

/* Every family declared in gen/kernels.c has its workload and its test in tune/families.c, and every entry there
   is a declared family: a family added without them fails here, on the CPU. */
static void test_every_family_registered(void) {
    for (const FamilyDecl *f = kernel_families; f->family; f++) {
        const FamilyEntry *e = tune_family(f->family);
        CHECK(e && e->setup && e->run && e->test, "the %s family has no workload or no test in tune/families.c", f->family);
    }
    for (const FamilyEntry *e = tune_families; e->family; e++) {
        const FamilyDecl *f = kernel_families;
        while (f->family && strcmp(f->family, e->family)) f++;
        CHECK(f->family, "tune/families.c has an entry for %s, which gen/kernels.c does not declare", e->family);
    }
}

/* The database's attention path is the plan's decision, never the config's: with attention = "auto" the plan takes
   it (and says the tuning database chose it) while the config still says "auto"; a config that names a path keeps
   its own. */
static void test_attention_path_is_the_plans(void) {
    Err err = {{0}};
    const char *bf16[] = {"precision=bf16", NULL};
    CHECK_OK(make(bf16, &err), &err);
    TuneRecord r = tune_record("best", "attention", "path", "path=flash");
    tune_key_attention(&r.key, &ENV, &plan);
    TuneDb db;
    unlink(path);
    tune_db_load(&db, path, NULL);
    tune_db_put(&db, &r);
    TuneApplied ap;
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    CHECK(ap.attention && plan.attention == ATTN_FLASH && !strcmp(plan.attention_origin, "tuning database"),
          "the plan's attention path is %s (%s), not the database's flash", attention_name(plan.attention),
          plan.attention_origin);
    CHECK(cfg.run.attention == ATTN_AUTO, "the database's path was written into the config (%s)", attention_name(cfg.run.attention));
    const char *cudnn[] = {"precision=bf16", "attention=cudnn"};
    FakeMachine m;   /* the config's cuDNN must be had: a machine where it serves */
    CHECK_OK(config_load(&cfg, "configs/tiny.lua", cudnn, 2, &err) ||
             plan_make_train(&plan, &cfg, "sm_90", fake_machine(&m, 1, NULL), &err), &err);
    tune_db_apply(&db, &ENV, &plan, "130100", &m.facts, &ap, NULL);
    CHECK(plan.attention == ATTN_CUDNN && !strcmp(plan.attention_origin, "config") && !ap.attention,
          "with attention = \"cudnn\" the plan has %s (%s)", attention_name(plan.attention), plan.attention_origin);
    tune_db_free(&db);
}

/* The database's GELU path (gpt2gen tune's gelu-path) is the training plan's when train.gelu = "auto": the plan takes
   it with the matching matmul epilogues, and a tuned matmul algorithm of the chosen path's names with it; a config
   that names a path keeps its own. */
static void test_gelu_path_is_the_plans(void) {
    Err err = {{0}};
    const char *bf16[] = {"precision=bf16", "train.gelu=auto", NULL};
    CHECK_OK(make(bf16, &err), &err);
    GeluPath other = plan.gelu == GELU_KERNEL ? GELU_EPILOGUE : GELU_KERNEL;   /* not what "auto" took by shape */
    TuneRecord r = tune_record("best", "gelu", "path", other == GELU_KERNEL ? "path=kernel" : "path=epilogue");
    tune_key_gelu(&r.key, &ENV, &plan);
    TuneDb db;
    unlink(path);
    tune_db_load(&db, path, NULL);
    tune_db_put(&db, &r);
    /* an algorithm for the fc matmul under the name the chosen path gives it */
    Plan probe = plan;
    matmuls_set_gelu(probe.matmuls, &probe.model, &probe.step, other);
    TuneRecord mm = tune_record("best", "matmul", "", "algo=0,id=1,tile=2,stages=3,splitk=1,reduction=0,swizzle=0,custom=0,cluster=0");
    tune_db_name(probe.matmuls[MM_FC].name, mm.name, sizeof mm.name);
    tune_key_matmul(&mm.key, &ENV, &probe, MM_FC, "130100");
    tune_db_put(&db, &mm);
    /* through the file, as a later build reads it */
    Err werr;
    CHECK_OK(tune_db_rewrite(&db, &werr), &werr);
    tune_db_free(&db);
    char msgs[4096] = "";
    FILE *m = fmemopen(msgs, sizeof msgs - 1, "w");
    tune_db_load(&db, path, m);
    fclose(m);
    CHECK(db.n == 2 && !msgs[0], "the database read back %d of its 2 records: %s", db.n, msgs);
    TuneApplied ap;
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    CHECK(ap.gelu && plan.gelu == other && !strcmp(plan.gelu_origin, "tuning database"), "the plan's GELU is %s (%s), "
          "not the database's %s", gelu_path_name(plan.gelu), plan.gelu_origin, gelu_path_name(other));
    CHECK(plan.matmuls[MM_FC].epilogue == (other == GELU_KERNEL ? EPI_NONE : EPI_GELU_AUX) &&
          plan.matmuls[MM_FCPROJ_DINP].epilogue == (other == GELU_KERNEL ? EPI_NONE : EPI_DGELU),
          "the matmuls' epilogues do not follow the database's GELU path");
    CHECK(plan.matmuls[MM_FC].algo.set && plan.matmuls[MM_FC].algo.id == 1, "the tuned algorithm of matmul %s was not "
          "applied after the GELU path", plan.matmuls[MM_FC].name);
    const char *kernel[] = {"precision=bf16", other == GELU_KERNEL ? "train.gelu=epilogue" : "train.gelu=kernel", NULL};
    CHECK_OK(make(kernel, &err), &err);
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    CHECK(plan.gelu != other && !strcmp(plan.gelu_origin, "config") && !ap.gelu, "with %s the plan has %s (%s)", kernel[1],
          gelu_path_name(plan.gelu), plan.gelu_origin);
    tune_db_free(&db);
    /* path=split: a plain fc matmul (our forward kernel beside it), the DGELU epilogue in the fcproj dinp */
    CHECK_OK(make(bf16, &err), &err);
    memset(&db, 0, sizeof db);
    TuneRecord split = tune_record("best", "gelu", "path", "path=split");
    tune_key_gelu(&split.key, &ENV, &plan);
    tune_db_put(&db, &split);
    tune_db_apply(&db, &ENV, &plan, "130100", NULL, &ap, NULL);
    CHECK(ap.gelu && plan.gelu == GELU_SPLIT && plan.matmuls[MM_FC].epilogue == EPI_NONE &&
          plan.matmuls[MM_FCPROJ_DINP].epilogue == EPI_DGELU, "path=split gave %s, fc epilogue %d, fcproj dinp epilogue %d",
          gelu_path_name(plan.gelu), plan.matmuls[MM_FC].epilogue, plan.matmuls[MM_FCPROJ_DINP].epilogue);
    tune_db_free(&db);
}

/* steps_agree (tune/measure.h): the tuned step's and the GELU path's check, relative 1e-4 in fp32, 2e-3 in 16 bits */
static void test_steps_agree(void) {
    const float a[3] = {10.0f, 9.5f, 9.0f};
    double worst, tol;
    CHECK(measure_steps_agree(PREC_FP32, a, a, &worst, &tol) && worst == 0 && tol == 1e-4, "equal losses: worst %g, tol %g", worst, tol);
    const float near32[3] = {10.0f, 9.5f + 9.5f * 5e-5f, 9.0f}, far32[3] = {10.0f, 9.5f, 9.0f + 9.0f * 3e-4f};
    CHECK(measure_steps_agree(PREC_FP32, a, near32, &worst, &tol) && fabs(worst - 5e-5) < 1e-6, "fp32 5e-5 apart: worst %g", worst);
    CHECK(!measure_steps_agree(PREC_FP32, a, far32, &worst, &tol), "fp32 3e-4 apart agreed (worst %g)", worst);
    const float near16[3] = {10.0f * (1 + 1.5e-3f), 9.5f, 9.0f}, far16[3] = {10.0f, 9.5f * (1 - 3e-3f), 9.0f};
    CHECK(measure_steps_agree(PREC_BF16, a, near16, &worst, &tol) && tol == 2e-3, "bf16 1.5e-3 apart: worst %g, tol %g", worst, tol);
    CHECK(!measure_steps_agree(PREC_FP16, a, far16, &worst, &tol), "fp16 3e-3 apart agreed (worst %g)", worst);
    const float nan3[3] = {10.0f, NAN, 9.0f};
    CHECK(!measure_steps_agree(PREC_BF16, a, nan3, &worst, &tol) && !measure_steps_agree(PREC_BF16, nan3, a, &worst, &tol),
          "a NaN loss agreed (worst %g)", worst);
}

/* relerr (tune/harness.h), what every GPU kernel test compares with: a NaN anywhere makes it NaN, which no
   tolerance accepts, whatever finite values follow */
static void test_relerr_keeps_nan(void) {
    const float ref[4] = {1.0f, -2.0f, 4.0f, 0.5f}, got[4] = {1.0f, -2.0f, 4.04f, 0.5f};
    double e = harness_relerr(got, ref, 4);
    CHECK(fabs(e - 0.01) < 1e-6, "relerr %g, expected 0.04 / 4 = 0.01", e);
    const float first[4] = {NAN, -2.0f, 4.0f, 0.5f}, middle[4] = {1.0f, NAN, 4.04f, 0.5f};
    CHECK(isnan(harness_relerr(first, ref, 4)) && isnan(harness_relerr(middle, ref, 4)), "a NaN was lost: %g, %g", harness_relerr(first, ref, 4),
          harness_relerr(middle, ref, 4));
    /* and the CPU tests' running worst (tests/check.h) */
    double w = worse(worse(worse(0, 0.5), NAN), 2.0);
    CHECK(isnan(w) && worse(worse(0, 0.5), 0.25) == 0.5, "worse: %g after a NaN", w);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    scratch_db("test-tune");
    RUN(test_round_trip);
    RUN(test_stale);
    RUN(test_other_configs_one_line);
    RUN(test_corrupt);
    RUN(test_variants_respect_constraints);
    RUN(test_apply_and_config_wins);
    RUN(test_env_hook);
    RUN(test_every_family_registered);
    RUN(test_attention_path_is_the_plans);
    RUN(test_gelu_path_is_the_plans);
    RUN(test_steps_agree);
    RUN(test_relerr_keeps_nan);
    unlink(path);
    rmdir(dir);
    return check_summary();
}
