/*
 * INT8 convolution and linear layers on the INT8 GEMM (gemm.c).
 *
 * Convolution, per image (K = C*KH*KW, P = out_h*out_w):
 *   xp[c, h, w]  = x[c, h - ph, w - pw], x_zp in the padding (the real 0)
 *   col[c*KH*KW + i*KW + j, oh*OW + ow] = xp[c, oh*sh + i*dh, ow*sw + j*dw]    col: [K, P]
 *   y[O, P]      = epilogue(w[O, K] . (col - x_zp))
 * Copying the image into a padded plane first leaves im2col without bounds
 * checks (a row of col is a memcpy at stride 1).  A 1x1 convolution with
 * stride 1 and no padding has col == x and copies nothing.
 * Small planes make thin GEMMs (a 7x7 layer's 49 columns fill two 32-column
 * panels), so G images share one GEMM: col is [K, G*P], image g in columns
 * [g*P, (g+1)*P), and the output passes through a [O, G*P] buffer.
 *
 * Linear: y[n, o] = epilogue(w[o, :] . (x[n, :] - x_zp)), the GEMM with
 * b = x read as its transpose [in, n] and out = y read as [out, n].
 *
 * Threads: where the batch has enough images (groups of them) for every
 * thread, each thread runs whole images, start to end, in a workspace slot
 * of its own: no barrier inside a layer, and each image's copies stay in
 * its core's cache (at batch 64, 2 threads, the per-image teams below
 * spent a third of vgg8_bn's int8 step waiting in OpenMP: docs/perf.md).
 * Otherwise (batch 1) the copies run in parallel over channels and rows of
 * col and the GEMM over tiles of the output, so one image keeps every core
 * busy.  Either way every output is one exact sum and its epilogue: the
 * same bits for any thread count.  Accumulation: y is written with =.
 */
#include <string.h>

#include "core/error.h"
#include "cpu/threads.h"
#include "quant/int8_paths.h"

enum {
    WORKSPACE_ALIGNMENT = 64,
    PARALLEL_MIN_BYTES = 1 << 15,
    GEMM_MIN_COLUMNS = 256,      /* images per GEMM: until the GEMM is this wide */
    GROUP_COL_MAX_BYTES = 1 << 24, /* while their col matrix stays under 16 MiB */
    BATCH_EVEN_UNITS = 4,          /* threads take whole images: units a multiple of the
                                      threads, or at least this many per thread */
};
/* threads take whole images while their slots need no more than this */
#define SLOTS_MAX_BYTES ((size_t)1 << 28)

static size_t align_up(size_t bytes)
{
    return (bytes + WORKSPACE_ALIGNMENT - 1) / WORKSPACE_ALIGNMENT * WORKSPACE_ALIGNMENT;
}

static bool conv_is_pointwise(const ct_conv2d_shape *s)
{
    return s->kernel_h == 1 && s->kernel_w == 1 && s->stride_h == 1 && s->stride_w == 1 &&
           s->pad_h == 0 && s->pad_w == 0;
}

static int padded_h(const ct_conv2d_shape *s) { return s->in_h + 2 * s->pad_h; }
static int padded_w(const ct_conv2d_shape *s) { return s->in_w + 2 * s->pad_w; }

static size_t padded_bytes(const ct_conv2d_shape *s)
{
    return align_up((size_t)s->in_channels * padded_h(s) * padded_w(s));
}

/* Images per GEMM (see the top of the file); 1 for a pointwise conv. */
static int conv_image_group(const ct_conv2d_shape *s)
{
    size_t plane = (size_t)s->out_h * s->out_w;
    size_t image_col = (size_t)s->in_channels * s->kernel_h * s->kernel_w * plane;
    if (conv_is_pointwise(s) || plane == 0 || plane >= GEMM_MIN_COLUMNS)
        return 1;
    size_t wanted = (GEMM_MIN_COLUMNS + plane - 1) / plane;
    size_t fits = GROUP_COL_MAX_BYTES / image_col;
    size_t group = wanted < fits ? wanted : fits;
    group = group < (size_t)s->n_batch ? group : (size_t)s->n_batch;
    return group > 1 ? (int)group : 1;
}

static size_t col_bytes(const ct_conv2d_shape *s)
{
    return align_up((size_t)s->in_channels * s->kernel_h * s->kernel_w * s->out_h * s->out_w *
                    conv_image_group(s));
}

/* The [O, G*P] output of a group's GEMM (none for one image). */
static size_t buffer_bytes(const ct_conv2d_shape *s, bool out_u8)
{
    int group = conv_image_group(s);
    size_t elem = out_u8 ? 1 : sizeof(float);
    return group > 1 ? align_up((size_t)s->out_channels * s->out_h * s->out_w * group * elem) : 0;
}

/* Whether the GEMM packs its panels straight from the padded images (no
 * im2col matrix; ct_int8_image): at stride 1 along w, where the path and
 * the CPU can. */
static bool from_images(const ct_conv2d_shape *s, const ct_int8_weights *w)
{
    return !conv_is_pointwise(s) && s->stride_w == 1 && ct_int8_image_packing(w->kernel);
}

static size_t image_bytes(const ct_conv2d_shape *s)
{
    return (size_t)s->in_channels * padded_h(s) * padded_w(s);
}

/* The copies of one image group: padded images and the row offsets
 * (from_images), or one padded image and the im2col matrix. */
static size_t copies_bytes(const ct_conv2d_shape *s, const ct_int8_weights *w)
{
    if (conv_is_pointwise(s))
        return 0;
    if (from_images(s, w))
        return align_up(image_bytes(s) * conv_image_group(s) + CT_INT8_IMAGE_SLACK) +
               align_up(sizeof(int32_t) * (size_t)w->depth);
    return padded_bytes(s) + col_bytes(s);
}

/* One thread's workspace for one image group: the copies, the group's
 * output buffer and the GEMM's packed panels. */
static size_t slot_bytes(const ct_conv2d_shape *s, const ct_int8_weights *w)
{
    return copies_bytes(s, w) + buffer_bytes(s, false) +
           align_up(ct_int8_gemm_workspace(w, s->out_h * s->out_w * conv_image_group(s)));
}

/* Slots of the workspace: `threads` when threads take whole image groups
 * (see the top of the file), else 1. */
static int conv_slots(const ct_conv2d_shape *s, const ct_int8_weights *w, int threads)
{
    if (threads <= 1)
        return 1;
    int group = conv_image_group(s), units = (s->n_batch + group - 1) / group;
    bool even = units % threads == 0 || units >= BATCH_EVEN_UNITS * threads;
    bool fits = slot_bytes(s, w) <= SLOTS_MAX_BYTES / (size_t)threads;
    return units >= threads && even && fits ? threads : 1;
}

size_t ct_int8_conv2d_workspace(const ct_conv2d_shape *s, const ct_int8_weights *w, int threads)
{
    return (size_t)conv_slots(s, w, threads) * slot_bytes(s, w);
}

/* A short row: a libc call per 1-28 bytes (the planes of 28x28 and
 * smaller layers) cost more than the GEMM, so rows up to 32 bytes are two
 * fixed-size moves that may overlap, which compilers inline. */
static inline void copy_row(uint8_t *dst, const uint8_t *src, int n)
{
    if (n > 32) {
        memcpy(dst, src, (size_t)n);
    } else if (n >= 16) {
        memcpy(dst, src, 16);
        memcpy(dst + n - 16, src + n - 16, 16);
    } else if (n >= 8) {
        memcpy(dst, src, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n >= 4) {
        memcpy(dst, src, 4);
        memcpy(dst + n - 4, src + n - 4, 4);
    } else {
        for (int i = 0; i < n; i++)
            dst[i] = src[i];
    }
}

/* xp: [C, H + 2 ph, W + 2 pw] = one image x: [C, H, W] framed by `zero`. */
static void conv_pad(const ct_conv2d_shape *s, const uint8_t *x, uint8_t zero, uint8_t *xp,
                     bool threaded)
{
    const int hp = padded_h(s), wp = padded_w(s), in_h = s->in_h, in_w = s->in_w;
    const int pad_h = s->pad_h, pad_w = s->pad_w; /* locals: see im2col_row */
    bool parallel = threaded && (size_t)s->in_channels * hp * wp >= PARALLEL_MIN_BYTES;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int c = 0; c < s->in_channels; c++) {
        uint8_t *plane = xp + (size_t)c * hp * wp;
        const uint8_t *in = x + (size_t)c * in_h * in_w;
        memset(plane, zero, (size_t)pad_h * wp);
        for (int h = 0; h < in_h; h++) {
            uint8_t *row = plane + (size_t)(h + pad_h) * wp;
            for (int j = 0; j < pad_w; j++)
                row[j] = row[pad_w + in_w + j] = zero;
            copy_row(row + pad_w, in + (size_t)h * in_w, in_w);
        }
        memset(plane + (size_t)(pad_h + in_h) * wp, zero, (size_t)pad_h * wp);
    }
}

/* One row of col: the window position at `at` (a place in the padded
 * image) for every output pixel. */
static void im2col_row(const ct_conv2d_shape *s, const uint8_t *at, uint8_t *row)
{
    /* locals: the byte stores may alias *s, so fields read in the loops
     * would be read again after every store */
    const size_t in_step = (size_t)s->stride_h * padded_w(s);
    const int out_w = s->out_w, out_h = s->out_h, stride = s->stride_w;
    if (stride == 1) {
        for (int oh = 0; oh < out_h; oh++, at += in_step, row += out_w)
            copy_row(row, at, out_w);
    } else if (stride == 2) { /* a constant stride: the compiler vectorizes it */
        for (int oh = 0; oh < out_h; oh++, at += in_step, row += out_w)
            for (int ow = 0; ow < out_w; ow++)
                row[ow] = at[2 * ow];
    } else {
        for (int oh = 0; oh < out_h; oh++, at += in_step, row += out_w)
            for (int ow = 0; ow < out_w; ow++)
                row[ow] = at[ow * stride];
    }
}

/* Where tap (c, i, j)'s window starts in a padded image: row k = (c*KH +
 * i)*KW + j of the im2col matrix begins there. */
static size_t tap_offset(const ct_conv2d_shape *s, int c, int i, int j)
{
    size_t wp = (size_t)padded_w(s);
    return (size_t)c * padded_h(s) * wp + (size_t)i * s->dilation_h * wp +
           (size_t)j * s->dilation_w;
}

/* col: [C*KH*KW, P] at row stride ld from the padded image xp; row
 * k = (c*KH + i)*KW + j. */
static void conv_im2col(const ct_conv2d_shape *s, const uint8_t *xp, uint8_t *col, size_t ld,
                        bool threaded)
{
    int kernel_area = s->kernel_h * s->kernel_w;
    size_t out_plane = (size_t)s->out_h * s->out_w;
    bool parallel = threaded && (size_t)s->in_channels * kernel_area * out_plane >=
                                    PARALLEL_MIN_BYTES;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int c = 0; c < s->in_channels; c++)
        for (int i = 0; i < s->kernel_h; i++)
            for (int j = 0; j < s->kernel_w; j++) {
                size_t k = ((size_t)c * s->kernel_h + i) * s->kernel_w + j;
                im2col_row(s, xp + tap_offset(s, c, i, j), col + k * ld);
            }
}

/* y[g, o, :] = buffer[o, g*P : (g+1)*P] for the images of a group. */
static void conv_scatter(const ct_conv2d_shape *s, int images, size_t elem, const char *buffer,
                         char *y, bool threaded)
{
    size_t plane_bytes = (size_t)s->out_h * s->out_w * elem, ld = plane_bytes * images;
    int items = images * s->out_channels;
    bool parallel = threaded && items * plane_bytes >= PARALLEL_MIN_BYTES;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (parallel)
    for (int item = 0; item < items; item++) {
        int image = item / s->out_channels, o = item % s->out_channels;
        memcpy(y + item * plane_bytes, buffer + o * ld + image * plane_bytes, plane_bytes);
    }
}

/* Images [n0, n0 + images) of the batch, one group's GEMM, in `slot`. */
static void conv_group(const ct_conv2d_shape *s, const uint8_t *x, ct_quant_act x_q,
                       const ct_int8_weights *w, const ct_int8_epilogue *e, void *y, int n0,
                       int images, void *slot, bool threaded)
{
    int out_plane = s->out_h * s->out_w, columns = images * out_plane;
    size_t x_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t elem = e->out_u8 ? 1 : sizeof(float);
    size_t y_image = (size_t)s->out_channels * out_plane * elem;
    uint8_t *xp = slot;
    char *buffer = (char *)slot + copies_bytes(s, w);
    void *gemm_workspace = buffer + buffer_bytes(s, false);
    char *out = images > 1 ? buffer : (char *)y + n0 * y_image;
    ct_int8_matrix out_matrix = {out, columns, 1};
    if (from_images(s, w)) {
        int32_t *row_offset = (int32_t *)(xp + align_up(image_bytes(s) * conv_image_group(s) +
                                                        CT_INT8_IMAGE_SLACK));
        for (int c = 0, k = 0; c < s->in_channels; c++)
            for (int i = 0; i < s->kernel_h; i++)
                for (int j = 0; j < s->kernel_w; j++, k++)
                    row_offset[k] = (int32_t)tap_offset(s, c, i, j);
        for (int image = 0; image < images; image++)
            conv_pad(s, x + (n0 + image) * x_image, (uint8_t)x_q.zero_point,
                     xp + image * image_bytes(s), threaded);
        ct_int8_image source = {xp, row_offset, out_plane, s->out_w, (ptrdiff_t)image_bytes(s),
                                (ptrdiff_t)s->stride_h * padded_w(s)};
        ct_int8_gemm_image(w, columns, &source, x_q, e, out_matrix, gemm_workspace, threaded);
    } else {
        const uint8_t *b = x + n0 * x_image;
        if (!conv_is_pointwise(s)) {
            uint8_t *col = xp + padded_bytes(s);
            for (int image = 0; image < images; image++) {
                conv_pad(s, x + (n0 + image) * x_image, (uint8_t)x_q.zero_point, xp, threaded);
                conv_im2col(s, xp, col + image * out_plane, columns, threaded);
            }
            b = col;
        }
        ct_int8_matrix b_matrix = {(void *)b, columns, 1};
        ct_int8_gemm_threaded(w, columns, b_matrix, x_q, e, out_matrix, gemm_workspace,
                              threaded);
    }
    if (images > 1)
        conv_scatter(s, images, elem, buffer, (char *)y + n0 * y_image, threaded);
}

/* The images of group `unit` (the last may have fewer). */
static int group_images(const ct_conv2d_shape *s, int group, int unit)
{
    int left = s->n_batch - unit * group;
    return left < group ? left : group;
}

void ct_int8_conv2d_forward(const ct_conv2d_shape *s, const uint8_t *x, ct_quant_act x_q,
                            const ct_int8_weights *w, const ct_int8_epilogue *e, void *y,
                            void *workspace, int threads)
{
    CT_ASSERT(s->groups == 1 && w->rows == s->out_channels &&
              w->depth == s->in_channels * s->kernel_h * s->kernel_w);
    int group = conv_image_group(s), units = (s->n_batch + group - 1) / group;
    int slots = conv_slots(s, w, threads);
    size_t slot = slot_bytes(s, w);
    if (slots == 1) { /* the threads work inside each group */
        for (int unit = 0; unit < units; unit++)
            conv_group(s, x, x_q, w, e, y, unit * group, group_images(s, group, unit),
                       workspace, true);
        return;
    }
    /* dynamic: a thread that loses its core for a while takes fewer images */
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(dynamic, 1) num_threads(slots)
    for (int unit = 0; unit < units; unit++)
        conv_group(s, x, x_q, w, e, y, unit * group, group_images(s, group, unit),
                   (char *)workspace + (size_t)ct_cpu_thread_num() * slot, false);
}

size_t ct_int8_linear_workspace(int n, const ct_int8_weights *w)
{
    return ct_int8_gemm_workspace(w, n);
}

void ct_int8_linear_forward(int n, const uint8_t *x, ct_quant_act x_q, const ct_int8_weights *w,
                            const ct_int8_epilogue *e, void *y, void *workspace)
{
    ct_int8_matrix b = {(void *)x, 1, w->depth};
    ct_int8_matrix out = {y, 1, w->rows};
    ct_int8_gemm(w, n, b, x_q, e, out, workspace);
}
