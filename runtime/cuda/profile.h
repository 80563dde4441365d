/* profile: GPT2GEN_PROFILE=1 synchronizes the stream around each op and adds up its time, for a breakdown
   of the step printed when the backend is destroyed (for breakdowns, not for speed). Off: no cost. */
#ifndef GPT2GEN_PROFILE_H
#define GPT2GEN_PROFILE_H
#include "runtime/cuda/cuda_api.h"

#define PROFILE_MAX 32
typedef struct {
    int on;
    CUstream stream;
    int n, steps;
    struct { const char *name; double seconds; } entries[PROFILE_MAX];
} Profile;

void   profile_init(Profile *p, CUstream stream, int on);     /* on: GPT2GEN_PROFILE=1 */
double profile_start(Profile *p);
void   profile_stop(Profile *p, const char *name, double t0);
void   profile_print(const Profile *p);
/* Runs call (an int expression, nonzero on error) as the op `name` of profile p; returns -1 on error. */
#define PROFILED(p, name, call) do { double t_ = profile_start(p); if (call) return -1; profile_stop(p, name, t_); } while (0)
#endif
