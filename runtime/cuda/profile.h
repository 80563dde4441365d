/* profile: GPT2GEN_PROFILE=1 records a CUDA event before and after each op on the stream and adds up the GPU
   time between them, for a breakdown of the step (a training step, or a decode step of `gpt2gen sample`) printed
   when the backend is destroyed. The host never waits between ops (only every PROFILE_PAIRS ops, to read the
   events), so an op's time is what it takes on the GPU in the stream's flow, plus any wait for the host to launch
   it where the GPU is ahead; the step runs without a CUDA graph and on one stream, so for breakdowns, not for
   speed. Off: no cost.
   GPT2GEN_QUEUE_PROFILE=1 (without GPT2GEN_PROFILE) times each training micro-step from an idle GPU: when the host
   had queued its last op, and when the GPU was done. Where the host is done long before the GPU, the GPU never
   waits for a launch, and recording the micro-step as a CUDA graph could save only the GPU's own gaps between
   kernels; where the two times meet, the host holds the GPU back. */
#ifndef GPT2GEN_PROFILE_H
#define GPT2GEN_PROFILE_H
#include "runtime/cuda/cuda_api.h"

#define PROFILE_MAX 32
#define PROFILE_PAIRS 128     /* ops timed before the host reads their events */
typedef struct {
    int on;
    CUstream stream;
    int n, steps;
    struct { const char *name; double seconds; long calls; } entries[PROFILE_MAX];
    CUevent ev[2 * PROFILE_PAIRS];     /* the pending ops' start and end events (made on first use) */
    const char *pending[PROFILE_PAIRS];
    int n_pending, events_made, broken;
    long ops;                     /* ops queued so far (every PROFILED call) */
    int queue_on, queue_steps;    /* GPT2GEN_QUEUE_PROFILE: micro-steps timed */
    long queue_ops;               /* their ops */
    double queued_s, done_s;      /* their sums: from the start to the last op queued, to the GPU done */
    double queue_t0;              /* the micro-step being timed: its start */
    long queue_ops0;
} Profile;

/* on: GPT2GEN_PROFILE=1; queue: GPT2GEN_QUEUE_PROFILE=1 (ignored with on: its events would be timed) */
void   profile_init(Profile *p, CUstream stream, int on, int queue);
void   profile_start(Profile *p);
void   profile_stop(Profile *p, const char *name);
/* what: the step profiled ("training", "decode"); reads the pending events first */
void   profile_print(Profile *p, const char *what);
/* its events destroyed (in the backend's context) */
void   profile_free(Profile *p);
/* GPT2GEN_QUEUE_PROFILE's three marks of a micro-step: its start (waits for the GPU to be idle), its last op queued,
   the GPU done (after the host waited for it); no cost when off */
void   profile_queue_start(Profile *p);
void   profile_queue_queued(Profile *p);
void   profile_queue_done(Profile *p);
/* Runs call (an int expression, nonzero on error) as the op `name` of profile p; returns -1 on error. */
#define PROFILED(p, name, call) do { profile_start(p); if (call) return -1; profile_stop(p, name); } while (0)
#endif
