/* train: the training loop (runtime/train/train.h): the step over the ranks this process drives, validation,
   samples and progress; opening and closing a run is train_open.c's, checkpoints and the start from one
   train_checkpoint.c's. */
#include "runtime/train/train.h"
#include "runtime/train/train_run.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/rng.h"
#include "runtime/train/plot.h"
#include "runtime/train/schedule.h"
#include "runtime/train/stop.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- the run's pieces */


/* The ranks' loss sums added (all_reduce_sum_f64), divided by count: the global mean. */
static int global_loss(Run *r, long count, float *out, Err *err) {
    double *vals[r->local];
    for (int k = 0; k < r->local; k++) vals[k] = &r->rk[k].loss_sum;
    if (r->comm->all_reduce_sum_f64(r->comm, vals, err)) return -1;
    *out = (float)(r->rk[0].loss_sum / (double)(count > 0 ? count : 1));
    return 0;
}

/* The mean loss over eval.val_batches global batches, each rank on its own rows. */
static int validate_loss(Run *r, float *out, Err *err) {
    long avail = dataloader_batches_per_epoch(&r->rk[0].val);
    int n = r->run->eval.val_batches < avail ? r->run->eval.val_batches : (int)avail;
    for (int k = 0; k < r->local; k++) {
        RankRun *q = &r->rk[k];
        q->loss_sum = 0;
        if (dataloader_reset(&q->val, err)) return -1;
        for (int i = 0; i < n; i++) {
            float loss;
            if (dataloader_next(&q->val, r->eval_inputs, r->eval_targets, err)) return -1;
            BackendRun fw = {.phase = BACKEND_FORWARD, .inputs = r->eval_inputs, .targets = r->eval_targets, .loss = &loss};
            if (q->be->run(q->be, &fw, err)) return -1;
            q->loss_sum += loss;
        }
    }
    return global_loss(r, (long)n * r->world, out, err);
}

/* Appends the bytes of token id to text (its id in <> without a tokenizer) and prints them. */
static size_t put_token(Run *r, int id, Utf8Stream *us, char *text) {
    size_t len;
    const uint8_t *bytes = r->has_tok ? tokenizer_decode(&r->tok, id, &len) : NULL;
    if (!bytes) { printf("<%d>", id); return (size_t)sprintf(text, "<%d>", id); }
    utf8_stream_put(us, bytes, len, stdout);
    memcpy(text, bytes, len);
    return len;
}

typedef struct { Run *r; Utf8Stream us; char *text; size_t used; int eot; } SampleOut;

static int sample_put(void *ctx, int step, const int32_t *tok) {
    SampleOut *o = ctx;
    (void)step;
    if (tok[0] == o->eot) return 1;
    o->used += put_token(o->r, tok[0], &o->us, o->text + o->used);
    fflush(stdout);
    return 0;
}

/* Generates up to eval.sample_tokens tokens after end-of-text (until the next one), through the sampler's key/value
   cache on the training weights, prints them as they come, and logs the text. */
static int sample_text(Run *r, int step, Err *err) {
    const RunSpec *c = r->run;
    int V = r->plan->model.vocab_size, eot = r->has_tok ? r->tok.eot : V - 1;   /* GPT-2's is last */
    int n = c->eval.sample_tokens < r->plan->model.max_seq_len - 1 ? c->eval.sample_tokens : r->plan->model.max_seq_len - 1;
    if (n < 1) return 0;   /* eval.sample_tokens = 0: nothing to sample */
    int32_t prompt = eot, *drawn = xmalloc((size_t)n * sizeof *drawn);
    SampleOut o = {.r = r, .text = xmalloc((size_t)n * 256 + 1), .eot = eot};   /* a token is at most 255 bytes, or "<id>" */
    SampleSettings ss = {(float)c->eval.temperature, 0, 1.0f};
    SampleStats st;
    printf("--- sample at step %d: ", step);
    int rc = sampler_generate(r->sampler, &prompt, 1, n, &ss, &r->sample_rng, eot, drawn, sample_put, &o, &st, err) < 0;
    utf8_stream_flush(&o.us, stdout);
    printf("\n---\n");
    if (!rc) metrics_event(&r->metrics, "sample", "step", json_integer(step), "text", metrics_text(o.text, o.used), NULL);
    free(o.text); free(drawn);
    return rc ? -1 : 0;
}

/* eval.hellaswag's steps: every eval.hellaswag_every, else at the validations (eval.val_every), and the last */
static int eval_due(const RunSpec *c, int step, int last) {
    int every = c->eval.hellaswag_every > 0 ? c->eval.hellaswag_every : c->eval.val_every;
    return last || (every > 0 && step % every == 0);
}

/* The accuracy on eval.hellaswag (runtime/eval/evaluate.h), printed and logged */
static int eval_choices(Run *r, int step, Err *err) {
    EvalResult res;
    double t0 = now_seconds();
    if (evaluator_run(r->evaluator, &r->evalset, &res, NULL, NULL, err)) return -1;
    printf("step %5d | eval accuracy %.4f (%d of %d, %.1f s)\n", step, res.accuracy, res.correct, res.examples,
           now_seconds() - t0);
    metrics_event(&r->metrics, "eval", "step", json_integer(step), "examples", json_integer(res.examples), "correct",
                  json_integer(res.correct), "accuracy", metrics_real("%.6f", res.accuracy), NULL);
    evalresult_free(&res);
    return 0;
}

/* Gradients averaged over the ranks, and the global norm of the averaged gradients (unscaled by nothing:
   the caller divides by the loss scale). ZeRO-0 all-reduces, ZeRO-1 reduce-scatters (each rank then holds the
   mean of its shard only). Either way each rank adds up the squares of its own shard, and the sums are added
   across ranks, so both stages get the same bits, and one rank gets grad_norm's. */
static int average_grads(Run *r, float *norm, Err *err) {
    int W = r->world, n = r->local;
    void *bufs[n];
    double sumsq[n], *vals[n];
    if (W == 1) return backend_grad_norm(r->be, norm, err);
    for (int k = 0; k < n; k++) { bufs[k] = r->rk[k].be->device_array(r->rk[k].be, BACKEND_GRADS); vals[k] = &sumsq[k]; }
    CommType t = comm_type_of(r->be->comm_prec);
    int rc = r->overlapped ? r->comm->wait_ranges(r->comm, err)   /* started part by part by the backward */
           : r->run->train.zero_stage == 1 ? r->comm->reduce_scatter_avg(r->comm, bufs, t, r->num_params, err)
                                           : r->comm->all_reduce_avg(r->comm, bufs, t, r->num_params, err);
    for (int k = 0; k < n && !rc; k++) {
        size_t off, cnt;
        ranks_shard(r->num_params, W, r->first + k, &off, &cnt);
        rc = r->rk[k].be->run(r->rk[k].be, &(BackendRun){.phase = BACKEND_GRAD_SUMSQ, .offset = off, .count = cnt,
                                                          .sumsq = &sumsq[k]}, err);
    }
    if (!rc) rc = r->comm->all_reduce_sum_f64(r->comm, vals, err);
    if (rc) return -1;
    *norm = (float)sqrt(sumsq[0]);
    return 0;
}

/* AdamW on every rank: under ZeRO-0 each rank updates all parameters (the same bits on every rank), under
   ZeRO-1 its shard, and the shards are then all-gathered. */
static int update_all(Run *r, float lr, float grad_scale, int t, Err *err) {
    const RunSpec *c = r->run;
    for (int k = 0; k < r->local; k++) {
        Backend *be = r->rk[k].be;
        BackendRun up = {.phase = BACKEND_UPDATE, .grad_scale = grad_scale, .step = t,
                         .adamw = {lr, (float)c->train.beta1, (float)c->train.beta2, (float)c->train.eps,
                                   (float)c->train.weight_decay}};
        if (be->run(be, &up, err)) return -1;
    }
    if (r->world == 1 || c->train.zero_stage == 0) return 0;
    void *bufs[r->local];
    for (int k = 0; k < r->local; k++) bufs[k] = r->rk[k].be->device_array(r->rk[k].be, BACKEND_PARAMS);
    return r->comm->all_gather(r->comm, bufs, comm_type_of(r->be->comm_prec), r->num_params, err);
}

/* BackendRun.grad_ready during a step's last backward: a part of the gradients is final, its averaging starts. */
static int on_grad_ready(void *ctx, int part, Err *err) {
    Run *r = ctx;
    size_t ranges[NUM_PARAM_TENSORS][2];
    GPT2Shape shape = r->plan->model;
    int count = gpt2_grad_part(&shape, part, ranges);
    void *bufs[1] = {r->be->device_array(r->be, BACKEND_GRADS)};
    return r->comm->reduce_ranges_avg(r->comm, bufs, comm_type_of(r->be->comm_prec), r->num_params,
                                      (const size_t (*)[2])ranges, count, r->run->train.zero_stage == 1, err);
}

/* One optimizer step: grad_accum micro-batches on every rank with the loss gradient scaled by the loss scale S,
   the gradients averaged over the ranks, the norm of the unscaled gradients, then clip and AdamW, or, on an
   overflow, a skipped update (runtime/train/loss_scale.h). *skipped says which; *norm_out is the unscaled norm (not
   finite when skipped); *loss_out the mean over every rank's micro-batches. */
static int train_step(Run *r, int step, float *loss_out, float *norm_out, float *lr_out, int *skipped, Err *err) {
    const RunSpec *c = r->run;
    int accum = c->train.grad_accum;
    const float S = r->scaler.scale;
    for (int k = 0; k < r->local; k++) {
        RankRun *q = &r->rk[k];
        Backend *be = q->be;
        q->loss_sum = 0;
        if (be->run(be, &(BackendRun){.phase = BACKEND_ZERO_GRADS}, err)) return -1;
        for (int micro = 0; micro < accum; micro++) {
            float loss;
            int reuse = c->train.overfit_batch && (step > 0 || micro > 0);
            if (!reuse && dataloader_next(&q->train, q->inputs, q->targets, err)) return -1;
            float inject = r->first + k == 0 && micro == 0 && loss_scale_hook_hits(r->overflow_hook, step + 1) ? INFINITY : 1.0f;
            /* the last micro-batch's backward finishes the gradients: with a process per rank, their averaging
               starts part by part while it goes on */
            r->overlapped = r->overlap && micro == accum - 1;
            BackendRun fb = {.phase = BACKEND_FORWARD_BACKWARD, .inputs = q->inputs, .targets = q->targets,
                             .grad_scale = S / accum * inject, .loss = &loss,
                             .grad_ready = r->overlapped ? on_grad_ready : NULL, .grad_ready_ctx = r};
            if (be->run(be, &fb, err)) return -1;
            q->loss_sum += loss;
        }
    }
    float scaled_norm;
    if (average_grads(r, &scaled_norm, err) || global_loss(r, (long)accum * r->world, loss_out, err)) return -1;
    float norm = scaled_norm / S;
    float lr = (float)lr_at(c->train.schedule, c->train.lr, c->train.warmup, c->train.steps, c->train.final_lr_frac, step);
    *norm_out = norm;
    *lr_out = lr;
    LossScaleVerdict v = loss_scale_after(&r->scaler, scaled_norm);
    if (v == LOSS_SCALE_FATAL)
        return err_set(err, "step %d: the gradient norm is %f%s; stopping (lower train.lr?)", step + 1, norm,
                       r->scaler.enabled ? " at loss scale 1" : "");
    *skipped = v == LOSS_SCALE_SKIP;
    if (*skipped) return 0;
    float clip = (float)c->train.grad_clip;
    float clip_factor = clip > 0 && norm > clip ? clip / norm : 1.0f;
    return update_all(r, lr, clip_factor / S, step + 1 - r->scaler.skipped, err);
}

/* How far a run got: the steps trained and timed, the last step saved */
typedef struct {
    double timed;                        /* seconds of the timed steps (all but the first, which pays for warm-up) */
    int timed_steps, trained, last_saved, resumed_at;
} Progress;

/* The line and the metrics record that say what the run trains, from step on */
static void announce(Run *r, int step) {
    const RunSpec *c = r->run;
    char ranks[96] = "";
    if (r->world > 1 && r->local > 1) snprintf(ranks, sizeof ranks, " x %d ranks emulated in one process (ZeRO-%d)", r->world, c->train.zero_stage);
    else if (r->world > 1) snprintf(ranks, sizeof ranks, " x %d %s, a process each (%s, ZeRO-%d)", r->world,
                                    strcmp(r->be->name, "cpu") ? "GPUs" : "ranks", r->comm->name, c->train.zero_stage);
    printf("training %s on %s%s: %.2fM parameters, %d steps of %ld tokens (B=%d T=%d accum=%d), %s\n", r->plan->config_name,
           r->be->name, ranks, r->num_params / 1e6, c->train.steps, c->train.total_batch_size, c->train.batch_size,
           c->train.seq_len, c->train.grad_accum, precision_name(r->plan->step.precision));
    metrics_event(&r->metrics, "start", "config", metrics_text(r->plan->config_name, strlen(r->plan->config_name)), "backend",
                  metrics_text(r->be->name, strlen(r->be->name)), "step", json_integer(step), "steps",
                  json_integer(c->train.steps), "params", json_integer((json_int_t)r->num_params), NULL);
}

/* What is due at step before it trains: validation, a sample, eval.hellaswag, the plot and the checkpoint (when
   stop is set, or at the last step, whatever checkpoint.every says). */
static int at_step(Run *r, int step, int last, int stop, Progress *p, Err *err) {
    const RunSpec *c = r->run;
    int rc;
    if (r->has_val && (step % c->eval.val_every == 0 || last)) {
        float vl;
        if ((rc = validate_loss(r, &vl, err))) return rc;
        printf("step %5d | val loss %.4f\n", step, vl);
        metrics_event(&r->metrics, "val", "step", json_integer(step), "val_loss", metrics_real("%.6f", vl), NULL);
    }
    if (r->lead && c->eval.sample_every > 0 && step > 0 && (step % c->eval.sample_every == 0 || last))
        if ((rc = sample_text(r, step, err))) return rc;
    if (r->evaluator && eval_due(c, step, last) && (rc = eval_choices(r, step, err))) return rc;
    /* plot.svg (rank 0, a log in a file) after each validation and evaluation (the last step's: at the end) */
    if (r->metrics.regular && !last && ((r->has_val && step % c->eval.val_every == 0) || (r->evaluator && eval_due(c, step, 0))))
        plot_refresh(c->checkpoint.dir, &r->plot_warned);
    if (step > 0 && (last || (c->checkpoint.every > 0 && step % c->checkpoint.every == 0) || stop)) {
        if ((rc = run_save_checkpoint(r, step, err))) return rc;
        p->last_saved = step;
    }
    return 0;
}

/* A trained step's line (unless quiet) and its record in metrics.jsonl; mean_dt, the mean time of a step so far,
   gives the ETA. */
static void log_step(Run *r, int step, float loss, float norm, float lr, int skipped, double dt, double mean_dt) {
    const RunSpec *c = r->run;
    double tok_s = c->train.total_batch_size / dt;
    char eta[32];
    format_duration(mean_dt * (c->train.steps - step - 1), eta, sizeof eta);
    /* fp16: the loss scale the next step uses; a skipped step says so, with the halved scale */
    char scale_txt[96] = "";
    if (skipped) snprintf(scale_txt, sizeof scale_txt, " | skipped (gradient overflow), loss scale now %.0f", r->scaler.scale);
    else if (r->scaler.enabled) snprintf(scale_txt, sizeof scale_txt, " | scale %.0f", r->scaler.scale);
    if (!r->quiet)
        printf("step %5d/%d | loss %.4f | lr %.2e | norm %.3f | %.1f ms | %.0f tok/s | ETA %s%s\n", step + 1,
               c->train.steps, loss, lr, norm, dt * 1e3, tok_s, eta, scale_txt);
    json_t *rec = metrics_record("step", "step", json_integer(step + 1), "loss", metrics_real("%.6f", loss), "lr",
                                 metrics_real("%.6e", lr), "norm", metrics_real("%.6f", norm), "ms",
                                 metrics_real("%.3f", dt * 1e3), "tok_s", metrics_real("%.1f", tok_s), NULL);
    if (r->scaler.enabled) {   /* a power of two: an integer */
        json_object_set_new(rec, "loss_scale", json_integer((json_int_t)r->scaler.scale));
        json_object_set_new(rec, "skipped", json_boolean(skipped));
    }
    metrics_write(&r->metrics, rec);
    stop_check_stdout(&r->stdout_gone, r->lead ? r->metrics.path : "rank 0's metrics.jsonl");
}

/* The steps from step on, to train.steps or a stop: 0, 130 when stopped, else the failure (err set) */
static int train_steps(Run *r, int step, Progress *p, Err *err) {
    const RunSpec *c = r->run;
    int rc = 0;
    for (; step <= c->train.steps; step++) {
        int last = step == c->train.steps;
        /* whether to save and stop at this step, taken once: a signal that comes later counts at the next step.
           One process per rank: Ctrl-C or SIGTERM reaches them at different moments (or only some of them); they
           agree, and stop at the same step. */
        int stop = stop_requested() != 0;
        if (r->local < r->world) {
            if ((rc = run_agree(r, stop, &stop, err))) break;
            if (stop) stop_by_other_rank();
        }
        /* a resumed run already validated, sampled and saved at its first step before it stopped */
        if (step != p->resumed_at && (rc = at_step(r, step, last, stop, p, err))) break;
        if (last) break;
        if (stop) {
            if (p->last_saved == step || step == p->resumed_at)   /* a resumed run's first step is saved already */
                printf("stopped at step %d %s: checkpoint saved; continue with --resume\n", step, stop_reason());
            else printf("stopped at step %d %s: no step trained yet, nothing to save\n", step, stop_reason());
            rc = 130;
            break;
        }
        double t0 = now_seconds();
        float loss = 0, norm = 0, lr = 0;
        int skipped = 0;
        if ((rc = train_step(r, step, &loss, &norm, &lr, &skipped, err))) break;
        p->trained++;
        double dt = now_seconds() - t0;
        if (step > 0 || c->train.steps == 1) { p->timed += dt; p->timed_steps++; }   /* the first step pays for warm-up */
        log_step(r, step, loss, norm, lr, skipped, dt, p->timed_steps ? p->timed / p->timed_steps : dt);
    }
    return rc;
}

int train_run(const RunSpec *c, const PlanSet *plans, const TrainOptions *opt) {
    Run r;
    Err err;
    int rc = 0, step = 0;
    /* one process per GPU: rank 0's prints; the others' errors name their rank */
    char who[32] = "";
    if (opt->procs > 1) snprintf(who, sizeof who, "rank %d: ", opt->rank);
    if (opt->procs > 1 && opt->rank != 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "gpt2gen: %scannot silence stdout\n", who);
        return EXIT_FAIL;
    }
    if (run_open(&r, c, plans, opt, &err) || (step = run_initial_state(&r, &err)) < 0) {
        fprintf(stderr, "gpt2gen: %s%s\n", who, err.msg);
        if (r.comm && r.comm->broken) _exit(EXIT_FAIL);
        rundir_discard(&r.dir);   /* a folder this run created holds nothing to keep: it goes again */
        run_close(&r);
        return EXIT_FAIL;
    }
    if (c->checkpoint.resume && step >= c->train.steps) {   /* resumed at its last step: nothing to train */
        printf("%s: the run is finished (step %d of %d): nothing to do (raise train.steps to train on)\n",
               c->checkpoint.dir, step, c->train.steps);
        run_close(&r);
        return 0;
    }
    GPT2Shape shape = plans->train->model;
    announce(&r, step);
    stop_signals(1);
    Progress p = {.last_saved = -1, .resumed_at = step > 0 ? step : -1};
    rc = train_steps(&r, step, &p, &err);
    if (rc && rc != 130) fprintf(stderr, "gpt2gen: %s%s\n", who, err.msg);
    if (rc && r.comm && r.comm->broken) {
        /* the other ranks are gone or stuck: end without waiting on the GPU (the checkpoints on disk are whole) */
        fflush(stdout);
        _exit(EXIT_FAIL);
    }
    else if (p.timed_steps > 0) {
        double tok_s = c->train.total_batch_size * p.timed_steps / p.timed;
        printf("done: %d step%s, mean %.1f ms/step, %.0f tok/s, %.2f TFLOP/s%s\n", p.trained, p.trained == 1 ? "" : "s",
               p.timed / p.timed_steps * 1e3,
               tok_s, tok_s * gpt2_flops_per_token(&shape, c->train.seq_len) / 1e12, p.last_saved >= 0 ? "" : " (no checkpoint written)");
    }
    /* failed or stopped before a step was trained: a folder this run created holds nothing to keep, and goes */
    int discard = rc && p.trained == 0 && p.last_saved < 0 && r.dir.made[0];
    if (r.metrics.regular && !discard) plot_refresh(c->checkpoint.dir, &r.plot_warned);   /* whatever the run got to (rank 0's log: a file) */
    stop_signals(0);
    if (discard) rundir_discard(&r.dir);
    run_close(&r);
    return rc == 130 ? 130 : rc ? EXIT_FAIL : 0;
}
