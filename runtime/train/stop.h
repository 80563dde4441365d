/* stop: what ends a run early without losing it (docs/training.md): Ctrl-C and SIGTERM ask the training loop
 * to save and stop at the next step (every rank at the same one: runtime/train/train.c), and a standard output
 * that can no longer be written is given up while training goes on. */
#ifndef GPT2GEN_STOP_H
#define GPT2GEN_STOP_H

#define STOP_OTHER_RANK (-1)             /* stop_requested(): another rank was asked to stop */

/* on = 1: no stop request, and SIGINT and SIGTERM set one from now on (with SA_RESTART, so reads and writes under way go
   on); on = 0: what was there before is put back. */
void stop_signals(int on);
/* The signal that asked to stop first (SIGINT or SIGTERM), STOP_OTHER_RANK, or 0. */
int  stop_requested(void);
/* Records that another rank asked, unless this process was asked itself. */
void stop_by_other_rank(void);
/* "by SIGTERM", "by Ctrl-C" or "(another rank was asked to stop)", for the line that says the run stopped. */
const char *stop_reason(void);

/* Flushes stdout; the first time it fails (a closed pipe: cli/train.c ignores SIGPIPE), says so once on stderr
   (progress goes on in log_path) and points stdout at /dev/null. *gone is set then, and later calls do nothing. */
void stop_check_stdout(int *gone, const char *log_path);
#endif
