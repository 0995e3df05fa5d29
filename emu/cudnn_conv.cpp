/*
 * The emulated cuDNN's convolutions (cudnn.h): the convolution descriptor,
 * the output size, the _v7 algorithm rankings and workspace sizes, and
 * forward / backward data / backward filter, queued on the handle's stream.
 *
 * Written from NVIDIA's public cuDNN documentation to test cuttle's glue
 * (src/cuda/dnn.c), not NVIDIA's library.  Descriptors are checked when
 * they meet (channels, groups, output size) as cuDNN documents; data and
 * workspace pointers are checked against live device allocations; the
 * computation (emu/cudnn_math.cpp) runs when the stream does, from a copy
 * of the shapes.
 *
 * The "algorithms" borrow cuDNN's enum names for what the rankings report
 * (determinism, workspace, math type); behind each is one of two reference
 * routines: direct loops (no workspace) or a column matrix (im2col) held in
 * the caller's workspace, so a workspace the glue under-sizes is caught.
 */
#include <algorithm>
#include <iterator>
#include <new>
#include <vector>

#include "cuda_bf16.h"
#include "cudnn_internal.h"
#include "emu.h"

using namespace emu_dnn;

namespace {

/* Whether the descriptors agree, as cuDNN requires; fills *out.  y may be
 * NULL (the output-size query), otherwise its shape must be the output's. */
cudnnStatus_t conv_shape_of(const char *fn, const cudnnConvolutionStruct *conv,
                            const cudnnTensorStruct *x, const cudnnFilterStruct *w,
                            const cudnnTensorStruct *y, conv_shape *out)
{
    if (!conv || !x || !w || !conv->set || !x->set || !w->set || (y && !y->set))
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "a descriptor is NULL or was never set");
    if (x->c != w->c * conv->groups || w->k % conv->groups != 0)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "input channels %d must be filter channels %d x groups %d, and filter "
                      "count %d a multiple of the groups",
                      x->c, w->c, conv->groups, w->k);
    if (x->type != w->type || (y && y->type != x->type))
        return reject(CUDNN_STATUS_NOT_SUPPORTED, fn,
                      "x, w and y must have one data type (float, or half or bfloat16 computed "
                      "in float), not %d, %d and %d",
                      (int)x->type, (int)w->type, y ? (int)y->type : -1);
    conv_shape s = {x->n, x->c, x->h, x->w, w->k, w->h, w->w, 0, 0,
                    conv->pad_h, conv->pad_w, conv->stride_h, conv->stride_w,
                    conv->dilation_h, conv->dilation_w, conv->groups,
                    conv->mode == CUDNN_CONVOLUTION, false, x->type};
    s.out_h = output_dim(s.h, s.pad_h, s.r, s.dilation_h, s.stride_h);
    s.out_w = output_dim(s.w, s.pad_w, s.s, s.dilation_w, s.stride_w);
    if (s.out_h <= 0 || s.out_w <= 0)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "a %dx%d filter dilated %dx%d does not fit the %dx%d input padded %dx%d",
                      s.r, s.s, s.dilation_h, s.dilation_w, s.h, s.w, s.pad_h, s.pad_w);
    if (y && (y->n != s.n || y->c != s.k || y->h != s.out_h || y->w != s.out_w))
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "output descriptor [%d,%d,%d,%d], the convolution gives [%d,%d,%d,%d]",
                      y->n, y->c, y->h, y->w, s.n, s.k, s.out_h, s.out_w);
    *out = s;
    return CUDNN_STATUS_SUCCESS;
}

enum class conv_kind { forward, backward_data, backward_filter };

/* What an emulated algorithm is: the routine behind it and what its ranking reports. */
struct algo_info {
    int algo;
    bool column;         /* im2col in the workspace, else direct loops */
    bool deterministic;  /* as cuDNN documents the name (the emulator always is) */
    bool tensor_capable; /* runs in TF32 unless the math type is CUDNN_FMA_MATH */
};

/* Each kind's algorithms.  The _v7 queries rank the non-deterministic
 * (atomics-based) ones first, as cuDNN's heuristics often do for the
 * backward passes, then those that run on tensor cores under the
 * descriptor's math type, then the rest (table order within each): so with
 * CUDNN_FMA_MATH the first deterministic choice needs a workspace, and with
 * tensor-op math it runs in TF32.  Each kind has a deterministic one that
 * needs no workspace. */
const algo_info forward_algos[] = {
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true, true, true},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false, true, false},
};
const algo_info backward_data_algos[] = {
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false, false, false},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, true, true, false},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, false, true, true},
};
const algo_info backward_filter_algos[] = {
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false, false, false},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, true, true, false},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, false, true, true},
};

constexpr int MAX_ALGOS = (int)std::max({std::size(forward_algos), std::size(backward_data_algos),
                                          std::size(backward_filter_algos)});

struct algo_table {
    const algo_info *algos;
    int count, enum_count;
};

algo_table algos_of(conv_kind kind)
{
    switch (kind) {
    case conv_kind::forward:
        return {forward_algos, (int)std::size(forward_algos), CUDNN_CONVOLUTION_FWD_ALGO_COUNT};
    case conv_kind::backward_data:
        return {backward_data_algos, (int)std::size(backward_data_algos),
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT};
    case conv_kind::backward_filter:
        break;
    }
    return {backward_filter_algos, (int)std::size(backward_filter_algos),
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
}

/* The emulated algorithm `algo` of `kind`: BAD_PARAM for no such enum value,
 * NOT_SUPPORTED for one the emulator does not offer. */
cudnnStatus_t find_algo(const char *fn, conv_kind kind, int algo, algo_info *out)
{
    algo_table table = algos_of(kind);
    for (int i = 0; i < table.count; i++) {
        if (table.algos[i].algo == algo) {
            *out = table.algos[i];
            return CUDNN_STATUS_SUCCESS;
        }
    }
    if (algo < 0 || algo >= table.enum_count)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "%d is not an algorithm", algo);
    return reject(CUDNN_STATUS_NOT_SUPPORTED, fn,
                  "the emulator offers only the algorithms its _v7 query ranks, not %d", algo);
}

size_t workspace_bytes(const conv_shape &s, const algo_info &a)
{
    return a.column ? s.taps() * s.plane_out() * sizeof(float) : 0;
}

bool runs_tf32(const algo_info &a, const cudnnConvolutionStruct *conv)
{
    return a.tensor_capable && conv->math != CUDNN_FMA_MATH;
}

/* What a Find query reports as an algorithm's time, in ms: a model, not a
 * measurement (nothing here runs on a GPU): the convolution's
 * multiply-adds at 10 TFLOP/s, 4x that in TF32, 1.5x for the column
 * algorithms, 1.2x for the non-deterministic ones. */
float emulated_ms(const conv_shape &s, const algo_info &a, const cudnnConvolutionStruct *conv)
{
    double flops = 2.0 * (double)s.y_count() * (double)s.taps();
    double rate = 1e10 * (runs_tf32(a, conv) ? 4.0 : 1.0) * (a.column ? 1.5 : 1.0) *
                  (a.deterministic ? 1.0 : 1.2);
    return (float)(flops / rate);
}

/* The ranked list of a _v7 query, after its arguments were checked; a Find
 * query (timed) orders it by emulated_ms.  Both count as calls and can be
 * made to fail (CUDA_EMU_FAIL). */
template <typename Perf>
cudnnStatus_t rank_algos(const char *fn, cudnnHandle_t handle, conv_kind kind,
                         const cudnnConvolutionStruct *conv, const cudnnTensorStruct *x,
                         const cudnnFilterStruct *w, const cudnnTensorStruct *y, int requested,
                         int *returned, Perf *perf, bool timed = false)
{
    if (emu::injected_failure(fn))
        return reject(CUDNN_STATUS_EXECUTION_FAILED, fn, "failure injected (CUDA_EMU_FAIL)");
    if (!handle || !returned || !perf || requested <= 0)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "handle, returned count or results is NULL, or %d results requested",
                      requested);
    conv_shape s{};
    cudnnStatus_t status = conv_shape_of(fn, conv, x, w, y, &s);
    if (status != CUDNN_STATUS_SUCCESS)
        return status;
    algo_table table = algos_of(kind);
    algo_info ranked[MAX_ALGOS];
    std::copy(table.algos, table.algos + table.count, ranked);
    auto rank = [conv](const algo_info &a) {
        return !a.deterministic ? 0 : runs_tf32(a, conv) ? 1 : 2;
    };
    if (timed)
        std::stable_sort(ranked, ranked + table.count, [&](const algo_info &a, const algo_info &b) {
            return emulated_ms(s, a, conv) < emulated_ms(s, b, conv);
        });
    else
        std::stable_sort(ranked, ranked + table.count,
                         [&](const algo_info &a, const algo_info &b) { return rank(a) < rank(b); });
    *returned = std::min(requested, table.count);
    for (int i = 0; i < *returned; i++) {
        const algo_info &a = ranked[i];
        perf[i] = Perf{};
        perf[i].algo = (decltype(perf[i].algo))a.algo;
        perf[i].status = CUDNN_STATUS_SUCCESS;
        perf[i].time = timed ? emulated_ms(s, a, conv) : -1.0f;
        perf[i].memory = workspace_bytes(s, a);
        perf[i].determinism = a.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
        perf[i].mathType = runs_tf32(a, conv) ? conv->math : CUDNN_FMA_MATH;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t query_workspace(const char *fn, cudnnHandle_t handle, conv_kind kind,
                              const cudnnConvolutionStruct *conv, const cudnnTensorStruct *x,
                              const cudnnFilterStruct *w, const cudnnTensorStruct *y, int algo,
                              size_t *bytes)
{
    if (!handle || !bytes)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "handle or size pointer is NULL");
    conv_shape s{};
    algo_info a{};
    cudnnStatus_t status = conv_shape_of(fn, conv, x, w, y, &s);
    if (status == CUDNN_STATUS_SUCCESS)
        status = find_algo(fn, kind, algo, &a);
    if (status == CUDNN_STATUS_SUCCESS)
        *bytes = workspace_bytes(s, a);
    return status;
}

/* n 16-bit values of `type` (HALF or BFLOAT16) at bits, as floats. */
std::vector<float> widen(cudnnDataType_t type, const void *bits, size_t n)
{
    std::vector<float> out(bits ? n : 0);
    const uint16_t *in = (const uint16_t *)bits;
    for (size_t i = 0; i < out.size(); i++)
        out[i] = emu::bits16_to_float(type == CUDNN_DATA_BFLOAT16, in[i]);
    return out;
}

/* A convolution of 16-bit tensors computed in float (the PSEUDO_*_CONFIG
 * of cuDNN's documentation): the inputs widened, the float routine run,
 * each output rounded to nearest even once (beta != 0: the old output
 * widened first, as the routine blends it in float). */
template <class Run>
void run_16_bit(const conv_shape &s, const conv_data &d, size_t out_count, Run run)
{
    std::vector<float> x = widen(s.type, d.x, s.x_count());
    std::vector<float> w = widen(s.type, d.w, s.w_count());
    std::vector<float> dy = widen(s.type, d.dy, s.y_count());
    std::vector<float> out = d.beta != 0.0f ? widen(s.type, d.out, out_count)
                                            : std::vector<float>(out_count);
    conv_data f = d;
    f.x = d.x ? x.data() : nullptr;
    f.w = d.w ? w.data() : nullptr;
    f.dy = d.dy ? dy.data() : nullptr;
    f.out = out.data();
    run(f);
    uint16_t *bits = (uint16_t *)d.out;
    for (size_t i = 0; i < out_count; i++)
        bits[i] = emu::float_to_bits16(s.type == CUDNN_DATA_BFLOAT16, out[i]);
}

/* Check one convolution call and queue it on the handle's stream. */
cudnnStatus_t launch_conv(const char *fn, cudnnHandle_t handle, conv_kind kind, int algo,
                          const cudnnConvolutionStruct *conv, const cudnnTensorStruct *x_desc,
                          const cudnnFilterStruct *w_desc, const cudnnTensorStruct *y_desc,
                          const void *alpha, const void *beta, conv_data d,
                          size_t workspace_given)
{
    if (emu::injected_failure(fn))
        return reject(CUDNN_STATUS_EXECUTION_FAILED, fn, "failure injected (CUDA_EMU_FAIL)");
    if (!handle || !alpha || !beta)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "handle, alpha or beta is NULL");
    conv_shape s{};
    algo_info a{};
    cudnnStatus_t status = conv_shape_of(fn, conv, x_desc, w_desc, y_desc, &s);
    if (status == CUDNN_STATUS_SUCCESS)
        status = find_algo(fn, kind, algo, &a);
    if (status != CUDNN_STATUS_SUCCESS)
        return status;
    d.alpha = *(const float *)alpha;
    d.beta = *(const float *)beta;
    size_t out_count = kind == conv_kind::forward         ? s.y_count()
                       : kind == conv_kind::backward_data ? s.x_count()
                                                          : s.w_count();
    if ((d.x && !device_elements(fn, "x", d.x, s.x_count(), s.type)) ||
        (d.w && !device_elements(fn, "w", d.w, s.w_count(), s.type)) ||
        (d.dy && !device_elements(fn, "dy", d.dy, s.y_count(), s.type)) ||
        !device_elements(fn, "output", d.out, out_count, s.type))
        return CUDNN_STATUS_BAD_PARAM;
    size_t needed = workspace_bytes(s, a);
    if (workspace_given < needed)
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "algorithm %d needs %zu bytes of workspace, %zu given", algo, needed,
                      workspace_given);
    if (workspace_given > 0 && !emu::is_device_range(d.workspace, workspace_given))
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "workspace %p of %zu bytes is not inside one device allocation",
                      (void *)d.workspace, workspace_given);
    s.tf32 = runs_tf32(a, conv);
    bool column = a.column;
    cudaError_t error = emu::enqueue(handle->stream, fn, [s, d, kind, column, out_count]() {
        try {
            auto run = [&](const conv_data &f) {
                if (kind == conv_kind::forward)
                    (column ? forward_column : forward_direct)(s, f);
                else if (kind == conv_kind::backward_data)
                    (column ? backward_data_column : backward_data_direct)(s, f);
                else
                    (column ? backward_filter_column : backward_filter_direct)(s, f);
            };
            if (s.type == CUDNN_DATA_FLOAT)
                run(d);
            else
                run_16_bit(s, d, out_count, run);
        } catch (const std::bad_alloc &) {
            emu::fail_current_work(cudaErrorMemoryAllocation,
                                   "the emulated cuDNN ran out of host memory");
        }
    });
    if (error != cudaSuccess)
        return reject(CUDNN_STATUS_EXECUTION_FAILED, fn, "could not queue the work: %s",
                      cudaGetErrorName(error));
    return CUDNN_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc)
{
    return create("cudnnCreateConvolutionDescriptor", desc);
}

cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc)
{
    delete desc;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t computeType)
{
    static const char fn[] = "cudnnSetConvolution2dDescriptor";
    if (!desc || pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 ||
        dilation_w < 1 || (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION))
        return reject(CUDNN_STATUS_BAD_PARAM, fn,
                      "descriptor %p, pads %dx%d (>= 0), strides %dx%d and dilations %dx%d "
                      "(>= 1), mode %d",
                      (void *)desc, pad_h, pad_w, u, v, dilation_h, dilation_w, (int)mode);
    if (computeType != CUDNN_DATA_FLOAT)
        return reject(CUDNN_STATUS_NOT_SUPPORTED, fn,
                      "the emulator computes only in float, not data type %d", (int)computeType);
    desc->set = true;
    desc->pad_h = pad_h;
    desc->pad_w = pad_w;
    desc->stride_h = u;
    desc->stride_w = v;
    desc->dilation_h = dilation_h;
    desc->dilation_w = dilation_w;
    desc->mode = mode;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groupCount)
{
    if (!desc || groupCount < 1)
        return reject(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionGroupCount",
                      "descriptor %p, group count %d (>= 1)", (void *)desc, groupCount);
    desc->groups = groupCount;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc,
                                          cudnnMathType_t mathType)
{
    if (!desc || (int)mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
        return reject(CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolutionMathType",
                      "descriptor %p, math type %d", (void *)desc, (int)mathType);
    desc->math = mathType;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc,
                                                    int *n, int *c, int *h, int *w)
{
    static const char fn[] = "cudnnGetConvolution2dForwardOutputDim";
    if (!n || !c || !h || !w)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "an output pointer is NULL");
    conv_shape s{};
    cudnnStatus_t status = conv_shape_of(fn, convDesc, inputTensorDesc, filterDesc, nullptr, &s);
    if (status != CUDNN_STATUS_SUCCESS)
        return status;
    *n = s.n;
    *c = s.k;
    *h = s.out_h;
    *w = s.out_w;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnGetConvolutionForwardAlgorithm_v7", handle, conv_kind::forward,
                      convDesc, xDesc, wDesc, yDesc, requestedAlgoCount, returnedAlgoCount,
                      perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnGetConvolutionBackwardDataAlgorithm_v7", handle,
                      conv_kind::backward_data, convDesc, dxDesc, wDesc, dyDesc,
                      requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnGetConvolutionBackwardFilterAlgorithm_v7", handle,
                      conv_kind::backward_filter, convDesc, xDesc, dwDesc, dyDesc,
                      requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnFindConvolutionForwardAlgorithm", handle, conv_kind::forward,
                      convDesc, xDesc, wDesc, yDesc, requestedAlgoCount, returnedAlgoCount,
                      perfResults, true);
}

cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithm(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnFindConvolutionBackwardDataAlgorithm", handle,
                      conv_kind::backward_data, convDesc, dxDesc, wDesc, dyDesc,
                      requestedAlgoCount, returnedAlgoCount, perfResults, true);
}

cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithm(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t dwDesc, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return rank_algos("cudnnFindConvolutionBackwardFilterAlgorithm", handle,
                      conv_kind::backward_filter, convDesc, xDesc, dwDesc, dyDesc,
                      requestedAlgoCount, returnedAlgoCount, perfResults, true);
}

cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes)
{
    return query_workspace("cudnnGetConvolutionForwardWorkspaceSize", handle,
                           conv_kind::forward, convDesc, xDesc, wDesc, yDesc, algo,
                           sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnTensorDescriptor_t dxDesc, cudnnConvolutionBwdDataAlgo_t algo,
    size_t *sizeInBytes)
{
    return query_workspace("cudnnGetConvolutionBackwardDataWorkspaceSize", handle,
                           conv_kind::backward_data, convDesc, dxDesc, wDesc, dyDesc, algo,
                           sizeInBytes);
}

cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
    const cudnnTensorDescriptor_t dyDesc, const cudnnConvolutionDescriptor_t convDesc,
    const cudnnFilterDescriptor_t gradDesc, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t *sizeInBytes)
{
    return query_workspace("cudnnGetConvolutionBackwardFilterWorkspaceSize", handle,
                           conv_kind::backward_filter, convDesc, xDesc, gradDesc, dyDesc, algo,
                           sizeInBytes);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      const cudnnTensorDescriptor_t xDesc, const void *x,
                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                      const cudnnConvolutionDescriptor_t convDesc,
                                      cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                      size_t workSpaceSizeInBytes, const void *beta,
                                      const cudnnTensorDescriptor_t yDesc, void *y)
{
    conv_data d = {(const float *)x, (const float *)w, nullptr, (float *)y, (float *)workSpace,
                   0.0f, 0.0f};
    return launch_conv("cudnnConvolutionForward", handle, conv_kind::forward, algo, convDesc,
                       xDesc, wDesc, yDesc, alpha, beta, d, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void *w,
                                           const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                           size_t workSpaceSizeInBytes, const void *beta,
                                           const cudnnTensorDescriptor_t dxDesc, void *dx)
{
    conv_data d = {nullptr, (const float *)w, (const float *)dy, (float *)dx, (float *)workSpace,
                   0.0f, 0.0f};
    return launch_conv("cudnnConvolutionBackwardData", handle, conv_kind::backward_data, algo,
                       convDesc, dxDesc, wDesc, dyDesc, alpha, beta, d, workSpaceSizeInBytes);
}

cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                             const cudnnTensorDescriptor_t xDesc, const void *x,
                                             const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                             const cudnnConvolutionDescriptor_t convDesc,
                                             cudnnConvolutionBwdFilterAlgo_t algo,
                                             void *workSpace, size_t workSpaceSizeInBytes,
                                             const void *beta,
                                             const cudnnFilterDescriptor_t dwDesc, void *dw)
{
    conv_data d = {(const float *)x, nullptr, (const float *)dy, (float *)dw, (float *)workSpace,
                   0.0f, 0.0f};
    return launch_conv("cudnnConvolutionBackwardFilter", handle, conv_kind::backward_filter,
                       algo, convDesc, xDesc, dwDesc, dyDesc, alpha, beta, d,
                       workSpaceSizeInBytes);
}

} // extern "C"
