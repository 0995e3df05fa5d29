/*
 * Convolution forward as im2col + GEMM, with an AVX-512 GEMM of its own for
 * the shapes inference meets: one image at a time, few output positions
 * (7x7 to 56x56), deep reductions (K = C*KH*KW up to 4608).
 *
 *   y[o, n] = bias[o] + sum_k w[o, k] * col[k, n]      (then relu)
 *
 * OpenBLAS packs both operands on every call; for N = 49 columns against a
 * 512 x 4608 weight matrix that packing costs as much as the arithmetic
 * (docs/perf.md).  Here the weights are read where they lie, eight rows at a
 * time, one float of each row broadcast per k, and the columns are written
 * by im2col straight into panels of 48 (the last 16, 32 or 48 wide, zero
 * padded): col_panel[t][k][48].  The register tile is 8 output channels x
 * 48 positions (24 accumulators of 16 floats); K is taken in blocks of 256,
 * so a panel's block (48 KB) stays in L1 while a thread's eight-row blocks
 * of weights pass over it.  Bias and relu are applied as the last block
 * stores.
 *
 * Threads split the panels while packing and the output channels while
 * multiplying.  Every output is summed by one thread in k order, so the
 * bits do not depend on the number of threads.  Needs AVX-512F (the
 * backend's table asks ct_cpu_simd_avx512), groups == 1 and a multiple of 8
 * output channels.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/window_math.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"

#define PANEL 48 /* columns per panel: three vectors of 16 */
#define ROWS 8   /* output channels per register tile (CT_TILE_ROWS) */
#define DEPTH 256 /* k per block */
/* From this many panels per thread, threads split the panels (each packs
 * and multiplies its own), else the output channels (docs/perf.md). */
#define PANELS_PER_THREAD 4

bool ct_cpu_conv2d_panel_fits(const ct_conv2d_shape *s)
{
    return s->groups == 1 && s->out_channels % ROWS == 0;
}

/* Floats per k of one image's panels: full panels of 48, the last one
 * rounded up to 16. */
static int panel_width(int columns)
{
    int full = columns / PANEL, rest = columns - full * PANEL;
    return full * PANEL + (rest + 15) / 16 * 16;
}

/* The real columns of panel t, and the floats per k it is stored with
 * (48, or the columns rounded up to 16 for the last). */
static inline int panel_columns(int columns, int t)
{
    return columns - t * PANEL < PANEL ? columns - t * PANEL : PANEL;
}

/* (A panel of one column is that column along k: the 7x7 layers' 49th
 * column, which multiply_panel takes as dot products, not a 16-wide tile
 * with 15 zero lanes.) */
static inline int panel_stride(int valid)
{
    return valid == PANEL ? PANEL : valid == 1 ? 1 : (valid + 15) / 16 * 16;
}

size_t ct_cpu_conv2d_panel_workspace(const ct_conv2d_shape *s, int n_threads)
{
    size_t depth = (size_t)s->in_channels * s->kernel_h * s->kernel_w;
    size_t shared = depth * (size_t)panel_width(s->out_h * s->out_w);
    size_t slots = depth * PANEL * (size_t)(n_threads > 0 ? n_threads : 1);
    return sizeof(float) * (shared > slots ? shared : slots);
}

#ifdef CT_CPU_HAVE_AVX2_KERNELS
#include <immintrin.h>

#include "cpu/panel_tile.h"

_Static_assert(ROWS == CT_TILE_ROWS, "the panels' row blocks are the tile's rows");

/* The output columns [n0, n0 + valid) of one image as rows k of a panel
 * `width` wide (zeros past valid): the im2col of those positions, one run
 * of an output row at a time, copied between its padded ends; rows
 * [k_lo, k_hi) only. */
static void pack_panel(const ct_conv2d_shape *s, const float *x, int n0, int valid, int width,
                       int k_lo, int k_hi, float *panel)
{
    int run_oh[PANEL], run_ow[PANEL], run_length[PANEL], n_runs = 0;
    for (int n = n0; n < n0 + valid; n_runs++) {
        run_oh[n_runs] = n / s->out_w;
        run_ow[n_runs] = n % s->out_w;
        int left = s->out_w - run_ow[n_runs];
        run_length[n_runs] = left < n0 + valid - n ? left : n0 + valid - n;
        n += run_length[n_runs];
    }
    int area = s->kernel_h * s->kernel_w, sw = s->stride_w;
    size_t plane = (size_t)s->in_h * s->in_w;
    panel += (size_t)k_lo * width;
    /* row k = (c * KH + i) * KW + j, counted along (no division per row) */
    int c = k_lo / area, i = k_lo % area / s->kernel_w, j = k_lo % s->kernel_w;
    for (int k = k_lo; k < k_hi; k++, panel += width) {
        if (k > k_lo && ++j == s->kernel_w) {
            j = 0;
            if (++i == s->kernel_h) {
                i = 0;
                c++;
            }
        }
        int w_offset = ct_window_input(0, j, sw, s->pad_w, s->dilation_w), ow_lo, ow_hi;
        ct_window_valid_range(w_offset, sw, s->in_w, s->out_w, &ow_lo, &ow_hi);
        float *out = panel;
        for (int r = 0; r < n_runs; r++) {
            int ow = run_ow[r], end = ow + run_length[r];
            int ih = ct_window_input(run_oh[r], i, s->stride_h, s->pad_h, s->dilation_h);
            int lo = ow_lo > ow ? ow_lo : ow, hi = ow_hi < end ? ow_hi : end;
            if (ih < 0 || ih >= s->in_h || hi <= lo) {
                memset(out, 0, sizeof(float) * (size_t)run_length[r]);
            } else {
                const float *row = x + c * plane + (size_t)ih * s->in_w + w_offset;
                for (int q = ow; q < lo; q++)
                    out[q - ow] = 0.0f;
                if (sw == 1)
                    memcpy(out + (lo - ow), row + lo, sizeof(float) * (size_t)(hi - lo));
                else if (sw == 2) /* a constant stride (ResNet's stem): vectorized */
                    for (int q = lo; q < hi; q++)
                        out[q - ow] = row[2 * q];
                else
                    for (int q = lo; q < hi; q++)
                        out[q - ow] = row[q * sw];
                for (int q = hi; q < end; q++)
                    out[q - ow] = 0.0f;
            }
            out += run_length[r];
        }
        if (width > valid)
            memset(panel + valid, 0, sizeof(float) * (size_t)(width - valid));
    }
}

/* c[i * ldc] = a[i][depth] . v[depth] for the 8 rows (+ bias, relu): a
 * one-column panel as eight dot products, 16 k at a time, the weights read
 * along their rows.  The sum is in 16 lanes, then across them (another
 * order than the tiles' k order, the same for any thread count). */
__attribute__((target("avx512f"))) static void dot_column(int depth, const float *a, size_t lda,
                                                          const float *v, float *c, size_t ldc,
                                                          const float *bias, bool relu)
{
    __m512 acc[ROWS];
    for (int i = 0; i < ROWS; i++)
        acc[i] = _mm512_setzero_ps();
    for (int k = 0; k < depth; k += 16) {
        __mmask16 lanes = depth - k >= 16 ? (__mmask16)0xFFFF
                                          : (__mmask16)((1u << (depth - k)) - 1u);
        __m512 x = _mm512_maskz_loadu_ps(lanes, v + k);
        for (int i = 0; i < ROWS; i++)
            acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lanes, a + i * lda + k), x, acc[i]);
    }
    for (int i = 0; i < ROWS; i++) {
        float sum = _mm512_reduce_add_ps(acc[i]) + (bias ? bias[i] : 0.0f);
        c[i * ldc] = relu && sum < 0.0f ? 0.0f : sum;
    }
}

typedef struct panel_gemm {
    int rows, columns, depth, width; /* M, N, K, floats per k of the panels */
    const float *w, *bias;
    float *y;
    bool relu;
} panel_gemm;

/* Output channels [row_lo, row_hi) x the columns of panel t (`panel`, its
 * k rows `width` apart), block by block of k. */
__attribute__((target("avx512f"))) static void multiply_panel(const panel_gemm *g, int t,
                                                              const float *panel, int width,
                                                              int row_lo, int row_hi)
{
    int valid = panel_columns(g->columns, t);
    int vectors = (valid + 15) / 16, tail = valid - 16 * (vectors - 1);
    __mmask16 last = tail < 16 ? (__mmask16)((1u << tail) - 1u) : (__mmask16)0xFFFF;
    size_t lda = (size_t)g->depth, ldc = (size_t)g->columns;
    for (int r = row_lo; r < row_hi; r += ROWS) {
        const float *bias = g->bias ? g->bias + r : NULL;
        float *c = g->y + r * ldc + t * PANEL;
        if (width == 1) {
            dot_column(g->depth, g->w + r * lda, lda, panel, c, ldc, bias, g->relu);
            continue;
        }
        for (int k0 = 0; k0 < g->depth; k0 += DEPTH) {
            int depth = g->depth - k0 < DEPTH ? g->depth - k0 : DEPTH;
            bool accumulate = k0 > 0, finish = k0 + depth == g->depth;
            const float *a = g->w + r * lda + k0, *b = panel + (size_t)k0 * width;
            if (vectors == 3)
                ct_panel_tile(3, last, depth, a, lda, 1, b, width, c, ldc, accumulate, finish,
                              bias, g->relu);
            else if (vectors == 2)
                ct_panel_tile(2, last, depth, a, lda, 1, b, width, c, ldc, accumulate, finish,
                              bias, g->relu);
            else
                ct_panel_tile(1, last, depth, a, lda, 1, b, width, c, ldc, accumulate, finish,
                              bias, g->relu);
        }
    }
}

/* Few panels (deep layers with few positions): all panels packed first,
 * shared; each thread then takes a share of the output channels. */
static void by_channels(const ct_conv2d_shape *s, const float *x, const panel_gemm *g,
                        float *panels)
{
    int n_panels = (g->columns + PANEL - 1) / PANEL;
    ct_cpu_openmp_region();
#pragma omp parallel
    {
        int team = ct_cpu_team_size(), id = ct_cpu_thread_num();
        /* the panels' rows k split between the threads */
        int k_lo = g->depth * id / team, k_hi = g->depth * (id + 1) / team;
        for (int t = 0; t < n_panels; t++) {
            int valid = panel_columns(g->columns, t), width = panel_stride(valid);
            pack_panel(s, x, t * PANEL, valid, width, k_lo, k_hi,
                       panels + (size_t)t * PANEL * g->depth);
        }
#pragma omp barrier
        /* eight channels' weights (up to 147 KB) stay in L2 across the panels */
        int blocks = g->rows / ROWS;
        for (int r = blocks * id / team * ROWS; r < blocks * (id + 1) / team * ROWS; r += ROWS)
            for (int t = 0; t < n_panels; t++) {
                int width = panel_stride(panel_columns(g->columns, t));
                multiply_panel(g, t, panels + (size_t)t * PANEL * g->depth, width, r, r + ROWS);
            }
    }
}

/* Many panels: each thread packs a panel into its own slot, while it is
 * hot, and computes every output channel of it. */
static void by_panels(const ct_conv2d_shape *s, const float *x, const panel_gemm *g,
                      float *slots)
{
    int n_panels = (g->columns + PANEL - 1) / PANEL;
    ct_cpu_openmp_region();
#pragma omp parallel
    {
        float *slot = slots + (size_t)ct_cpu_thread_num() * PANEL * g->depth;
#pragma omp for schedule(static)
        for (int t = 0; t < n_panels; t++) {
            int valid = panel_columns(g->columns, t), width = panel_stride(valid);
            pack_panel(s, x, t * PANEL, valid, width, 0, g->depth, slot);
            multiply_panel(g, t, slot, width, 0, g->rows);
        }
    }
}

void ct_cpu_conv2d_panel_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                 const float *bias, bool relu, float *y, void *workspace)
{
    CT_ASSERT(ct_cpu_conv2d_panel_fits(s) && ct_cpu_simd_avx512());
    int columns = s->out_h * s->out_w, depth = s->in_channels * s->kernel_h * s->kernel_w;
    int n_panels = (columns + PANEL - 1) / PANEL, threads = ct_cpu_max_threads();
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t y_image = (size_t)s->out_channels * columns;
    for (int n = 0; n < s->n_batch; n++) {
        panel_gemm g = {s->out_channels, columns, depth, panel_width(columns), w, bias,
                        y + n * y_image, relu};
        if (n_panels >= PANELS_PER_THREAD * threads)
            by_panels(s, x + n * x_image, &g, workspace);
        else
            by_channels(s, x + n * x_image, &g, workspace);
    }
}
#else
void ct_cpu_conv2d_panel_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                                 const float *bias, bool relu, float *y, void *workspace)
{
    (void)s, (void)x, (void)w, (void)bias, (void)relu, (void)y, (void)workspace;
    CT_ASSERT(!"the panel convolution needs AVX-512 (ct_cpu_simd_avx512)");
}
#endif
