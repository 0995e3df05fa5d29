/*
 * GEMM on the CPU: c[m,n] = alpha * op(a)[m,k] op(b)[k,n] + beta * c, row-major.
 *
 * ct_cpu_gemm is OpenBLAS's cblas_sgemm when cuttle is built with
 * CT_HAVE_OPENBLAS, and ct_cpu_gemm_native otherwise.
 *
 * The native GEMM is a cache-blocked loop nest in plain C that the compiler
 * vectorizes:
 *   - C is cut into tiles of at most GEMM_MC rows x GEMM_NC columns; the
 *     tiles are independent and OpenMP threads share them out;
 *   - per tile, the k dimension runs in blocks of GEMM_KC: a block of op(a)
 *     is packed into panels of GEMM_MR rows and a block of op(b) into panels
 *     of GEMM_NR columns (transposes are resolved while packing, so one
 *     micro-kernel serves all four cases, always reading unit stride);
 *   - the micro-kernel keeps a GEMM_MR x GEMM_NR block of C in registers and
 *     adds one rank-1 update per k, with the vector loop over the columns
 *     (a float sum over k would not vectorize without -ffast-math).
 * Each c[i,j] sums its k blocks in increasing order, and within a block its
 * products in increasing k, whatever the tiling: the result does not depend
 * on the number of threads.
 */
#include "cpu/threads.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu/blas_core.h"
#include "cpu/kernels.h"

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

enum {
    GEMM_MR = 4,   /* rows of the register block */
    GEMM_NR = 8,   /* columns of the register block: two SSE vectors */
    GEMM_MC = 64,  /* rows of a tile (the packed a block: MC x KC, 64 KiB) */
    GEMM_NC = 128, /* widest tile (the packed b block: KC x NC, 128 KiB) */
    GEMM_KC = 256, /* depth of a k block */
};

/* Below this many multiply-adds, forking threads costs more than it saves. */
static const double GEMM_PARALLEL_MIN_FLOPS = 64.0 * 64.0 * 64.0;

/* Packing buffers, one pair per thread.  The GEMM signature has no
 * workspace; thread-local storage keeps the function reentrant without
 * allocating or putting 192 KiB on the stack of threads we do not own. */
static _Thread_local float gemm_packed_a[GEMM_MC * GEMM_KC];
static _Thread_local float gemm_packed_b[GEMM_KC * GEMM_NC];

/* The operands as the loop nest sees them: op(a) and op(b) element
 * accessors are folded into packing, so only pointers and strides travel. */
typedef struct gemm_args {
    bool trans_a, trans_b;
    int m, n, k;
    float alpha, beta;
    const float *a, *b;
    float *c;
    int lda, ldb, ldc;
} gemm_args;

/* packed[panel][p][r] = op(a)[i0 + panel*MR + r, p0 + p], zero past row m.
 * packed: [ceil(rows/MR), depth, MR] */
static void gemm_pack_a(const gemm_args *g, int i0, int rows, int p0, int depth, float *packed)
{
    for (int panel = 0; panel < rows; panel += GEMM_MR) {
        for (int p = 0; p < depth; p++) {
            for (int r = 0; r < GEMM_MR; r++) {
                int i = i0 + panel + r;
                float value = 0.0f;
                if (panel + r < rows)
                    value = g->trans_a ? g->a[(size_t)(p0 + p) * g->lda + i]
                                       : g->a[(size_t)i * g->lda + p0 + p];
                *packed++ = value;
            }
        }
    }
}

/* packed[panel][p][col] = op(b)[p0 + p, j0 + panel*NR + col], zero past
 * column n.  packed: [ceil(cols/NR), depth, NR] */
static void gemm_pack_b(const gemm_args *g, int j0, int cols, int p0, int depth, float *packed)
{
    for (int panel = 0; panel < cols; panel += GEMM_NR) {
        int width = cols - panel < GEMM_NR ? cols - panel : GEMM_NR;
        for (int p = 0; p < depth; p++) {
            int j = j0 + panel;
            if (g->trans_b) {
                for (int col = 0; col < width; col++)
                    packed[col] = g->b[(size_t)(j + col) * g->ldb + p0 + p];
            } else {
                memcpy(packed, g->b + (size_t)(p0 + p) * g->ldb + j, sizeof(float) * width);
            }
            for (int col = width; col < GEMM_NR; col++)
                packed[col] = 0.0f;
            packed += GEMM_NR;
        }
    }
}

/* acc[r][col] = sum_p pa[p][r] * pb[p][col]  (pa: [depth, MR], pb: [depth, NR]) */
static void gemm_micro_kernel(int depth, const float *restrict pa, const float *restrict pb,
                              float acc[GEMM_MR][GEMM_NR])
{
    float sum[GEMM_MR][GEMM_NR] = {{0}};
    for (int p = 0; p < depth; p++) {
        for (int r = 0; r < GEMM_MR; r++) {
            float a_value = pa[p * GEMM_MR + r];
            for (int col = 0; col < GEMM_NR; col++)
                sum[r][col] += a_value * pb[p * GEMM_NR + col];
        }
    }
    memcpy(acc, sum, sizeof(sum));
}

/* c[i0.., j0..] = alpha*acc + (first_block ? beta*c : c) for the valid part
 * of a register block; beta == 0 never reads c, so garbage (NaN) in c is
 * overwritten as BLAS does. */
static void gemm_store(const gemm_args *g, int i0, int rows, int j0, int cols, bool first_block,
                       float acc[GEMM_MR][GEMM_NR])
{
    for (int r = 0; r < rows; r++) {
        float *c_row = g->c + (size_t)(i0 + r) * g->ldc + j0;
        if (!first_block) {
            for (int col = 0; col < cols; col++)
                c_row[col] += g->alpha * acc[r][col];
        } else if (g->beta == 0.0f) {
            for (int col = 0; col < cols; col++)
                c_row[col] = g->alpha * acc[r][col];
        } else {
            for (int col = 0; col < cols; col++)
                c_row[col] = g->alpha * acc[r][col] + g->beta * c_row[col];
        }
    }
}

/* One tile of C: rows [i0, i0+rows), columns [j0, j0+cols). */
static void gemm_tile(const gemm_args *g, int i0, int rows, int j0, int cols)
{
    for (int p0 = 0; p0 < g->k; p0 += GEMM_KC) {
        int depth = g->k - p0 < GEMM_KC ? g->k - p0 : GEMM_KC;
        gemm_pack_a(g, i0, rows, p0, depth, gemm_packed_a);
        gemm_pack_b(g, j0, cols, p0, depth, gemm_packed_b);
        for (int jr = 0; jr < cols; jr += GEMM_NR) {
            const float *pb = gemm_packed_b + (size_t)jr * depth;
            int block_cols = cols - jr < GEMM_NR ? cols - jr : GEMM_NR;
            for (int ir = 0; ir < rows; ir += GEMM_MR) {
                float acc[GEMM_MR][GEMM_NR];
                int block_rows = rows - ir < GEMM_MR ? rows - ir : GEMM_MR;
                gemm_micro_kernel(depth, gemm_packed_a + (size_t)ir * depth, pb, acc);
                gemm_store(g, i0 + ir, block_rows, j0 + jr, block_cols, p0 == 0, acc);
            }
        }
    }
}

/* c = beta * c over the whole matrix (beta == 0 writes zeros without
 * reading): all that is left to do when k == 0 or alpha == 0. */
static void gemm_scale_c(const gemm_args *g)
{
    for (int i = 0; i < g->m; i++) {
        float *c_row = g->c + (size_t)i * g->ldc;
        for (int j = 0; j < g->n; j++)
            c_row[j] = g->beta == 0.0f ? 0.0f : g->beta * c_row[j];
    }
}

/* Width of the column tiles: as wide as GEMM_NC allows, but narrow enough
 * that a short, wide C (a conv's [out_channels, out_h*out_w]) still gives
 * every thread a tile.  A multiple of GEMM_NR. */
static int gemm_tile_width(int m, int n)
{
    int row_tiles = (m + GEMM_MC - 1) / GEMM_MC;
    int threads = ct_cpu_max_threads();
    int col_tiles = (threads + row_tiles - 1) / row_tiles;
    int width = (n + col_tiles - 1) / col_tiles;
    width = (width + GEMM_NR - 1) / GEMM_NR * GEMM_NR;
    return width < GEMM_NC ? width : GEMM_NC;
}

void ct_cpu_gemm_native(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc)
{
    gemm_args g = {trans_a, trans_b, m, n, k, alpha, beta, a, b, c, lda, ldb, ldc};
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0 || alpha == 0.0f) {
        gemm_scale_c(&g);
        return;
    }
    int tile_width = gemm_tile_width(m, n);
    int row_tiles = (m + GEMM_MC - 1) / GEMM_MC;
    int col_tiles = (n + tile_width - 1) / tile_width;
    bool parallel = (double)m * n * k >= GEMM_PARALLEL_MIN_FLOPS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int tile = 0; tile < row_tiles * col_tiles; tile++) {
        int i0 = tile / col_tiles * GEMM_MC;
        int j0 = tile % col_tiles * tile_width;
        int rows = m - i0 < GEMM_MC ? m - i0 : GEMM_MC;
        int cols = n - j0 < tile_width ? n - j0 : tile_width;
        gemm_tile(&g, i0, rows, j0, cols);
    }
}

#ifdef CT_HAVE_OPENBLAS

void ct_cpu_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    ct_cpu_openmp_region(); /* OpenBLAS's threads are OpenMP's */
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

const char *ct_cpu_gemm_name(void) { return "openblas"; }

const char *ct_cpu_blas_core(void)
{
    return openblas_get_corename();
}

/* Kernel sets of OpenBLAS 0.3 with AVX2 and FMA (or AVX-512). */
static bool blas_core_has_avx2(const char *core)
{
    static const char *const vector_cores[] = {"haswell", "skylakex", "cooperlake",
                                               "sapphirerapids", "zen", "excavator"};
    for (size_t i = 0; i < sizeof vector_cores / sizeof vector_cores[0]; i++)
        if (strcasecmp(core, vector_cores[i]) == 0)
            return true;
    return false;
}

const char *ct_cpu_blas_better_core(void)
{
    const char *core = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE") || !core || blas_core_has_avx2(core))
        return NULL;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
#endif
    return NULL;
}

#else

void ct_cpu_gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    ct_cpu_gemm_native(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char *ct_cpu_gemm_name(void) { return "native"; }

const char *ct_cpu_blas_core(void) { return NULL; }

const char *ct_cpu_blas_better_core(void) { return NULL; }

#endif
