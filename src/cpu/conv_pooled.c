/*
 * A convolution's weight gradient through the relu and the 2x2/2 max pool
 * after it (conv_pooled.h; fused by graph/fuse.c, ct_fuse_pool_bwd): the
 * first layer of SimpleCNN/LeNet, whose input needs no gradient, so the
 * weight gradient is the only reader of the pool's backward.
 *
 * Per image and output channel (in chunks of the batch, pooled_part),
 * first each window's argmax in y and its
 * gradient (at[], g[]: pool_avx2.c four windows at a time), or from the
 * argmax codes the forward stored in y's place (ct_exec_pool_codes), then for each
 * group of up to GROUP kernel rows (c, i) one pass over the windows:
 *   sums[c,i][k % 2][0..KW) += g[k] * x[n, c, a_k + i, b_k .. b_k + KW)
 * one 8-lane multiply-add per row and window, the row loaded with the
 * lanes past KW masked off; two sums a row (even and odd windows) so that
 * consecutive windows' multiply-adds do not wait for each other, added
 * together at the end.  The bias gradient sums g in 8 lanes (window k into
 * lane k % 8), added in lane order at the end: one chain of 144 adds a
 * plane was a third of the kernel's time.  Every image but the last loads
 * whole 8-float rows (the floats past KW are in the image); the last one
 * masks them, as its last rows end the buffer.  Windows with a zero
 * gradient (the relu's) are added too: a branch on them mispredicts, the
 * multiply-add costs less.
 * A non-finite x next to a window's argmax does not reach dw here, where
 * the dense kernel's 0 * inf would make it NaN.
 */
#include "cpu/conv_pooled.h"

#include <math.h>
#include <string.h>

#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/pool_avx2.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS
#include <immintrin.h>
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline
#define AVX2 __attribute__((target("avx2,fma")))
#endif

enum {
    GROUP = 6,     /* kernel rows whose 2 x GROUP sums one pass keeps in 16 registers */
    LANES = 8,     /* floats of a row's sums: CT_CONV_POOLED_MAX_KERNEL_W */
    SETS = 2,      /* sums a row: of the even and of the odd windows */
    MAX_ROWS = 256, /* in_channels * kernel_h */
    /* The batch's fixed parts, each summed on its own (by the thread
     * whose images they are: the forward and the pools split the batch
     * so), then added in order: the same bits for any number of threads.
     * Reading every image for some channels instead (the split before),
     * SimpleCNN's conv1 scaled 1.28x on 2 threads. */
    CHUNKS = 8,
    MAX_PARTIALS = 4096 /* floats of the chunks' sums, on the caller's stack */
};

typedef struct pooled_geom {
    int in_w, kernel_h, kernel_w;
    long x_plane; /* floats of one input channel */
    int rows;     /* in_channels * kernel_h */
    int windows;  /* the pool's out_h * out_w */
} pooled_geom;

bool ct_cpu_conv2d_pooled_weight_fits(const ct_conv2d_shape *s, const ct_pool2d_shape *p)
{
    return s->groups == 1 && s->stride_h == 1 && s->stride_w == 1 && s->pad_h == 0 &&
           s->pad_w == 0 && s->dilation_h == 1 && s->dilation_w == 1 &&
           s->kernel_w <= CT_CONV_POOLED_MAX_KERNEL_W &&
           (long)s->in_channels * s->kernel_h <= MAX_ROWS && p->kernel_h == 2 &&
           p->kernel_w == 2 && p->stride_h == 2 && p->stride_w == 2 && p->pad_h == 0 &&
           p->pad_w == 0 && p->n_batch == s->n_batch && p->channels == s->out_channels &&
           p->in_h == s->out_h && p->in_w == s->out_w && p->out_h > 0 && p->out_w > 0 &&
           2 * p->out_h <= p->in_h && 2 * p->out_w <= p->in_w &&
           (long)p->out_h * p->out_w <= CT_CONV_POOLED_MAX_WINDOWS;
}

/* at[k], g[k] of every window of one plane (pool_avx2.h says what they
 * are): at in rows of at_w, the convolution input's width. */
static void window_argmax(const ct_pool2d_shape *p, const float *y, const float *dy, bool relu,
                          int at_w, int *at, float *g)
{
    int first = 0; /* columns before it are done by the vector kernel */
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx512() && p->out_w >= CT_POOL_AVX512_MIN_WINDOWS)
        first = ct_cpu_maxpool2x2_argmax_avx512(p->in_w, p->out_h, p->out_w, y, dy, relu, at_w,
                                                at, g);
    else if (ct_cpu_simd_avx2())
        first = ct_cpu_maxpool2x2_argmax_avx2(p->in_w, p->out_h, p->out_w, y, dy, relu, at_w, at,
                                              g);
#endif
    for (int oh = 0; oh < p->out_h; oh++)
        for (int ow = first; ow < p->out_w; ow++) {
            int k = oh * p->out_w + ow;
            const float *row0 = y + 2 * oh * p->in_w + 2 * ow, *row1 = row0 + p->in_w;
            float m = row0[0];
            int where = 0;
            bool take = ct_max_replaces(row0[1], m);
            m = take ? row0[1] : m;
            where = take ? 1 : where;
            take = ct_max_replaces(row1[0], m);
            m = take ? row1[0] : m;
            where = take ? at_w : where;
            take = ct_max_replaces(row1[1], m);
            m = take ? row1[1] : m;
            where = take ? at_w + 1 : where;
            at[k] = 2 * oh * at_w + 2 * ow + where;
            g[k] = relu ? ct_relu_grad(m, dy[k]) : dy[k];
        }
}

/* at[k], g[k] from the windows' codes (kernels.h) instead of y: what
 * window_argmax finds there, read from the byte the forward stored; base[k]
 * is window k's top left in rows of at_w (the same for every plane). */
static void window_codes(int windows, const int *base, const uint8_t *codes, const float *dy,
                         bool relu, int at_w, int *at, float *g)
{
    int k = 0; /* windows before it are done by the vector kernel */
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx512())
        k = ct_cpu_pool_codes_argmax_avx512(windows, base, codes, dy, relu, at_w, at, g);
    else if (ct_cpu_simd_avx2())
        k = ct_cpu_pool_codes_argmax_avx2(windows, base, codes, dy, relu, at_w, at, g);
#endif
    for (; k < windows; k++) {
        at[k] = base[k] + (codes[k] & CT_POOL_CODE_DOWN ? at_w : 0) +
                (codes[k] & CT_POOL_CODE_RIGHT);
        g[k] = relu && !(codes[k] & CT_POOL_CODE_PASS) ? 0.0f : dy[k];
    }
}

/* Where kernel row r (channel r / kernel_h, row r % kernel_h) starts in an
 * image, from the window's argmax. */
static inline long row_offset(const pooled_geom *g, int r)
{
    return (long)(r / g->kernel_h) * g->x_plane + (long)(r % g->kernel_h) * g->in_w;
}

#ifdef CT_CPU_HAVE_AVX2_KERNELS
static int add_lanes8_avx2(int windows, const float *grad, float *lanes);
#endif

/* lanes[k % LANES] += g[k] over a plane's windows: portable, and the same
 * sums (in the same order) on AVX2 (the windows of whole vectors). */
static void add_bias_lanes(int windows, const float *grad, float *lanes)
{
    int k = 0;
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx2())
        k = add_lanes8_avx2(windows, grad, lanes);
#endif
    for (; k < windows; k++)
        lanes[k % LANES] += grad[k];
}

/* Rows [row0, row0 + n_rows) of one image: the portable loop, fmaf, so the
 * same bits as the vector kernel's multiply-adds. */
static void add_windows(const pooled_geom *g, const float *xn, const int *at, const float *grad,
                        int row0, int n_rows, float *sums)
{
    for (int k = 0; k < g->windows; k++)
        for (int r = 0; r < n_rows; r++) {
            const float *src = xn + row_offset(g, row0 + r) + at[k];
            float *row = sums + ((long)(row0 + r) * SETS + k % SETS) * LANES;
            for (int j = 0; j < g->kernel_w; j++)
                row[j] = fmaf(grad[k], src[j], row[j]);
        }
}

#ifdef CT_CPU_HAVE_AVX2_KERNELS
static AVX2 int add_lanes8_avx2(int windows, const float *grad, float *lanes)
{
    __m256 sum = _mm256_loadu_ps(lanes);
    int k = 0;
    for (; k + LANES <= windows; k += LANES)
        sum = _mm256_add_ps(sum, _mm256_loadu_ps(grad + k));
    _mm256_storeu_ps(lanes, sum);
    return k;
}

/* An 8-float row: whole (whole: the image has the floats past KW) or with
 * the lanes past KW masked off. */
AVX2_INLINE __m256 load_row(const float *src, __m256i mask, const bool whole)
{
    return whole ? _mm256_loadu_ps(src) : _mm256_maskload_ps(src, mask);
}

/* add_windows for R (a constant, <= GROUP) rows, their sums in registers. */
AVX2_INLINE void add_windows_rows(const pooled_geom *g, const float *xn, const int *at,
                                  const float *grad, int row0, float *sums, const int R,
                                  const bool whole)
{
    __m256 even[GROUP], odd[GROUP];
    long offset[GROUP];
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(g->kernel_w),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; r++) {
        even[r] = _mm256_loadu_ps(sums + (long)(row0 + r) * SETS * LANES);
        odd[r] = _mm256_loadu_ps(sums + ((long)(row0 + r) * SETS + 1) * LANES);
        offset[r] = row_offset(g, row0 + r);
    }
    int k = 0;
    for (; k + 1 < g->windows; k += 2) {
        __m256 g0 = _mm256_set1_ps(grad[k]), g1 = _mm256_set1_ps(grad[k + 1]);
        const float *src0 = xn + at[k], *src1 = xn + at[k + 1];
        for (int r = 0; r < R; r++) {
            even[r] = _mm256_fmadd_ps(g0, load_row(src0 + offset[r], mask, whole), even[r]);
            odd[r] = _mm256_fmadd_ps(g1, load_row(src1 + offset[r], mask, whole), odd[r]);
        }
    }
    if (k < g->windows) {
        __m256 g0 = _mm256_set1_ps(grad[k]);
        for (int r = 0; r < R; r++)
            even[r] = _mm256_fmadd_ps(g0, load_row(xn + at[k] + offset[r], mask, whole),
                                      even[r]);
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(sums + (long)(row0 + r) * SETS * LANES, even[r]);
        _mm256_storeu_ps(sums + ((long)(row0 + r) * SETS + 1) * LANES, odd[r]);
    }
}

/* whole: the image is not the batch's last (load_row). */
static AVX2 void add_windows_avx2(const pooled_geom *g, const float *xn, const int *at,
                                  const float *grad, int row0, int n_rows, float *sums,
                                  bool whole)
{
    switch (n_rows) {
#define ROWS_CASE(R)                                                                       \
    case R:                                                                                \
        if (whole)                                                                         \
            add_windows_rows(g, xn, at, grad, row0, sums, R, true);                        \
        else                                                                               \
            add_windows_rows(g, xn, at, grad, row0, sums, R, false);                       \
        break;
        ROWS_CASE(1)
        ROWS_CASE(2)
        ROWS_CASE(3)
        ROWS_CASE(4)
        ROWS_CASE(5)
        ROWS_CASE(6)
#undef ROWS_CASE
    }
}
#endif

/* Every group of rows of one image, on the vector kernel where there is one. */
static void add_image(const pooled_geom *g, const float *xn, const int *at, const float *grad,
                      bool last_image, float *sums)
{
    for (int row0 = 0; row0 < g->rows; row0 += GROUP) {
        int n_rows = g->rows - row0 < GROUP ? g->rows - row0 : GROUP;
#ifdef CT_CPU_HAVE_AVX2_KERNELS
        if (ct_cpu_simd_avx2()) {
            add_windows_avx2(g, xn, at, grad, row0, n_rows, sums, !last_image);
            continue;
        }
#endif
        (void)last_image;
        add_windows(g, xn, at, grad, row0, n_rows, sums);
    }
}

typedef struct pooled_job {
    const ct_conv2d_shape *s;
    const ct_pool2d_shape *p;
    const pooled_geom *g;
    const int *base;
    const float *x, *y;
    const uint8_t *codes;
    const float *dy;
    bool relu;
    float *dw, *db;
    float *partials; /* NULL, or the chunks' sums: [CHUNKS][out_c][depth + 1] */
    int chunks;
} pooled_job;

/* Channel o's weight gradient over images [first, last): dw_o[depth] and,
 * where bias is not NULL, its bias gradient. */
static void channel_sums(const pooled_job *j, int o, int first, int last, float *dw_o,
                         float *bias)
{
    const pooled_geom *g = j->g;
    int out_c = j->s->out_channels;
    long y_plane = (long)j->p->in_h * j->p->in_w, x_image = g->x_plane * j->s->in_channels;
    int at[CT_CONV_POOLED_MAX_WINDOWS];
    float grad[CT_CONV_POOLED_MAX_WINDOWS];
    float sums[MAX_ROWS * SETS * LANES];
    memset(sums, 0, sizeof(float) * (size_t)g->rows * SETS * LANES);
    float lanes[LANES] = {0};
    for (int n = first; n < last; n++) {
        long plane = (long)n * out_c + o;
        if (j->codes)
            window_codes(g->windows, j->base, j->codes + plane * g->windows,
                         j->dy + plane * g->windows, j->relu, g->in_w, at, grad);
        else
            window_argmax(j->p, j->y + plane * y_plane, j->dy + plane * g->windows, j->relu,
                          g->in_w, at, grad);
        add_bias_lanes(g->windows, grad, lanes);
        add_image(g, j->x + n * x_image, at, grad, n + 1 == j->s->n_batch, sums);
    }
    for (int r = 0; r < g->rows; r++) {
        const float *row = sums + (long)r * SETS * LANES;
        for (int col = 0; col < g->kernel_w; col++)
            dw_o[(long)r * g->kernel_w + col] = row[col] + row[LANES + col];
    }
    if (bias) {
        float sum = 0.0f;
        for (int l = 0; l < LANES; l++)
            sum += lanes[l];
        *bias = sum;
    }
}

/* One thread's part of ct_cpu_conv2d_pooled_backward_weight: with
 * partials, its (chunk, channel) sums, chunk by chunk (the images the
 * forward and the pool's backward gave this thread, which its cache
 * holds), then, after every thread's, its channels' sums of the chunks in
 * chunk order; without, its channels over the whole batch. */
static void pooled_part(void *arg)
{
    const pooled_job *j = arg;
    int out_c = j->s->out_channels, depth = j->g->rows * j->g->kernel_w;
    int64_t first, last;
    if (!j->partials) {
        ct_cpu_split(out_c, &first, &last);
        for (int o = (int)first; o < last; o++)
            channel_sums(j, o, 0, j->s->n_batch, j->dw + (long)o * depth,
                         j->db ? j->db + o : NULL);
        return;
    }
    ct_cpu_split((int64_t)j->chunks * out_c, &first, &last);
    for (int64_t item = first; item < last; item++) {
        int chunk = (int)(item / out_c), o = (int)(item % out_c);
        int n_first = (int)((long long)j->s->n_batch * chunk / j->chunks);
        int n_last = (int)((long long)j->s->n_batch * (chunk + 1) / j->chunks);
        float *sums = j->partials + item * (depth + 1);
        channel_sums(j, o, n_first, n_last, sums, sums + depth);
    }
    ct_cpu_barrier();
    int per_channel = depth + (j->db != NULL); /* its weights, then its bias */
    ct_cpu_split(out_c, &first, &last);
    for (int o = (int)first; o < last; o++)
        for (int k = 0; k < per_channel; k++) {
            float total = 0.0f;
            for (int chunk = 0; chunk < j->chunks; chunk++)
                total += j->partials[((long)chunk * out_c + o) * (depth + 1) + k];
            *(k < depth ? j->dw + (long)o * depth + k : j->db + o) = total;
        }
}

void ct_cpu_conv2d_pooled_backward_weight(const ct_conv2d_shape *s, const ct_pool2d_shape *p,
                                          const float *x, const float *y,
                                          const uint8_t *codes, const float *dy, bool relu,
                                          float *dw, float *db)
{
    pooled_geom g = {.in_w = s->in_w,
                     .kernel_h = s->kernel_h,
                     .kernel_w = s->kernel_w,
                     .x_plane = (long)s->in_h * s->in_w,
                     .rows = s->in_channels * s->kernel_h,
                     .windows = p->out_h * p->out_w};
    int out_c = s->out_channels;
    long work = (long)s->n_batch * out_c * g.windows * g.rows;
    int base[CT_CONV_POOLED_MAX_WINDOWS]; /* each window's top left, for the codes */
    for (int k = 0; codes && k < g.windows; k++)
        base[k] = 2 * (k / p->out_w) * g.in_w + 2 * (k % p->out_w);
    /* the batch in CHUNKS fixed parts where their sums fit the stack (SimpleCNN's
     * conv1: 8 x 6 x 26 floats), else the channels split over the threads */
    float partials[MAX_PARTIALS];
    int chunks = s->n_batch < CHUNKS ? s->n_batch : CHUNKS;
    bool chunked = (long)chunks * out_c * (g.rows * g.kernel_w + 1) <= MAX_PARTIALS;
    pooled_job job = {s,  p,  &g, base, x, y, codes, dy, relu, dw, db, chunked ? partials : NULL,
                      chunks};
    bool parallel = (chunked ? chunks * out_c : out_c) > 1 && work >= 65536;
    ct_cpu_parallel(parallel ? ct_cpu_max_threads() : 1, pooled_part, &job);
}
