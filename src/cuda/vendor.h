/*
 * The vendor kernels: cuBLAS for the linear layer (blas.c) and cuDNN for
 * convolution and pooling forward (dnn.c).  Each library is optional in the
 * build; without it (or when its handle cannot be made) the `new` call
 * gives NULL and `supports` answers false, so those ops run native kernels.
 * The run functions have the node's semantics exactly (outputs written
 * with =), so the backend can pick either implementation per node.
 */
#ifndef CT_CUDA_VENDOR_H
#define CT_CUDA_VENDOR_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda_runtime_api.h>

#include "graph/backend.h"

typedef struct ct_cuda_blas ct_cuda_blas;
typedef struct ct_cuda_dnn ct_cuda_dnn;

/* *out is NULL (and CT_OK) when the build has no cuBLAS. */
ct_status ct_cuda_blas_new(cudaStream_t stream, bool tf32, ct_cuda_blas **out);
void ct_cuda_blas_free(ct_cuda_blas *blas);
ct_status ct_cuda_blas_set_tf32(ct_cuda_blas *blas, bool tf32);
bool ct_cuda_blas_supports(const ct_cuda_blas *blas, const ct_tensor *node);
/* The workspace a node needs (a 16-bit forward pass with a bias: its f32 product). */
size_t ct_cuda_blas_workspace(const ct_tensor *node);
ct_status ct_cuda_blas_run(ct_cuda_blas *blas, const ct_exec *exec, const ct_tensor *node);

/* *out is NULL (and CT_OK) when the build has no cuDNN. */
ct_status ct_cuda_dnn_new(cudaStream_t stream, bool tf32, ct_cuda_dnn **out);
void ct_cuda_dnn_free(ct_cuda_dnn *dnn);
void ct_cuda_dnn_set_tf32(ct_cuda_dnn *dnn, bool tf32);
bool ct_cuda_dnn_supports(const ct_cuda_dnn *dnn, const ct_tensor *node);
/* Plan time: choose the node's algorithm (once per shape; cached; timed by
 * cuDNN's Find query when `timed`, else its heuristics) and give its
 * workspace.  Run time asks for nothing more than was planned. */
ct_status ct_cuda_dnn_workspace(ct_cuda_dnn *dnn, const ct_tensor *node, bool timed,
                                size_t *bytes);
ct_status ct_cuda_dnn_run(ct_cuda_dnn *dnn, const ct_exec *exec, const ct_tensor *node);

/* What a vendor call leaves to cuttle's kernels when the plan fused more
 * into its node (graph/fuse.c): after a backward data, a relu_bwd (its own
 * kernel, in place on dx, of `count` elements of the node's dtype); after a
 * weight gradient, the f32 bias gradient of the same dy (channel_sum's
 * kernel over dy, the node's second input, as n x c x inner, in the
 * workspace the call is done with). */
ct_status ct_cuda_vendor_relu_bwd(const ct_exec *exec, const ct_tensor *node, void *dx,
                                  int64_t count, cudaStream_t stream);
ct_status ct_cuda_vendor_bias_grad(const ct_exec *exec, const ct_tensor *node, const void *dy,
                                   int n, int c, int inner, cudaStream_t stream);

#endif
