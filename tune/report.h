/* report: the one test reporter. Every C test program (through tests/check.h) and the GPU kernel tests print
 * their results through it, one line per test:
 *
 *   ok   NAME              or  ok   NAME (DETAIL)     report_ok(name, NULL) / report_ok(name, "max err %g", e)
 *   FAIL NAME: WHY                                    report_fail(name, "...", ...)
 *   skip NAME: WHY                                    report_skip(name, "...", ...)
 *
 * and report_summary() ends the program's output with "RESULT <passed> <failed> <skipped>", the line that
 * tests/lib.sh (report_tally) adds up for tests/run.sh and tests/gpu.sh. The shell tests print the same lines
 * through tests/lib.sh. Lines go to stdout, flushed at once. */
#ifndef GPT2GEN_REPORT_H
#define GPT2GEN_REPORT_H
#include <stdarg.h>

typedef enum { REPORT_OK, REPORT_FAIL, REPORT_SKIP } ReportKind;

/* fmt may be NULL (or format to ""): then an ok line has no "(DETAIL)" and a FAIL/skip line no reason. */
void report_ok(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_fail(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void report_skip(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same, for a caller with its own variadic wrapper. */
void report_vline(ReportKind kind, const char *name, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* The counts so far, over every line reported in this process. */
int  report_passed_count(void);
int  report_failed_count(void);
int  report_skipped_count(void);

/* Prints "RESULT <passed> <failed> <skipped>"; returns the exit code: 1 when anything failed, else 0. */
int  report_summary(void);
#endif
