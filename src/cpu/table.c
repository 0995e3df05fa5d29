/*
 * The CPU backend's op table (graph/impl.h): for each op, its kernels in
 * src/cpu/<family>.c in order of preference.  Most ops have one, "native".
 * Convolution has four: the AVX2 direct kernels (conv_avx2.c) for few
 * input channels, Winograd F(4x4,3x3) (conv_winograd.c) for the 3x3
 * stride-1 layers they do not take, on AVX-512 CPUs the panel GEMM
 * (conv_panel.c) for the other forwards, and im2col + GEMM (conv.c) for
 * every shape and on CPUs without AVX2 (or with CT_CPU_SIMD=0).  All three apply
 * a fused relu, and a fused 2x2 max pool after it, as they store.
 */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "cpu/backend.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_pooled.h"
#include "cpu/conv_winograd.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"
#include "graph/impl.h"
#include "graph/node_args.h"
#include "graph/prepared.h"
#include "ops/ops.h"

static bool fused_relu(const ct_exec *exec, const ct_tensor *node)
{
    return exec->epilogue && exec->epilogue[node->id] == CT_EPILOGUE_RELU;
}

/* ---- convolution: three paths ------------------------------------------------ */

typedef void (*conv_forward_fn)(const ct_conv2d_shape *s, const float *x, const float *w,
                                const float *bias, bool relu, float *y, void *workspace);
typedef void (*conv_backward_fn)(const ct_conv2d_shape *s, const float *a, const float *b,
                                 float *out, void *workspace);

/* The fused 2x2 max pool of a path without its own: the convolution with
 * its relu into y, then the pool; with codes, each window's argmax code
 * over y's values (ct_exec_pool_codes), on one thread (codes land on
 * values not of their own image). */
static void pool_after(const ct_conv2d_shape *s, float *y, float *pooled, bool codes)
{
    if (codes) {
        ct_cpu_maxpool2x2_planes_codes(s->n_batch * s->out_channels, s->out_h, s->out_w, y,
                                       pooled, (uint8_t *)y);
        return;
    }
    ct_pool2d_shape pool = {s->n_batch, s->out_channels, s->out_h, s->out_w, s->out_h / 2,
                            s->out_w / 2, 2, 2, 2, 2, 0, 0, false};
    ct_cpu_maxpool2d_forward(&pool, y, pooled);
}

/* conv2d on one path: the relu epilogue, and the eval max pool it computes
 * too (ct_exec.pool_into), as the plan fused them. */
static ct_status run_conv_forward_on(const ct_exec *exec, const ct_tensor *node,
                                     conv_forward_fn forward, const float *weights)
{
    const ct_conv2d_shape *s = &node->attr.conv;
    const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
    forward(s, ct_in(exec, node, 0), weights, ct_in_opt(exec, node, 2),
            pool || fused_relu(exec, node), ct_out(exec, node), exec->workspace);
    if (pool)
        pool_after(s, ct_out(exec, node), ct_out(exec, pool), ct_exec_pool_codes(exec, node));
    return CT_OK;
}

static ct_status run_conv_forward(const ct_exec *exec, const ct_tensor *node,
                                  conv_forward_fn forward)
{
    return run_conv_forward_on(exec, node, forward, ct_in(exec, node, 1));
}

/* A weight gradient whose kernel does not sum the bias itself: the bias
 * node's kernel, run here, on dy (the weight gradient's second input). */
static void bias_grad_after(const ct_exec *exec, const ct_tensor *node)
{
    float *db = ct_exec_bias_grad(exec, node);
    if (db) {
        ct_nci dims = ct_nci_of(node->src[1]);
        ct_cpu_channel_sum(dims.n, dims.c, dims.inner, ct_in(exec, node, 1), db);
    }
}

/* A weight gradient that computes the max pool's backward making its dy
 * (and the relu's fused in it; CT_FUSES_POOL_BWD, graph/fuse.c): every
 * path runs conv_pooled.c's kernel for it, and says so by returning true. */
static bool run_pooled_weight(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *pool = node->op == CT_OP_CONV2D_BWD_WEIGHT
                                ? ct_exec_pool_bwd_of(exec, node)
                                : NULL;
    if (!pool)
        return false;
    const uint8_t *codes = ct_exec_pool_codes(exec, pool->src[0]);
    ct_cpu_conv2d_pooled_backward_weight(&node->attr.conv, &pool->attr.pool,
                                         ct_in(exec, node, 0), codes ? NULL : ct_in(exec, pool, 0),
                                         codes, ct_in(exec, pool, 1),
                                         ct_exec_relu_mask(exec, pool) != NULL, ct_out(exec, node),
                                         ct_exec_bias_grad(exec, node));
    return true;
}

/* Every convolution path takes the fusions of their kernels' epilogues;
 * the max pool's backward (into the weight gradient) where conv_pooled.c's
 * kernel fits the shapes and the tensors are f32. */
static bool conv_fuses_with(const ct_tensor *node, unsigned fusion, const ct_tensor *other)
{
    if (fusion != CT_FUSES_POOL_BWD)
        return true;
    return other && node->dtype == CT_F32 && node->src[0]->dtype == CT_F32 &&
           other->dtype == CT_F32 && other->src[0]->dtype == CT_F32 &&
           other->src[1]->dtype == CT_F32 &&
           ct_cpu_conv2d_pooled_weight_fits(&node->attr.conv, &other->attr.pool);
}

static ct_status run_conv_backward(const ct_exec *exec, const ct_tensor *node,
                                   conv_backward_fn backward)
{
    if (run_pooled_weight(exec, node))
        return CT_OK;
    backward(&node->attr.conv, ct_in(exec, node, 0), ct_in(exec, node, 1),
             ct_out(exec, node), exec->workspace);
    if (node->op == CT_OP_CONV2D_BWD_WEIGHT)
        bias_grad_after(exec, node);
    return CT_OK;
}

static void im2col_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                           const float *bias, bool relu, float *y, void *workspace)
{
    (relu ? ct_cpu_conv2d_forward_relu : ct_cpu_conv2d_forward)(s, x, w, bias, y, workspace);
}

static ct_status run_im2col(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    if (node->op == CT_OP_CONV2D)
        return run_conv_forward(exec, node, im2col_forward);
    return run_conv_backward(exec, node, node->op == CT_OP_CONV2D_BWD_DATA
                                             ? ct_cpu_conv2d_backward_data
                                             : ct_cpu_conv2d_backward_weight);
}

static size_t im2col_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_conv2d_im2col_workspace(&node->attr.conv);
}

/* Every weight gradient path gives the bias gradient (CT_FUSES_BIAS_GRAD:
 * one node less; the direct kernel sums dy while it has it in cache). */
static const ct_impl conv_im2col = {
    .name = "im2col",
    .fuses = CT_FUSES_RELU | CT_FUSES_RELU_MAXPOOL2X2 | CT_FUSES_POOL_CODES | CT_FUSES_BIAS_GRAD |
             CT_FUSES_POOL_BWD,
    .fuses_with = conv_fuses_with,
    .workspace = im2col_workspace,
    .run = run_im2col,
};

/* A convolution whose kernel's edge taps only ever meet padding (VGG-11's
 * last 3x3 layers on 1x1 planes: 1 tap of 9 reaches the input) runs on the
 * kernel of its live taps (ct_cpu_conv2d_cropped), im2col + GEMM (a 1x1
 * crop at stride 1 is the GEMM alone): the weights cropped into the
 * workspace, the weight gradient computed there and spread back with 0
 * for the dead taps, before the im2col workspace of the cropped shape. */
static size_t cropped_floats(const ct_conv2d_shape *c)
{
    size_t count = (size_t)c->out_channels * (c->in_channels / c->groups) * c->kernel_h *
                   c->kernel_w;
    return (count + 15) / 16 * 16; /* the im2col workspace after it 64-byte aligned */
}

static bool cropped_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    ct_conv2d_shape c;
    int row, column;
    return ct_cpu_conv2d_cropped(&node->attr.conv, &c, &row, &column);
}

static size_t cropped_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    ct_conv2d_shape c;
    int row, column;
    if (!ct_cpu_conv2d_cropped(&node->attr.conv, &c, &row, &column))
        return 0;
    return sizeof(float) * cropped_floats(&c) + ct_cpu_conv2d_im2col_workspace(&c);
}

static ct_status run_cropped(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    const ct_conv2d_shape *s = &node->attr.conv;
    ct_conv2d_shape c;
    int row = 0, column = 0;
    bool fits = ct_cpu_conv2d_cropped(s, &c, &row, &column);
    CT_ASSERT(fits);
    float *weights = (float *)exec->workspace;
    void *rest = weights + cropped_floats(&c);
    if (node->op == CT_OP_CONV2D) {
        const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
        ct_cpu_conv2d_crop_weights(s, &c, row, column, ct_in(exec, node, 1), weights);
        im2col_forward(&c, ct_in(exec, node, 0), weights, ct_in_opt(exec, node, 2),
                       pool || fused_relu(exec, node), ct_out(exec, node), rest);
        if (pool)
            pool_after(s, ct_out(exec, node), ct_out(exec, pool), ct_exec_pool_codes(exec, node));
    } else if (node->op == CT_OP_CONV2D_BWD_DATA) {
        ct_cpu_conv2d_crop_weights(s, &c, row, column, ct_in(exec, node, 1), weights);
        ct_cpu_conv2d_backward_data(&c, ct_in(exec, node, 0), weights, ct_out(exec, node), rest);
    } else if (!run_pooled_weight(exec, node)) {
        ct_cpu_conv2d_backward_weight(&c, ct_in(exec, node, 0), ct_in(exec, node, 1), weights,
                                      rest);
        ct_cpu_conv2d_uncrop_weights(s, &c, row, column, weights, ct_out(exec, node));
        bias_grad_after(exec, node);
    }
    return CT_OK;
}

static const ct_impl conv_cropped = {
    .name = "cropped",
    .fuses = CT_FUSES_RELU | CT_FUSES_RELU_MAXPOOL2X2 | CT_FUSES_POOL_CODES | CT_FUSES_BIAS_GRAD |
             CT_FUSES_POOL_BWD,
    .fuses_with = conv_fuses_with,
    .supports = cropped_supports,
    .workspace = cropped_workspace,
    .run = run_cropped,
};

#ifdef CT_CPU_HAVE_AVX2_KERNELS
static bool avx2_ready(const ct_backend *backend)
{
    (void)backend;
    return ct_cpu_simd_avx2();
}

static bool direct_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_conv2d_direct_fits(&node->attr.conv);
}

static size_t direct_workspace(const ct_backend *backend, const ct_tensor *node)
{
    return ct_cpu_conv2d_direct_workspace(&node->attr.conv, backend->n_threads);
}

/* The direct kernel pools as it stores: in evaluation y is never written;
 * in training (the pool's backward reads y) each image is pooled from y
 * while it is in cache, or y gets the windows' argmax codes (all the
 * pool's backward fused into the weight gradient reads). */
static ct_status run_direct(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
    if (node->op == CT_OP_CONV2D && pool) {
        ct_cpu_conv2d_direct_forward_relu_maxpool(&node->attr.conv, ct_in(exec, node, 0),
                                                  ct_in(exec, node, 1), ct_in_opt(exec, node, 2),
                                                  exec->training ? ct_out(exec, node) : NULL,
                                                  ct_exec_pool_codes(exec, node) != NULL,
                                                  ct_out(exec, pool), exec->workspace);
        return CT_OK;
    }
    if (node->op == CT_OP_CONV2D)
        return run_conv_forward(exec, node, ct_cpu_conv2d_direct_forward);
    if (node->op == CT_OP_CONV2D_BWD_DATA)
        return run_conv_backward(exec, node, ct_cpu_conv2d_direct_backward_data);
    if (run_pooled_weight(exec, node))
        return CT_OK;
    ct_cpu_conv2d_direct_backward_weight(&node->attr.conv, ct_in(exec, node, 0),
                                         ct_in(exec, node, 1), ct_out(exec, node),
                                         ct_exec_bias_grad(exec, node), exec->workspace);
    return CT_OK;
}

static const ct_impl conv_direct = {
    .name = "direct",
    .fuses = CT_FUSES_RELU | CT_FUSES_RELU_MAXPOOL2X2 | CT_FUSES_POOL_CODES | CT_FUSES_BIAS_GRAD |
             CT_FUSES_POOL_BWD,
    .fuses_with = conv_fuses_with,
    .supports = direct_supports,
    .ready = avx2_ready,
    .workspace = direct_workspace,
    .run = run_direct,
};

static bool winograd_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_conv2d_winograd_fits(&node->attr.conv);
}

static size_t winograd_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_conv2d_winograd_workspace(&node->attr.conv);
}

/* An inference run keeps the transformed weights (graph/prepared.h). */
static ct_status run_winograd(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    if (node->op == CT_OP_CONV2D) {
        const ct_conv2d_shape *s = &node->attr.conv;
        bool fresh = false;
        float *u = ct_exec_prepared(backend, exec, node, node->src[1],
                                    ct_cpu_conv2d_winograd_weights_bytes(s), &fresh);
        if (!u)
            return run_conv_forward(exec, node, ct_cpu_conv2d_winograd_forward);
        if (!fresh)
            ct_cpu_conv2d_winograd_transform_weights(s, ct_in(exec, node, 1), u);
        return run_conv_forward_on(exec, node, ct_cpu_conv2d_winograd_forward_transformed, u);
    }
    return run_conv_backward(exec, node, node->op == CT_OP_CONV2D_BWD_DATA
                                             ? ct_cpu_conv2d_winograd_backward_data
                                             : ct_cpu_conv2d_winograd_backward_weight);
}

static const ct_impl conv_winograd = {
    .name = "winograd",
    .fuses = CT_FUSES_RELU | CT_FUSES_RELU_MAXPOOL2X2 | CT_FUSES_POOL_CODES | CT_FUSES_BIAS_GRAD |
             CT_FUSES_POOL_BWD,
    .fuses_with = conv_fuses_with,
    .supports = winograd_supports,
    .ready = avx2_ready,
    .workspace = winograd_workspace,
    .run = run_winograd,
};

static bool avx512_ready(const ct_backend *backend)
{
    (void)backend;
    return ct_cpu_simd_avx512();
}

static bool panel_supports(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_conv2d_panel_fits(&node->attr.conv);
}

static size_t panel_workspace(const ct_backend *backend, const ct_tensor *node)
{
    return ct_cpu_conv2d_panel_workspace(&node->attr.conv, backend->n_threads);
}

static ct_status run_panel(ct_backend *backend, const ct_exec *exec, const ct_tensor *node)
{
    (void)backend;
    return run_conv_forward(exec, node, ct_cpu_conv2d_panel_forward);
}

/* The forward only (the backward ops' lists do not hold it). */
static const ct_impl conv_panel = {
    .name = "panel",
    .fuses = CT_FUSES_RELU | CT_FUSES_RELU_MAXPOOL2X2 | CT_FUSES_POOL_CODES,
    .supports = panel_supports,
    .ready = avx512_ready,
    .workspace = panel_workspace,
    .run = run_panel,
};

#define CONV_FORWARD_IMPLS {&conv_cropped, &conv_direct, &conv_winograd, &conv_panel, &conv_im2col}
#define CONV_IMPLS {&conv_cropped, &conv_direct, &conv_winograd, &conv_im2col}
#else
#define CONV_FORWARD_IMPLS {&conv_cropped, &conv_im2col}
#define CONV_IMPLS {&conv_cropped, &conv_im2col}
#endif

/* ---- the other ops: one kernel each ------------------------------------------------- */

static ct_status run_channel_sum(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node->src[0]);
    ct_cpu_channel_sum(dims.n, dims.c, dims.inner, ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

/* linear applies a fused relu as it stores */
static ct_status run_linear(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0], *w = node->src[1];
    (fused_relu(exec, node) ? ct_cpu_linear_forward_relu : ct_cpu_linear_forward)(
        (int)x->shape[0], (int)x->shape[1], (int)w->shape[0], ct_in(exec, node, 0),
        ct_in(exec, node, 1), ct_in_opt(exec, node, 2), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_linear_bwd_data(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *dy = node->src[0], *w = node->src[1];
    ct_cpu_linear_backward_data((int)dy->shape[0], (int)w->shape[1], (int)w->shape[0],
                                ct_in(exec, node, 0), ct_in(exec, node, 1),
                                (const float *)ct_exec_relu_mask(exec, node), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_linear_bwd_weight(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *x = node->src[0], *dy = node->src[1];
    ct_cpu_linear_backward_weight((int)x->shape[0], (int)x->shape[1], (int)dy->shape[1],
                                  ct_in(exec, node, 0), ct_in(exec, node, 1),
                                  ct_out(exec, node));
    bias_grad_after(exec, node);
    return CT_OK;
}

static ct_status run_maxpool2d(const ct_exec *exec, const ct_tensor *node)
{
    if (node->dtype == CT_U8)
        ct_cpu_maxpool2d_forward_u8(&node->attr.pool, ct_exec_data(exec, node->src[0]),
                                    ct_exec_data(exec, node));
    else
        ct_cpu_maxpool2d_forward(&node->attr.pool, ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_maxpool2d_bwd(const ct_exec *exec, const ct_tensor *node)
{
    bool relu = exec->epilogue && exec->epilogue[node->id] == CT_EPILOGUE_RELU_BWD;
    ct_cpu_maxpool2d_backward(&node->attr.pool, ct_in(exec, node, 0), ct_in(exec, node, 1),
                              relu, ct_out(exec, node));
    return CT_OK;
}

static ct_status run_avgpool2d(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_avgpool2d_forward(&node->attr.pool, ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_avgpool2d_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_avgpool2d_backward(&node->attr.pool, ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_global_avgpool(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node->src[0]);
    ct_cpu_global_avgpool_forward(dims.n, dims.c, dims.inner, ct_in(exec, node, 0),
                                  ct_out(exec, node));
    return CT_OK;
}

static ct_status run_global_avgpool_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node);
    ct_cpu_global_avgpool_backward(dims.n, dims.c, dims.inner, ct_in(exec, node, 0),
                                   (const float *)ct_exec_relu_mask(exec, node),
                                   ct_out(exec, node));
    return CT_OK;
}

typedef void (*unary_fn)(int64_t count, const float *x, float *y);
typedef void (*binary_fn)(int64_t count, const float *a, const float *b, float *y);

static ct_status run_unary(const ct_exec *exec, const ct_tensor *node, unary_fn kernel)
{
    kernel(ct_tensor_numel(node), ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_binary(const ct_exec *exec, const ct_tensor *node, binary_fn kernel)
{
    kernel(ct_tensor_numel(node), ct_in(exec, node, 0), ct_in(exec, node, 1),
           ct_out(exec, node));
    return CT_OK;
}

static ct_status run_relu(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_relu_forward);
}

static ct_status run_relu_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_relu_backward);
}

static ct_status run_sigmoid(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_sigmoid_forward);
}

static ct_status run_sigmoid_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_sigmoid_backward);
}

static ct_status run_tanh(const ct_exec *e, const ct_tensor *n)
{
    return run_unary(e, n, ct_cpu_tanh_forward);
}

static ct_status run_tanh_bwd(const ct_exec *e, const ct_tensor *n)
{
    return run_binary(e, n, ct_cpu_tanh_backward);
}

static ct_status run_add(const ct_exec *e, const ct_tensor *n)
{
    const float *mask = ct_exec_relu_mask(e, n);
    if (mask) {
        ct_cpu_add_relu_grad(ct_tensor_numel(n), ct_in(e, n, 0), ct_in(e, n, 1), mask,
                             ct_out(e, n));
        return CT_OK;
    }
    ct_bn_input a, b;
    if (ct_exec_bn_add_inputs(e, n, &a, &b)) { /* a residual block's batchnorms (graph/fuse.c) */
        ct_nci dims = ct_nci_of(n);
        ct_cpu_batchnorm_add(dims.n, dims.c, dims.inner, a, b, fused_relu(e, n), ct_out(e, n));
        return CT_OK;
    }
    return run_binary(e, n, fused_relu(e, n) ? ct_cpu_add_relu : ct_cpu_add);
}

static ct_status run_bn_stats(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node->src[0]);
    if (exec->training && exec->sync_bn)
        CT_TRY((ct_status)ct_cpu_batchnorm_stats_synced(
            dims.n, dims.c, dims.inner, ct_in(exec, node, 0), node->attr.bn.momentum,
            node->attr.bn.eps, ct_exec_data(exec, node->src[1]), ct_exec_data(exec, node->src[2]),
            ct_out(exec, node), exec->sync_bn, exec->workspace));
    else
        ct_cpu_batchnorm_stats(dims.n, dims.c, dims.inner, ct_in(exec, node, 0), exec->training,
                               node->attr.bn.momentum, node->attr.bn.eps,
                               ct_exec_data(exec, node->src[1]),
                               ct_exec_data(exec, node->src[2]), ct_out(exec, node));
    if (exec->training && node->n_src > 3)
        (*(int64_t *)ct_exec_data(exec, node->src[3]))++;
    return CT_OK;
}

static ct_status run_bn_apply(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node);
    ct_cpu_batchnorm_apply(dims.n, dims.c, dims.inner, ct_in(exec, node, 0),
                           ct_in(exec, node, 1), ct_in(exec, node, 2), ct_in(exec, node, 3),
                           fused_relu(exec, node), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_bn_bwd_params(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node->src[0]);
    ct_cpu_batchnorm_backward_params(dims.n, dims.c, dims.inner, ct_in(exec, node, 0),
                                     ct_in(exec, node, 1), ct_in(exec, node, 2),
                                     ct_out(exec, node));
    return CT_OK;
}

static ct_status run_bn_bwd_data(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node);
    if (exec->training && exec->sync_bn)
        return (ct_status)ct_cpu_batchnorm_backward_data_synced(
            dims.n, dims.c, dims.inner, ct_in(exec, node, 0), ct_in(exec, node, 1),
            ct_in(exec, node, 2), ct_in(exec, node, 3), ct_in(exec, node, 4), ct_out(exec, node),
            exec->sync_bn, exec->workspace);
    ct_cpu_batchnorm_backward_data(dims.n, dims.c, dims.inner, ct_in(exec, node, 0),
                                   ct_in(exec, node, 1), ct_in(exec, node, 2),
                                   ct_in(exec, node, 3), ct_in(exec, node, 4),
                                   ct_out(exec, node));
    return CT_OK;
}

static ct_status run_dropout(const ct_exec *exec, const ct_tensor *node)
{
    int64_t count = ct_tensor_numel(node);
    if (!exec->training) {
        ct_cpu_copy(count, ct_in(exec, node, 0), ct_out(exec, node));
        return CT_OK;
    }
    ct_cpu_dropout(count, ct_in(exec, node, 0), ct_out(exec, node), node->attr.dropout.p,
                   exec->seed, node->attr.dropout.stream, (uint32_t)exec->step);
    return CT_OK;
}

static ct_status run_concat(const ct_exec *exec, const ct_tensor *node)
{
    int channels[CT_MAX_SRC];
    const float *xs[CT_MAX_SRC];
    for (int i = 0; i < node->n_src; i++) {
        channels[i] = (int)node->src[i]->shape[1];
        xs[i] = ct_in(exec, node, i);
    }
    ct_nci dims = ct_nci_of(node);
    ct_cpu_concat(dims.n, dims.inner, node->n_src, channels, xs, ct_out(exec, node));
    return CT_OK;
}

static ct_status run_slice_channels(const ct_exec *exec, const ct_tensor *node)
{
    ct_nci dims = ct_nci_of(node->src[0]);
    ct_cpu_slice_channels(dims.n, dims.inner, dims.c, node->attr.slice.start,
                          node->attr.slice.count, ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_softmax(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_softmax_forward((int)node->shape[0], (int)node->shape[1], ct_in(exec, node, 0),
                           ct_out(exec, node));
    return CT_OK;
}

static ct_status run_softmax_bwd(const ct_exec *exec, const ct_tensor *node)
{
    ct_cpu_softmax_backward((int)node->shape[0], (int)node->shape[1], ct_in(exec, node, 0),
                            ct_in(exec, node, 1), ct_out(exec, node));
    return CT_OK;
}

static ct_status run_cross_entropy(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *logits = node->src[0], *labels = node->src[1];
    int n = (int)logits->shape[0], c = (int)logits->shape[1];
    const void *label_data = ct_exec_data(exec, labels);
    bool is_i64 = labels->dtype == CT_I64;
    /* training: the logits' gradient too, where the plan fused it in */
    const ct_tensor *grad = ct_exec_loss_grad(exec, node);
    int bad = ct_cpu_cross_entropy_forward(
        n, c, ct_in(exec, node, 0), label_data, is_i64, node->attr.ce.smoothing,
        grad ? ct_cpu_fill_value(exec, grad->src[0]) : 0.0f, ct_out(exec, node),
        grad ? (float *)ct_exec_data(exec, grad) : NULL);
    if (bad < 0) {
        /* a loss that is not finite: this step updates nothing (ct_plan_find_nonfinite) */
        if (exec->step_values && !isfinite(*ct_out(exec, node)))
            ((ct_step_values *)exec->step_values)->found_inf = 1;
        return CT_OK;
    }
    long long value = is_i64 ? (long long)((const int64_t *)label_data)[bad]
                             : (long long)((const int32_t *)label_data)[bad];
    return ct_set_error(CT_ERR_ARG,
                        "cross_entropy: label %lld in row %d of '%s' is not a class index in "
                        "[0, %d)",
                        value, bad, ct_tensor_name(labels), c);
}

static ct_status run_cross_entropy_bwd(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *logits = node->src[1], *labels = node->src[2];
    ct_cpu_cross_entropy_backward((int)logits->shape[0], (int)logits->shape[1],
                                  ct_in(exec, node, 1), ct_exec_data(exec, labels),
                                  labels->dtype == CT_I64, node->attr.ce.smoothing,
                                  ct_in(exec, node, 0), ct_out(exec, node));
    return CT_OK;
}

/* A cast is a copy here: its 16-bit side is widened before it and rounded
 * after it (cpu/widen.c). */
static ct_status run_cast(const ct_exec *exec, const ct_tensor *node)
{
    memcpy(ct_out(exec, node), ct_in(exec, node, 0), (size_t)ct_tensor_numel(node) * sizeof(float));
    return CT_OK;
}

static void *exec_data(const void *exec, const ct_tensor *t)
{
    return ct_exec_data(exec, t);
}

static ct_status run_custom(const ct_exec *exec, const ct_tensor *node)
{
    return ct_custom_run(node, exec_data, exec, false, NULL);
}


/* An op's one kernel, "native": `fn` run with the node's tensors (and a
 * workspace of workspace_fn's size, or none for NULL). */
#define NATIVE_IMPL(impl, fn, fusions, workspace_fn, fuses_with_fn)                       \
    static ct_status impl##_run(ct_backend *backend, const ct_exec *e, const ct_tensor *n) \
    {                                                                                      \
        (void)backend;                                                                     \
        return fn(e, n);                                                                   \
    }                                                                                      \
    static const ct_impl impl = {.name = "native",                                         \
                                 .fuses = (fusions),                                       \
                                 .fuses_with = (fuses_with_fn),                            \
                                 .workspace = (workspace_fn),                              \
                                 .run = impl##_run}
#define NATIVE_WORKSPACE(impl, fn, fusions, workspace_fn)                                  \
    NATIVE_IMPL(impl, fn, fusions, workspace_fn, NULL)
#define NATIVE(impl, fn, fusions) NATIVE_IMPL(impl, fn, fusions, NULL, NULL)

/* Synchronized batchnorm's sums, for the channels of the node's input. */
static size_t bn_sync_workspace(const ct_backend *backend, const ct_tensor *node)
{
    (void)backend;
    return ct_cpu_batchnorm_sync_workspace(ct_nci_of(node->src[0]).c);
}

NATIVE(channel_sum, run_channel_sum, 0);
NATIVE(linear, run_linear, CT_FUSES_RELU);
/* The relu's backward fuses into an f32 producer only (a backward data, an
 * add, a global average pool's backward): a 16-bit graph's relu output is
 * stored 16-bit, and the kernels read it as float.  So does a batchnorm
 * into an add (cpu/widen.c's f32 copies are of a node's own inputs, and the
 * add would read the batchnorm's). */
static bool relu_bwd_fuses_with(const ct_tensor *producer, unsigned fusion,
                                const ct_tensor *other)
{
    (void)other;
    if (fusion == CT_FUSES_BN_INPUT)
        return producer->dtype == CT_F32;
    return fusion != CT_FUSES_RELU_BWD || producer->dtype == CT_F32;
}
NATIVE(linear_bwd_weight, run_linear_bwd_weight, CT_FUSES_BIAS_GRAD);

/*
 * On a team of two threads, a linear layer's backward data and its weight
 * gradient (the plan's next node, from the same dy: ct_impl.run_pair) run
 * at once, one a thread, each kernel on its own thread (a region inside a
 * region runs on its caller alone, threads.c).  Each split over both
 * threads, SimpleCNN's linear layers ran about as fast as on one (the
 * split by w's rows reads x and dy written by the other core's share of
 * the batch); side by side the step is 8 us shorter (docs/perf.md,
 * 2026-12-07, seventh session).  The convolutions keep their split: their
 * pair was 30 us slower (each thread then reads every image, half of them
 * from the other core).  More threads than two would sit idle in a pair,
 * so only a team of two pairs.  The bits are those of any thread count.
 */
static ct_status run_linear_backward(ct_backend *backend, const ct_exec *e, const ct_tensor *n)
{
    (void)backend;
    return n->op == CT_OP_LINEAR_BWD_DATA ? run_linear_bwd_data(e, n) : run_linear_bwd_weight(e, n);
}

typedef struct linear_pair {
    const ct_exec *exec;
    const ct_tensor *node[2];
    ct_status status[2];
} linear_pair;

static void linear_pair_part(void *arg)
{
    linear_pair *pair = arg;
    for (int k = ct_cpu_thread_num(); k < 2; k += ct_cpu_team_size())
        pair->status[k] = run_linear_backward(NULL, pair->exec, pair->node[k]);
}

static const ct_impl linear_bwd_data;

/* f32 (a 16-bit node runs on widened copies, cpu/widen.c, one node at a
 * time), the partner's dy the node's, and at run time on a team of two */
static bool linear_pairs_with(const ct_tensor *node, const ct_tensor *partner,
                              const ct_impl *partner_impl)
{
    if (partner->op != CT_OP_LINEAR_BWD_WEIGHT || partner->src[1] != node->src[0] ||
        ct_node_touches_half(node) || ct_node_touches_half(partner))
        return false;
    return !partner_impl || (partner_impl == &linear_bwd_weight && ct_cpu_max_threads() == 2);
}

/* Neither kernel has a workspace: the pair's exec serves both. */
static ct_status linear_pair_run(ct_backend *backend, const ct_exec *exec, const ct_tensor *data,
                                 const ct_tensor *weight)
{
    (void)backend;
    linear_pair pair = {exec, {data, weight}, {CT_OK, CT_OK}};
    ct_cpu_parallel(2, linear_pair_part, &pair);
    return pair.status[0] != CT_OK ? pair.status[0] : pair.status[1];
}

static const ct_impl linear_bwd_data = {.name = "native",
                                        .fuses = CT_FUSES_RELU_BWD,
                                        .fuses_with = relu_bwd_fuses_with,
                                        .run = run_linear_backward,
                                        .pairs_with = linear_pairs_with,
                                        .run_pair = linear_pair_run};
NATIVE(maxpool2d, run_maxpool2d, 0);
NATIVE(maxpool2d_bwd, run_maxpool2d_bwd, CT_FUSES_RELU_BWD);
NATIVE(avgpool2d, run_avgpool2d, 0);
NATIVE(avgpool2d_bwd, run_avgpool2d_bwd, 0);
NATIVE(global_avgpool, run_global_avgpool, 0);
NATIVE_IMPL(global_avgpool_bwd, run_global_avgpool_bwd, CT_FUSES_RELU_BWD, NULL,
            relu_bwd_fuses_with);
NATIVE(relu, run_relu, 0);
NATIVE(relu_bwd, run_relu_bwd, 0);
NATIVE(sigmoid, run_sigmoid, 0);
NATIVE(sigmoid_bwd, run_sigmoid_bwd, 0);
NATIVE(tanh_, run_tanh, 0);
NATIVE(tanh_bwd, run_tanh_bwd, 0);
NATIVE_WORKSPACE(bn_stats, run_bn_stats, 0, bn_sync_workspace);
NATIVE(bn_apply, run_bn_apply, CT_FUSES_RELU);
NATIVE(bn_bwd_params, run_bn_bwd_params, 0);
NATIVE_WORKSPACE(bn_bwd_data, run_bn_bwd_data, 0, bn_sync_workspace);
NATIVE(dropout, run_dropout, 0);
NATIVE_IMPL(add, run_add, CT_FUSES_RELU | CT_FUSES_RELU_BWD | CT_FUSES_BN_INPUT, NULL,
            relu_bwd_fuses_with);
NATIVE(concat, run_concat, 0);
NATIVE(slice_channels, run_slice_channels, 0);
NATIVE(softmax, run_softmax, 0);
NATIVE(softmax_bwd, run_softmax_bwd, 0);
/* The loss's gradient fused in (CT_FUSES_LOSS_GRAD) for f32 logits: a
 * 16-bit graph's gradient would miss the rounding that cpu/widen.c gives
 * the node's own outputs. */
static bool cross_entropy_fuses_with(const ct_tensor *node, unsigned fusion,
                                     const ct_tensor *other)
{
    (void)fusion, (void)other;
    return node->src[0]->dtype == CT_F32;
}
NATIVE_IMPL(cross_entropy, run_cross_entropy, CT_FUSES_LOSS_GRAD, NULL,
            cross_entropy_fuses_with);
NATIVE(cross_entropy_bwd, run_cross_entropy_bwd, 0);
NATIVE(cast, run_cast, 0);
NATIVE(custom, run_custom, 0);

const ct_impl *const ct_cpu_impls[CT_OP_COUNT][CT_MAX_IMPLS] = {
    [CT_OP_CONV2D] = CONV_FORWARD_IMPLS,
    [CT_OP_CONV2D_BWD_DATA] = CONV_IMPLS,
    [CT_OP_CONV2D_BWD_WEIGHT] = CONV_IMPLS,
    [CT_OP_CHANNEL_SUM] = {&channel_sum},
    [CT_OP_LINEAR] = {&linear},
    [CT_OP_LINEAR_BWD_DATA] = {&linear_bwd_data},
    [CT_OP_LINEAR_BWD_WEIGHT] = {&linear_bwd_weight},
    [CT_OP_MAXPOOL2D] = {&maxpool2d},
    [CT_OP_MAXPOOL2D_BWD] = {&maxpool2d_bwd},
    [CT_OP_AVGPOOL2D] = {&avgpool2d},
    [CT_OP_AVGPOOL2D_BWD] = {&avgpool2d_bwd},
    [CT_OP_GLOBAL_AVGPOOL] = {&global_avgpool},
    [CT_OP_GLOBAL_AVGPOOL_BWD] = {&global_avgpool_bwd},
    [CT_OP_RELU] = {&relu},
    [CT_OP_RELU_BWD] = {&relu_bwd},
    [CT_OP_SIGMOID] = {&sigmoid},
    [CT_OP_SIGMOID_BWD] = {&sigmoid_bwd},
    [CT_OP_TANH] = {&tanh_},
    [CT_OP_TANH_BWD] = {&tanh_bwd},
    [CT_OP_BN_STATS] = {&bn_stats},
    [CT_OP_BN_APPLY] = {&bn_apply},
    [CT_OP_BN_BWD_PARAMS] = {&bn_bwd_params},
    [CT_OP_BN_BWD_DATA] = {&bn_bwd_data},
    [CT_OP_DROPOUT] = {&dropout},
    [CT_OP_ADD] = {&add},
    [CT_OP_CONCAT] = {&concat},
    [CT_OP_SLICE_CHANNELS] = {&slice_channels},
    [CT_OP_SOFTMAX] = {&softmax},
    [CT_OP_SOFTMAX_BWD] = {&softmax_bwd},
    [CT_OP_CROSS_ENTROPY] = {&cross_entropy},
    [CT_OP_CROSS_ENTROPY_BWD] = {&cross_entropy_bwd},
    [CT_OP_FILL] = {&ct_cpu_fill_impl},
    [CT_OP_SGD_UPDATE] = {&ct_cpu_sgd_update_impl},
    [CT_OP_ADAM_UPDATE] = {&ct_cpu_adam_update_impl},
    [CT_OP_CUSTOM] = {&custom},
    [CT_OP_CUSTOM_BWD] = {&custom},
    [CT_OP_CAST] = {&cast},
    [CT_OP_CHECK_FINITE] = {&ct_cpu_check_finite_impl},
    [CT_OP_QCONV2D] = {&ct_cpu_qconv2d},
    [CT_OP_QLINEAR] = {&ct_cpu_qlinear},
};
