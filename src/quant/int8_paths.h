/*
 * Inside the INT8 kernels: what the vector paths (gemm_avx2.c, gemm_vnni.c)
 * give the shared GEMM driver (gemm.c).
 *
 * A vector path multiplies panels.  The weights are packed once into
 * panels of MR rows: [ceil(rows/MR)][ceil(depth/KG)][MR][KG], and the
 * activations, at every call, into panels of NR columns:
 * [ceil(n/NR)][ceil(depth/KG)][NR][KG], KG consecutive k of one row or column
 * side by side, zeros past the edges (a zero weight or column adds nothing).
 * Elements are int8/uint8 (VNNI: KG = 4, one vpdpbusd) or int16 (AVX2:
 * KG = 2, one vpmaddwd).  The reference path keeps the weights as [rows, depth].
 */
#ifndef CT_QUANT_INT8_PATHS_H
#define CT_QUANT_INT8_PATHS_H

#include "cpu/simd.h"
#include "quant/int8.h"

/* A convolution's im2col matrix read straight from its padded images
 * (stride 1 along w), not copied: column n is pixel p = n % image_columns of
 * image n / image_columns, at (oh, ow) = (p / out_w, p % out_w), and
 *   b[k, n] = xp[image * image_bytes + row_offset[k] + oh * row_step + ow]
 * with CT_INT8_IMAGE_SLACK readable bytes after the last image. */
typedef struct ct_int8_image {
    const uint8_t *xp;
    const int32_t *row_offset; /* [depth]: c * plane + i * dilation_h * wp + j * dilation_w */
    int image_columns, out_w;
    ptrdiff_t image_bytes, row_step;
} ct_int8_image;
enum { CT_INT8_IMAGE_SLACK = 128 };

static inline ptrdiff_t ct_int8_image_column(const ct_int8_image *im, int n)
{
    int p = n % im->image_columns;
    return (ptrdiff_t)(n / im->image_columns) * im->image_bytes +
           (ptrdiff_t)(p / im->out_w) * im->row_step + p % im->out_w;
}

/* One GEMM call as the tiles see it. */
typedef struct ct_int8_gemm_args {
    const ct_int8_weights *w;
    int n;
    ct_int8_matrix b, out;
    const ct_int8_image *image; /* non-NULL: b is this, not b's matrix */
    int32_t b_zero_point;
    float b_scale;
    float out_inv_scale; /* 1 / e->out_q.scale when e->out_u8 */
    const ct_int8_epilogue *e;
} ct_int8_gemm_args;

typedef struct ct_int8_path_i {
    int mr, nr, k_group;   /* panel geometry (above) */
    int elem_bytes;        /* 1: int8/uint8, 2: int16 */
    bool packs_partial;    /* pack_b_panel takes cols < nr */
    /* The panel of columns [n0, n0 + cols) of b (cols == nr unless
     * packs_partial; zeros from cols to nr), b's columns contiguous
     * (col_stride 1), rows [0, depth / k_group * k_group) only: the shared
     * code packs the rest. */
    void (*pack_b_panel)(const ct_int8_gemm_args *g, int depth, int n0, int cols, void *panel);
    /* The same from g->image, where it can (false: the shared code packs
     * the whole panel); NULL: never (see ct_int8_image_packing). */
    bool (*pack_image_panel)(const ct_int8_gemm_args *g, int depth, int n0, int cols,
                             void *panel);
    /* out[m0 .. m0+rows, n0 .. n0+cols] = epilogue(a_panel . b_panel), rows <= mr,
     * cols <= nr; k_groups = ceil(depth / k_group). */
    void (*tile)(const ct_int8_gemm_args *g, int k_groups, const void *a_panel,
                 const void *b_panel, int m0, int rows, int n0, int cols);
    /* q[i] = ct_int8_requantize(x[i], inv_scale, zero_point) */
    void (*quantize)(int64_t count, const float *x, float inv_scale, int32_t zero_point,
                     uint8_t *q);
} ct_int8_path_i;

#ifdef CT_CPU_HAVE_AVX2_KERNELS
extern const ct_int8_path_i ct_int8_avx2_path;
extern const ct_int8_path_i ct_int8_vnni_path;
#endif

/* The vector path of a kernel; NULL for the reference. */
const ct_int8_path_i *ct_int8_path(ct_int8_kernel kernel);

/* Everything of the epilogue that depends on the row m alone. */
typedef struct ct_int8_row {
    int32_t correction; /* b_zp * row_sums[m] */
    float scale;        /* b_scale * w_scale[m] */
    float bias;         /* bias[m] or 0 */
} ct_int8_row;

static inline ct_int8_row ct_int8_row_of(const ct_int8_gemm_args *g, int m)
{
    ct_int8_row row = {g->b_zero_point * g->w->row_sums[m], g->b_scale * g->w->scales[m],
                       g->e->bias ? g->e->bias[m] : 0.0f};
    return row;
}

/* The epilogue of one sum acc = sum_k w[m, k] * b[k, n], written to out
 * (the scalar rule; the vector paths compute the same bits). */
static inline void ct_int8_epilogue_store(const ct_int8_gemm_args *g, ct_int8_row row,
                                          int32_t acc, int m, int n)
{
    float v = ct_int8_dequantize_sum(acc - row.correction, row.scale, row.bias, g->e->relu);
    ptrdiff_t at = m * g->out.row_stride + n * g->out.col_stride;
    if (g->e->out_u8)
        ((uint8_t *)g->out.data)[at] =
            ct_int8_requantize(v, g->out_inv_scale, g->e->out_q.zero_point);
    else
        ((float *)g->out.data)[at] = v;
}

/* out[m, n0 + j] = row[j] for j < cols, row float or uint8 as the output
 * is: where a vector path's tile is partial or the output strided. */
void ct_int8_store_row(const ct_int8_gemm_args *g, int m, int n0, int cols, const void *row);

/* ct_int8_gemm, on the calling thread alone unless `threaded` (a caller
 * that runs GEMMs in parallel itself: the convolution's images). */
void ct_int8_gemm_threaded(const ct_int8_weights *w, int n, ct_int8_matrix b, ct_quant_act b_q,
                           const ct_int8_epilogue *e, ct_int8_matrix out, void *workspace,
                           bool threaded);
/* The same with b read from padded images; only where
 * ct_int8_image_packing(w->kernel). */
void ct_int8_gemm_image(const ct_int8_weights *w, int n, const ct_int8_image *image,
                        ct_quant_act b_q, const ct_int8_epilogue *e, ct_int8_matrix out,
                        void *workspace, bool threaded);
/* Whether the path packs panels from images on this CPU (VNNI with AVX-512
 * VBMI's byte permutes). */
bool ct_int8_image_packing(ct_int8_kernel kernel);
/* Tests: false makes ct_int8_image_packing false everywhere (the im2col
 * matrix on every path), true restores it.  Weights and workspaces sized
 * under one setting must run under the same. */
void ct_int8_image_packing_allow(bool allow);

/* The packed-weight layout (above): element (m, k) of q into panels. */
void ct_int8_pack_panels(int rows, int depth, const int8_t *q, int mr, int k_group,
                         int elem_bytes, void *packed);

#endif
