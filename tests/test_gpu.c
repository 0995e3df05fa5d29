/*
 * The CUDA backend against the CPU backend: every op forward and backward,
 * optimizer steps, a SimpleCNN training step, the allocator's statistics
 * and its out-of-memory error.
 *
 * Each case builds a small graph through the public API, plans it on "cpu"
 * and on "cuda", writes the same random (never zero) inputs, parameters
 * and buffers to both, runs a training step and compares every output,
 * every gradient and all state afterwards (running statistics, optimizer
 * buffers).  GPU memory is poisoned (NaN) when handed out, so an element a
 * kernel forgets to write fails the comparison.  Each op case runs with
 * native kernels and with vendor kernels (cuBLAS/cuDNN); f32 tolerance is
 * 1e-5 relative to the largest reference value; with TF32 it follows from
 * the precision and the longest dot product K of the case (tf32_tolerance).
 *
 * Without a GPU, or in a build without CUDA, it prints
 * "test_gpu: skipped N cases: <reason>" and exits 0, unless CT_REQUIRE_GPU
 * is set (make test-gpu), when that is a failure.  CT_GPU_QUICK=1 runs the
 * native mode only (for the slow compute-sanitizer runs).
 */
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "graph/impl.h"
#include "harness.h"
#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h> /* the emulator's defines CUDA_EMU and cuda_emu_fail */

#include "cuda/cuda.h"
#include "cuda/kernels.h"
#endif

/* NaN-fill GPU memory as it is handed out (CUDA builds; never reached otherwise). */
static ct_status poison_gpu_memory(ct_backend *gpu)
{
#ifdef CT_HAVE_CUDA
    return ct_cuda_backend_poison(gpu, true);
#else
    (void)gpu;
    return CT_ERR_UNSUPPORTED;
#endif
}

#define TOL_F32 1e-5
#define TF32_UNIT_ROUNDOFF (1.0 / 2048.0) /* 10 stored mantissa bits: 2^-11 */
#define TOL_TRAINING 1e-4
#define MAX_TRACKED 16

/* ---- graphs under test -------------------------------------------------------- */

typedef struct tracked {
    ct_tensor *inputs[MAX_TRACKED];
    int n_inputs;
    ct_tensor *outputs[MAX_TRACKED];
    int n_outputs;
    int n_classes; /* for label inputs */
} tracked;

static ct_tensor *input(ct_graph *g, tracked *t, const char *name, ct_dtype dtype, int ndim,
                        const int64_t *shape, bool grad)
{
    ct_tensor *x = ct_input(g, name, dtype, ndim, shape);
    if (x && grad)
        ct_tensor_requires_grad(x);
    if (x)
        t->inputs[t->n_inputs++] = x;
    return x;
}

/* y is the op's output: kept, and differentiated against a random dy. */
static ct_status finish_vjp(ct_graph *g, tracked *t, ct_tensor *y)
{
    if (!y)
        return ct_graph_status(g);
    ct_tensor_keep(y);
    t->outputs[t->n_outputs++] = y;
    int64_t shape[CT_MAX_DIMS];
    for (int d = 0; d < ct_tensor_ndim(y); d++)
        shape[d] = ct_tensor_dim(y, d);
    ct_tensor *dy = input(g, t, "dy", CT_F32, ct_tensor_ndim(y), shape, false);
    if (ct_graph_status(g) != CT_OK)
        return ct_graph_status(g);
    return ct_graph_backward_vjp(g, y, dy);
}

typedef ct_status (*build_fn)(ct_graph *g, tracked *t);

#define X4(n, c, h, w) (int64_t[]){n, c, h, w}

static ct_status conv_case(ct_graph *g, tracked *t, int64_t n, int64_t c, int64_t h, int64_t w,
                           int out, int kh, int kw, ct_conv_args args, bool bias)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(n, c, h, w), true);
    return finish_vjp(g, t, ct_layer_conv2d(g, "conv", x, out, kh, kw, args, bias));
}

static ct_status build_conv_3x3(ct_graph *g, tracked *t)
{
    return conv_case(g, t, 2, 8, 9, 7, 12, 3, 3, (ct_conv_args){.pad = {1, 1}}, true);
}

static ct_status build_conv_odd(ct_graph *g, tracked *t)
{
    ct_conv_args args = {.stride = {2, 1}, .pad = {2, 0}, .dilation = {1, 2}, .groups = 2};
    return conv_case(g, t, 3, 10, 11, 13, 6, 5, 3, args, false);
}

/* ResNet's downsampling 3x3 at stride 2 (odd planes): backward data by
 * phases, 1, 2, 2 and 4 taps */
static ct_status build_conv_strided(ct_graph *g, tracked *t)
{
    ct_conv_args args = {.stride = {2, 2}, .pad = {1, 1}};
    return conv_case(g, t, 2, 20, 9, 10, 24, 3, 3, args, true);
}

#ifdef CUDA_EMU
/* 3x3s at stride 2 over 64 channels: backward data's phases on the
 * 64-row wide tile, of 16 x 16 (planes of 8 x 8: 128 columns each) and of
 * 17 x 17 (planes of 8 x 8, 8 x 9, 9 x 8 and 9 x 9: 128 to 162 columns) */
static ct_status build_conv_strided_wide(ct_graph *g, tracked *t)
{
    ct_conv_args args = {.stride = {2, 2}, .pad = {1, 1}};
    return conv_case(g, t, 2, 64, 16, 16, 64, 3, 3, args, false);
}

static ct_status build_conv_strided_wide_odd(ct_graph *g, tracked *t)
{
    ct_conv_args args = {.stride = {2, 2}, .pad = {1, 1}};
    return conv_case(g, t, 2, 64, 17, 17, 64, 3, 3, args, false);
}
#endif

/* a 1x1 kernel at stride 2: one phase of four, the rest of dx cleared */
static ct_status build_conv_strided_pointwise(ct_graph *g, tracked *t)
{
    return conv_case(g, t, 2, 20, 9, 10, 24, 1, 1, (ct_conv_args){.stride = {2, 2}}, false);
}

static ct_status build_conv_direct(ct_graph *g, tracked *t)
{
    return conv_case(g, t, 4, 3, 12, 12, 6, 5, 5, (ct_conv_args){0}, true);
}

static ct_status build_conv_pointwise(ct_graph *g, tracked *t)
{
    return conv_case(g, t, 2, 16, 5, 5, 70, 1, 1, (ct_conv_args){0}, true);
}

static ct_status build_conv_long_reduction(ct_graph *g, tracked *t)
{
    /* N*P = 16*24*24: the weight gradient splits its reduction over blocks. */
    return conv_case(g, t, 16, 6, 28, 28, 16, 5, 5, (ct_conv_args){0}, true);
}

static ct_status build_conv_long_channel(ct_graph *g, tracked *t)
{
    /* 32*40*40 = 51,200 outputs per channel: the bias gradient sums each
     * channel over several blocks (12 chunks at 132 SMs). */
    return conv_case(g, t, 32, 2, 40, 40, 3, 3, 3, (ct_conv_args){.pad = {1, 1}}, true);
}

/* A relu after the layer is fused into its kernel (graph/fuse.c): the
 * layer stores max(y, 0), the relu's backward reads it.  Inputs and weights
 * are drawn from [-1, 1.5): these layers' outputs are about a third
 * negative, so the epilogue is exercised (SimpleCNN's second convolution,
 * fed by relu'd inputs, is almost all positive). */
static ct_status build_conv_gemm_relu(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 2, 9, 7), true);
    ct_conv_args args = {.pad = {1, 1}};
    return finish_vjp(g, t, ct_relu(g, ct_layer_conv2d(g, "conv", x, 12, 3, 3, args, true)));
}

static ct_status build_conv_direct_relu(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(4, 1, 12, 12), true);
    return finish_vjp(g, t,
                      ct_relu(g, ct_layer_conv2d(g, "conv", x, 6, 3, 3, (ct_conv_args){0}, true)));
}

static ct_status build_linear_relu(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){7, 12}, true);
    return finish_vjp(g, t, ct_relu(g, ct_layer_linear(g, "fc", x, 33, true)));
}

static ct_status build_linear(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){7, 67}, true);
    return finish_vjp(g, t, ct_layer_linear(g, "fc", x, 33, true));
}

static ct_status build_linear_nobias(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){64, 130}, true);
    return finish_vjp(g, t, ct_layer_linear(g, "fc", x, 100, false));
}

static ct_status build_linear_long_batch(ct_graph *g, tracked *t)
{
    /* The bias gradient over 10,000 rows (inner = 1: a channel is a strided
     * column) in two chunks. */
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){10000, 4}, true);
    return finish_vjp(g, t, ct_layer_linear(g, "fc", x, 3, true));
}

#ifdef CUDA_EMU
/* Small products over long reductions: the GEMMs split k over blocks and
 * sum the parts (gemm.cuh), with the relus fused into the stores of the
 * sums: a 3x3 convolution of 2 images of 4x4 over 256 channels (k =
 * 2,304; its backward data k = 216), then a linear layer of 2 rows over
 * its 384 outputs. */
static ct_status build_split_k(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 256, 4, 4), true);
    ct_tensor *c = ct_relu(g, ct_layer_conv2d(g, "conv", x, 24, 3, 3,
                                              (ct_conv_args){.pad = {1, 1}}, true));
    return finish_vjp(g, t, ct_relu(g, ct_layer_linear(g, "fc", ct_flatten(g, c), 40, true)));
}

/* A product of 544 x 512 outputs over k = 128 on fewer tiles than twice the
 * SMs: it splits k, and the finishing kernel (gemm_finish_parts; the wide
 * and 64 x 64 tiles have no tickets) adds more outputs than its grid has
 * threads (at 132 SMs, 278,528 against 270,336), so some threads several. */
static ct_status build_wide_split(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){544, 128}, true);
    return finish_vjp(g, t, ct_layer_linear(g, "fc", x, 512, true));
}

/* Two linear layers with a relu between: each layer's backward data and
 * weight gradient run as one launch (gemm<linear_backward>), the first's
 * backward data masked by the relu's output, whose last reader it is; the
 * first layer's two products both split k (each its parts in its half of
 * the workspace). */
static ct_status build_mlp_pairs(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){64, 200}, true);
    ct_tensor *h = ct_relu(g, ct_layer_linear(g, "fc1", x, 70, true));
    return finish_vjp(g, t, ct_layer_linear(g, "fc2", h, 12, true));
}

/* Channel reductions of 12 chunks a channel (at 132 SMs): batchnorm's
 * statistics and parameter gradients, and (on cuDNN, whose convolution
 * does not fuse it) a bias gradient. */
static ct_status build_channel_chunks(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(32, 6, 40, 40), true);
    ct_tensor *b = ct_layer_batchnorm2d(g, "bn", x);
    return finish_vjp(g, t, ct_layer_conv2d(g, "conv", b, 6, 1, 1, (ct_conv_args){0}, true));
}

/* r1 = relu(bn2(x) + bn_s(tanh(x))), r2 = relu(bn3(r1) + r1), then
 * sigmoid(r2) + tanh(r2): in the backward pass the adds that sum r2's and
 * r1's gradients (each with its relu's backward) make the dy of bn3 (one
 * batchnorm) and of bn2 and bn_s (two: a downsampling block's), and
 * compute their parameter gradients as they store it (graph/fuse.c
 * ct_fuse_bn_params); 4 chunks a channel at 132 SMs (ticketed finishes). */
static ct_status build_bn_params_in_adds(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(32, 6, 24, 24), true);
    ct_tensor *r1 = ct_relu(g, ct_add(g, ct_layer_batchnorm2d(g, "bn2", x),
                                      ct_layer_batchnorm2d(g, "bn_s", ct_tanh(g, x))));
    ct_tensor *r2 = ct_relu(g, ct_add(g, ct_layer_batchnorm2d(g, "bn3", r1), r1));
    return finish_vjp(g, t, ct_add(g, ct_sigmoid(g, r2), ct_tanh(g, r2)));
}

/* maxpool 2x2 (relu(bn(x))), VGG's layer end: the pool's backward (with the
 * relu's) makes the batchnorm's dy and computes its parameter gradients. */
static ct_status build_bn_params_in_pool(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(32, 6, 24, 24), true);
    ct_tensor *r = ct_relu(g, ct_layer_batchnorm2d(g, "bn", x));
    return finish_vjp(g, t, ct_maxpool2d(g, r, (ct_pool_args){.kernel = {2, 2}}));
}
#endif

static ct_status build_maxpool(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 3, 10, 9), true);
    return finish_vjp(g, t, ct_maxpool2d(g, x, (ct_pool_args){.kernel = {2, 2}}));
}

static ct_status build_maxpool_overlap(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 3, 11, 8), true);
    /* pads differ by axis, so that a swapped pair in a descriptor shows */
    ct_pool_args args = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 0}};
    return finish_vjp(g, t, ct_maxpool2d(g, x, args));
}

static ct_status build_avgpool(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 4, 11, 8), true);
    ct_pool_args args = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {0, 1}};
    return finish_vjp(g, t, ct_avgpool2d(g, x, args));
}

static ct_status build_avgpool_exclude(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(2, 4, 9, 9), true);
    ct_pool_args args = {.kernel = {3, 2}, .stride = {2, 3}, .pad = {1, 1}, .exclude_pad = true};
    return finish_vjp(g, t, ct_avgpool2d(g, x, args));
}

static ct_status build_global_avgpool(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(3, 5, 7, 6), true);
    return finish_vjp(g, t, ct_global_avgpool(g, x));
}

static ct_status build_activations(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){13, 29}, true);
    ct_tensor *a = ct_add(g, ct_relu(g, x), ct_sigmoid(g, x));
    return finish_vjp(g, t, ct_add(g, a, ct_tanh(g, x)));
}

static ct_status build_batchnorm(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(4, 6, 5, 7), true);
    return finish_vjp(g, t, ct_layer_batchnorm2d(g, "bn", x));
}

static ct_status build_batchnorm_long_channel(ct_graph *g, tracked *t)
{
    /* 32*40*40 = 51,200 elements per channel: the statistics and the
     * parameter gradients reduce each channel over several blocks (12
     * chunks at 132 SMs, the last one shorter, chunks ending mid-plane). */
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(32, 6, 40, 40), true);
    return finish_vjp(g, t, ct_layer_batchnorm2d(g, "bn", x));
}

static ct_status build_dropout(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){9, 1001}, true);
    return finish_vjp(g, t, ct_dropout(g, x, 0.3f));
}

static ct_status build_concat(ct_graph *g, tracked *t)
{
    ct_tensor *xs[3] = {input(g, t, "a", CT_F32, 4, X4(2, 3, 4, 5), true),
                        input(g, t, "b", CT_F32, 4, X4(2, 1, 4, 5), true),
                        input(g, t, "c", CT_F32, 4, X4(2, 4, 4, 5), true)};
    return finish_vjp(g, t, ct_concat(g, 3, xs));
}

static ct_status build_softmax(ct_graph *g, tracked *t)
{
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){17, 43}, true);
    return finish_vjp(g, t, ct_softmax(g, x));
}

static ct_status cross_entropy_case(ct_graph *g, tracked *t, ct_dtype label_dtype,
                                    float smoothing)
{
    t->n_classes = 11;
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){37, 11}, true);
    ct_tensor *labels = input(g, t, "labels", label_dtype, 1, (int64_t[]){37}, false);
    ct_tensor *loss = ct_cross_entropy(g, x, labels, smoothing);
    if (!loss)
        return ct_graph_status(g);
    t->outputs[t->n_outputs++] = loss;
    return ct_graph_backward(g, loss);
}

static ct_status build_cross_entropy_i64(ct_graph *g, tracked *t)
{
    return cross_entropy_case(g, t, CT_I64, 0.1f);
}

static ct_status build_cross_entropy_i32(ct_graph *g, tracked *t)
{
    return cross_entropy_case(g, t, CT_I32, 0.0f);
}

/* A small classifier with an optimizer: forward, backward and update. */
static ct_status optimizer_case(ct_graph *g, tracked *t, bool adam, bool decoupled)
{
    t->n_classes = 5;
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){8, 12}, false);
    ct_tensor *labels = input(g, t, "labels", CT_I64, 1, (int64_t[]){8}, false);
    ct_tensor *h = ct_relu(g, ct_layer_linear(g, "fc1", x, 16, true));
    ct_tensor *loss = ct_cross_entropy(g, ct_layer_linear(g, "fc2", h, 5, true), labels, 0.0f);
    if (!loss)
        return ct_graph_status(g);
    t->outputs[t->n_outputs++] = loss;
    ct_status status = ct_graph_backward(g, loss);
    if (status != CT_OK)
        return status;
    if (!adam)
        return ct_graph_sgd(g, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f,
                                             .weight_decay = 1e-2f, .nesterov = true});
    ct_adam_args args = ct_adam_defaults();
    args.weight_decay = 1e-2f;
    args.decoupled = decoupled;
    return ct_graph_adam(g, args);
}

static ct_status build_sgd(ct_graph *g, tracked *t) { return optimizer_case(g, t, false, false); }
static ct_status build_adam(ct_graph *g, tracked *t) { return optimizer_case(g, t, true, false); }
static ct_status build_adamw(ct_graph *g, tracked *t) { return optimizer_case(g, t, true, true); }

static ct_status build_simplecnn(ct_graph *g, tracked *t)
{
    t->n_classes = 10;
    ct_tensor *x = input(g, t, "x", CT_F32, 4, X4(8, 1, 28, 28), false);
    ct_tensor *labels = input(g, t, "labels", CT_I64, 1, (int64_t[]){8}, false);
    ct_tensor *loss = ct_cross_entropy(g, ct_model_simplecnn(g, x, 10), labels, 0.0f);
    if (!loss)
        return ct_graph_status(g);
    t->outputs[t->n_outputs++] = loss;
    ct_status status = ct_graph_backward(g, loss);
    if (status != CT_OK)
        return status;
    return ct_graph_sgd(g, (ct_sgd_args){.lr = 0.05f, .momentum = 0.9f, .nesterov = true});
}

/* ---- running a graph on both backends -------------------------------------------- */

typedef struct gpu_case {
    const char *name;
    build_fn build;
    int reduction; /* the longest dot product K among the case's ops (TF32 cases) */
} gpu_case;

/* TF32 rounds each factor of a product to 10 mantissa bits (relative error
 * up to u = 2^-11 each, 2u for the product); over a dot product of K terms
 * the independent rounding errors add up like a random walk, so the error
 * relative to the result's scale is about 2u * sqrt(K).  (The fixed 3e-4
 * of before was below the error of even one product.) */
static double tf32_tolerance(int reduction)
{
    return 2.0 * TF32_UNIT_ROUNDOFF * sqrt((double)reduction);
}

static const gpu_case op_cases[] = {
    {"conv_3x3", build_conv_3x3, 126},
    {"conv_odd_strided_dilated_grouped", build_conv_odd, 162},
    {"conv_strided", build_conv_strided, 180},
    {"conv_strided_pointwise", build_conv_strided_pointwise, 50},
    {"conv_direct_few_channels", build_conv_direct, 256},
    {"conv_pointwise", build_conv_pointwise, 70},
    {"conv_long_reduction", build_conv_long_reduction, 9216},
    {"conv_bias_long_channel", build_conv_long_channel, 51200},
    /* not TF32 cases (is_tf32_case: "conv..."): a relu of a value near 0
     * flips with the rounding, and its backward passes dy or 0 */
    {"relu_fused_conv_gemm", build_conv_gemm_relu, 0},
    {"relu_fused_conv_direct", build_conv_direct_relu, 0},
    {"relu_fused_linear", build_linear_relu, 0},
    {"linear", build_linear, 67},
    {"linear_no_bias", build_linear_nobias, 0},
    {"linear_bias_long_batch", build_linear_long_batch, 0},
    {"maxpool_2x2", build_maxpool, 0},
    {"maxpool_3x3_overlapping", build_maxpool_overlap, 0},
    {"avgpool_3x3_padded", build_avgpool, 0},
    {"avgpool_exclude_pad", build_avgpool_exclude, 0},
    {"global_avgpool", build_global_avgpool, 0},
    {"relu_sigmoid_tanh_add", build_activations, 0},
    {"batchnorm_training", build_batchnorm, 0},
    {"batchnorm_long_channel", build_batchnorm_long_channel, 0},
    {"dropout", build_dropout, 0},
    {"concat_slice", build_concat, 0},
    {"softmax", build_softmax, 0},
    {"cross_entropy_i64_smoothing", build_cross_entropy_i64, 0},
    {"cross_entropy_i32", build_cross_entropy_i32, 0},
    {"sgd_nesterov_weight_decay", build_sgd, 0},
    {"adam", build_adam, 0},
    {"adamw", build_adamw, 0},
};
#define N_OP_CASES ((int)(sizeof op_cases / sizeof op_cases[0]))

static ct_backend *cpu_backend, *gpu_backend;

static void fill_random(ct_plan *cpu, ct_plan *gpu, ct_tensor *t, int n_classes, uint64_t seed)
{
    int64_t count = ct_tensor_numel(t);
    size_t bytes = ct_tensor_bytes(t);
    void *data = calloc(1, bytes ? bytes : 1);
    const char *name = ct_tensor_name(t);
    if (ct_tensor_dtype(t) == CT_F32) {
        bool positive = strstr(name, "running_var") || strstr(name, "exp_avg_sq");
        harness_fill(data, count, seed, positive ? 0.5f : -1.0f, 1.5f);
    } else if (n_classes > 0 && strcmp(name, "labels") == 0) {
        uint64_t state = seed;
        for (int64_t i = 0; i < count; i++) {
            int64_t label = (int64_t)harness_uniform(&state, 0, (float)n_classes) % n_classes;
            if (ct_tensor_dtype(t) == CT_I64)
                ((int64_t *)data)[i] = label;
            else
                ((int32_t *)data)[i] = (int32_t)label;
        }
    }
    CHECK_OK(ct_plan_write(cpu, t, data, bytes));
    CHECK_OK(ct_plan_write(gpu, t, data, bytes));
    free(data);
}

/* Read t from both plans and compare. */
static void compare_tensor(ct_plan *cpu, ct_plan *gpu, const ct_tensor *t, const char *what,
                           double tol)
{
    size_t bytes = ct_tensor_bytes(t);
    void *want = malloc(bytes ? bytes : 1), *got = malloc(bytes ? bytes : 1);
    CHECK_OK(ct_plan_read(cpu, t, want, bytes));
    CHECK_OK(ct_plan_read(gpu, t, got, bytes));
    if (ct_tensor_dtype(t) == CT_F32) {
        double err = harness_rel_err_f32(got, want, ct_tensor_numel(t));
        CHECK(err <= tol, "%s '%s': GPU vs CPU max rel error %.3g > %.3g", what,
              ct_tensor_name(t), err, tol);
    } else {
        CHECK(memcmp(got, want, bytes) == 0, "%s '%s' differs", what, ct_tensor_name(t));
    }
    free(want);
    free(got);
}

/* Build into g, plan on both backends and write the same data to both;
 * false (the failure checked) when something did not work. */
static bool plan_both(build_fn build, ct_graph *g, tracked *t, ct_plan **cpu, ct_plan **gpu)
{
    CHECK_OK(build(g, t));
    if (ct_graph_status(g) != CT_OK)
        return false;
    CHECK_OK(ct_plan_new(g, cpu_backend, 7, cpu));
    CHECK_OK(ct_plan_new(g, gpu_backend, 7, gpu));
    if (!*cpu || !*gpu)
        return false;
    for (int i = 0; i < t->n_inputs; i++)
        fill_random(*cpu, *gpu, t->inputs[i], t->n_classes, 100 + (uint64_t)i);
    for (int i = 0; i < ct_graph_n_state(g); i++)
        fill_random(*cpu, *gpu, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
    return true;
}

/* `steps` training steps on both plans, then every output, gradient and
 * piece of state compared. */
static void run_and_compare(ct_plan *cpu, ct_plan *gpu, ct_graph *g, const tracked *t,
                            int steps, double tol)
{
    for (int step = 0; step < steps; step++) {
        CHECK_OK(ct_plan_run(cpu, CT_TRAIN));
        CHECK_OK(ct_plan_run(gpu, CT_TRAIN));
    }
    for (int i = 0; i < t->n_outputs; i++)
        compare_tensor(cpu, gpu, t->outputs[i], "output", tol);
    for (int i = 0; i < t->n_inputs; i++)
        if (ct_tensor_grad(t->inputs[i]))
            compare_tensor(cpu, gpu, ct_tensor_grad(t->inputs[i]), "input gradient", tol);
    for (int i = 0; i < ct_graph_n_state(g); i++) {
        ct_tensor *s = ct_graph_state(g, i);
        if (ct_tensor_grad(s))
            compare_tensor(cpu, gpu, ct_tensor_grad(s), "gradient", tol);
        compare_tensor(cpu, gpu, s, "state after the step", tol);
    }
}

/* Build, plan on both, same data, `steps` training steps, compare everything. */
static void compare_on_backends(build_fn build, int steps, double tol)
{
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL;
    if (plan_both(build, g, &t, &cpu, &gpu))
        run_and_compare(cpu, gpu, g, &t, steps, tol);
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_graph_free(g);
}

static void run_labelled(const char *label, void (*fn)(const void *), const void *arg)
{
    harness_case_failures = 0;
    fn(arg);
    if (harness_case_failures == 0) {
        harness_passed++;
        printf("PASS %s\n", label);
    } else {
        harness_failed++;
        printf("FAIL %s\n", label);
    }
    fflush(stdout);
}

typedef struct op_run {
    const gpu_case *c;
    const char *kernels;
    bool tf32;
} op_run;

/* A case in vendor mode must run the vendor libraries: one that failed
 * quietly (a descriptor cuDNN rejects, say) falls back to the native
 * kernels, which give right answers and would hide the bug. */
static void check_no_fallback(int before, const char *kernels)
{
    int after = gpu_backend->vendor_failures;
    CHECK(after == before, "%d vendor call(s) failed and fell back to native kernels (%s mode)",
          after - before, kernels);
}

static void op_case(const void *arg)
{
    const op_run *run = arg;
    int fallbacks = gpu_backend->vendor_failures;
    CHECK_OK(ct_backend_set_kernels(gpu_backend, run->kernels));
    CHECK_OK(ct_backend_set_tf32(gpu_backend, run->tf32));
    double tol = run->tf32 ? tf32_tolerance(run->c->reduction) : TOL_F32;
    compare_on_backends(run->c->build, 2, tol);
    check_no_fallback(fallbacks, run->kernels);
}

/* ---- whole-step, allocator and error cases ------------------------------------------ */

static void simplecnn_step(const void *arg)
{
    int fallbacks = gpu_backend->vendor_failures;
    CHECK_OK(ct_backend_set_kernels(gpu_backend, arg));
    CHECK_OK(ct_backend_set_tf32(gpu_backend, false));
    compare_on_backends(build_simplecnn, 1, TOL_TRAINING);
    check_no_fallback(fallbacks, arg);
}

static void allocator_stats_return(const void *arg)
{
    (void)arg;
    ct_memory_stats before, during, after;
    CHECK_OK(ct_backend_memory_stats(gpu_backend, &before));
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *plan = NULL;
    CHECK_OK(build_simplecnn(g, &t));
    CHECK_OK(ct_plan_new(g, gpu_backend, 1, &plan));
    CHECK_OK(ct_backend_memory_stats(gpu_backend, &during));
    CHECK(during.in_use > before.in_use, "a plan took no memory: %zu -> %zu", before.in_use,
          during.in_use);
    ct_plan_free(plan);
    CHECK_OK(ct_backend_memory_stats(gpu_backend, &after));
    CHECK(after.in_use == before.in_use, "in use %zu after the plan was freed, %zu before",
          after.in_use, before.in_use);
    CHECK(after.peak_in_use >= during.in_use, "peak %zu below %zu", after.peak_in_use,
          during.in_use);
    CHECK_OK(ct_backend_release_cache(gpu_backend));
    CHECK_OK(ct_backend_memory_stats(gpu_backend, &after));
    CHECK(after.cached == 0, "%zu bytes still cached after release", after.cached);
    ct_graph_free(g);
}

/* The profiler on the GPU: every node has a device time from CUDA events,
 * in order, inside the step, and they add up to something. */
static void profile_has_device_times(const void *arg)
{
    (void)arg;
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL;
    if (!plan_both(build_simplecnn, g, &t, &cpu, &gpu))
        goto done;
    CHECK_OK(ct_plan_set_profiling(gpu, true));
    CHECK_OK(ct_plan_run(gpu, CT_TRAIN));
    CHECK_OK(ct_plan_run(gpu, CT_TRAIN));
    ct_profile profile;
    CHECK_OK(ct_plan_profile(gpu, &profile));
    int64_t device_total = 0, previous_end = profile.start_ns;
    const int64_t slack = 1000000; /* 1 ms between the two clocks */
    for (int i = 0; i < profile.n_records; i++) {
        const ct_prof_record *r = &profile.records[i];
        CHECK(r->device_start_ns >= previous_end && r->device_end_ns >= r->device_start_ns &&
                  r->device_end_ns <= profile.end_ns + slack,
              "record %d (%s): device time [%lld, %lld] outside the step [%lld, %lld]", i, r->op,
              (long long)r->device_start_ns, (long long)r->device_end_ns,
              (long long)profile.start_ns, (long long)profile.end_ns);
        device_total += r->device_end_ns - r->device_start_ns;
        previous_end = r->device_end_ns;
    }
    CHECK(profile.n_records > 10 && device_total > 0, "%d records, %lld ns on the device",
          profile.n_records, (long long)device_total);
done:
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_graph_free(g);
}

static void over_the_cap_is_memory_error(const void *arg)
{
    (void)arg;
    ct_memory_stats stats;
    CHECK_OK(ct_backend_memory_stats(gpu_backend, &stats));
    CHECK_OK(ct_backend_release_cache(gpu_backend));
    CHECK_OK(ct_backend_set_memory_limit(gpu_backend, stats.in_use + 64 * 1024));
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *plan = NULL;
    ct_tensor *x = input(g, &t, "x", CT_F32, 2, (int64_t[]){1024, 1024}, false);
    ct_tensor_keep(ct_relu(g, x));
    ct_status status = ct_plan_new(g, gpu_backend, 1, &plan);
    CHECK(status == CT_ERR_MEMORY, "status %s: %s", ct_status_name(status), ct_last_error());
    CHECK(strstr(ct_last_error(), "try a smaller --batch") && strstr(ct_last_error(), "in use"),
          "message lacks the statistics or the advice: %s", ct_last_error());
    CHECK(plan == NULL, "a plan came back with an error");
    CHECK_OK(ct_backend_set_memory_limit(gpu_backend, 0));
    ct_graph_free(g);
}

/* The cross-entropy of bf16 logits (a bf16 graph): the 16-bit kernels. */
static ct_status half_cross_entropy_case(ct_graph *g, tracked *t)
{
    ct_status status = ct_graph_set_precision(g, CT_PRECISION_BF16);
    if (status != CT_OK)
        return status;
    t->n_classes = 11;
    ct_tensor *x = input(g, t, "x", CT_F32, 2, (int64_t[]){37, 11}, true);
    ct_tensor *labels = input(g, t, "labels", CT_I64, 1, (int64_t[]){37}, false);
    ct_tensor *loss = ct_cross_entropy(g, ct_cast(g, x, CT_BF16), labels, 0.1f);
    if (!loss)
        return ct_graph_status(g);
    t->outputs[t->n_outputs++] = loss;
    return ct_graph_backward(g, loss);
}

/* arg: NULL for f32 logits; non-NULL for bf16 ones on a strict backend
 * (it plans only the nodes it runs itself): the 16-bit kernel's check. */
static void bad_label_is_arg_error(const void *arg)
{
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *plan = NULL;
    ct_backend *backend = gpu_backend, *strict = NULL;
    if (arg) {
        CHECK_OK(ct_backend_new("cuda", &strict));
        CHECK_OK(ct_backend_set_strict(strict, true));
        backend = strict;
    }
    CHECK_OK(arg ? half_cross_entropy_case(g, &t) : cross_entropy_case(g, &t, CT_I64, 0.0f));
    CHECK_OK(ct_plan_new(g, backend, 1, &plan));
    if (plan) {
        int64_t labels[37] = {0};
        labels[5] = 11; /* one past the last class */
        CHECK_OK(ct_plan_write(plan, t.inputs[1], labels, sizeof labels));
        ct_status status = ct_plan_run(plan, CT_TRAIN);
        CHECK(status == CT_ERR_ARG && strstr(ct_last_error(), "row 5"),
              "status %s: %s", ct_status_name(status), ct_last_error());
    }
    ct_plan_free(plan);
    ct_graph_free(g);
    /* The label check belongs to that step: with its plan and graph gone, the
     * backend has nothing more to report (it used to read the freed node). */
    CHECK_OK(ct_backend_synchronize(backend));
    ct_backend_free(strict);
}

/* Everything a step computes on the GPU, read back from `plan`. */
static void *read_everything(ct_plan *plan, ct_graph *g, const tracked *t, size_t *bytes)
{
    size_t total = 0, offset = 0;
    const ct_tensor *parts[4 * MAX_TRACKED + 256];
    int n = 0;
    for (int i = 0; i < t->n_outputs; i++)
        parts[n++] = t->outputs[i];
    for (int i = 0; i < ct_graph_n_state(g) && n + 2 <= (int)(sizeof parts / sizeof *parts);
         i++) {
        ct_tensor *s = ct_graph_state(g, i);
        parts[n++] = s;
        if (ct_tensor_grad(s))
            parts[n++] = ct_tensor_grad(s);
    }
    for (int i = 0; i < n; i++)
        total += ct_tensor_bytes(parts[i]);
    char *data = malloc(total ? total : 1);
    for (int i = 0; i < n; i++) {
        CHECK_OK(ct_plan_read(plan, parts[i], data + offset, ct_tensor_bytes(parts[i])));
        offset += ct_tensor_bytes(parts[i]);
    }
    *bytes = total;
    return data;
}

/* The same steps from the same state give the same bits (every native and
 * vendor kernel reduces in a fixed order, whatever order threads, blocks and
 * streams run in: test-gpu-emu runs this in three orders). */
static void steps_are_deterministic(const void *arg)
{
    CHECK_OK(ct_backend_set_kernels(gpu_backend, arg));
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *first = NULL, *second = NULL;
    if (!plan_both(build_simplecnn, g, &t, &cpu, &first))
        goto done;
    CHECK_OK(ct_plan_new(g, gpu_backend, 7, &second));
    for (int i = 0; second && i < t.n_inputs; i++)
        fill_random(cpu, second, t.inputs[i], t.n_classes, 100 + (uint64_t)i);
    for (int i = 0; second && i < ct_graph_n_state(g); i++)
        fill_random(cpu, second, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
    for (int step = 0; second && step < 3; step++) {
        CHECK_OK(ct_plan_run(first, CT_TRAIN));
        CHECK_OK(ct_plan_run(second, CT_TRAIN));
    }
    if (second) {
        size_t bytes_a = 0, bytes_b = 0;
        void *a = read_everything(first, g, &t, &bytes_a);
        void *b = read_everything(second, g, &t, &bytes_b);
        CHECK(bytes_a == bytes_b && memcmp(a, b, bytes_a) == 0,
              "two runs of the same steps differ (%zu bytes compared)", bytes_a);
        free(a);
        free(b);
    }
done:
    ct_plan_free(cpu);
    ct_plan_free(first);
    ct_plan_free(second);
    ct_graph_free(g);
}

/* Two GPUs in one process: a plan on cuda:0 gets its data, then making
 * cuda:1 makes that the current device; the step on cuda:0 must still run
 * on cuda:0, and cuda:1 work on its own. */
static void two_gpus_in_one_process(const void *arg)
{
    (void)arg;
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL;
    ct_backend *second = NULL;
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "native"));
    if (plan_both(build_simplecnn, g, &t, &cpu, &gpu)) {
        CHECK_OK(ct_backend_new("cuda:1", &second));
        run_and_compare(cpu, gpu, g, &t, 2, TOL_TRAINING);
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_graph_free(g);
    if (second) {
        CHECK_OK(poison_gpu_memory(second));
        ct_backend *first = gpu_backend;
        gpu_backend = second;
        compare_on_backends(build_simplecnn, 2, TOL_TRAINING);
        gpu_backend = first;
        ct_backend_free(second);
    }
}

/* Ops a GPU backend lacks run on the CPU with copies in between (shared/
 * DESIGN.md): a forward op in the arena (max pooling) and an in-place
 * update of state (SGD with momentum) give the all-GPU results; a strict
 * backend refuses the graph instead. */
static void missing_ops_run_on_the_cpu(const void *arg)
{
    (void)arg;
    ct_backend *first = gpu_backend, *picky = NULL;
    CHECK_OK(ct_backend_new("cuda", &picky));
    CHECK_OK(poison_gpu_memory(picky));
    CHECK_OK(ct_backend_set_kernels(picky, "native"));
    CHECK_OK(ct_backend_refuse(picky, CT_OP_MAXPOOL2D));
    CHECK_OK(ct_backend_refuse(picky, CT_OP_SGD_UPDATE));
    gpu_backend = picky;
    compare_on_backends(build_simplecnn, 2, TOL_TRAINING);
    CHECK_OK(ct_backend_set_strict(picky, true));
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *plan = NULL;
    CHECK_OK(build_simplecnn(g, &t));
    ct_status status = ct_plan_new(g, picky, 1, &plan);
    CHECK(status == CT_ERR_UNSUPPORTED && strstr(ct_last_error(), "maxpool2d") &&
              strstr(ct_last_error(), "strict"),
          "a strict backend planned a graph it cannot run: %s", ct_last_error());
    ct_plan_free(plan);
    ct_graph_free(g);
    gpu_backend = first;
    ct_backend_free(picky);
}

#ifdef CUDA_EMU
/* A vendor call that fails (here: made to, by the emulator) leaves its shape
 * to the native kernels, with the same results, and is not called again. */
static void vendor_failure_falls_back_once(const void *arg)
{
    (void)arg;
    int fallbacks = gpu_backend->vendor_failures;
    cuda_emu_fail("cudnnConvolutionForward");
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "vendor"));
    compare_on_backends(build_conv_3x3, 3, TOL_F32);
    CHECK(gpu_backend->vendor_failures == fallbacks + 1,
          "%d fallbacks counted for one failing shape", gpu_backend->vendor_failures - fallbacks);
    CHECK(cuda_emu_failures("cudnnConvolutionForward") == 1,
          "cudnnConvolutionForward failed %d times: a failing shape is retried",
          cuda_emu_failures("cudnnConvolutionForward"));
    cuda_emu_fail(NULL);
}

/* Vendor mode really calls cuBLAS and cuDNN: a library that failed to start
 * would leave every op to the native kernels and pass all the vendor cases. */
static void vendor_mode_calls_the_libraries(const void *arg)
{
    (void)arg;
    static const char *const calls[] = {"cublasSgemm", "cudnnConvolutionForward",
                                        "cudnnConvolutionBackwardData",
                                        "cudnnConvolutionBackwardFilter", "cudnnPoolingForward"};
    int before[5];
    for (int i = 0; i < 5; i++)
        before[i] = cuda_emu_calls(calls[i]);
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "vendor"));
    compare_on_backends(build_simplecnn, 1, TOL_TRAINING);
    for (int i = 0; i < 5; i++)
        CHECK(cuda_emu_calls(calls[i]) > before[i], "vendor mode made no %s call", calls[i]);
}

/* `auto` chooses cuDNN's algorithms by timing them (the Find queries, at
 * plan time), `vendor` by the heuristics; a Find that fails leaves the
 * heuristics' choice, with the same results.  Fresh backends: a backend's
 * cuDNN chooses once per shape. */
static void auto_times_cudnn_algorithms(const void *arg)
{
    (void)arg;
    static const char *const finds[] = {"cudnnFindConvolutionForwardAlgorithm",
                                        "cudnnFindConvolutionBackwardDataAlgorithm",
                                        "cudnnFindConvolutionBackwardFilterAlgorithm"};
    static const char *const modes[] = {"vendor", "auto"};
    ct_backend *first = gpu_backend;
    for (int m = 0; m < 2; m++) {
        int before[3];
        for (int i = 0; i < 3; i++)
            before[i] = cuda_emu_calls(finds[i]);
        ct_backend *fresh = NULL;
        CHECK_OK(ct_backend_new("cuda", &fresh));
        if (!fresh)
            return;
        CHECK_OK(poison_gpu_memory(fresh));
        CHECK_OK(ct_backend_set_kernels(fresh, modes[m]));
        cuda_emu_fail(m == 1 ? finds[0] : NULL);
        gpu_backend = fresh;
        compare_on_backends(build_simplecnn, 1, TOL_TRAINING);
        gpu_backend = first;
        cuda_emu_fail(NULL);
        for (int i = 0; i < 3; i++) {
            int calls = cuda_emu_calls(finds[i]) - before[i];
            CHECK(m == 0 ? calls == 0 : calls > 0, "%s kernels: %d %s calls", modes[m], calls,
                  finds[i]);
        }
        ct_backend_free(fresh);
    }
}
#endif

/* ---- main ---------------------------------------------------------------------------- */

static const char *const kernel_modes[] = {"native", "vendor"};
/* simplecnn native and vendor, allocator, profile, cap, bad label (f32, bf16),
 * determinism x2, missing ops */
#define N_EXTRA_CASES 10

#ifdef CUDA_EMU
/* Launches of `kernel` and its atomics since the counters' reset. */
static void counted(const char *kernel, unsigned long long *launches,
                    unsigned long long *atomics)
{
    cuda_emu_kernel_counters c;
    bool found = cuda_emu_counters_find(kernel, &c) == 0;
    *launches = found ? c.launches : 0;
    *atomics = found ? c.atomics : 0;
}

/* Whether t has the same bits in the two plans (`how` says which). */
static void check_same_tensor(ct_plan *a, ct_plan *b, const ct_tensor *t, const char *how)
{
    size_t bytes = ct_tensor_bytes(t);
    void *x = malloc(bytes ? bytes : 1), *y = malloc(bytes ? bytes : 1);
    CHECK_OK(ct_plan_read(a, t, x, bytes));
    CHECK_OK(ct_plan_read(b, t, y, bytes));
    CHECK(memcmp(x, y, bytes) == 0, "'%s' differs %s", ct_tensor_name(t), how);
    free(x);
    free(y);
}

/* Whether every output, gradient and piece of state of the two plans has
 * the same bits. */
static void check_same_bits(ct_plan *a, ct_plan *b, ct_graph *g, const tracked *t)
{
    const ct_tensor *list[64];
    int n = 0;
    for (int i = 0; i < t->n_outputs && n < 64; i++)
        list[n++] = t->outputs[i];
    for (int i = 0; i < t->n_inputs && n < 64; i++)
        if (ct_tensor_grad(t->inputs[i]))
            list[n++] = ct_tensor_grad(t->inputs[i]);
    for (int i = 0; i < ct_graph_n_state(g) && n < 63; i++) {
        ct_tensor *s = ct_graph_state(g, i);
        if (ct_tensor_grad(s))
            list[n++] = ct_tensor_grad(s);
        list[n++] = s;
    }
    for (int i = 0; i < n; i++)
        check_same_tensor(a, b, list[i], "between the two ways of adding the parts");
}

/* The graph of `build` planned on the CPU, on the GPU and once more on the
 * GPU (*unticketed, to run without the stream's tickets), with the same
 * inputs and state; false (and all NULL) where it could not be. */
static bool plan_unticketed(build_fn build, ct_graph *g, tracked *t, ct_plan **cpu,
                            ct_plan **gpu, ct_plan **unticketed)
{
    *unticketed = NULL;
    if (!plan_both(build, g, t, cpu, gpu))
        return false;
    CHECK_OK(ct_plan_new(g, gpu_backend, 7, unticketed));
    for (int i = 0; *unticketed && i < t->n_inputs; i++)
        fill_random(*cpu, *unticketed, t->inputs[i], t->n_classes, 100 + (uint64_t)i);
    for (int i = 0; *unticketed && i < ct_graph_n_state(g); i++)
        fill_random(*cpu, *unticketed, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
    return *unticketed != NULL;
}

/* Two steps of the plan without the backend stream's tickets (the counters
 * reset first). */
static void run_unticketed(ct_plan *plan)
{
    int device = 0;
    void *stream = NULL;
    CHECK_OK(ct_cuda_backend_stream(gpu_backend, &device, &stream));
    unsigned *tickets = ct_cuda_tickets(stream, 1);
    cuda_emu_counters_reset();
    ct_cuda_set_tickets(stream, NULL);
    for (int step = 0; step < 2; step++)
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    ct_cuda_set_tickets(stream, tickets);
}

/* The products of build_split_k split k and give the CPU's answers: the
 * last block of each tile adds its parts (no gemm_finish_parts launch; the
 * emulator counts the tickets' atomics), and on a stream without tickets
 * a kernel after the GEMM does, with the same bits. */
static void small_products_split_k(const void *arg)
{
    (void)arg;
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "native"));
    CHECK_OK(ct_backend_set_tf32(gpu_backend, false));
    if (!cuda_emu_counters_available()) {
        compare_on_backends(build_split_k, 2, TOL_F32);
        return;
    }
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL, *unticketed = NULL;
    if (plan_unticketed(build_split_k, g, &t, &cpu, &gpu, &unticketed)) {
        unsigned long long finishes, atomics, forward, backward, none;
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 2, TOL_F32);
        counted("gemm_finish_parts", &finishes, &none);
        counted("gemm<matrix>", &forward, &atomics);
        /* the convolution's backward data alone, or paired with its
         * weight gradient (gemm<conv_backward>) */
        unsigned long long pair_atomics;
        counted("gemm<conv_backward_data>", &backward, &none);
        counted("gemm<conv_backward>", &backward, &pair_atomics);
        none += pair_atomics;
        CHECK(finishes == 0 && atomics > 0 && none > 0,
              "with tickets: %llu finishing launches, %llu and %llu atomics (want 0, and "
              "some in the linear layers' and the convolution's backward data GEMMs)",
              finishes, atomics, none);
        run_unticketed(unticketed);
        counted("gemm_finish_parts", &finishes, &none);
        CHECK(finishes >= 8, "without tickets the parts were summed by %llu launches (want the "
              "forward passes and backward data of both layers, twice)", finishes);
        cuda_emu_counters_enable(0);
        check_same_bits(gpu, unticketed, g, &t);
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_plan_free(unticketed);
    ct_graph_free(g);
}

/* Native kernels without TF32, where the emulator counts launches: whether
 * the counting tests below can run. */
static bool native_and_counted(void)
{
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "native"));
    CHECK_OK(ct_backend_set_tf32(gpu_backend, false));
    return cuda_emu_counters_available();
}

/* A wide-tile split product (544 x 512 over k = 128, its forward pass)
 * gives the CPU's answers with its parts added by the last block of each
 * tile (the tickets' atomics counted, a finishing launch fewer a step), and on
 * a stream without tickets by the finishing kernel, whose threads then
 * have several outputs each, with the same bits (a part dropped from one
 * of a thread's outputs, or from one of a last block's, fails it). */
static void wide_split_finishes_many_outputs(const void *arg)
{
    (void)arg;
    if (!native_and_counted()) {
        compare_on_backends(build_wide_split, 1, TOL_F32);
        return;
    }
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL, *unticketed = NULL;
    if (plan_unticketed(build_wide_split, g, &t, &cpu, &gpu, &unticketed)) {
        unsigned long long finishes, unticketed_finishes, atomics, none;
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 2, TOL_F32);
        counted("gemm_finish_parts", &finishes, &none);
        counted("gemm<matrix>", &none, &atomics);
        run_unticketed(unticketed);
        counted("gemm_finish_parts", &unticketed_finishes, &none);
        cuda_emu_counters_enable(0);
        CHECK(atomics > 0 && unticketed_finishes >= finishes + 2,
              "%llu atomics in the forward GEMM, %llu finishing launches with tickets and %llu "
              "without (want some, and the forward's two more without)",
              atomics, finishes, unticketed_finishes);
        check_same_bits(gpu, unticketed, g, &t);
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_plan_free(unticketed);
    ct_graph_free(g);
}

/* Channel reductions over several blocks a channel give the CPU's answers
 * with their second pass in the last block of each channel (no finishing
 * kernel; the tickets' atomics counted), and the same bits as that pass's
 * own kernels on a stream without tickets. */
static void channel_reductions_finish_in_kernel(const void *arg)
{
    (void)arg;
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "vendor"));
    if (!cuda_emu_counters_available()) {
        compare_on_backends(build_channel_chunks, 2, TOL_TRAINING);
        return;
    }
    static const char *const finishes[3] = {"bn_stats_finish_kernel", "bn_params_finish_kernel",
                                            "channel_sum_finish_kernel"};
    static const char *const chunks[3] = {"bn_stats_chunk_kernel<T>", "bn_params_chunk_kernel<T>",
                                          "channel_sum_chunk_kernel<T>"};
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL, *unticketed = NULL;
    if (plan_unticketed(build_channel_chunks, g, &t, &cpu, &gpu, &unticketed)) {
        unsigned long long launches, atomics, none;
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 2, TOL_TRAINING);
        for (int i = 0; i < 3; i++) {
            counted(finishes[i], &launches, &none);
            CHECK(launches == 0, "with tickets: %llu launches of %s", launches, finishes[i]);
            counted(chunks[i], &launches, &atomics);
            CHECK(launches == 2 && atomics == 2 * 6 * 12,
                  "with tickets: %s %llu launches, %llu atomics (want 2, and one a block: "
                  "2 x 6 channels x 12 chunks)", chunks[i], launches, atomics);
        }
        run_unticketed(unticketed);
        for (int i = 0; i < 3; i++) {
            counted(finishes[i], &launches, &none);
            CHECK(launches == 2, "without tickets: %llu launches of %s (want 2)", launches,
                  finishes[i]);
        }
        cuda_emu_counters_enable(0);
        check_same_bits(gpu, unticketed, g, &t);
    }
    CHECK_OK(ct_backend_set_kernels(gpu_backend, "native"));
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_plan_free(unticketed);
    ct_graph_free(g);
}

/* A graph whose backward makes batchnorms' dy in `kernel` (which computes
 * their parameter gradients: graph/fuse.c ct_fuse_bn_params), `launches`
 * times a step, `atomics` tickets a step, for `batchnorms` batchnorms. */
typedef struct {
    build_fn build;
    const char *kernel, *unfused_kernel;
    unsigned long long launches, atomics, batchnorms;
} made_params_case;

/* The case's graph gives the CPU's answers with no bn_params_chunk_kernel
 * launch (and none of the maker's own kernel, unfused_kernel), the finishes
 * by tickets; the same bits as the unfused kernels (a plan with fusion
 * off) and as their finishing kernels on a stream without tickets. */
static void check_made_params(const made_params_case *c)
{
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL, *unticketed = NULL, *unfused = NULL;
    if (plan_unticketed(c->build, g, &t, &cpu, &gpu, &unticketed)) {
        gpu_backend->unfused = true;
        CHECK_OK(ct_plan_new(g, gpu_backend, 7, &unfused));
        gpu_backend->unfused = false;
        for (int i = 0; unfused && i < t.n_inputs; i++)
            fill_random(cpu, unfused, t.inputs[i], t.n_classes, 100 + (uint64_t)i);
        for (int i = 0; unfused && i < ct_graph_n_state(g); i++)
            fill_random(cpu, unfused, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
        unsigned long long launches, atomics, none;
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 2, TOL_TRAINING);
        counted("bn_params_chunk_kernel<T>", &launches, &none);
        CHECK(launches == 0, "fused: %llu launches of bn_params_chunk_kernel", launches);
        counted(c->unfused_kernel, &launches, &none);
        CHECK(launches == 0, "fused: %llu launches of %s", launches, c->unfused_kernel);
        counted(c->kernel, &launches, &atomics);
        CHECK(launches == 2 * c->launches && atomics == 2 * c->atomics,
              "fused: %llu launches of %s, %llu atomics (want %llu and %llu a step)", launches,
              c->kernel, atomics, c->launches, c->atomics);
        counted("bn_params_finish_kernel", &launches, &none);
        CHECK(launches == 0, "fused, with tickets: %llu launches of bn_params_finish_kernel",
              launches);
        run_unticketed(unticketed);
        counted("bn_params_finish_kernel", &launches, &none);
        CHECK(launches == 2 * c->batchnorms,
              "fused, without tickets: %llu launches of bn_params_finish_kernel (want %llu a "
              "step)", launches, c->batchnorms);
        check_same_bits(gpu, unticketed, g, &t);
        if (unfused) {
            cuda_emu_counters_reset();
            for (int step = 0; step < 2; step++)
                CHECK_OK(ct_plan_run(unfused, CT_TRAIN));
            counted("bn_params_chunk_kernel<T>", &launches, &none);
            CHECK(launches == 2 * c->batchnorms,
                  "unfused: %llu launches of bn_params_chunk_kernel", launches);
            check_same_bits(gpu, unfused, g, &t);
        }
        cuda_emu_counters_enable(0);
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_plan_free(unticketed);
    ct_plan_free(unfused);
    ct_graph_free(g);
}

/* The adds of build_bn_params_in_adds (two a step: 6 channels x 4 chunks
 * each, three batchnorms) and the max pool's backward of
 * build_bn_params_in_pool (one, one batchnorm) compute the batchnorms'
 * parameter gradients as they store their dy. */
static void batchnorm_params_in_makers(const void *arg)
{
    (void)arg;
    if (!native_and_counted())
        return;
    static const made_params_case cases[] = {
        {build_bn_params_in_adds, "bn_add_params_kernel", "add_relu_grad_kernel<T>", 2,
         2 * 6 * 4, 3},
        {build_bn_params_in_pool, "bn_pool_params_kernel", "maxpool2x2_backward_kernel<T>", 1,
         6 * 4, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_made_params(&cases[i]);
}

/* Each linear layer's backward data and weight gradient run as one
 * launch, giving the CPU's answers and, after one step, the same bits for
 * dx and the weight gradients as the unpaired kernels (a plan on the
 * backend with fusion off). */
static void linear_backward_paired(const void *arg)
{
    (void)arg;
    if (!native_and_counted())
        return;
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL, *unpaired = NULL;
    if (plan_both(build_mlp_pairs, g, &t, &cpu, &gpu)) {
        gpu_backend->unfused = true;
        CHECK_OK(ct_plan_new(g, gpu_backend, 7, &unpaired));
        gpu_backend->unfused = false;
        for (int i = 0; unpaired && i < t.n_inputs; i++)
            fill_random(cpu, unpaired, t.inputs[i], t.n_classes, 100 + (uint64_t)i);
        for (int i = 0; unpaired && i < ct_graph_n_state(g); i++)
            fill_random(cpu, unpaired, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
        unsigned long long pairs, products, none;
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 1, TOL_F32);
        counted("gemm<linear_backward>", &pairs, &none);
        counted("gemm<matrix>", &products, &none);
        CHECK(pairs == 2 && products == 2,
              "paired: %llu pair launches, %llu lone products (want 2: each layer's backward; "
              "2: the forward passes)", pairs, products);
        if (unpaired) {
            cuda_emu_counters_reset();
            CHECK_OK(ct_plan_run(unpaired, CT_TRAIN));
            counted("gemm<linear_backward>", &pairs, &none);
            CHECK(pairs == 0, "unpaired: %llu pair launches", pairs);
            const ct_tensor *list[3] = {ct_tensor_grad(t.inputs[0]), NULL, NULL};
            for (int i = 0, n = 1; i < ct_graph_n_state(g) && n < 3; i++) {
                ct_tensor *s = ct_graph_state(g, i);
                if (ct_tensor_grad(s) && ct_tensor_ndim(s) == 2)
                    list[n++] = ct_tensor_grad(s);
            }
            for (int i = 0; i < 3; i++)
                if (list[i])
                    check_same_tensor(gpu, unpaired, list[i], "paired and unpaired");
        }
        cuda_emu_counters_enable(0);
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_plan_free(unpaired);
    ct_graph_free(g);
}

/* The x gradient of build_conv_odd (3 images, 2 groups of 5 input
 * channels, stride 2 x 1, dilation 1 x 2, padding) on the GPU after one
 * step, with backward data's columns limited to `limit` bytes; checked
 * against the CPU, its launches counted: the column products and implicit
 * GEMMs alone, the products paired with the weight gradient's
 * (gemm<conv_backward>), col2im.  Returns it (malloc'd; NULL on failure). */
static float *conv_odd_dx(size_t limit, unsigned long long *columns,
                          unsigned long long *implicit, unsigned long long *phases,
                          unsigned long long *pairs, unsigned long long *col2im)
{
    ct_cuda_set_conv_columns_limit(limit);
    tracked t = {0};
    ct_graph *g = ct_graph_new();
    ct_plan *cpu = NULL, *gpu = NULL;
    float *dx = NULL;
    unsigned long long none;
    if (plan_both(build_conv_odd, g, &t, &cpu, &gpu)) {
        cuda_emu_counters_enable(1);
        cuda_emu_counters_reset();
        run_and_compare(cpu, gpu, g, &t, 1, TOL_F32);
        counted("gemm<conv_columns>", columns, &none);
        counted("gemm<conv_backward_data>", implicit, &none);
        counted("gemm<conv_backward_phase>", phases, &none);
        counted("gemm<conv_backward>", pairs, &none);
        counted("conv_col2im", col2im, &none);
        cuda_emu_counters_enable(0);
        const ct_tensor *grad = ct_tensor_grad(t.inputs[0]);
        size_t bytes = ct_tensor_bytes(grad);
        dx = malloc(bytes);
        CHECK_OK(ct_plan_read(gpu, grad, dx, bytes));
    }
    ct_plan_free(cpu);
    ct_plan_free(gpu);
    ct_graph_free(g);
    ct_cuda_set_conv_columns_limit(32u << 20);
    return dx;
}

/* Backward data over few input channels goes by columns (a product, then
 * each element's taps added), its product paired with the weight
 * gradient's in one go, a chunk of images at a time (unpaired) where the
 * columns pass the limit, with the same bits either way; at limit 0 the
 * implicit GEMM by phases (stride 2 x 1: two, the second paired), each
 * within f32 tolerance of the CPU. */
static void conv_backward_data_by_columns(const void *arg)
{
    (void)arg;
    if (!native_and_counted())
        return;
    /* columns of one image: 10 channels x 15 taps x 6 x 9 dy pixels */
    const size_t image = sizeof(float) * 10 * 15 * 6 * 9;
    unsigned long long columns, implicit, phases, pairs, col2im;
    float *whole = conv_odd_dx(32u << 20, &columns, &implicit, &phases, &pairs, &col2im);
    CHECK(columns == 0 && implicit == 0 && phases == 0 && pairs == 1 && col2im == 1,
          "one go: %llu column products, %llu implicit GEMMs, %llu phases, %llu pairs, %llu "
          "col2im (want 0, 0, 0, 1, 1)", columns, implicit, phases, pairs, col2im);
    float *chunked = conv_odd_dx(image, &columns, &implicit, &phases, &pairs, &col2im);
    CHECK(columns == 3 && implicit == 0 && phases == 0 && pairs == 0 && col2im == 3,
          "one image a chunk: %llu column products, %llu implicit, %llu phases, %llu pairs, "
          "%llu col2im (want 3, 0, 0, 0, 3)", columns, implicit, phases, pairs, col2im);
    float *gemm = conv_odd_dx(0, &columns, &implicit, &phases, &pairs, &col2im);
    CHECK(columns == 0 && implicit == 0 && phases == 1 && pairs == 1 && col2im == 0,
          "limit 0: %llu column products, %llu implicit GEMMs, %llu phases, %llu pairs, %llu "
          "col2im (want 0, 0, 1, 1, 0)", columns, implicit, phases, pairs, col2im);
    if (whole && chunked)
        CHECK(memcmp(whole, chunked, sizeof(float) * 3 * 10 * 11 * 13) == 0,
              "the chunked columns' dx differs from the whole batch's");
    free(whole);
    free(chunked);
    free(gemm);
}

/* Backward data at stride 2 goes by phases: ResNet's 3x3 (four, the last
 * paired with the weight gradient) and a 1x1 (one, paired; the rest of dx
 * cleared), its weights packed per phase in one launch, nothing through
 * the implicit GEMM over every tap; within f32 tolerance of the CPU after
 * two steps. */
static void conv_backward_data_by_phases(const void *arg)
{
    (void)arg;
    if (!native_and_counted())
        return;
    const struct {
        build_fn build;
        unsigned long long phases;
    } cases[] = {{build_conv_strided, 3}, {build_conv_strided_pointwise, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tracked t = {0};
        ct_graph *g = ct_graph_new();
        ct_plan *cpu = NULL, *gpu = NULL;
        if (plan_both(cases[i].build, g, &t, &cpu, &gpu)) {
            cuda_emu_counters_enable(1);
            cuda_emu_counters_reset();
            run_and_compare(cpu, gpu, g, &t, 2, TOL_F32);
            unsigned long long implicit, phases, pairs, packs, none;
            counted("gemm<conv_backward_data>", &implicit, &none);
            counted("gemm<conv_backward_phase>", &phases, &none);
            counted("gemm<conv_backward>", &pairs, &none);
            counted("conv_pack_transposed", &packs, &none);
            CHECK(implicit == 0 && phases == 2 * cases[i].phases && pairs == 2 && packs == 2,
                  "case %zu, two steps: %llu implicit GEMMs, %llu phases, %llu pairs, %llu "
                  "packings (want 0, %llu, 2, 2)", i, implicit, phases, pairs, packs,
                  2 * cases[i].phases);
            cuda_emu_counters_enable(0);
        }
        ct_plan_free(cpu);
        ct_plan_free(gpu);
        ct_graph_free(g);
    }
}

/* The phases on the 64-row wide tile, k split (a GPU of 4 SMs, so that
 * 4 to 7 tiles want splits), in one launch a step: of 16 x 16, split 3, 2,
 * 2 and 1 ways (chunks of 96, the split phases' tickets and parts apart);
 * of 17 x 17, 2, 1, 1 and 1 ways (chunks of 128), the first phase's
 * blocks past its one column of tiles idle.  The parts added by their
 * tiles' last blocks; the CPU's answers, and the same bits on a stream
 * without tickets, where finishing kernels add each split product's parts
 * (the split phases', and at 17 x 17 the weight gradient's). */
static void conv_phases_in_one_launch(const void *arg)
{
    (void)arg;
    if (!native_and_counted())
        return;
    const struct {
        build_fn build;
        unsigned long long finishes; /* more without tickets, two steps */
    } cases[] = {{build_conv_strided_wide, 6}, {build_conv_strided_wide_odd, 4}};
    int sms = ct_cuda_sm_count();
    ct_cuda_set_device_info(0, 4);
    ct_cuda_set_conv_wide_min_blocks(0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tracked t = {0};
        ct_graph *g = ct_graph_new();
        ct_plan *cpu = NULL, *gpu = NULL, *unticketed = NULL;
        if (plan_unticketed(cases[i].build, g, &t, &cpu, &gpu, &unticketed)) {
            unsigned long long phases, atomics, finishes, none;
            cuda_emu_counters_enable(1);
            cuda_emu_counters_reset();
            run_and_compare(cpu, gpu, g, &t, 2, TOL_F32);
            counted("gemm<conv_backward_phase>", &phases, &atomics);
            counted("gemm_finish_parts", &finishes, &none);
            unsigned long long ticketed_finishes = finishes;
            CHECK(phases == 2 && atomics > 0,
                  "case %zu with tickets, two steps: %llu launches of the phases, %llu atomics "
                  "(want 2, some)", i, phases, atomics);
            run_unticketed(unticketed);
            counted("gemm<conv_backward_phase>", &phases, &atomics);
            counted("gemm_finish_parts", &finishes, &none);
            CHECK(phases == 2 && atomics == 0 && finishes == ticketed_finishes + cases[i].finishes,
                  "case %zu without tickets, two steps: %llu launches of the phases, %llu "
                  "atomics, %llu finishing launches (want 2, 0, %llu)", i, phases, atomics,
                  finishes, ticketed_finishes + cases[i].finishes);
            cuda_emu_counters_enable(0);
            check_same_bits(gpu, unticketed, g, &t);
        }
        ct_plan_free(cpu);
        ct_plan_free(gpu);
        ct_plan_free(unticketed);
        ct_graph_free(g);
    }
    ct_cuda_set_conv_wide_min_blocks(-1);
    ct_cuda_set_device_info(0, sms);
}
#endif

#ifdef CT_HAVE_CUDA
/* The weight gradient's split is chosen in whole patches (64 pixels):
 * layer4's first 3x3 convolution of ResNet-18 at batch 64 (512 x 2304
 * over 1,024 pixels, 72 tiles on 132 SMs) takes 8 chunks of 128, 576
 * blocks; chosen in k slices of 16 and rounded up to patches afterwards,
 * it took 4 of 256 (288 blocks, three on some SMs and two on others).
 * Read from the workspace: the splits' parts, 512 rows of 2,312 floats
 * (2,304 weights and the bias column, in whole sectors) each.  And a
 * depth below two patches is one chunk, no parts. */
static void conv_weight_split_in_patches(const void *arg)
{
    (void)arg;
    int sms = ct_cuda_sm_count();
    ct_cuda_set_device_info(0, 132);
    ct_conv2d_shape s = {64, 256, 4, 4, 512, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    size_t parts = ct_cuda_conv2d_workspace(&s), row = sizeof(float) * 512 * 2312;
    CHECK(parts == 8 * row, "512 x 2304 over 1024: %zu bytes of parts, %.2f splits (want 8)",
          parts, (double)parts / (double)row);
    s.n_batch = 1; /* 16 pixels */
    CHECK(ct_cuda_conv2d_workspace(&s) == 0, "one image: %zu bytes of parts (want none)",
          ct_cuda_conv2d_workspace(&s));
    ct_cuda_set_device_info(0, sms);
}
#endif

static bool is_tf32_case(const gpu_case *c)
{
    return strncmp(c->name, "conv", 4) == 0;
}

/* The op case called `name` (the table's order may change). */
static const gpu_case *op_case_named(const char *name)
{
    for (int i = 0; i < N_OP_CASES; i++)
        if (strcmp(op_cases[i].name, name) == 0)
            return &op_cases[i];
    return NULL;
}

/* What main runs: the op cases per mode, then (full runs) TF32 convs, TF32
 * linear and SimpleCNN auto, then the extra cases. */
static int n_cases(bool quick)
{
    int count = N_OP_CASES * (quick ? 1 : 2) + N_EXTRA_CASES;
    for (int i = 0; !quick && i < N_OP_CASES; i++)
        count += is_tf32_case(&op_cases[i]);
    return count + (quick ? 0 : 2);
}

static int skip(const char *reason)
{
    printf("test_gpu: skipped %d cases: %s\n", n_cases(getenv("CT_GPU_QUICK") != NULL),
           reason);
    if (getenv("CT_REQUIRE_GPU")) {
        printf("FAIL gpu_available (CT_REQUIRE_GPU is set)\n");
        return 1;
    }
    return 0;
}

int main(void)
{
    /* A build without CUDA answers CT_ERR_UNSUPPORTED here, with the reason. */
    if (ct_backend_new("cuda", &gpu_backend) != CT_OK)
        return skip(ct_last_error());
    CHECK_OK(ct_backend_new("cpu", &cpu_backend));
    CHECK_OK(poison_gpu_memory(gpu_backend));
    bool quick = getenv("CT_GPU_QUICK") != NULL;
    printf("# %s vs %s\n", ct_backend_name(gpu_backend), ct_backend_name(cpu_backend));
    char label[160];
    for (int m = 0; m < (quick ? 1 : 2); m++)
        for (int i = 0; i < N_OP_CASES; i++) {
            op_run run = {&op_cases[i], kernel_modes[m], false};
            snprintf(label, sizeof label, "%s/%s", op_cases[i].name, kernel_modes[m]);
            run_labelled(label, op_case, &run);
        }
    if (!quick) {
        for (int i = 0; i < N_OP_CASES; i++) {
            if (!is_tf32_case(&op_cases[i]))
                continue;
            op_run run = {&op_cases[i], "vendor", true};
            snprintf(label, sizeof label, "%s/vendor_tf32", op_cases[i].name);
            run_labelled(label, op_case, &run);
        }
        run_labelled("linear/vendor_tf32", op_case,
                     &(op_run){op_case_named("linear"), "vendor", true});
        run_labelled("simplecnn_step/auto", simplecnn_step, "auto");
    }
    run_labelled("simplecnn_step/native", simplecnn_step, "native");
    run_labelled("simplecnn_step/vendor", simplecnn_step, "vendor");
    run_labelled("allocator_stats_back_after_plan_free", allocator_stats_return, NULL);
    run_labelled("profile_has_device_times", profile_has_device_times, NULL);
    run_labelled("over_the_cap_is_memory_error", over_the_cap_is_memory_error, NULL);
    run_labelled("bad_label_is_arg_error", bad_label_is_arg_error, NULL);
    run_labelled("bad_label_is_arg_error/bf16", bad_label_is_arg_error, "bf16");
    run_labelled("steps_are_deterministic/native", steps_are_deterministic, "native");
    run_labelled("steps_are_deterministic/vendor", steps_are_deterministic, "vendor");
    run_labelled("missing_ops_run_on_the_cpu", missing_ops_run_on_the_cpu, NULL);
#ifdef CT_HAVE_CUDA
    run_labelled("conv_weight_split_in_patches", conv_weight_split_in_patches, NULL);
#endif
    ct_backend *probe = NULL;
    if (ct_backend_new("cuda:1", &probe) == CT_OK) {
        ct_backend_free(probe);
        run_labelled("two_gpus_in_one_process", two_gpus_in_one_process, NULL);
    }
    else
        printf("# two_gpus_in_one_process: not run, one GPU (CUDA_EMU_DEVICES=2 emulates two)\n");
#ifdef CUDA_EMU
    run_labelled("vendor_failure_falls_back_once", vendor_failure_falls_back_once, NULL);
    run_labelled("vendor_mode_calls_the_libraries", vendor_mode_calls_the_libraries, NULL);
    run_labelled("auto_times_cudnn_algorithms", auto_times_cudnn_algorithms, NULL);
    run_labelled("small_products_split_k", small_products_split_k, NULL);
    run_labelled("wide_split_finishes_many_outputs", wide_split_finishes_many_outputs, NULL);
    run_labelled("channel_reductions_finish_in_kernel", channel_reductions_finish_in_kernel,
                 NULL);
    run_labelled("conv_backward_data_by_columns", conv_backward_data_by_columns, NULL);
    run_labelled("conv_backward_data_by_phases", conv_backward_data_by_phases, NULL);
    run_labelled("conv_phases_in_one_launch", conv_phases_in_one_launch, NULL);
    run_labelled("batchnorm_params_in_makers", batchnorm_params_in_makers, NULL);
    run_labelled("linear_backward_paired", linear_backward_paired, NULL);
#endif
    ct_backend_free(gpu_backend);
    ct_backend_free(cpu_backend);
    return harness_finish();
}
