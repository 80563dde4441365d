/* report: see report.h. */
#include "tune/report.h"
#include <stdio.h>

static int counts[3];   /* by ReportKind */

void report_vline(ReportKind kind, const char *name, const char *fmt, va_list ap) {
    static const char *const TAG[] = {"ok  ", "FAIL", "skip"};
    char why[8192] = "";
    if (fmt) vsnprintf(why, sizeof why, fmt, ap);
    counts[kind]++;
    if (kind == REPORT_OK) printf(why[0] ? "ok   %s (%s)\n" : "ok   %s\n", name, why);   /* ok: a detail */
    else printf("%s %s%s%s\n", TAG[kind], name, why[0] ? ": " : "", why);                 /* FAIL, skip: a reason */
    fflush(stdout);
}

#define REPORT_FN(fn, kind)                                   \
    void fn(const char *name, const char *fmt, ...) {         \
        va_list ap;                                           \
        va_start(ap, fmt);                                    \
        report_vline(kind, name, fmt, ap);                    \
        va_end(ap);                                           \
    }
REPORT_FN(report_ok, REPORT_OK)
REPORT_FN(report_fail, REPORT_FAIL)
REPORT_FN(report_skip, REPORT_SKIP)

int report_passed_count(void) { return counts[REPORT_OK]; }
int report_failed_count(void) { return counts[REPORT_FAIL]; }
int report_skipped_count(void) { return counts[REPORT_SKIP]; }

int report_summary(void) {
    printf("RESULT %d %d %d\n", counts[REPORT_OK], counts[REPORT_FAIL], counts[REPORT_SKIP]);
    fflush(stdout);
    return counts[REPORT_FAIL] ? 1 : 0;
}
