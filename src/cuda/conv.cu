/*
 * 2-D convolution on the GPU, native kernels: implicit GEMM on the tiled
 * kernel of gemm.cuh, one GEMM per group (blockIdx.z), nothing materialized.
 * With Cg = C/groups, Og = O/groups, P = out_h*out_w, KK = KH*KW:
 *   forward:         y_g[o, (n,p)]        = sum_{(c,i,j)} w[o,(c,i,j)] col[(c,i,j),(n,p)]
 *   backward data:   dx_g[c, (n,ih,iw)]   = sum_{(o,i,j)} w[o,c,i,j] dy[n,o,oh,ow]
 *                    where oh*sh - ph + i*dh = ih and ow*sw - pw + j*dw = iw
 *   backward weight: dw_g[o, (c,i,j)]     = sum_{(n,p)} dy[n,o,p] col[(c,i,j),(n,p)]
 * col[(c,i,j),(n,oh,ow)] = x[n, g*Cg+c, oh*sh-ph+i*dh, ow*sw-pw+j*dw] (0 outside).
 * The weight gradient's reduction (N*P long) is split over blocks when its
 * output is small; the parts land in the workspace and one more kernel adds
 * them in split order, so the result is deterministic.
 * A forward pass with few input channels per group (the first layer) also
 * has a direct kernel, one thread per output, as its GEMM would be too
 * shallow; the CUDA op table (table.c) prefers it where it fits.
 *
 * Accumulation: all outputs (y, dx, dw, db) are written with =.
 */
#include "core/window_math.h"
#include "cuda/gemm.cuh"

enum {
    CONV_DIRECT_MAX_CHANNELS = 4, /* Cg at or below this: the direct forward kernel */
    CONV_SPLIT_MIN_DEPTH = 512,   /* shortest k chunk worth its own block */
    CONV_SPLIT_MAX = 64,
};

/* x[n, g*Cg + c, ih, iw] for column (c,i,j) of row (n,oh,ow) of col, or 0. */
__device__ inline float conv_col(const ct_conv2d_shape &s, const float *x, int g, int cij,
                                 int n, int oh, int ow)
{
    int kk = s.kernel_h * s.kernel_w, cg = s.in_channels / s.groups;
    int c = cij / kk, i = cij % kk / s.kernel_w, j = cij % s.kernel_w;
    int ih = ct_window_input(oh, i, s.stride_h, s.pad_h, s.dilation_h);
    int iw = ct_window_input(ow, j, s.stride_w, s.pad_w, s.dilation_w);
    if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w)
        return 0.0f;
    return x[(((size_t)n * s.in_channels + g * cg + c) * s.in_h + ih) * s.in_w + iw];
}

struct conv_forward_problem {
    static constexpr const char *kernel_name = "gemm<conv_forward>";
    int m, n, k, splits, k_chunk; /* m = Og, n = N*P, k = Cg*KK */
    ct_conv2d_shape s;
    const float *x, *w, *bias;
    float *y;

    /* w[o, cij] runs along k; col[cij, np] along n (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return false; }

    __device__ float load_a(int g, int o, int cij) const
    {
        return w[((size_t)g * m + o) * k + cij];
    }
    __device__ float load_b(int g, int cij, int np) const
    {
        int p = s.out_h * s.out_w, pix = np % p;
        return conv_col(s, x, g, cij, np / p, pix / s.out_w, pix % s.out_w);
    }
    __device__ void store(int g, int, int o, int np, float value) const
    {
        int p = s.out_h * s.out_w, oc = g * m + o;
        float b = bias ? bias[oc] : 0.0f;
        y[((size_t)(np / p) * s.out_channels + oc) * p + np % p] = value + b;
    }
};

struct conv_backward_data_problem {
    static constexpr const char *kernel_name = "gemm<conv_backward_data>";
    int m, n, k, splits, k_chunk; /* m = Cg, n = N*H*W, k = Og*KK */
    ct_conv2d_shape s;
    const float *dy, *w;
    float *dx;

    /* w[o, c, ij] as a(c, oij): runs of KK along k, stride KK along m (so
     * along m for 1x1 kernels); dy along n (input pixels). */
    __device__ bool a_along_k() const { return s.kernel_h * s.kernel_w > 1; }
    __device__ bool b_along_k() const { return false; }

    __device__ float load_a(int g, int c, int oij) const
    {
        int kk = s.kernel_h * s.kernel_w, og = s.out_channels / s.groups;
        int o = oij / kk, ij = oij % kk;
        return w[(((size_t)g * og + o) * m + c) * kk + ij];
    }
    __device__ float load_b(int g, int oij, int nhw) const
    {
        int kk = s.kernel_h * s.kernel_w, og = s.out_channels / s.groups;
        int o = oij / kk, i = oij % kk / s.kernel_w, j = oij % s.kernel_w;
        int plane = s.in_h * s.in_w, pix = nhw % plane, n = nhw / plane;
        int oh = ct_window_output(pix / s.in_w, i, s.stride_h, s.pad_h, s.dilation_h, s.out_h);
        int ow = ct_window_output(pix % s.in_w, j, s.stride_w, s.pad_w, s.dilation_w, s.out_w);
        if (oh < 0 || ow < 0)
            return 0.0f;
        return dy[(((size_t)n * s.out_channels + g * og + o) * s.out_h + oh) * s.out_w + ow];
    }
    __device__ void store(int g, int, int c, int nhw, float value) const
    {
        int plane = s.in_h * s.in_w;
        dx[((size_t)(nhw / plane) * s.in_channels + g * m + c) * plane + nhw % plane] = value;
    }
};

struct conv_backward_weight_problem {
    static constexpr const char *kernel_name = "gemm<conv_backward_weight>";
    int m, n, k, splits, k_chunk; /* m = Og, n = Cg*KK, k = N*P */
    ct_conv2d_shape s;
    const float *x, *dy;
    float *dw, *parts; /* parts: [splits, O, Cg*KK] when splits > 1 */

    /* dy[n, o, p] and col[cij, np] both run along k (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return true; }

    __device__ float load_a(int g, int o, int np) const
    {
        int p = s.out_h * s.out_w;
        return dy[((size_t)(np / p) * s.out_channels + g * m + o) * p + np % p];
    }
    __device__ float load_b(int g, int np, int cij) const
    {
        int p = s.out_h * s.out_w, pix = np % p;
        return conv_col(s, x, g, cij, np / p, pix / s.out_w, pix % s.out_w);
    }
    __device__ void store(int g, int split, int o, int cij, float value) const
    {
        size_t index = ((size_t)g * m + o) * n + cij;
        if (splits == 1)
            dw[index] = value;
        else
            parts[(size_t)split * s.out_channels * n + index] = value;
    }
};

/* dw[i] = sum_{split in order} parts[split, i] */
__global__ void conv_sum_parts(int64_t count, int splits, const float *parts, float *dw)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float sum = 0.0f;
        for (int split = 0; split < splits; split++)
            sum += parts[split * count + i];
        dw[i] = sum;
    }
}

/* The weight gradient's split of its reduction: enough blocks to fill the
 * device twice over, chunks no shorter than CONV_SPLIT_MIN_DEPTH. */
static void conv_weight_split(const ct_conv2d_shape *s, int *splits, int *k_chunk)
{
    int og = s->out_channels / s->groups;
    int cols = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    int64_t depth = (int64_t)s->n_batch * s->out_h * s->out_w;
    int64_t tiles = (int64_t)((og + GEMM_TILE_M - 1) / GEMM_TILE_M) *
                    ((cols + GEMM_TILE_N - 1) / GEMM_TILE_N) * s->groups;
    int64_t wanted = (2 * (int64_t)ct_cuda_sm_count() + tiles - 1) / tiles;
    int64_t most = depth / CONV_SPLIT_MIN_DEPTH;
    int64_t count = wanted < most ? wanted : most;
    if (count > CONV_SPLIT_MAX)
        count = CONV_SPLIT_MAX;
    if (count < 1)
        count = 1;
    int64_t chunk = (depth + count - 1) / count;
    chunk = (chunk + GEMM_TILE_K - 1) / GEMM_TILE_K * GEMM_TILE_K;
    *k_chunk = count == 1 ? (int)depth : (int)chunk;
    *splits = count == 1 ? 1 : (int)((depth + chunk - 1) / chunk);
}

extern "C" size_t ct_cuda_conv2d_workspace(const ct_conv2d_shape *s)
{
    int splits, k_chunk;
    conv_weight_split(s, &splits, &k_chunk);
    size_t weights = (size_t)s->out_channels * (s->in_channels / s->groups) * s->kernel_h *
                     s->kernel_w;
    return splits > 1 ? sizeof(float) * splits * weights : 0;
}

/* y[n,o,oh,ow] = bias[o] + sum_{c,i,j} x[n, g*Cg+c, ...] w[o,c,i,j], one thread per output */
__global__ void conv_forward_direct(ct_conv2d_shape s, const float *x, const float *w,
                                    const float *bias, float *y)
{
    int cg = s.in_channels / s.groups, og = s.out_channels / s.groups;
    int64_t count = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
    CT_CUDA_GRID_STRIDE(index, count)
    {
        int ow = (int)(index % s.out_w), oh = (int)(index / s.out_w % s.out_h);
        int o = (int)(index / ((int64_t)s.out_w * s.out_h) % s.out_channels);
        int n = (int)(index / ((int64_t)s.out_w * s.out_h * s.out_channels));
        int g = o / og;
        const float *wo = w + (size_t)o * cg * s.kernel_h * s.kernel_w;
        float sum = 0.0f;
        for (int c = 0; c < cg; c++) {
            const float *plane = x + ((size_t)n * s.in_channels + g * cg + c) * s.in_h * s.in_w;
            for (int i = 0; i < s.kernel_h; i++) {
                int ih = ct_window_input(oh, i, s.stride_h, s.pad_h, s.dilation_h);
                if (ih < 0 || ih >= s.in_h)
                    continue;
                for (int j = 0; j < s.kernel_w; j++) {
                    int iw = ct_window_input(ow, j, s.stride_w, s.pad_w, s.dilation_w);
                    if (iw >= 0 && iw < s.in_w)
                        sum = fmaf(plane[(size_t)ih * s.in_w + iw],
                                   wo[(c * s.kernel_h + i) * s.kernel_w + j], sum);
                }
            }
        }
        y[index] = sum + (bias ? bias[o] : 0.0f);
    }
}

extern "C" bool ct_cuda_conv2d_direct_fits(const ct_conv2d_shape *s)
{
    return s->in_channels / s->groups <= CONV_DIRECT_MAX_CHANNELS;
}

extern "C" ct_status ct_cuda_conv2d_forward_direct(const ct_conv2d_shape *s, const float *x,
                                                   const float *w, const float *bias, float *y,
                                                   cudaStream_t stream)
{
    int64_t count = (int64_t)s->n_batch * s->out_channels * s->out_h * s->out_w;
    CT_CUDA_LAUNCH_ITEMS(conv_forward_direct, count, stream, *s, x, w, bias, y);
    return CT_OK;
}

extern "C" ct_status ct_cuda_conv2d_forward(const ct_conv2d_shape *s, const float *x,
                                            const float *w, const float *bias, float *y,
                                            void *workspace, cudaStream_t stream)
{
    (void)workspace;
    conv_forward_problem p;
    p.m = s->out_channels / s->groups;
    p.n = s->n_batch * s->out_h * s->out_w;
    p.k = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.splits = 1;
    p.k_chunk = p.k;
    p.s = *s;
    p.x = x;
    p.w = w;
    p.bias = bias;
    p.y = y;
    return ct_cuda_launch_gemm(p, s->groups, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy,
                                                  const float *w, float *dx, void *workspace,
                                                  cudaStream_t stream)
{
    (void)workspace;
    conv_backward_data_problem p;
    p.m = s->in_channels / s->groups;
    p.n = s->n_batch * s->in_h * s->in_w;
    p.k = s->out_channels / s->groups * s->kernel_h * s->kernel_w;
    p.splits = 1;
    p.k_chunk = p.k;
    p.s = *s;
    p.dy = dy;
    p.w = w;
    p.dx = dx;
    return ct_cuda_launch_gemm(p, s->groups, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x,
                                                    const float *dy, float *dw,
                                                    void *workspace, cudaStream_t stream)
{
    conv_backward_weight_problem p;
    p.m = s->out_channels / s->groups;
    p.n = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.k = s->n_batch * s->out_h * s->out_w;
    conv_weight_split(s, &p.splits, &p.k_chunk);
    p.s = *s;
    p.x = x;
    p.dy = dy;
    p.dw = dw;
    p.parts = (float *)workspace;
    CT_TRY(ct_cuda_launch_gemm(p, s->groups, stream));
    if (p.splits == 1)
        return CT_OK;
    int64_t count = (int64_t)s->out_channels * p.n;
    CT_CUDA_LAUNCH_ITEMS(conv_sum_parts, count, stream, count, p.splits, p.parts, dw);
    return CT_OK;
}
