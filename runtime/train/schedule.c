#include "runtime/train/schedule.h"
#include <math.h>

double lr_at(Schedule kind, double M, int W, int N, double f, int s) {
    double min_lr = M * f;
    if (s < W) return M * (s + 1) / W;
    if (kind == SCHED_CONSTANT) return M;
    if (kind == SCHED_WSD) {
        double start = 0.8 * N;
        if (s < start) return M;
        double d = (s - start) / (N - start);
        return min_lr + (1.0 - sqrt(d)) * (M - min_lr);
    }
    double d = N > W ? (double)(s - W) / (N - W) : 1.0;
    if (kind == SCHED_LINEAR) return M - d * (M - min_lr);
    return min_lr + 0.5 * (1.0 + cos(M_PI * d)) * (M - min_lr);
}
