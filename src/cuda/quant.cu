/*
 * The INT8 GEMM and convolution on the GPU with __dp4a: the functions of
 * src/quant/int8.h (ct_int8_gemm, ct_int8_conv2d_forward), which state the
 * rule and are the reference these are tested against bit for bit
 * (tests/test_emu_quant.cu).
 *
 * __dp4a multiplies four signed bytes by four signed bytes (there is no
 * unsigned x signed form), so the uint8 activations enter as b - 128 in
 * [-128, 127], and the 128 comes back through the weights' row sums:
 *   sum_k w[m,k] (b[k,n] - b_zp) = sum_k w[m,k] (b[k,n] - 128) + (128 - b_zp) row_sums[m]
 * exact in int32 for depth <= CT_INT8_MAX_DEPTH.  The epilogue is int8.h's
 * (ct_int8_dequantize_sum, ct_int8_requantize: no fused multiply-add).
 *
 *   pack:  bw[k4, n] = the four bytes b[4 k4 + j, n] - 128, j = 0..3 (0 past depth)
 *   gemm:  64 x 64 outputs per block of 256 threads, 4 x 4 each; tiles of 8
 *          words of k of the weights and of bw staged in shared memory.
 * The weights: int8 [rows, ct_cuda_int8_row_bytes(depth)], zeros past depth.
 * Outputs are written with =.
 */
#include "core/window_math.h"
#include "cuda/common.cuh"

enum {
    TILE_M = 64, TILE_N = 64, TILE_WORDS = 8, /* a block's outputs, and words of k staged */
    THREADS_SIDE = 16,                        /* 16 x 16 threads, 4 x 4 outputs each */
    PER_THREAD = TILE_M / THREADS_SIDE,
    BYTE_BIAS = 128,                          /* uint8 -> signed: b - 128 */
};

struct int8_gemm_params {
    int rows, n, words;       /* words = row bytes / 4 */
    const int *w;             /* [rows, words] */
    const int *bw;            /* [words, n] */
    const float *scales, *bias;
    const int32_t *row_sums;
    int32_t row_sum_factor;   /* 128 - b_zp */
    float b_scale, out_inv_scale;
    int32_t out_zero_point;
    bool relu, out_u8;
    void *out;
    ptrdiff_t out_rs, out_cs;
};

/* bw[k4 * n + col]: uint8 b with any strides -> words of four signed bytes */
__global__ void int8_pack_kernel(int depth, int n, int words, const uint8_t *b, ptrdiff_t b_rs,
                                 ptrdiff_t b_cs, int *bw)
{
    int64_t count = (int64_t)words * n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < count;
         i += (int64_t)gridDim.x * blockDim.x) {
        int k4 = (int)(i / n), col = (int)(i % n);
        unsigned word = 0;
        for (int j = 0; j < 4; j++) {
            int k = 4 * k4 + j;
            int value = k < depth ? b[k * b_rs + col * b_cs] - BYTE_BIAS : 0;
            word |= (unsigned)(value & 0xff) << (8 * j);
        }
        bw[i] = (int)word;
    }
}

__global__ void int8_gemm_kernel(int8_gemm_params p)
{
    __shared__ int a_tile[TILE_WORDS][TILE_M];
    __shared__ int b_tile[TILE_WORDS][TILE_N];
    int tx = (int)threadIdx.x % THREADS_SIDE, ty = (int)threadIdx.x / THREADS_SIDE;
    int m0 = (int)blockIdx.y * TILE_M, n0 = (int)blockIdx.x * TILE_N;
    int acc[PER_THREAD][PER_THREAD] = {};
    for (int k0 = 0; k0 < p.words; k0 += TILE_WORDS) {
        /* consecutive threads read consecutive words of a weight row, and
         * consecutive columns of a row of bw */
        for (int i = threadIdx.x; i < TILE_WORDS * TILE_M; i += blockDim.x) {
            int word = i % TILE_WORDS, r = i / TILE_WORDS, m = m0 + r, k = k0 + word;
            a_tile[word][r] = m < p.rows && k < p.words ? p.w[(size_t)m * p.words + k] : 0;
        }
        for (int i = threadIdx.x; i < TILE_WORDS * TILE_N; i += blockDim.x) {
            int word = i / TILE_N, c = i % TILE_N, col = n0 + c, k = k0 + word;
            b_tile[word][c] = col < p.n && k < p.words ? p.bw[(size_t)k * p.n + col] : 0;
        }
        __syncthreads();
        for (int word = 0; word < TILE_WORDS; word++) {
            int a[PER_THREAD], b[PER_THREAD];
            for (int i = 0; i < PER_THREAD; i++) {
                a[i] = a_tile[word][ty + THREADS_SIDE * i];
                b[i] = b_tile[word][tx + THREADS_SIDE * i];
            }
            for (int i = 0; i < PER_THREAD; i++)
                for (int j = 0; j < PER_THREAD; j++)
                    acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < PER_THREAD; i++) {
        int m = m0 + ty + THREADS_SIDE * i;
        if (m >= p.rows)
            continue;
        float scale = ct_int8_mul(p.b_scale, p.scales[m]), bias = p.bias ? p.bias[m] : 0.0f;
        int32_t correction = p.row_sum_factor * p.row_sums[m];
        for (int j = 0; j < PER_THREAD; j++) {
            int col = n0 + tx + THREADS_SIDE * j;
            if (col >= p.n)
                continue;
            float v = ct_int8_dequantize_sum(acc[i][j] + correction, scale, bias, p.relu);
            ptrdiff_t at = m * p.out_rs + col * p.out_cs;
            if (p.out_u8)
                ((uint8_t *)p.out)[at] = ct_int8_requantize(v, p.out_inv_scale, p.out_zero_point);
            else
                ((float *)p.out)[at] = v;
        }
    }
}

extern "C" int ct_cuda_int8_row_bytes(int depth) { return (depth + 3) / 4 * 4; }

extern "C" size_t ct_cuda_int8_gemm_workspace(int depth, int n)
{
    return sizeof(int) * (size_t)(ct_cuda_int8_row_bytes(depth) / 4) * n;
}

extern "C" ct_status ct_cuda_int8_gemm(const ct_cuda_int8_weights *w, int n, ct_int8_matrix b,
                                       ct_quant_act b_q, const ct_int8_epilogue *e,
                                       ct_int8_matrix out, void *workspace, cudaStream_t stream)
{
    CT_ASSERT(w->depth > 0 && w->depth <= CT_INT8_MAX_DEPTH && n >= 0);
    if (n == 0 || w->rows == 0)
        return CT_OK;
    int words = ct_cuda_int8_row_bytes(w->depth) / 4;
    int *bw = (int *)workspace;
    CT_CUDA_LAUNCH(int8_pack_kernel, ct_cuda_grid_for((const void *)int8_pack_kernel,
                                                      (int64_t)words * n),
                   CT_CUDA_BLOCK, 0, stream, w->depth, n, words, (const uint8_t *)b.data,
                   b.row_stride, b.col_stride, bw);
    int8_gemm_params p;
    p.rows = w->rows;
    p.n = n;
    p.words = words;
    p.w = (const int *)w->q;
    p.bw = bw;
    p.scales = w->scales;
    p.bias = e->bias;
    p.row_sums = w->row_sums;
    p.row_sum_factor = BYTE_BIAS - b_q.zero_point;
    p.b_scale = b_q.scale;
    p.out_inv_scale = e->out_u8 ? 1.0f / e->out_q.scale : 0.0f;
    p.out_zero_point = e->out_q.zero_point;
    p.relu = e->relu;
    p.out_u8 = e->out_u8;
    p.out = out.data;
    p.out_rs = out.row_stride;
    p.out_cs = out.col_stride;
    dim3 grid((unsigned)((n + TILE_N - 1) / TILE_N), (unsigned)((w->rows + TILE_M - 1) / TILE_M));
    CT_CUDA_LAUNCH(int8_gemm_kernel, grid, THREADS_SIDE * THREADS_SIDE, 0, stream, p);
    return CT_OK;
}

/* col[k, p] for one image: x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], the
 * zero point in the padding (k = c*KH*KW + i*KW + j, p = oh*OW + ow) */
__global__ void int8_im2col_kernel(ct_conv2d_shape s, const uint8_t *x, uint8_t zero,
                                   uint8_t *col)
{
    int area = s.kernel_h * s.kernel_w, plane = s.out_h * s.out_w;
    int64_t count = (int64_t)s.in_channels * area * plane;
    for (int64_t at = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; at < count;
         at += (int64_t)gridDim.x * blockDim.x) {
        int k = (int)(at / plane), pixel = (int)(at % plane);
        int c = k / area, i = k % area / s.kernel_w, j = k % s.kernel_w;
        int ih = ct_window_input(pixel / s.out_w, i, s.stride_h, s.pad_h, s.dilation_h);
        int iw = ct_window_input(pixel % s.out_w, j, s.stride_w, s.pad_w, s.dilation_w);
        bool inside = ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w;
        col[at] = inside ? x[((size_t)c * s.in_h + ih) * s.in_w + iw] : zero;
    }
}

static size_t im2col_bytes(const ct_conv2d_shape *s)
{
    size_t bytes = (size_t)s->in_channels * s->kernel_h * s->kernel_w * s->out_h * s->out_w;
    return (bytes + 255) / 256 * 256;
}

extern "C" size_t ct_cuda_int8_conv2d_workspace(const ct_conv2d_shape *s)
{
    return im2col_bytes(s) + ct_cuda_int8_gemm_workspace(s->in_channels * s->kernel_h *
                                                             s->kernel_w,
                                                         s->out_h * s->out_w);
}

extern "C" ct_status ct_cuda_int8_conv2d_forward(const ct_conv2d_shape *s, const uint8_t *x,
                                                 ct_quant_act x_q, const ct_cuda_int8_weights *w,
                                                 const ct_int8_epilogue *e, void *y,
                                                 void *workspace, cudaStream_t stream)
{
    CT_ASSERT(s->groups == 1 && w->rows == s->out_channels &&
              w->depth == s->in_channels * s->kernel_h * s->kernel_w);
    int plane = s->out_h * s->out_w;
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t y_image = (size_t)s->out_channels * plane * (e->out_u8 ? 1 : sizeof(float));
    uint8_t *col = (uint8_t *)workspace;
    for (int n = 0; n < s->n_batch; n++) {
        CT_CUDA_LAUNCH(int8_im2col_kernel,
                       ct_cuda_grid_for((const void *)int8_im2col_kernel,
                                        (int64_t)w->depth * plane),
                       CT_CUDA_BLOCK, 0, stream, *s, x + n * x_image,
                       (uint8_t)x_q.zero_point, col);
        ct_int8_matrix b = {col, plane, 1}, out = {(char *)y + n * y_image, plane, 1};
        CT_TRY(ct_cuda_int8_gemm(w, plane, b, x_q, e, out, col + im2col_bytes(s), stream));
    }
    return CT_OK;
}
