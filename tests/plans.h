/* plans: the plans the CPU tests run backends of. The CPU backend reads a plan's model, step shape and schedule
   (gen/schedule.h) only, so a test's plan needs no config: test_plan() makes one of a shape, and keeps it (reachable, for the leak checker)
   for as long as the program runs, as a backend needs its plan to outlive it. */
#ifndef GPT2GEN_TEST_PLANS_H
#define GPT2GEN_TEST_PLANS_H
#include "gen/plan.h"
#include "common/err.h"
#include <stdio.h>
#include <stdlib.h>

enum { TEST_PLANS_MAX = 512 };
static Plan *test_plans_made[TEST_PLANS_MAX];
static int test_plans_n;

/* A plan of kind for model s at B rows of T tokens, fp32 (shared_weights: runs with another backend's). */
static inline const Plan *test_plan_shared(const GPT2Shape *s, StepKind kind, int B, int T, int shared_weights) {
    if (test_plans_n == TEST_PLANS_MAX) { fprintf(stderr, "tests/plans.h: more than %d plans\n", TEST_PLANS_MAX); exit(1); }
    Plan *p = xcalloc(1, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", kind == STEP_TRAIN ? "train" : "forward");
    p->model = *s;
    p->step = (StepShape){kind, B, T, PREC_FP32, 0, 0, 1, 0, 1, shared_weights, 0, kind == STEP_DECODE ? s->max_seq_len : 0};
    schedule_make(&p->schedule, p);   /* the step's ops, as plan_make makes them */
    test_plans_made[test_plans_n++] = p;
    return p;
}
static inline const Plan *test_plan(const GPT2Shape *s, int B, int T) { return test_plan_shared(s, STEP_TRAIN, B, T, 0); }
#endif
