/* test_plan_attention: a plan's attention path is final when the plan is made (gen/plan_attention.c), from what the
   config or the tuning database asked for, the plan's own attention kernels, and what the machine serves (PlanFacts,
   here made-up machines: tests/plan_facts.h): attention = "auto" takes cuDNN where the machine says it serves, else
   the template with the machine's reason, and the template without being asked where a training step's attention
   runs on Hopper's wgmma; the config's "cudnn" where cuDNN cannot serve is an error naming the config and the reason;
   the database's cuDNN gives way to the template where it cannot serve, saying why; a decode step asks nothing; and
   plan.txt says the path, who chose it and why. Runs from the repository root. */
#include "tests/check.h"
#include "tests/tune_db_test.h"
#include "tests/plan_facts.h"
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cfg and plan (tune_db_test.h's): config_path with sets (NULL-terminated), the training plan for arch and facts */
static int make_train(const char *config_path, const char *const *sets, const char *arch, const PlanFacts *facts,
                      Err *err) {
    int n = 0;
    while (sets && sets[n]) n++;
    if (config_load(&cfg, config_path, sets, n, err)) return -1;
    return plan_make_train(&plan, &cfg, arch, facts, err);
}

/* the plan's path, origin and reason against what is expected; 1 where they agree */
static int path_is(const Plan *p, AttentionPath want, const char *origin, const char *why_has, const char *what) {
    int ok = p->attention == want && !strcmp(p->attention_origin, origin) && strstr(p->attention_why, why_has);
    CHECK(ok, "%s: attention %s (%s: %s), expected %s (%s: ...%s...)", what, attention_name(p->attention),
          p->attention_origin, p->attention_why, attention_name(want), origin, why_has);
    return ok;
}

/* attention = "auto" off wgmma (sm_80; fp32; backward tiles wgmma does not take): cuDNN where the machine says it
   serves, asked once; else the template with the machine's own reason; without facts, the template, saying so */
static void test_auto_follows_the_machine(void) {
    static const char *const cases[][2] = {{"sm_80", NULL}, {"sm_90", "precision=fp32"}, {"sm_90", "tune.attention.BWD_TILE=128"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *sets[] = {cases[c][1], NULL};
        char what[96];
        snprintf(what, sizeof what, "%s %s", cases[c][0], cases[c][1] ? cases[c][1] : "-");
        FakeMachine yes, no;
        Err err = {{0}};
        if (make_train("configs/gpt2-124M.lua", sets, cases[c][0], fake_machine(&yes, 1, NULL), &err)) {
            CHECK(0, "%s: %s", what, err.msg);
            continue;
        }
        path_is(&plan, ATTN_CUDNN, "auto", "cuDNN", what);
        CHECK(yes.asked == 1, "%s: the machine was asked %d times", what, yes.asked);
        if (make_train("configs/gpt2-124M.lua", sets, cases[c][0], fake_machine(&no, 0, "cuDNN is hidden: test"), &err)) {
            CHECK(0, "%s: %s", what, err.msg);
            continue;
        }
        path_is(&plan, ATTN_FLASH, "auto", "cuDNN is hidden: test", what);
        if (make_train("configs/gpt2-124M.lua", sets, cases[c][0], NULL, &err)) { CHECK(0, "%s: %s", what, err.msg); continue; }
        path_is(&plan, ATTN_FLASH, "auto", "no cuDNN", what);
    }
}

/* a training step whose attention runs on wgmma (sm_90, bf16, head size 64: gpt2-124M's defaults) takes the template
   without asking the machine; a forward of the same model on sm_90 still takes cuDNN where it serves */
static void test_training_on_wgmma_takes_the_template(void) {
    FakeMachine yes;
    Err err = {{0}};
    if (make_train("configs/gpt2-124M.lua", NULL, "sm_90", fake_machine(&yes, 1, NULL), &err)) { CHECK(0, "%s", err.msg); return; }
    path_is(&plan, ATTN_FLASH, "auto", "wgmma", "gpt2-124M on sm_90");
    CHECK(yes.asked == 0, "the machine was asked %d times for a decision that needs none", yes.asked);
    static Plan fwd;
    StepShape st = step_forward(&cfg, 4, 1024, 0);
    if (plan_make(&fwd, &cfg, "eval", &st, "sm_90", &yes.facts, &err)) { CHECK(0, "%s", err.msg); return; }
    path_is(&fwd, ATTN_CUDNN, "auto", "cuDNN", "a forward on sm_90");
}

/* grouped-query attention (llama-124M: 12 query heads on 4 key/value heads): on cuDNN the plan expands qkv to every
   query head (kv_expand, with qkv_x and dqkv_x of B*T*3C elements each); on the template, whose kernels read the
   grouped heads in place, neither; so also where the database's cuDNN gives way to the template */
static void test_gqa_expands_for_cudnn_only(void) {
    const char *cudnn[] = {"attention=cudnn", NULL}, *flash[] = {"attention=flash", NULL};
    FakeMachine m;
    Err err = {{0}};
    for (int c = 0; c < 2; c++) {
        if (make_train("configs/llama-124M.lua", c ? flash : cudnn, "sm_90", fake_machine(&m, 1, NULL), &err)) {
            CHECK(0, "%s", err.msg);
            return;
        }
        const PlanBuffer *x = &plan.memory.buffers[BUF_QKV_X], *dx = &plan.memory.buffers[BUF_DQKV_X];
        size_t want = c ? 0 : (size_t)plan.step.B * plan.step.T * 3 * plan.model.n_embd * 2;   /* bf16 */
        CHECK(plan.attention == (c ? ATTN_FLASH : ATTN_CUDNN) && plan.kv_expand == !c && x->bytes == want &&
              dx->bytes == want, "%s: kv_expand %d, qkv_x %zu and dqkv_x %zu bytes (expected %d, %zu)",
              c ? "flash" : "cudnn", plan.kv_expand, x->bytes, dx->bytes, !c, want);
    }
}

/* the config's "cudnn": had where the machine serves it; where not, an error that names the config file and the
   machine's reason; the config's "flash" asks nothing */
static void test_config_choice_must_be_had(void) {
    const char *cudnn[] = {"attention=cudnn", NULL}, *flash[] = {"attention=flash", NULL};
    FakeMachine m;
    Err err = {{0}};
    if (make_train("configs/gpt2-124M.lua", cudnn, "sm_90", fake_machine(&m, 1, NULL), &err)) { CHECK(0, "%s", err.msg); return; }
    path_is(&plan, ATTN_CUDNN, "config", "config", "attention = cudnn, served");
    int rc = make_train("configs/gpt2-124M.lua", cudnn, "sm_90", fake_machine(&m, 0, "cuDNN refuses T=77"), &err);
    CHECK(rc != 0 && strstr(err.msg, "configs/gpt2-124M.lua") && strstr(err.msg, "attention = \"cudnn\"") &&
          strstr(err.msg, "cuDNN refuses T=77"), "attention = cudnn where it cannot serve: rc %d, '%s'", rc, err.msg);
    rc = make_train("configs/gpt2-124M.lua", cudnn, "sm_90", NULL, &err);
    CHECK(rc != 0 && strstr(err.msg, "configs/gpt2-124M.lua") && strstr(err.msg, "no cuDNN"),
          "attention = cudnn without facts: rc %d, '%s'", rc, err.msg);
    if (make_train("configs/gpt2-124M.lua", flash, "sm_80", fake_machine(&m, 1, NULL), &err)) { CHECK(0, "%s", err.msg); return; }
    path_is(&plan, ATTN_FLASH, "config", "config", "attention = flash");
    CHECK(m.asked == 0, "attention = flash asked the machine %d times", m.asked);
}

/* a decode step's attention is templates/decode.cu's, whatever the config or the machine says */
static void test_decode_asks_nothing(void) {
    const char *cudnn[] = {"attention=cudnn", NULL};
    Err err = {{0}};
    static Plan dec;
    if (config_load(&cfg, "configs/gpt2-124M.lua", cudnn, 1, &err) || plan_make_decode(&dec, &cfg, 2, 0, "sm_80", &err)) {
        CHECK(0, "a decode plan with attention = cudnn: %s", err.msg);
        return;
    }
    path_is(&dec, ATTN_FLASH, "decode step", "decode.cu", "decode");
}

/* the tuning database's path, for attention = "auto": its cuDNN where the machine serves it; where not, the template,
   the plan saying why and the database's messages too; its flash asks nothing */
static void test_database_choice_yields_where_it_cannot_serve(void) {
    Err err = {{0}};
    FakeMachine m;
    const char *bf16[] = {"precision=bf16", NULL};
    TuneDb db;
    unlink(path);
    tune_db_load(&db, path, NULL);
    TuneApplied ap;
    char text[4096];
    for (int serves = 1; serves >= 0; serves--) {
        if (make_train("configs/tiny.lua", bf16, "sm_90", fake_machine(&m, 1, NULL), &err)) { CHECK(0, "%s", err.msg); break; }
        TuneRecord r = tune_record("best", "attention", "path", "path=cudnn");
        tune_key_attention(&r.key, &ENV, &plan);
        tune_db_put(&db, &r);
        FILE *msgs = tmpfile();
        tune_db_apply(&db, &ENV, &plan, "130100", fake_machine(&m, serves, "cuDNN 9.1.0 refuses T=64"), &ap, msgs);
        stream_text(msgs, text, sizeof text);
        fclose(msgs);
        if (serves) {
            path_is(&plan, ATTN_CUDNN, "tuning database", "tuning database", "the database's cudnn, served");
            continue;
        }
        path_is(&plan, ATTN_FLASH, "tuning database", "cuDNN 9.1.0 refuses T=64", "the database's cudnn, not served");
        CHECK(ap.attention && ap.attention_path == ATTN_FLASH, "applied: attention %d, path %s", ap.attention,
              attention_name(ap.attention_path));
        CHECK(strstr(text, "attention: the flash template runs, not the tuning database's cuDNN") && strstr(text, "refuses T=64"),
              "the database's messages: '%s'", text);
    }
    TuneRecord r = tune_record("best", "attention", "path", "path=flash");
    tune_key_attention(&r.key, &ENV, &plan);
    tune_db_put(&db, &r);
    if (make_train("configs/tiny.lua", bf16, "sm_90", NULL, &err)) CHECK(0, "%s", err.msg);
    tune_db_apply(&db, &ENV, &plan, "130100", fake_machine(&m, 1, NULL), &ap, NULL);
    path_is(&plan, ATTN_FLASH, "tuning database", "tuning database", "the database's flash");
    CHECK(m.asked == 0, "the database's flash asked the machine %d times", m.asked);
    tune_db_free(&db);
}

/* the database's attention tiles decide "auto" too: a training plan on wgmma whose database tiles are mma.sync's
   (FWD_SM = 80) is decided again, and takes cuDNN where it serves */
static void test_database_tiles_decide_again(void) {
    Err err = {{0}};
    FakeMachine m;
    if (make_train("configs/gpt2-124M.lua", NULL, "sm_90", fake_machine(&m, 1, NULL), &err)) { CHECK(0, "%s", err.msg); return; }
    if (!path_is(&plan, ATTN_FLASH, "auto", "wgmma", "gpt2-124M on sm_90")) return;
    int fam = module_of("attention");
    const PlanFamily *f = &plan.families[fam];
    int values[FAMILY_MAX_TUNABLES];
    for (int t = 0; t < f->n_tunables; t++)
        values[t] = !strcmp(f->decl->tunables[t].name, "FWD_SM") ? 80 : f->tunables[t].value;
    char variant[256];
    tune_variant_name(f, values, variant, sizeof variant);
    TuneDb db;
    unlink(path);
    tune_db_load(&db, path, NULL);
    TuneRecord r = best_kernel("attention", variant, &ENV);
    tune_db_put(&db, &r);
    TuneApplied ap;
    tune_db_apply(&db, &ENV, &plan, "130100", &m.facts, &ap, NULL);
    CHECK(ap.kernels == 1, "the database's attention tiles (%s) were not applied", variant);
    path_is(&plan, ATTN_CUDNN, "auto", "cuDNN", "gpt2-124M with the database's mma.sync tiles");
    CHECK(m.asked == 1, "the machine was asked %d times", m.asked);
    tune_db_free(&db);
}

/* plan.txt's attention line: the path, who chose it and why */
static void test_plan_txt_says_why(void) {
    char tmp[] = "/tmp/gpt2gen-plan-attention-XXXXXX";
    if (!mkdtemp(tmp)) { CHECK(0, "mkdtemp"); return; }
    FakeMachine m;
    Err err = {{0}};
    if (make_train("configs/gpt2-124M.lua", NULL, "sm_80", fake_machine(&m, 0, "cuDNN not found: libtest.so"), &err)) {
        CHECK(0, "%s", err.msg);
        rmdir(tmp);
        return;
    }
    snprintf(plan.build_dir, sizeof plan.build_dir, "%s", tmp);
    const Plan *plans[1] = {&plan};
    char file[512];
    snprintf(file, sizeof file, "%s/plan.txt", tmp);
    char *text = plan_write(plans, 1, &err) ? NULL : read_file(file, NULL, &err);
    CHECK(text && strstr(text, "\nattention  flash (auto): cuDNN not found: libtest.so; backward deterministic\n"),
          "plan.txt: %s", text ? text : err.msg);
    free(text);
    unlink(file);
    rmdir(tmp);
}

int main(int argc, char **argv) {
    CHECK_MAIN_INIT(argc, argv);
    scratch_db("test-plan-attention");
    RUN(test_auto_follows_the_machine);
    RUN(test_training_on_wgmma_takes_the_template);
    RUN(test_config_choice_must_be_had);
    RUN(test_gqa_expands_for_cudnn_only);
    RUN(test_decode_asks_nothing);
    RUN(test_database_choice_yields_where_it_cannot_serve);
    RUN(test_database_tiles_decide_again);
    RUN(test_plan_txt_says_why);
    unlink(path);
    rmdir(dir);
    return check_summary();
}
