/* report: see report.h. */
#include "tests/report.h"
#include <stdio.h>

static int passed, failed, skipped;

void report_vline(ReportKind kind, const char *name, const char *fmt, va_list ap) {
    char why[8192] = "";
    if (fmt) vsnprintf(why, sizeof why, fmt, ap);
    switch (kind) {
    case REPORT_OK:
        passed++;
        if (why[0]) printf("ok   %s (%s)\n", name, why);
        else printf("ok   %s\n", name);
        break;
    case REPORT_FAIL:
        failed++;
        printf("FAIL %s%s%s\n", name, why[0] ? ": " : "", why);
        break;
    case REPORT_SKIP:
        skipped++;
        printf("skip %s%s%s\n", name, why[0] ? ": " : "", why);
        break;
    }
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

int report_passed_count(void) { return passed; }
int report_failed_count(void) { return failed; }
int report_skipped_count(void) { return skipped; }

int report_summary(void) {
    printf("RESULT %d %d %d\n", passed, failed, skipped);
    fflush(stdout);
    return failed ? 1 : 0;
}
