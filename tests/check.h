/* check: the smallest test harness. Each test file is one program:
 *
 *   #include "tests/check.h"
 *   static void test_something(void) { CHECK(x == 1, "x was %d", x); }
 *   int main(int argc, char **argv) { RUN(test_something); return check_summary(); }
 *
 * Each test prints "ok   name" or "FAIL name: why"; the last line is "RESULT <passed> <failed> <skipped>",
 * which tests/run.sh adds up. The lines and the counts are tune/report.c's (linked in with the library
 * objects); this header only runs the tests and collects each one's first failure.
 * SKIP(...) marks a test skipped (with its reason) and returns, e.g. where there is no GPU; MARK_SKIPPED(...)
 * marks it without returning, for a test that still has to clean up.
 * argv[1], if given, runs only the tests whose name contains it. worse() keeps a running worst error, NaN included. */
#ifndef GPT2GEN_CHECK_H
#define GPT2GEN_CHECK_H
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "tune/report.h"

static int check_cur_failed, check_cur_skipped;
static const char *check_filter;
static char check_why[8192];

#define CHECK(cond, ...) do { if (!(cond)) { \
        if (!check_cur_failed) { snprintf(check_why, sizeof check_why, __VA_ARGS__); } \
        check_cur_failed = 1; fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } } while (0)
#define CHECK_OK(call, errp) do { if ((call) != 0) { CHECK(0, "%s -> %s", #call, (errp)->msg); } } while (0)
#define MARK_SKIPPED(...) do { check_cur_skipped = 1; snprintf(check_why, sizeof check_why, __VA_ARGS__); } while (0)
#define SKIP(...) do { MARK_SKIPPED(__VA_ARGS__); return; } while (0)

static inline void check_run(const char *name, void (*fn)(void)) {
    if (check_filter && !strstr(name, check_filter)) return;
    check_cur_failed = 0; check_cur_skipped = 0; check_why[0] = 0;
    fn();
    if (check_cur_failed) report_fail(name, "%s", check_why);
    else if (check_cur_skipped) report_skip(name, "%s", check_why);
    else report_ok(name, NULL);
}
#define RUN(fn) check_run(#fn, fn)
/* The larger of a running worst error and d, where a NaN in either wins: fmax drops a NaN, so a comparison that met
   one would pass. worst = worse(worst, fabs(got - want)), then CHECK(worst <= tol, ...). */
static inline double worse(double worst, double d) { return isnan(worst) || isnan(d) ? NAN : d > worst ? d : worst; }
#define CHECK_MAIN_INIT(argc, argv) do { if ((argc) > 1) check_filter = (argv)[1]; } while (0)
#define check_summary() report_summary()
#endif
