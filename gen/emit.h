/* emit: a template plus the plan's constants gives one kernel source. Same input, same bytes. */
#ifndef GPT2GEN_EMIT_H
#define GPT2GEN_EMIT_H
#include "gen/plan.h"

/* The text of a template: from <dir>/<its base name> where dir is a folder (GPT2GEN_TEMPLATES, common/env.h, for
   template development), else (dir NULL or "") the copy embedded in the binary. NULL + err when absent. Caller
   frees. */
char *template_load(const char *dir, const char *template_path, Err *err);
/* The full source of one module: header comment, constants, vector widths, tunables, derived constants,
   the entry points of its declared kernels, templates/common.cuh, the template; the templates read as
   template_load reads them from dir. Caller frees. */
char *emit_family(const Plan *plan, const PlanFamily *m, const char *dir, Err *err);
#endif
