/*
 * The linear layer of a bf16 or fp16 graph on tensor cores (gemm_tc.cuh):
 * 16-bit x, w, dy, y, dx and dw, the bias f32, every sum f32 and every
 * stored value rounded once.  Row-major, PyTorch layout, as gemm.cu:
 *   x: [n, in]   w: [out, in]   bias: [out]   y: [n, out]
 * Outputs are written with =.
 */
#include "cuda/gemm_tc.cuh"

/* c[m,n] = relu?(op(a) op(b) + col_bias[n]), rounded to S once.  The
 * transposes are template arguments: each kernel then has one pair of tile
 * orders (gemm_tc.cuh), where all four in one kernel spilled registers. */
template <class S_, bool trans_a, bool trans_b> struct tc_matrix_problem : ct_gemm_defaults {
    typedef S_ S;
    static constexpr const char *kernel_name = "tc_gemm<matrix>";
    int m, n, k, splits, k_chunk;
    const S *a, *b;
    const float *col_bias;
    S *c;
    int lda, ldb, ldc;
    bool relu; /* store max(result, 0) (a fused relu; NaN stays NaN) */
    /* a fused relu_bwd: 0 where the relu's output (laid out as c) is <= 0
     * (ct_relu_grad), or NULL */
    const S *mask;

    __device__ bool a_along_k() const { return !trans_a; }
    __device__ bool b_along_k() const { return trans_b; }
    __device__ uint16_t load_a(int, int row, int depth) const
    {
        return ct_tc_bits(a, trans_a ? (size_t)depth * lda + row : (size_t)row * lda + depth);
    }
    __device__ uint16_t load_b(int, int depth, int col) const
    {
        return ct_tc_bits(b, trans_b ? (size_t)col * ldb + depth : (size_t)depth * ldb + col);
    }
    __device__ void store(int, int, int row, int col, float value) const
    {
        if (col_bias)
            value += col_bias[col];
        size_t at = (size_t)row * ldc + col;
        if (mask && ct_to_f32(mask[at]) <= 0.0f)
            value = 0.0f;
        c[at] = ct_from_f32<S>(relu && value < 0.0f ? 0.0f : value);
    }
};

/* p's fields for one unsplit GEMM c = op(a) op(b) (+ col_bias, relu). */
template <class Problem>
static void tc_matrix_fill(Problem &p, int m, int n, int k, const void *a, int lda,
                           const void *b, int ldb, void *c, int ldc, const float *col_bias,
                           bool relu)
{
    typedef typename Problem::S S;
    p.m = m;
    p.n = n;
    p.k = k;
    p.splits = 1;
    p.k_chunk = k;
    p.a = (const S *)a;
    p.b = (const S *)b;
    p.col_bias = col_bias;
    p.c = (S *)c;
    p.lda = lda;
    p.ldb = ldb;
    p.ldc = ldc;
    p.relu = relu;
    p.mask = NULL;
}

template <class S, bool trans_a, bool trans_b>
static ct_status tc_matrix_run(int m, int n, int k, const void *a, int lda, const void *b,
                               int ldb, void *c, int ldc, const float *col_bias, bool relu,
                               cudaStream_t stream)
{
    tc_matrix_problem<S, trans_a, trans_b> p;
    tc_matrix_fill(p, m, n, k, a, lda, b, ldb, c, ldc, col_bias, relu);
    return ct_cuda_launch_tc_gemm(p, 1, stream);
}

/* y[n,o] = relu?(bias[o] + sum_i x[n,i] w[o,i]):  y = x . w^T */
extern "C" ct_status ct_cuda_linear_forward_tc(ct_dtype dtype, int n, int in, int out,
                                               const void *x, const void *w, const float *bias,
                                               bool relu, void *y, cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        return tc_matrix_run<decltype(tag), false, true>(n, out, in, x, in, w, in, y, out, bias,
                                                         relu, stream);
    });
}

/* dx[n,i] = sum_o dy[n,o] w[o,i]:  dx = dy . w, 0 where relu_mask <= 0 */
extern "C" ct_status ct_cuda_linear_backward_data_tc(ct_dtype dtype, int n, int in, int out,
                                                     const void *dy, const void *w,
                                                     const void *relu_mask, void *dx,
                                                     cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        typedef decltype(tag) S;
        tc_matrix_problem<S, false, false> p;
        tc_matrix_fill(p, n, in, out, dy, out, w, in, dx, in, NULL, false);
        p.mask = (const S *)relu_mask;
        return ct_cuda_launch_tc_gemm(p, 1, stream);
    });
}

/* The weight gradient dw = dy^T . x with the bias gradient fused: b = x
 * gets one more column, all ones, whose products sum dy: db[o], f32, never
 * rounded (graph/fuse.c).  The matrix problem's other uses keep their
 * loads and stores without the column's test. */
template <class S> struct tc_weight_bias_problem : tc_matrix_problem<S, true, false> {
    int n_w;   /* in: dw's columns; column n_w is db's */
    float *db;

    __device__ uint16_t load_b(int grp, int depth, int col) const
    {
        return col < n_w ? tc_matrix_problem<S, true, false>::load_b(grp, depth, col)
                         : ct_from_f32<S>(1.0f).bits;
    }
    __device__ void store(int, int, int row, int col, float value) const
    {
        if (col < n_w)
            this->c[(size_t)row * this->ldc + col] = ct_from_f32<S>(value);
        else
            db[row] = value;
    }
};

/* dw[o,i] = sum_n dy[n,o] x[n,i]:  dw = dy^T . x;  db[o] = sum_n dy[n,o] */
extern "C" ct_status ct_cuda_linear_backward_weight_tc(ct_dtype dtype, int n, int in, int out,
                                                       const void *x, const void *dy, void *dw,
                                                       float *db, cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        typedef decltype(tag) S;
        if (!db)
            return tc_matrix_run<S, true, false>(out, in, n, dy, out, x, in, dw, in, NULL,
                                                 false, stream);
        tc_weight_bias_problem<S> p;
        tc_matrix_fill(p, out, in + 1, n, dy, out, x, in, dw, in, NULL, false);
        p.n_w = in;
        p.db = db;
        return ct_cuda_launch_tc_gemm(p, 1, stream);
    });
}
