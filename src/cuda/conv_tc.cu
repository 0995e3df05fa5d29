/*
 * 2-D convolution of a bf16 or fp16 graph on tensor cores: implicit GEMM on
 * gemm_tc.cuh, one GEMM per group (blockIdx.z), nothing materialized.  x, w,
 * y, dy, dx and dw are 16-bit, the bias f32; every sum is f32 and every
 * stored value is rounded once.  The same three GEMMs as conv.cu (its
 * comment has the index maps), with Cg = C/groups, Og = O/groups, P =
 * out_h*out_w, KK = KH*KW:
 *   forward:         y_g[o, (n,p)]      = b[o] + sum_{(c,i,j)} w[o,(c,i,j)] col[(c,i,j),(n,p)]
 *   backward data:   dx_g[c, (n,ih,iw)] = sum_{(o,i,j)} w[o,c,i,j] dcol[(o,i,j),(n,ih,iw)]
 *   backward weight: dw_g[o, (c,i,j)]   = sum_{(n,p)} dy[n,o,p] col[(c,i,j),(n,p)]
 * b (col, dcol) is read through the index map (conv_source), a tap in the
 * padding reading a clamped address and taking 0; backward data reads w
 * transposed in place (no packing).  The weight gradient's reduction (N*P
 * long) is split over blocks when its output is small: the f32 parts land
 * in the workspace and one more kernel adds them in split order and rounds
 * the sum once.  With the bias gradient fused (graph/fuse.c) b has one more
 * column, all ones, whose products sum dy: db[o], f32, never rounded.
 *
 * Accumulation: all outputs (y, dx, dw) are written with =.
 */
#include "cuda/conv_patch.cuh"
#include "cuda/gemm_tc.cuh"

enum {
    TC_SPLIT_MIN_DEPTH = 512, /* shortest k chunk worth its own block */
    TC_SPLIT_MAX = 64,
};

/* The bits of col[(c, tap), pixel] (channel c of group grp of src), or 0 in
 * the padding: the address is clamped into the plane and the value
 * selected, so that lanes do not diverge around the load. */
template <class S>
__device__ inline uint16_t tc_gather(const conv_geometry &g, const S *src, int grp, int c,
                                     int tap, int pixel)
{
    conv_source_at s = conv_source_of(g, pixel, tap);
    int img = s.img, row = s.row, column = s.column;
    int cg = g.src_c / g.groups;
    uint16_t bits = ct_tc_bits(src, (((size_t)img * g.src_c + grp * cg + c) * g.src_h +
                                     max(row, 0)) * g.src_w + max(column, 0));
    return row >= 0 && column >= 0 ? bits : (uint16_t)0;
}

/* Forward (a = w, rows Og) and backward data (a = w read transposed, rows
 * Cg; transposed geometry): d[row, pixel] = sum_k a[row, k] col[k, pixel]. */
template <class S_> struct tc_conv_problem : ct_gemm_defaults {
    typedef S_ S;
    static constexpr const char *kernel_name = "tc_gemm<conv_forward>";
    static constexpr bool adds_row_bias = true;
    int m, n, k, splits, k_chunk; /* m = Og (Cg), n = N * dst plane, k = Cg*KK (Og*KK) */
    conv_geometry g;
    const S *w, *src;
    const float *bias;
    S *dst;
    bool transposed_w; /* backward data: a[c, (o, tap)] = w[o, c, tap] */
    bool relu;         /* forward: store max(y, 0) (a fused relu; NaN stays NaN) */

    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return false; }
    __device__ uint16_t load_a(int grp, int row, int depth) const
    {
        if (!transposed_w)
            return ct_tc_bits(w, ((size_t)grp * m + row) * k + depth);
        int taps = g.kernel_h * g.kernel_w, og = g.src_c / g.groups, o = conv_channel_of(g, depth);
        return ct_tc_bits(w, (((size_t)grp * og + o) * m + row) * taps + (depth - o * taps));
    }
    __device__ uint16_t load_b(int grp, int depth, int pixel) const
    {
        int c = conv_channel_of(g, depth);
        return tc_gather(g, src, grp, c, depth - c * (int)g.by_taps.divisor, pixel);
    }
    __device__ float row_bias(int grp, int row) const { return bias ? bias[grp * m + row] : 0.0f; }
    __device__ void store(int grp, int, int row, int pixel, float value) const
    {
        dst[dst_index(grp, row, pixel)] = ct_from_f32<S>(relu && value < 0.0f ? 0.0f : value);
    }
    __device__ size_t dst_index(int grp, int row, int pixel) const
    {
        return conv_dst_offset(g, grp * m + row, pixel);
    }
};

/* The backward data pass, with a fused relu_bwd where mask is set (the
 * relu's output, laid out as dx): 0 where it is <= 0 (ct_relu_grad).  Its
 * own type, so the forward kernel keeps its registers (fp16: 88, not 94). */
template <class S> struct tc_conv_backward_data_problem : tc_conv_problem<S> {
    static constexpr const char *kernel_name = "tc_gemm<conv_backward_data>";
    const S *mask;

    __device__ void store(int grp, int, int row, int pixel, float value) const
    {
        size_t at = this->dst_index(grp, row, pixel);
        if (mask && ct_to_f32(mask[at]) <= 0.0f)
            value = 0.0f;
        this->dst[at] = ct_from_f32<S>(value);
    }
};

template <class S_> struct tc_conv_backward_weight_problem : ct_gemm_defaults {
    typedef S_ S;
    static constexpr const char *kernel_name = "tc_gemm<conv_backward_weight>";
    static constexpr bool sums_parts = true; /* k (the pixels) split where the tiles are few */
    int m, n, k, splits, k_chunk; /* m = Og, n = Cg*KK (+ 1 with db), k = N*P */
    int n_w;                      /* Cg*KK: the weight columns; column n_w is db's */
    conv_geometry g;              /* forward: col as the forward pass reads it */
    const S *x, *dy;
    S *dw;
    float *db; /* f32, or NULL */

    /* dy[n, o, p] and col[cij, np] both run along k (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return true; }
    __device__ uint16_t load_a(int grp, int o, int np) const
    {
        return ct_tc_bits(dy, conv_dst_offset(g, grp * m + o, np));
    }
    __device__ uint16_t load_b(int grp, int np, int cij) const
    {
        if (cij >= n_w)
            return ct_from_f32<S>(1.0f).bits;
        int c = conv_channel_of(g, cij);
        return tc_gather(g, x, grp, c, cij - c * (int)g.by_taps.divisor, np);
    }
    __device__ void store(int grp, int, int o, int cij, float value) const
    {
        if (cij < n_w)
            dw[((size_t)grp * m + o) * n_w + cij] = ct_from_f32<S>(value);
        else
            db[grp * m + o] = value;
    }
};

/* The weight gradient's split of its reduction: enough blocks to fill the
 * device twice over, chunks no shorter than TC_SPLIT_MIN_DEPTH. */
static void tc_weight_split(const ct_conv2d_shape *s, int *splits, int *k_chunk)
{
    int og = s->out_channels / s->groups;
    int cols = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    int64_t depth = (int64_t)s->n_batch * s->out_h * s->out_w;
    int64_t tiles = (int64_t)((og + TC_TILE_M - 1) / TC_TILE_M) *
                    ((cols + TC_TILE_N - 1) / TC_TILE_N) * s->groups;
    int64_t wanted = (2 * (int64_t)ct_cuda_sm_count() + tiles - 1) / tiles;
    int64_t most = depth / TC_SPLIT_MIN_DEPTH;
    int64_t count = wanted < most ? wanted : most;
    if (count > TC_SPLIT_MAX)
        count = TC_SPLIT_MAX;
    if (count < 1)
        count = 1;
    int64_t chunk = (depth + count - 1) / count;
    chunk = (chunk + TC_TILE_K - 1) / TC_TILE_K * TC_TILE_K;
    *k_chunk = count == 1 ? (int)depth : (int)chunk;
    *splits = count == 1 ? 1 : (int)((depth + chunk - 1) / chunk);
}

extern "C" size_t ct_cuda_conv2d_backward_weight_tc_workspace(const ct_conv2d_shape *s)
{
    int splits, k_chunk;
    tc_weight_split(s, &splits, &k_chunk);
    /* each row's weights and its bias column, rows of whole sectors */
    size_t columns = (size_t)s->out_channels *
                     ct_gemm_part_pitch(s->in_channels / s->groups * s->kernel_h * s->kernel_w + 1);
    return splits > 1 ? sizeof(float) * splits * columns : 0;
}

/* p's fields for the forward or the backward data pass. */
template <class Problem>
static void tc_conv_data_fill(Problem &p, const ct_conv2d_shape *s, bool backward, const void *w,
                              const void *src, const float *bias, bool relu, void *dst)
{
    typedef typename Problem::S S;
    int taps = s->kernel_h * s->kernel_w;
    int cg = s->in_channels / s->groups, og = s->out_channels / s->groups;
    p.m = backward ? cg : og;
    p.n = backward ? s->n_batch * s->in_h * s->in_w : s->n_batch * s->out_h * s->out_w;
    p.k = (backward ? og : cg) * taps;
    p.splits = 1;
    p.k_chunk = p.k;
    p.g = conv_geometry_of(s, backward);
    p.w = (const S *)w;
    p.src = (const S *)src;
    p.bias = bias;
    p.dst = (S *)dst;
    p.transposed_w = backward;
    p.relu = relu;
}

extern "C" ct_status ct_cuda_conv2d_forward_tc(ct_dtype dtype, const ct_conv2d_shape *s,
                                               const void *x, const void *w, const float *bias,
                                               bool relu, void *y, cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        tc_conv_problem<decltype(tag)> p;
        tc_conv_data_fill(p, s, false, w, x, bias, relu, y);
        return ct_cuda_launch_tc_gemm(p, s->groups, stream);
    });
}

extern "C" ct_status ct_cuda_conv2d_backward_data_tc(ct_dtype dtype, const ct_conv2d_shape *s,
                                                     const void *dy, const void *w,
                                                     const void *relu_mask, void *dx,
                                                     cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        typedef decltype(tag) S;
        tc_conv_backward_data_problem<S> p;
        tc_conv_data_fill(p, s, true, w, dy, NULL, false, dx);
        p.mask = (const S *)relu_mask;
        return ct_cuda_launch_tc_gemm(p, s->groups, stream);
    });
}

template <class S>
static ct_status tc_conv_weight_run(const ct_conv2d_shape *s, const void *x, const void *dy,
                                    void *dw, float *db, void *workspace, cudaStream_t stream)
{
    tc_conv_backward_weight_problem<S> p;
    p.m = s->out_channels / s->groups;
    p.n_w = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.n = p.n_w + (db ? 1 : 0);
    p.k = s->n_batch * s->out_h * s->out_w;
    tc_weight_split(s, &p.splits, &p.k_chunk);
    p.g = conv_geometry_of(s, false);
    p.x = (const S *)x;
    p.dy = (const S *)dy;
    p.dw = (S *)dw;
    p.db = db;
    if (p.splits > 1)
        p.parts = (float *)workspace;
    return ct_cuda_launch_tc_gemm(p, s->groups, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_weight_tc(ct_dtype dtype, const ct_conv2d_shape *s,
                                                       const void *x, const void *dy, void *dw,
                                                       float *db, void *workspace,
                                                       cudaStream_t stream)
{
    return ct_with_half_storage(dtype, [&](auto tag) {
        return tc_conv_weight_run<decltype(tag)>(s, x, dy, dw, db, workspace, stream);
    });
}
