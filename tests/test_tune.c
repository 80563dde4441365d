/* test_tune: the tuning database without a GPU (gen/tune_db.h): records round trip through the file; a record
   for another GPU, driver, CUDA, NVRTC, cuDNN, template, shape or precision is stale (ignored, with a message);
   truncated, garbage and bad-number lines are reported and ignored, never fatal; appends survive a cut-short
   line; the variants `gpt2gen tune` sweeps respect every declared constraint; and applying the database to a
   plan takes its values, except where the config sets a tunable itself; two steps' first losses agree within the
   precision's relative tolerance, and a NaN never agrees, nor passes the kernel tests' comparison. And what
   `gpt2gen tune` sweeps: the plans (the training step, the decode and eval plans) its options select, the options
   themselves, and the variants of a plan without a backward (its forward kernels' tunables) and of a family swept
   by groups. Runs from the repository root. */
#include "gen/config.h"
#include "tests/check.h"
#include "tests/tune_db_test.h"
#include "tests/plan_facts.h"
#include "tune/families.h"
#include "tune/tune.h"
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

/* the plan sets tune makes for o (as cli/tune.c does, without the database) from the tiny config with sets, and
   the plans it sweeps */
static int tune_sets(const TuneOptions *o, const char *const *sets, PlanSet *ps, TuneTargets *tt) {
    Err err = {{0}};
    int n = 0;
    while (sets && sets[n]) n++;
    if (config_load(&cfg, "configs/tiny.lua", sets, n, &err)) { CHECK(0, "%s", err.msg); return -1; }
    PlanRequest req[TUNE_MAX_ROWS];
    PlanInputs in = {"sm_90", NULL, NULL, NULL, NULL};
    int n_sets = tune_plan_requests(o, req);
    for (int i = 0; i < n_sets; i++)
        if (planset_make(&ps[i], &cfg, &req[i], &in, NULL, &err)) {
            CHECK(0, "%s", err.msg);
            while (i-- > 0) planset_free(&ps[i]);
            return -1;
        }
    tune_targets(o, ps, n_sets, tt);
    return n_sets;
}

/* one plan of the targets: its kind, rows and positions */
static void check_target(const TuneTargets *tt, int i, StepKind kind, int B, int T) {
    if (i >= tt->n) { CHECK(0, "plan %d: only %d plans", i, tt->n); return; }
    const StepShape *s = &tt->plan[i]->step;
    char label[64];
    tune_plan_label(tt->plan[i], label, sizeof label);
    CHECK(s->kind == kind && s->B == B && s->T == T && !s->fills_cache, "plan %d is %s (%s B=%d T=%d), expected %s B=%d T=%d",
          i, label, step_kind_name(s->kind), s->B, s->T, step_kind_name(kind), B, T);
}

/* The plans `gpt2gen tune` sweeps: by default the training step, the one-row decode step of `gpt2gen sample`, and
   the 32-row eval forwards of the buckets up to 256 positions (each bucket once); the options choose others. */
static void test_plans_tune_sweeps(void) {
    TuneOptions o;
    tune_options_defaults(&o);
    PlanSet ps[TUNE_MAX_ROWS];
    TuneTargets tt;
    const char *sets[] = {"model.max_seq_len=512", NULL};
    int n = tune_sets(&o, sets, ps, &tt);
    if (n < 0) return;
    CHECK(n == 1 && tt.n == 5, "defaults: %d plan sets, %d plans (expected 1 and 5)", n, tt.n);
    check_target(&tt, 0, STEP_TRAIN, 8, 64);
    check_target(&tt, 1, STEP_DECODE, 1, 1);
    for (int i = 0; i < 3; i++) check_target(&tt, 2 + i, STEP_FORWARD, 32, 64 << i);
    CHECK(tt.n > 1 && tt.plan[1] == ps[0].decode && !strcmp(tt.plan[1]->name, "decode"), "the decode plan is the set's own");
    char label[64];
    tune_plan_label(tt.plan[tt.n - 1], label, sizeof label);
    CHECK(!strcmp(label, "eval (32 rows, T=256)"), "label '%s'", label);
    planset_free(&ps[0]);
    /* tiny's context is 64 positions: one bucket, whatever the defaults ask */
    if ((n = tune_sets(&o, NULL, ps, &tt)) < 0) return;
    CHECK(tt.n == 3, "tiny: %d plans, expected train, decode and one eval", tt.n);
    check_target(&tt, 2, STEP_FORWARD, 32, 64);
    planset_free(&ps[0]);
    /* --only decode,eval --decode-rows 1,8 --eval-rows 16 --eval-T 100,512,5000: 100 -> 128, 5000 -> maxT 512 (once) */
    char why[256];
    const char *opts[][2] = {{"--only", "decode,eval"}, {"--decode-rows", "1,8"}, {"--eval-rows", "16"}, {"--eval-T", "100,512,5000"}};
    for (int i = 0; i < 4; i++) CHECK(tune_plan_option(&o, opts[i][0], opts[i][1], why, sizeof why) == 0, "%s", why);
    if ((n = tune_sets(&o, sets, ps, &tt)) < 0) return;
    CHECK(n == 2 && tt.n == 4, "%d plan sets, %d plans (expected 2 and 4)", n, tt.n);
    check_target(&tt, 0, STEP_DECODE, 1, 1);
    check_target(&tt, 1, STEP_DECODE, 8, 1);
    check_target(&tt, 2, STEP_FORWARD, 16, 128);
    check_target(&tt, 3, STEP_FORWARD, 16, 512);
    CHECK(!ps[0].train && !ps[1].train && !ps[1].eval[0], "a plan that is not asked for was made");
    for (int i = 0; i < n; i++) planset_free(&ps[i]);
}

/* tune's plan options: what each takes, and one message naming the option for what it does not */
static void test_plan_options(void) {
    TuneOptions o;
    tune_options_defaults(&o);
    CHECK(o.plans == (TUNE_PLAN_TRAIN | TUNE_PLAN_DECODE | TUNE_PLAN_EVAL) && o.n_decode_rows == 1 && o.decode_rows[0] == 1 &&
          o.eval_rows == 32 && o.n_eval_T == 3 && o.eval_T[2] == 256 && o.algos == TUNE_DEFAULT_ALGOS,
          "defaults: plans %u, %d decode rows, eval rows %d, %d eval T", o.plans, o.n_decode_rows, o.eval_rows, o.n_eval_T);
    char why[256] = "";
    CHECK(tune_plan_option(&o, "--budget", "10", why, sizeof why) == 1, "--budget is not a plan option");
    CHECK(tune_plan_option(&o, "--only", "eval,train", why, sizeof why) == 0 && o.plans == (TUNE_PLAN_TRAIN | TUNE_PLAN_EVAL),
          "--only eval,train: %u", o.plans);
    PlanRequest req[TUNE_MAX_ROWS];
    CHECK(tune_plan_requests(&o, req) == 1 && req[0].train && !req[0].decode_rows && req[0].eval_rows == 32,
          "--only eval,train: one request of train and eval");
    CHECK(tune_plan_option(&o, "--decode-rows", "4,2,1", why, sizeof why) == 0 && o.n_decode_rows == 3 && o.decode_rows[0] == 4,
          "--decode-rows 4,2,1: %d", o.n_decode_rows);
    const char *bad[][2] = {{"--only", "train,train"}, {"--only", "sample"}, {"--only", ""}, {"--only", "train,,eval"},
                            {"--only", "eval,"}, {"--decode-rows", "0"}, {"--decode-rows", "1,1"}, {"--decode-rows", "1,2,3,4,5,6,7,8,9"},
                            {"--decode-rows", "2,"}, {"--eval-rows", "4097"}, {"--eval-rows", "8,16"}, {"--eval-T", "x"},
                            {"--eval-T", "200000"}, {"--eval-T", ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = 0;
        int rc = tune_plan_option(&o, bad[i][0], bad[i][1], why, sizeof why);
        CHECK(rc == -1 && strstr(why, bad[i][0]) && strstr(why, "expected"), "%s '%s': rc %d, '%s'", bad[i][0], bad[i][1], rc, why);
    }
}

static int family_of(const Plan *p, const char *family) {
    for (int i = 0; i < p->n_families; i++)
        if (!strcmp(p->families[i].decl->family, family)) return i;
    return -1;
}

/* the tunables in which variant a differs from b, as a bit set */
static unsigned differs(const PlanFamily *m, const TuneVariant *a, const TuneVariant *b) {
    unsigned bits = 0;
    for (int t = 0; t < m->n_tunables && t < FAMILY_MAX_TUNABLES; t++) bits |= (unsigned)(a->v[t] != b->v[t]) << t;
    return bits;
}

/* the bits of the tunables named in list (families.h's forms: ',' or ';' between names) */
static unsigned named(const PlanFamily *m, const char *list, int group) {
    unsigned bits = 0;
    int g = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",;");
        for (int t = 0; t < m->n_tunables; t++)
            if ((group < 0 || g == group) && strlen(m->decl->tunables[t].name) == n && !strncmp(p, m->decl->tunables[t].name, n))
                bits |= 1u << t;
        p += n;
        if (*p == ';') g++;
        if (*p) p++;
    }
    return bits;
}

/* The variants tune sweeps in a plan without a backward vary only the forward's tunables (layernorm: BLOCK_SIZE;
   attention: its forward's four), in the training step every one; the decode family's vary one group at a time. */
static void test_sweep_variants(void) {
    TuneOptions o;
    tune_options_defaults(&o);
    PlanSet ps[TUNE_MAX_ROWS];
    TuneTargets tt;
    const char *sets[] = {"precision=bf16", NULL};
    if (tune_sets(&o, sets, ps, &tt) < 0 || tt.n != 3) { CHECK(0, "%d plans", tt.n); return; }
    const Plan *train = tt.plan[0], *decode = tt.plan[1], *eval = tt.plan[2];
    static TuneVariant v[TUNE_MAX_VARIANTS], all[TUNE_MAX_VARIANTS];
    int refused, r2;
    for (int i = 0; i < train->n_families; i++)   /* the training step: every combination, as before */
        CHECK(tune_sweep_variants(train, i, v, TUNE_MAX_VARIANTS, &refused) ==
                  tune_variants(train, i, all, TUNE_MAX_VARIANTS, &r2) && !memcmp(v, all, sizeof v[0]) && refused == r2,
              "train %s: the sweep is not every combination", train->families[i].decl->family);
    const Plan *fwd[2] = {decode, eval};
    const char *fams[2] = {"layernorm", "attention"};
    for (int k = 0; k < 2; k++)
        for (int f = 0; f < 2; f++) {
            int i = family_of(fwd[k], fams[f]);
            if (i < 0) continue;
            const PlanFamily *m = &fwd[k]->families[i];
            unsigned allowed = named(m, tune_family(fams[f])->forward, -1), seen = 0;
            int n = tune_sweep_variants(fwd[k], i, v, TUNE_MAX_VARIANTS, &refused);
            for (int j = 0; j < n; j++) seen |= differs(m, &v[j], &v[0]);
            int full = tune_variants(fwd[k], i, all, TUNE_MAX_VARIANTS, &r2);
            CHECK(n > 1 && n < full && seen && !(seen & ~allowed), "%s %s: %d variants of %d, tunables varied %#x, allowed %#x",
                  fwd[k]->name, fams[f], n, full, seen, allowed);
        }
    CHECK(family_of(eval, "attention") >= 0 && family_of(decode, "decode") >= 0, "the eval plan has no attention family or the "
          "decode plan no decode family");
    int di = family_of(decode, "decode");
    if (di >= 0) {
        const PlanFamily *m = &decode->families[di];
        const char *groups = tune_family("decode")->groups;
        int n = tune_sweep_variants(decode, di, v, TUNE_MAX_VARIANTS, &refused), expect = 1, ng = 0;
        while (named(m, groups, ng)) {   /* every combination of each group's candidates, the default once */
            int combos = 1;
            for (int t = 0; t < m->n_tunables; t++)
                if (named(m, groups, ng) >> t & 1) combos *= m->tunables[t].n_candidates;
            expect += combos - 1;
            ng++;
        }
        CHECK(ng == 4 && n + refused == expect, "decode: %d variants + %d refused, expected %d in %d groups", n, refused, expect, ng);
        for (int j = 1; j < n; j++) {
            unsigned d = differs(m, &v[j], &v[0]);
            int in_one = 0;
            for (int g = 0; g < ng; g++) in_one += d && !(d & ~named(m, groups, g));
            CHECK(in_one == 1, "decode variant %d varies tunables %#x, not one group's", j, d);
            for (int k = 0; k < j; k++) CHECK(memcmp(&v[j], &v[k], sizeof v[j]), "decode variant %d repeats %d", j, k);
        }
    }
    planset_free(&ps[0]);
}

/* Every group's fastest together: two groups improved make a variant to time; one alone was timed already. */
static void test_group_best(void) {
    TuneOptions o;
    tune_options_defaults(&o);
    PlanSet ps[TUNE_MAX_ROWS];
    TuneTargets tt;
    if (tune_sets(&o, NULL, ps, &tt) < 0) return;
    const Plan *decode = tt.n > 1 ? tt.plan[1] : NULL;
    int di = decode ? family_of(decode, "decode") : -1;
    if (di < 0) { CHECK(0, "no decode family"); planset_free(&ps[0]); return; }
    const PlanFamily *m = &decode->families[di];
    static TuneVariant v[TUNE_MAX_VARIANTS];
    static double us[TUNE_MAX_VARIANTS];
    int refused, n = tune_sweep_variants(decode, di, v, TUNE_MAX_VARIANTS, &refused);
    const char *groups = tune_family("decode")->groups;
    unsigned g0 = named(m, groups, 0), g1 = named(m, groups, 1);
    int a = -1, b = -1, c = -1;   /* a, c: two of group 0's variants; b: one of group 1's */
    for (int j = 1; j < n; j++) {
        unsigned d = differs(m, &v[j], &v[0]);
        us[j] = 20;
        if (!(d & ~g0)) { if (a < 0) a = j; else if (c < 0) c = j; }
        if (!(d & ~g1) && b < 0) b = j;
    }
    us[0] = 10;
    TuneVariant best;
    CHECK(a > 0 && b > 0 && c > 0, "no variants of groups 0 and 1");
    if (a < 0 || b < 0 || c < 0) { planset_free(&ps[0]); return; }
    CHECK(!tune_group_best(decode, di, v, us, n, &best) && !memcmp(&best, &v[0], sizeof best), "nothing faster: the default");
    us[a] = 9; us[c] = 8;
    CHECK(!tune_group_best(decode, di, v, us, n, &best) && !memcmp(&best, &v[c], sizeof best), "one group faster: timed already");
    us[b] = 7;
    int fresh = tune_group_best(decode, di, v, us, n, &best);
    CHECK(fresh && !(differs(m, &best, &v[c]) & g0) && !(differs(m, &best, &v[b]) & g1) &&
          !(differs(m, &best, &v[0]) & ~(g0 | g1)), "two groups faster: their fastest together (fresh %d)", fresh);
    us[b] = -1;   /* a rejected variant is never taken */
    CHECK(!tune_group_best(decode, di, v, us, n, &best) && !memcmp(&best, &v[c], sizeof best), "a rejected variant was taken");
    planset_free(&ps[0]);
}

/* Each family entry's forward and groups name tunables of its family; the groups name every tunable once, so that
   a tunable added to a family swept by groups is swept too. */
static void test_family_entries_name_tunables(void) {
    for (const FamilyEntry *e = tune_families; e->family; e++) {
        const FamilyDecl *f = kernel_families;
        while (f->family && strcmp(f->family, e->family)) f++;
        if (!f->family) continue;
        PlanFamily m = {0};
        m.decl = f;
        while (m.n_tunables < FAMILY_MAX_TUNABLES && f->tunables[m.n_tunables].name) m.n_tunables++;
        const char *lists[2] = {e->forward, e->groups};
        for (int k = 0; k < 2; k++) {
            if (!lists[k]) continue;
            int names = 1;
            for (const char *p = lists[k]; *p; p++) names += *p == ',' || *p == ';';
            unsigned bits = named(&m, lists[k], -1);
            CHECK(__builtin_popcount(bits) == names, "%s: '%s' names %d tunables of the family's %d", e->family, lists[k],
                  __builtin_popcount(bits), names);
            if (k == 1) CHECK(bits == (1u << m.n_tunables) - 1, "%s: the groups leave a tunable out", e->family);
        }
    }
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
    RUN(test_plans_tune_sweeps);
    RUN(test_plan_options);
    RUN(test_sweep_variants);
    RUN(test_group_best);
    RUN(test_family_entries_name_tunables);
    unlink(path);
    rmdir(dir);
    return check_summary();
}
