/*
 * Fusion, decided when a plan is made: the graph itself is never rewritten,
 * so autodiff, ct_plan_read and a later plan on another backend see the
 * graph as it was built.  See docs/design.md, "Fusion".
 */
#ifndef CT_GRAPH_FUSE_H
#define CT_GRAPH_FUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/backend.h"

/* Finds every relu whose input is a conv2d or linear output that nothing
 * else reads, is not kept, and that the backend can finish with a relu
 * (each of its implementations that supports it applies CT_FUSES_RELU,
 * graph/impl.h).  For each: epilogue[producer id] = CT_EPILOGUE_RELU and
 * alias_of[relu id] = producer, meaning the producer's
 * kernel writes relu(y) and the relu node owns no memory and runs nothing:
 * its readers (relu_bwd, maxpool, the next layer) read the producer's bytes.
 * Both arrays are indexed by node id and zeroed by the caller.  A producer
 * with on_host set (by node id; NULL: none) runs on the fallback backend and
 * is never fused.  The same for a relu_bwd whose dy nothing else reads
 * and is a max pool's backward over the relu's own output (conv -> relu
 * -> max pool), a linear or convolution backward data (relu -> linear,
 * relu -> conv), the add of dy's two parts (a relu read twice: a residual
 * block's input) or a global average pool's backward (relu -> global
 * average pool): epilogue[producer id] = CT_EPILOGUE_RELU_BWD and
 * epilogue_src[producer id] = the relu's output, which the producer's
 * kernel reads as it stores, where every implementation applies
 * CT_FUSES_RELU_BWD.  Returns how many were fused. */
int ct_fuse_relu(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                 const ct_tensor **alias_of, uint8_t *epilogue, const ct_tensor **epilogue_src);

/* For one schedule (after ct_fuse_relu): a max pool whose input is a fused
 * conv+relu is computed by the conv's kernel (each implementation applies
 * CT_FUSES_RELU_MAXPOOL2X2).  Sets pool_into[conv id] = the pool node; the
 * pool node then runs nothing in that schedule.  In evaluation only where
 * nothing else in `schedule` reads the relu's output: the conv's own output
 * keeps its place in the arena (the training layout is shared) but goes
 * unwritten or serves as scratch.  In training (`training`: the pool's
 * backward reads it) the kernel writes it too, each image pooled while it
 * is in cache (ct_exec.training says which).  Returns how many. */
int ct_fuse_maxpool(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                    const ct_tensor *const *schedule, int n_schedule, const ct_tensor **alias_of,
                    const uint8_t *epilogue, bool training, const ct_tensor **pool_into);

/* For the training schedule: a bias gradient (channel_sum, f32 output)
 * whose dy is also the dy of a convolution's or linear layer's weight
 * gradient (f32, or 16-bit with a 16-bit dy; its output channels the
 * bias's) that every implementation can finish with the bias gradient
 * (CT_FUSES_BIAS_GRAD: the native and tensor-core GEMMs sum dy as one more
 * column of b, all ones; the CPU's direct kernel as it goes).  Sets bias_into[weight gradient
 * id] = the channel_sum node, which then runs nothing: the weight
 * gradient's kernel writes its output.  Neither may run on the fallback
 * (on_host).  Returns how many. */
int ct_fuse_bias_grad(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor **bias_into);

/* For the training schedule: a cross-entropy backward whose dloss is the
 * fill that seeds the gradient (ct_graph_backward's, read by nothing else)
 * and whose logits, labels and smoothing are a cross-entropy node's, where
 * every implementation of that node can compute the gradient as it
 * computes the loss (CT_FUSES_LOSS_GRAD: each row's log-sum-exp once, for
 * both).  Sets grad_into[cross-entropy id] = the backward node, which then
 * runs nothing, nor does the fill: the loss's kernel writes the gradient,
 * taking the seed from the fill's attributes.  Neither may run on the
 * fallback (on_host).  Returns how many. */
int ct_fuse_loss_grad(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor **grad_into);

/* A batchnorm's apply (forward) that only an add reads, where every
 * implementation of the add can compute it as it reads it
 * (CT_FUSES_BN_INPUT: a residual block's bn2 -> add, and its shortcut's
 * batchnorm).  Sets computed_in[apply id] = the add: the apply node then
 * has no bytes and runs nothing, and the add's kernel reads the apply's
 * x, statistics, gamma and beta at the add's place in the schedule (the
 * plan keeps them alive to there).  Neither may run on the fallback
 * (on_host), be kept, or be a view.  Returns how many. */
int ct_fuse_bn_add(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                   const ct_tensor **computed_in);

/* For the training schedule: a batchnorm's parameter gradients (bn_bwd_params)
 * whose dy is made in the backward pass by an add (the sum of a gradient's
 * two parts: a residual block's input gradient, the dy of the previous
 * block's bn2 and of its shortcut's batchnorm) or a max pool's backward
 * (conv -> batchnorm -> relu -> max pool), or by the relu's backward fused
 * in either (alias_of), where every implementation of that maker can
 * compute them as it stores dy (CT_FUSES_BN_PARAMS), two at most a maker.
 * Sets bn_params_into[maker id][0], then [1], = the params node, which then
 * runs nothing: the maker's kernel writes its output, reading the
 * batchnorm's x and statistics at the maker's place (alive there: the
 * batchnorm's backward data reads them later).  Neither may run on the
 * fallback (on_host).  Returns how many. */
int ct_fuse_bn_params(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                      const ct_tensor *const *alias_of, const ct_tensor *(*bn_params_into)[2]);

/* A max pool's backward (with the relu's backward fused in it, alias_of
 * and ct_fuse_relu: conv -> relu -> max pool) whose gradient only a
 * convolution's weight gradient reads (and the bias gradient that weight
 * gradient writes, bias_into), where every implementation of the weight
 * gradient can compute it from the pool's (CT_FUSES_POOL_BWD: a first
 * layer, whose input needs no gradient).  Sets computed_in[pool id] and
 * computed_in[relu backward id] = the weight gradient: neither has bytes
 * or runs, and the weight gradient reads the pool's input and output
 * gradient (the plan keeps them alive to it).  Returns how many. */
int ct_fuse_pool_bwd(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                     const ct_tensor *const *alias_of, const ct_tensor *const *bias_into,
                     const ct_tensor **computed_in);

/* A convolution that computes its relu's 2x2 max pool in training
 * (pool_into, ct_fuse_maxpool) and whose relu output only that pool and a
 * pool backward computed in a weight gradient read (ct_fuse_pool_bwd; the
 * relu's backward fused in it reads it too): the backward needs only each
 * window's argmax and whether its max is > 0, so the convolution stores
 * a byte a window (CT_POOL_CODE_*, cpu/kernels.h) in its output's place,
 * where every implementation can (CT_FUSES_POOL_CODES).  Sets
 * pool_codes[conv id] and pool_codes[relu id] (by node id, zeroed by the
 * caller).  Returns how many. */
int ct_fuse_pool_codes(const ct_graph *graph, const ct_backend *backend, const bool *on_host,
                       const ct_tensor *const *alias_of, const ct_tensor *const *pool_into,
                       const ct_tensor *const *computed_in, bool *pool_codes);

#endif
