/* emit: a template plus the plan's constants gives one kernel source. Same input, same bytes. */
#ifndef GPT2GEN_EMIT_H
#define GPT2GEN_EMIT_H
#include "gen/plan.h"

/* Where template_load reads the templates: dir (GPT2GEN_TEMPLATES, common/env.h, for template development),
   or NULL: the copies embedded in the binary (the default). The command line sets it once, from its Env. */
void template_dir_use(const char *dir);
/* The text of a template: from <dir>/<file> when template_dir_use named a folder, else the copy embedded in
   the binary. NULL + err when absent. Caller frees. */
char *template_load(const char *template_path, Err *err);
/* The full source of one module: header comment, constants, vector widths, tunables, derived constants,
   the entry points of its declared kernels, templates/common.cuh, the template. Caller frees. */
char *emit_family(const Plan *plan, const PlanFamily *m, Err *err);
#endif
