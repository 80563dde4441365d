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

/* the pending ops' times, read from their events (the host waits for the last) */
static void profile_flush(Profile *p) {
    if (!p->n_pending) return;
    if (cu.cuEventSynchronize(p->ev[2 * p->n_pending - 1]) != CUDA_SUCCESS) p->broken = 1;
    for (int i = 0; i < p->n_pending && !p->broken; i++) {
        float ms = 0;
        if (cu.cuEventElapsedTime(&ms, p->ev[2 * i], p->ev[2 * i + 1]) != CUDA_SUCCESS) { p->broken = 1; break; }
        const char *name = p->pending[i];
        int e = 0;
        while (e < p->n && strcmp(p->entries[e].name, name)) e++;
        if (e == p->n) {
            if (p->n == PROFILE_MAX) continue;
            p->entries[p->n].name = name;
            p->entries[p->n].seconds = 0;
            p->entries[p->n++].calls = 0;
        }
        p->entries[e].seconds += ms / 1e3;
        p->entries[e].calls++;
    }
    p->n_pending = 0;
}

void profile_start(Profile *p) {
    p->ops++;
    if (!p->on || p->broken) return;
    if (!p->events_made) {
        for (int i = 0; i < 2 * PROFILE_PAIRS; i++)
            if (cu.cuEventCreate(&p->ev[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
                while (i-- > 0) cu.cuEventDestroy(p->ev[i]);   /* the ones made before it */
                p->broken = 1;
                return;
            }
        p->events_made = 1;
    }
    if (p->n_pending == PROFILE_PAIRS) profile_flush(p);
    if (cu.cuEventRecord(p->ev[2 * p->n_pending], p->stream) != CUDA_SUCCESS) p->broken = 1;
}

void profile_stop(Profile *p, const char *name) {
    if (!p->on || p->broken) return;
    if (cu.cuEventRecord(p->ev[2 * p->n_pending + 1], p->stream) != CUDA_SUCCESS) { p->broken = 1; return; }
    p->pending[p->n_pending++] = name;
}

void profile_free(Profile *p) {
    if (!p->events_made) return;
    for (int i = 0; i < 2 * PROFILE_PAIRS; i++) cu.cuEventDestroy(p->ev[i]);
    p->events_made = 0;
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

void profile_print(Profile *p, const char *what) {
    if (p->queue_on && p->queue_steps) {
        double q = p->queued_s / p->queue_steps * 1e3, d = p->done_s / p->queue_steps * 1e3;
        fprintf(stderr, "GPT2GEN_QUEUE_PROFILE: mean per training micro-step over %d: %ld ops queued by %.2f ms, the GPU "
                        "done at %.2f ms: %s\n", p->queue_steps, p->queue_ops / p->queue_steps, q, d,
                q < 0.5 * d ? "the host stays ahead (a CUDA graph could save only the GPU's gaps between kernels)"
                            : "the host may hold the GPU back (a CUDA graph could help)");
    }
    if (!p->on || p->steps == 0) return;
    profile_flush(p);
    if (p->broken) { fprintf(stderr, "GPT2GEN_PROFILE: no profile (a CUDA event failed)\n"); return; }
    double total = 0;
    for (int i = 0; i < p->n; i++) total += p->entries[i].seconds;
    fprintf(stderr, "GPT2GEN_PROFILE: mean per %s step over %d steps (GPU time between events around each op)\n", what, p->steps);
    for (int i = 0; i < p->n; i++)
        fprintf(stderr, "  %-28s %8.3f ms  %5.1f%%  %4ld calls a step\n", p->entries[i].name,
                p->entries[i].seconds / p->steps * 1e3, 100 * p->entries[i].seconds / total, p->entries[i].calls / p->steps);
    fprintf(stderr, "  %-28s %8.2f ms\n", "total", total / p->steps * 1e3);
}
