/* decode: a decode plan's step on the GPU (ops.h), one token per row against the key/value cache: the embedding at
   the position BUF_DECODE_POS holds, the layers (the cache append and the split attention of templates/decode.cu),
   the logits, the draw of each row's next token (runtime/sample/sampling.h) into the inputs of the next step and
   into host memory, and the position moved on. Nothing in a step needs the host, so the step is recorded once as
   a CUDA graph (for the sampling settings it was recorded with) and replayed for every token, DECODE_IN_FLIGHT
   steps ahead of the one whose tokens the host reads. */
#include "runtime/cuda/ops.h"
#include <string.h>

int decode_open(Cuda *c, Err *err) {
    const StepShape *st = &c->plan->step;
    size_t bytes = (size_t)st->cache_T * st->B * sizeof(int32_t);   /* a token per cached position and row */
    void *host = NULL;
    if (cuda_check(cu.cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP), "allocating the drawn tokens' host memory", err) ||
        cuda_check(cu.cuMemHostGetDevicePointer(&c->d_drawn, host, 0), "mapping the drawn tokens' host memory", err)) {
        if (host) cu.cuMemFreeHost(host);
        return -1;
    }
    c->h_drawn = host;
    if (c->plan->decode_persistent &&   /* the grid barrier's count starts at 0 */
        cuda_check(cu.cuMemsetD8(buf(c, BUF_GRID_SYNC, 0), 0, 8), "clearing the decode step's barrier", err))
        return -1;
    size_t partial = c->plan->memory.buffers[BUF_ATT_PARTIAL].bytes;   /* and so do the attention's counts of splits */
    if (partial && cuda_check(cu.cuMemsetD8(buf(c, BUF_ATT_PARTIAL, 0), 0, partial), "clearing the attention's partials", err))
        return -1;
    size_t keys = c->plan->memory.buffers[BUF_DECODE_BEST].bytes;   /* and the greedy keys (decode_advance clears them) */
    if (keys && cuda_check(cu.cuMemsetD8(buf(c, BUF_DECODE_BEST, 0), 0, keys), "clearing the greedy draw's keys", err))
        return -1;
    for (int i = 0; i < DECODE_IN_FLIGHT; i++)
        if (cuda_check(cu.cuEventCreate(&c->step_done[i], CU_EVENT_DISABLE_TIMING), "creating the decode events", err)) return -1;
    return 0;
}

void decode_close(Cuda *c) {
    if (c->graph) cu.cuGraphExecDestroy(c->graph);
    for (int i = 0; i < DECODE_IN_FLIGHT; i++)
        if (c->step_done[i]) cu.cuEventDestroy(c->step_done[i]);
    if (c->h_drawn) cu.cuMemFreeHost(c->h_drawn);
    c->graph = NULL;
    c->h_drawn = NULL;
}

/* the forward's ops (the embedding, the layers and the logits) as one persistent kernel (Plan.decode_persistent,
   templates/decode_step.cu): the same buffers as the op list's, each layer's work in layer 0's (one layer at a time) */
static int persistent_step(Cuda *c, Err *err) {
    OP("decode step", launch_decode_step(&c->ks, c->s, buf(c, BUF_PARAMS, 0), buf(c, BUF_INPUTS, 0),
                                         buf(c, BUF_DECODE_POS, 0), c->kcache, c->vcache, buf(c, BUF_RESIDUAL3, 0),
                                         buf(c, BUF_RESIDUAL2, 0), buf(c, BUF_QKV, 0), buf(c, BUF_ATTY, 0),
                                         buf(c, BUF_FCH_GELU, 0), buf(c, BUF_LOGITS, 0), buf(c, BUF_GRID_SYNC, 0),
                                         c->dev.sm_count, err));
    return 0;
}

/* one step's work on the stream: everything reads the position and the tokens from device memory. A greedy step on
   the decode linears draws inside the classifier (Plan.decode_greedy_fused): decode_advance writes its tokens */
static int step_ops(Cuda *c, const SampleSettings *s, Err *err) {
    dptr pos = buf(c, BUF_DECODE_POS, 0), tokens = buf(c, BUF_INPUTS, 0), logits = buf(c, BUF_LOGITS, 0);
    c->decode_best = c->plan->decode_greedy_fused && sample_is_greedy(s) ? buf(c, BUF_DECODE_BEST, 0) : 0;
    int rc = c->plan->decode_persistent ? persistent_step(c, err) : cu_run_phase(c, NULL, &c->plan->schedule.forward, err);
    dptr best = c->decode_best;
    c->decode_best = 0;
    if (rc) return -1;
    if (!best)
        OP("sample", launch_sample_tokens(&c->ks, c->s, tokens, c->d_drawn, buf(c, BUF_RNG, 0), pos, logits,
                                          s->temperature, s->top_k, s->top_p, err));
    OP("decode advance", launch_decode_advance(&c->ks, c->s, pos, best, tokens, c->d_drawn, err));
    if (c->prof.on) c->prof.steps++;   /* GPT2GEN_PROFILE: op by op, no graph */
    return 0;
}

/* Records the step as a graph for settings s. The launches are checked when the graph runs, not one by one. */
static int record(Cuda *c, const SampleSettings *s, Err *err) {
    if (c->graph) { cu.cuGraphExecDestroy(c->graph); c->graph = NULL; }
    int sync_each = c->ks.sync_each;
    c->ks.sync_each = 0;
    CUgraph g = NULL;
    int rc = cuda_check(cu.cuStreamBeginCapture(c->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "recording the decode step", err);
    if (!rc) {
        rc = step_ops(c, s, err);
        Err end;
        int ended = cuda_check(cu.cuStreamEndCapture(c->s, &g), "recording the decode step", rc ? &end : err);
        rc = rc || ended;
    }
    c->ks.sync_each = sync_each;
    if (!rc) rc = cuda_check(cu.cuGraphInstantiate(&c->graph, g, 0), "instantiating the decode step's graph", err);
    if (g) cu.cuGraphDestroy(g);
    if (rc) { c->graph = NULL; return -1; }
    c->graph_settings = *s;
    return 0;
}

static int enqueue_step(Cuda *c, const SampleSettings *s, int use_graph, int i, Err *err) {
    if (use_graph) {
        if (cuda_check(cu.cuGraphLaunch(c->graph, c->s), "running the decode step", err)) return -1;
    } else if (step_ops(c, s, err)) return -1;
    return cuda_check(cu.cuEventRecord(c->step_done[i % DECODE_IN_FLIGHT], c->s), "recording a decode step's event", err);
}

int cu_decode(Backend *be, DecodeRun *run, Err *err) {
    Cuda *c = cuda_of(be);
    int B = c->plan->step.B, cached = c->plan->step.cache_T;
    if (run->pos < 0 || run->steps < 1 || run->steps > cached - run->pos)
        return err_set(err, "decode of %d steps from position %d: the cache holds %d positions", run->steps, run->pos, cached);
    for (int b = 0; b < B; b++)
        if (run->tokens[b] < 0 || run->tokens[b] >= c->V)
            return err_set(err, "decode: row %d's token is %d, outside the vocabulary (0..%d)", b, (int)run->tokens[b], c->V - 1);
    int32_t pos = run->pos;
    if (cuda_check(cu.cuMemcpyHtoD(buf(c, BUF_INPUTS, 0), run->tokens, (size_t)B * 4), "copying tokens to the GPU", err) ||
        cuda_check(cu.cuMemcpyHtoD(buf(c, BUF_DECODE_POS, 0), &pos, 4), "copying the position to the GPU", err) ||
        cuda_check(cu.cuMemcpyHtoD(buf(c, BUF_RNG, 0), run->rng, (size_t)B * 8), "copying the generators to the GPU", err))
        return -1;
    /* a graph where nothing forbids it: the profile times each op, GPT2GEN_SYNC checks each launch */
    int use_graph = !c->prof.on && !c->env->sync;
    if (use_graph && (!c->graph || memcmp(&c->graph_settings, &run->s, sizeof run->s)) && record(c, &run->s, err)) return -1;
    int queued = 0, done = 0, stop = 0, rc = 0;
    while (done < run->steps && !rc) {
        while (!stop && queued < run->steps && queued < done + DECODE_IN_FLIGHT && !rc) rc = enqueue_step(c, &run->s, use_graph, queued++, err);
        if (rc || (rc = cuda_check(cu.cuEventSynchronize(c->step_done[done % DECODE_IN_FLIGHT]), "running the decode step", err)))
            break;
        int32_t *out = run->drawn + (size_t)done * B;
        memcpy(out, c->h_drawn + (size_t)(run->pos + done) * B, (size_t)B * 4);
        done++;
        if (run->on_step && run->on_step(run->ctx, done - 1, out)) { stop = 1; break; }
    }
    /* the steps queued behind a stop run to their end; the generators come back as they left them */
    if (cuda_device_sync(&c->dev, "decode", rc ? &(Err){{0}} : err) || rc) return -1;
    if (cuda_check(cu.cuMemcpyDtoH(run->rng, buf(c, BUF_RNG, 0), (size_t)B * 8), "copying the generators from the GPU", err))
        return -1;
    c->logits_chunk = 0;   /* a decode plan's chunk is its B rows */
    return done;
}
