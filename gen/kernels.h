/* kernels: the table of kernel families. Each family is one template (templates/<family>.cu) compiled to one
   module; its `kernels` function lists the module's kernels with their launch geometry for a config, using
   the module's tunables (plan_tunable) and the shape constants. Adding a family = a template + a row here. */
#ifndef GPT2GEN_KERNELS_H
#define GPT2GEN_KERNELS_H
#include "gen/plan.h"

typedef struct {
    const char *family;
    const char *template_path;
    void (*kernels)(const Config *cfg, PlanModule *m);
    /* 0 where the family is not needed for this config (e.g. no attention template when cuDNN does it) */
    int  (*wanted)(const Config *cfg);
} KernelFamily;

extern const KernelFamily kernel_families[];   /* ends with { 0 } */
#endif
