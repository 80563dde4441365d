/* schedule_write: a plan's schedule run (schedule_run_phase, schedule_run_list: the block's ops on the layers their
   SchedWhen takes) and written for people (plan.txt's section); each op kind's name and which arguments it writes.
   The schedule itself is made in gen/schedule.c. */
#include "gen/schedule.h"
#include "gen/plan.h"

/* ---- running and writing ------------------------------------------------------------------------------- */
static int runs_on(int when, int l, int L) {
    switch (when) {
    case ON_FIRST: return l == 0;
    case ON_LATER: return l > 0;
    case ON_LAST: return l == L - 1;
    case ON_BELOW_LAST: return l < L - 1;
    default: return 1;
    }
}

int schedule_run_list(const SchedList *list, int l, int L, SchedRunFn run, void *ctx, Err *err) {
    for (int i = 0; i < list->n; i++)
        if ((l < 0 || runs_on(list->ops[i].when, l, L)) && run(ctx, &list->ops[i], l, err)) return -1;
    return 0;
}

int schedule_run_phase(const SchedPhase *ph, int L, SchedRunFn run, void *ctx, Err *err) {
    if (schedule_run_list(&ph->head, -1, L, run, ctx, err)) return -1;
    for (int i = 0; i < L; i++)
        if (schedule_run_list(&ph->block, ph->reverse ? L - 1 - i : i, L, run, ctx, err)) return -1;
    return schedule_run_list(&ph->tail, -1, L, run, ctx, err);
}

/* each kind's name and the arguments it writes (bit i: argument i) */
static const struct { const char *name; unsigned writes; } kinds[OP_KINDS] = {
    [OP_ENCODER] = {"encoder", 1}, [OP_DECODE_EMBED] = {"decode embed", 1}, [OP_LAYERNORM] = {"layernorm", 7},
    [OP_RESIDUAL_LAYERNORM] = {"residual+layernorm", 15}, [OP_MATMUL] = {"matmul", 1 | 16},
    [OP_FC_GELU] = {"fc+gelu", 3}, [OP_KERNEL] = {"kernel", 1}, [OP_KV_APPEND] = {"kv append", 3},
    [OP_ATTENTION] = {"attention", 3}, [OP_DECODE_ATTENTION] = {"decode attention", 7 | 32},
    [OP_LN_MATMUL] = {"norm+matmul", 1}, [OP_MATMUL_RESIDUAL] = {"matmul+residual", 1},
    [OP_ZERO] = {"zero", 1}, [OP_LAYERNORM_BACKWARD] = {"layernorm backward", 7 | 256},
    [OP_MATMUL_DINP] = {"matmul dinp", 1}, [OP_MATMUL_DW] = {"matmul dW", 1}, [OP_BIAS_BACKWARD] = {"bias backward", 1},
    [OP_GELU_BACKWARD_BIAS] = {"gelu backward+bias", 5}, [OP_FCPROJ_DGELU] = {"fcproj dinp+dgelu", 1},
    [OP_FC_BIAS_REDUCE] = {"fc bias reduce", 1}, [OP_ATTENTION_BACKWARD] = {"attention backward", 1 | 32},
    [OP_ENCODER_BACKWARD] = {"encoder backward", 3}, [OP_GRAD_READY] = {"grad ready", 0}, [OP_FORK] = {"fork", 0},
    [OP_MARK] = {"mark", 0}, [OP_WAIT] = {"wait", 0}, [OP_RMSNORM] = {"rmsnorm", 3},
    [OP_RESIDUAL_RMSNORM] = {"residual+rmsnorm", 7}, [OP_RMSNORM_BACKWARD] = {"rmsnorm backward", 3},
    [OP_QK_NORM] = {"qk norm", 3}, [OP_QK_NORM_BACKWARD] = {"qk norm backward", 1 | 32 | 64}, [OP_ROPE] = {"rope", 1},
    [OP_ROPE_BACKWARD] = {"rope backward", 1}, [OP_RELU2] = {"relu2", 1}, [OP_RELU2_BACKWARD] = {"relu2 backward", 1},
    [OP_SWIGLU] = {"swiglu", 1}, [OP_SWIGLU_BACKWARD] = {"swiglu backward", 3}, [OP_MATMUL_DINP_ACC] = {"matmul dinp+=", 1},
    [OP_SOFTCAP] = {"softcap", 1},
};

const char *schedule_kind_name(int kind) { return kind >= 0 && kind < OP_KINDS ? kinds[kind].name : "?"; }

/* OP_KERNEL: the arguments its declaration writes (the pointers not declared const) */
static unsigned kernel_writes(const KernelDecl *k) {
    unsigned w = 0;
    for (int i = 0, j = 0; i < KERNEL_MAX_PARAMS && k->params[i].name; i++) {
        KernelParamType t = k->params[i].type;
        if (t == KP_INT || t == KP_I64 || t == KP_FLOAT || t == KP_TMAP) continue;
        if (t == KP_X || t == KP_F32 || t == KP_I32 || t == KP_U64) w |= 1u << j;
        j++;
    }
    return w;
}

static void write_ref(FILE *f, const SchedRef *r, const Plan *p) {
    static const char *const at[] = {"", "[l]", "[l+1]", "[l-1]", "[L-1]"};
    const char *name = r->space == REF_BUF ? p->memory.buffers[r->id].name : gpt2_param_names[r->id];
    fprintf(f, " %s%s%s", r->space == REF_GRAD ? "d" : "", name ? name : "?", at[r->layer]);
}

static void write_list(FILE *f, const char *what, const SchedList *list, const Plan *p) {
    static const char *const when[] = {"", " (l=0)", " (l>0)", " (l=L-1)", " (l<L-1)"};
    static const char *const marks[] = {"dresidual", "dfch", "dqkv", "done", "-"};
    for (int i = 0; i < list->n; i++) {
        const SchedOp *op = &list->ops[i];
        fprintf(f, "%-16s %-24s %-19s", i ? "" : what, op->name, kinds[op->kind].name);
        if (op->mm >= 0) fprintf(f, " matmul %s:", p->matmuls[op->mm].name);
        if (op->kernel) fprintf(f, " %s:", op->kernel->name);
        if (op->kind == OP_MARK || op->kind == OP_WAIT || (op->kind == OP_GRAD_READY && op->mark != SCHED_NO_MARK))
            fprintf(f, " mark %s", marks[op->mark]);
        unsigned writes = op->kernel ? kernel_writes(op->kernel) : kinds[op->kind].writes;
        for (int w = 1; w >= 0; w--) {   /* what it writes, then what it reads */
            int any = 0;
            for (int a = 0; a < SCHED_MAX_ARGS; a++)
                if (op->arg[a].space != REF_NONE && !!(writes >> a & 1) == w) {
                    if (!any++) fprintf(f, w ? " writes" : " reads");
                    write_ref(f, &op->arg[a], p);
                }
        }
        if (op->n) fprintf(f, " n=%lld", op->n);
        fprintf(f, "%s\n", when[op->when]);
    }
}

void schedule_write(FILE *f, const Plan *p) {
    const OpSchedule *s = &p->schedule;
    fprintf(f, "\n# the step's ops in order (gen/schedule.c); the block runs per layer l, those marked (l...) on those layers\n");
    write_list(f, "forward", &s->forward.head, p);
    write_list(f, "  layer l=0..", &s->forward.block, p);
    write_list(f, "  then", &s->forward.tail, p);
    if (p->step.kind != STEP_TRAIN) return;
    fprintf(f, "# the classifier's chunks (logits, losses, their gradient into dlnf and dwte), then\n");
    write_list(f, "backward", &s->backward.head, p);
    write_list(f, "  layer l=L-1..", &s->backward.block, p);
    write_list(f, "  then", &s->backward.tail, p);
    write_list(f, "embeddings", &s->embed_backward, p);
}
