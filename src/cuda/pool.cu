/*
 * Pooling on the GPU: max, average and global average, with the window
 * bounds, divisors and max rule of src/cpu/pool.c (NaN wins, the first
 * maximum in row-major order wins a tie): core/window_math.h's and
 * core/math_shared.h's.
 *
 * Forward passes run one thread per output.  Backward passes run one thread
 * per input element, which gathers the windows that hold it in output order
 * (the order in which the CPU scatters them), so dx is written with = and
 * matches the CPU's sums bit for bit, without atomics.
 *
 * Every kernel is templated on the storage type T of x, y, dy and dx
 * (float, or the bits of a bf16 or f16: elementwise.cuh): 16-bit values are
 * widened as they are loaded, the work is the f32 kernel's, and each output
 * is rounded once as it is stored, where the CPU reference rounds its f32
 * result (cpu/widen.c): the same bits.  The 2x2 kernels' row pairs are one
 * 64-bit access of floats, one 32-bit access of halves.
 */
#include <math.h>

#include "core/math_shared.h"
#include "core/window_math.h"
#include "cuda/elementwise.cuh"

/* Element `index` of [planes, height, width] tensor: its plane, row, column. */
struct plane_position {
    int64_t plane;
    int row, col;
};

__device__ inline plane_position position_of(int64_t index, int height, int width)
{
    int64_t area = (int64_t)height * width;
    return {index / area, (int)(index % area / width), (int)(index % width)};
}

/* Two elements at p (aligned to two) as f32 in one access, and stored back. */
__device__ inline void load_pair(const float *p, float v[2])
{
    ct_load2(p, v);
}
__device__ inline void store_pair(float *p, const float v[2])
{
    ct_store2(p, v);
}
template <class H> __device__ inline void load_pair(const H *p, float v[2])
{
    H h[2];
    uint32_t bits = *reinterpret_cast<const uint32_t *>(p);
    memcpy(h, &bits, sizeof bits);
    v[0] = ct_to_f32(h[0]), v[1] = ct_to_f32(h[1]);
}
template <class H> __device__ inline void store_pair(H *p, const float v[2])
{
    H h[2] = {ct_from_f32<H>(v[0]), ct_from_f32<H>(v[1])};
    uint32_t bits;
    memcpy(&bits, h, sizeof bits);
    *reinterpret_cast<uint32_t *>(p) = bits;
}

/* The window's maximum and its index in the plane (src/cpu/pool.c's rule). */
template <class T>
__device__ inline int pool_window_argmax(const T *plane, int in_w, ct_pool_window win,
                                         float *max_value)
{
    int best = win.h0 * in_w + win.w0;
    float best_value = -INFINITY;
    for (int h = win.h0; h < win.h1; h++)
        for (int w = win.w0; w < win.w1; w++) {
            float v = ct_load_f32(plane, h * in_w + w);
            if (ct_max_replaces(v, best_value)) {
                best_value = v;
                best = h * in_w + w;
            }
        }
    *max_value = best_value;
    return best;
}

/* y[p,oh,ow] = max over the window (-inf for an empty one) */
template <class T> __global__ void maxpool_forward_kernel(ct_pool2d_shape s, const T *x, T *y)
{
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * out_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.out_h, s.out_w);
        int64_t p = at.plane;
        int oh = at.row, ow = at.col;
        ct_pool_window win = ct_pool_window_at(&s, oh, ow);
        float m = -INFINITY;
        if (!ct_pool_window_empty(win))
            pool_window_argmax(x + p * s.in_h * s.in_w, s.in_w, win, &m);
        ct_store_f32(y, index, m);
    }
}

/* The 2x2 stride-2 unpadded window of an even-width plane: each of its two
 * rows is one 64-bit load, so a warp's request covers whole sectors (the
 * general kernel's two 32-bit loads per row touch every sector twice, at
 * half their bytes each).  The same rule in the same order: the same bits. */
template <class T>
__global__ void maxpool2x2_forward_kernel(ct_pool2d_shape s, const T *x, T *y)
{
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * out_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.out_h, s.out_w);
        int64_t p = at.plane;
        int oh = at.row, ow = at.col;
        const T *top = x + (p * s.in_h + 2 * oh) * s.in_w + 2 * ow;
        float window[4];
        load_pair(top, window);
        load_pair(top + s.in_w, window + 2);
        float m = -INFINITY;
        for (int i = 0; i < 4; i++)
            if (ct_max_replaces(window[i], m))
                m = window[i];
        ct_store_f32(y, index, m);
    }
}

/* The sum of grad(oh, ow) over the windows holding input (h, w) whose
 * argmax it is (is_argmax(oh, ow)), in output order: both max pool
 * backward kernels' rule, so the same bits. */
template <class IsArgmax, class Grad>
__device__ inline float pool_argmax_sum(const ct_pool2d_shape &s, int h, int w,
                                        IsArgmax is_argmax, Grad grad)
{
    int oh_lo, oh_hi, ow_lo, ow_hi;
    ct_windows_holding(h, s.kernel_h, s.stride_h, s.pad_h, s.out_h, &oh_lo, &oh_hi);
    ct_windows_holding(w, s.kernel_w, s.stride_w, s.pad_w, s.out_w, &ow_lo, &ow_hi);
    float sum = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; oh++)
        for (int ow = ow_lo; ow <= ow_hi; ow++)
            if (is_argmax(oh, ow))
                sum += grad(oh, ow);
    return sum;
}

/* dx[p,h,w] = sum of dy[p,oh,ow] over the windows whose argmax is (h,w) */
template <class T>
__global__ void maxpool_backward_kernel(ct_pool2d_shape s, const T *x, const T *dy, T *dx,
                                        bool relu)
{
    int64_t in_plane = (int64_t)s.in_h * s.in_w, out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * in_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.in_h, s.in_w);
        int64_t p = at.plane;
        int h = at.row, w = at.col;
        int target = h * s.in_w + w;
        const T *xp = x + p * in_plane;
        float sum = pool_argmax_sum(
            s, h, w,
            [&](int oh, int ow) {
                float unused_max;
                return pool_window_argmax(xp, s.in_w, ct_pool_window_at(&s, oh, ow), &unused_max) ==
                       target;
            },
            [&](int oh, int ow) {
                return ct_load_f32(dy, p * out_plane + (int64_t)oh * s.out_w + ow);
            });
        ct_store_f32(dx, index, relu ? ct_relu_grad(ct_load_f32(xp, target), sum) : sum);
    }
}

/*
 * The general max pool's backward by bands of input rows, where a band's
 * windows and their input rows fit in shared memory: a block stages the
 * rows its windows read (consecutive threads on consecutive words), finds
 * each window's argmax once beside its dy (read in order), then gives
 * each input element of its band the sum of dy over the windows whose
 * argmax it is, in the same order as maxpool_backward_kernel (the same
 * bits).  That kernel finds the argmax of every window holding an
 * element, for every element: ResNet's 3x3 stride-2 pool read 9 floats
 * for each of up to 4 windows an element, at half of each sector (129.5
 * us predicted against a floor of 11.3 for 64 x 64 x 32 x 32, 46 % load
 * efficiency; now 34.5 us, 100 %; emulated counts, docs/perf.md).  The
 * windows' reads of the staged rows at stride 2 are 2-way bank conflicts.
 */
enum {
    POOL_BAND_FLOATS = 4096, /* a band's staged input rows */
    POOL_BAND_WINDOWS = 2048, /* and its windows' argmaxes and dy */
};

/* The windows' output rows [*first, *last] holding input rows [h0, h1),
 * and the input rows [*x0, *x1) they read. */
static inline __host__ __device__ void pool_band_of(const ct_pool2d_shape &s, int h0, int h1,
                                                    int *first, int *last, int *x0, int *x1)
{
    int unused;
    ct_windows_holding(h0, s.kernel_h, s.stride_h, s.pad_h, s.out_h, first, &unused);
    ct_windows_holding(h1 - 1, s.kernel_h, s.stride_h, s.pad_h, s.out_h, &unused, last);
    int top = *first * s.stride_h - s.pad_h, bottom = *last * s.stride_h - s.pad_h + s.kernel_h;
    *x0 = top > 0 ? top : 0;
    *x1 = bottom < s.in_h ? bottom : s.in_h;
}

/* Rows [x0, x1) of a plane as f32, by the block: consecutive threads on
 * consecutive words.  A barrier must follow. */
template <class T>
__device__ inline void pool_stage_rows(float *rows, const T *plane, int x0, int x1, int in_w)
{
    for (int i = threadIdx.x; i < (x1 - x0) * in_w; i += blockDim.x)
        rows[i] = ct_load_f32(plane, x0 * in_w + i);
}

/* The general max pool's forward by bands of `band` output rows (block =
 * plane * bands + band): the rows their windows read staged first, as in
 * the backward's bands.  One thread per output read its window's rows at
 * the stride (2: half of each sector; 44.5 % load efficiency on ResNet's
 * 3x3 stride-2 pool, emulated counts).  16 KiB of static shared memory. */
template <class T>
static __global__ void maxpool_forward_band_kernel(ct_pool2d_shape s, int band, int bands,
                                                   const T *x, T *y)
{
    __shared__ float rows[POOL_BAND_FLOATS];
    int64_t p = blockIdx.x / bands, out_plane = (int64_t)s.out_h * s.out_w;
    int o0 = (int)(blockIdx.x % bands) * band, o1 = min(o0 + band, s.out_h);
    int x0 = max(o0 * s.stride_h - s.pad_h, 0);
    int x1 = min((o1 - 1) * s.stride_h - s.pad_h + s.kernel_h, s.in_h);
    pool_stage_rows(rows, x + p * s.in_h * s.in_w, x0, x1, s.in_w);
    __syncthreads();
    for (int i = threadIdx.x; i < (o1 - o0) * s.out_w; i += blockDim.x) {
        int oh = o0 + i / s.out_w, ow = i % s.out_w;
        ct_pool_window win = ct_pool_window_at(&s, oh, ow);
        float m = -INFINITY;
        if (!ct_pool_window_empty(win)) {
            win.h0 -= x0; /* the staged rows start at x0 */
            win.h1 -= x0;
            pool_window_argmax(rows, s.in_w, win, &m);
        }
        ct_store_f32(y, p * out_plane + (int64_t)oh * s.out_w + ow, m);
    }
}

/* The most output rows a forward band may take within POOL_BAND_FLOATS of
 * input rows, or 0 (the general kernel): also for an even stride past 2,
 * whose window reads from the staged rows are 4-way bank conflicts or
 * worse (a 4x4 stride-4 pool: 4.1 -> 4.9 us predicted, emulated counts). */
static int pool_forward_band_rows(const ct_pool2d_shape *s)
{
    if (s->stride_w > 2 && s->stride_w % 2 == 0)
        return 0;
    int best = 0;
    for (int band = 1; band <= s->out_h; band *= 2) {
        if (((int64_t)(band - 1) * s->stride_h + s->kernel_h) * s->in_w > POOL_BAND_FLOATS)
            break;
        best = band;
    }
    return best;
}

/* block = plane * bands + band of `band` input rows; 32 KiB of static
 * shared memory, 75 % occupancy at 256 threads (kernel-resources): the
 * band's rows are read once, so more blocks an SM only hide its loads */
template <class T>
static __global__ void maxpool_backward_band_kernel(ct_pool2d_shape s, int band, int bands,
                                                    const T *x, const T *dy, T *dx, bool relu)
{
    __shared__ float rows[POOL_BAND_FLOATS];
    __shared__ int argmax[POOL_BAND_WINDOWS];
    __shared__ float grads[POOL_BAND_WINDOWS]; /* the windows' dy */
    int64_t p = blockIdx.x / bands, in_plane = (int64_t)s.in_h * s.in_w;
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    int h0 = (int)(blockIdx.x % bands) * band, h1 = min(h0 + band, s.in_h);
    int first, last, x0, x1;
    pool_band_of(s, h0, h1, &first, &last, &x0, &x1);
    pool_stage_rows(rows, x + p * in_plane, x0, x1, s.in_w);
    __syncthreads();
    int windows = last >= first ? (last - first + 1) * s.out_w : 0;
    for (int e = threadIdx.x; e < windows; e += blockDim.x) {
        int oh = first + e / s.out_w, ow = e % s.out_w;
        ct_pool_window win = ct_pool_window_at(&s, oh, ow);
        win.h0 -= x0; /* the staged rows start at x0 */
        win.h1 -= x0;
        float unused_max;
        argmax[e] = pool_window_argmax(rows, s.in_w, win, &unused_max) + x0 * s.in_w;
        grads[e] = ct_load_f32(dy, p * out_plane + (int64_t)first * s.out_w + e);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < (h1 - h0) * s.in_w; i += blockDim.x) {
        int h = h0 + i / s.in_w, w = i % s.in_w, target = h * s.in_w + w;
        float sum = pool_argmax_sum(
            s, h, w,
            [&](int oh, int ow) { return argmax[(oh - first) * s.out_w + ow] == target; },
            [&](int oh, int ow) { return grads[(oh - first) * s.out_w + ow]; });
        int64_t at = p * in_plane + target;
        ct_store_f32(dx, at, relu ? ct_relu_grad(ct_load_f32(x, at), sum) : sum);
    }
}

/* The most input rows a band may take within the shared arrays (the
 * bound over every band of that many rows), or 0 where one row's do not
 * fit (the general kernel then). */
static int pool_band_rows(const ct_pool2d_shape *s)
{
    int best = 0;
    for (int band = 1; band <= s->in_h; band *= 2) {
        /* the windows holding `band` rows, and the rows those read */
        int64_t windows = (band + s->kernel_h - 2) / s->stride_h + 2;
        int64_t rows = (windows - 1) * s->stride_h + s->kernel_h;
        if (windows * s->out_w > POOL_BAND_WINDOWS || rows * s->in_w > POOL_BAND_FLOATS)
            break;
        best = band;
    }
    return best;
}

/* The 2x2 stride-2 window's backward where every input lies in exactly one
 * window (even height and width): one thread per window reads its four x
 * as two 64-bit loads and its dy once, and writes its four dx as two 64-bit
 * stores: 0, but 0 + dy at the window's argmax (the general kernel's sum,
 * so -0.0 becomes +0.0 there too). */
template <class T>
__global__ void maxpool2x2_backward_kernel(ct_pool2d_shape s, const T *x, const T *dy, T *dx,
                                           bool relu)
{
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * out_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.out_h, s.out_w);
        int64_t p = at.plane;
        int oh = at.row, ow = at.col;
        int64_t top = (p * s.in_h + 2 * oh) * s.in_w + 2 * ow;
        float window[4], grad[4];
        load_pair(x + top, window);
        load_pair(x + top + s.in_w, window + 2);
        float m;
        int best = ct_argmax4(window, &m);
        float g = 0.0f + ct_load_f32(dy, index);
        if (relu) /* only the argmax may be nonzero, and x there is m */
            g = ct_relu_grad(m, g);
        /* selects, not grad[best] = g: a dynamic index put grad on the
         * stack (16 bytes of local memory, scripts/kernel-resources.sh) */
#pragma unroll
        for (int i = 0; i < 4; i++)
            grad[i] = i == best ? g : 0.0f;
        store_pair(dx + top, grad);
        store_pair(dx + top + s.in_w, grad + 2);
    }
}

/* y[p,oh,ow] = sum_window x / divisor, summed in double; 0 for an empty window */
template <class T> __global__ void avgpool_forward_kernel(ct_pool2d_shape s, const T *x, T *y)
{
    int64_t out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * out_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.out_h, s.out_w);
        int64_t p = at.plane;
        int oh = at.row, ow = at.col;
        const T *xp = x + p * s.in_h * s.in_w;
        ct_pool_window win = ct_pool_window_at(&s, oh, ow);
        double sum = 0.0;
        for (int h = win.h0; h < win.h1; h++)
            for (int w = win.w0; w < win.w1; w++)
                sum += ct_load_f32(xp, h * s.in_w + w);
        ct_store_f32(y, index,
                     ct_pool_window_empty(win)
                         ? 0.0f
                         : (float)(sum / ct_pool_avg_divisor(&s, oh, ow, win)));
    }
}

/* dx[p,h,w] = sum over the windows holding (h,w) of dy[p,oh,ow] / divisor(oh,ow) */
template <class T> __global__ void avgpool_backward_kernel(ct_pool2d_shape s, const T *dy, T *dx)
{
    int64_t in_plane = (int64_t)s.in_h * s.in_w, out_plane = (int64_t)s.out_h * s.out_w;
    int64_t count = (int64_t)s.n_batch * s.channels * in_plane;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        plane_position at = position_of(index, s.in_h, s.in_w);
        int64_t p = at.plane;
        int h = at.row, w = at.col;
        int oh_lo, oh_hi, ow_lo, ow_hi;
        ct_windows_holding(h, s.kernel_h, s.stride_h, s.pad_h, s.out_h, &oh_lo, &oh_hi);
        ct_windows_holding(w, s.kernel_w, s.stride_w, s.pad_w, s.out_w, &ow_lo, &ow_hi);
        float sum = 0.0f;
        for (int oh = oh_lo; oh <= oh_hi; oh++)
            for (int ow = ow_lo; ow <= ow_hi; ow++) {
                ct_pool_window win = ct_pool_window_at(&s, oh, ow);
                float divisor = (float)ct_pool_avg_divisor(&s, oh, ow, win);
                sum += ct_load_f32(dy, p * out_plane + (int64_t)oh * s.out_w + ow) / divisor;
            }
        ct_store_f32(dx, index, sum);
    }
}

/* y[p] = sum_i x[p,i] / inner: one warp per plane, summed in double */
template <class T>
__global__ void global_avgpool_forward_kernel(int64_t planes, int inner, const T *x, T *y)
{
    int lane = threadIdx.x % CT_CUDA_WARP;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / CT_CUDA_WARP;
    int64_t n_warps = (int64_t)gridDim.x * blockDim.x / CT_CUDA_WARP;
    for (int64_t p = warp; p < planes; p += n_warps) {
        double sum = 0.0;
        for (int i = lane; i < inner; i += CT_CUDA_WARP)
            sum += ct_load_f32(x, p * inner + i);
        sum = ct_warp_sum(sum);
        if (lane == 0)
            ct_store_f32(y, p, (float)(sum / inner));
    }
}

/* dx[p,i] = dy[p] / inner, through ct_relu_grad(mask[p,i], .) where a
 * relu_bwd is fused (graph/fuse.c: mask is the relu's output, the pool's
 * input) */
template <class T>
__global__ void global_avgpool_backward_kernel(int64_t count, int inner, const T *dy,
                                               const T *mask, T *dx)
{
    CT_CUDA_GRID_STRIDE(index, count)
    {
        float v = ct_load_f32(dy, index / inner) / (float)inner;
        ct_store_f32(dx, index, mask ? ct_relu_grad(ct_load_f32(mask, index), v) : v);
    }
}

static int64_t pool_out_count(const ct_pool2d_shape *s)
{
    return (int64_t)s->n_batch * s->channels * s->out_h * s->out_w;
}

static int64_t pool_in_count(const ct_pool2d_shape *s)
{
    return (int64_t)s->n_batch * s->channels * s->in_h * s->in_w;
}

/* kernel<T>, T the storage type of dtype (elementwise.cuh), over `count`
 * items (a grid-stride launch), with the arguments that follow: they may
 * name T, to cast the data pointers. */
#define POOL_LAUNCH(dtype, kernel, count, stream, ...)                                    \
    ct_with_storage(dtype, [&](auto tag) -> ct_status {                                   \
        using T = decltype(tag);                                                          \
        CT_CUDA_LAUNCH_ITEMS(kernel<T>, count, stream, __VA_ARGS__);                      \
        return CT_OK;                                                                     \
    })

/* The bands of `band` rows that cover `rows` (0 for a band of 0). */
static int pool_bands(int band, int rows)
{
    return band ? (rows + band - 1) / band : 0;
}

/* A band kernel's blocks, `bands` a plane, or 0 where the general kernel
 * runs instead (no band fits, nothing to do, or more than a grid holds). */
static int64_t pool_band_blocks(const ct_pool2d_shape *s, int bands)
{
    int64_t blocks = (int64_t)s->n_batch * s->channels * bands;
    return blocks <= INT32_MAX ? blocks : 0;
}

extern "C" ct_status ct_cuda_maxpool2d_forward(ct_dtype dtype, const ct_pool2d_shape *s,
                                               const void *x, void *y, cudaStream_t stream)
{
    int band = pool_forward_band_rows(s), bands = pool_bands(band, s->out_h);
    int64_t blocks = pool_band_blocks(s, bands);
    if (blocks == 0)
        return POOL_LAUNCH(dtype, maxpool_forward_kernel, pool_out_count(s), stream, *s,
                           (const T *)x, (T *)y);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(maxpool_forward_band_kernel<T>, (unsigned)blocks, CT_CUDA_BLOCK, 0, stream,
                       *s, band, bands, (const T *)x, (T *)y);
        return CT_OK;
    });
}

extern "C" bool ct_cuda_maxpool2x2_fits(const ct_pool2d_shape *s)
{
    return s->kernel_h == 2 && s->kernel_w == 2 && s->stride_h == 2 && s->stride_w == 2 &&
           s->pad_h == 0 && s->pad_w == 0 && s->in_w % 2 == 0 && s->out_h == s->in_h / 2 &&
           s->out_w == s->in_w / 2;
}

/* An x not aligned to two elements (a view's odd offset) takes the general
 * kernel. */
extern "C" ct_status ct_cuda_maxpool2x2_forward(ct_dtype dtype, const ct_pool2d_shape *s,
                                                const void *x, void *y, cudaStream_t stream)
{
    if ((uintptr_t)x % (2 * ct_dtype_size(dtype)) != 0)
        return ct_cuda_maxpool2d_forward(dtype, s, x, y, stream);
    return POOL_LAUNCH(dtype, maxpool2x2_forward_kernel, pool_out_count(s), stream, *s,
                       (const T *)x, (T *)y);
}

extern "C" bool ct_cuda_maxpool2x2_backward_fits(const ct_pool2d_shape *s)
{
    return ct_cuda_maxpool2x2_fits(s) && s->in_h % 2 == 0;
}

extern "C" ct_status ct_cuda_maxpool2x2_backward(ct_dtype dtype, const ct_pool2d_shape *s,
                                                 const void *x, const void *dy, void *dx,
                                                 bool relu, cudaStream_t stream)
{
    if (((uintptr_t)x | (uintptr_t)dx) % (2 * ct_dtype_size(dtype)) != 0)
        return ct_cuda_maxpool2d_backward(dtype, s, x, dy, dx, relu, stream);
    return POOL_LAUNCH(dtype, maxpool2x2_backward_kernel, pool_out_count(s), stream, *s,
                       (const T *)x, (const T *)dy, (T *)dx, relu);
}

extern "C" ct_status ct_cuda_maxpool2d_backward(ct_dtype dtype, const ct_pool2d_shape *s,
                                                const void *x, const void *dy, void *dx,
                                                bool relu, cudaStream_t stream)
{
    int band = pool_band_rows(s), bands = pool_bands(band, s->in_h);
    int64_t blocks = pool_band_blocks(s, bands);
    if (blocks == 0)
        return POOL_LAUNCH(dtype, maxpool_backward_kernel, pool_in_count(s), stream, *s,
                           (const T *)x, (const T *)dy, (T *)dx, relu);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        CT_CUDA_LAUNCH(maxpool_backward_band_kernel<T>, (unsigned)blocks, CT_CUDA_BLOCK, 0, stream,
                       *s, band, bands, (const T *)x, (const T *)dy, (T *)dx, relu);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_avgpool2d_forward(ct_dtype dtype, const ct_pool2d_shape *s,
                                               const void *x, void *y, cudaStream_t stream)
{
    return POOL_LAUNCH(dtype, avgpool_forward_kernel, pool_out_count(s), stream, *s,
                       (const T *)x, (T *)y);
}

extern "C" ct_status ct_cuda_avgpool2d_backward(ct_dtype dtype, const ct_pool2d_shape *s,
                                                const void *dy, void *dx, cudaStream_t stream)
{
    return POOL_LAUNCH(dtype, avgpool_backward_kernel, pool_in_count(s), stream, *s,
                       (const T *)dy, (T *)dx);
}

extern "C" ct_status ct_cuda_global_avgpool_forward(ct_dtype dtype, int n, int c, int inner,
                                                    const void *x, void *y,
                                                    cudaStream_t stream)
{
    int64_t planes = (int64_t)n * c;
    return POOL_LAUNCH(dtype, global_avgpool_forward_kernel, planes * CT_CUDA_WARP, stream,
                       planes, inner, (const T *)x, (T *)y);
}

extern "C" ct_status ct_cuda_global_avgpool_backward(ct_dtype dtype, int n, int c, int inner,
                                                     const void *dy, const void *mask,
                                                     void *dx, cudaStream_t stream)
{
    int64_t count = (int64_t)n * c * inner;
    return POOL_LAUNCH(dtype, global_avgpool_backward_kernel, count, stream, count, inner,
                       (const T *)dy, (const T *)mask, (T *)dx);
}
