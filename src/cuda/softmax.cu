/*
 * Softmax and softmax cross-entropy on the GPU over the rows of [n, c], the
 * math of src/cpu/softmax.c: each row subtracts its maximum, sums in double,
 * and the per-element and per-row formulas are core/math_shared.h's.
 * One warp per row (cross-entropy stages narrow rows in shared memory
 * first, and rows of at most a warp's width of classes get a thread each);
 * the cross-entropy mean runs in one block whose threads take rows in turn
 * and whose sum is a fixed tree, so it is deterministic.
 * Outputs are written with =.
 *
 * The cross-entropy's logits and their gradient are of storage type T
 * (float, or the bits of a bf16 or f16: elementwise.cuh): logits widened
 * as they are loaded (or staged), the work the f32 kernel's, each
 * gradient rounded once as it is stored; the loss is f32.  Softmax is f32
 * only: autocast gives it an f32 input (ops/loss.c), so its output and
 * gradients are f32 in every graph.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cuda/divmod.cuh"
#include "cuda/elementwise.cuh"

__device__ inline int64_t ce_label(const void *labels, bool labels_i64, int row)
{
    return labels_i64 ? ((const int64_t *)labels)[row] : ((const int32_t *)labels)[row];
}

/* x: a row of storage type S (float: a staged row too) */
template <class S> __device__ inline float row_max(int c, const S *x, int lane)
{
    float m = -INFINITY;
    for (int j = lane; j < c; j += CT_CUDA_WARP) {
        float v = ct_load_f32(x, j);
        m = v > m ? v : m;
    }
    return ct_warp_max(m);
}

/* log sum_j exp(x_j) of one row, in double, in every lane of the warp */
template <class S> __device__ inline double row_logsumexp(int c, const S *x, int lane)
{
    double m = row_max(c, x, lane), sum = 0.0;
    for (int j = lane; j < c; j += CT_CUDA_WARP)
        sum += ct_lse_term(ct_load_f32(x, j), m);
    sum = __shfl_sync(0xffffffffu, ct_warp_sum(sum), 0);
    return ct_logsumexp(m, sum);
}

#define CT_CUDA_WARP_ROWS(row, n)                                                    \
    int lane = threadIdx.x % CT_CUDA_WARP;                                           \
    int warps_per_grid = gridDim.x * blockDim.x / CT_CUDA_WARP;                      \
    for (int row = (blockIdx.x * blockDim.x + threadIdx.x) / CT_CUDA_WARP; row < (n); \
         row += warps_per_grid)

/* y[i,j] = exp(x[i,j] - max_i) / sum_k exp(x[i,k] - max_i) */
__global__ void softmax_forward_kernel(int n, int c, const float *x, float *y)
{
    CT_CUDA_WARP_ROWS(row, n)
    {
        const float *xr = x + (int64_t)row * c;
        float *yr = y + (int64_t)row * c;
        float m = row_max(c, xr, lane);
        double sum = 0.0;
        for (int j = lane; j < c; j += CT_CUDA_WARP) {
            yr[j] = ct_softmax_exp(xr[j], m);
            sum += yr[j];
        }
        sum = __shfl_sync(0xffffffffu, ct_warp_sum(sum), 0);
        for (int j = lane; j < c; j += CT_CUDA_WARP)
            yr[j] = ct_softmax_normalize(yr[j], sum);
    }
}

/* dx[i,j] = y[i,j] * (dy[i,j] - sum_k dy[i,k] y[i,k]) */
__global__ void softmax_backward_kernel(int n, int c, const float *y, const float *dy,
                                        float *dx)
{
    CT_CUDA_WARP_ROWS(row, n)
    {
        const float *yr = y + (int64_t)row * c, *dyr = dy + (int64_t)row * c;
        float *dxr = dx + (int64_t)row * c;
        double dot = 0.0;
        for (int j = lane; j < c; j += CT_CUDA_WARP)
            dot += (double)dyr[j] * yr[j];
        dot = __shfl_sync(0xffffffffu, ct_warp_sum(dot), 0);
        for (int j = lane; j < c; j += CT_CUDA_WARP)
            dxr[j] = ct_softmax_grad(yr[j], dyr[j], dot);
    }
}

/* log sum_j exp(x_j) of a staged row by one thread: the maximum, then the
 * terms in order (the warp's version sums lane-strided partial sums). */
__device__ inline double row_logsumexp_serial(int c, const float *x)
{
    float m = -INFINITY;
    for (int j = 0; j < c; j++)
        m = x[j] > m ? x[j] : m;
    double sum = 0.0;
    for (int j = 0; j < c; j++)
        sum += ct_lse_term(x[j], m);
    return ct_logsumexp(m, sum);
}

/* Cross-entropy stages its rows: a block copies a group of `rows` rows of
 * logits (and their labels) into shared memory with one coalesced pass,
 * then each warp takes its rows from there.  A warp reading a row of a
 * few classes straight from global memory used a few lanes of each
 * request and read the row three times (maximum, log-sum-exp, log
 * softmax): 52% load efficiency for 10 classes; the gradient's rows were
 * stored the same way (62%).  Rows of more than CE_STAGE_FLOATS / CE_WARPS
 * classes are long enough to be read coalesced in place, and go on doing
 * so.  16 KiB of logits and 4 KiB of labels per block of 256 threads: 8
 * blocks still fit an SM.  Scalar copies: at the sizes this runs (a few
 * KiB per step) the instruction count does not matter, and every row
 * offset works. */
enum {
    CE_THREADS = 256,
    CE_WARPS = CE_THREADS / CT_CUDA_WARP,
    CE_STAGE_FLOATS = 4096, /* logits staged per group */
    CE_MAX_ROWS = 512,      /* labels staged per group */
};

/* Rows of at most a warp's width of classes are each one thread's (a warp
 * per row left most lanes idle and walked its rows one after another:
 * SimpleCNN's 64 rows of 10 took a warp 8 rows of shuffle trees in
 * series, the longest chain of the loss kernels, docs/perf.md); staged
 * with an odd pitch, so that 32 threads reading their rows' j-th values
 * hit 32 banks. */
static bool ce_thread_rows(int c)
{
    return c > 0 && c <= CT_CUDA_WARP;
}

/* Floats between staged rows. */
static int ce_pitch(int c)
{
    return ce_thread_rows(c) ? c | 1 : c;
}

/* Rows per staged group for c classes: a multiple of CE_WARPS, so that
 * warp w takes rows w, w + CE_WARPS, ... of the batch in every group; 0
 * where c is too wide to stage. */
static int ce_group_rows(int c)
{
    int rows = c > 0 ? CE_STAGE_FLOATS / ce_pitch(c) : (int)CE_MAX_ROWS;
    rows = rows < CE_MAX_ROWS ? rows : (int)CE_MAX_ROWS;
    return rows / CE_WARPS * CE_WARPS;
}

/* Rows [first, first + count) of logits into stage (as f32, rows `pitch`
 * floats apart; by_pitch divides by it) and their labels into
 * stage_labels, by the whole block; the caller synchronizes after.  The
 * threads run over the staged words (a row's padding word skipped), so
 * that a warp's 32 writes hit 32 banks; their reads are consecutive floats
 * but for a row's end. */
template <class T>
__device__ inline void ce_stage_rows(int first, int count, int c, const T *logits,
                                     const void *labels, bool labels_i64, float *stage,
                                     int64_t *stage_labels, const ct_divmod &by_pitch, int pitch)
{
    const T *src = logits + (int64_t)first * c;
    for (int p = threadIdx.x; p < count * pitch; p += blockDim.x) {
        int r = ct_div(by_pitch, p), j = p - r * pitch;
        /* the padding word takes a copy of the row's last value: every lane
         * loads, none branches */
        stage[p] = ct_load_f32(src, (int64_t)r * c + min(j, c - 1));
    }
    for (int r = threadIdx.x; r < count; r += blockDim.x)
        stage_labels[r] = ce_label(labels, labels_i64, first + r);
}

/* The staged rows' values (a gradient now) out to rows [first, first +
 * count) of dst, by the whole block after a barrier: consecutive threads
 * on consecutive values, so that a warp stores whole sectors.  Reading
 * them past the rows' padding words costs a 2-way bank conflict or two a
 * request (32 values span 35 words at 10 classes); walking the staged
 * words instead, as ce_stage_rows does, had no conflicts but stored 29 or
 * 30 values a warp off the sectors' boundaries: 68% store efficiency on
 * SimpleCNN against 90%. */
template <class T>
__device__ inline void ce_store_rows(int first, int count, int c, const float *stage,
                                     const ct_divmod &by_c, int pitch, T *dst)
{
    T *rows = dst + (int64_t)first * c;
    for (int i = threadIdx.x; i < count * c; i += blockDim.x) {
        int r = ct_div(by_c, i);
        ct_store_f32(rows, i, stage[r * pitch + (i - r * c)]);
    }
}

/* Row xr's term of the loss, in lane 0 (0 in the others), for a label in
 * [0, c): -(1-s) log p[label] - (s/c) sum_j log p[j]; xr staged or in
 * place, lse its log-sum-exp (row_logsumexp). */
template <class S>
__device__ inline double ce_row_loss(int c, const S *xr, int64_t label, float smoothing,
                                     double lse, int lane)
{
    double sum_log_p = 0.0;
    for (int j = lane; j < c; j += CT_CUDA_WARP)
        sum_log_p += ct_log_softmax(ct_load_f32(xr, j), lse);
    sum_log_p = ct_warp_sum(sum_log_p);
    if (lane != 0)
        return 0.0;
    return ct_cross_entropy_row(ct_log_softmax(ct_load_f32(xr, label), lse), sum_log_p,
                                smoothing, c);
}

/* Row xr's term of the loss by one thread, xr staged, lse its
 * log-sum-exp (row_logsumexp_serial). */
__device__ inline double ce_row_loss_serial(int c, const float *xr, int64_t label,
                                            float smoothing, double lse)
{
    double sum_log_p = 0.0;
    for (int j = 0; j < c; j++)
        sum_log_p += ct_log_softmax(xr[j], lse);
    return ct_cross_entropy_row(ct_log_softmax(xr[label], lse), sum_log_p, smoothing, c);
}

/* Past this many logits the loss's gradient is not fused into the forward
 * kernel: its one block would take longer over them than the backward
 * kernel's many (SimpleCNN's, VGG's and ResNet's 10 classes at batch 256
 * are 2,560; ImageNet's 1,000 at batch 64 are 65,536, 256 exps a thread). */
enum { CE_FUSE_MAX_LOGITS = 65536 };

/* loss[0] = mean_i [-(1-s) log p[i,label_i] - (s/c) sum_j log p[i,j]]; one block
 * of CE_THREADS, in groups of `rows` rows (0: unstaged, one group of n),
 * staged `pitch` floats apart, a thread per row where thread_rows.
 * A bad label: loss NaN and *bad_row lowered to its row.  A loss that is not
 * finite sets *found_inf (training: the step's updates then do nothing).
 * dlogits (NULL: none): the backward's result too, for a dloss of seed *
 * *seed_scale (NULL: 1), from each row's one log-sum-exp: the bits of the
 * fill and backward kernels.  A staged group's gradient replaces its
 * logits in shared memory and leaves in one coalesced pass (by_c: c). */
template <class T>
static __global__ void cross_entropy_forward_kernel(int n, int c, int rows, ct_divmod by_pitch,
                                                    ct_divmod by_c, int pitch, bool thread_rows,
                                                    const T *logits, const void *labels,
                                                    bool labels_i64, float smoothing,
                                                    float *loss, int *bad_row,
                                                    int32_t *found_inf, T *dlogits, float seed,
                                                    const float *seed_scale)
{
    __shared__ float stage[CE_STAGE_FLOATS];
    __shared__ int64_t stage_labels[CE_MAX_ROWS];
    int lane = threadIdx.x % CT_CUDA_WARP, warp = threadIdx.x / CT_CUDA_WARP;
    int n_warps = blockDim.x / CT_CUDA_WARP;
    int group = rows > 0 ? rows : (n > 0 ? n : 1);
    ct_ce_grad grad = ct_ce_grad_of(dlogits && seed_scale ? seed * *seed_scale : seed, n,
                                    smoothing, c);
    double total = 0.0, bad = 0.0;
    for (int first = 0; first < n; first += group) {
        int count = n - first < group ? n - first : group;
        if (rows > 0) {
            __syncthreads(); /* the previous group's readers are done */
            ce_stage_rows(first, count, c, logits, labels, labels_i64, stage, stage_labels,
                          by_pitch, pitch);
            __syncthreads();
        }
        for (int r = threadIdx.x; thread_rows && r < count; r += blockDim.x) {
            int64_t label = stage_labels[r];
            bool good = label >= 0 && label < c;
            if (!good) {
                bad = 1.0;
                if (bad_row)
                    atomicMin(bad_row, first + r);
                if (!dlogits)
                    continue;
            }
            float *xr = stage + r * pitch; /* logits in, their gradient out */
            double lse = row_logsumexp_serial(c, xr);
            if (good)
                total += ce_row_loss_serial(c, xr, label, smoothing, lse);
            for (int j = 0; dlogits && j < c; j++)
                xr[j] = ct_ce_dlogit(&grad, xr[j], lse, j == label);
        }
        for (int r = warp; !thread_rows && r < count; r += n_warps) {
            int row = first + r;
            int64_t label = rows > 0 ? stage_labels[r] : ce_label(labels, labels_i64, row);
            bool good = label >= 0 && label < c;
            if (!good && lane == 0) {
                bad = 1.0;
                if (bad_row)
                    atomicMin(bad_row, row);
            }
            if (!good && !dlogits)
                continue;
            if (rows > 0) {
                float *xr = stage + (int64_t)r * pitch; /* logits in, their gradient out */
                double lse = row_logsumexp(c, xr, lane);
                if (good)
                    total += ce_row_loss(c, xr, label, smoothing, lse, lane);
                __syncwarp(); /* lane 0 has read xr[label] */
                for (int j = lane; dlogits && j < c; j += CT_CUDA_WARP)
                    xr[j] = ct_ce_dlogit(&grad, xr[j], lse, j == label);
            } else {
                const T *xr = logits + (int64_t)row * c;
                double lse = row_logsumexp(c, xr, lane);
                if (good)
                    total += ce_row_loss(c, xr, label, smoothing, lse, lane);
                for (int j = lane; dlogits && j < c; j += CT_CUDA_WARP)
                    ct_store_f32(dlogits + (int64_t)row * c, j,
                                 ct_ce_dlogit(&grad, ct_load_f32(xr, j), lse, j == label));
            }
        }
        if (dlogits && rows > 0) {
            __syncthreads(); /* the group's gradient is staged */
            ce_store_rows(first, count, c, stage, by_c, pitch, dlogits);
        }
    }
    total = ct_block_sum(total);
    bad = ct_block_sum(bad);
    if (threadIdx.x == 0) {
        float value = bad > 0.0 ? NAN : (float)(total / n);
        loss[0] = value;
        if (found_inf && !isfinite(value))
            *found_inf = 1;
    }
}

/* dlogits[i,j] = dloss[0]/n * (softmax(logits[i,:])_j - ((1-s)[j == label_i] + s/c));
 * block b takes groups of `rows` rows b, b + gridDim.x, ..., staged `pitch`
 * floats apart: each warp (each thread, where thread_rows) overwrites its
 * rows' logits with their gradient, and the block stores the group in one
 * coalesced pass. */
template <class T>
static __global__ void cross_entropy_backward_staged_kernel(int n, int c, int rows,
                                                            ct_divmod by_pitch, ct_divmod by_c,
                                                            int pitch,
                                                            bool thread_rows, const T *logits,
                                                            const void *labels, bool labels_i64,
                                                            float smoothing, const float *dloss,
                                                            T *dlogits)
{
    __shared__ float stage[CE_STAGE_FLOATS];
    __shared__ int64_t stage_labels[CE_MAX_ROWS];
    __shared__ float dloss_value;
    int lane = threadIdx.x % CT_CUDA_WARP, warp = threadIdx.x / CT_CUDA_WARP;
    int n_warps = blockDim.x / CT_CUDA_WARP;
    if (threadIdx.x == 0)
        dloss_value = dloss[0]; /* one load, not one per warp */
    for (int64_t first = (int64_t)blockIdx.x * rows; first < n;
         first += (int64_t)gridDim.x * rows) {
        int count = n - first < rows ? (int)(n - first) : rows;
        __syncthreads(); /* dloss_value written; the previous group stored */
        ce_stage_rows((int)first, count, c, logits, labels, labels_i64, stage, stage_labels,
                      by_pitch, pitch);
        __syncthreads();
        ct_ce_grad grad = ct_ce_grad_of(dloss_value, n, smoothing, c);
        for (int r = threadIdx.x; thread_rows && r < count; r += blockDim.x) {
            float *xr = stage + r * pitch; /* logits in, their gradient out */
            double lse = row_logsumexp_serial(c, xr);
            for (int j = 0; j < c; j++)
                xr[j] = ct_ce_dlogit(&grad, xr[j], lse, j == stage_labels[r]);
        }
        for (int r = warp; !thread_rows && r < count; r += n_warps) {
            float *xr = stage + r * pitch; /* logits in, their gradient out */
            double lse = row_logsumexp(c, xr, lane);
            for (int j = lane; j < c; j += CT_CUDA_WARP)
                xr[j] = ct_ce_dlogit(&grad, xr[j], lse, j == stage_labels[r]);
        }
        __syncthreads();
        ce_store_rows((int)first, count, c, stage, by_c, pitch, dlogits);
    }
}

/* The same, one warp per row read in place: rows too wide to stage. */
template <class T>
__global__ void cross_entropy_backward_kernel(int n, int c, const T *logits, const void *labels,
                                              bool labels_i64, float smoothing,
                                              const float *dloss, T *dlogits)
{
    ct_ce_grad grad = ct_ce_grad_of(dloss[0], n, smoothing, c);
    CT_CUDA_WARP_ROWS(row, n)
    {
        const T *xr = logits + (int64_t)row * c;
        T *dr = dlogits + (int64_t)row * c;
        int64_t label = ce_label(labels, labels_i64, row);
        double lse = row_logsumexp(c, xr, lane);
        for (int j = lane; j < c; j += CT_CUDA_WARP)
            ct_store_f32(dr, j, ct_ce_dlogit(&grad, ct_load_f32(xr, j), lse, j == label));
    }
}

extern "C" ct_status ct_cuda_softmax_forward(int n, int c, const float *x, float *y,
                                             cudaStream_t stream)
{
    CT_CUDA_LAUNCH_ITEMS(softmax_forward_kernel, (int64_t)n * CT_CUDA_WARP, stream, n, c, x, y);
    return CT_OK;
}

extern "C" ct_status ct_cuda_softmax_backward(int n, int c, const float *y, const float *dy,
                                              float *dx, cudaStream_t stream)
{
    CT_CUDA_LAUNCH_ITEMS(softmax_backward_kernel, (int64_t)n * CT_CUDA_WARP, stream, n, c, y, dy,
                         dx);
    return CT_OK;
}

extern "C" bool ct_cuda_cross_entropy_fuses(int n, int c)
{
    return (int64_t)n * c <= CE_FUSE_MAX_LOGITS;
}

extern "C" ct_status ct_cuda_cross_entropy_forward(ct_dtype dtype, int n, int c,
                                                   const void *logits, const void *labels,
                                                   bool labels_i64, float label_smoothing,
                                                   float *loss, int *bad_row,
                                                   int32_t *found_inf, const ct_cuda_ce_grad *grad,
                                                   cudaStream_t stream)
{
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        int rows = ce_group_rows(c);
        CT_CUDA_LAUNCH(cross_entropy_forward_kernel<T>, 1, CE_THREADS, 0, stream, n, c, rows,
                       ct_divmod_of(ce_pitch(c)), ct_divmod_of(c > 0 ? c : 1), ce_pitch(c),
                       rows > 0 && ce_thread_rows(c), (const T *)logits, labels, labels_i64,
                       label_smoothing, loss, bad_row, found_inf,
                       grad ? (T *)grad->dlogits : (T *)NULL, grad ? grad->seed : 0.0f,
                       grad ? grad->seed_scale : (const float *)NULL);
        return CT_OK;
    });
}

extern "C" ct_status ct_cuda_cross_entropy_backward(ct_dtype dtype, int n, int c,
                                                    const void *logits, const void *labels,
                                                    bool labels_i64, float label_smoothing,
                                                    const float *dloss, void *dlogits,
                                                    cudaStream_t stream)
{
    int rows = ce_group_rows(c);
    return ct_with_storage(dtype, [&](auto tag) -> ct_status {
        using T = decltype(tag);
        if (rows == 0) {
            CT_CUDA_LAUNCH_ITEMS(cross_entropy_backward_kernel<T>, (int64_t)n * CT_CUDA_WARP,
                                 stream, n, c, (const T *)logits, labels, labels_i64,
                                 label_smoothing, dloss, (T *)dlogits);
            return CT_OK;
        }
        int64_t groups = ((int64_t)n + rows - 1) / rows;
        unsigned blocks = ct_cuda_grid_for(
            (const void *)cross_entropy_backward_staged_kernel<T>, groups * CE_THREADS);
        CT_CUDA_LAUNCH(cross_entropy_backward_staged_kernel<T>, blocks, CE_THREADS, 0, stream, n,
                       c, rows, ct_divmod_of(ce_pitch(c)), ct_divmod_of(c), ce_pitch(c),
                       ce_thread_rows(c),
                       (const T *)logits, labels, labels_i64, label_smoothing, dloss,
                       (T *)dlogits);
        return CT_OK;
    });
}
