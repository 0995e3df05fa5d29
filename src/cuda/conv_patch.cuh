/*
 * What the convolution GEMMs (conv.cu) read as b: a gather from a source
 * tensor through the convolution's index map, staged through shared memory.
 *
 *   col[(c, tap), pixel] = src[img, c, row, column]
 *
 * where (row, column) is where tap (i, j) of destination pixel (img, r, q)
 * lands in the source, or 0 where it lands in the padding:
 *   forward and weight gradient: src = x, destination = the output plane,
 *     row = r*sh - ph + i*dh (one source position per tap);
 *   backward data ("transposed"): src = dy, destination = the input plane,
 *     row = (r + ph - i*dh) / sh where sh divides it (else no source).
 *
 * Read straight through the map, a warp's 32 destination pixels read 32
 * sources shifted by the tap, crossing row ends: 5 to 7 sectors for 4
 * sectors' worth of bytes (65% on SimpleCNN's 14x14 layer).  Instead a
 * block copies the source rows its pixels read, whole rows of each channel
 * of each image it touches: one contiguous run per (image, channel), read
 * from a sector boundary by consecutive threads (ct_copy_runs), and builds
 * its slices from shared memory.  A tap in the padding reads a word in the
 * patch (the clamped row and column edge, or, from a table, the pixel's
 * own place clamped; read by a neighbour too: no bank conflict, no
 * divergence) and takes 0 instead.
 *
 * The patch: image img_lo's rows, then each later image's, each image as nc
 * blocks (one per channel) of rows*src_w floats.  Where a channel's block is
 * under 32 floats (planes of a few pixels: a warp's pixels span images),
 * each image's blocks start where its one block would if the images' blocks
 * of one channel lay side by side, modulo the 32 banks (conv_patch_pad):
 * with nc * 4 floats an image, 2x2 planes put the 8 images of a warp on
 * the same banks, an 8-way conflict, once patches held many channels.
 * conv_patch_bound bounds it over every tile; a shape whose bound passes
 * CONV_PATCH_MAX reads through the map instead (conv_gather).
 */
#ifndef CT_CUDA_CONV_PATCH_CUH
#define CT_CUDA_CONV_PATCH_CUH

#include <limits.h>

#include "core/window_math.h"
#include "cuda/divmod.cuh"
#include "cuda/gemm.cuh"

enum {
    CONV_PATCH_MAX = 6144, /* floats: 24 KiB, with the tiles under 48 KiB (conv.cu) */
    CONV_PATCH_HEADER = 16, /* floats before a k patch: its conv_patch (conv.cu) */
};

/* A convolution seen from its destination plane. */
struct conv_geometry {
    int n_batch;
    int src_c, src_h, src_w; /* x, or dy when transposed */
    int dst_c, dst_h, dst_w; /* y, or dx when transposed */
    int groups, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
    bool transposed;
    /* the divisors of the index map, for ct_div and ct_mod (divmod.cuh):
     * the destination plane and row, the taps and the kernel's row, the
     * strides (the transposed map divides by them) */
    ct_divmod by_plane, by_dst_w, by_taps, by_kernel_w, by_stride_h, by_stride_w;
    /* a bordered patch's row (conv_border_width, below), and the
     * source's row and plane as divisors (conv_border_stage) */
    int border_w, border_low_h, border_low_w;
    ct_divmod by_src_w, by_src_plane;
};

static inline int conv_border_width(const conv_geometry &g);
static inline int conv_border_low(const conv_geometry &g, bool across);

static inline conv_geometry conv_geometry_of(const ct_conv2d_shape *s, bool transposed)
{
    conv_geometry g;
    g.n_batch = s->n_batch;
    g.src_c = transposed ? s->out_channels : s->in_channels;
    g.src_h = transposed ? s->out_h : s->in_h;
    g.src_w = transposed ? s->out_w : s->in_w;
    g.dst_c = transposed ? s->in_channels : s->out_channels;
    g.dst_h = transposed ? s->in_h : s->out_h;
    g.dst_w = transposed ? s->in_w : s->out_w;
    g.groups = s->groups;
    g.kernel_h = s->kernel_h;
    g.kernel_w = s->kernel_w;
    g.stride_h = s->stride_h;
    g.stride_w = s->stride_w;
    g.pad_h = s->pad_h;
    g.pad_w = s->pad_w;
    g.dilation_h = s->dilation_h;
    g.dilation_w = s->dilation_w;
    g.transposed = transposed;
    g.by_plane = ct_divmod_of(g.dst_h * g.dst_w);
    g.by_dst_w = ct_divmod_of(g.dst_w);
    g.by_taps = ct_divmod_of(g.kernel_h * g.kernel_w);
    g.by_kernel_w = ct_divmod_of(g.kernel_w);
    g.by_stride_h = ct_divmod_of(g.stride_h);
    g.by_stride_w = ct_divmod_of(g.stride_w);
    g.border_w = conv_border_width(g);
    g.border_low_h = conv_border_low(g, false);
    g.border_low_w = conv_border_low(g, true);
    g.by_src_w = ct_divmod_of(g.src_w);
    g.by_src_plane = ct_divmod_of(g.src_h * g.src_w);
    return g;
}

/* The source row (column) that tap i of destination row (column) r reads,
 * or -1 where there is none (padding, or a stride that does not divide). */
__device__ inline int conv_source(const conv_geometry &g, int r, int i, bool across)
{
    int stride = across ? g.stride_w : g.stride_h, pad = across ? g.pad_w : g.pad_h;
    int dilation = across ? g.dilation_w : g.dilation_h, size = across ? g.src_w : g.src_h;
    if (g.transposed) { /* ct_window_output, dividing by the stride's constants */
        const ct_divmod &by_stride = across ? g.by_stride_w : g.by_stride_h;
        int offset = r + pad - i * dilation;
        if (offset < 0)
            return -1;
        int q = ct_div(by_stride, offset);
        return q * stride == offset && q < size ? q : -1;
    }
    int at = ct_window_input(r, i, stride, pad, dilation);
    return at >= 0 && at < size ? at : -1;
}

/* Where tap `tap` of destination pixel `pixel` (image-major over the
 * destination planes) reads: its image, and the source row and column (-1
 * where there is none). */
struct conv_source_at {
    int img, row, column;
};

__device__ inline conv_source_at conv_source_of(const conv_geometry &g, int pixel, int tap)
{
    conv_source_at s;
    s.img = ct_div(g.by_plane, pixel);
    int at = pixel - s.img * (int)g.by_plane.divisor;
    int r = ct_div(g.by_dst_w, at), i = ct_div(g.by_kernel_w, tap);
    s.row = conv_source(g, r, i, false);
    s.column = conv_source(g, at - r * g.dst_w, tap - i * g.kernel_w, true);
    return s;
}

/* The channel of column `depth` = (c, tap) of col: depth / taps. */
__device__ inline int conv_channel_of(const conv_geometry &g, int depth)
{
    return ct_div(g.by_taps, depth);
}

/* The offset of destination pixel `pixel` of channel `channel` in the
 * destination tensor [n, dst_c, dst_h, dst_w]. */
__device__ inline size_t conv_dst_offset(const conv_geometry &g, int channel, int pixel)
{
    int plane = (int)g.by_plane.divisor, img = ct_div(g.by_plane, pixel);
    return ((size_t)img * g.dst_c + channel) * plane + (pixel - img * plane);
}

/* col[(c, tap), pixel] straight from src (channel c of group grp). */
__device__ inline float conv_gather(const conv_geometry &g, const float *src, int grp, int c,
                                    int tap, int pixel)
{
    conv_source_at s = conv_source_of(g, pixel, tap);
    int img = s.img, row = s.row, column = s.column;
    if (row < 0 || column < 0)
        return 0.0f;
    int cg = g.src_c / g.groups;
    return src[(((size_t)img * g.src_c + grp * cg + c) * g.src_h + row) * g.src_w + column];
}

struct conv_rows {
    int lo, count; /* source rows [lo, lo + count) */
};

/* The source rows that destination pixels [n0, n_end) of image img read
 * (none where img has none of them).  Divisions by the geometry's
 * constants (ct_div): this runs for every staged patch, in every thread. */
__device__ inline conv_rows conv_rows_of(const conv_geometry &g, int img, int n0, int n_end)
{
    int plane = g.dst_h * g.dst_w, reach = (g.kernel_h - 1) * g.dilation_h;
    if (n_end - 1 - img * plane < 0) {
        conv_rows none = {0, 0};
        return none;
    }
    int first = ct_div(g.by_dst_w, max(n0 - img * plane, 0));
    int last = ct_div(g.by_dst_w, min(plane - 1, n_end - 1 - img * plane));
    int lo, hi;
    if (g.transposed) {
        int low = first + g.pad_h - reach;
        lo = low > 0 ? ct_div(g.by_stride_h, low + g.stride_h - 1) : 0;
        hi = min(g.src_h, ct_div(g.by_stride_h, last + g.pad_h) + 1);
    } else {
        lo = max(0, first * g.stride_h - g.pad_h);
        hi = min(g.src_h, last * g.stride_h - g.pad_h + reach + 1);
    }
    conv_rows rows = {lo, max(hi - lo, 0)};
    return rows;
}

/* `floats`, the floats of an image's nc blocks of `block` floats each,
 * rounded up to block modulo 32 where block < 32 (above). */
__host__ __device__ inline int conv_patch_pad(int floats, int block)
{
    return block >= 32 ? floats : floats + ((block - floats) & 31);
}

/* Source rows of channels [c_lo, c_lo + nc) for destination pixels
 * [n0, n_end), as laid out in shared memory (above). */
struct conv_patch {
    int c_lo, nc, n0, n_end, img_lo, img_hi;
    conv_rows first, full, last; /* rows of images img_lo, wholly inside, img_hi */
    int after;             /* where image img_lo + 1 starts */
    int stride;            /* floats from one later image to the next */
};

static_assert(sizeof(conv_patch) <= CONV_PATCH_HEADER * sizeof(float), "the k patch's header");

__device__ inline conv_rows conv_border_rows_of(const conv_geometry &g, int img, int n0,
                                                int n_end);

template <bool Bordered>
__device__ inline conv_rows conv_rows_in(const conv_geometry &g, int img, int n0, int n_end)
{
    return Bordered ? conv_border_rows_of(g, img, n0, n_end) : conv_rows_of(g, img, n0, n_end);
}

/* conv_patch_for (Bordered false) and conv_border_for: each image's rows
 * conv_rows_of's or conv_border_rows_of's, of src_w or border_w floats. */
template <bool Bordered>
__device__ inline conv_patch conv_patch_over(const conv_geometry &g, int c_lo, int nc, int n0,
                                             int n_end)
{
    conv_patch p;
    p.c_lo = c_lo;
    p.nc = nc;
    p.n0 = n0;
    p.n_end = n_end;
    p.img_lo = ct_div(g.by_plane, n0);
    p.img_hi = ct_div(g.by_plane, n_end - 1);
    p.first = conv_rows_in<Bordered>(g, p.img_lo, n0, n_end);
    p.full = conv_rows_in<Bordered>(g, p.img_lo + 1, n0, n_end);
    p.last = conv_rows_in<Bordered>(g, p.img_hi, n0, n_end);
    int width = Bordered ? g.border_w : g.src_w;
    p.after = conv_patch_pad(nc * p.first.count * width, p.first.count * width);
    p.stride = conv_patch_pad(nc * p.full.count * width, p.full.count * width);
    return p;
}

__device__ inline conv_patch conv_patch_for(const conv_geometry &g, int c_lo, int nc, int n0,
                                            int n_end)
{
    return conv_patch_over<false>(g, c_lo, nc, n0, n_end);
}

/* Where image img's blocks start in the patch. */
__device__ inline int conv_patch_image_at(const conv_patch &p, int img)
{
    return img == p.img_lo ? 0 : p.after + (img - p.img_lo - 1) * p.stride;
}

static __device__ inline bool conv_rows_same(conv_rows a, conv_rows b)
{
    return a.lo == b.lo && a.count == b.count;
}

/* Copies the patch from src (group grp) by the block; a barrier must
 * follow.  An image's blocks (its rows of each of the patch's channels)
 * are one run in both places where the rows are the whole plane or there
 * is one channel; then the images from img on whose rows are the full
 * ones, p.stride apart in the patch (the first one too where its rows are
 * those: p.after is then p.stride), are the runs of one ct_copy_runs.
 * Copied image by image and channel by channel, a 2x2 plane's run of 4
 * floats took a warp of 32 lanes and each image a pass over the block
 * (VGG-11's 2x2 layers: a fifth of the forward GEMM's instructions,
 * emulated counts, docs/perf.md).  One call site: three (the first image,
 * the set, the last) spilled 12 bytes in the paired narrow tiles. */
__device__ inline void conv_patch_stage(const conv_patch &p, const conv_geometry &g,
                                        const float *src, int grp, float *patch)
{
    int cg = g.src_c / g.groups, plane = g.src_h * g.src_w;
    size_t image = (size_t)g.src_c * plane;
    src += (size_t)(grp * cg + p.c_lo) * plane;
    for (int img = p.img_lo; img <= p.img_hi;) {
        conv_rows rows = img == p.img_lo ? p.first : img == p.img_hi ? p.last : p.full;
        int run = rows.count * g.src_w, images = 1;
        bool whole = rows.count == g.src_h || p.nc == 1;
        if (whole && conv_rows_same(rows, p.full) && p.img_lo < p.img_hi)
            images = (conv_rows_same(p.last, p.full) ? p.img_hi + 1 : p.img_hi) - img;
        if (run > 0)
            ct_copy_runs(patch + conv_patch_image_at(p, img), whole ? p.stride : run,
                         src + img * image + (size_t)rows.lo * g.src_w, whole ? image : plane,
                         whole ? images : p.nc, whole ? p.nc * run : run);
        img += images;
    }
}

/* What conv_patch_pixel_read needs of destination pixel `pixel`, whatever the
 * tap: a thread that stages several taps of one pixel (each of the GEMMs'
 * staging loops keeps a thread on one pixel) computes it once. */
struct conv_patch_pixel {
    int r, q;                 /* the destination row and column */
    int lo, count, at;        /* its image's source rows in the patch, and where they start */
};

__device__ inline conv_patch_pixel conv_patch_pixel_of(const conv_patch &p,
                                                       const conv_geometry &g, int pixel)
{
    int plane = (int)g.by_plane.divisor, img = ct_div(g.by_plane, pixel);
    int in_plane = pixel - img * plane;
    conv_patch_pixel px;
    px.r = ct_div(g.by_dst_w, in_plane);
    px.q = in_plane - px.r * g.dst_w;
    conv_rows rows = img == p.img_lo ? p.first : img == p.img_hi ? p.last : p.full;
    px.lo = rows.lo;
    px.count = rows.count;
    px.at = conv_patch_image_at(p, img);
    return px;
}

/* col[(c_lo + c, tap), pixel] from the patch, for the pixel of px. */
__device__ inline float conv_patch_pixel_read(const conv_patch_pixel &px, const conv_geometry &g,
                                              const float *patch, int c, int tap)
{
    int i = ct_div(g.by_kernel_w, tap);
    int row = conv_source(g, px.r, i, false);
    int column = conv_source(g, px.q, tap - i * g.kernel_w, true);
    bool inside = row >= px.lo && row < px.lo + px.count && column >= 0;
    int r = min(max(row - px.lo, 0), max(px.count - 1, 0));
    float v = patch[px.at + (c * px.count + r) * g.src_w + max(column, 0)];
    return inside ? v : 0.0f;
}

/* Column (c, tap) of col as the staging loops read it for any pixel,
 * where the index map is additive (not transposed, or transposed at
 * stride 1): made once per patch, kept in shared memory, read as one
 * 128-bit word (registers are what the wide tiles lack).
 *   c: its channel in the patch (c - c_lo);
 *   offset: where it reads in a channel's rows from a pixel's spot (below):
 *     the source row and column of destination row and column 0 for tap
 *     (i, j), i * dilation - pad (pad - i * dilation transposed), as
 *     row * src_w + column;
 *   bits: its kernel row's and column's bits in a spot's taps, 1 << i |
 *     1 << (CONV_KERNEL_BITS + j); CONV_COLUMN_NONE where it reads nothing
 *     (past the block's k, or a weight gradient's ones);
 *   fill: what it takes where the tap lands outside the source: 0, or the
 *     weight gradient's column of ones' 1.
 * Read with the row and column checked and clamped per element, with the
 * offsets packed in one int, each staged element took some 25
 * instructions, a fifth of the forward GEMM's (emulated counts per line,
 * docs/perf.md); now an AND, a compare, a multiply-add and two selects. */
struct conv_column {
    int c, offset;
    unsigned bits;
    float fill;
};

enum {
    CONV_KERNEL_BITS = 16, /* a spot's taps: the kernel's rows, then its columns */
    /* the most rows (columns) a kernel may have to be read by columns: the
     * top bit of each half is never a tap's */
    CONV_KERNEL_MAX = CONV_KERNEL_BITS - 1,
};
#define CONV_COLUMN_NONE (1u << (2 * CONV_KERNEL_BITS - 1))

/* Where kernel row (column, across) i reads from destination row (column)
 * 0 in the source: i * dilation - pad, or pad - i * dilation transposed
 * (at stride 1). */
__device__ inline int conv_tap_offset(const conv_geometry &g, int i, bool across, bool transposed)
{
    int offset = i * (across ? g.dilation_w : g.dilation_h) - (across ? g.pad_w : g.pad_h);
    return transposed ? -offset : offset;
}

/* `transposed` is g.transposed (a constant where the caller knows it: the
 * weight gradient's). */
__device__ inline conv_column conv_patch_column_of(const conv_geometry &g, int column, int c_lo,
                                                   bool transposed)
{
    int c = conv_channel_of(g, column), tap = column - c * (int)g.by_taps.divisor;
    int i = ct_div(g.by_kernel_w, tap), j = tap - i * g.kernel_w;
    conv_column col;
    col.c = c - c_lo;
    col.offset = conv_tap_offset(g, i, false, transposed) * g.src_w +
                 conv_tap_offset(g, j, true, transposed);
    col.bits = 1u << i | 1u << (CONV_KERNEL_BITS + j);
    col.fill = 0.0f;
    return col;
}

/* A column that reads nothing and takes `fill`. */
__device__ inline conv_column conv_column_none(float fill)
{
    conv_column col = {0, 0, CONV_COLUMN_NONE, fill};
    return col;
}

/* Whether the convolution's columns can be read from a table: each kernel
 * axis within a spot's bits, and each tap's offset (row * src_w + column)
 * within an int with room to add a pixel's place in the patch.  Other
 * shapes (legal: padding 40000 at stride 40000, a 31 x 31 kernel) read
 * through the map. */
static inline bool conv_columns_fit(const conv_geometry &g)
{
    int64_t reach_h = (int64_t)(g.kernel_h - 1) * g.dilation_h + g.pad_h;
    int64_t reach_w = (int64_t)(g.kernel_w - 1) * g.dilation_w + g.pad_w;
    return g.kernel_h <= CONV_KERNEL_MAX && g.kernel_w <= CONV_KERNEL_MAX &&
           (reach_h + 1) * g.src_w + reach_w <= INT_MAX / 4;
}

/* A pixel as conv_patch_column_read takes it, whatever the column, made
 * once per patch:
 *   at: where column offset 0 of channel 0 lands in the patch (outside it
 *     for a pixel near the padding: read only for a tap inside);
 *   home: where it reads for a tap outside the source, its own row and
 *     column clamped into its image's rows: the word a neighbour reads
 *     (no bank conflict, as the clamped read before);
 *   plane: its image's floats per channel (rows * src_w);
 *   taps: the bits of its kernel rows and columns that land inside the
 *     source and its image's rows in the patch (0 for a pixel past the
 *     tile's, `inside` false). */
struct conv_patch_spot {
    int at, home, plane;
    unsigned taps;
};

/* The bits of the kernel rows (columns, across) i whose source row from
 * `at` (a pixel's, for offset 0) lands in [0, size).  Unrolled over
 * CONV_KERNEL_MAX for the weight gradient (as a loop it spilled 24 bytes
 * in the 128-row wide tile at 128 registers), a loop for the forward pass
 * and backward data (unrolled, their 64-row tile spilled 4 at 80). */
template <bool Unrolled>
__device__ inline unsigned conv_tap_bits(const conv_geometry &g, int at, int size, bool across,
                                         bool transposed)
{
    int kernel = across ? g.kernel_w : g.kernel_h;
    auto lands = [&](int i) {
        return (unsigned)(at + conv_tap_offset(g, i, across, transposed)) < (unsigned)size;
    };
    unsigned bits = 0;
    if (Unrolled) {
#pragma unroll
        for (int i = 0; i < CONV_KERNEL_MAX; i++)
            if (i < kernel && lands(i))
                bits |= 1u << i;
    } else {
        for (int i = 0; i < kernel; i++)
            if (lands(i))
                bits |= 1u << i;
    }
    return bits;
}

template <bool Unrolled>
__device__ inline conv_patch_spot conv_patch_spot_of(const conv_patch &p, const conv_geometry &g,
                                                     int pixel, bool inside, bool transposed)
{
    conv_patch_pixel px = conv_patch_pixel_of(p, g, pixel);
    int row = px.r * g.stride_h - px.lo, column = px.q * g.stride_w;
    conv_patch_spot spot;
    spot.at = px.at + row * g.src_w + column;
    spot.home = px.at + min(max(row, 0), max(px.count - 1, 0)) * g.src_w +
                min(max(column, 0), g.src_w - 1);
    spot.plane = px.count * g.src_w;
    spot.taps = inside ? conv_tap_bits<Unrolled>(g, row, px.count, false, transposed) |
                             conv_tap_bits<Unrolled>(g, column, g.src_w, true, transposed)
                                 << CONV_KERNEL_BITS
                       : 0u;
    return spot;
}

/* col[(c_lo + c, tap), pixel] from the patch, for the pixel of spot and
 * the column of conv_patch_column_of: conv_patch_pixel_read's value
 * without the column's divisions and the map's branches. */
__device__ inline float conv_patch_column_read(const conv_patch_spot &spot, const float *patch,
                                               const conv_column &column)
{
    bool inside = (spot.taps & column.bits) == column.bits;
    float v = patch[column.c * spot.plane + (inside ? spot.at + column.offset : spot.home)];
    return inside ? v : column.fill;
}

/* The images, and the destination rows in one image, that `pixels`
 * consecutive destination pixels from a multiple of `pixels` span at most
 * (conv_patch_bound). */
struct conv_span {
    int64_t images, dst_rows;
};

static inline conv_span conv_span_of(const conv_geometry &g, int pixels)
{
    int64_t plane = (int64_t)g.dst_h * g.dst_w;
    bool within = plane % pixels == 0;
    conv_span s;
    s.images = within ? 1 : (pixels - 1) / plane + 2;
    if (s.images > g.n_batch)
        s.images = g.n_batch;
    if (plane < pixels)
        pixels = (int)plane;
    s.dst_rows = within && pixels % g.dst_w == 0 ? pixels / g.dst_w
                                                  : (pixels + g.dst_w - 2) / g.dst_w + 1;
    if (s.dst_rows > g.dst_h)
        s.dst_rows = g.dst_h;
    return s;
}

/* The floats of s.images images of `rows` rows of `width` floats of the
 * channels `columns` consecutive columns (c, tap) read, or 0 past
 * CONV_PATCH_MAX. */
static inline int conv_span_floats(const conv_geometry &g, conv_span s, int columns, int64_t rows,
                                   int64_t width)
{
    int64_t taps = (int64_t)g.kernel_h * g.kernel_w;
    int64_t channels = (columns - 1 + taps - 1) / taps + 1;
    if (channels > g.src_c / g.groups)
        channels = g.src_c / g.groups;
    int64_t floats = s.images * (channels * rows * width + 31); /* 31: conv_patch_pad's */
    return floats <= CONV_PATCH_MAX ? (int)(floats > 0 ? floats : 1) : 0;
}

/* The most floats a conv_patch holds for `pixels` consecutive destination
 * pixels (a tile's columns, or the weight gradient's group of k) and the
 * channels of `columns` consecutive columns (c, tap) (a k slice, or a
 * weight-gradient tile's columns), or 0 when that passes CONV_PATCH_MAX.
 * The pixels start at a multiple of `pixels` (a tile's first column; a
 * weight gradient's patch, its splits' chunks whole patches): where that
 * divides the plane they lie in one image, and where a row divides it, on
 * pixels / dst_w rows.  Bounded for any start, as two images and a row
 * more, ResNet's stride-2 weight gradients (64 pixels of 16 x 16 planes)
 * passed CONV_PATCH_MAX and read through the map: 2.5 instructions a FMA,
 * 99.7 us on the model against a floor of 36 (emulated counts). */
static inline int conv_patch_bound(const conv_geometry &g, int columns, int pixels)
{
    conv_span s = conv_span_of(g, pixels);
    int64_t reach = (int64_t)(g.kernel_h - 1) * g.dilation_h;
    int64_t src_rows = g.transposed ? (s.dst_rows - 1 + reach) / g.stride_h + 1
                                    : (s.dst_rows - 1) * g.stride_h + reach + 1;
    if (src_rows > g.src_h)
        src_rows = g.src_h;
    return conv_span_floats(g, s, columns, src_rows, g.src_w);
}

/*
 * The bordered patch: the same images and channels as the patch above, each
 * channel's rows padded with the zeros its taps read outside the source
 * (rows above and below the image, columns left and right), so that a
 * column (c, tap) of a pixel is one load at a fixed offset from the pixel's
 * place, with no test of whether the tap lands inside: a read is the
 * column from the table, a multiply-add, an add, the load and the shared
 * store, where conv_patch_column_read adds the taps' test, the clamped home
 * and two selects (about 15 counted instructions an element, 0.23 an FMA
 * of ResNet-18's 64-channel layers, docs/perf.md 2026-12-07 second
 * session).  Where the map is additive (not transposed, or transposed at
 * stride 1), for the forward pass and backward data.
 *
 * Along an axis the source row of tap i of destination row r is r * s +
 * offset(i) (s the stride, 1 transposed; offset = conv_tap_offset), so
 * destination rows first .. last read source rows first * s + low ..
 * last * s + low + span, low the least offset and span (kernel - 1) *
 * dilation; a bordered image keeps exactly those rows, from `lo` = first *
 * s + low (which may be negative), each border_w = (dst_w - 1) * s + span
 * + 1 floats wide from source column low.
 */

/* The least offset of a tap along an axis (conv_tap_offset over the
 * kernel), and the destination's stride there. */
static inline int conv_border_low(const conv_geometry &g, bool across)
{
    int pad = across ? g.pad_w : g.pad_h;
    int span = ((across ? g.kernel_w : g.kernel_h) - 1) * (across ? g.dilation_w : g.dilation_h);
    return g.transposed ? pad - span : -pad;
}

static inline int conv_border_stride(const conv_geometry &g, bool across)
{
    return g.transposed ? 1 : across ? g.stride_w : g.stride_h;
}

/* The floats of a bordered row (at least 1; past INT_MAX / 4 the shape is
 * never bordered: conv_border_bound). */
static inline int conv_border_width(const conv_geometry &g)
{
    int64_t w = (int64_t)(g.dst_w - 1) * conv_border_stride(g, true) +
                (int64_t)(g.kernel_w - 1) * g.dilation_w + 1;
    return w < 1 ? 1 : w > INT_MAX / 4 ? INT_MAX / 4 : (int)w;
}

/* conv_rows_of for the bordered patch: the rows from lo, unclamped. */
__device__ inline conv_rows conv_border_rows_of(const conv_geometry &g, int img, int n0,
                                                int n_end)
{
    int plane = g.dst_h * g.dst_w;
    conv_rows rows = {0, 0};
    if (n_end - 1 - img * plane < 0)
        return rows;
    int first = ct_div(g.by_dst_w, max(n0 - img * plane, 0));
    int last = ct_div(g.by_dst_w, min(plane - 1, n_end - 1 - img * plane));
    /* bordered only where the map is additive: transposed, at stride 1 */
    rows.lo = first * g.stride_h + g.border_low_h;
    rows.count = (last - first) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1;
    return rows;
}

/* conv_patch_for for the bordered patch (rows of border_w floats). */
__device__ inline conv_patch conv_border_for(const conv_geometry &g, int c_lo, int nc, int n0,
                                             int n_end)
{
    return conv_patch_over<true>(g, c_lo, nc, n0, n_end);
}

/* Copies the bordered patch from src (group grp) by the block; a barrier
 * must follow.  Every float is first set to 0 (the border), then, after a
 * barrier, each image's source rows are copied into their places inside
 * it: they are whole source rows (conv_border_bound), so an image's rows
 * of one channel are one run in the source, and an image whose rows are
 * the whole plane is one run for all the patch's channels, the images of
 * the same rows one after the other (as conv_patch_stage copies them:
 * ct_copy_runs from sector boundaries); a run's element j lands past the
 * border: j's row (and channel) by the source's divisors.  Element by
 * element with the tests of each row and column, the copy read 60 % of
 * its sectors' bytes and took more instructions than the read it saved
 * (emulated counts, docs/perf.md 2026-12-07 second session). */
__device__ inline void conv_border_stage(const conv_patch &p, const conv_geometry &g,
                                         const float *src, int grp, float *patch)
{
    int cg = g.src_c / g.groups, plane = g.src_h * g.src_w, w = g.border_w;
    int left = -g.border_low_w;
    /* zeros four at a time (the patch starts on 16 bytes: the header and
     * tables before it are whole quads) */
    int end = conv_patch_image_at(p, p.img_hi) + p.nc * p.last.count * w;
    const float zeros[CT_VEC] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int e = CT_VEC * (int)threadIdx.x; e < end; e += CT_VEC * (int)blockDim.x) {
        if (e + CT_VEC <= end)
            ct_store4(patch + e, zeros);
        else
            for (int t = e; t < end; t++)
                patch[t] = 0.0f;
    }
    __syncthreads();
    size_t image = (size_t)g.src_c * plane;
    src += (size_t)(grp * cg + p.c_lo) * plane;
    for (int img = p.img_lo; img <= p.img_hi;) {
        conv_rows rows = img == p.img_lo ? p.first : img == p.img_hi ? p.last : p.full;
        int lo = max(rows.lo, 0), hi = min(rows.lo + rows.count, g.src_h), images = 1;
        int top = lo - rows.lo, block = rows.count * w; /* a channel's floats in the patch */
        bool whole = lo == 0 && hi == g.src_h;
        if (whole && conv_rows_same(rows, p.full) && p.img_lo < p.img_hi)
            images = (conv_rows_same(p.last, p.full) ? p.img_hi + 1 : p.img_hi) - img;
        float *to = patch + conv_patch_image_at(p, img) + top * w + left;
        const float *from = src + img * image + (size_t)lo * g.src_w;
        if (whole) /* j: channel c's row r, column q */
            ct_copy_runs_to(to, p.stride, from, image, images, p.nc * plane, [&](int j) {
                int c = ct_div(g.by_src_plane, j), at = j - c * plane;
                int r = ct_div(g.by_src_w, at);
                return c * block + r * w + at - r * g.src_w;
            });
        else if (hi > lo)
            ct_copy_runs_to(to, block, from, plane, p.nc, (hi - lo) * g.src_w, [&](int j) {
                int r = ct_div(g.by_src_w, j);
                return r * w + j - r * g.src_w;
            });
        img += images;
    }
}

/* A pixel of the bordered patch as conv_border_read takes it (a
 * conv_patch_spot: at and plane; taps and home unused): where its tap (0,
 * 0) of channel 0 reads, and its image's floats per channel.  A pixel past
 * the tile's (`inside` false) reads channel 0's first rows, whatever they
 * hold: its column of the product is never stored. */
__device__ inline conv_patch_spot conv_border_spot_of(const conv_patch &p, const conv_geometry &g,
                                                      int pixel, bool inside)
{
    conv_patch_spot spot = {0, 0, 0, 0u};
    if (!inside)
        return spot;
    int dst_plane = (int)g.by_plane.divisor, img = ct_div(g.by_plane, pixel);
    int in_plane = pixel - img * dst_plane, r = ct_div(g.by_dst_w, in_plane);
    int q = in_plane - r * g.dst_w;
    conv_rows rows = img == p.img_lo ? p.first : img == p.img_hi ? p.last : p.full;
    int row = r * g.stride_h + g.border_low_h - rows.lo;
    spot.at = conv_patch_image_at(p, img) + row * g.border_w + q * g.stride_w;
    spot.plane = rows.count * g.border_w;
    return spot;
}

/* Column (c, tap) of the bordered patch (conv_column: c and offset; bits
 * 0, fill 0). */
__device__ inline conv_column conv_border_column_of(const conv_geometry &g, int column, int c_lo)
{
    int c = conv_channel_of(g, column), tap = column - c * (int)g.by_taps.divisor;
    int i = ct_div(g.by_kernel_w, tap), j = tap - i * g.kernel_w;
    conv_column col;
    col.c = c - c_lo;
    col.offset = (conv_tap_offset(g, i, false, g.transposed) - g.border_low_h) * g.border_w +
                 conv_tap_offset(g, j, true, g.transposed) - g.border_low_w;
    col.bits = 0u;
    col.fill = 0.0f;
    return col;
}

/* col[(c_lo + c, tap), pixel] from the bordered patch. */
__device__ inline float conv_border_read(const conv_patch_spot &spot, const float *patch,
                                         const conv_column &column)
{
    return patch[column.c * spot.plane + spot.at + column.offset];
}

/* conv_patch_bound for the bordered patch (its rows unclamped, border_w
 * wide), or 0 where it passes CONV_PATCH_MAX, the map is not additive
 * (transposed at a stride above 1) or a bordered row does not hold its
 * whole source row (conv_border_stage's runs). */
static inline int conv_border_bound(const conv_geometry &g, int columns, int pixels)
{
    /* an additive map, and whole source rows inside the bordered ones */
    int low = conv_border_low(g, true);
    if ((g.transposed && (g.stride_h != 1 || g.stride_w != 1)) || low > 0 ||
        (int64_t)low + g.border_w < g.src_w)
        return 0;
    conv_span s = conv_span_of(g, pixels);
    int64_t rows = (s.dst_rows - 1) * conv_border_stride(g, false) +
                   (int64_t)(g.kernel_h - 1) * g.dilation_h + 1;
    return conv_span_floats(g, s, columns, rows, g.border_w);
}

#endif
