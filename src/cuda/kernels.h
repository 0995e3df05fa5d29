/*
 * The CUDA kernels: the same functions as src/cpu/kernels.h (which states
 * each one's math and is the reference the GPU tests compare against), with
 * device pointers and a trailing stream.  Each call enqueues its work on the
 * stream and returns at once: CT_OK, or the launch failure (check.h).
 *
 * Rules for every kernel, as on the CPU:
 *   - outputs are written with = (never accumulated);
 *   - no allocation: scratch memory comes in `workspace`, sized by the
 *     matching *_workspace() function;
 *   - reductions run in a fixed order (a fixed tree of warp shuffles over a
 *     fixed assignment of elements to threads; no atomic adds: an atomic
 *     only counts which block is the last, never sums), so a result is
 *     the same bits from run to run; sums that the CPU does in double are
 *     done in double here too.
 * A kernel with a `ct_dtype dtype` argument also takes f16 and bf16 data
 * (a bf16 or fp16 graph): it computes in f32, each value widened exactly as
 * it is loaded and rounded once to nearest even (core/half.h) as it is
 * stored, where the CPU's reduced-precision reference (cpu/widen.c) rounds
 * the same f32 result: the same bits.
 * Grid sizes come from the current device's SM count and each kernel's
 * occupancy (src/cuda/launch.cu).
 */
#ifndef CT_CUDA_KERNELS_H
#define CT_CUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuttle.h"
#include "core/bn_input.h"
#include "core/rank_sum.h"
#include "core/shapes.h"
#include "core/step_values.h"
#include "quant/int8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Device `device`'s SM count, which launch sizes follow (the backend sets
 * it when made; each launch reads its current device's). */
void ct_cuda_set_device_info(int device, int sm_count);

/* The current device's SM count (launch.cu; ct_cuda_set_device_info). */
int ct_cuda_sm_count(void);

/* Tickets: CT_CUDA_TICKETS counters, all 0 between kernels, in device
 * memory that `stream`'s kernels alone use (NULL: none again).  A split
 * reduction counts the blocks that finished each of its tiles there, and
 * the last one adds the parts (ct_last_arrival, common.cuh), where it would
 * otherwise take a kernel of its own.  The backend gives its stream
 * tickets when made (launch.cu keeps them). */
enum { CT_CUDA_TICKETS = 4096 };
void ct_cuda_set_tickets(cudaStream_t stream, unsigned *tickets);
/* The tickets of `stream` for a launch that needs `count` of them; NULL
 * where it has none, or too few. */
unsigned *ct_cuda_tickets(cudaStream_t stream, int64_t count);

/* ---- gemm.cu ---------------------------------------------------------- */

/* c[m,n] = alpha * op(a)[m,k] op(b)[k,n] + beta * c, row-major (c is not
 * read when beta == 0).  A shared-memory tiled SGEMM. */
ct_status ct_cuda_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta, float *c,
                       int ldc, cudaStream_t stream);
/* The linear layers' products split k over blocks where their tiles are
 * fewer than the SMs, the parts in a workspace of this many bytes for a
 * product of m x n outputs over k (forward: batch x out over in; backward
 * data: batch x in over out; backward weight: out x (in + 1) over batch,
 * the bias gradient's column counted); with a NULL workspace they run
 * unsplit. */
size_t ct_cuda_linear_workspace(int m, int n, int k);
/* relu: store max(y, 0) (a relu fused into the layer, graph/fuse.c) */
ct_status ct_cuda_linear_forward(int n, int in, int out, const float *x, const float *w,
                                 const float *bias, bool relu, float *y, void *workspace,
                                 cudaStream_t stream);
/* relu_mask (else NULL): a fused relu_bwd, dx masked by the relu output
 * relu_mask (ct_relu_grad), graph/fuse.c */
ct_status ct_cuda_linear_backward_data(int n, int in, int out, const float *dy, const float *w,
                                       const float *relu_mask, float *dx, void *workspace,
                                       cudaStream_t stream);
/* With db (else NULL), the bias gradient too: db[o] = sum_n dy[n, o]. */
ct_status ct_cuda_linear_backward_weight(int n, int in, int out, const float *x,
                                         const float *dy, float *dw, float *db, void *workspace,
                                         cudaStream_t stream);
/* Both of the above (the same dy) as one launch where their tiles allow
 * (gemm.cuh's pair), each with its own workspace. */
ct_status ct_cuda_linear_backward_pair(int n, int in, int out, const float *dy, const float *w,
                                       const float *relu_mask, float *dx, void *data_workspace,
                                       const float *x, float *dw, float *db,
                                       void *weight_workspace, cudaStream_t stream);

/* ---- quant.cu: INT8 with __dp4a (src/quant/int8.h states the rule) ---------- */

/* INT8 weights on the device: q int8 [rows, ct_cuda_int8_row_bytes(depth)]
 * (each row padded with zeros to whole words of four), scales and row_sums
 * (sum_k q[m, k]) [rows], as in ct_int8_weights. */
typedef struct ct_cuda_int8_weights {
    int rows, depth;
    const int8_t *q;
    const float *scales;
    const int32_t *row_sums;
} ct_cuda_int8_weights;
int ct_cuda_int8_row_bytes(int depth);
/* ct_int8_gemm: b uint8 [depth, n] and out [rows, n] (float or uint8) with
 * any strides, e->bias a device pointer or NULL.  The same bits as the CPU. */
size_t ct_cuda_int8_gemm_workspace(int depth, int n);
ct_status ct_cuda_int8_gemm(const ct_cuda_int8_weights *w, int n, ct_int8_matrix b,
                            ct_quant_act b_q, const ct_int8_epilogue *e, ct_int8_matrix out,
                            void *workspace, cudaStream_t stream);
/* ct_int8_conv2d_forward (groups 1): im2col, then the GEMM, per image. */
size_t ct_cuda_int8_conv2d_workspace(const ct_conv2d_shape *s);
ct_status ct_cuda_int8_conv2d_forward(const ct_conv2d_shape *s, const uint8_t *x,
                                      ct_quant_act x_q, const ct_cuda_int8_weights *w,
                                      const ct_int8_epilogue *e, void *y, void *workspace,
                                      cudaStream_t stream);

/* ---- gemm_tc.cu, conv_tc.cu: tensor cores ----------------------------------- */

/* Linear and convolution of a bf16 or fp16 graph on tensor cores (wmma):
 * dtype (CT_BF16 or CT_F16) is that of every tensor but the bias (f32);
 * the same math and arguments as the f32 kernels, f32 sums, each output
 * value (after the bias and the relu) rounded once to nearest even. */
ct_status ct_cuda_linear_forward_tc(ct_dtype dtype, int n, int in, int out, const void *x,
                                    const void *w, const float *bias, bool relu, void *y,
                                    cudaStream_t stream);
/* The backward data pass stores 0 where relu_mask (the output of a relu
 * whose backward is fused here, laid out as dx; NULL: none) is <= 0. */
ct_status ct_cuda_linear_backward_data_tc(ct_dtype dtype, int n, int in, int out,
                                          const void *dy, const void *w, const void *relu_mask,
                                          void *dx, cudaStream_t stream);
/* The weight gradients also give db (f32, the sum of dy over each output
 * channel, not rounded) when it is not NULL: one more column of the GEMM's
 * b, all ones (a fused bias gradient, graph/fuse.c). */
ct_status ct_cuda_linear_backward_weight_tc(ct_dtype dtype, int n, int in, int out,
                                            const void *x, const void *dy, void *dw, float *db,
                                            cudaStream_t stream);
ct_status ct_cuda_conv2d_forward_tc(ct_dtype dtype, const ct_conv2d_shape *s, const void *x,
                                    const void *w, const float *bias, bool relu, void *y,
                                    cudaStream_t stream);
ct_status ct_cuda_conv2d_backward_data_tc(ct_dtype dtype, const ct_conv2d_shape *s,
                                          const void *dy, const void *w, const void *relu_mask,
                                          void *dx, cudaStream_t stream);
/* The weight gradient's split of its reduction keeps f32 parts here. */
size_t ct_cuda_conv2d_backward_weight_tc_workspace(const ct_conv2d_shape *s);
ct_status ct_cuda_conv2d_backward_weight_tc(ct_dtype dtype, const ct_conv2d_shape *s,
                                            const void *x, const void *dy, void *dw, float *db,
                                            void *workspace, cudaStream_t stream);

/* ---- conv.cu ------------------------------------------------------------ */

/* Implicit GEMM (no im2col buffer); the weight gradient splits its long
 * reduction over blocks and sums the parts in order in the workspace. */
size_t ct_cuda_conv2d_workspace(const ct_conv2d_shape *s);
/* The forward GEMM's split parts (k split where its tiles are few), or 0. */
size_t ct_cuda_conv2d_forward_workspace(const ct_conv2d_shape *s);
/* relu: store max(y, 0) (a relu fused into the convolution, graph/fuse.c) */
ct_status ct_cuda_conv2d_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                 const float *bias, bool relu, float *y, void *workspace,
                                 cudaStream_t stream);
/* The forward as one thread per output, for few input channels per group
 * (ct_cuda_conv2d_direct_fits), where a GEMM's k is too short to tile. */
bool ct_cuda_conv2d_direct_fits(const ct_conv2d_shape *s);
ct_status ct_cuda_conv2d_forward_direct(const ct_conv2d_shape *s, const float *x,
                                        const float *w, const float *bias, bool relu, float *y,
                                        cudaStream_t stream);
/* Backward data: with few input channels per group (at most 16) a product
 * into columns in the workspace and a sum of each element's taps from them
 * (conv.cu), a chunk of images at a time; else an implicit GEMM with the
 * transposed weights packed in the workspace. */
size_t ct_cuda_conv2d_backward_data_workspace(const ct_conv2d_shape *s);
ct_status ct_cuda_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy,
                                       const float *w, const float *relu_mask, float *dx,
                                       void *workspace, cudaStream_t stream);
/* Both of the above (the same dy) with their products in one launch where
 * the tiles allow (conv.cu), each with its own workspace. */
ct_status ct_cuda_conv2d_backward_pair(const ct_conv2d_shape *s, const float *dy,
                                       const float *w, const float *relu_mask, float *dx,
                                       void *data_workspace, const float *x, float *dw,
                                       float *db, void *weight_workspace, cudaStream_t stream);
/* Tests: the most workspace backward data's columns take (default 32 MiB;
 * 0: never by columns).  Set it before planning: the workspace follows it. */
void ct_cuda_set_conv_columns_limit(size_t bytes);
/* Test hook: the fewest blocks a convolution GEMM's wide tile must make
 * for the GEMM to take it (-1, the default: the device's SM count; 0:
 * wherever the shape suits it, as small test shapes need). */
void ct_cuda_set_conv_wide_min_blocks(int blocks);
/* With db (else NULL), the bias gradient too: db[o] = sum of dy over its
 * images and pixels, as one more GEMM column of ones (float sums in k
 * order, then the split parts in order). */
ct_status ct_cuda_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x,
                                         const float *dy, float *dw, float *db,
                                         void *workspace, cudaStream_t stream);
/* db[ch] = sum_{n,i} dy[n,ch,i] (the bias gradient), each channel reduced over
 * many blocks (channel_reduce.cuh) with its parts in the workspace, of
 * ct_cuda_channel_sum_workspace bytes.  dtype: of dy (f32, f16 or bf16); db
 * is f32. */
size_t ct_cuda_channel_sum_workspace(int n, int c, int inner);
ct_status ct_cuda_channel_sum(ct_dtype dtype, int n, int c, int inner, const void *dy,
                              float *db, void *workspace, cudaStream_t stream);

/* ---- pool.cu -------------------------------------------------------------- */

/* dtype: of x, y, dy and dx alike (f32, f16 or bf16) */

/* The 2x2 stride-2 unpadded max pool of an even-width plane, with 64-bit
 * loads (pool.cu); the same results as ct_cuda_maxpool2d_forward. */
bool ct_cuda_maxpool2x2_fits(const ct_pool2d_shape *s);
ct_status ct_cuda_maxpool2x2_forward(ct_dtype dtype, const ct_pool2d_shape *s, const void *x,
                                     void *y, cudaStream_t stream);
/* Its backward where every input is in one window (even height too).  The
 * max pool backward kernels with `relu` also apply the backward of a relu
 * whose output x is (a fused relu_bwd, graph/fuse.c): dx is 0 where x <= 0
 * (ct_relu_grad). */
bool ct_cuda_maxpool2x2_backward_fits(const ct_pool2d_shape *s);
ct_status ct_cuda_maxpool2x2_backward(ct_dtype dtype, const ct_pool2d_shape *s, const void *x,
                                      const void *dy, void *dx, bool relu, cudaStream_t stream);
ct_status ct_cuda_maxpool2d_forward(ct_dtype dtype, const ct_pool2d_shape *s, const void *x,
                                    void *y, cudaStream_t stream);
ct_status ct_cuda_maxpool2d_backward(ct_dtype dtype, const ct_pool2d_shape *s, const void *x,
                                     const void *dy, void *dx, bool relu, cudaStream_t stream);
ct_status ct_cuda_avgpool2d_forward(ct_dtype dtype, const ct_pool2d_shape *s, const void *x,
                                    void *y, cudaStream_t stream);
ct_status ct_cuda_avgpool2d_backward(ct_dtype dtype, const ct_pool2d_shape *s, const void *dy,
                                     void *dx, cudaStream_t stream);
ct_status ct_cuda_global_avgpool_forward(ct_dtype dtype, int n, int c, int inner,
                                         const void *x, void *y, cudaStream_t stream);
/* dx[p, i] = dy[p] / inner, or where mask is given (a fused relu_bwd: the
 * output of the relu before the pool, of the same dtype)
 * ct_relu_grad(mask[p, i], dy[p] / inner) */
ct_status ct_cuda_global_avgpool_backward(ct_dtype dtype, int n, int c, int inner,
                                          const void *dy, const void *mask, void *dx,
                                          cudaStream_t stream);

/* ---- activation.cu ---------------------------------------------------------- */

/* dtype: of x, y, dy and dx alike (f32, f16 or bf16) */
ct_status ct_cuda_relu_forward(ct_dtype dtype, int64_t count, const void *x, void *y,
                               cudaStream_t stream);
ct_status ct_cuda_relu_backward(ct_dtype dtype, int64_t count, const void *y, const void *dy,
                                void *dx, cudaStream_t stream);
ct_status ct_cuda_sigmoid_forward(ct_dtype dtype, int64_t count, const void *x, void *y,
                                  cudaStream_t stream);
ct_status ct_cuda_sigmoid_backward(ct_dtype dtype, int64_t count, const void *y,
                                   const void *dy, void *dx, cudaStream_t stream);
ct_status ct_cuda_tanh_forward(ct_dtype dtype, int64_t count, const void *x, void *y,
                               cudaStream_t stream);
ct_status ct_cuda_tanh_backward(ct_dtype dtype, int64_t count, const void *y, const void *dy,
                                void *dx, cudaStream_t stream);

/* ---- batchnorm.cu ------------------------------------------------------------- */

/* The statistics and the parameter gradients reduce each channel over many
 * blocks (channel_reduce.cuh); their parts go to the workspace, of
 * ct_cuda_batchnorm_workspace bytes for x: [n, c, inner] (room for the
 * synchronized statistics' sums included). */
size_t ct_cuda_batchnorm_workspace(int n, int c, int inner);
/* dtype: of x, y, dy and dx alike (f32, f16 or bf16); statistics, gamma,
 * beta, running buffers and dparams are f32. */
/* As ct_cpu_batchnorm_stats; in training, also num_batches[0] += 1 when
 * num_batches is not NULL (PyTorch's num_batches_tracked). */
ct_status ct_cuda_batchnorm_stats(ct_dtype dtype, int n, int c, int inner, const void *x,
                                  bool training, float momentum, float eps,
                                  float *running_mean, float *running_var,
                                  int64_t *num_batches, float *stats, void *workspace,
                                  cudaStream_t stream);
/* relu: then max(y, 0) (the fused relu) */
ct_status ct_cuda_batchnorm_apply(ct_dtype dtype, int n, int c, int inner, const void *x,
                                  const float *stats, const float *gamma, const float *beta,
                                  bool relu, void *y, cudaStream_t stream);
/* y = a + b (max(y, 0) when relu), a.stats set: a residual block's add
 * computing its inputs' batchnorms (graph/fuse.c), each rounded to dtype as
 * ct_cuda_batchnorm_apply stores it; a, b and y of dtype, [n, c, inner]. */
ct_status ct_cuda_batchnorm_add(ct_dtype dtype, int n, int c, int inner, ct_bn_input a,
                                ct_bn_input b, bool relu, void *y, cudaStream_t stream);
ct_status ct_cuda_batchnorm_backward_params(ct_dtype dtype, int n, int c, int inner,
                                            const void *x, const void *dy, const float *stats,
                                            float *dparams, void *workspace,
                                            cudaStream_t stream);
/* dy = a + b (relu'd backward by the relu output mask where not NULL: the
 * add of ct_cuda_add) and, as dy is stored, the parameter gradients of
 * ct_cuda_batchnorm_backward_params for bn[0] and, where bn[1].x is not
 * NULL, bn[1], whose dy it is (graph/fuse.c ct_fuse_bn_params): the same
 * bits as the three calls.  workspace: ct_cuda_batchnorm_workspace bytes
 * for each batchnorm, bn[0]'s first. */
ct_status ct_cuda_add_batchnorm_params(ct_dtype dtype, int n, int c, int inner, const void *a,
                                       const void *b, const void *mask, void *dy,
                                       const ct_bn_params_out bn[2], void *workspace,
                                       cudaStream_t stream);
/* dx of ct_cuda_maxpool2x2_backward (every input in one window:
 * ct_cuda_maxpool2x2_backward_fits) and, as it is stored, the parameter
 * gradients of the batchnorms whose dy it is, as
 * ct_cuda_add_batchnorm_params (conv -> batchnorm -> relu -> max pool). */
ct_status ct_cuda_maxpool2x2_backward_batchnorm_params(ct_dtype dtype, const ct_pool2d_shape *s,
                                                       const void *x, const void *dy, void *dx,
                                                       bool relu, const ct_bn_params_out bn[2],
                                                       void *workspace, cudaStream_t stream);
/* count: M of the gradient's formula from device memory (the synchronized
 * backward, below); NULL: n*inner. */
ct_status ct_cuda_batchnorm_backward_data(ct_dtype dtype, int n, int c, int inner,
                                          const void *x, const void *dy, const float *stats,
                                          const float *gamma, const float *dparams,
                                          const double *count, void *dx, cudaStream_t stream);

/* ---- batchnorm_sync.cu ----------------------------------------------------------- */

/* Synchronized batchnorm (ct_plan_set_sync_bn) on the GPU: the statistics
 * and dx over every rank's batch, as ct_cpu_batchnorm_stats_synced and
 * ct_cpu_batchnorm_backward_data_synced compute them, with the sums over
 * the ranks queued on the stream (ranks->device: NCCL).  The workspace of
 * the backward data: ct_cuda_batchnorm_sync_workspace(c) bytes. */
size_t ct_cuda_batchnorm_sync_workspace(int c);
ct_status ct_cuda_batchnorm_stats_synced(ct_dtype dtype, int n, int c, int inner,
                                         const void *x, float momentum, float eps,
                                         float *running_mean, float *running_var,
                                         int64_t *num_batches, float *stats,
                                         const ct_rank_sum *ranks, void *workspace,
                                         cudaStream_t stream);
ct_status ct_cuda_batchnorm_backward_data_synced(ct_dtype dtype, int n, int c, int inner,
                                                 const void *x, const void *dy,
                                                 const float *stats, const float *gamma,
                                                 const float *dparams, void *dx,
                                                 const ct_rank_sum *ranks, void *workspace,
                                                 cudaStream_t stream);

/* ---- dropout.cu ------------------------------------------------------------------ */

/* The mask of ct_cpu_dropout bit for bit (the same Philox stream), for the
 * step in *values (device memory, graph/backend.h). */
ct_status ct_cuda_dropout(ct_dtype dtype, int64_t count, const void *x, void *y, float p,
                          uint64_t seed, uint32_t rng_stream, const ct_step_values *values,
                          cudaStream_t stream);

/* ---- softmax.cu ---------------------------------------------------------------------- */

ct_status ct_cuda_softmax_forward(int n, int c, const float *x, float *y, cudaStream_t stream);
ct_status ct_cuda_softmax_backward(int n, int c, const float *y, const float *dy, float *dx,
                                   cudaStream_t stream);
/* A row whose label is outside [0, c) makes the loss NaN and lowers
 * *bad_row (device memory) to that row if smaller: the caller sets it to
 * CT_CUDA_NO_BAD_ROW beforehand and reads it after synchronizing. */
#define CT_CUDA_NO_BAD_ROW 0x7f7f7f7f /* what cudaMemset(0x7f) writes in an int */
/* The backward that a cross-entropy's kernel computes too (the loss's
 * gradient fused in): dlogits for a dloss of seed times *seed_scale
 * (device memory; NULL: 1), as the fill and the backward kernels would
 * give it. */
typedef struct ct_cuda_ce_grad {
    void *dlogits; /* the logits' dtype */
    float seed;
    const float *seed_scale;
} ct_cuda_ce_grad;
/* Whether the forward kernel (one block) takes the gradient of [n, c]
 * logits too: at most CE_FUSE_MAX_LOGITS of them (softmax.cu); wider, the
 * backward kernel's blocks spread it over the GPU. */
bool ct_cuda_cross_entropy_fuses(int n, int c);
/* dtype: of logits and dlogits (f32, f16 or bf16); the loss and dloss are
 * f32.  grad: NULL, or the gradient wanted too (ct_cuda_cross_entropy_fuses). */
ct_status ct_cuda_cross_entropy_forward(ct_dtype dtype, int n, int c, const void *logits,
                                        const void *labels, bool labels_i64,
                                        float label_smoothing, float *loss, int *bad_row,
                                        int32_t *found_inf, const ct_cuda_ce_grad *grad,
                                        cudaStream_t stream);
ct_status ct_cuda_cross_entropy_backward(ct_dtype dtype, int n, int c, const void *logits,
                                         const void *labels, bool labels_i64,
                                         float label_smoothing, const float *dloss,
                                         void *dlogits, cudaStream_t stream);

/* ---- tensor_ops.cu ------------------------------------------------------------------- */

/* y = value, times *scale where scale is not NULL (device memory) */
ct_status ct_cuda_fill(int64_t count, float value, const float *scale, float *y,
                       cudaStream_t stream);
/* y = x converted between f32, f16 and bf16 (to 16 bits: nearest even) */
ct_status ct_cuda_cast(int64_t count, const void *x, ct_dtype from, void *y, ct_dtype to,
                       cudaStream_t stream);
/* Copies count elements of `dtype` (its size: 2 or 4 bytes). */
ct_status ct_cuda_copy(ct_dtype dtype, int64_t count, const void *x, void *y,
                       cudaStream_t stream);
/* dtype: of a, b and y alike (f32, f16 or bf16; 16 bits: the f32 sum rounded) */
/* y = a + b, then max(y, 0) if relu (the fused relu), or where mask is
 * given ct_relu_grad(mask, a + b) (a fused relu_bwd; mask: that relu's
 * output, of the same dtype) */
ct_status ct_cuda_add(ct_dtype dtype, int64_t count, const void *a, const void *b, bool relu,
                      const void *mask, void *y, cudaStream_t stream);
/* Copies of elements of `dtype` (any size: the bytes move unchanged). */
ct_status ct_cuda_concat(ct_dtype dtype, int n, int inner, int n_inputs, const int *channels,
                         const void *const *xs, void *y, cudaStream_t stream);
ct_status ct_cuda_slice_channels(ct_dtype dtype, int n, int inner, int c_total, int start,
                                 int count, const void *x, void *y, cudaStream_t stream);
/* y[r, ch, i] += bias[ch] (bias f32; NULL: none), then y = max(y, 0) if
 * relu, y: [rows, c, inner] of dtype (f32, f16, bf16; a 16-bit y rounded
 * once more): the epilogue of the vendor GEMMs and convolutions; nothing to
 * do, no launch. */
ct_status ct_cuda_add_bias(ct_dtype dtype, int rows, int c, int inner, const float *bias,
                           bool relu, void *y, cudaStream_t stream);

/* ---- optim.cu ------------------------------------------------------------------------ */

/* Up to CT_CUDA_GROUP_MAX tensors that one optimizer update runs on in one
 * launch, passed to the kernel by value (about 2 KB of the 4 KB a kernel's
 * parameters may take): arrays[t] are tensor t's param, grad and state
 * buffers (momentum; exp_avg, exp_avg_sq), count[t] its elements. */
enum { CT_CUDA_GROUP_MAX = 48 };
typedef struct ct_cuda_group {
    int n;
    float *arrays[CT_CUDA_GROUP_MAX][4];
    int64_t count[CT_CUDA_GROUP_MAX];
} ct_cuda_group;

/* The learning rate and the step count come from *values (device memory,
 * graph/backend.h), so that a replayed step updates with this step's.  The
 * _group forms update every tensor of `group` in one launch, each exactly
 * as the single form would. */
ct_status ct_cuda_sgd_update(int64_t count, float *param, const float *grad,
                             float *momentum_buf, const ct_step_values *values, float momentum,
                             float dampening, float weight_decay, bool nesterov,
                             cudaStream_t stream);
ct_status ct_cuda_adam_update(int64_t count, float *param, const float *grad, float *exp_avg,
                              float *exp_avg_sq, const ct_step_values *values, float beta1,
                              float beta2, float eps, float weight_decay, bool decoupled,
                              cudaStream_t stream);
/* *found = 1 (else 0), and values->found_inf = 1 (else as it was), when
 * an element of group's arrays[t][0] is inf or NaN; values may be NULL. */
ct_status ct_cuda_check_finite(const ct_cuda_group *group, int32_t *found,
                               ct_step_values *values, cudaStream_t stream);
ct_status ct_cuda_sgd_update_group(const ct_cuda_group *group, const ct_step_values *values,
                                   float momentum, float dampening, float weight_decay,
                                   bool nesterov, cudaStream_t stream);
ct_status ct_cuda_adam_update_group(const ct_cuda_group *group, const ct_step_values *values,
                                    float beta1, float beta2, float eps, float weight_decay,
                                    bool decoupled, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
