/*
 * The AVX-512 register tile of the panel convolution (conv_panel.c) and of
 * the Winograd products (conv_winograd.c): eight rows of a row-major matrix
 * a, each float broadcast along k, against up to three 16-float vectors of
 * each row of b, 24 accumulators.  Every output is summed in k order, so
 * the bits do not depend on how callers split rows or columns between
 * threads.  Include where AVX-512 kernels are built
 * (CT_CPU_HAVE_AVX2_KERNELS).
 */
#ifndef CT_CPU_PANEL_TILE_H
#define CT_CPU_PANEL_TILE_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>

#define CT_TILE_ROWS 8 /* rows of a per tile */

/* c[8][16*nv] (+)= a[8][depth] . panel[depth][16*nv], a's element (i, p)
 * at a[i * lda + p * a_step] (rows where they lie: a_step 1; eight rows
 * packed along k: lda 1, a_step 8); the last vector of each row of c is
 * stored under `last`.  finish: add the bias, apply the relu. */
static inline __attribute__((always_inline, target("avx512f"))) void
ct_panel_tile(const int nv, __mmask16 last, int depth, const float *a, size_t lda,
              const size_t a_step, const float *panel, int width, float *c, size_t ldc, bool accumulate, bool finish,
              const float *bias, bool relu)
{
    __m512 acc[CT_TILE_ROWS][3];
    for (int i = 0; i < CT_TILE_ROWS; i++)
        for (int j = 0; j < nv; j++)
            acc[i][j] = !accumulate     ? _mm512_setzero_ps()
                        : j == nv - 1 ? _mm512_maskz_loadu_ps(last, c + i * ldc + 16 * j)
                                      : _mm512_loadu_ps(c + i * ldc + 16 * j);
    for (int p = 0; p < depth; p++) {
        const float *row = panel + (size_t)p * width;
        __m512 b[3];
        for (int j = 0; j < nv; j++)
            b[j] = _mm512_loadu_ps(row + 16 * j);
        for (int i = 0; i < CT_TILE_ROWS; i++) {
            __m512 ai = _mm512_set1_ps(a[i * lda + p * a_step]);
            for (int j = 0; j < nv; j++)
                acc[i][j] = _mm512_fmadd_ps(ai, b[j], acc[i][j]);
        }
    }
    for (int i = 0; i < CT_TILE_ROWS; i++) {
        __m512 shift = finish && bias ? _mm512_set1_ps(bias[i]) : _mm512_setzero_ps();
        for (int j = 0; j < nv; j++) {
            __m512 v = finish ? _mm512_add_ps(acc[i][j], shift) : acc[i][j];
            /* max(v, 0) with v first keeps a NaN (the relu's contract) */
            if (finish && relu)
                v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ),
                                         v, _mm512_setzero_ps());
            if (j == nv - 1)
                _mm512_mask_storeu_ps(c + i * ldc + 16 * j, last, v);
            else
                _mm512_storeu_ps(c + i * ldc + 16 * j, v);
        }
    }
}

#endif
