/* schedule: the learning rate at step s (docs/model.md, "LR schedules"): linear warmup, then cosine, linear,
   constant or wsd (warmup-stable-decay: constant until 0.8 N, then 1 - sqrt decay) down to final_lr_frac * lr. */
#ifndef GPT2GEN_SCHEDULE_H
#define GPT2GEN_SCHEDULE_H
#include "gen/spec.h"
double lr_at(Schedule kind, double max_lr, int warmup, int steps, double final_frac, int step);
#endif
