/*
 * SGEMM and the linear layer on the GPU, native kernels (the tiled kernel
 * of gemm.cuh).  Row-major, PyTorch layout for linear:
 *   x: [n, in]   w: [out, in]   bias: [out]   y: [n, out]
 * The bias is added as each output is stored.  Outputs are written with =.
 */
#include "core/math_shared.h"
#include "cuda/gemm.cuh"

/* c[m,n] = alpha * op(a) op(b) + beta * c (+ col_bias[n] when given).
 * With row_sums (else NULL), b has one more column, all ones, past its
 * b_cols, and that column of the product, alpha * sum_k op(a)[m, k], goes
 * to row_sums[m] (a linear layer's bias gradient beside its weight's). */
struct gemm_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<matrix>";
    static constexpr bool sums_parts = true; /* k split where the tiles are few */
    static constexpr bool loads_together = true; /* small products wait on their loads */
    int m, n, k, splits, k_chunk;
    int b_cols; /* n, or n - 1 with row_sums */
    float *row_sums;
    /* with relu_mask (else NULL), each result is stored as the backward of
     * the relu whose output is relu_mask (same layout as c): 0 where it is
     * <= 0 (a fused relu_bwd, graph/fuse.c) */
    const float *relu_mask;
    bool trans_a, trans_b;
    const float *a, *b, *col_bias;
    float *c;
    int lda, ldb, ldc;
    float alpha, beta;
    bool relu; /* store max(result, 0) (a fused relu; NaN stays NaN) */

    __device__ bool a_along_k() const { return !trans_a; }
    __device__ bool b_along_k() const { return trans_b; }
    __device__ float load_a(int, int row, int depth) const
    {
        return trans_a ? a[(size_t)depth * lda + row] : a[(size_t)row * lda + depth];
    }
    __device__ float load_b(int, int depth, int col) const
    {
        if (col >= b_cols)
            return 1.0f;
        return trans_b ? b[(size_t)col * ldb + depth] : b[(size_t)depth * ldb + col];
    }
    __device__ void store(int, int, int row, int col, float value) const
    {
        if (col >= b_cols) {
            row_sums[row] = alpha * value;
            return;
        }
        float *out = c + (size_t)row * ldc + col;
        float result = alpha * value;
        if (beta != 0.0f)
            result += beta * *out;
        if (col_bias)
            result += col_bias[col];
        if (relu_mask)
            result = ct_relu_grad(relu_mask[(size_t)row * ldc + col], result);
        *out = relu && result < 0.0f ? 0.0f : result;
    }
};

/* The tile and split of an m x n matrix product over k (ct_gemm_layout_for;
 * `split` false: unsplit), and the floats of its parts. */
static size_t gemm_layout(int m, int n, int k, bool split, ct_gemm_layout *out)
{
    bool wide = m >= GEMM_WIDE_MIN && n >= GEMM_WIDE_MIN;
    return ct_gemm_layout_for(m, n, k, 1, wide ? (int)ct_gemm_wide::m : 0, GEMM_SPLIT_MIN_DEPTH,
                              split ? GEMM_SPLIT_MAX : 1, out);
}

/* The workspace a linear layer's product of m x n outputs over k takes for
 * its split parts (n counts a bias gradient's column of ones). */
extern "C" size_t ct_cuda_linear_workspace(int m, int n, int k)
{
    ct_gemm_layout layout;
    return sizeof(float) * gemm_layout(m, n, k, true, &layout);
}

/* The problem c = alpha op(a) op(b) + beta c ...; with `parts` (a
 * workspace of ct_cuda_linear_workspace's size; else NULL) k is split over
 * blocks where the tiles are fewer than the SMs; *rows: its tile. */
static gemm_problem gemm_problem_of(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                    const float *a, int lda, const float *b, int ldb, float beta,
                                    float *c, int ldc, const float *col_bias, bool relu,
                                    float *row_sums, const float *relu_mask, float *parts,
                                    int *rows)
{
    gemm_problem p;
    p.relu_mask = relu_mask;
    p.m = m;
    p.b_cols = n;
    p.n = n + (row_sums ? 1 : 0);
    p.row_sums = row_sums;
    p.k = k;
    ct_gemm_layout layout;
    if (gemm_layout(m, p.n, k, parts != NULL, &layout))
        p.parts = parts;
    p.splits = layout.splits;
    p.k_chunk = layout.k_chunk;
    p.trans_a = trans_a;
    p.trans_b = trans_b;
    p.a = a;
    p.b = b;
    p.col_bias = col_bias;
    p.c = c;
    p.lda = lda;
    p.ldb = ldb;
    p.ldc = ldc;
    p.alpha = alpha;
    p.beta = beta;
    p.relu = relu;
    *rows = layout.rows;
    return p;
}

static ct_status gemm_run(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc, const float *col_bias, bool relu, float *row_sums,
                          const float *relu_mask, float *parts, cudaStream_t stream)
{
    int rows = 0;
    gemm_problem p = gemm_problem_of(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                     ldc, col_bias, relu, row_sums, relu_mask, parts, &rows);
    return ct_cuda_launch_gemm(p, 1, rows, stream);
}

extern "C" ct_status ct_cuda_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, const float *b, int ldb, float beta,
                                  float *c, int ldc, cudaStream_t stream)
{
    return gemm_run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, NULL,
                    false, NULL, NULL, NULL, stream);
}

/* y[n,o] = relu?(bias[o] + sum_i x[n,i] w[o,i]):  y = x . w^T */
extern "C" ct_status ct_cuda_linear_forward(int n, int in, int out, const float *x,
                                            const float *w, const float *bias, bool relu,
                                            float *y, void *workspace, cudaStream_t stream)
{
    return gemm_run(false, true, n, out, in, 1.0f, x, in, w, in, 0.0f, y, out, bias, relu, NULL,
                    NULL, (float *)workspace, stream);
}

/* dx[n,i] = sum_o dy[n,o] w[o,i]:  dx = dy . w (then the relu's backward
 * where relu_mask is given) */
extern "C" ct_status ct_cuda_linear_backward_data(int n, int in, int out, const float *dy,
                                                  const float *w, const float *relu_mask,
                                                  float *dx, void *workspace,
                                                  cudaStream_t stream)
{
    return gemm_run(false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in, NULL, false,
                    NULL, relu_mask, (float *)workspace, stream);
}

/* dw[o,i] = sum_n dy[n,o] x[n,i]:  dw = dy^T . x; db[o] = sum_n dy[n,o] as
 * the column of ones after x's */
extern "C" ct_status ct_cuda_linear_backward_weight(int n, int in, int out, const float *x,
                                                    const float *dy, float *dw, float *db,
                                                    void *workspace, cudaStream_t stream)
{
    return gemm_run(true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in, NULL, false,
                    db, NULL, (float *)workspace, stream);
}

/* Backward data and weight of one linear layer (the same dy) as one
 * launch where both products' tiles pair (gemm.cuh), else one after the
 * other; each product's split parts in its own workspace. */
extern "C" ct_status ct_cuda_linear_backward_pair(int n, int in, int out, const float *dy,
                                                  const float *w, const float *relu_mask,
                                                  float *dx, void *data_workspace,
                                                  const float *x, float *dw, float *db,
                                                  void *weight_workspace, cudaStream_t stream)
{
    int data_rows = 0, weight_rows = 0;
    gemm_problem data = gemm_problem_of(false, false, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx,
                                        in, NULL, false, NULL, relu_mask,
                                        (float *)data_workspace, &data_rows);
    gemm_problem weight = gemm_problem_of(true, false, out, in, n, 1.0f, dy, out, x, in, 0.0f,
                                          dw, in, NULL, false, db, NULL,
                                          (float *)weight_workspace, &weight_rows);
    return ct_cuda_launch_gemm_pair("gemm<linear_backward>", data, 1, data_rows, weight, 1,
                                    weight_rows, stream);
}
