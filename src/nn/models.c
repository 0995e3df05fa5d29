/*
 * Built-in models, with the parameter names of the equivalent PyTorch
 * modules so that state_dicts move between the two unchanged.
 */
#include "ops/common.h"

/* SimpleCNN (LeNet-style): conv 6 5x5, relu, maxpool 2, conv 16 5x5, relu,
 * maxpool 2, flatten, fc 120, relu, fc 84, relu, fc classes.  The first
 * conv takes the input's channels and fc1 the flattened size, so it fits
 * 1x28x28 (fc1 256 -> 120) as well as 3x32x32 (fc1 400 -> 120). */
ct_tensor *ct_model_simplecnn(ct_graph *graph, ct_tensor *x, int n_classes)
{
    ct_pool_args pool = {.kernel = {2, 2}};
    ct_tensor *h = ct_relu(graph, ct_layer_conv2d(graph, "conv1", x, 6, 5, 5,
                                                  (ct_conv_args){0}, true));
    h = ct_maxpool2d(graph, h, pool);
    h = ct_relu(graph, ct_layer_conv2d(graph, "conv2", h, 16, 5, 5, (ct_conv_args){0}, true));
    h = ct_flatten(graph, ct_maxpool2d(graph, h, pool));
    h = ct_relu(graph, ct_layer_linear(graph, "fc1", h, 120, true));
    h = ct_relu(graph, ct_layer_linear(graph, "fc2", h, 84, true));
    return ct_layer_linear(graph, "fc3", h, n_classes, true);
}
