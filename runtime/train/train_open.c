/* train_open: the start and the end of a run (runtime/train/train.h): the checks of the ranks and the tokenizer, the
   run directory, the data, the backends of the ranks this process drives, the sampler and the evaluator on rank 0's
   weights, and the ranks joined; and all of it closed again. */
#include "runtime/train/train_run.h"
#include "runtime/ranks/launch.h"
#include "common/files.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


Backend *train_make_rank_backend(const Plan *plan, const char *which, RankInfo ri, const Env *env, Err *err) {
    BackendOptions o = {plan, ri.device, 0, 0, NULL, env, NULL};
    if (ri.world > 1 && plan->step.zero_stage == 1) {
        size_t sizes[NUM_PARAM_TENSORS], n = gpt2_param_sizes(&plan->model, sizes, NULL);
        ranks_shard(n, ri.world, ri.rank, &o.opt_offset, &o.opt_count);
        if (o.opt_count == 0) {
            err_set(err, "%s: train.num_gpus = %d: more ranks than parameters", plan->config_path, ri.world);
            return NULL;
        }
    }
    return backend_create(&o, which, err);
}

PlanRequest train_plan_request(const RunSpec *run) {
    return (PlanRequest){1, 1, run->eval.hellaswag[0] ? TRAIN_EVAL_ROWS : 0, 0, 0};   /* samples start from one token */
}

int train_check_ranks(const RunSpec *c, const char *path, const char *backend, int procs, Err *err) {
    int n = c->train.num_gpus;
    if (procs > 1) {
        if (n != procs)
            return err_set(err, "%s: train.num_gpus = %d, but %d processes were started: they must agree (--gpus N sets "
                           "both)", path, n, procs);
        return 0;
    }
    if (n > 1 && strcmp(backend, "cpu"))
        return err_set(err, "%s: train.num_gpus = %d: several GPUs train as one process per GPU: start it with `gpt2gen "
                       "train --gpus %d`, mpirun or srun, or emulate %d ranks in one process with --backend cpu",
                       path, n, n, n);
    if (n > TRAIN_MAX_EMULATED_RANKS)
        return err_set(err, "%s: train.num_gpus = %d: the CPU backend emulates at most %d ranks", path, n, TRAIN_MAX_EMULATED_RANKS);
    return 0;
}

int train_check_tokenizer(const RunSpec *c, const char *path, Err *err) {
    if (!strcmp(c->data.tokenizer, "none") || c->eval.sample_every <= 0) return 0;
    const char *why = c->data.tokenizer[0] ? file_missing_why(c->data.tokenizer) : "empty";
    if (!*why) return 0;   /* there: tokenizer_load checks it */
    return err_set(err, "%s: data.tokenizer: %s: %s; samples (eval.sample_every) print their text through it: name the "
                   "tokenizer file (`make data` and `gpt2gen prepare` write one beside the shards), or set data.tokenizer "
                   "= \"none\" to print token ids", path, c->data.tokenizer[0] ? err_show(c->data.tokenizer) : "\"\"", why);
}

/* The tokenizer, for samples: its ids must be the model's (a larger one could sample or start from an id the
   model does not have). data.tokenizer = "none": samples print as token ids. A missing file is an error where
   samples need it (train_check_tokenizer), and goes unsaid where nothing samples. */
static int open_tokenizer(Run *r, Err *err) {
    const RunSpec *c = r->run;
    if (train_check_tokenizer(c, r->plan->config_path, err)) return -1;
    if (!strcmp(c->data.tokenizer, "none") || *file_missing_why(c->data.tokenizer)) return 0;
    if (tokenizer_load(&r->tok, c->data.tokenizer, err)) return -1;
    r->has_tok = 1;
    if (r->tok.vocab_size > r->plan->model.vocab_size)
        return err_set(err, "%s: %d tokens, more than the model's vocab_size %d: not this model's tokenizer",
                       c->data.tokenizer, r->tok.vocab_size, r->plan->model.vocab_size);
    return 0;
}

/* The data: every rank's training loader and, where there is a validation set, its validation loader; without
   one the run trains without validation. */
static int open_data(Run *r, const RunSpec *c, int B, int T, Err *err) {
    r->has_val = c->eval.val_every > 0 && c->eval.val_batches > 0;
    if (!c->data.train[0])
        return err_set(err, "data.train is empty: name the training shards, e.g. data/NAME/train_*.bin "
                       "(`gpt2gen prepare FILE... -o data/NAME` makes them)");
    int no_val = r->has_val && dataloader_no_shards(c->data.val);   /* no validation set: train without one */
    if (no_val) r->has_val = 0;
    for (int k = 0; k < r->local; k++) {
        RankRun *q = &r->rk[k];
        int rank = r->first + k;
        /* a loader that failed to open holds nothing, and run_close closes loaders up to the first unopened one */
        if (dataloader_open(&q->train, c->data.train, B, T, rank, r->world, 1, (unsigned long)c->train.seed, r->plan->model.vocab_size, err)) return -1;
        if (r->has_val && dataloader_open(&q->val, c->data.val, B, T, rank, r->world, 0, 0, r->plan->model.vocab_size, err)) {
            dataloader_close(&q->train);
            return -1;
        }
        r->opened = k + 1;
    }
    if (no_val && r->lead) {
        if (c->data.val[0]) printf("note: no validation set (%s matches no shards): training without validation\n", err_show(c->data.val));
        else printf("note: no validation set (data.val is empty): training without validation\n");
    }
    return 0;
}

/* The backends of the ranks this process drives, each with its batch; rank 0's sampler and evaluator on its
   weights; the validation and sampling batch. */
static int open_backends(Run *r, const RunSpec *c, const PlanSet *plans, const TrainOptions *opt,
                         const Env *env, int procs, Err *err) {
    const Plan *plan = plans->train;
    int B = plan->step.B, T = plan->step.T;   /* the training plan's step */
    for (int k = 0; k < r->local; k++) {
        RankRun *q = &r->rk[k];
        RankInfo ri = {r->first + k, r->world, procs > 1 ? opt->device : 0};
        if (!(q->be = train_make_rank_backend(plan, opt->backend, ri, env, err))) return -1;
        if (r->world > 1 && (!q->be->device_array(q->be, BACKEND_GRADS) || !q->be->device_array(q->be, BACKEND_PARAMS)))
            return err_set(err, "the %s backend cannot run as one of several ranks yet", q->be->name);
        q->inputs = xmalloc((size_t)B * T * sizeof(int32_t));
        q->targets = xmalloc((size_t)B * T * sizeof(int32_t));
    }
    r->be = r->rk[0].be;
    /* rank 0 samples through its own decode plan's cache, on the training weights */
    if (r->lead && c->eval.sample_every > 0) {
        r->sampler = xcalloc(1, sizeof *r->sampler);
        if (sampler_open(r->sampler, plans, r->be, r->be->name, procs > 1 ? opt->device : 0, env, err))
            return -1;
    }
    /* and evaluates eval.hellaswag, through its own forward plan on the training weights */
    if (r->lead && c->eval.hellaswag[0]) {
        if (evalset_load(&r->evalset, c->eval.hellaswag, err)) return -1;
        r->evaluator = xcalloc(1, sizeof *r->evaluator);
        if (evaluator_open(r->evaluator, plans, &r->evalset, r->be, r->be->name, procs > 1 ? opt->device : 0, env, err))
            return -1;
    }
    r->eval_inputs = xmalloc((size_t)B * T * sizeof(int32_t));
    r->eval_targets = xmalloc((size_t)B * T * sizeof(int32_t));
    return 0;
}

int run_open(Run *r, const RunSpec *c, const PlanSet *plans, const TrainOptions *opt, Err *err) {
    memset(r, 0, sizeof *r);
    r->dir.lock_fd = -1;
    r->run = c;
    r->plans = plans;
    r->plan = plans->train;
    r->world = c->train.num_gpus;
    int procs = opt->procs > 1 ? opt->procs : 1;
    r->first = procs > 1 ? opt->rank : 0;
    r->local = procs > 1 ? 1 : r->world;
    r->lead = r->first == 0;
    if (train_check_ranks(c, r->plan->config_path, opt->backend, procs, err)) return -1;
    r->quiet = opt->quiet || !r->lead;
    r->sample_rng = (uint64_t)c->train.seed * 31 + 7;
    size_t sizes[NUM_PARAM_TENSORS];
    r->num_params = gpt2_param_sizes(&r->plan->model, sizes, NULL);
    /* rank 0 holds the folder's lock and checks it; the others write their state shards into it */
    int mode = c->checkpoint.resume ? RUNDIR_RESUME : opt->fresh ? RUNDIR_FRESH : RUNDIR_NEW;
    if (r->lead && rundir_open(&r->dir, c->checkpoint.dir, mode, err)) return -1;
    if (!r->lead) snprintf(r->dir.dir, sizeof r->dir.dir, "%s", c->checkpoint.dir);
    if (!r->lead && mkdir_p(c->checkpoint.dir, err)) return -1;   /* a node of its own: its own folder for its parts */
    r->rk = xcalloc((size_t)r->local, sizeof *r->rk);
    r->train = &r->rk[0].train;
    if (open_data(r, c, r->plan->step.B, r->plan->step.T, err)) return -1;
    if (open_tokenizer(r, err) || (r->lead && metrics_open(&r->metrics, c->checkpoint.dir, err))) return -1;
    loss_scale_init(&r->scaler, r->plan->step.precision == PREC_FP16, c->train.loss_scale, c->train.loss_scale_interval);
    const Env *env = env_or_defaults(opt->env);
    r->overflow_hook = env->test_overflow;
    if (loss_scale_hook_check(r->overflow_hook, err)) return -1;
    if (open_backends(r, c, plans, opt, env, procs, err)) return -1;
    /* the ranks joined: emulated in this process, or the backend's communicator across processes */
    if (procs == 1) return (r->comm = comm_emulated_create(r->world, err)) ? 0 : -1;
    if (!r->be->make_comm) return err_set(err, "the %s backend cannot run as one of several processes", r->be->name);
    r->comm = r->be->make_comm(r->be, opt->comm_id, r->world, r->first, env->nccl_timeout, err);
    if (r->comm && opt->id_file) launch_id_file_remove(opt->id_file);   /* every rank has read it */
    r->overlap = r->comm && r->comm->reduce_ranges_avg && env->comm_overlap;
    return r->comm ? 0 : -1;
}

void run_close(Run *r) {
    if (r->comm) r->comm->destroy(r->comm);   /* NCCL's runs on the backend's GPU: first */
    if (r->sampler) sampler_close(r->sampler);   /* it runs on rank 0's weights: before that backend */
    free(r->sampler);
    if (r->evaluator) {   /* so does this */
        evaluator_close(r->evaluator);
        evalset_free(&r->evalset);
    }
    free(r->evaluator);
    for (int k = 0; r->rk && k < r->local; k++) {
        RankRun *q = &r->rk[k];
        if (q->be) q->be->destroy(q->be);
        if (k < r->opened) dataloader_close(&q->train);
        if (k < r->opened && r->has_val) dataloader_close(&q->val);
        free(q->inputs);
        free(q->targets);
    }
    free(r->rk);
    if (r->has_tok) tokenizer_free(&r->tok);
    metrics_close(&r->metrics);
    free(r->eval_inputs);
    free(r->eval_targets);
    rundir_close(&r->dir);
}
