/*
 * The insides of the Winograd convolution F(4x4, 3x3) shared by its two
 * files: conv_winograd.c (the shape rule, the workspace, the passes and
 * the products) and winograd_transforms.c (the AVX2 transforms of input
 * tiles, output tiles and weights).  Built where CT_CPU_HAVE_AVX2_KERNELS.
 */
#ifndef CT_CPU_WINOGRAD_TRANSFORMS_H
#define CT_CPU_WINOGRAD_TRANSFORMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/panel_tile.h"
#include "cpu/simd.h"

enum {
    LANES = 8,   /* tiles per vector */
    ALPHA = 6,   /* input tile side: TILE + 3 - 1 */
    POINTS = 36, /* ALPHA * ALPHA: GEMMs per block */
    TILE = 4,    /* output tile side */
};

/* One pass as the transforms see it: the tiles of `out` computed from `in`. */
typedef struct wino_pass {
    int in_c, in_h, in_w;    /* x (forward, backward weight) or dy (backward data) */
    int out_c, out_h, out_w; /* y, or dx */
    int pad_h, pad_w;        /* zeros before the input's first row and column */
    int tiles_h, tiles_w;
    int64_t tiles;           /* over the whole batch */
    int block;               /* tiles per block, a multiple of LANES */
} wino_pass;

/* Where a tile is: its image and the first output row and column.  A
 * block's tiles are located once (locate_block), not per channel. */
typedef struct tile_at {
    int64_t image;
    int oh, ow;
} tile_at;

static inline int ceil_div(int a, int b)
{
    return (a + b - 1) / b;
}

/* Whether U[xi] (rows x C) is stored in blocks of 8 rows packed along C,
 * U[xi][row / 8][c][row % 8], for the AVX-512 products (multiply_points):
 * then the tile reads one sequential stream, which the prefetchers keep up
 * with when U comes from memory (inference keeps U between runs: a 14x14
 * layer's 9.4 MB of it, read as eight 1 KB rows at a time, ran at half the
 * speed of the same layer with U in the cache). */
_Static_assert(LANES == CT_TILE_ROWS, "a packed block of U is one transform group's lanes");

static inline bool packed_rows(int rows)
{
    return rows % CT_TILE_ROWS == 0 && ct_cpu_simd_avx512();
}

/* The transforms of a block of tiles. */
typedef enum transform_kind {
    INPUT_TILES,  /* src x or dy (the pass's input) -> dst V */
    GRAD_TILES,   /* src dy (the forward pass's output) -> dst dM */
    OUTPUT_TILES, /* src M -> dst y or dx, + bias, relu */
} transform_kind;

/* One transform over a block (count tiles, `width` columns of V or M):
 * channel by channel, 8 tiles at a time, in parallel over (channel, 8
 * tiles); OUTPUT_TILES adds bias[k] and applies the relu. */
void ct_wino_transform_block(transform_kind kind, const wino_pass *p, const float *src,
                             const tile_at *at, int count, int width, const float *bias,
                             bool relu, float *dst);
/* U[xi, p] = (G w_p G^T)[xi] for the K*C kernels (packed_rows decides U's
 * layout); with flip, U of the backward data pass (w turned by 180 degrees,
 * K and C swapped). */
void ct_wino_weight_transform(const float *w, int out_c, int in_c, bool flip, float *u);
/* dw[p] = G^T dU[., p] G for the count = K*C kernels. */
void ct_wino_weight_grad_transform(const float *du, int count, float *dw);

#endif
