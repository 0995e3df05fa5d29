/*
 * Every op of the op enum (src/ops/ops.h), forward and backward, on every
 * backend and kernel choice, against a CPU reference: ggml's
 * test-backend-ops for cuttle.
 *
 * The reference is the CPU backend on one thread with its portable C
 * kernels (ct_cpu_simd_set(false): the CPU file is the spec), each node
 * run by its own kernel (no plan-time fusion, graph/fuse.c).  Compared
 * with it: "cpu" (all cores; AVX2, direct and Winograd convolutions, fused
 * relu and eval relu+maxpool), "cuda-native" and "cuda-vendor"
 * (cuBLAS/cuDNN for convolution, linear and pooling forward).  Each entry
 * builds a graph through the public API, differentiates it (a random dy, or
 * a cross-entropy loss) and may add an optimizer.  Every plan gets the same
 * random inputs, parameters and buffers (never zero) and runs two training
 * steps or one evaluation pass; every output, input gradient, parameter
 * gradient and piece of state is then compared, within the entry's
 * tolerance relative to the reference's largest value.  GPU memory is
 * poisoned (NaN) as it is handed out.
 *
 * Shapes: one element; odd sizes; channels, features and classes above a
 * warp (32); and more items than one grid-stride launch covers on the
 * emulated H100: 132 SMs x 8 blocks x 256 threads = 270,336 threads, or
 * 8,448 warps for the ops that give each row a warp.
 *
 * Completeness: an op that a backend supports (its supports_op, asked of a
 * node of that op) must have a node in the graph of some entry, unless the
 * exception list names it; and each entry's graph must hold the ops the
 * entry says it is for.  Without CUDA (a CPU build, or no device) the cuda
 * columns are skipped with one line; the rest still runs.
 */
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "cpu/simd.h"
#include "cuttle.h"
#include "graph/backend.h"
#include "graph/impl.h"
#include "harness.h"
#include "ops/ops.h"
#ifdef CT_HAVE_CUDA
#include "cuda/cuda.h"
#include "cuda/kernels.h"
#endif

#define PLAN_SEED 7
#define TRAIN_STEPS 2 /* the second step sees optimizer state and new dropout masks */
#define TOL_F32 1e-5
#define MAX_TRACKED 8
#define MAX_TARGETS 64
#define MAX_COVERS 8

/* Modes an entry runs in. */
#define TRAIN (1u << CT_TRAIN)
#define EVAL (1u << CT_EVAL)

/* ---- the table ------------------------------------------------------------------ */

typedef struct tracked {
    ct_tensor *inputs[MAX_TRACKED];
    int n_inputs;
    ct_tensor *outputs[MAX_TRACKED];
    int n_outputs;
    int n_classes; /* of the "labels" input */
} tracked;

typedef struct entry entry;
typedef ct_status (*build_fn)(ct_graph *g, tracked *t, const entry *e);

struct entry {
    const char *name;
    build_fn build;
    ct_op covers[MAX_COVERS]; /* the ops it is for: its graph must hold them (0-ended) */
    int64_t shape[4];         /* the main input; a 0 ends it */
    int out;                  /* output channels, features or classes */
    int kernel[2];            /* convolution kernel */
    ct_conv_args conv;
    ct_pool_args pool;
    int parts[3];             /* concat: the channels of each input (0: fewer inputs) */
    float p;                  /* dropout probability, label smoothing */
    bool bias, relu, i32_labels;
    ct_sgd_args sgd;          /* lr > 0: an SGD step after backward */
    ct_adam_args adam;        /* lr > 0: an Adam step after backward */
    unsigned modes;           /* TRAIN | EVAL; 0: TRAIN */
    double tol;               /* 0: TOL_F32 */
    ct_precision precision;   /* the half_* builders: CT_PRECISION_BF16 or _FP16 */
    /* > 0: the tolerance of the targets that hold 16-bit values (holds_half),
     * compared as floats; 0: those are compared bit for bit (16-bit tensors)
     * or within tol (their f32 casts) */
    double tol_half;
};

static int ndim_of(const entry *e)
{
    int ndim = 0;
    while (ndim < 4 && e->shape[ndim])
        ndim++;
    return ndim;
}

static ct_tensor *input(ct_graph *g, tracked *t, const char *name, ct_dtype dtype, int ndim,
                        const int64_t *shape, bool grad)
{
    ct_tensor *x = ct_input(g, name, dtype, ndim, shape);
    if (x && grad)
        ct_tensor_requires_grad(x);
    if (x && t->n_inputs < MAX_TRACKED)
        t->inputs[t->n_inputs++] = x;
    return x;
}

static ct_tensor *main_input(ct_graph *g, tracked *t, const entry *e, bool grad)
{
    return input(g, t, "x", CT_F32, ndim_of(e), e->shape, grad);
}

/* After the backward graph: the entry's optimizer, if it has one. */
static ct_status optimize(ct_graph *g, const entry *e, ct_status backward)
{
    if (backward != CT_OK)
        return backward;
    if (e->sgd.lr > 0)
        return ct_graph_sgd(g, e->sgd);
    if (e->adam.lr > 0)
        return ct_graph_adam(g, e->adam);
    return CT_OK;
}

/* y is kept, compared and differentiated against a random dy. */
static ct_status finish_vjp(ct_graph *g, tracked *t, const entry *e, ct_tensor *y)
{
    if (!y)
        return ct_graph_status(g);
    ct_tensor_keep(y);
    t->outputs[t->n_outputs++] = y;
    int64_t shape[CT_MAX_DIMS];
    for (int d = 0; d < ct_tensor_ndim(y); d++)
        shape[d] = ct_tensor_dim(y, d);
    ct_tensor *dy = input(g, t, "dy", CT_F32, ct_tensor_ndim(y), shape, false);
    if (!dy)
        return ct_graph_status(g);
    return optimize(g, e, ct_graph_backward_vjp(g, y, dy));
}

/* Mean cross-entropy of logits [N,C] against random labels, differentiated. */
static ct_status finish_loss(ct_graph *g, tracked *t, const entry *e, ct_tensor *logits)
{
    if (!logits)
        return ct_graph_status(g);
    int64_t n = ct_tensor_dim(logits, 0);
    t->n_classes = (int)ct_tensor_dim(logits, 1);
    ct_tensor *labels = input(g, t, "labels", e->i32_labels ? CT_I32 : CT_I64, 1, &n, false);
    ct_tensor *loss = ct_cross_entropy(g, logits, labels, e->p);
    if (!loss)
        return ct_graph_status(g);
    t->outputs[t->n_outputs++] = loss;
    return optimize(g, e, ct_graph_backward(g, loss));
}

static ct_status build_activations(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *x = main_input(g, t, e, true);
    ct_tensor *sum = ct_add(g, ct_relu(g, x), ct_sigmoid(g, x));
    return finish_vjp(g, t, e, ct_add(g, sum, ct_tanh(g, x)));
}

/* f32 -> bf16 -> f16 -> f32: the conversions autocast inserts, and in
 * backward the same casts back (the gradient rounds through both). */
static ct_status build_casts(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *x = main_input(g, t, e, true);
    return finish_vjp(g, t, e, ct_cast(g, ct_cast(g, ct_cast(g, x, CT_BF16), CT_F16), CT_F32));
}

/* relu(h + sigmoid(h)), h = relu(x): the outer relu fused into the add (a
 * residual block's end); in backward h's gradient is the add of its two
 * parts, which computes h's relu_bwd too (graph/fuse.c; a residual
 * block's input, read by its convolution and its shortcut).  sigmoid, not
 * tanh: where h is 0 both parts are then nonzero, so only h's mask makes
 * x's gradient 0 there. */
static ct_status build_add_relu(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = ct_relu(g, main_input(g, t, e, true));
    return finish_vjp(g, t, e, ct_relu(g, ct_add(g, h, ct_sigmoid(g, h))));
}

/* A constant node (ops.h: it seeds the gradient of a loss), kept. */
static ct_status build_fill(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *y = ct_fill(g, main_input(g, t, e, false), 0.75f);
    if (y) {
        ct_tensor_keep(y);
        t->outputs[t->n_outputs++] = y;
    }
    return ct_graph_status(g);
}

static ct_status build_dropout(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_dropout(g, main_input(g, t, e, true), e->p));
}

static ct_status build_concat(ct_graph *g, tracked *t, const entry *e)
{
    static const char *const names[3] = {"a", "b", "c"};
    ct_tensor *xs[3];
    int n = 0;
    for (; n < 3 && e->parts[n]; n++) {
        int64_t shape[4];
        memcpy(shape, e->shape, sizeof shape);
        shape[1] = e->parts[n];
        xs[n] = input(g, t, names[n], CT_F32, ndim_of(e), shape, true);
    }
    return finish_vjp(g, t, e, ct_concat(g, n, xs));
}

/* ---- 16-bit activations (a bf16 or fp16 graph) ----------------------------------- */

/* The main input cast to the entry's 16-bit dtype, in a graph of its
 * precision: the ops after it store 16 bits, as after a 16-bit convolution. */
static ct_tensor *half_input(ct_graph *g, tracked *t, const entry *e)
{
    CHECK_OK(ct_graph_set_precision(g, e->precision));
    ct_dtype dtype = e->precision == CT_PRECISION_BF16 ? CT_BF16 : CT_F16;
    return ct_cast(g, main_input(g, t, e, true), dtype);
}

/* y16 kept and compared bit for bit (a 16-bit output); its f32 cast
 * differentiated against a random dy (casts back to 16 bits in backward). */
static ct_status finish_half(ct_graph *g, tracked *t, const entry *e, ct_tensor *y16)
{
    if (!y16)
        return ct_graph_status(g);
    ct_tensor_keep(y16);
    t->outputs[t->n_outputs++] = y16;
    return finish_vjp(g, t, e, ct_cast(g, y16, CT_F32));
}

/* relu, add, dropout and concat of 16-bit values; backward: relu_bwd, add
 * (the gradients meeting at h and r), dropout and slice_channels. */
static ct_status build_half_moves(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = half_input(g, t, e);
    ct_tensor *r = ct_relu(g, h);
    ct_tensor *xs[2] = {ct_dropout(g, ct_add(g, r, h), e->p), r};
    return finish_half(g, t, e, ct_concat(g, 2, xs));
}

static ct_status build_half_sigmoid_tanh(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = half_input(g, t, e);
    return finish_half(g, t, e, ct_add(g, ct_sigmoid(g, h), ct_tanh(g, h)));
}

/* A 2x2 max pool (CUDA's pool2x2 kernels), a padded average pool that
 * excludes the padding, an overlapping padded max pool, a relu and a
 * global average pool (the relu's backward in the pool's on CUDA): 16-bit
 * in and out of each, backward too. */
static ct_status build_half_pools(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = ct_maxpool2d(g, half_input(g, t, e), (ct_pool_args){.kernel = {2, 2}});
    h = ct_avgpool2d(g, h, (ct_pool_args){.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1},
                                          .exclude_pad = true});
    h = ct_maxpool2d(g, h, (ct_pool_args){.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}});
    return finish_half(g, t, e, ct_global_avgpool(g, ct_relu(g, h)));
}

/* Batchnorm of 16-bit x (f32 statistics, gamma, beta, running buffers) to
 * 16-bit y; backward: 16-bit dx, f32 dgamma and dbeta. */
static ct_status build_half_batchnorm(ct_graph *g, tracked *t, const entry *e)
{
    return finish_half(g, t, e, ct_layer_batchnorm2d(g, "bn", half_input(g, t, e)));
}

/* build_add_relu in 16 bits: the relus fused into the add (forward) and
 * h's into the add of its gradient (CUDA; the CPU's reads f32 masks). */
static ct_status build_half_add_relu(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = ct_relu(g, half_input(g, t, e));
    return finish_half(g, t, e, ct_relu(g, ct_add(g, h, ct_sigmoid(g, h))));
}

/* The same followed by a relu, fused into the 16-bit batchnorm's store. */
static ct_status build_half_batchnorm_relu(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *bn = ct_layer_batchnorm2d(g, "bn", half_input(g, t, e));
    return finish_half(g, t, e, ct_relu(g, bn));
}

/* The cross-entropy of 16-bit logits (an f32 loss); backward: 16-bit
 * dlogits. */
static ct_status build_half_cross_entropy(ct_graph *g, tracked *t, const entry *e)
{
    return finish_loss(g, t, e, half_input(g, t, e));
}

/* A convolution (bias, relu) of a bf16 or fp16 graph: 16-bit input, weight
 * copy and output (CUDA: tensor cores), backward too. */
static ct_status build_half_conv(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *y = ct_layer_conv2d(g, "conv", half_input(g, t, e), e->out, e->kernel[0],
                                   e->kernel[1], e->conv, e->bias);
    return finish_half(g, t, e, e->relu ? ct_relu(g, y) : y);
}

static ct_status build_half_linear(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *y = ct_layer_linear(g, "fc", half_input(g, t, e), e->out, e->bias);
    return finish_half(g, t, e, e->relu ? ct_relu(g, y) : y);
}

static ct_status build_softmax(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_softmax(g, main_input(g, t, e, true)));
}

static ct_status build_cross_entropy(ct_graph *g, tracked *t, const entry *e)
{
    return finish_loss(g, t, e, main_input(g, t, e, true));
}

static ct_status build_linear(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *y = ct_layer_linear(g, "fc", main_input(g, t, e, true), e->out, e->bias);
    return finish_vjp(g, t, e, e->relu ? ct_relu(g, y) : y);
}

static ct_status build_conv(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *y = ct_layer_conv2d(g, "conv", main_input(g, t, e, true), e->out, e->kernel[0],
                                   e->kernel[1], e->conv, e->bias);
    return finish_vjp(g, t, e, e->relu ? ct_relu(g, y) : y);
}

static ct_status build_maxpool(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_maxpool2d(g, main_input(g, t, e, true), e->pool));
}

/* conv -> relu -> conv: in backward the relu_bwd is fused into the second
 * conv's backward data on CUDA (graph/fuse.c), its GEMM storing 0 where
 * the relu's output is 0 (f32, and in bf16 and fp16 graphs the
 * tensor-core GEMM). */
static ct_status build_conv_relu_conv(ct_graph *g, tracked *t, const entry *e)
{
    bool half = e->precision != CT_PRECISION_FP32;
    ct_tensor *x = half ? half_input(g, t, e) : main_input(g, t, e, true);
    ct_tensor *h = ct_relu(g, ct_layer_conv2d(g, "conv1", x, e->out, e->kernel[0],
                                              e->kernel[1], e->conv, e->bias));
    ct_tensor *y = ct_layer_conv2d(g, "conv2", h, 5, 3, 3, (ct_conv_args){.pad = {1, 1}},
                                   e->bias);
    return half ? finish_half(g, t, e, y) : finish_vjp(g, t, e, y);
}

/* conv -> relu -> a 3x3 convolution at stride 2 over e->out channels:
 * CUDA's backward data by phases stores relu_bwd's 0 in each phase's
 * pixels (f32). */
static ct_status build_conv_relu_conv_strided(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *x = main_input(g, t, e, true);
    ct_tensor *h = ct_relu(g, ct_layer_conv2d(g, "conv1", x, e->out, e->kernel[0],
                                              e->kernel[1], e->conv, e->bias));
    ct_tensor *y = ct_layer_conv2d(g, "conv2", h, 20, 3, 3,
                                   (ct_conv_args){.stride = {2, 2}, .pad = {1, 1}}, e->bias);
    return finish_vjp(g, t, e, y);
}

/* A convolution whose weight is a plain input (no gradient) and whose bias
 * is trained: no weight gradient to fuse the bias gradient into, so the
 * channel_sum runs its own kernel (every other bias's is fused). */
static ct_status build_conv_fixed_weight(ct_graph *g, tracked *t, const entry *e)
{
    bool half = e->precision != CT_PRECISION_FP32;
    ct_tensor *x = half ? half_input(g, t, e) : main_input(g, t, e, true);
    int64_t w_shape[4] = {e->out, e->shape[1], e->kernel[0], e->kernel[1]};
    ct_tensor *w = input(g, t, "w", CT_F32, 4, w_shape, false);
    ct_tensor *bias = ct_param(g, "conv.bias", 1, (int64_t[]){e->out}, CT_INIT_UNIFORM, 0.5f);
    ct_tensor *y = ct_conv2d(g, x, w, bias, e->conv);
    return half ? finish_half(g, t, e, y) : finish_vjp(g, t, e, y);
}

/* relu -> max pool, in f32 or (with a precision) 16 bits: in backward the
 * relu_bwd is fused into the pool's backward on CUDA (graph/fuse.c), and x
 * has as many values <= 0 as above, so the mask matters. */
static ct_status build_relu_maxpool(ct_graph *g, tracked *t, const entry *e)
{
    if (e->precision == CT_PRECISION_FP32)
        return finish_vjp(g, t, e, ct_maxpool2d(g, ct_relu(g, main_input(g, t, e, true)), e->pool));
    return finish_half(g, t, e, ct_maxpool2d(g, ct_relu(g, half_input(g, t, e)), e->pool));
}

static ct_status build_avgpool(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_avgpool2d(g, main_input(g, t, e, true), e->pool));
}

static ct_status build_global_avgpool(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_global_avgpool(g, main_input(g, t, e, true)));
}

/* A relu before the pool (ResNet's end): its backward is the pool
 * backward's store (graph/fuse.c). */
static ct_status build_relu_global_avgpool(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_global_avgpool(g, ct_relu(g, main_input(g, t, e, true))));
}

static ct_status build_batchnorm(ct_graph *g, tracked *t, const entry *e)
{
    return finish_vjp(g, t, e, ct_layer_batchnorm2d(g, "bn", main_input(g, t, e, true)));
}

/* batchnorm -> relu: the relu fused into batchnorm's kernel (graph/fuse.c;
 * tests/test_gradcheck_norm.c checks the fused CPU reference). */
static ct_status build_batchnorm_relu(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *bn = ct_layer_batchnorm2d(g, "bn", main_input(g, t, e, true));
    return finish_vjp(g, t, e, ct_relu(g, bn));
}

/* A residual block's end, its batchnorms computed by the add (graph/fuse.c,
 * ct_fuse_bn_add): in 16 bits where the entry has a 16-bit precision. */
static ct_status finish_bn_add(ct_graph *g, tracked *t, const entry *e, ct_tensor *y)
{
    if (e->relu)
        y = ct_relu(g, y);
    return e->precision ? finish_half(g, t, e, y) : finish_vjp(g, t, e, y);
}

static ct_tensor *bn_add_input(ct_graph *g, tracked *t, const entry *e)
{
    return e->precision ? half_input(g, t, e) : main_input(g, t, e, true);
}

/* bn(h) + sigmoid(h): an identity shortcut (the batchnorm first). */
static ct_status build_bn_add(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = bn_add_input(g, t, e);
    return finish_bn_add(g, t, e, ct_add(g, ct_layer_batchnorm2d(g, "bn", h), ct_sigmoid(g, h)));
}

/* sigmoid(h) + bn(h): the batchnorm second (the sum in the add's order). */
static ct_status build_add_bn(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = bn_add_input(g, t, e);
    return finish_bn_add(g, t, e, ct_add(g, ct_sigmoid(g, h), ct_layer_batchnorm2d(g, "bn", h)));
}

/* bn2(h) + bn_s(tanh(h)): a downsampling block's two batchnorms, both
 * computed by the add. */
static ct_status build_bn_add_bn(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = bn_add_input(g, t, e);
    return finish_bn_add(g, t, e,
                         ct_add(g, ct_layer_batchnorm2d(g, "bn2", h),
                                ct_layer_batchnorm2d(g, "bn_s", ct_tanh(g, h))));
}

/* r1 = relu(bn2(h) + bn_s(tanh(h))), r2 = relu(bn3(r1) + r1), then
 * sigmoid(r2) + tanh(r2): the backward's adds that sum r2's and r1's
 * gradients make the dy of bn3 and of bn2 and bn_s, and compute their
 * parameter gradients as they store it (graph/fuse.c ct_fuse_bn_params). */
static ct_status build_bn_params_add(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = bn_add_input(g, t, e);
    ct_tensor *r1 = ct_relu(g, ct_add(g, ct_layer_batchnorm2d(g, "bn2", h),
                                      ct_layer_batchnorm2d(g, "bn_s", ct_tanh(g, h))));
    ct_tensor *r2 = ct_relu(g, ct_add(g, ct_layer_batchnorm2d(g, "bn3", r1), r1));
    ct_tensor *y = ct_add(g, ct_sigmoid(g, r2), ct_tanh(g, r2));
    return e->precision ? finish_half(g, t, e, y) : finish_vjp(g, t, e, y);
}

/* maxpool 2x2 (relu(bn(h))): the pool's backward makes the batchnorm's dy
 * and computes its parameter gradients (graph/fuse.c ct_fuse_bn_params): by
 * the 2x2 kernel's fused pass on even planes, by the general kernel and the
 * batchnorm's own on odd ones. */
static ct_status build_bn_params_pool(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *r = ct_relu(g, ct_layer_batchnorm2d(g, "bn", bn_add_input(g, t, e)));
    ct_tensor *y = ct_maxpool2d(g, r, (ct_pool_args){.kernel = {2, 2}});
    return e->precision ? finish_half(g, t, e, y) : finish_vjp(g, t, e, y);
}

/* y = x + p with p a parameter of x's shape: an optimizer over every element. */
static ct_status build_param_add(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *x = main_input(g, t, e, false);
    ct_tensor *p = ct_param(g, "p", ndim_of(e), e->shape, CT_INIT_UNIFORM, 1.0f);
    return finish_vjp(g, t, e, ct_add(g, x, p));
}

/* fc1 (16) relu fc2 (e->out classes) cross-entropy. */
static ct_status build_mlp(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *h = ct_relu(g, ct_layer_linear(g, "fc1", main_input(g, t, e, false), 16, true));
    return finish_loss(g, t, e, ct_layer_linear(g, "fc2", h, e->out, true));
}

/* build_mlp in fp16: the scaled loss (the seed fill times 2^16), the
 * check_finite node, updates that divide by the scale. */
static ct_status build_mlp_fp16(ct_graph *g, tracked *t, const entry *e)
{
    CHECK_OK(ct_graph_set_precision(g, CT_PRECISION_FP16));
    return build_mlp(g, t, e);
}

/* conv 3x3, relu, maxpool 2x2 (the CPU fuses all three in evaluation),
 * flatten, linear (e->out classes), cross-entropy. */
static ct_status build_cnn(ct_graph *g, tracked *t, const entry *e)
{
    ct_tensor *x = main_input(g, t, e, true);
    ct_tensor *h = ct_relu(g, ct_layer_conv2d(g, "conv", x, 7, 3, 3, (ct_conv_args){0}, true));
    h = ct_flatten(g, ct_maxpool2d(g, h, (ct_pool_args){.kernel = {2, 2}}));
    return finish_loss(g, t, e, ct_layer_linear(g, "fc", h, e->out, true));
}

#define OPS(...) .covers = {__VA_ARGS__}
#define X(...) .shape = {__VA_ARGS__}
#define BOTH_MODES .modes = TRAIN | EVAL
#define ACTIVATIONS OPS(CT_OP_RELU, CT_OP_RELU_BWD, CT_OP_SIGMOID, CT_OP_SIGMOID_BWD, \
                        CT_OP_TANH, CT_OP_TANH_BWD, CT_OP_ADD)
#define CONCAT OPS(CT_OP_CONCAT, CT_OP_SLICE_CHANNELS)
#define SOFTMAX OPS(CT_OP_SOFTMAX, CT_OP_SOFTMAX_BWD)
#define CROSS_ENTROPY OPS(CT_OP_CROSS_ENTROPY, CT_OP_CROSS_ENTROPY_BWD, CT_OP_FILL)
#define LINEAR CT_OP_LINEAR, CT_OP_LINEAR_BWD_DATA, CT_OP_LINEAR_BWD_WEIGHT
#define CONV CT_OP_CONV2D, CT_OP_CONV2D_BWD_DATA, CT_OP_CONV2D_BWD_WEIGHT
#define MAXPOOL OPS(CT_OP_MAXPOOL2D, CT_OP_MAXPOOL2D_BWD)
#define RELU_MAXPOOL OPS(CT_OP_RELU, CT_OP_MAXPOOL2D, CT_OP_MAXPOOL2D_BWD)
#define AVGPOOL OPS(CT_OP_AVGPOOL2D, CT_OP_AVGPOOL2D_BWD)
#define GLOBAL_AVGPOOL OPS(CT_OP_GLOBAL_AVGPOOL, CT_OP_GLOBAL_AVGPOOL_BWD)
#define BN_ADD OPS(CT_OP_BN_STATS, CT_OP_BN_APPLY, CT_OP_ADD)
#define BATCHNORM OPS(CT_OP_BN_STATS, CT_OP_BN_APPLY, CT_OP_BN_BWD_PARAMS, CT_OP_BN_BWD_DATA, \
                      CT_OP_VIEW)
#define BN_PARAMS_POOL OPS(CT_OP_BN_BWD_PARAMS, CT_OP_MAXPOOL2D, CT_OP_MAXPOOL2D_BWD, \
                           CT_OP_RELU_BWD)
#define BN_PARAMS_ADD OPS(CT_OP_BN_BWD_PARAMS, CT_OP_BN_BWD_DATA, CT_OP_ADD, CT_OP_RELU_BWD)
#define POOL_3X3_SAME .pool = {.kernel = {3, 3}, .stride = {1, 1}, .pad = {1, 1}}
#define ADAM(...) {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, __VA_ARGS__}
/* Sums of many terms (the gradients of weights, biases, gamma and beta):
 * rounding grows with the square root of the length (here 3,001 to 101,200). */
#define TOL_LONG_SUM 5e-5
/* 16-bit results: the GPU rounds the CPU's f32 results at the same points,
 * so its f32 gradients (cast from 16 bits) are the same values (tol 0
 * would mean TOL_F32).  sigmoid and tanh: a GPU's expf and tanhf may differ
 * from the host's in the last f32 bit, which rounds to one unit of the
 * 16-bit value now and then (2^-8 of bf16 values below 1, 2^-11 of f16). */
#define TOL_EXACT 1e-300
#define TOL_BF16_ULP 0x1p-7
#define TOL_F16_ULP 0x1p-10
/* Products of 16-bit values summed in f32 in another order than the CPU's
 * (tensor cores): a result may round to the other neighbour, one unit of
 * its 16-bit value, at most 2^-7 (bf16) or 2^-10 (f16) of the largest;
 * allowed: 4 units of 2^-8 or 2^-11, for the 16-bit outputs (tol_half) and
 * the f32 gradients cast from 16 bits alike. */
#define TOL_BF16_SUMS .tol = 0x1p-6, .tol_half = 0x1p-6, .precision = CT_PRECISION_BF16
#define TOL_F16_SUMS .tol = 0x1p-9, .tol_half = 0x1p-9, .precision = CT_PRECISION_FP16
#define HALF_MOVES OPS(CT_OP_CAST, CT_OP_RELU, CT_OP_RELU_BWD, CT_OP_ADD, CT_OP_DROPOUT, \
                       CT_OP_CONCAT, CT_OP_SLICE_CHANNELS)
#define HALF_SIGMOID_TANH OPS(CT_OP_SIGMOID, CT_OP_SIGMOID_BWD, CT_OP_TANH, CT_OP_TANH_BWD, \
                              CT_OP_ADD)
#define HALF_POOLS OPS(CT_OP_MAXPOOL2D, CT_OP_MAXPOOL2D_BWD, CT_OP_AVGPOOL2D,            \
                       CT_OP_AVGPOOL2D_BWD, CT_OP_GLOBAL_AVGPOOL, CT_OP_GLOBAL_AVGPOOL_BWD)
/* 16-bit batchnorm, cross-entropy and bias gradients: the GPU's f32 sums
 * run in another order than the CPU's, so its f32 results (statistics,
 * the row's log-sum-exp, dgamma) may differ in the last bits, which now and
 * then moves a 16-bit result by one unit (compare_half_values): within
 * 2^-6 (bf16) or 2^-9 (f16) of the largest value, 2 to 4 units in its last
 * place (measured: 0 and 4.1e-4); the f32 results (loss, dgamma, dbeta,
 * db, running statistics) as tight as the f32 entries'. */
#define TOL_BF16_2ULP 0x1p-6
#define TOL_F16_2ULP 0x1p-9
#define HALF_BF16 .precision = CT_PRECISION_BF16, .tol_half = TOL_BF16_2ULP
#define HALF_FP16 .precision = CT_PRECISION_FP16, .tol_half = TOL_F16_2ULP

static const entry entries[] = {
    /* elementwise: one element, odd, 300,009 elements (more than a grid) */
    {"activations_one", build_activations, ACTIVATIONS, X(1, 1)},
    {"activations_odd", build_activations, ACTIVATIONS, X(3, 7, 5, 11)},
    {"activations_large", build_activations, ACTIVATIONS, X(3, 100003)},
    {"fill_large", build_fill, OPS(CT_OP_FILL), X(3, 100003)},
    {"add_relu_fused", build_add_relu, OPS(CT_OP_ADD, CT_OP_RELU, CT_OP_RELU_BWD, CT_OP_SIGMOID),
     X(3, 7, 5, 11)},
    /* many of the CPU's chunks and its parallel loop, a tail of 1,545 */
    {"add_relu_large", build_add_relu, OPS(CT_OP_ADD, CT_OP_RELU, CT_OP_RELU_BWD, CT_OP_SIGMOID),
     X(3, 100003)},
    {"casts_odd", build_casts, OPS(CT_OP_CAST), X(3, 7, 5, 11)},
    {"casts_large", build_casts, OPS(CT_OP_CAST), X(3, 100003)},
    /* 16-bit activations: 300,405 elements (eight halves per 128-bit access
     * and a tail of five), channels of odd inner sizes for concat */
    {"half_moves_bf16", build_half_moves, HALF_MOVES, X(3, 5, 7, 2861), .p = 0.3f, BOTH_MODES,
     .tol = TOL_EXACT, .precision = CT_PRECISION_BF16},
    {"half_moves_fp16", build_half_moves, HALF_MOVES, X(3, 5, 7, 2861), .p = 0.3f, BOTH_MODES,
     .tol = TOL_EXACT, .precision = CT_PRECISION_FP16},
    {"half_sigmoid_tanh_bf16", build_half_sigmoid_tanh, HALF_SIGMOID_TANH, X(3, 7, 5, 11),
     .tol = TOL_BF16_ULP, .precision = CT_PRECISION_BF16},
    {"half_sigmoid_tanh_fp16", build_half_sigmoid_tanh, HALF_SIGMOID_TANH, X(3, 7, 5, 11),
     .tol = TOL_F16_ULP, .precision = CT_PRECISION_FP16},
    /* 34 x 30 -> 17 x 15 -> 17 x 15 -> 9 x 8 -> 1 x 1 */
    {"half_pools_bf16", build_half_pools, HALF_POOLS, X(2, 35, 34, 30), .tol = TOL_EXACT,
     .precision = CT_PRECISION_BF16},
    {"half_pools_fp16", build_half_pools, HALF_POOLS, X(2, 35, 34, 30), .tol = TOL_EXACT,
     .precision = CT_PRECISION_FP16},
    /* convolution and linear of 16-bit values: channels above 64 (two
     * 64-row tiles), a fused relu and the f32 bias, odd, strided, dilated
     * and grouped, 1x1, and a weight gradient long enough to be split
     * (4 x 24 x 24 pixels: CUDA sums 4 f32 parts, rounds once; with the
     * fused bias gradient's column in the parts) */
    {"half_conv_3x3_relu_bf16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM, CT_OP_RELU),
     X(2, 70, 9, 9), .out = 72, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true,
     .relu = true, TOL_BF16_SUMS},
    {"half_conv_3x3_relu_fp16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM, CT_OP_RELU),
     X(2, 70, 9, 9), .out = 72, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true,
     .relu = true, TOL_F16_SUMS},
    {"half_conv_odd_strided_dilated_grouped_bf16", build_half_conv, OPS(CONV),
     X(3, 34, 11, 13), .out = 36, .kernel = {5, 3},
     .conv = {.stride = {2, 1}, .pad = {2, 0}, .dilation = {1, 2}, .groups = 2}, TOL_BF16_SUMS},
    {"half_conv_odd_strided_dilated_grouped_fp16", build_half_conv, OPS(CONV),
     X(3, 34, 11, 13), .out = 36, .kernel = {5, 3},
     .conv = {.stride = {2, 1}, .pad = {2, 0}, .dilation = {1, 2}, .groups = 2}, TOL_F16_SUMS},
    {"half_conv_pointwise_bf16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 33, 5, 7),
     .out = 65, .kernel = {1, 1}, .bias = true, TOL_BF16_SUMS},
    {"half_conv_pointwise_fp16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 33, 5, 7),
     .out = 65, .kernel = {1, 1}, .bias = true, TOL_F16_SUMS},
    {"half_conv_split_weight_bf16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(4, 16, 24, 24),
     .out = 24, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true, TOL_BF16_SUMS},
    {"half_conv_split_weight_fp16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(4, 16, 24, 24),
     .out = 24, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true, TOL_F16_SUMS},
    {"half_linear_odd_relu_bf16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM, CT_OP_RELU),
     X(7, 67), .out = 33, .bias = true, .relu = true, TOL_BF16_SUMS},
    {"half_linear_odd_relu_fp16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM, CT_OP_RELU),
     X(7, 67), .out = 33, .bias = true, .relu = true, TOL_F16_SUMS},
    {"half_linear_wide_bf16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(70, 130),
     .out = 100, .bias = true, TOL_BF16_SUMS},
    {"half_linear_wide_fp16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(70, 130),
     .out = 100, .bias = true, TOL_F16_SUMS},
    /* 16-bit batchnorm: odd planes (one element at a time), [N,C], planes
     * of a multiple of 4 (64-bit accesses of four halves, segments of 1,024
     * with a partial last one), channels split into chunks (m = 9,600) */
    {"half_batchnorm_odd_bf16", build_half_batchnorm, BATCHNORM, X(3, 40, 7, 9), BOTH_MODES,
     HALF_BF16},
    {"half_batchnorm_odd_fp16", build_half_batchnorm, BATCHNORM, X(3, 40, 7, 9), BOTH_MODES,
     HALF_FP16},
    {"half_batchnorm_2d_bf16", build_half_batchnorm, BATCHNORM, X(9, 37), BOTH_MODES, HALF_BF16},
    {"half_batchnorm_relu_bf16", build_half_batchnorm_relu, BATCHNORM, X(5, 70, 4, 5),
     BOTH_MODES, HALF_BF16},
    {"half_add_relu_fp16", build_half_add_relu,
     OPS(CT_OP_ADD, CT_OP_RELU, CT_OP_RELU_BWD, CT_OP_SIGMOID), X(3, 7, 5, 11), HALF_FP16},
    {"half_batchnorm_2d_fp16", build_half_batchnorm, BATCHNORM, X(9, 37), BOTH_MODES, HALF_FP16},
    {"half_batchnorm_vec_bf16", build_half_batchnorm, BATCHNORM, X(5, 70, 4, 5), BOTH_MODES,
     HALF_BF16},
    {"half_batchnorm_vec_fp16", build_half_batchnorm, BATCHNORM, X(5, 70, 4, 5), BOTH_MODES,
     HALF_FP16},
    {"half_batchnorm_chunks_bf16", build_half_batchnorm, BATCHNORM, X(4, 3, 40, 60), BOTH_MODES,
     HALF_BF16},
    {"half_batchnorm_chunks_fp16", build_half_batchnorm, BATCHNORM, X(4, 3, 40, 60), BOTH_MODES,
     HALF_FP16},
    /* 16-bit cross-entropy: rows staged (37 classes) and read in place
     * (1,000), label smoothing, i64 and i32 labels */
    {"half_cross_entropy_many_rows_bf16", build_half_cross_entropy, CROSS_ENTROPY,
     X(9001, 37), .p = 0.1f, HALF_BF16},
    {"half_cross_entropy_many_rows_fp16", build_half_cross_entropy, CROSS_ENTROPY,
     X(9001, 37), .p = 0.1f, HALF_FP16},
    {"half_cross_entropy_wide_bf16", build_half_cross_entropy, CROSS_ENTROPY, X(6, 1000),
     .p = 0.2f, .i32_labels = true, HALF_BF16},
    {"half_cross_entropy_wide_fp16", build_half_cross_entropy, CROSS_ENTROPY, X(6, 1000),
     .p = 0.2f, .i32_labels = true, HALF_FP16},
    /* the bias gradient of 16-bit layers: channels in chunks (conv), one
     * block's column sums (linear, 600 columns), chunks of inner 1 (linear,
     * 3,001 rows) */
    {"half_conv_bias_bf16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 5, 9, 11),
     .out = 40, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true, HALF_BF16},
    {"half_conv_bias_fp16", build_half_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 5, 9, 11),
     .out = 40, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true, HALF_FP16},
    {"half_linear_bias_bf16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(100, 20),
     .out = 600, .bias = true, HALF_BF16},
    {"half_linear_bias_fp16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(100, 20),
     .out = 600, .bias = true, HALF_FP16},
    {"half_linear_bias_rows_bf16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM),
     X(3001, 7), .out = 101, .bias = true, .tol = TOL_LONG_SUM, HALF_BF16},
    {"half_linear_bias_rows_fp16", build_half_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM),
     X(3001, 7), .out = 101, .bias = true, .tol = TOL_LONG_SUM, HALF_FP16},
    {"dropout_one", build_dropout, OPS(CT_OP_DROPOUT), X(1, 1), .p = 0.5f, BOTH_MODES},
    {"dropout_large", build_dropout, OPS(CT_OP_DROPOUT), X(7, 43001), .p = 0.3f, BOTH_MODES},
    {"concat_odd", build_concat, CONCAT, X(2, 1, 4, 5), .parts = {3, 1, 4}},
    {"concat_2d_wide", build_concat, CONCAT, X(5, 1), .parts = {33, 40}},
    {"concat_large", build_concat, CONCAT, X(1, 1, 317, 317), .parts = {1, 2}},
    /* a warp per row: 9,001 rows (more than a grid's warps), classes > 32 */
    {"softmax_one", build_softmax, SOFTMAX, X(1, 1)},
    {"softmax_many_rows", build_softmax, SOFTMAX, X(9001, 37)},
    {"softmax_wide", build_softmax, SOFTMAX, X(3, 1000)},
    {"cross_entropy_one_row", build_cross_entropy, CROSS_ENTROPY, X(1, 5), .p = 0.1f},
    {"cross_entropy_many_rows", build_cross_entropy, CROSS_ENTROPY, X(9001, 37), .p = 0.1f},
    {"cross_entropy_wide_i32", build_cross_entropy, CROSS_ENTROPY, X(6, 1000),
     .i32_labels = true},
    /* linear; the CPU fuses a relu after it into its kernel */
    {"linear_one", build_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(1, 1), .out = 1,
     .bias = true},
    {"linear_odd_relu", build_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM, CT_OP_RELU), X(7, 67),
     .out = 33, .bias = true, .relu = true},
    {"linear_wide_no_bias", build_linear, OPS(LINEAR), X(64, 130), .out = 100},
    /* at least 512 rows and columns each way: CUDA's 128 x 128 tile, with
     * partial tiles at every edge */
    {"linear_wide_tile", build_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(515, 600), .out = 530,
     .bias = true},
    /* a bias gradient of 600 columns: CUDA's one-block column sum, with
     * more columns than threads and rows staged 6 at a time */
    {"linear_many_outputs", build_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(100, 20), .out = 600,
     .bias = true},
    {"linear_large_output", build_linear, OPS(LINEAR, CT_OP_CHANNEL_SUM), X(3001, 7),
     .out = 101, .bias = true, .tol = TOL_LONG_SUM},
    /* convolution (the CPU: im2col, direct for few channels, Winograd for 3x3) */
    {"conv_one", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(1, 1, 1, 1), .out = 1,
     .kernel = {1, 1}, .bias = true},
    {"conv_odd_strided_dilated_grouped", build_conv, OPS(CONV), X(3, 34, 11, 13), .out = 36,
     .kernel = {5, 3}, .conv = {.stride = {2, 1}, .pad = {2, 0}, .dilation = {1, 2}, .groups = 2}},
    {"conv_3x3_wide", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 40, 9, 9), .out = 48,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_pointwise_relu", build_conv, OPS(CONV, CT_OP_RELU), X(2, 33, 5, 7), .out = 65,
     .kernel = {1, 1}, .relu = true},
    {"conv_large_output", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 3, 160, 160), .out = 6,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true, .tol = TOL_LONG_SUM},
    /* CUDA's backward data at stride 1 runs as a forward convolution with
     * the flipped weights (grouped, dilated, asymmetric here); padding
     * beyond the kernel's reach takes the gather path */
    {"conv_grouped_dilated_stride1", build_conv, OPS(CONV), X(2, 12, 9, 11), .out = 8,
     .kernel = {3, 2}, .conv = {.pad = {2, 0}, .dilation = {2, 3}, .groups = 4}},
    {"conv_pointwise_padded", build_conv, OPS(CONV), X(2, 5, 4, 4), .out = 3, .kernel = {1, 1},
     .conv = {.pad = {1, 1}}},
    /* taps that only ever meet padding (the CPU crops them: "cropped"):
     * VGG-11's 3x3 layers on 1x1 planes (the centre tap), and a row of
     * 5 (the middle row of taps, all columns) */
    {"conv_3x3_on_1x1", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(3, 20, 1, 1), .out = 24,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_3x3_on_a_row_relu", build_conv, OPS(CONV, CT_OP_RELU), X(2, 6, 1, 5), .out = 7,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .relu = true},
    /* 128+ rows and columns in every pass: CUDA's 128 x 128 tile, staged */
    {"conv_wide_tile", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 130, 9, 11), .out = 136,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_wide_tile_64_rows", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 66, 9, 9),
     .out = 70, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_wide_tile_strided", build_conv, OPS(CONV), X(4, 129, 12, 12), .out = 131,
     .kernel = {1, 1}, .conv = {.stride = {2, 2}}},
    /* planes where CUDA's wide tiles stage the patch bordered with the
     * padding's zeros (conv.cu: at most 30 % more floats): tiles across
     * two images and past the last pixel, k slices past k (66 x 9 and
     * 130 x 9 columns), the forward pass and stride-1 backward data
     * (its offsets mirrored); unequal padding with a dilation; a stride
     * (the forward pass bordered, backward data by phases) */
    {"conv_wide_tile_bordered", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 66, 20, 20),
     .out = 70, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_wide_tile_bordered_dilated", build_conv, OPS(CONV), X(2, 130, 18, 17), .out = 132,
     .kernel = {3, 3}, .conv = {.pad = {2, 1}, .dilation = {2, 1}}},
    {"conv_wide_tile_bordered_strided", build_conv, OPS(CONV), X(2, 66, 34, 33), .out = 68,
     .kernel = {3, 3}, .conv = {.stride = {2, 2}, .pad = {1, 1}}},
    /* backward data's four phases on the 64-row wide tile, planes of
     * 9 x 9, 9 x 8, 8 x 9 and 8 x 8, split 9 ways and more: one by one (in
     * one launch their chunks would be too short for the tiles' last
     * blocks to add the parts; tests/test_gpu.c conv_phases_in_one_launch
     * groups them) */
    {"conv_wide_tile_strided_phases", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM),
     X(2, 66, 17, 17), .out = 70, .kernel = {3, 3}, .conv = {.stride = {2, 2}, .pad = {1, 1}},
     .bias = true},
    /* CUDA's backward data at a stride past 1 goes by phases (conv.cu):
     * ResNet's 3x3 at stride 2 on odd planes (phases of 1, 2, 2 and 4
     * taps); a dilation sharing a factor with the stride (one phase of
     * rows, the other rows cleared); a kernel smaller than the stride
     * (rows and columns that no tap reaches); a dilation whose phase
     * would start before dy's first row (not by phases: the implicit GEMM
     * over every tap) */
    {"conv_strided_phases", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 20, 9, 10),
     .out = 24, .kernel = {3, 3}, .conv = {.stride = {2, 2}, .pad = {1, 1}}, .bias = true},
    {"conv_strided_dilated_phases", build_conv, OPS(CONV), X(2, 18, 11, 9), .out = 20,
     .kernel = {3, 3}, .conv = {.stride = {2, 2}, .pad = {2, 1}, .dilation = {2, 1}}},
    {"conv_stride_past_kernel", build_conv, OPS(CONV), X(2, 17, 10, 8), .out = 19,
     .kernel = {2, 2}, .conv = {.stride = {3, 3}, .pad = {1, 0}}},
    {"conv_strided_phase_before_dy", build_conv, OPS(CONV), X(2, 18, 13, 13), .out = 20,
     .kernel = {3, 3}, .conv = {.stride = {2, 2}, .dilation = {3, 3}}},
    {"conv_relu_conv_strided", build_conv_relu_conv_strided, OPS(CONV, CT_OP_RELU, CT_OP_RELU_BWD),
     X(2, 5, 9, 11), .out = 18, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    /* padding past 16 bits (stride as large, so the output stays small):
     * CUDA's staged columns once packed each tap's offset in 16 bits,
     * which wrapped and read the wrong rows; an offset is an int now */
    {"conv_padding_past_16_bits", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 20, 8, 8),
     .out = 24, .kernel = {3, 3}, .conv = {.stride = {40000, 1}, .pad = {40000, 1}},
     .bias = true},
    /* a kernel of 17 rows: past the 15 a spot's tap bits hold (CUDA's
     * conv_patch_spot), so every pass reads through the index maps */
    {"conv_kernel_past_tap_bits", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 24, 20, 6),
     .out = 20, .kernel = {17, 1}, .conv = {.pad = {8, 0}}, .bias = true},
    /* rows too wide for CUDA's staged patches (forward and backward data):
     * reads through the index maps instead */
    {"conv_pointwise_wide_rows", build_conv, OPS(CONV), X(2, 20, 5, 300), .out = 20,
     .kernel = {1, 1}, .conv = {.stride = {2, 1}, .pad = {1, 0}}, .bias = true},
    /* few input channels per group: CUDA's direct kernel (staged rows by
     * phase; weights in chunks of output channels, 70 = 4 x 16 + 6, the
     * last register block padded with zero weights) */
    {"conv_direct_stem", build_conv, OPS(CONV, CT_OP_CHANNEL_SUM), X(2, 3, 37, 29), .out = 70,
     .kernel = {7, 7}, .conv = {.stride = {2, 2}, .pad = {3, 3}}, .bias = true},
    /* 4 x 12 x 12 taps: no register block's weights fit the direct
     * kernel's chunk (a chunk of 0 channels never finished): the implicit
     * GEMM instead */
    {"conv_direct_too_many_taps", build_conv, OPS(CONV), X(1, 4, 14, 13), .out = 9,
     .kernel = {12, 12}, .conv = {.pad = {1, 0}}, .bias = true},
    {"conv_direct_grouped_dilated", build_conv, OPS(CONV), X(2, 6, 15, 17), .out = 10,
     .kernel = {3, 3}, .conv = {.stride = {1, 2}, .pad = {2, 1}, .dilation = {2, 1}, .groups = 2},
     .bias = true},
    {"cnn_conv_relu_maxpool_flatten", build_cnn,
     OPS(CT_OP_CONV2D, CT_OP_RELU, CT_OP_MAXPOOL2D, CT_OP_VIEW, CT_OP_LINEAR, CT_OP_FILL),
     X(2, 5, 12, 14), .out = 37, BOTH_MODES},
    /* pooling (the CPU has fast paths for 2x2/2) */
    {"maxpool_one", build_maxpool, MAXPOOL, X(1, 1, 1, 1), .pool = {.kernel = {1, 1}}},
    {"maxpool_2x2_odd", build_maxpool, MAXPOOL, X(3, 33, 9, 11), .pool = {.kernel = {2, 2}}},
    {"maxpool_overlapping_odd", build_maxpool, MAXPOOL, X(2, 3, 11, 8),
     .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}},
    {"maxpool_large", build_maxpool, MAXPOOL, X(2, 35, 67, 65), POOL_3X3_SAME},
    /* rows too wide for CUDA's bands of staged rows (maxpool_backward_band_kernel):
     * the general kernel */
    {"maxpool_rows_past_the_band", build_maxpool, MAXPOOL, X(1, 2, 5, 1500),
     .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}},
    {"conv_fixed_weight_bias", build_conv_fixed_weight,
     OPS(CT_OP_CONV2D, CT_OP_CONV2D_BWD_DATA, CT_OP_CHANNEL_SUM), X(2, 3, 9, 11), .out = 7,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}},
    {"conv_fixed_weight_bias_bf16", build_conv_fixed_weight,
     OPS(CT_OP_CONV2D, CT_OP_CONV2D_BWD_DATA, CT_OP_CHANNEL_SUM), X(2, 3, 9, 11), .out = 7,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, TOL_BF16_SUMS},
    {"conv_fixed_weight_bias_fp16", build_conv_fixed_weight,
     OPS(CT_OP_CONV2D, CT_OP_CONV2D_BWD_DATA, CT_OP_CHANNEL_SUM), X(2, 3, 9, 11), .out = 7,
     .kernel = {3, 3}, .conv = {.pad = {1, 1}}, TOL_F16_SUMS},
    {"conv_relu_conv", build_conv_relu_conv, OPS(CONV, CT_OP_RELU, CT_OP_RELU_BWD), X(2, 3, 9, 11),
     .out = 7, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true},
    {"conv_relu_conv_bf16", build_conv_relu_conv, OPS(CONV, CT_OP_RELU, CT_OP_RELU_BWD),
     X(2, 3, 9, 11), .out = 7, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true,
     TOL_BF16_SUMS},
    {"conv_relu_conv_fp16", build_conv_relu_conv, OPS(CONV, CT_OP_RELU, CT_OP_RELU_BWD),
     X(2, 3, 9, 11), .out = 7, .kernel = {3, 3}, .conv = {.pad = {1, 1}}, .bias = true,
     TOL_F16_SUMS},
    {"relu_maxpool_2x2", build_relu_maxpool, RELU_MAXPOOL, X(2, 5, 10, 12),
     .pool = {.kernel = {2, 2}}},
    {"relu_maxpool_overlapping", build_relu_maxpool, RELU_MAXPOOL, X(2, 5, 11, 9),
     .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}},
    {"relu_maxpool_2x2_bf16", build_relu_maxpool, RELU_MAXPOOL, X(2, 5, 10, 12),
     .pool = {.kernel = {2, 2}}, .tol = TOL_EXACT, .precision = CT_PRECISION_BF16},
    {"relu_maxpool_overlapping_fp16", build_relu_maxpool, RELU_MAXPOOL, X(2, 5, 11, 9),
     .pool = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1}}, .tol = TOL_EXACT,
     .precision = CT_PRECISION_FP16},
    {"avgpool_one", build_avgpool, AVGPOOL, X(1, 1, 1, 1), .pool = {.kernel = {1, 1}}},
    {"avgpool_2x2_odd", build_avgpool, AVGPOOL, X(3, 33, 9, 11), .pool = {.kernel = {2, 2}}},
    {"avgpool_exclude_pad_odd", build_avgpool, AVGPOOL, X(2, 4, 9, 9),
     .pool = {.kernel = {3, 2}, .stride = {2, 3}, .pad = {1, 1}, .exclude_pad = true}},
    {"avgpool_large", build_avgpool, AVGPOOL, X(2, 35, 67, 65), POOL_3X3_SAME},
    {"global_avgpool_one", build_global_avgpool, GLOBAL_AVGPOOL, X(1, 1, 1, 1)},
    {"global_avgpool_large", build_global_avgpool, GLOBAL_AVGPOOL, X(64, 150, 6, 6)},
    {"relu_global_avgpool", build_relu_global_avgpool,
     OPS(CT_OP_RELU, CT_OP_GLOBAL_AVGPOOL, CT_OP_GLOBAL_AVGPOOL_BWD, CT_OP_RELU_BWD),
     X(5, 70, 7, 7)},
    /* batchnorm: batch statistics in training, the running ones in evaluation */
    {"batchnorm_tiny", build_batchnorm, BATCHNORM, X(3, 2, 1, 1), BOTH_MODES},
    {"batchnorm_2d_wide", build_batchnorm, BATCHNORM, X(9, 37), BOTH_MODES},
    {"batchnorm_wide_odd", build_batchnorm, BATCHNORM, X(3, 40, 7, 9), BOTH_MODES},
    {"batchnorm_large", build_batchnorm, BATCHNORM, X(8, 3, 110, 115), BOTH_MODES,
     .tol = TOL_LONG_SUM},
    /* inner a multiple of 4 (128-bit accesses on the GPU), planes of several
     * segments of 1,024 elements with a partial last one, and many channels
     * per segment (2x2 and 1x1 planes) */
    {"batchnorm_vec_segments", build_batchnorm, BATCHNORM, X(5, 70, 4, 5), BOTH_MODES},
    {"batchnorm_relu_fused", build_batchnorm_relu, BATCHNORM, X(5, 70, 4, 5), BOTH_MODES},
    {"batchnorm_vec_2x2", build_batchnorm, BATCHNORM, X(6, 520, 2, 2), BOTH_MODES},
    {"batchnorm_1x1_many", build_batchnorm, BATCHNORM, X(7, 1100, 1, 1), BOTH_MODES},
    /* a residual block's add computing its batchnorms: odd planes (one
     * element at a time), planes of a multiple of 4 (128-bit accesses),
     * many channels a segment, both inputs batchnorms, 16 bits (each
     * batchnorm rounded as its apply would store it) */
    {"bn_add_relu_odd", build_bn_add, BN_ADD, X(3, 40, 7, 9), .relu = true, BOTH_MODES},
    {"add_bn_vec", build_add_bn, BN_ADD, X(5, 70, 4, 5), BOTH_MODES},
    {"bn_add_bn_relu_2x2", build_bn_add_bn, BN_ADD, X(6, 520, 2, 2), .relu = true, BOTH_MODES},
    {"half_bn_add_relu_bf16", build_bn_add, BN_ADD, X(5, 70, 4, 5), .relu = true, BOTH_MODES,
     HALF_BF16},
    {"half_bn_add_bn_fp16", build_bn_add_bn, BN_ADD, X(3, 40, 7, 9), BOTH_MODES, HALF_FP16},
    {"half_add_bn_relu_fp16", build_add_bn, BN_ADD, X(6, 520, 2, 2), .relu = true, BOTH_MODES,
     HALF_FP16},
    /* the adds of a residual block's gradient computing the batchnorms'
     * parameter gradients: odd planes, chunks of a channel finished by
     * tickets, 16 bits (the sums of dy as stored) */
    {"bn_params_add_odd", build_bn_params_add, BN_PARAMS_ADD, X(3, 40, 7, 9)},
    {"bn_params_add_chunks", build_bn_params_add, BN_PARAMS_ADD, X(32, 6, 16, 16),
     .tol = TOL_LONG_SUM},
    {"half_bn_params_add_bf16", build_bn_params_add, BN_PARAMS_ADD, X(5, 70, 4, 5), HALF_BF16},
    /* in fp16, bn3's dx (16 bits, from f32 statistics summed in another
     * order than the CPU's) moves by a unit now and then, and with it the
     * dy of bn2 and bn_s: their f32 dgamma within 2 units of 2^-11
     * (measured 7.5e-5, the same unfused) */
    {"half_bn_params_add_fp16", build_bn_params_add, BN_PARAMS_ADD, X(5, 70, 4, 5), HALF_FP16,
     .tol = TOL_F16_2ULP},
    {"bn_params_pool_even", build_bn_params_pool, BN_PARAMS_POOL, X(4, 24, 8, 10)},
    {"bn_params_pool_odd", build_bn_params_pool, BN_PARAMS_POOL, X(3, 40, 7, 9)},
    {"half_bn_params_pool_bf16", build_bn_params_pool, BN_PARAMS_POOL, X(5, 70, 4, 6),
     HALF_BF16},
    {"half_bn_params_pool_fp16", build_bn_params_pool, BN_PARAMS_POOL, X(5, 70, 4, 6),
     HALF_FP16},
    /* optimizers: plain, dampened and Nesterov SGD, Adam, AdamW */
    {"sgd_plain_mlp", build_mlp, OPS(CT_OP_SGD_UPDATE), X(8, 12), .out = 5,
     .sgd = {.lr = 0.1f, .weight_decay = 1e-2f}},
    {"sgd_dampened_mlp", build_mlp, OPS(CT_OP_SGD_UPDATE), X(8, 12), .out = 40,
     .sgd = {.lr = 0.1f, .momentum = 0.9f, .dampening = 0.1f}},
    {"sgd_nesterov_large", build_param_add, OPS(CT_OP_SGD_UPDATE), X(3, 100003),
     .sgd = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-2f, .nesterov = true}},
    /* fp16's loss scaling (the gradients' inf/NaN check, unscaled updates) */
    {"fp16_sgd_mlp", build_mlp_fp16, OPS(CT_OP_CHECK_FINITE, CT_OP_SGD_UPDATE), X(8, 12),
     .out = 40, .tol = TOL_F16_ULP, .sgd = {.lr = 0.1f, .momentum = 0.9f, .nesterov = true}},
    {"fp16_adam_mlp", build_mlp_fp16, OPS(CT_OP_CHECK_FINITE, CT_OP_ADAM_UPDATE), X(8, 12),
     .out = 5, .tol = TOL_F16_ULP, .adam = ADAM(.weight_decay = 1e-2f)},
    {"adam_mlp", build_mlp, OPS(CT_OP_ADAM_UPDATE), X(8, 12), .out = 5,
     .adam = ADAM(.weight_decay = 1e-2f)},
    {"adamw_large", build_param_add, OPS(CT_OP_ADAM_UPDATE), X(3, 100003),
     .adam = ADAM(.weight_decay = 1e-2f, .decoupled = true)},
};
#define N_ENTRIES ((int)(sizeof entries / sizeof entries[0]))

/* Ops that no entry needs to cover, and why.  The check fails if a backend
 * claims to support one, unless another test covers it (elsewhere). */
static const struct {
    ct_op op;
    const char *why;
    bool elsewhere;
} exceptions[] = {
    {CT_OP_LEAF, "inputs, parameters and buffers: data, never run (plans schedule no leaf)",
     false},
    {CT_OP_CUSTOM, "the kernels are the user's: tests/test_custom_op.c", true},
    {CT_OP_CUSTOM_BWD, "the kernels are the user's: tests/test_custom_op.c", true},
    {CT_OP_QCONV2D, "needs weights packed by ct_plan_quantize: tests/test_quantize.c", true},
    {CT_OP_QLINEAR, "needs weights packed by ct_plan_quantize: tests/test_quantize.c", true},
};

/* ---- running an entry --------------------------------------------------------------- */

typedef struct column {
    char name[48];
    ct_backend *backend;
    const char *kernels; /* ct_backend_set_kernels: a mode or one implementation's name */
    bool forced;         /* kernels names one implementation: run only where it applies */
} column;

static ct_backend *reference_backend;

/* The same bytes for a tensor on every plan: uniform floats, never zero
 * (positive variances), labels below n_classes. */
static void write_random(ct_plan *plan, ct_tensor *t, int n_classes, uint64_t seed)
{
    int64_t count = ct_tensor_numel(t);
    size_t bytes = ct_tensor_bytes(t);
    void *data = calloc(1, bytes ? bytes : 1);
    const char *name = ct_tensor_name(t);
    uint64_t state = seed;
    if (ct_tensor_dtype(t) == CT_F32) {
        float *values = data;
        bool positive = strstr(name, "running_var") || strstr(name, "exp_avg_sq");
        harness_fill(values, count, seed, positive ? 0.5f : -1.0f, 1.5f);
        for (int64_t i = 0; i < count; i++)
            values[i] = values[i] == 0.0f ? 0.25f : values[i];
    } else if (strcmp(name, "labels") == 0) {
        for (int64_t i = 0; i < count; i++) {
            int64_t label = (int64_t)harness_uniform(&state, 0, (float)n_classes) % n_classes;
            if (ct_tensor_dtype(t) == CT_I64)
                ((int64_t *)data)[i] = label;
            else
                ((int32_t *)data)[i] = (int32_t)label;
        }
    } else if (ct_tensor_dtype(t) == CT_I64) {
        for (int64_t i = 0; i < count; i++)
            ((int64_t *)data)[i] = 3; /* num_batches_tracked */
    }
    CHECK_OK(ct_plan_write(plan, t, data, bytes));
    free(data);
}

static ct_plan *plan_with_data(ct_backend *backend, ct_graph *g, const tracked *t)
{
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(g, backend, PLAN_SEED, &plan));
    for (int i = 0; plan && i < t->n_inputs; i++)
        write_random(plan, t->inputs[i], t->n_classes, 100 + (uint64_t)i);
    for (int i = 0; plan && i < ct_graph_n_state(g); i++)
        write_random(plan, ct_graph_state(g, i), 0, 200 + (uint64_t)i);
    return plan;
}

static void run_mode(ct_plan *plan, ct_mode mode)
{
    for (int step = 0; step < (mode == CT_TRAIN ? TRAIN_STEPS : 1); step++)
        CHECK_OK(ct_plan_run(plan, mode));
}

/* What a run is checked on, with the reference's bytes. */
typedef struct target {
    const ct_tensor *tensor;
    const char *what;
    void *want;
} target;

static void add_target(target *targets, int *n, const ct_tensor *tensor, const char *what)
{
    CHECK(*n < MAX_TARGETS, "more than %d tensors to compare", MAX_TARGETS);
    if (*n < MAX_TARGETS)
        targets[(*n)++] = (target){tensor, what, NULL};
}

/* Outputs and state; in training also input and parameter gradients. */
static int collect_targets(ct_graph *g, const tracked *t, ct_mode mode, target *targets)
{
    int n = 0;
    for (int i = 0; i < t->n_outputs; i++)
        add_target(targets, &n, t->outputs[i], "output");
    for (int i = 0; mode == CT_TRAIN && i < t->n_inputs; i++)
        if (ct_tensor_grad(t->inputs[i]))
            add_target(targets, &n, ct_tensor_grad(t->inputs[i]), "input gradient");
    for (int i = 0; i < ct_graph_n_state(g); i++) {
        ct_tensor *s = ct_graph_state(g, i);
        if (mode == CT_TRAIN && ct_tensor_grad(s))
            add_target(targets, &n, ct_tensor_grad(s), "parameter gradient");
        add_target(targets, &n, s, "state after the run");
    }
    return n;
}

/* Whether t holds 16-bit values: a 16-bit tensor, or an f32 cast of one
 * (the gradient of an f32 input or weight in a bf16 or fp16 graph). */
static bool holds_half(const ct_tensor *t)
{
    return ct_dtype_is_half(t->dtype) ||
           (t->op == CT_OP_CAST && ct_dtype_is_half(t->src[0]->dtype));
}

/* The 16 bits of got and want (count values of `dtype`) widened in place:
 * both buffers hold 4 bytes per value. */
static void widen_both(ct_dtype dtype, int64_t count, void *got, void *want)
{
    void *pair[2] = {got, want};
    for (int k = 0; k < 2; k++) {
        const uint16_t *bits = pair[k];
        float *values = pair[k];
        for (int64_t i = count - 1; i >= 0; i--) /* from the end: in place */
            values[i] = dtype == CT_BF16 ? ct_bf16_to_f32(bits[i]) : ct_f16_to_f32(bits[i]);
    }
}

/* Values holding 16 bits (count of them, as floats) against the reference:
 * within tol_half of its largest value, and at most one in
 * HALF_DIFFERING_SHARE (and one more) different at all.  A sum taken in
 * another order moves a 16-bit result only where its f32 value lies next to
 * a rounding midpoint, now and then (measured: at most 6 of 7,920 values);
 * a wrong rounding (truncation: half the values one unit low) stays within
 * the tolerance but moves many values. */
#define HALF_DIFFERING_SHARE 128
static void compare_half_values(const char *label, const target *target, const float *got,
                                const float *want, int64_t count, double tol_half)
{
    const ct_tensor *t = target->tensor;
    double err = harness_rel_err_f32(got, want, count);
    int64_t differing = 0;
    for (int64_t i = 0; i < count; i++)
        differing += got[i] != want[i];
    CHECK(err <= tol_half, "%s: %s '%s': max rel error %.3g > %.3g against the reference",
          label, target->what, ct_tensor_name(t), err, tol_half);
    CHECK(differing <= 1 + count / HALF_DIFFERING_SHARE,
          "%s: %s '%s': %lld of %lld 16-bit values differ from the reference (at most 1 in "
          "%d may)",
          label, target->what, ct_tensor_name(t), (long long)differing, (long long)count,
          HALF_DIFFERING_SHARE);
}

/* f32 targets within tol, 16-bit ones bit for bit; with tol_half > 0, every
 * target that holds 16-bit values by compare_half_values. */
static void compare(ct_plan *plan, const char *label, const target *target, double tol,
                    double tol_half)
{
    const ct_tensor *t = target->tensor;
    size_t bytes = ct_tensor_bytes(t);
    int64_t count = ct_tensor_numel(t);
    bool as_half = tol_half > 0 && holds_half(t);
    size_t capacity = as_half ? (size_t)count * sizeof(float) : bytes;
    void *got = calloc(1, capacity ? capacity : 1);
    CHECK_OK(ct_plan_read(plan, t, got, bytes));
    if (as_half) {
        void *want = calloc(1, capacity ? capacity : 1);
        memcpy(want, target->want, bytes);
        if (ct_tensor_dtype(t) != CT_F32)
            widen_both(ct_tensor_dtype(t), count, got, want);
        compare_half_values(label, target, got, want, count, tol_half);
        free(want);
    } else if (ct_tensor_dtype(t) == CT_F32) {
        double err = harness_rel_err_f32(got, target->want, count);
        CHECK(err <= tol, "%s: %s '%s': max rel error %.3g > %.3g against the reference",
              label, target->what, ct_tensor_name(t), err, tol);
    } else {
        CHECK(memcmp(got, target->want, bytes) == 0, "%s: %s '%s' differs from the reference",
              label, target->what, ct_tensor_name(t));
    }
    free(got);
}

/* One PASS/FAIL line for the checks since harness_case_failures was reset. */
static void report(const char *label)
{
    if (harness_case_failures == 0) {
        harness_passed++;
        printf("PASS %s\n", label);
    } else {
        harness_failed++;
        printf("FAIL %s\n", label);
    }
    fflush(stdout);
    harness_case_failures = 0;
}

/* Whether some node of g is one that implementation `name` of the backend
 * runs (a forced column elsewhere would repeat another column's run). */
static bool graph_runs_impl(const ct_graph *g, const ct_backend *backend, const char *name)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const ct_tensor *node = g->nodes[k];
        const ct_impl *const *list = NULL;
        int count = ct_impl_list(backend, node->op, &list);
        for (int i = 0; i < count; i++)
            if (strcmp(list[i]->name, name) == 0 &&
                (!list[i]->supports || list[i]->supports(backend, node)))
                return true;
    }
    return false;
}

/* The reference run, then each column against it: one line per column. */
static void run_entry_mode(const entry *e, ct_graph *g, const tracked *t, ct_mode mode,
                           const column *columns, int n_columns)
{
    const char *mode_name = mode == CT_TRAIN ? "train" : "eval";
    double tol = e->tol > 0 ? e->tol : TOL_F32;
    char label[1024];
    target targets[MAX_TARGETS];
    harness_case_failures = 0;
    int n = collect_targets(g, t, mode, targets);
    ct_cpu_simd_set(false);
    ct_plan *reference = plan_with_data(reference_backend, g, t);
    if (reference)
        run_mode(reference, mode);
    ct_cpu_simd_set(true);
    for (int i = 0; i < n; i++) {
        size_t bytes = ct_tensor_bytes(targets[i].tensor);
        targets[i].want = calloc(1, bytes ? bytes : 1);
        if (reference)
            CHECK_OK(ct_plan_read(reference, targets[i].tensor, targets[i].want, bytes));
    }
    ct_plan_free(reference);
    bool reference_ok = harness_case_failures == 0;
    if (!reference_ok) {
        snprintf(label, sizeof label, "%s/reference/%s", e->name, mode_name);
        report(label);
    }
    for (int c = 0; reference_ok && c < n_columns; c++) {
        const column *col = &columns[c];
        if (col->forced && !graph_runs_impl(g, col->backend, col->kernels))
            continue;
        CHECK_OK(ct_backend_set_kernels(col->backend, col->kernels));
        snprintf(label, sizeof label, "%s/%s/%s", e->name, col->name, mode_name);
        ct_plan *plan = plan_with_data(col->backend, g, t);
        if (plan)
            run_mode(plan, mode);
        bool ran = plan && harness_case_failures == 0;
        for (int i = 0; ran && i < n; i++)
            compare(plan, label, &targets[i], tol, e->tol_half);
        ct_plan_free(plan);
        report(label);
    }
    for (int i = 0; i < n; i++)
        free(targets[i].want);
}

/* ---- completeness --------------------------------------------------------------------- */

static ct_graph *graphs[N_ENTRIES];
static tracked tracks[N_ENTRIES];
static bool covered_by[CT_OP_COUNT][N_ENTRIES]; /* [op][i]: entry i's graph has a node of op */

static bool covered(int op)
{
    for (int i = 0; i < N_ENTRIES; i++)
        if (covered_by[op][i])
            return true;
    return false;
}

#define MAX_BACKENDS 2
#define MAX_COLUMNS 12
static bool supported[MAX_BACKENDS][CT_OP_COUNT];

/* Build every entry once, check that it holds the ops it is for, and note
 * which ops each backend supports, asked of the nodes of the graphs (and,
 * for an op no graph has, of a bare node of that op). */
static void scan_entries(ct_backend *const *backends, int n_backends)
{
    for (int i = 0; i < N_ENTRIES; i++) {
        graphs[i] = ct_graph_new();
        CHECK_OK(entries[i].build(graphs[i], &tracks[i], &entries[i]));
        if (ct_graph_status(graphs[i]) != CT_OK)
            continue;
        for (int k = 0; k < graphs[i]->n_nodes; k++) {
            const ct_tensor *node = graphs[i]->nodes[k];
            covered_by[node->op][i] = true;
            for (int b = 0; b < n_backends; b++)
                supported[b][node->op] |= ct_impl_supported(backends[b], node);
        }
        for (int k = 0; k < MAX_COVERS && entries[i].covers[k] != CT_OP_LEAF; k++) {
            ct_op op = entries[i].covers[k];
            CHECK(covered_by[op][i], "entry %s is for op %s, but its graph has none",
                  entries[i].name, ct_op_name(op));
        }
    }
    ct_graph *probe = ct_graph_new();
    for (int op = 0; probe && op < CT_OP_COUNT; op++) {
        if (covered(op))
            continue;
        const ct_tensor *node = ct_graph_add_node(probe, (ct_op)op, CT_F32, 1, (int64_t[]){1},
                                                  0, NULL);
        for (int b = 0; node && b < n_backends; b++)
            supported[b][op] = ct_impl_supported(backends[b], node);
    }
    ct_graph_free(probe);
}

static const char *exception_for(int op, bool *elsewhere)
{
    for (size_t i = 0; i < sizeof exceptions / sizeof exceptions[0]; i++)
        if ((int)exceptions[i].op == op) {
            *elsewhere = exceptions[i].elsewhere;
            return exceptions[i].why;
        }
    return NULL;
}

static void print_coverage(void)
{
    for (int op = 0; op < CT_OP_COUNT; op++) {
        bool elsewhere = false;
        const char *why = exception_for(op, &elsewhere);
        printf("# op %s:", ct_op_name((ct_op)op));
        if (why)
            printf(" not covered: %s", why);
        for (int i = 0; !why && i < N_ENTRIES; i++)
            if (covered_by[op][i])
                printf(" %s", entries[i].name);
        printf("%s\n", !why && !covered(op) ? " no entry" : "");
    }
}

static void check_coverage(int b, const char *backend_name)
{
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const char *name = ct_op_name((ct_op)op);
        bool elsewhere = false;
        if (exception_for(op, &elsewhere))
            CHECK(elsewhere || !supported[b][op], "op %s: the %s backend supports it, but it "
                  "is in the exception list of test_backend_ops: cover it", name, backend_name);
        else
            CHECK(!supported[b][op] || covered(op), "op %s: the %s backend supports it "
                  "but no case of test_backend_ops covers it", name, backend_name);
    }
}

/* ---- main -------------------------------------------------------------------------------- */

/* Every implementation in the backend's table ran in some column, unless
 * it cannot run here (not ready: CT_CPU_SIMD=0, a CPU without AVX2, a
 * vendor library missing) or its op is on the exception list. */
static void check_impls_ran(const ct_backend *backend, const char *backend_name)
{
    for (int op = 0; op < CT_OP_COUNT; op++) {
        bool elsewhere = false;
        const ct_impl *const *list = NULL;
        int count = ct_impl_list(backend, (ct_op)op, &list);
        for (int i = 0; i < count && !exception_for(op, &elsewhere); i++)
            CHECK(ct_impl_has_run(backend, (ct_op)op, i) ||
                      (list[i]->ready && !list[i]->ready(backend)),
                  "op %s: implementation '%s' of the %s backend never ran: give it a case",
                  ct_op_name((ct_op)op), list[i]->name, backend_name);
    }
}

/* One column per kernel mode, and one per implementation that no mode
 * reaches first (forced by name: cpu-im2col, cuda-implicit_gemm, ...). */
static int add_columns(column *columns, int n, ct_backend *backend, const char *device,
                       const char *const *modes, int n_modes)
{
    bool vendor_column = false;
    for (int m = 0; m < n_modes; m++) {
        vendor_column |= strcmp(modes[m], "vendor") == 0;
        columns[n] = (column){.backend = backend, .kernels = modes[m]};
        snprintf(columns[n++].name, sizeof columns[0].name, "%s-%s", device, modes[m]);
    }
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_impl *const *list = NULL;
        int count = ct_impl_list(backend, (ct_op)op, &list);
        for (int i = 1; i < count; i++) {
            bool listed = (list[i]->kind == CT_IMPL_VENDOR && vendor_column) ||
                          strcmp(list[i]->name, "native") == 0; /* a mode's column */
            for (int c = 0; c < n && !listed; c++)
                listed = columns[c].backend == backend && columns[c].forced &&
                         strcmp(columns[c].kernels, list[i]->name) == 0;
            if (listed || n == MAX_COLUMNS)
                continue;
            columns[n] = (column){.backend = backend, .kernels = list[i]->name, .forced = true};
            snprintf(columns[n++].name, sizeof columns[0].name, "%s-%s", device, list[i]->name);
        }
    }
    return n;
}

int main(void)
{
    ct_backend *cpu = NULL, *gpu = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &reference_backend));
    CHECK_OK(ct_backend_new("cpu", &cpu));
    if (!reference_backend || !cpu) {
        report("cpu_backends");
        return harness_finish();
    }
    reference_backend->unfused = true; /* each node its own kernel: fusions are checked */
    /* convolutions as im2col + GEMM over the whole kernel, the others
     * native: the paths that take shortcuts (direct, Winograd, the
     * cropped kernel) are checked against it */
    CHECK_OK(ct_backend_set_kernels(reference_backend, "im2col"));
    column columns[MAX_COLUMNS];
    static const char *const cpu_modes[] = {"native", "auto"};
    static const char *const gpu_modes[] = {"native", "vendor"};
    int n_columns = add_columns(columns, 0, cpu, "cpu", cpu_modes, 2);
    ct_backend *backends[MAX_BACKENDS] = {cpu};
    int n_backends = 1;
    printf("# reference: %s, portable kernels (convolutions by im2col), unfused\n",
           ct_backend_name(reference_backend));
    if (ct_backend_new("cuda", &gpu) == CT_OK) {
#ifdef CT_HAVE_CUDA
        CHECK_OK(ct_cuda_backend_poison(gpu, true));
        /* the wide-tile cases are small: their convolution GEMMs make
         * fewer blocks than the SMs, where the wide tile is not taken */
        ct_cuda_set_conv_wide_min_blocks(0);
#endif
        n_columns = add_columns(columns, n_columns, gpu, "cuda", gpu_modes, 2);
        backends[n_backends++] = gpu;
        printf("# cuda: %s\n", ct_backend_name(gpu));
    } else {
        printf("# cuda: not available (%s)\n", ct_last_error());
        if (getenv("CT_REQUIRE_GPU")) {
            harness_case_failures++;
            report("cuda_available (CT_REQUIRE_GPU is set)");
        }
    }
    for (int c = 0; c < n_columns; c++)
        printf("# column %s\n", columns[c].name);
    scan_entries(backends, n_backends);
    report("entries_build_and_hold_their_ops");
    print_coverage();
    check_coverage(0, "cpu");
    report("coverage/cpu");
    if (gpu) {
        check_coverage(1, "cuda");
        report("coverage/cuda");
    }
    for (int i = 0; i < N_ENTRIES; i++) {
        if (ct_graph_status(graphs[i]) != CT_OK)
            continue;
        unsigned modes = entries[i].modes ? entries[i].modes : TRAIN;
        for (int mode = CT_TRAIN; mode <= CT_EVAL; mode++)
            if (modes & (1u << mode))
                run_entry_mode(&entries[i], graphs[i], &tracks[i], (ct_mode)mode, columns,
                               n_columns);
    }
    check_impls_ran(cpu, "cpu");
    report("every_implementation_ran/cpu");
    if (gpu) {
        check_impls_ran(gpu, "cuda");
        report("every_implementation_ran/cuda");
    }
    for (int i = 0; i < N_ENTRIES; i++)
        ct_graph_free(graphs[i]);
    ct_backend_free(gpu);
    ct_backend_free(cpu);
    ct_backend_free(reference_backend);
    return harness_finish();
}
