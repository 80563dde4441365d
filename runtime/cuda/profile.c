/* profile: per-op time of the training or decode step (see profile.h). */
#include "runtime/cuda/profile.h"
#include "common/clock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void profile_init(Profile *p, CUstream stream, int on, int queue) {
    memset(p, 0, sizeof *p);
    p->on = on;
    p->queue_on = queue && !on;
    p->stream = stream;
}

double profile_start(Profile *p) {
    p->ops++;
    if (!p->on) return 0;
    cu.cuStreamSynchronize(p->stream);
    return now_seconds();
}

void profile_stop(Profile *p, const char *name, double t0) {
    if (!p->on) return;
    cu.cuStreamSynchronize(p->stream);
    double dt = now_seconds() - t0;
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->entries[i].name, name)) { p->entries[i].seconds += dt; p->entries[i].calls++; return; }
    if (p->n < PROFILE_MAX) {
        p->entries[p->n].name = name;
        p->entries[p->n].calls = 1;
        p->entries[p->n++].seconds = dt;
    }
}

void profile_queue_start(Profile *p) {
    if (!p->queue_on) return;
    cu.cuStreamSynchronize(p->stream);
    p->queue_t0 = now_seconds();
    p->queue_ops0 = p->ops;
}

void profile_queue_queued(Profile *p) {
    if (!p->queue_on) return;
    p->queued_s += now_seconds() - p->queue_t0;
    p->queue_ops += p->ops - p->queue_ops0;
}

void profile_queue_done(Profile *p) {
    if (!p->queue_on) return;
    p->done_s += now_seconds() - p->queue_t0;
    p->queue_steps++;
}

void profile_print(const Profile *p, const char *what) {
    if (p->queue_on && p->queue_steps) {
        double q = p->queued_s / p->queue_steps * 1e3, d = p->done_s / p->queue_steps * 1e3;
        fprintf(stderr, "GPT2GEN_QUEUE_PROFILE: mean per training micro-step over %d: %ld ops queued by %.2f ms, the GPU "
                        "done at %.2f ms: %s\n", p->queue_steps, p->queue_ops / p->queue_steps, q, d,
                q < 0.5 * d ? "the host stays ahead (a CUDA graph could save only the GPU's gaps between kernels)"
                            : "the host may hold the GPU back (a CUDA graph could help)");
    }
    if (!p->on || p->steps == 0) return;
    double total = 0;
    for (int i = 0; i < p->n; i++) total += p->entries[i].seconds;
    fprintf(stderr, "GPT2GEN_PROFILE: mean per %s step over %d steps (ops synchronized one by one)\n", what, p->steps);
    for (int i = 0; i < p->n; i++)
        fprintf(stderr, "  %-28s %8.3f ms  %5.1f%%  %4ld calls a step\n", p->entries[i].name,
                p->entries[i].seconds / p->steps * 1e3, 100 * p->entries[i].seconds / total, p->entries[i].calls / p->steps);
    fprintf(stderr, "  %-28s %8.2f ms\n", "total", total / p->steps * 1e3);
}
