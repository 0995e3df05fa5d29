/*
 * The INT8 GEMM: packed weights, the reference path, and the driver that
 * runs a vector path's panels (int8_paths.h).
 *
 *   out[m, n] = epilogue(acc[m, n]),  acc[m, n] = sum_k w[m, k] * b[k, n] - b_zp * sum_k w[m, k]
 *   w: the packed weights [rows, depth]; b: uint8 [depth, n] with any strides
 *   (a conv's im2col matrix, or a linear layer's input read as its transpose);
 *   out: [rows, n] with any strides.
 *
 * The driver packs every panel of b into the workspace (in parallel), then
 * threads take tiles of up to TILE_PANELS_M x TILE_PANELS_N panels; in a
 * tile, each b panel stays in cache while the tile's weight panels stream
 * past it.  Every output comes from one exact int32 sum and an epilogue of
 * its own, so the result is the same bits for any tiling and thread count.
 * Accumulation: out is written with =.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "cpu/threads.h"
#include "quant/int8_paths.h"

enum {
    PACKED_ALIGNMENT = 64,
    TILE_PANELS_M = 8,        /* weight panels in a tile */
    TILE_PANELS_N = 4,        /* b panels in a tile */
    REF_BLOCK = 64,           /* reference: columns summed at once */
    PARALLEL_MIN_MACS = 1 << 18,
};

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

static size_t packed_weight_bytes(const ct_int8_path_i *path, int rows, int depth)
{
    if (!path)
        return (size_t)rows * depth;
    return (size_t)ceil_div(rows, path->mr) * ceil_div(depth, path->k_group) * path->mr *
           path->k_group * path->elem_bytes;
}

/* value into element `index` of an int8 (elem_bytes 1) or int16 array */
static void put_elem(void *array, size_t index, int elem_bytes, int value)
{
    if (elem_bytes == 1)
        ((int8_t *)array)[index] = (int8_t)value;
    else
        ((int16_t *)array)[index] = (int16_t)value;
}

void ct_int8_pack_panels(int rows, int depth, const int8_t *q, int mr, int k_group,
                         int elem_bytes, void *packed)
{
    int groups = ceil_div(depth, k_group);
    size_t index = 0;
    for (int m0 = 0; m0 < rows; m0 += mr)
        for (int g = 0; g < groups; g++)
            for (int r = 0; r < mr; r++)
                for (int j = 0; j < k_group; j++, index++) {
                    int m = m0 + r, k = g * k_group + j;
                    put_elem(packed, index, elem_bytes,
                             m < rows && k < depth ? q[(size_t)m * depth + k] : 0);
                }
}

ct_status ct_int8_weights_pack(int rows, int depth, const int8_t *q, const float *scales,
                               ct_int8_weights **out)
{
    *out = NULL;
    if (rows <= 0 || depth <= 0 || depth > CT_INT8_MAX_DEPTH)
        return ct_set_error(CT_ERR_ARG,
                            "int8 weights [%d, %d]: expected rows > 0 and 0 < depth <= %d "
                            "(the int32 sums must not overflow)",
                            rows, depth, (int)CT_INT8_MAX_DEPTH);
    ct_int8_kernel kernel = ct_int8_kernel_active();
    const ct_int8_path_i *path = ct_int8_path(kernel);
    size_t bytes = packed_weight_bytes(path, rows, depth);
    ct_int8_weights *w = calloc(1, sizeof *w);
    if (w) {
        w->scales = malloc(sizeof(float) * rows);
        w->row_sums = malloc(sizeof(int32_t) * rows);
        w->values = malloc((size_t)rows * (size_t)depth);
        w->packed = aligned_alloc(PACKED_ALIGNMENT, (bytes + PACKED_ALIGNMENT - 1) /
                                                        PACKED_ALIGNMENT * PACKED_ALIGNMENT);
    }
    if (!w || !w->scales || !w->row_sums || !w->packed || !w->values) {
        ct_int8_weights_free(w);
        return ct_set_error(CT_ERR_MEMORY, "int8 weights [%d, %d]: out of memory", rows, depth);
    }
    w->kernel = kernel;
    w->rows = rows;
    w->depth = depth;
    memcpy(w->scales, scales, sizeof(float) * rows);
    memcpy(w->values, q, (size_t)rows * (size_t)depth);
    for (int m = 0; m < rows; m++) {
        int32_t sum = 0;
        for (int k = 0; k < depth; k++)
            sum += q[(size_t)m * depth + k];
        w->row_sums[m] = sum;
    }
    if (path)
        ct_int8_pack_panels(rows, depth, q, path->mr, path->k_group, path->elem_bytes,
                            w->packed);
    else
        memcpy(w->packed, q, bytes);
    *out = w;
    return CT_OK;
}

void ct_int8_weights_free(ct_int8_weights *w)
{
    if (!w)
        return;
    free(w->scales);
    free(w->row_sums);
    free(w->packed);
    free(w->values);
    free(w);
}

void ct_int8_store_row(const ct_int8_gemm_args *g, int m, int n0, int cols, const void *row)
{
    ptrdiff_t at = m * g->out.row_stride + n0 * g->out.col_stride, step = g->out.col_stride;
    if (g->e->out_u8) {
        uint8_t *out = (uint8_t *)g->out.data + at;
        for (int j = 0; j < cols; j++)
            out[j * step] = ((const uint8_t *)row)[j];
    } else {
        float *out = (float *)g->out.data + at;
        for (int j = 0; j < cols; j++)
            out[j * step] = ((const float *)row)[j];
    }
}

/* The reference: each sum in plain C, REF_BLOCK columns at a time. */
static void gemm_ref(const ct_int8_gemm_args *g, bool threaded)
{
    const ct_int8_weights *w = g->w;
    const int8_t *a = w->packed;
    const uint8_t *b = g->b.data;
    bool parallel = threaded && (double)w->rows * g->n * w->depth >= PARALLEL_MIN_MACS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int m = 0; m < w->rows; m++) {
        ct_int8_row row = ct_int8_row_of(g, m);
        for (int n0 = 0; n0 < g->n; n0 += REF_BLOCK) {
            int cols = g->n - n0 < REF_BLOCK ? g->n - n0 : REF_BLOCK;
            int32_t acc[REF_BLOCK] = {0};
            for (int k = 0; k < w->depth; k++) {
                int32_t weight = a[(size_t)m * w->depth + k];
                const uint8_t *b_row = b + k * g->b.row_stride + n0 * g->b.col_stride;
                for (int j = 0; j < cols; j++)
                    acc[j] += weight * b_row[j * g->b.col_stride];
            }
            for (int j = 0; j < cols; j++)
                ct_int8_epilogue_store(g, row, acc[j], m, n0 + j);
        }
    }
}

/* b[k, n], from its matrix or its images. */
static inline int b_value(const ct_int8_gemm_args *g, int k, int n)
{
    if (g->image)
        return g->image->xp[g->image->row_offset[k] + ct_int8_image_column(g->image, n)];
    return ((const uint8_t *)g->b.data)[k * g->b.row_stride + n * g->b.col_stride];
}

/* Rows [first_group * k_group, depth) of a b panel, and everything the
 * path's pack_b_panel does not do: any strides, the last columns, zeros
 * past the edges. */
static void pack_b_rest(const ct_int8_gemm_args *g, const ct_int8_path_i *path, int n0,
                        int first_group, void *panel)
{
    int depth = g->w->depth, groups = ceil_div(depth, path->k_group);
    for (int group = first_group; group < groups; group++)
        for (int c = 0; c < path->nr; c++)
            for (int j = 0; j < path->k_group; j++) {
                int k = group * path->k_group + j, n = n0 + c;
                int value = k < depth && n < g->n ? b_value(g, k, n) : 0;
                put_elem(panel, ((size_t)group * path->nr + c) * path->k_group + j,
                         path->elem_bytes, value);
            }
}

static size_t b_panel_bytes(const ct_int8_path_i *path, int depth)
{
    return (size_t)ceil_div(depth, path->k_group) * path->nr * path->k_group * path->elem_bytes;
}

size_t ct_int8_gemm_workspace(const ct_int8_weights *w, int n)
{
    const ct_int8_path_i *path = ct_int8_path(w->kernel);
    return path ? (size_t)ceil_div(n, path->nr) * b_panel_bytes(path, w->depth) : 0;
}

static void gemm_panels(const ct_int8_gemm_args *g, const ct_int8_path_i *path, char *packed_b,
                        bool threaded)
{
    const ct_int8_weights *w = g->w;
    int k_groups = ceil_div(w->depth, path->k_group), full_groups = w->depth / path->k_group;
    int panels_m = ceil_div(w->rows, path->mr), panels_n = ceil_div(g->n, path->nr);
    size_t a_bytes = (size_t)k_groups * path->mr * path->k_group * path->elem_bytes;
    size_t b_bytes = b_panel_bytes(path, w->depth);
    bool parallel = threaded && (double)w->rows * g->n * w->depth >= PARALLEL_MIN_MACS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int panel = 0; panel < panels_n; panel++) {
        int n0 = panel * path->nr;
        char *dst = packed_b + panel * b_bytes;
        int cols = g->n - n0 < path->nr ? g->n - n0 : path->nr;
        bool fast;
        if (g->image) {
            fast = path->pack_image_panel && path->pack_image_panel(g, w->depth, n0, cols, dst);
        } else {
            fast = g->b.col_stride == 1 && (cols == path->nr || path->packs_partial);
            if (fast)
                path->pack_b_panel(g, w->depth, n0, cols, dst);
        }
        pack_b_rest(g, path, n0, fast ? full_groups : 0, dst);
    }
    int tiles_m = ceil_div(panels_m, TILE_PANELS_M), tiles_n = ceil_div(panels_n, TILE_PANELS_N);
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int tile = 0; tile < tiles_m * tiles_n; tile++) {
        int pm0 = tile / tiles_n * TILE_PANELS_M, pn0 = tile % tiles_n * TILE_PANELS_N;
        int pm1 = pm0 + TILE_PANELS_M < panels_m ? pm0 + TILE_PANELS_M : panels_m;
        int pn1 = pn0 + TILE_PANELS_N < panels_n ? pn0 + TILE_PANELS_N : panels_n;
        for (int pn = pn0; pn < pn1; pn++) {
            int n0 = pn * path->nr, cols = g->n - n0 < path->nr ? g->n - n0 : path->nr;
            for (int pm = pm0; pm < pm1; pm++) {
                int m0 = pm * path->mr, rows = w->rows - m0 < path->mr ? w->rows - m0 : path->mr;
                path->tile(g, k_groups, (const char *)w->packed + pm * a_bytes,
                           packed_b + pn * b_bytes, m0, rows, n0, cols);
            }
        }
    }
}

static void gemm_run(ct_int8_gemm_args *g, ct_quant_act b_q, void *workspace, bool threaded)
{
    const ct_int8_epilogue *e = g->e;
    CT_ASSERT(g->n >= 0 && b_q.scale > 0.0f && b_q.zero_point >= 0 && b_q.zero_point <= 255);
    CT_ASSERT(!e->out_u8 || (e->out_q.scale > 0.0f && e->out_q.zero_point >= 0 &&
                             e->out_q.zero_point <= 255));
    g->b_zero_point = b_q.zero_point;
    g->b_scale = b_q.scale;
    g->out_inv_scale = e->out_u8 ? 1.0f / e->out_q.scale : 0.0f;
    if (g->n == 0)
        return;
    const ct_int8_path_i *path = ct_int8_path(g->w->kernel);
    CT_ASSERT(path || !g->image);
    if (path)
        gemm_panels(g, path, workspace, threaded);
    else
        gemm_ref(g, threaded);
}

void ct_int8_gemm_threaded(const ct_int8_weights *w, int n, ct_int8_matrix b, ct_quant_act b_q,
                           const ct_int8_epilogue *e, ct_int8_matrix out, void *workspace,
                           bool threaded)
{
    ct_int8_gemm_args g = {.w = w, .n = n, .b = b, .out = out, .e = e};
    gemm_run(&g, b_q, workspace, threaded);
}

void ct_int8_gemm_image(const ct_int8_weights *w, int n, const ct_int8_image *image,
                        ct_quant_act b_q, const ct_int8_epilogue *e, ct_int8_matrix out,
                        void *workspace, bool threaded)
{
    CT_ASSERT(ct_int8_image_packing(w->kernel));
    ct_int8_gemm_args g = {.w = w, .n = n, .out = out, .image = image, .e = e};
    gemm_run(&g, b_q, workspace, threaded);
}

void ct_int8_gemm(const ct_int8_weights *w, int n, ct_int8_matrix b, ct_quant_act b_q,
                  const ct_int8_epilogue *e, ct_int8_matrix out, void *workspace)
{
    ct_int8_gemm_threaded(w, n, b, b_q, e, out, workspace, true);
}
