/* step: a forward and a backward on the GPU: the plan's schedule (gen/schedule.h: GPT-2's layers as ops, run by
   step_ops.c) around the host's work (the uploads, the classifier's chunks, the losses read back), and the training
   micro-step recorded as a CUDA graph. What the backward needs is kept per layer unless train.recompute says
   otherwise (1: the GELU output is recomputed, 2: the LayerNorm outputs too). */
#include "runtime/cuda/ops.h"
#include <string.h>

/* the tokens to BUF_INPUTS, checked against the vocabulary first */
static int upload_inputs(Cuda *c, const int32_t *inputs, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= c->V)
            return err_set(err, "input token %d at position %d is outside the vocabulary (0..%d)", inputs[i], i, c->V - 1);
    memcpy(c->h_inputs, inputs, (size_t)BT * 4);
    return cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_INPUTS, 0), c->h_inputs, (size_t)BT * 4, c->s), "copying inputs to the GPU", err);
}

/* the forward from BUF_INPUTS to the final LayerNorm's output (BUF_LNF), queued on the stream */
static int forward_from_inputs(Cuda *c, Err *err) {
    return cu_run_phase(c, NULL, &c->plan->schedule.forward, err);
}

/* a new forward starts: nothing of the last one (its losses, final LayerNorm, logits, targets) is to be read */
static void forget_forward(Cuda *c) {
    c->losses_valid = c->lnf_valid = c->have_targets = 0;
    c->logits_chunk = -1;
}

static int forward_trunk(Cuda *c, const int32_t *inputs, Err *err) {
    forget_forward(c);
    return upload_inputs(c, inputs, err) || forward_from_inputs(c, err) ? -1 : 0;
}

/* Without targets, the logits are made a chunk at a time as reads of BACKEND_LOGITS ask for them. With targets, the
   losses; a training plan's backward then makes each chunk's logits again, with their gradient
   (BACKEND_FORWARD_BACKWARD, cu_forward_backward, what training runs, makes them once). */
int cu_forward(Backend *be, const int32_t *inputs, const int32_t *targets, float *loss, Err *err) {
    Cuda *c = cuda_of(be);
    if (forward_trunk(c, inputs, err)) return -1;
    if (c->plan->step.fills_cache) return cuda_device_sync(&c->dev, "prefill", err);   /* no logits */
    c->lnf_valid = 1;
    if (!targets) return cuda_device_sync(&c->dev, "forward", err);
    if (op_classifier_targets(c, targets, err) || op_classifier(c, 0, 0.0f, err) || op_classifier_read_losses(c, loss, err))
        return -1;
    if (c->plan->step.kind != STEP_TRAIN) return 0;   /* no backward follows */
    if (op_encoder_upload_buckets(c, inputs, err)) return -1;
    c->have_targets = 1;
    return 0;
}

/* The backward on two streams (Plan.streams 2; one while profiling, which times ops on the compute stream): the
   input-gradient chain (the dinp matmuls, the GELU and attention backward, the LayerNorm backward) on the compute
   stream; each layer's weight-gradient matmuls, bias gradients and GELU recompute, which nothing in the chain reads,
   on the side stream, where they fill the gaps and share the GPU with the chain's memory-bound kernels. A side
   piece starts after a fork (the compute stream's work so far) and ends with a mark, an event that the compute
   stream waits for before it overwrites what the piece reads: dresidual (the LayerNorm backward's accumulation),
   dfch (the next layer's fcproj dinp), dqkv (the next layer's attention backward); at recompute=2 the LayerNorm
   outputs the side's dW matmuls read are remade by the next layer's LayerNorm backward, after a wait for a later
   mark. A wait is only for a mark recorded in the same backward (the one before it ended with the join; a CUDA
   graph's recording can wait only for what it recorded). The side stream has its own cuBLASLt workspace and bias
   scratch. Same kernels, same sums: the gradients are the bits of one stream. The schedule's fork, mark and wait ops
   (gen/schedule.c) say where; step_ops.c runs them, as no-ops without the side stream. */
int step_open(Cuda *c, Err *err) {
    if (!c->plan->schedule.forward.block.n)
        return err_set(err, "plan %s has no schedule (gen/schedule.h: schedule_make)", c->plan->name);
    c->bias_scratch = buf(c, BUF_BIAS_SCRATCH, 0);
    if (c->plan->streams < 2 || c->prof.on) return 0;
    if (cuda_check(cu.cuStreamCreate(&c->side, CU_STREAM_DEFAULT), "creating the side stream", err) ||
        cuda_check(cu.cuEventCreate(&c->ev_fork, CU_EVENT_DISABLE_TIMING), "creating the side stream's events", err))
        return -1;
    for (int i = 0; i < NUM_MARKS; i++)
        if (cuda_check(cu.cuEventCreate(&c->ev_mark[i], CU_EVENT_DISABLE_TIMING), "creating the side stream's events", err))
            return -1;
    return 0;
}

void step_close(Cuda *c) {
    if (c->step_graph) cu.cuGraphExecDestroy(c->step_graph);
    c->step_graph = NULL;
    if (c->ev_fork) cu.cuEventDestroy(c->ev_fork);
    for (int i = 0; i < NUM_MARKS; i++)
        if (c->ev_mark[i]) cu.cuEventDestroy(c->ev_mark[i]);
    if (c->side) cu.cuStreamDestroy(c->side);
    c->side = NULL;
}

/* The backward from the final LayerNorm down to layer 0, once BUF_DLN holds d(loss)/d(lnf) and the classifier's
   dwte is in; the side stream's work is all in (joined) at its end. */
static int backward_layers(Cuda *c, const BackendRun *r, Err *err) {
    if (c->side) cu_use_stream(c, 0);   /* where a failed step may have left it */
    memset(c->marked, 0, sizeof c->marked);
    return cu_run_phase(c, r, &c->plan->schedule.backward, err);
}

/* after backward_layers: the embeddings' gradients, the rest of the gradients handed on */
static int backward_tail(Cuda *c, const BackendRun *r, Err *err) {
    return cu_run_list(c, r, &c->plan->schedule.embed_backward, err);
}

/* The forward kept no logits: each chunk's are made again, now with their gradient. */
int cu_backward(Backend *be, const BackendRun *r, Err *err) {
    Cuda *c = cuda_of(be);
    if (!c->have_targets) return err_set(err, "backward needs a forward with targets first");
    c->prof.steps++;
    c->lnf_valid = 0;
    if (op_classifier(c, 1, classifier_alpha(c, r->grad_scale), err) || backward_layers(c, r, err) ||
        backward_tail(c, r, err))
        return -1;
    return cuda_device_sync(&c->dev, "backward", err);
}

/* A training micro-step's ops between the uploads (inputs, targets) and the encoder backward: the forward, each
   chunk's logits once with their losses and gradient (alpha), the backward down to layer 0. */
static int micro_step_ops(Cuda *c, const BackendRun *r, float alpha, Err *err) {
    return forward_from_inputs(c, err) || op_classifier(c, 1, alpha, err) || backward_layers(c, r, err) ? -1 : 0;
}

/* The micro-step as a CUDA graph (Plan.graph): micro_step_ops recorded once and replayed, so that the GPU starts
   each kernel without waiting for the host's launch, and the host's part of a micro-step is one call. Where it is
   not: while profiling (the profile times each op between events), with GPT2GEN_SYNC (each launch checked), where the
   gradients are handed on layer by layer (several ranks overlap their averaging with the backward: a host call
   between kernels), and for the first micro-step, which runs op by op (it is what is recorded, and whatever is set
   up on first use is then set up outside a recording). The launches' arguments are the plan's fixed buffers and
   alpha, so a graph serves while alpha stays (fp16's loss scale changes it: recorded again). */
static int graph_serves(const Cuda *c, const BackendRun *r) {
    return c->plan->graph && !c->prof.on && !c->ks.sync_each && !r->grad_ready && c->micro_steps > 0;
}

static int record_micro_step(Cuda *c, const BackendRun *r, float alpha, Err *err) {
    if (c->step_graph) { cu.cuGraphExecDestroy(c->step_graph); c->step_graph = NULL; }
    CUgraph g = NULL;
    int rc = cuda_check(cu.cuStreamBeginCapture(c->dev.compute, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "recording the training micro-step", err);
    if (!rc) {
        rc = micro_step_ops(c, r, alpha, err);
        Err end;
        int ended = cuda_check(cu.cuStreamEndCapture(c->dev.compute, &g), "recording the training micro-step", rc ? &end : err);
        rc = rc || ended;
    }
    cu_use_stream(c, 0);
    if (!rc) rc = cuda_check(cu.cuGraphInstantiate(&c->step_graph, g, 0), "instantiating the training micro-step's graph", err);
    if (g) cu.cuGraphDestroy(g);
    if (rc) {
        c->step_graph = NULL;
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        return err_set(err, "%s (train.cuda_graph = false runs the micro-step op by op)", why);
    }
    c->step_graph_alpha = alpha;
    return 0;
}

static int run_micro_step(Cuda *c, const BackendRun *r, float alpha, Err *err) {
    if (!graph_serves(c, r)) return micro_step_ops(c, r, alpha, err);
    if ((!c->step_graph || memcmp(&alpha, &c->step_graph_alpha, sizeof alpha)) && record_micro_step(c, r, alpha, err))
        return -1;
    c->graph_runs++;
    return cuda_check(cu.cuGraphLaunch(c->step_graph, c->s), "running the training micro-step's graph", err);
}

/* A training micro-step: each chunk's logits once, their losses and gradient together; the losses are read when
   the backward is done, so the host waits once. */
int cu_forward_backward(Backend *be, const BackendRun *r, Err *err) {
    Cuda *c = cuda_of(be);
    profile_queue_start(&c->prof);
    forget_forward(c);
    c->prof.steps++;
    if (upload_inputs(c, r->inputs, err) || op_classifier_targets(c, r->targets, err) ||
        run_micro_step(c, r, classifier_alpha(c, r->grad_scale), err) || op_encoder_upload_buckets(c, r->inputs, err) ||
        backward_tail(c, r, err))
        return -1;
    c->have_targets = 1;
    c->micro_steps++;
    profile_queue_queued(&c->prof);
    if (op_classifier_read_losses(c, r->loss, err)) return -1;
    profile_queue_done(&c->prof);
    return 0;
}
