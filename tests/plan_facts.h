/* plan_facts: made-up machines for the plan tests (gen/plan.h, PlanFacts), where cuDNN's attention serves every plan
   or none (with a reason): each counts the questions it was asked, so a test can see that a decision that needs no
   machine asked none. */
#ifndef GPT2GEN_TEST_PLAN_FACTS_H
#define GPT2GEN_TEST_PLAN_FACTS_H
#include "gen/plan.h"
#include <stdio.h>

typedef struct {
    int serves;          /* what it answers */
    const char *why;     /* its reason where it does not serve */
    int asked;           /* questions so far */
    PlanFacts facts;
} FakeMachine;

static inline int fake_machine_cudnn(void *ctx, const Plan *plan, char *why, size_t n) {
    FakeMachine *m = ctx;
    (void)plan;
    m->asked++;
    if (!m->serves) snprintf(why, n, "%s", m->why);
    return m->serves;
}

/* m as a machine that serves (or not, saying why) */
static inline const PlanFacts *fake_machine(FakeMachine *m, int serves, const char *why) {
    *m = (FakeMachine){serves, why, 0, {fake_machine_cudnn, m}};
    return &m->facts;
}
#endif
