/*
 * Layers: an op plus its parameters, named and initialized like PyTorch's
 * nn.Conv2d, nn.Linear and nn.BatchNorm2d (so state_dicts line up).
 * PyTorch's default for conv and linear weights is kaiming_uniform with
 * a = sqrt(5), which reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)); biases
 * use the same bound.
 */
#include <math.h>
#include <stdio.h>

#include "ops/common.h"

#define CT_NAME_CAPACITY 512
#define CT_BN_EPS 1e-5f
#define CT_BN_MOMENTUM 0.1f

static const char *join(char *buf, const char *prefix, const char *suffix)
{
    snprintf(buf, CT_NAME_CAPACITY, "%s.%s", prefix, suffix);
    return buf;
}

static bool check_layer(ct_graph *graph, const char *what, const char *name, ct_tensor *x)
{
    if (!graph)
        return false;
    if (!name || !*name) {
        ct_graph_fail(graph, CT_ERR_ARG, "%s: a layer name is required", what);
        return false;
    }
    return ct_graph_check_srcs(graph, what, 1, &x);
}

ct_tensor *ct_layer_conv2d(ct_graph *graph, const char *name, ct_tensor *x, int out_channels,
                           int kernel_h, int kernel_w, ct_conv_args args, bool bias)
{
    if (!check_layer(graph, "conv2d layer", name, x))
        return NULL;
    int groups = args.groups ? args.groups : 1;
    if (x->ndim != 4 || out_channels <= 0 || kernel_h <= 0 || kernel_w <= 0 || groups <= 0 ||
        x->shape[1] % groups) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "conv2d layer '%s': input %s (NCHW), %d output channels, kernel "
                             "%dx%d and %d groups do not fit",
                             name, x_desc, out_channels, kernel_h, kernel_w, groups);
    }
    int64_t fan_in = x->shape[1] / groups * kernel_h * kernel_w;
    float bound = 1.0f / sqrtf((float)fan_in);
    char buf[CT_NAME_CAPACITY];
    int64_t w_shape[4] = {out_channels, x->shape[1] / groups, kernel_h, kernel_w};
    ct_tensor *weight = ct_param(graph, join(buf, name, "weight"), 4, w_shape, CT_INIT_UNIFORM,
                                 bound);
    ct_tensor *b = NULL;
    if (bias) {
        int64_t b_shape[1] = {out_channels};
        b = ct_param(graph, join(buf, name, "bias"), 1, b_shape, CT_INIT_UNIFORM, bound);
    }
    return ct_conv2d(graph, x, weight, b, args);
}

ct_tensor *ct_layer_linear(ct_graph *graph, const char *name, ct_tensor *x, int out_features,
                           bool bias)
{
    if (!check_layer(graph, "linear layer", name, x))
        return NULL;
    if (x->ndim != 2 || out_features <= 0) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "linear layer '%s': input %s must be [N, features] (flatten it) "
                             "and out_features %d positive",
                             name, x_desc, out_features);
    }
    float bound = 1.0f / sqrtf((float)x->shape[1]);
    char buf[CT_NAME_CAPACITY];
    int64_t w_shape[2] = {out_features, x->shape[1]};
    ct_tensor *weight = ct_param(graph, join(buf, name, "weight"), 2, w_shape, CT_INIT_UNIFORM,
                                 bound);
    ct_tensor *b = NULL;
    if (bias) {
        int64_t b_shape[1] = {out_features};
        b = ct_param(graph, join(buf, name, "bias"), 1, b_shape, CT_INIT_UNIFORM, bound);
    }
    return ct_linear(graph, x, weight, b);
}

ct_tensor *ct_layer_batchnorm2d(ct_graph *graph, const char *name, ct_tensor *x)
{
    if (!check_layer(graph, "batchnorm2d layer", name, x))
        return NULL;
    if (x->ndim != 4 && x->ndim != 2) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "batchnorm2d layer '%s': input %s must be [N,C,H,W] or [N,C]", name,
                             x_desc);
    }
    char buf[CT_NAME_CAPACITY];
    int64_t shape[1] = {x->shape[1]};
    ct_tensor *gamma = ct_param(graph, join(buf, name, "weight"), 1, shape, CT_INIT_CONST, 1);
    ct_tensor *beta = ct_param(graph, join(buf, name, "bias"), 1, shape, CT_INIT_CONST, 0);
    ct_tensor *mean = ct_buffer(graph, join(buf, name, "running_mean"), CT_F32, 1, shape,
                                CT_INIT_CONST, 0);
    ct_tensor *var = ct_buffer(graph, join(buf, name, "running_var"), CT_F32, 1, shape,
                               CT_INIT_CONST, 1);
    ct_tensor *count = ct_buffer(graph, join(buf, name, "num_batches_tracked"), CT_I64, 0, NULL,
                                 CT_INIT_CONST, 0);
    return ct_batchnorm2d_tracked(graph, x, gamma, beta, mean, var, count, CT_BN_EPS,
                                  CT_BN_MOMENTUM);
}
