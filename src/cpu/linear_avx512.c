/*
 * Small linear layers on AVX-512 (SimpleCNN's 256->120->84->10 at batch 64):
 * no packing, no BLAS call; every output is one thread's, summed in a fixed
 * order, so the bits do not depend on the thread count.
 *
 *   forward:         y[n,o] = relu?(sum_i x[n,i] w[o,i] + bias[o])
 *                    rows of x and w are contiguous in i: a register block of
 *                    4 rows x 4 outputs keeps 16 vectors of 16 partial sums
 *                    (8 loads per 16 FMAs), reduced in a fixed tree at the end
 *                    (for a whole block, the 16 trees as one: fc1 29.5 -> 22.5
 *                    us, fc2 14.3 -> 9.3 on two threads)
 *   backward data:   dx[n, i:i+64] = sum_o dy[n,o] * w[o, i:i+64]
 *   backward weight: dw[o, i:i+64] = sum_n dy[n,o] * x[n, i:i+64]
 *                    both an outer-product block: 4 rows x 64 columns in 16
 *                    vectors, 4 loads and 4 broadcasts per 16 FMAs, the sum
 *                    in order of o (or n)
 *
 * OpenBLAS took 40-45 % of the FMA peak on these shapes (it packs both
 * operands and runs fc2/fc3 on one thread); docs/perf.md has the numbers.
 * linear.c calls these where ct_cpu_linear_small_fits says so.
 */
#include "cpu/linear_small.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>

#include "cpu/threads.h"

#define AVX512 __attribute__((target("avx2,fma,avx512f")))
#define AVX512_INLINE __attribute__((target("avx2,fma,avx512f"), always_inline)) static inline

enum {
    LANES = 16,          /* floats per 512-bit register */
    BLOCK = 4,           /* rows (and forward outputs) in a register block */
    VECS = 4,            /* vectors of columns in an outer-product block */
    WIDTH = LANES * VECS /* columns in an outer-product block */
};

/* Beyond SMALL_MAX multiply-adds OpenBLAS's cache blocking wins; below
 * PARALLEL_MIN a parallel region costs more than it saves, and such layers
 * run on the calling thread, but still here: SimpleCNN's fc3 (84->10 at
 * B64, 54 K multiply-adds) took 20 us for its three passes on OpenBLAS's
 * one-threaded kernels on the 2-core AVX-512 machine of 2026-11-28 (6.5 us
 * in its best run), 8.7 us here; at batch 1 the whole SimpleCNN inference
 * went 26 -> 13 us (an earlier machine had measured OpenBLAS at 4.3 us
 * for fc3 against 7.0 for the parallel region these kernels then always
 * opened). */
static const double SMALL_MAX_MACS = 16.0 * 1024 * 1024;
static const double PARALLEL_MIN_MACS = 64.0 * 1024;

bool ct_cpu_linear_small_fits(int n, int in, int out)
{
    double macs = (double)n * in * out;
    return ct_cpu_simd_avx512() && macs > 0 && macs <= SMALL_MAX_MACS;
}

AVX512_INLINE __mmask16 tail_mask(int left)
{
    return left >= LANES ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* ---- forward: dot products of rows -------------------------------------------- */

/* a + b of the 128-bit quarters of a and b that `even` and `odd` pick. */
#define QUARTER_SUM(a, b, even, odd) \
    _mm512_add_ps(_mm512_shuffle_f32x4(a, b, even), _mm512_shuffle_f32x4(a, b, odd))
/* ... and of the lanes of each quarter that `even` and `odd` pick. */
#define LANE_SUM(a, b, even, odd) \
    _mm512_add_ps(_mm512_shuffle_ps(a, b, even), _mm512_shuffle_ps(a, b, odd))

/* y[n0+r, o0+c] = relu?(the 16 lanes of acc[r][c] summed + bias[o0+c]) for
 * a whole 4 x 4 block: the 16 sums in one tree of 15 vector adds and 30
 * shuffles instead of 16 reductions of one vector each (about 4 shuffles
 * and 4 adds each, and a scalar bias, relu and store).  Each sum is added
 * in _mm512_reduce_add_ps's order, so the bits are those of the
 * one-at-a-time path: lanes i + i+8, then i + i+4, then (0 + 2) + (1 + 3). */
AVX512_INLINE void store_block(__m512 acc[BLOCK][BLOCK], int out, const float *bias, bool relu,
                               int n0, int o0, float *y)
{
    /* h[m] = [output 2m's halves added | output 2m+1's], output q = 4r + c */
    __m512 h[8], quarter[4], pair[2];
    #pragma GCC unroll 8
    for (int m = 0; m < 8; m++) {
        __m512 a = acc[m / 2][m % 2 * 2], b = acc[m / 2][m % 2 * 2 + 1];
        h[m] = QUARTER_SUM(a, b, _MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* quarter[k]: 128-bit part p holds output 4k + p's four partial sums */
    #pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        quarter[k] = QUARTER_SUM(h[2 * k], h[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0),
                                 _MM_SHUFFLE(3, 1, 3, 1));
    /* pair[t], part p: lanes (0+2, 1+3) of outputs p + 8t and p + 8t + 4 */
    #pragma GCC unroll 2
    for (int t = 0; t < 2; t++)
        pair[t] = LANE_SUM(quarter[2 * t], quarter[2 * t + 1], _MM_SHUFFLE(1, 0, 1, 0),
                           _MM_SHUFFLE(3, 2, 3, 2));
    /* part p: outputs p, p + 4, p + 8, p + 12: column p of rows 0..3 */
    __m512 sums = LANE_SUM(pair[0], pair[1], _MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1));
    /* lane 4r + c: row r, column c */
    const __m512i rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    sums = _mm512_permutexvar_ps(rows, sums);
    if (bias)
        sums = _mm512_add_ps(sums, _mm512_broadcast_f32x4(_mm_loadu_ps(bias + o0)));
    if (relu) /* v < 0 ? 0 : v, NaN kept */
        sums = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(sums, _mm512_setzero_ps(), _CMP_LT_OQ),
                                   sums);
    _mm_storeu_ps(y + (size_t)n0 * out + o0, _mm512_extractf32x4_ps(sums, 0));
    _mm_storeu_ps(y + (size_t)(n0 + 1) * out + o0, _mm512_extractf32x4_ps(sums, 1));
    _mm_storeu_ps(y + (size_t)(n0 + 2) * out + o0, _mm512_extractf32x4_ps(sums, 2));
    _mm_storeu_ps(y + (size_t)(n0 + 3) * out + o0, _mm512_extractf32x4_ps(sums, 3));
}

/* y[n0+r, o0+c] for r < R, c < C. */
AVX512_INLINE void dot_block(int in, int out, const float *x, const float *w, const float *bias,
                             bool relu, int n0, int o0, float *y, const int R, const int C)
{
    __m512 acc[BLOCK][BLOCK];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[r][c] = _mm512_setzero_ps();
    /* whole vectors of k without a mask (a mask each step is a kmovw on
     * port 5, beside the FMAs), then the tail's */
    int whole = in / LANES * LANES;
    for (int k = 0; k < in; k += LANES) {
        __mmask16 m = k < whole ? (__mmask16)0xffff : tail_mask(in - k);
        __m512 xv[BLOCK];
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const float *at = x + (size_t)(n0 + r) * in + k;
            xv[r] = k < whole ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(m, at);
        }
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            const float *at = w + (size_t)(o0 + c) * in + k;
            __m512 wv = k < whole ? _mm512_loadu_ps(at) : _mm512_maskz_loadu_ps(m, at);
            #pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                acc[r][c] = _mm512_fmadd_ps(xv[r], wv, acc[r][c]);
        }
    }
    if (R == BLOCK && C == BLOCK) {
        store_block(acc, out, bias, relu, n0, o0, y);
        return;
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int c = 0; c < C; c++) {
            /* the sum rounded to float, then the bias: as GEMM then add */
            float v = _mm512_reduce_add_ps(acc[r][c]);
            v = v + (bias ? bias[o0 + c] : 0.0f);
            y[(size_t)(n0 + r) * out + o0 + c] = relu && v < 0.0f ? 0.0f : v;
        }
}

typedef void (*dot_fn)(int in, int out, const float *x, const float *w, const float *bias,
                       bool relu, int n0, int o0, float *y);

#define DOT(R, C)                                                                              \
    static AVX512 void dot_##R##_##C(int in, int out, const float *x, const float *w,          \
                                     const float *bias, bool relu, int n0, int o0, float *y)   \
    {                                                                                          \
        dot_block(in, out, x, w, bias, relu, n0, o0, y, R, C);                                 \
    }
#define DOTS(R) DOT(R, 1) DOT(R, 2) DOT(R, 3) DOT(R, 4)
DOTS(1)
DOTS(2)
DOTS(3)
DOTS(4)

static const dot_fn dots[BLOCK][BLOCK] = {
    {dot_1_1, dot_1_2, dot_1_3, dot_1_4},
    {dot_2_1, dot_2_2, dot_2_3, dot_2_4},
    {dot_3_1, dot_3_2, dot_3_3, dot_3_4},
    {dot_4_1, dot_4_2, dot_4_3, dot_4_4},
};

typedef struct dot_job {
    int n, in, out;
    const float *x, *w, *bias;
    bool relu;
    float *y;
} dot_job;

/* One thread's tiles of ct_cpu_linear_small_forward. */
static void dot_part(void *arg)
{
    const dot_job *j = arg;
    int row_blocks = (j->n + BLOCK - 1) / BLOCK, col_blocks = (j->out + BLOCK - 1) / BLOCK;
    int64_t first, last;
    ct_cpu_split((int64_t)row_blocks * col_blocks, &first, &last);
    for (int tile = (int)first; tile < last; tile++) {
        int n0 = tile / col_blocks * BLOCK, o0 = tile % col_blocks * BLOCK;
        int rows = j->n - n0 < BLOCK ? j->n - n0 : BLOCK;
        int cols = j->out - o0 < BLOCK ? j->out - o0 : BLOCK;
        dots[rows - 1][cols - 1](j->in, j->out, j->x, j->w, j->bias, j->relu, n0, o0, j->y);
    }
}

void ct_cpu_linear_small_forward(int n, int in, int out, const float *x, const float *w,
                                 const float *bias, bool relu, float *y)
{
    dot_job job = {n, in, out, x, w, bias, relu, y};
    bool parallel = (double)n * in * out >= PARALLEL_MIN_MACS;
    ct_cpu_parallel(parallel ? ct_cpu_max_threads() : 1, dot_part, &job);
}

/* ---- backward: outer products ----------------------------------------------------- */

/* c[(i0+r)*ldc + j0 + j] = sum_p a[(i0+r)*a_row + p*a_col] * b[p*ldb + j0 + j]
 * for r < R, j < min(WIDTH, cols - j0), p = 0..depth-1 in order; with
 * `relu_y` (laid out as c), each sum is stored as ct_relu_grad(relu_y, sum):
 * 0 where relu_y <= 0, a NaN relu_y keeps the sum. */
AVX512_INLINE void outer_block(int depth, int cols, const float *a, size_t a_row, size_t a_col,
                               const float *b, size_t ldb, int i0, int j0, const float *relu_y,
                               float *c, size_t ldc, const int R, const bool FULL)
{
    __mmask16 m[VECS];
    #pragma GCC unroll 4
    for (int v = 0; v < VECS; v++)
        m[v] = cols - j0 - v * LANES > 0 ? tail_mask(cols - j0 - v * LANES) : 0;
    __m512 acc[BLOCK][VECS];
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < VECS; v++)
            acc[r][v] = _mm512_setzero_ps();
    const float *a_block = a + (size_t)i0 * a_row;
    for (int p = 0; p < depth; p++) {
        __m512 bv[VECS];
        #pragma GCC unroll 4
        for (int v = 0; v < VECS; v++)
            bv[v] = FULL ? _mm512_loadu_ps(b + (size_t)p * ldb + j0 + v * LANES)
                         : _mm512_maskz_loadu_ps(m[v], b + (size_t)p * ldb + j0 + v * LANES);
        #pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512 av = _mm512_set1_ps(a_block[r * a_row + (size_t)p * a_col]);
            #pragma GCC unroll 4
            for (int v = 0; v < VECS; v++)
                acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 4
        for (int v = 0; v < VECS; v++) {
            size_t at = (size_t)(i0 + r) * ldc + j0 + v * LANES;
            if (relu_y) /* the relu's backward: keep where !(y <= 0) */
                acc[r][v] = _mm512_maskz_mov_ps(
                    _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m[v], relu_y + at),
                                       _mm512_setzero_ps(), _CMP_NLE_UQ),
                    acc[r][v]);
            _mm512_mask_storeu_ps(c + at, m[v], acc[r][v]);
        }
}

typedef void (*outer_fn)(int depth, int cols, const float *a, size_t a_row, size_t a_col,
                         const float *b, size_t ldb, int i0, int j0, const float *relu_y,
                         float *c, size_t ldc);

#define OUTER(R, FULL)                                                                         \
    static AVX512 void outer_##R##_##FULL(int depth, int cols, const float *a, size_t a_row,   \
                                          size_t a_col, const float *b, size_t ldb, int i0,    \
                                          int j0, const float *relu_y, float *c, size_t ldc)   \
    {                                                                                          \
        outer_block(depth, cols, a, a_row, a_col, b, ldb, i0, j0, relu_y, c, ldc, R, FULL);    \
    }
#define OUTERS(R) OUTER(R, 0) OUTER(R, 1)
OUTERS(1)
OUTERS(2)
OUTERS(3)
OUTERS(4)

/* [rows - 1][whole block of WIDTH columns]: the whole blocks' loads take no
 * mask (with masks, gcc reloaded the four mask registers every step of p:
 * kmovw runs on port 5, beside the FMAs) */
static const outer_fn outers[BLOCK][2] = {
    {outer_1_0, outer_1_1}, {outer_2_0, outer_2_1}, {outer_3_0, outer_3_1}, {outer_4_0, outer_4_1}};

typedef struct outer_job {
    int rows, cols, depth;
    const float *a;
    size_t a_row, a_col;
    const float *b, *relu_y;
    float *c;
} outer_job;

/* One thread's tiles of outer_product (below). */
static void outer_part(void *arg)
{
    const outer_job *j = arg;
    int row_blocks = (j->rows + BLOCK - 1) / BLOCK, col_blocks = (j->cols + WIDTH - 1) / WIDTH;
    int64_t first, last;
    ct_cpu_split((int64_t)row_blocks * col_blocks, &first, &last);
    for (int tile = (int)first; tile < last; tile++) {
        int i0 = tile / col_blocks * BLOCK, j0 = tile % col_blocks * WIDTH;
        int r = j->rows - i0 < BLOCK ? j->rows - i0 : BLOCK;
        outers[r - 1][j->cols - j0 >= WIDTH](j->depth, j->cols, j->a, j->a_row, j->a_col, j->b,
                                             (size_t)j->cols, i0, j0, j->relu_y, j->c,
                                             (size_t)j->cols);
    }
}

/* c [rows x cols] = A . b, A(i, p) = a[i*a_row + p*a_col], b [depth x cols];
 * masked by relu_y (outer_block) where it is not NULL. */
static void outer_product(int rows, int cols, int depth, const float *a, size_t a_row,
                          size_t a_col, const float *b, const float *relu_y, float *c)
{
    outer_job job = {rows, cols, depth, a, a_row, a_col, b, relu_y, c};
    bool parallel = (double)rows * cols * depth >= PARALLEL_MIN_MACS;
    ct_cpu_parallel(parallel ? ct_cpu_max_threads() : 1, outer_part, &job);
}

void ct_cpu_linear_small_backward_data(int n, int in, int out, const float *dy, const float *w,
                                       const float *relu_y, float *dx)
{
    /* dx [n x in] = dy [n x out] . w [out x in] */
    outer_product(n, in, out, dy, (size_t)out, 1, w, relu_y, dx);
}

void ct_cpu_linear_small_backward_weight(int n, int in, int out, const float *x,
                                         const float *dy, float *dw)
{
    /* dw [out x in] = dy^T [out x n] . x [n x in] */
    outer_product(out, in, n, dy, 1, (size_t)out, x, NULL, dw);
}

#endif
