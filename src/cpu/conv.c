/*
 * 2-D convolution on the CPU: im2col + GEMM, col2im for the data gradient.
 * It runs any shape; the direct (conv_avx2.c) and Winograd
 * (conv_winograd.c) kernels run the shapes they fit faster, and the CPU's
 * op table (cpu/table.c) says which is preferred where.
 *
 * Per image and per group g (Cg = C/groups input channels, Og = O/groups
 * output channels, K = Cg*KH*KW, P = out_h*out_w):
 *   col[c*KH*KW + i*KW + j, oh*OW + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
 *                                          (0 in the padding)     col_g: [K, P]
 *   forward:          y_g  [Og, P] = w_g [Og, K]   . col_g [K, P]
 *   backward data:    col_g [K, P] = w_g^T [K, Og] . dy_g  [Og, P],  dx = col2im(col)
 *   backward weight:  dw_g [Og, K] = sum_n dy_g [Og, P] . col_g^T [P, K]
 * The groups of one image are consecutive row blocks of col, x, y and w, so
 * each group is a sub-matrix with the full leading dimension.  A 1x1 conv
 * with stride 1 and no padding has col == x and skips im2col.
 *
 * Small planes (a ResNet's 4x4 and 8x8 layers) make P too narrow for a GEMM
 * to run well, so G images share one GEMM (conv_image_group): col is
 * [K, G*P], image k in columns [k*P, (k+1)*P), and y and dy pass through a
 * [O, G*P] buffer (conv_gather / conv_scatter).
 *
 * Threads: every GEMM is called outside any parallel region, so that it can
 * thread itself (the native GEMM over tiles of C, OpenBLAS with its pool);
 * im2col and col2im run in parallel over the rows of col or over channels.
 * Calling a threaded BLAS from inside an OpenMP region would either
 * oversubscribe the cores or need OpenBLAS's global single-thread switch.
 * (Link the OpenMP build of OpenBLAS, libopenblas0-openmp: it shares the
 * OpenMP thread pool, whereas the pthread build's threads and OpenMP's
 * spin-waiting threads fight over the cores between every two calls.)
 * The image groups run one after the other, so the workspace is one group's
 * col matrix (and [O, G*P] buffer) whatever the thread count, and backward
 * weight sums the groups in order with beta = 1: the result is the same
 * bits from run to run, and with the native GEMM the same for any thread
 * count.
 *
 * Accumulation: all outputs (y, dx, dw, db) are written with =.
 */
#include <string.h>

#include "core/error.h"
#include "core/window_math.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_winograd.h"
#include "cpu/simd.h"
#include "cpu/kernels.h"
#include "cpu/lanes.h"
#include "cpu/threads.h"

/* Below this many elements, im2col/col2im/bias run on one thread. */
enum { CONV_PARALLEL_MIN_ELEMENTS = 1 << 15 };

/* Images per GEMM: enough for n = G*P >= CONV_GEMM_MIN_N, while one group's
 * col matrix stays under CONV_COL_MAX_FLOATS (16 MiB). */
enum { CONV_GEMM_MIN_N = 256, CONV_COL_MAX_FLOATS = 1 << 22 };

/* True when x itself is the col matrix: 1x1 kernel, stride 1, no padding. */
static bool conv_is_pointwise(const ct_conv2d_shape *s)
{
    return s->kernel_h == 1 && s->kernel_w == 1 && s->stride_h == 1 && s->stride_w == 1 &&
           s->pad_h == 0 && s->pad_w == 0;
}

/* Rows of one group's col matrix: K = Cg*KH*KW. */
static int conv_group_depth(const ct_conv2d_shape *s)
{
    return s->in_channels / s->groups * s->kernel_h * s->kernel_w;
}

static void conv_check_shape(const ct_conv2d_shape *s)
{
    CT_ASSERT(s->groups > 0 && s->in_channels % s->groups == 0 &&
              s->out_channels % s->groups == 0);
    CT_ASSERT(s->out_h == ct_window_count(s->in_h, s->kernel_h, s->stride_h, s->pad_h,
                                          s->dilation_h) &&
              s->out_w == ct_window_count(s->in_w, s->kernel_w, s->stride_w, s->pad_w,
                                          s->dilation_w));
}

/* The outputs o in [lo, hi) (clamped to [0, n_out)) whose input index
 * o*stride + offset falls inside [0, n_in). */
/* One row (c, i, j) of col from the plane x[c]:
 * row[oh*OW + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw], 0 outside. */
static void conv_im2col_row(const ct_conv2d_shape *s, const float *plane, int i, int j,
                            float *row)
{
    int w_offset = ct_window_input(0, j, s->stride_w, s->pad_w, s->dilation_w);
    int ow_lo, ow_hi;
    ct_window_valid_range(w_offset, s->stride_w, s->in_w, s->out_w, &ow_lo, &ow_hi);
    for (int oh = 0; oh < s->out_h; oh++) {
        int ih = ct_window_input(oh, i, s->stride_h, s->pad_h, s->dilation_h);
        float *out = row + (size_t)oh * s->out_w;
        if (ih < 0 || ih >= s->in_h) {
            memset(out, 0, sizeof(float) * s->out_w);
            continue;
        }
        const float *in = plane + (size_t)ih * s->in_w;
        for (int ow = 0; ow < ow_lo; ow++)
            out[ow] = 0.0f;
        for (int ow = ow_lo; ow < ow_hi; ow++)
            out[ow] = in[ow * s->stride_w + w_offset];
        for (int ow = ow_hi; ow < s->out_w; ow++)
            out[ow] = 0.0f;
    }
}

/* col: [C*KH*KW, ld] from n_images images x: [n_images, C, in_h, in_w];
 * image k fills columns [k*P, (k+1)*P), P = out_h*out_w. */
static void conv_im2col(const ct_conv2d_shape *s, const float *x, int n_images, float *col,
                        size_t ld)
{
    int kernel_area = s->kernel_h * s->kernel_w;
    int rows = s->in_channels * kernel_area, items = rows * n_images;
    size_t plane = (size_t)s->in_h * s->in_w, out_plane = (size_t)s->out_h * s->out_w;
    bool parallel = (double)items * out_plane >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int item = 0; item < items; item++) {
        int image = item / rows, row = item % rows;
        int c = row / kernel_area, i = row % kernel_area / s->kernel_w, j = row % s->kernel_w;
        conv_im2col_row(s, x + ((size_t)image * s->in_channels + c) * plane, i, j,
                        col + row * ld + image * out_plane);
    }
}

/* The adjoint of conv_im2col: dx[k, c, ih, iw] = sum of the col entries
 * that were copied from (k, c, ih, iw).  Each thread owns whole channels and
 * adds the rows (i, j) of its channel in a fixed order, so the sum is
 * deterministic.  dx: [n_images, C, in_h, in_w], written with =. */
static void conv_col2im(const ct_conv2d_shape *s, const float *col, size_t ld, int n_images,
                        float *dx)
{
    int kernel_area = s->kernel_h * s->kernel_w, items = s->in_channels * n_images;
    size_t plane = (size_t)s->in_h * s->in_w, out_plane = (size_t)s->out_h * s->out_w;
    bool parallel = (double)items * kernel_area * out_plane >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int item = 0; item < items; item++) {
        int image = item / s->in_channels, c = item % s->in_channels;
        float *dx_plane = dx + (size_t)item * plane;
        memset(dx_plane, 0, sizeof(float) * plane);
        for (int i = 0; i < s->kernel_h; i++) {
            for (int j = 0; j < s->kernel_w; j++) {
                const float *row = col + ((size_t)c * kernel_area + i * s->kernel_w + j) * ld +
                                   image * out_plane;
                int w_offset = ct_window_input(0, j, s->stride_w, s->pad_w, s->dilation_w);
                int ow_lo, ow_hi;
                ct_window_valid_range(w_offset, s->stride_w, s->in_w, s->out_w, &ow_lo, &ow_hi);
                for (int oh = 0; oh < s->out_h; oh++) {
                    int ih = ct_window_input(oh, i, s->stride_h, s->pad_h, s->dilation_h);
                    if (ih < 0 || ih >= s->in_h)
                        continue;
                    float *dx_row = dx_plane + (size_t)ih * s->in_w;
                    const float *col_row = row + (size_t)oh * s->out_w;
                    for (int ow = ow_lo; ow < ow_hi; ow++)
                        dx_row[ow * s->stride_w + w_offset] += col_row[ow];
                }
            }
        }
    }
}

/* y[n, o, :] = relu?(y[n, o, :] + bias[o])  (y: [N, O, out_h*out_w]; bias may
 * be NULL).  relu(v) = v < 0 ? 0 : v, so NaN passes as in torch.relu. */
static void conv_epilogue(const ct_conv2d_shape *s, const float *bias, bool relu, float *y)
{
    size_t out_plane = (size_t)s->out_h * s->out_w;
    int planes = s->n_batch * s->out_channels;
    bool parallel = (double)planes * out_plane >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int plane = 0; plane < planes; plane++) {
        float value = bias ? bias[plane % s->out_channels] : 0.0f;
        float *y_plane = y + plane * out_plane;
        for (size_t p = 0; p < out_plane; p++) {
            float v = y_plane[p] + value;
            y_plane[p] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

/* Images per GEMM (see the top of the file); 1 for a pointwise conv, whose
 * col is x itself. */
static int conv_image_group(const ct_conv2d_shape *s)
{
    size_t out_plane = (size_t)s->out_h * s->out_w;
    size_t col_floats = (size_t)s->in_channels * s->kernel_h * s->kernel_w * out_plane;
    if (conv_is_pointwise(s) || s->n_batch <= 1 || out_plane >= CONV_GEMM_MIN_N)
        return 1;
    size_t group = (CONV_GEMM_MIN_N + out_plane - 1) / out_plane;
    size_t fit = CONV_COL_MAX_FLOATS / (col_floats > 0 ? col_floats : 1);
    group = group < fit ? group : fit;
    group = group < (size_t)s->n_batch ? group : (size_t)s->n_batch;
    return group > 1 ? (int)group : 1;
}

/* buffer[o, k*P + p] = images[k, o, p] for n_images images of [O, P]. */
static void conv_gather(const ct_conv2d_shape *s, int n_images, const float *images,
                        float *buffer)
{
    size_t out_plane = (size_t)s->out_h * s->out_w, ld = out_plane * n_images;
    int items = n_images * s->out_channels;
    bool parallel = (double)items * out_plane >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int item = 0; item < items; item++) {
        int image = item / s->out_channels, o = item % s->out_channels;
        memcpy(buffer + o * ld + image * out_plane, images + (size_t)item * out_plane,
               sizeof(float) * out_plane);
    }
}

/* images[k, o, p] = buffer[o, k*P + p]: the inverse of conv_gather. */
static void conv_scatter(const ct_conv2d_shape *s, int n_images, const float *buffer,
                         float *images)
{
    size_t out_plane = (size_t)s->out_h * s->out_w, ld = out_plane * n_images;
    int items = n_images * s->out_channels;
    bool parallel = (double)items * out_plane >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int item = 0; item < items; item++) {
        int image = item / s->out_channels, o = item % s->out_channels;
        memcpy(images + (size_t)item * out_plane, buffer + o * ld + image * out_plane,
               sizeof(float) * out_plane);
    }
}

/* The kernel indices [*first, *first + *count) of one dimension that land
 * inside the input for some output; false when none does. */
static bool live_taps(int in, int out, int kernel, int stride, int pad, int dilation,
                      int *first, int *count)
{
    int lo = -1, hi = -1;
    for (int i = 0; i < kernel; i++)
        for (int o = 0; o < out; o++) {
            int64_t at = (int64_t)o * stride - pad + (int64_t)i * dilation;
            if (at >= 0 && at < in) {
                lo = lo < 0 ? i : lo;
                hi = i;
                break;
            }
        }
    *first = lo;
    *count = hi - lo + 1;
    return lo >= 0;
}

bool ct_cpu_conv2d_cropped(const ct_conv2d_shape *s, ct_conv2d_shape *cropped, int *first_row,
                           int *first_column)
{
    int rows = 0, columns = 0;
    if (!live_taps(s->in_h, s->out_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h,
                   first_row, &rows) ||
        !live_taps(s->in_w, s->out_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w,
                   first_column, &columns) ||
        (rows == s->kernel_h && columns == s->kernel_w))
        return false;
    *cropped = *s;
    cropped->kernel_h = rows;
    cropped->kernel_w = columns;
    /* window o's tap i' is the whole kernel's tap first + i' */
    cropped->pad_h = s->pad_h - *first_row * s->dilation_h;
    cropped->pad_w = s->pad_w - *first_column * s->dilation_w;
    return cropped->pad_h >= 0 && cropped->pad_w >= 0 &&
           ct_window_count(s->in_h, rows, s->stride_h, cropped->pad_h, s->dilation_h) ==
               s->out_h &&
           ct_window_count(s->in_w, columns, s->stride_w, cropped->pad_w, s->dilation_w) ==
               s->out_w;
}

void ct_cpu_conv2d_crop_weights(const ct_conv2d_shape *s, const ct_conv2d_shape *cropped,
                                int first_row, int first_column, const float *w, float *cw)
{
    int64_t kernels = (int64_t)s->out_channels * (s->in_channels / s->groups);
    for (int64_t k = 0; k < kernels; k++)
        for (int i = 0; i < cropped->kernel_h; i++)
            for (int j = 0; j < cropped->kernel_w; j++)
                cw[(k * cropped->kernel_h + i) * cropped->kernel_w + j] =
                    w[(k * s->kernel_h + first_row + i) * s->kernel_w + first_column + j];
}

void ct_cpu_conv2d_uncrop_weights(const ct_conv2d_shape *s, const ct_conv2d_shape *cropped,
                                  int first_row, int first_column, const float *cw, float *w)
{
    int64_t kernels = (int64_t)s->out_channels * (s->in_channels / s->groups);
    for (int64_t k = 0; k < kernels; k++)
        for (int i = 0; i < s->kernel_h; i++)
            for (int j = 0; j < s->kernel_w; j++) {
                int ci = i - first_row, cj = j - first_column;
                bool live = ci >= 0 && ci < cropped->kernel_h && cj >= 0 && cj < cropped->kernel_w;
                w[(k * s->kernel_h + i) * s->kernel_w + j] =
                    live ? cw[(k * cropped->kernel_h + ci) * cropped->kernel_w + cj] : 0.0f;
            }
}

size_t ct_cpu_conv2d_im2col_workspace(const ct_conv2d_shape *s)
{
    /* one group's col matrix and [O, G*P] buffer, however many threads
     * (see the top of the file) */
    size_t group_columns = (size_t)conv_image_group(s) * s->out_h * s->out_w;
    size_t bytes = conv_is_pointwise(s) ? 0
                                        : sizeof(float) * (size_t)s->in_channels * s->kernel_h *
                                              s->kernel_w * group_columns;
    if (conv_image_group(s) > 1)
        bytes += sizeof(float) * (size_t)s->out_channels * group_columns;
    return bytes;
}

size_t ct_cpu_conv2d_workspace(const ct_conv2d_shape *s, int n_threads)
{
    size_t bytes = ct_cpu_conv2d_im2col_workspace(s);
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_conv2d_direct_fits(s)) {
        size_t direct = ct_cpu_conv2d_direct_workspace(s, n_threads);
        bytes = direct > bytes ? direct : bytes;
    }
    if (ct_cpu_conv2d_winograd_fits(s)) {
        size_t winograd = ct_cpu_conv2d_winograd_workspace(s);
        bytes = winograd > bytes ? winograd : bytes;
    }
#else
    (void)n_threads;
#endif
    return bytes;
}

static void conv_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                         const float *bias, bool relu, float *y, void *workspace)
{
    conv_check_shape(s);
    int og = s->out_channels / s->groups, depth = conv_group_depth(s), group = conv_image_group(s);
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_plane = (size_t)s->out_h * s->out_w, y_image = s->out_channels * out_plane;
    float *buffer = (float *)workspace + (size_t)s->in_channels * s->kernel_h * s->kernel_w *
                                             out_plane * group;
    for (int n0 = 0; n0 < s->n_batch; n0 += group) {
        int images = s->n_batch - n0 < group ? s->n_batch - n0 : group;
        size_t ld = out_plane * images;
        const float *col = x + n0 * x_image;
        if (!conv_is_pointwise(s)) {
            conv_im2col(s, col, images, workspace, ld);
            col = workspace;
        }
        float *out = images == 1 ? y + n0 * y_image : buffer;
        for (int g = 0; g < s->groups; g++)
            ct_cpu_gemm(false, false, og, (int)ld, depth, 1.0f, w + (size_t)g * og * depth,
                        depth, col + g * depth * ld, (int)ld, 0.0f, out + g * og * ld, (int)ld);
        if (images > 1)
            conv_scatter(s, images, buffer, y + n0 * y_image);
    }
    if (bias || relu)
        conv_epilogue(s, bias, relu, y);
}

void ct_cpu_conv2d_forward(const ct_conv2d_shape *s, const float *x, const float *w,
                           const float *bias, float *y, void *workspace)
{
    conv_forward(s, x, w, bias, false, y, workspace);
}

void ct_cpu_conv2d_forward_relu(const ct_conv2d_shape *s, const float *x, const float *w,
                                const float *bias, float *y, void *workspace)
{
    conv_forward(s, x, w, bias, true, y, workspace);
}

void ct_cpu_conv2d_forward_relu_maxpool(const ct_conv2d_shape *s, const float *x,
                                        const float *w, const float *bias, float *y,
                                        float *pooled, void *workspace)
{
    conv_forward(s, x, w, bias, true, y, workspace);
    ct_pool2d_shape pool = {s->n_batch, s->out_channels, s->out_h, s->out_w, s->out_h / 2,
                            s->out_w / 2, 2, 2, 2, 2, 0, 0, false};
    ct_cpu_maxpool2d_forward(&pool, y, pooled);
}

void ct_cpu_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy, const float *w,
                                 float *dx, void *workspace)
{
    conv_check_shape(s);
    int og = s->out_channels / s->groups, depth = conv_group_depth(s), group = conv_image_group(s);
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_plane = (size_t)s->out_h * s->out_w, y_image = s->out_channels * out_plane;
    float *buffer = (float *)workspace + (size_t)s->in_channels * s->kernel_h * s->kernel_w *
                                             out_plane * group;
    bool pointwise = conv_is_pointwise(s);
    for (int n0 = 0; n0 < s->n_batch; n0 += group) {
        int images = s->n_batch - n0 < group ? s->n_batch - n0 : group;
        size_t ld = out_plane * images;
        /* A pointwise conv's col is dx itself (one image at a time). */
        float *col = pointwise ? dx + n0 * x_image : workspace;
        const float *grad = dy + n0 * y_image;
        if (images > 1) {
            conv_gather(s, images, grad, buffer);
            grad = buffer;
        }
        for (int g = 0; g < s->groups; g++)
            ct_cpu_gemm(true, false, depth, (int)ld, og, 1.0f, w + (size_t)g * og * depth, depth,
                        grad + g * og * ld, (int)ld, 0.0f, col + g * depth * ld, (int)ld);
        if (!pointwise)
            conv_col2im(s, col, ld, images, dx + n0 * x_image);
    }
}

void ct_cpu_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x, const float *dy,
                                   float *dw, void *workspace)
{
    conv_check_shape(s);
    int og = s->out_channels / s->groups, depth = conv_group_depth(s), group = conv_image_group(s);
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_plane = (size_t)s->out_h * s->out_w, y_image = s->out_channels * out_plane;
    float *buffer = (float *)workspace + (size_t)s->in_channels * s->kernel_h * s->kernel_w *
                                             out_plane * group;
    if (s->n_batch == 0)
        memset(dw, 0, sizeof(float) * s->out_channels * depth);
    for (int n0 = 0; n0 < s->n_batch; n0 += group) {
        int images = s->n_batch - n0 < group ? s->n_batch - n0 : group;
        size_t ld = out_plane * images;
        const float *col = x + n0 * x_image;
        if (!conv_is_pointwise(s)) {
            conv_im2col(s, col, images, workspace, ld);
            col = workspace;
        }
        const float *grad = dy + n0 * y_image;
        if (images > 1) {
            conv_gather(s, images, grad, buffer);
            grad = buffer;
        }
        for (int g = 0; g < s->groups; g++)
            ct_cpu_gemm(false, true, og, depth, (int)ld, 1.0f, grad + g * og * ld, (int)ld,
                        col + g * depth * ld, (int)ld, n0 == 0 ? 0.0f : 1.0f,
                        dw + (size_t)g * og * depth, depth);
    }
}

/* A linear layer's [n, c] (inner 1): the rows added in order into doubles,
 * a block of channels at a time, so the loop runs along rows (vectors)
 * instead of down columns; the same additions in the same order as the
 * general loop, so the same bits. */
enum { ROW_BLOCK = 256 };

static void row_sums(int n, int c, const float *dy, float *db)
{
    for (int c0 = 0; c0 < c; c0 += ROW_BLOCK) {
        int width = c - c0 < ROW_BLOCK ? c - c0 : ROW_BLOCK;
        double sums[ROW_BLOCK] = {0};
        for (int image = 0; image < n; image++) {
            const float *row = dy + (size_t)image * c + c0;
            for (int k = 0; k < width; k++)
                sums[k] += row[k];
        }
        for (int k = 0; k < width; k++)
            db[c0 + k] = (float)sums[k];
    }
}

void ct_cpu_channel_sum(int n, int c, int inner, const float *dy, float *db)
{
    if (inner == 1 && (double)n * c < CONV_PARALLEL_MIN_ELEMENTS) {
        row_sums(n, c, dy, db);
        return;
    }
    bool parallel = (double)n * c * inner >= CONV_PARALLEL_MIN_ELEMENTS;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int channel = 0; channel < c; channel++)
        db[channel] = (float)ct_lanes_sum_images(n, c, inner, dy, channel);
}
