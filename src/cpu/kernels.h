/*
 * The CPU kernels: the readable reference of every op, and the fast path.
 *
 * Kernels see plain pointers and shapes, never graph nodes.  All tensors are
 * contiguous, NCHW, float32 unless said otherwise.  Rules for every kernel:
 *   - outputs are written with = (never accumulated): a gradient that has
 *     several contributions is summed by an add node that autodiff inserts;
 *   - no allocation: scratch memory comes in `workspace`, sized by the
 *     matching *_workspace() function (bytes) for the plan's thread count;
 *   - results are bit-for-bit identical from run to run: reductions run in
 *     an order that does not depend on thread scheduling;
 *   - parallel with OpenMP; the backend sets the thread count.
 */
#ifndef CT_CPU_KERNELS_H
#define CT_CPU_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bn_input.h"
#include "core/rank_sum.h"
#include "core/shapes.h"

/* ---- gemm.c ------------------------------------------------------------ */

/* c[m,n] = alpha * op(a)[m,k] op(b)[k,n] + beta * c, row-major;
 * op(a) = a^T when trans_a (then a is stored [k,m]).  OpenBLAS when built
 * with it, else a cache-blocked loop nest. */
void ct_cpu_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* The blocked C version, always available (tests compare it with BLAS). */
void ct_cpu_gemm_native(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc);
/* Names the GEMM in use: "openblas" or "native". */
const char *ct_cpu_gemm_name(void);

/* ---- conv.c: im2col + GEMM, any shape -------------------------------------- */

/* y[n,o,h,w] = bias[o] + sum_{c,i,j} x[n, g*Cg+c, h*sh-ph+i*dh, w*sw-pw+j*dw] * w[o,c,i,j]
 * where g = o / (O/groups), Cg = C/groups; bias may be NULL. */
size_t ct_cpu_conv2d_im2col_workspace(const ct_conv2d_shape *s);
/* A convolution whose kernel reaches past its input for every output at
 * some taps (a 3x3 kernel with padding 1 on a 1x1 input touches only its
 * centre): those taps' products are all with padding zeros.  True when
 * there are such rows or columns of taps at the kernel's edges and the
 * convolution over the others is one (`cropped`: the kernel's live rows
 * and columns, from (*first_row, *first_column), and the padding that
 * keeps every window where it was); false otherwise. */
bool ct_cpu_conv2d_cropped(const ct_conv2d_shape *s, ct_conv2d_shape *cropped, int *first_row,
                           int *first_column);
/* The cropped kernel's weights out of the whole one's, and back (the dead
 * taps' gradient is 0): w [O, Cg, KH, KW], cw [O, Cg, KH', KW']. */
void ct_cpu_conv2d_crop_weights(const ct_conv2d_shape *s, const ct_conv2d_shape *cropped,
                                int first_row, int first_column, const float *w, float *cw);
void ct_cpu_conv2d_uncrop_weights(const ct_conv2d_shape *s, const ct_conv2d_shape *cropped,
                                  int first_row, int first_column, const float *cw, float *w);
/* The most that any of the CPU's convolution paths (im2col, direct,
 * Winograd) needs for the shape: for callers that run several. */
size_t ct_cpu_conv2d_workspace(const ct_conv2d_shape *s, int n_threads);
void ct_cpu_conv2d_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                           const float *bias, float *y, void *workspace);
/* y = relu(conv(x, w) + bias): the forward with a fused relu (NaN kept). */
void ct_cpu_conv2d_forward_relu(const ct_conv2d_shape *s, const float *x, const float *w,
                                const float *bias, float *y, void *workspace);
/* pooled = maxpool 2x2/2 (unpadded, floor) of relu(conv(x, w) + bias): the
 * inference forward of conv -> relu -> max pool in one pass.
 * pooled: [N, O, out_h/2, out_w/2].  y: [N, O, out_h, out_w] is scratch
 * the convolution is computed in (the direct kernel's version,
 * ct_cpu_conv2d_direct_forward_relu_maxpool, needs none). */
void ct_cpu_conv2d_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                        const float *w, const float *bias, float *y,
                                        float *pooled, void *workspace);
/* conv_panel.c: the forward of ct_cpu_conv2d_forward(_relu) on AVX-512 CPUs
 * (ct_cpu_simd_avx512), for groups == 1 and out_channels % 8 == 0 */
bool ct_cpu_conv2d_panel_fits(const ct_conv2d_shape *s);
/* n_threads: the most threads the forward will run with (ct_cpu_max_threads) */
size_t ct_cpu_conv2d_panel_workspace(const ct_conv2d_shape *s, int n_threads);
void ct_cpu_conv2d_panel_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                 const float *bias, bool relu, float *y, void *workspace);
/* dx = d(sum y*dy)/dx.  dx: [N,C,H,W] */
void ct_cpu_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy, const float *w,
                                 float *dx, void *workspace);
/* dw = d(sum y*dy)/dw.  dw: [O,C/groups,KH,KW] */
void ct_cpu_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x, const float *dy,
                                   float *dw, void *workspace);

/* db[c] = sum_{n,i} dy[n,c,i]  (dy: [n, c, inner]; the bias gradient of
 * conv (inner = H*W) and linear (inner = 1)). */
void ct_cpu_channel_sum(int n, int c, int inner, const float *dy, float *db);

/* ---- linear.c ----------------------------------------------------------- */

/* y[n,o] = bias[o] + sum_i x[n,i] w[o,i];  bias may be NULL. */
void ct_cpu_linear_forward(int n, int in, int out, const float *x, const float *w,
                           const float *bias, float *y);
/* y = relu(x . w^T + bias) */
void ct_cpu_linear_forward_relu(int n, int in, int out, const float *x, const float *w,
                                const float *bias, float *y);
/* dx[n,i] = sum_o dy[n,o] w[o,i]; with relu_y (not NULL: the output of
 * the relu that feeds this layer, laid out as dx), the relu's backward too:
 * dx[n,i] = ct_relu_grad(relu_y[n,i], that sum). */
void ct_cpu_linear_backward_data(int n, int in, int out, const float *dy, const float *w,
                                 const float *relu_y, float *dx);
/* dw[o,i] = sum_n dy[n,o] x[n,i] */
void ct_cpu_linear_backward_weight(int n, int in, int out, const float *x, const float *dy,
                                   float *dw);

/* ---- pool.c ------------------------------------------------------------- */

/* y = max over the window (padding never wins). */
void ct_cpu_maxpool2d_forward(const ct_pool2d_shape *s, const float *x, float *y);
/* The 2x2/2 unpadded (floor) pool of `planes` planes of in_h x in_w, on the
 * calling thread: for kernels that pool inside their own parallel region
 * (an omp parallel there, even if(false), makes a team of one each call:
 * about 1 us, which cost SimpleCNN's fused conv+pool 30 us a layer). */
void ct_cpu_maxpool2x2_planes(int planes, int in_h, int in_w, const float *x, float *y);
/* A 2x2/2 window's argmax code, one byte a window: the argmax's place
 * (0 top left, +RIGHT, +DOWN; the first maximum in row-major order, as the
 * pool's backward finds it) and PASS where the max is not <= 0 (a relu's
 * backward lets the window's gradient through: ct_relu_grad). */
enum { CT_POOL_CODE_RIGHT = 1, CT_POOL_CODE_DOWN = 2, CT_POOL_CODE_PASS = 4 };
/* ct_cpu_maxpool2x2_planes, and each window's code into codes (in y's
 * order).  codes may be x's own bytes: every window's inputs are read
 * before its code is written, and a code never lands on inputs not yet
 * read (codes are 1 byte a window, its inputs 16 bytes at or after it). */
void ct_cpu_maxpool2x2_planes_codes(int planes, int in_h, int in_w, const float *x, float *y,
                                    uint8_t *codes);
/* The same on u8 (an int8 model's activations). */
void ct_cpu_maxpool2d_forward_u8(const ct_pool2d_shape *s, const uint8_t *x, uint8_t *y);
/* dx[argmax of each window] += dy (argmax recomputed from x; the first
 * maximum in row-major window order wins, as in PyTorch); other dx = 0.
 * relu: x is a relu's output and dx that relu's input gradient (each
 * window adds ct_relu_grad(its max, dy)): the relu's backward fused. */
void ct_cpu_maxpool2d_backward(const ct_pool2d_shape *s, const float *x, const float *dy,
                               bool relu, float *dx);
void ct_cpu_avgpool2d_forward(const ct_pool2d_shape *s, const float *x, float *y);
void ct_cpu_avgpool2d_backward(const ct_pool2d_shape *s, const float *dy, float *dx);
/* y[n,c] = mean_i x[n,c,i];  dx[n,c,i] = dy[n,c] / inner, or where relu_y
 * is given (a fused relu_bwd: the output of the relu before the pool)
 * ct_relu_grad(relu_y[n,c,i], dy[n,c] / inner) */
void ct_cpu_global_avgpool_forward(int n, int c, int inner, const float *x, float *y);
void ct_cpu_global_avgpool_backward(int n, int c, int inner, const float *dy,
                                    const float *relu_y, float *dx);

/* ---- activation.c --------------------------------------------------------- */
/* Elementwise over `count` elements.  Backward rules use the output y. */

void ct_cpu_relu_forward(int64_t count, const float *x, float *y);
void ct_cpu_relu_backward(int64_t count, const float *y, const float *dy, float *dx);
void ct_cpu_sigmoid_forward(int64_t count, const float *x, float *y);
void ct_cpu_sigmoid_backward(int64_t count, const float *y, const float *dy, float *dx);
void ct_cpu_tanh_forward(int64_t count, const float *x, float *y);
void ct_cpu_tanh_backward(int64_t count, const float *y, const float *dy, float *dx);

/* ---- batchnorm.c ------------------------------------------------------------ */
/* x: [n, c, inner].  stats: [2, c] = (mean, invstd) of the normalization used. */

/* training: mean/var over (n, inner); invstd = 1/sqrt(var_biased + eps);
 *   running_mean = (1-momentum)*running_mean + momentum*mean
 *   running_var  = (1-momentum)*running_var + momentum*var_unbiased
 *   (var_unbiased = var_biased * M/(M-1), M = n*inner; M == 1 keeps var_biased).
 * eval: stats from running_mean/running_var; running values untouched. */
void ct_cpu_batchnorm_stats(int n, int c, int inner, const float *x, bool training,
                            float momentum, float eps, float *running_mean, float *running_var,
                            float *stats);
/* y = (x - mean) * invstd * gamma + beta, then max(y, 0) if relu */
void ct_cpu_batchnorm_apply(int n, int c, int inner, const float *x, const float *stats,
                            const float *gamma, const float *beta, bool relu, float *y);
/* y = a + b, then max(y, 0) when relu: a residual block's add computing its
 * input's batchnorm (a.stats set) and maybe the other's (b.stats), each
 * value as ct_cpu_batchnorm_apply computes it (the same bits) */
void ct_cpu_batchnorm_add(int n, int c, int inner, ct_bn_input a, ct_bn_input b, bool relu,
                          float *y);
/* dparams: [2, c] = (dgamma, dbeta):
 *   dgamma[c] = sum dy * (x - mean) * invstd,  dbeta[c] = sum dy */
void ct_cpu_batchnorm_backward_params(int n, int c, int inner, const float *x,
                                      const float *dy, const float *stats, float *dparams);
/* Training-mode input gradient, M = n*inner, xhat = (x-mean)*invstd:
 *   dx = gamma*invstd * (dy - dbeta/M - xhat*dgamma/M) */
void ct_cpu_batchnorm_backward_data(int n, int c, int inner, const float *x, const float *dy,
                                    const float *stats, const float *gamma,
                                    const float *dparams, float *dx);
/* Synchronized batchnorm (training): the statistics and dx over every rank's
 * batch (ranks->sum adds values over the ranks in place); workspace:
 * ct_cpu_batchnorm_sync_workspace(c) bytes, 8-byte aligned.  0, or the
 * status ranks->sum failed with. */
size_t ct_cpu_batchnorm_sync_workspace(int c);
int ct_cpu_batchnorm_stats_synced(int n, int c, int inner, const float *x, float momentum,
                                  float eps, float *running_mean, float *running_var,
                                  float *stats, const ct_rank_sum *ranks, void *workspace);
int ct_cpu_batchnorm_backward_data_synced(int n, int c, int inner, const float *x,
                                          const float *dy, const float *stats, const float *gamma,
                                          const float *dparams, float *dx,
                                          const ct_rank_sum *ranks, void *workspace);

/* ---- dropout.c ------------------------------------------------------------- */

/* y[i] = x[i] * keep(i) / (1-p), keep(i) = ct_rng_uniform(seed, stream, step, i) >= p.
 * The backward pass is the same function applied to dy with the same key. */
void ct_cpu_dropout(int64_t count, const float *x, float *y, float p, uint64_t seed,
                    uint32_t stream, uint32_t step);

/* ---- softmax.c (softmax and cross-entropy) ------------------------------------ */

/* Over the rows of x: [n, c]. */
void ct_cpu_softmax_forward(int n, int c, const float *x, float *y);
/* dx = y * (dy - sum_j dy_j y_j) */
void ct_cpu_softmax_backward(int n, int c, const float *y, const float *dy, float *dx);
/* loss = mean_n [ -(1-s) * log p[n, label_n] - (s/c) * sum_j log p[n,j] ],
 * p = softmax(logits), s = label_smoothing.  labels are int32, or int64 when
 * labels_i64.  Returns -1, or the first n whose label is outside [0, c).
 * dlogits (NULL: not wanted) also gets the backward's result for dloss
 * (the loss's gradient fused in: the same bits). */
int ct_cpu_cross_entropy_forward(int n, int c, const float *logits, const void *labels,
                                 bool labels_i64, float label_smoothing, float dloss,
                                 float *loss, float *dlogits);
/* dlogits = dloss[0] * (p - ((1-s) onehot + s/c)) / n */
void ct_cpu_cross_entropy_backward(int n, int c, const float *logits, const void *labels,
                                   bool labels_i64, float label_smoothing, const float *dloss,
                                   float *dlogits);

/* ---- tensor_ops.c ---------------------------------------------------------- */

void ct_cpu_fill(int64_t count, float value, float *y);
void ct_cpu_copy(int64_t count, const float *x, float *y);
/* y = a + b */
void ct_cpu_add(int64_t count, const float *a, const float *b, float *y);
void ct_cpu_add_relu(int64_t count, const float *a, const float *b, float *y);
/* y = ct_relu_grad(mask, a + b) (a relu_bwd fused into the add of its dy) */
void ct_cpu_add_relu_grad(int64_t count, const float *a, const float *b, const float *mask,
                          float *y);
/* Along dim 1 of [n, c_i, inner] tensors: y: [n, sum c_i, inner]. */
void ct_cpu_concat(int n, int inner, int n_inputs, const int *channels, const float *const *xs,
                   float *y);
/* y[n, 0:count, inner] = x[n, start:start+count, inner],  x: [n, c_total, inner] */
void ct_cpu_slice_channels(int n, int inner, int c_total, int start, int count, const float *x,
                           float *y);

/* ---- optim.c ------------------------------------------------------------------ */
/* In place on param and the state; PyTorch's torch.optim semantics. */

/* The gradient is grad * grad_scale (1 / the loss scale; 1 exactly leaves it
 * as it is).  g = grad + wd*p; with momentum: buf = first_step ? g : momentum*buf + (1-dampening)*g,
 * g = nesterov ? g + momentum*buf : buf;  p -= lr*g.  buf may be NULL if momentum == 0. */
void ct_cpu_sgd_update(int64_t count, float *param, const float *grad, float grad_scale,
                       float *momentum_buf, float lr, float momentum, float dampening,
                       float weight_decay, bool nesterov, bool first_step);
/* step t >= 1.  Adam: g = grad + wd*p.  AdamW (decoupled): p *= 1 - lr*wd.
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 * p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps) */
void ct_cpu_adam_update(int64_t count, float *param, const float *grad, float grad_scale,
                        float *exp_avg, float *exp_avg_sq, float lr, float beta1, float beta2,
                        float eps, float weight_decay, bool decoupled, int64_t step);
/* One tensor of an optimizer group: the parameter (updated in place), its
 * gradient and its state (SGD: state[0] the momentum buffer, or NULL
 * without momentum; Adam: exp_avg, exp_avg_sq). */
typedef struct ct_cpu_update_tensor {
    int64_t count;
    float *param;
    const float *grad;
    float *state[2];
} ct_cpu_update_tensor;
/* The updates above for n tensors with the same settings, in one parallel
 * region that splits all their elements evenly over the threads; each
 * element's arithmetic is the single-tensor update's (the same bits). */
void ct_cpu_sgd_update_group(int n, const ct_cpu_update_tensor *tensors, float grad_scale,
                             float lr, float momentum, float dampening, float weight_decay,
                             bool nesterov, bool first_step);
void ct_cpu_adam_update_group(int n, const ct_cpu_update_tensor *tensors, float grad_scale,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              bool decoupled, int64_t step);
/* Whether every one of the count floats is finite. */
bool ct_cpu_all_finite(int64_t count, const float *x);

#endif
