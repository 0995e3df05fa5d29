/*
 * cuDNN for convolution (forward, backward data, backward filter) and for
 * max and average pooling forward, through cuDNN's legacy API (deprecated
 * in cuDNN 9 but present; the graph API would be the next step).
 *
 * Descriptors and the algorithm are made once per node shape and dtype,
 * when the plan asks for the node's workspace, and cached: a step creates
 * nothing.  The algorithm is the first that cudnnGet*Algorithm_v7's
 * heuristics rank (under the `auto` kernels: the fastest that
 * cudnnFind*Algorithm times, as PyTorch's cudnn.benchmark), among those
 * that succeed, are deterministic, fit WORKSPACE_CAP, and, for f32 data
 * unless TF32 is on, do not use tensor cores (CUDNN_FMA_MATH keeps f32
 * exact the way PyTorch does with allow_tf32 off).  A shape first met at
 * run time (kernels or TF32 changed after planning) may use no workspace at
 * all.
 *
 * The convolutions of a bf16 or fp16 graph run here too (x, w, y, dx, dw of
 * the node's dtype, the sums f32 on tensor cores: cuDNN's PSEUDO_BFLOAT16
 * and PSEUDO_HALF configurations, as PyTorch's autocast calls them), beside
 * the hand-written tensor-core kernels (table_tc.c); `auto` times both.  A
 * fused relu or relu_bwd is a rounding-free step after the call, so every
 * stored value is rounded once; a forward pass with a bias runs on f32
 * copies (widened(), below) for the same reason.  The 2026-11-28 H200 run found the
 * bf16 step 3.4-3.7x slower than f32 while only the hand-written kernels
 * could take 16-bit convolutions (docs/gpu-verification.md).
 *
 * Pooling backward, activations and batch normalization stay native: cuDNN's
 * versions need tensors that cuttle's op split does not keep (the pooling
 * output for max backward; fused statistics for batch normalization).
 * Outputs are written with = (beta = 0); the conv bias is added after.
 */
#include "cuda/vendor.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "cuda/vendor_api.h"
#include "graph/impl.h"

#ifdef CT_HAVE_CUDNN

#define WORKSPACE_CAP ((size_t)256 << 20)
#define KEY_INTS 20

typedef struct dnn_entry {
    int key[KEY_INTS]; /* op; tf32, dtype and widened(); then the shape */
    cudnnTensorDescriptor_t x_desc, y_desc;
    cudnnFilterDescriptor_t w_desc;
    cudnnConvolutionDescriptor_t conv_desc;
    cudnnPoolingDescriptor_t pool_desc;
    int algo;
    size_t workspace;
} dnn_entry;

struct ct_cuda_dnn {
    cudnnHandle_t handle;
    cudaStream_t stream;
    bool tf32;
    dnn_entry *entries;
    int n_entries, capacity;
};

static bool is_conv(ct_op op)
{
    return op == CT_OP_CONV2D || op == CT_OP_CONV2D_BWD_DATA || op == CT_OP_CONV2D_BWD_WEIGHT;
}

ct_status ct_cuda_dnn_new(cudaStream_t stream, bool tf32, ct_cuda_dnn **out)
{
    *out = NULL;
    CT_TRY(ct_cudnn_load());
    ct_cuda_dnn *dnn = calloc(1, sizeof *dnn);
    if (!dnn)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory");
    cudnnStatus_t code = cudnnCreate(&dnn->handle);
    if (code != CUDNN_STATUS_SUCCESS) {
        free(dnn);
        return ct_cudnn_fail(code, __FILE__, __LINE__, "cudnnCreate(&dnn->handle)");
    }
    dnn->stream = stream;
    dnn->tf32 = tf32;
    *out = dnn;
    CT_CUDNN_CALL(cudnnSetStream(dnn->handle, stream));
    return CT_OK;
}

static void entry_destroy(dnn_entry *e)
{
    if (e->x_desc)
        cudnnDestroyTensorDescriptor(e->x_desc);
    if (e->y_desc)
        cudnnDestroyTensorDescriptor(e->y_desc);
    if (e->w_desc)
        cudnnDestroyFilterDescriptor(e->w_desc);
    if (e->conv_desc)
        cudnnDestroyConvolutionDescriptor(e->conv_desc);
    if (e->pool_desc)
        cudnnDestroyPoolingDescriptor(e->pool_desc);
}

void ct_cuda_dnn_free(ct_cuda_dnn *dnn)
{
    if (!dnn)
        return;
    for (int i = 0; i < dnn->n_entries; i++)
        entry_destroy(&dnn->entries[i]);
    free(dnn->entries);
    cudnnDestroy(dnn->handle);
    free(dnn);
}

void ct_cuda_dnn_set_tf32(ct_cuda_dnn *dnn, bool tf32)
{
    if (dnn)
        dnn->tf32 = tf32;
}

/* f32 nodes; and convolutions of a bf16 or fp16 graph (ct_half_layer_inputs). */
bool ct_cuda_dnn_supports(const ct_cuda_dnn *dnn, const ct_tensor *node)
{
    if (!dnn || !(is_conv(node->op) || node->op == CT_OP_MAXPOOL2D ||
                  node->op == CT_OP_AVGPOOL2D))
        return false;
    if (!ct_dtype_is_half(node->dtype))
        return node->dtype == CT_F32;
    return is_conv(node->op) && ct_half_layer_inputs(node);
}

/* A 16-bit forward pass with a bias: cuDNN would store y rounded and the
 * bias added after would round it again, where every other path rounds
 * once.  It runs on f32 copies of x and w instead, in TF32: a bf16 or fp16
 * value is exact in TF32 and the product of two exact in f32, so the sums
 * are those of the 16-bit tensor cores; then the bias and relu in f32 and
 * one rounding into y.  The copies and the f32 y follow cuDNN's own
 * workspace. */
static bool widened(const ct_tensor *node)
{
    return node->op == CT_OP_CONV2D && ct_dtype_is_half(node->dtype) && node->n_src > 2;
}

#define ALIGN 256
static size_t aligned(size_t bytes)
{
    return (bytes + ALIGN - 1) / ALIGN * ALIGN;
}

/* The element counts of x, w and y of a convolution. */
static void conv_counts(const ct_conv2d_shape *s, int64_t counts[3])
{
    counts[0] = (int64_t)s->n_batch * s->in_channels * s->in_h * s->in_w;
    counts[1] = (int64_t)s->out_channels * (s->in_channels / s->groups) * s->kernel_h *
                s->kernel_w;
    counts[2] = (int64_t)s->n_batch * s->out_channels * s->out_h * s->out_w;
}

static size_t widened_bytes(const ct_tensor *node)
{
    if (!widened(node))
        return 0;
    int64_t counts[3];
    conv_counts(&node->attr.conv, counts);
    size_t bytes = 0;
    for (int i = 0; i < 3; i++)
        bytes += aligned((size_t)counts[i] * sizeof(float));
    return bytes;
}

static cudnnDataType_t data_type(ct_dtype dtype)
{
    return dtype == CT_BF16  ? CUDNN_DATA_BFLOAT16
           : dtype == CT_F16 ? CUDNN_DATA_HALF
                             : CUDNN_DATA_FLOAT;
}

static void entry_key(const ct_cuda_dnn *dnn, const ct_tensor *node, int key[KEY_INTS])
{
    memset(key, 0, sizeof(int) * KEY_INTS);
    key[0] = (int)node->op;
    key[1] = dnn->tf32 | (int)node->dtype << 1 | widened(node) << 8;
    if (is_conv(node->op)) {
        const ct_conv2d_shape *s = &node->attr.conv;
        int fields[] = {s->n_batch,  s->in_channels, s->in_h,       s->in_w,
                        s->out_channels, s->out_h,   s->out_w,      s->kernel_h,
                        s->kernel_w, s->stride_h,    s->stride_w,   s->pad_h,
                        s->pad_w,    s->dilation_h,  s->dilation_w, s->groups};
        memcpy(key + 2, fields, sizeof fields);
    } else {
        const ct_pool2d_shape *s = &node->attr.pool;
        int fields[] = {s->n_batch,  s->channels, s->in_h,     s->in_w,     s->out_h,
                        s->out_w,    s->kernel_h, s->kernel_w, s->stride_h, s->stride_w,
                        s->pad_h,    s->pad_w,    s->exclude_pad};
        memcpy(key + 2, fields, sizeof fields);
    }
}

static ct_status make_conv_descriptors(const ct_cuda_dnn *dnn, const ct_tensor *node,
                                       dnn_entry *e)
{
    const ct_conv2d_shape *s = &node->attr.conv;
    cudnnDataType_t type = widened(node) ? CUDNN_DATA_FLOAT : data_type(node->dtype);
    CT_CUDNN_CALL(cudnnCreateTensorDescriptor(&e->x_desc));
    CT_CUDNN_CALL(cudnnCreateTensorDescriptor(&e->y_desc));
    CT_CUDNN_CALL(cudnnCreateFilterDescriptor(&e->w_desc));
    CT_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&e->conv_desc));
    CT_CUDNN_CALL(cudnnSetTensor4dDescriptor(e->x_desc, CUDNN_TENSOR_NCHW, type, s->n_batch,
                                             s->in_channels, s->in_h, s->in_w));
    CT_CUDNN_CALL(cudnnSetTensor4dDescriptor(e->y_desc, CUDNN_TENSOR_NCHW, type, s->n_batch,
                                             s->out_channels, s->out_h, s->out_w));
    CT_CUDNN_CALL(cudnnSetFilter4dDescriptor(e->w_desc, type, CUDNN_TENSOR_NCHW,
                                             s->out_channels, s->in_channels / s->groups,
                                             s->kernel_h, s->kernel_w));
    CT_CUDNN_CALL(cudnnSetConvolution2dDescriptor(e->conv_desc, s->pad_h, s->pad_w,
                                                  s->stride_h, s->stride_w, s->dilation_h,
                                                  s->dilation_w, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT));
    CT_CUDNN_CALL(cudnnSetConvolutionGroupCount(e->conv_desc, s->groups));
    /* 16-bit data (or its f32 copies): tensor cores, the f32 sums of exact products */
    bool tensor_ops = dnn->tf32 || ct_dtype_is_half(node->dtype);
    CT_CUDNN_CALL(cudnnSetConvolutionMathType(e->conv_desc, tensor_ops ? CUDNN_TENSOR_OP_MATH
                                                                       : CUDNN_FMA_MATH));
    int dims[4];
    CT_CUDNN_CALL(cudnnGetConvolution2dForwardOutputDim(e->conv_desc, e->x_desc, e->w_desc,
                                                        &dims[0], &dims[1], &dims[2],
                                                        &dims[3]));
    if (dims[0] != s->n_batch || dims[1] != s->out_channels || dims[2] != s->out_h ||
        dims[3] != s->out_w)
        return ct_set_error(CT_ERR_INTERNAL,
                            "cuDNN computes a conv output of [%d,%d,%d,%d], cuttle [%d,%d,%d,%d]",
                            dims[0], dims[1], dims[2], dims[3], s->n_batch, s->out_channels,
                            s->out_h, s->out_w);
    return CT_OK;
}

/* Whether a ranked algorithm is acceptable (see the top of the file). */
static bool algo_ok(const ct_cuda_dnn *dnn, bool half, cudnnStatus_t status, size_t memory,
                    cudnnDeterminism_t determinism, cudnnMathType_t math, size_t cap)
{
    bool tensor_ops = math == CUDNN_TENSOR_OP_MATH ||
                      math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return status == CUDNN_STATUS_SUCCESS && memory <= cap &&
           determinism == CUDNN_DETERMINISTIC && (dnn->tf32 || half || !tensor_ops);
}

/* The ranked list of one kind of convolution, the first acceptable entry:
 * timed, cuDNN's Find query (it runs every algorithm and sorts them by
 * time; cuttle's `auto`, as PyTorch's cudnn.benchmark), or where that fails
 * or `timed` is false, the _v7 heuristics.  find and get take the same
 * arguments. */
#define CHOOSE_ALGO(perf_type, count, find, get, arguments, size_call_tail)             \
    do {                                                                                 \
        perf_type perf[count];                                                           \
        int returned = 0;                                                                \
        if (!timed || find arguments != CUDNN_STATUS_SUCCESS)                            \
            CT_CUDNN_CALL(get arguments);                                                \
        for (int i = 0; i < returned; i++) {                                             \
            if (algo_ok(dnn, half, perf[i].status, perf[i].memory, perf[i].determinism,  \
                        perf[i].mathType, cap)) {                                        \
                e->algo = (int)perf[i].algo;                                             \
                CT_CUDNN_CALL(size_call_tail);                                           \
                return e->workspace <= cap ? CT_OK                                       \
                                           : ct_set_error(CT_ERR_INTERNAL,               \
                                                          "cuDNN workspace above the cap"); \
            }                                                                            \
        }                                                                                \
    } while (0)

static ct_status choose_conv_algo(const ct_cuda_dnn *dnn, ct_op op, bool half, bool timed,
                                  dnn_entry *e, size_t cap)
{
    cudnnHandle_t h = dnn->handle;
    if (op == CT_OP_CONV2D)
        CHOOSE_ALGO(cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                    cudnnFindConvolutionForwardAlgorithm, cudnnGetConvolutionForwardAlgorithm_v7,
                    (h, e->x_desc, e->w_desc, e->conv_desc, e->y_desc,
                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
                    cudnnGetConvolutionForwardWorkspaceSize(h, e->x_desc, e->w_desc,
                                                            e->conv_desc, e->y_desc,
                                                            perf[i].algo, &e->workspace));
    else if (op == CT_OP_CONV2D_BWD_DATA)
        CHOOSE_ALGO(cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                    cudnnFindConvolutionBackwardDataAlgorithm,
                    cudnnGetConvolutionBackwardDataAlgorithm_v7,
                    (h, e->w_desc, e->y_desc, e->conv_desc, e->x_desc,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf),
                    cudnnGetConvolutionBackwardDataWorkspaceSize(h, e->w_desc, e->y_desc,
                                                                 e->conv_desc, e->x_desc,
                                                                 perf[i].algo, &e->workspace));
    else
        CHOOSE_ALGO(cudnnConvolutionBwdFilterAlgoPerf_t,
                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                    cudnnFindConvolutionBackwardFilterAlgorithm,
                    cudnnGetConvolutionBackwardFilterAlgorithm_v7,
                    (h, e->x_desc, e->y_desc, e->conv_desc, e->w_desc,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf),
                    cudnnGetConvolutionBackwardFilterWorkspaceSize(
                        h, e->x_desc, e->y_desc, e->conv_desc, e->w_desc, perf[i].algo,
                        &e->workspace));
    return ct_set_error(CT_ERR_UNSUPPORTED,
                        "cuDNN offers no deterministic %s algorithm within %zu bytes of "
                        "workspace for this shape",
                        ct_op_name(op), cap);
}

static ct_status make_pool_descriptors(const ct_pool2d_shape *s, ct_op op, dnn_entry *e)
{
    cudnnPoolingMode_t mode = op == CT_OP_MAXPOOL2D ? CUDNN_POOLING_MAX_DETERMINISTIC
                              : s->exclude_pad      ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                    : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    CT_CUDNN_CALL(cudnnCreateTensorDescriptor(&e->x_desc));
    CT_CUDNN_CALL(cudnnCreateTensorDescriptor(&e->y_desc));
    CT_CUDNN_CALL(cudnnCreatePoolingDescriptor(&e->pool_desc));
    CT_CUDNN_CALL(cudnnSetTensor4dDescriptor(e->x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                             s->n_batch, s->channels, s->in_h, s->in_w));
    CT_CUDNN_CALL(cudnnSetTensor4dDescriptor(e->y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                             s->n_batch, s->channels, s->out_h, s->out_w));
    CT_CUDNN_CALL(cudnnSetPooling2dDescriptor(e->pool_desc, mode, CUDNN_PROPAGATE_NAN,
                                              s->kernel_h, s->kernel_w, s->pad_h, s->pad_w,
                                              s->stride_h, s->stride_w));
    return CT_OK;
}

/* The node's cached entry, made (with a workspace of at most `cap`) if new. */
static ct_status find_entry(ct_cuda_dnn *dnn, const ct_tensor *node, size_t cap, bool timed,
                            dnn_entry **out)
{
    int key[KEY_INTS];
    entry_key(dnn, node, key);
    for (int i = 0; i < dnn->n_entries; i++) {
        if (memcmp(dnn->entries[i].key, key, sizeof key) == 0) {
            *out = &dnn->entries[i];
            return CT_OK;
        }
    }
    if (dnn->n_entries == dnn->capacity) {
        int capacity = dnn->capacity ? 2 * dnn->capacity : 16;
        dnn_entry *grown = realloc(dnn->entries, sizeof *grown * (size_t)capacity);
        if (!grown)
            return ct_set_error(CT_ERR_MEMORY, "out of host memory for cuDNN descriptors");
        dnn->entries = grown;
        dnn->capacity = capacity;
    }
    if (cap == 0 && widened(node))
        return ct_set_error(CT_ERR_UNSUPPORTED, "a 16-bit convolution with a bias first met "
                                                "at run time has no workspace for its f32 copies");
    dnn_entry *e = &dnn->entries[dnn->n_entries];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, sizeof key);
    ct_status status = is_conv(node->op)
                           ? make_conv_descriptors(dnn, node, e)
                           : make_pool_descriptors(&node->attr.pool, node->op, e);
    if (status == CT_OK && is_conv(node->op))
        status = choose_conv_algo(dnn, node->op, ct_dtype_is_half(node->dtype), timed, e, cap);
    if (status != CT_OK) {
        entry_destroy(e);
        return status;
    }
    dnn->n_entries++;
    *out = e;
    return CT_OK;
}

ct_status ct_cuda_dnn_workspace(ct_cuda_dnn *dnn, const ct_tensor *node, bool timed,
                               size_t *bytes)
{
    dnn_entry *e = NULL;
    CT_TRY(find_entry(dnn, node, WORKSPACE_CAP, timed, &e));
    *bytes = widened(node) ? aligned(e->workspace) + widened_bytes(node) : e->workspace;
    return CT_OK;
}

/* widened(node): the forward pass on f32 copies (above). */
static ct_status run_widened(const ct_cuda_dnn *dnn, const dnn_entry *e, const ct_exec *exec,
                             const ct_tensor *node)
{
    const ct_conv2d_shape *s = &node->attr.conv;
    int64_t counts[3];
    conv_counts(s, counts);
    char *at = (char *)exec->workspace + aligned(e->workspace);
    float *x = (float *)at;
    float *w = (float *)(at + aligned((size_t)counts[0] * sizeof(float)));
    float *y = (float *)((char *)w + aligned((size_t)counts[1] * sizeof(float)));
    ct_dtype dtype = node->dtype;
    CT_TRY(ct_cuda_cast(counts[0], ct_exec_data(exec, node->src[0]), dtype, x, CT_F32,
                        dnn->stream));
    CT_TRY(ct_cuda_cast(counts[1], ct_exec_data(exec, node->src[1]), dtype, w, CT_F32,
                        dnn->stream));
    const float one = 1.0f, zero = 0.0f;
    CT_CUDNN_CALL(cudnnConvolutionForward(dnn->handle, &one, e->x_desc, x, e->w_desc, w,
                                          e->conv_desc, e->algo, exec->workspace, e->workspace,
                                          &zero, e->y_desc, y));
    CT_TRY(ct_cuda_add_bias(CT_F32, s->n_batch, s->out_channels, s->out_h * s->out_w,
                            ct_exec_data(exec, node->src[2]),
                            exec->epilogue[node->id] == CT_EPILOGUE_RELU, y, dnn->stream));
    return ct_cuda_cast(counts[2], y, CT_F32, ct_exec_data(exec, node), dtype, dnn->stream);
}

ct_status ct_cuda_dnn_run(ct_cuda_dnn *dnn, const ct_exec *exec, const ct_tensor *node)
{
    dnn_entry *e = NULL;
    CT_TRY(find_entry(dnn, node, 0, false, &e));
    if (widened(node))
        return run_widened(dnn, e, exec, node);
    const float one = 1.0f, zero = 0.0f;
    const void *a = ct_exec_data(exec, node->src[0]);
    const void *b = node->n_src > 1 ? ct_exec_data(exec, node->src[1]) : NULL;
    void *out = ct_exec_data(exec, node);
    cudnnHandle_t h = dnn->handle;
    switch (node->op) {
    case CT_OP_CONV2D: { /* (x, w[, bias]) */
        const ct_conv2d_shape *s = &node->attr.conv;
        CT_CUDNN_CALL(cudnnConvolutionForward(h, &one, e->x_desc, a, e->w_desc, b,
                                              e->conv_desc, e->algo, exec->workspace,
                                              e->workspace, &zero, e->y_desc, out));
        return ct_cuda_add_bias(node->dtype, s->n_batch, s->out_channels, s->out_h * s->out_w,
                                node->n_src > 2 ? ct_exec_data(exec, node->src[2]) : NULL,
                                exec->epilogue[node->id] == CT_EPILOGUE_RELU, out, dnn->stream);
    }
    case CT_OP_CONV2D_BWD_DATA: /* (dy, w) */
        CT_CUDNN_CALL(cudnnConvolutionBackwardData(h, &one, e->w_desc, b, e->y_desc, a,
                                                   e->conv_desc, e->algo, exec->workspace,
                                                   e->workspace, &zero, e->x_desc, out));
        return ct_cuda_vendor_relu_bwd(exec, node, out, ct_tensor_numel(node), dnn->stream);
    case CT_OP_CONV2D_BWD_WEIGHT: { /* (x, dy) */
        CT_CUDNN_CALL(cudnnConvolutionBackwardFilter(h, &one, e->x_desc, a, e->y_desc, b,
                                                     e->conv_desc, e->algo, exec->workspace,
                                                     e->workspace, &zero, e->w_desc, out));
        const ct_conv2d_shape *s = &node->attr.conv;
        return ct_cuda_vendor_bias_grad(exec, node, b, s->n_batch, s->out_channels,
                                        s->out_h * s->out_w, dnn->stream);
    }
    case CT_OP_MAXPOOL2D:
    case CT_OP_AVGPOOL2D:
        CT_CUDNN_CALL(cudnnPoolingForward(h, e->pool_desc, &one, e->x_desc, a, &zero,
                                          e->y_desc, out));
        return CT_OK;
    default:
        return ct_set_error(CT_ERR_INTERNAL, "cuDNN path asked to run %s",
                            ct_op_name(node->op));
    }
}

#else /* no cuDNN in this build */

ct_status ct_cuda_dnn_new(cudaStream_t stream, bool tf32, ct_cuda_dnn **out)
{
    (void)stream;
    (void)tf32;
    *out = NULL;
    return CT_OK;
}

void ct_cuda_dnn_free(ct_cuda_dnn *dnn) { (void)dnn; }

void ct_cuda_dnn_set_tf32(ct_cuda_dnn *dnn, bool tf32)
{
    (void)dnn;
    (void)tf32;
}

bool ct_cuda_dnn_supports(const ct_cuda_dnn *dnn, const ct_tensor *node)
{
    (void)dnn;
    (void)node;
    return false;
}

ct_status ct_cuda_dnn_workspace(ct_cuda_dnn *dnn, const ct_tensor *node, bool timed,
                               size_t *bytes)
{
    (void)timed;
    (void)dnn;
    (void)node;
    *bytes = 0;
    return CT_OK;
}

ct_status ct_cuda_dnn_run(ct_cuda_dnn *dnn, const ct_exec *exec, const ct_tensor *node)
{
    (void)dnn;
    (void)exec;
    return ct_set_error(CT_ERR_INTERNAL, "cuDNN path asked to run %s in a build without it",
                        ct_op_name(node->op));
}

#endif
