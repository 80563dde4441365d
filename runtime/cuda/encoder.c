/* encoder: token + position embedding on the GPU, and its deterministic backward (templates/encoder.cu). */
#include "runtime/cuda/ops.h"
#include <string.h>

int op_encoder_forward(Cuda *c, Err *err) {
    return launch_encoder_forward(&c->ks, c->s, buf(c, BUF_ENCODED, 0), buf(c, BUF_INPUTS, 0), PW(P_WTE, 0), cu_wpe(c), err);
}

/* For each distinct token, its positions in increasing order: the wte backward sums each token's rows in a
   fixed order, with no atomics. */
int cuda_encoder_buckets(const int32_t *inp, int n, int Vp, int32_t *count, int32_t *token, int32_t *start, int32_t *positions) {
    memset(count, 0, (size_t)(Vp + 1) * sizeof(int32_t));
    for (int i = 0; i < n; i++) count[inp[i] + 1]++;
    int nb = 0;
    for (int tok = 0; tok < Vp; tok++) {
        if (count[tok + 1]) { token[nb] = tok; start[nb] = count[tok]; nb++; }
        count[tok + 1] += count[tok];      /* prefix sum: count[tok] = first slot of tok */
    }
    start[nb] = n;
    for (int i = 0; i < n; i++) positions[count[inp[i]]++] = i;
    return nb;
}

int op_encoder_upload_buckets(Cuda *c, const int32_t *inputs, Err *err) {
    int BT = c->plan->step.B * c->plan->step.T;
    c->n_buckets = cuda_encoder_buckets(inputs, BT, c->Vp, c->h_count, c->h_bucket_token, c->h_bucket_start, c->h_positions);
    return cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_BUCKET_TOKEN, 0), c->h_bucket_token, (size_t)c->n_buckets * 4, c->s), "copying buckets", err) ||
           cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_BUCKET_START, 0), c->h_bucket_start, (size_t)(c->n_buckets + 1) * 4, c->s), "copying buckets", err) ||
           cuda_check(cu.cuMemcpyHtoDAsync(buf(c, BUF_POSITIONS, 0), c->h_positions, (size_t)BT * 4, c->s), "copying buckets", err)
               ? -1 : 0;
}

int op_encoder_backward(Cuda *c, Err *err) {
    dptr dres = buf(c, BUF_DRESIDUAL, 0);
    int wpe = c->plan->model.position == POS_LEARNED;   /* RoPE: no wpe, no gradient of it */
    return (wpe && launch_encoder_backward_wpe(&c->ks, c->s, GW(P_WPE, 0), dres, err)) ||
           launch_encoder_backward_wte(&c->ks, c->s, GW(P_WTE, 0), dres, buf(c, BUF_BUCKET_TOKEN, 0),
                                       buf(c, BUF_BUCKET_START, 0), buf(c, BUF_POSITIONS, 0), c->n_buckets, err)
               ? -1 : 0;
}
