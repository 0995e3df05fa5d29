/*
 * 2-D convolution on the GPU, native kernels: implicit GEMM on the tiled
 * kernel of gemm.cuh, one GEMM per group (blockIdx.z), nothing materialized.
 * With Cg = C/groups, Og = O/groups, P = out_h*out_w, KK = KH*KW:
 *   forward:         y_g[o, (n,p)]        = sum_{(c,i,j)} w[o,(c,i,j)] col[(c,i,j),(n,p)]
 *   backward data:   dx_g[c, (n,ih,iw)]   = sum_{(o,i,j)} w[o,c,i,j] dy[n,o,oh,ow]
 *                    where oh*sh - ph + i*dh = ih and ow*sw - pw + j*dw = iw
 *   backward weight: dw_g[o, (c,i,j)]     = sum_{(n,p)} dy[n,o,p] col[(c,i,j),(n,p)]
 * col[(c,i,j),(n,oh,ow)] = x[n, g*Cg+c, oh*sh-ph+i*dh, ow*sw-pw+j*dw] (0 outside).
 * The weight gradient's reduction (N*P long) is split over blocks when its
 * output is small; the parts land in the workspace and one more kernel adds
 * them in split order, so the result is deterministic.
 * A forward pass with few input channels per group (the first layer) also
 * has a direct kernel, one thread per output, as its GEMM would be too
 * shallow; the CUDA op table (table.c) prefers it where it fits.
 *
 * Accumulation: all outputs (y, dx, dw, db) are written with =.
 */
#include "core/window_math.h"
#include "cuda/gemm.cuh"

enum {
    CONV_DIRECT_MAX_CHANNELS = 4, /* Cg at or below this: the direct forward kernel */
    CONV_SPLIT_MIN_DEPTH = 512,   /* shortest k chunk worth its own block */
    CONV_SPLIT_MAX = 64,
};

/* x[n, g*Cg + c, ih, iw] for column (c,i,j) of row (n,oh,ow) of col, or 0. */
__device__ inline float conv_col(const ct_conv2d_shape &s, const float *x, int g, int cij,
                                 int n, int oh, int ow)
{
    int kk = s.kernel_h * s.kernel_w, cg = s.in_channels / s.groups;
    int c = cij / kk, i = cij % kk / s.kernel_w, j = cij % s.kernel_w;
    int ih = ct_window_input(oh, i, s.stride_h, s.pad_h, s.dilation_h);
    int iw = ct_window_input(ow, j, s.stride_w, s.pad_w, s.dilation_w);
    if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w)
        return 0.0f;
    return x[(((size_t)n * s.in_channels + g * cg + c) * s.in_h + ih) * s.in_w + iw];
}

/*
 * The forward GEMM's b slices are staged through shared memory.  Read
 * straight through the im2col map, a warp's 32 output pixels read 32
 * inputs shifted by the tap, crossing row ends: 5 to 7 sectors for 4
 * sectors' worth of bytes (SimpleCNN's 14x14 layer: 65%).  Instead, for
 * each 16-deep slice of k (taps of `nc` consecutive channels), the block
 * copies the input rows its 64 pixels read, whole rows of each channel of
 * each image it touches: one contiguous run of x per (image, channel), read
 * by consecutive threads.  The slice is then built from shared memory; a
 * tap in the padding reads a clamped word (the same row or column edge,
 * read by a neighbour too, so no bank conflict and no divergence) and takes
 * 0 instead.
 *
 * The rows of image `img` in the tile: those that output pixels
 * [max(n0, img*P), min(n_end, (img+1)*P)) read, clipped to the image; the
 * images come one after another in the patch, each as nc blocks of
 * rows*in_w floats.  scratch_floats bounds the patch over every tile and
 * slice (conv_patch_bound); a shape whose bound passes
 * CONV_PATCH_MAX reads through the im2col map as before (scratch_floats 0).
 */
enum {
    CONV_PATCH_MAX = 8192, /* floats: 32 KiB, with the tiles' 8.25 KiB under 48 KiB */
};

struct conv_rows {
    int lo, count; /* input rows [lo, lo + count) */
};

/* The input rows that the outputs [n0, n_end) of image img read. */
__device__ inline conv_rows conv_rows_of(const ct_conv2d_shape &s, int img, int n0, int n_end)
{
    int plane = s.out_h * s.out_w;
    int first = max(n0 - img * plane, 0), last = min(plane - 1, n_end - 1 - img * plane);
    int lo = max(0, first / s.out_w * s.stride_h - s.pad_h);
    int hi = min(s.in_h,
                 last / s.out_w * s.stride_h - s.pad_h + (s.kernel_h - 1) * s.dilation_h + 1);
    conv_rows rows = {lo, max(hi - lo, 0)};
    return rows;
}

/* The input rows that output pixels [n0, n_end) read from channels
 * [c_lo, c_lo + nc) of one group, staged in shared memory: image img_lo's
 * rows, then each later image's, each as nc blocks of rows*in_w floats. */
struct conv_patch {
    int c_lo, nc, n0, n_end, img_lo, img_hi;
    conv_rows first, full; /* rows of image img_lo, and of an image wholly inside */
    int after;             /* where image img_lo + 1 starts */
};

__device__ inline conv_patch conv_patch_for(const ct_conv2d_shape &s, int c_lo, int nc, int n0,
                                            int n_end)
{
    int plane = s.out_h * s.out_w;
    conv_patch p;
    p.c_lo = c_lo;
    p.nc = nc;
    p.n0 = n0;
    p.n_end = n_end;
    p.img_lo = n0 / plane;
    p.img_hi = (n_end - 1) / plane;
    p.first = conv_rows_of(s, p.img_lo, n0, n_end);
    p.full = conv_rows_of(s, p.img_lo + 1, n0, n_end);
    p.after = nc * p.first.count * s.in_w;
    return p;
}

/* Copies the patch from x (group g) by the block; a barrier must follow. */
__device__ inline void conv_patch_stage(const conv_patch &p, const ct_conv2d_shape &s,
                                        const float *x, int g, float *patch)
{
    int cg = s.in_channels / s.groups;
    for (int img = p.img_lo, at = 0; img <= p.img_hi; img++) {
        conv_rows rows = img == p.img_lo ? p.first : conv_rows_of(s, img, p.n0, p.n_end);
        int run = rows.count * s.in_w;
        if (run > 0)
            ct_copy_runs(patch + at, run,
                           x + (((size_t)img * s.in_channels + g * cg + p.c_lo) * s.in_h +
                                rows.lo) * s.in_w,
                           (size_t)s.in_h * s.in_w, p.nc, run);
        at += p.nc * run;
    }
}

/* col[(c, tap), np] from the patch: x at channel c_lo + c, tap `tap`, output
 * pixel np (0 in the padding: a clamped read and a select, so the threads
 * of a warp neither diverge nor read a word outside the patch). */
__device__ inline float conv_patch_read(const conv_patch &p, const ct_conv2d_shape &s,
                                        const float *patch, int c, int tap, int np)
{
    int plane = s.out_h * s.out_w, img = np / plane, pix = np % plane;
    conv_rows rows = img == p.img_lo   ? p.first
                     : img == p.img_hi ? conv_rows_of(s, img, p.n0, p.n_end)
                                       : p.full;
    int at = img == p.img_lo ? 0 : p.after + (img - p.img_lo - 1) * p.nc * p.full.count * s.in_w;
    int ih = ct_window_input(pix / s.out_w, tap / s.kernel_w, s.stride_h, s.pad_h, s.dilation_h);
    int iw = ct_window_input(pix % s.out_w, tap % s.kernel_w, s.stride_w, s.pad_w, s.dilation_w);
    bool inside = ih >= rows.lo && ih < rows.lo + rows.count && iw >= 0 && iw < s.in_w;
    int r = min(max(ih - rows.lo, 0), max(rows.count - 1, 0));
    float v = patch[at + (c * rows.count + r) * s.in_w + min(max(iw, 0), s.in_w - 1)];
    return inside ? v : 0.0f;
}

struct conv_forward_problem {
    static constexpr const char *kernel_name = "gemm<conv_forward>";
    static constexpr bool stages_b = true;
    static constexpr bool adds_row_bias = true;
    int m, n, k, splits, k_chunk; /* m = Og, n = N*P, k = Cg*KK */
    int scratch_floats;           /* the patch; 0: read b through load_b */
    int a_pitch;                  /* floats between rows of w: k, or more where packed */
    bool flip_taps;               /* k = (c, t) reads tap KK-1-t (backward data, below) */
    ct_conv2d_shape s;
    const float *x, *w, *bias;
    float *y;

    /* w[o, cij] runs along k; col[cij, np] along n (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return false; }

    __device__ float load_a(int g, int o, int cij) const
    {
        return w[((size_t)g * m + o) * a_pitch + cij];
    }
    /* the column of col that k = cij reads */
    __device__ int column(int cij) const
    {
        int taps = s.kernel_h * s.kernel_w;
        return flip_taps ? cij + taps - 1 - 2 * (cij % taps) : cij;
    }
    __device__ float load_b(int g, int cij, int np) const
    {
        int p = s.out_h * s.out_w, pix = np % p;
        return conv_col(s, x, g, column(cij), np / p, pix / s.out_w, pix % s.out_w);
    }
    __device__ void stage_b(float (*tile)[GEMM_TILE_N + GEMM_PAD], int g, int k0, int k_end,
                            int n0, float *patch) const
    {
        if (scratch_floats == 0) {
            gemm_stage<GEMM_TILE_N>(tile, false, n0, n, k0, k_end,
                                    [&](int kk, int np) { return load_b(g, kk, np); });
            return;
        }
        int taps = s.kernel_h * s.kernel_w, n_end = min(n0 + GEMM_TILE_N, n);
        int c_lo = k0 / taps, nc = (min(k0 + GEMM_TILE_K, k_end) - 1) / taps - c_lo + 1;
        conv_patch at = conv_patch_for(s, c_lo, nc, n0, n_end);
        conv_patch_stage(at, s, x, g, patch);
        __syncthreads();
        for (int e = threadIdx.x; e < GEMM_TILE_K * GEMM_TILE_N; e += GEMM_THREADS) {
            int kk = e / GEMM_TILE_N, i = e % GEMM_TILE_N, cij = column(k0 + kk);
            tile[kk][i] = k0 + kk < k_end && n0 + i < n_end
                              ? conv_patch_read(at, s, patch, cij / taps - c_lo, cij % taps, n0 + i)
                              : 0.0f;
        }
    }
    __device__ float row_bias(int g, int o) const { return bias ? bias[g * m + o] : 0.0f; }
    __device__ void store(int g, int, int o, int np, float value) const
    {
        int p = s.out_h * s.out_w;
        y[((size_t)(np / p) * s.out_channels + g * m + o) * p + np % p] = value;
    }
};

/* The most floats a conv_patch holds for 64 output pixels and the channels
 * of `columns` consecutive columns (c, tap) — a forward slice's 16, or a
 * weight-gradient tile's 64 — or 0 when that passes CONV_PATCH_MAX. */
static int conv_patch_bound(const ct_conv2d_shape *s, int columns)
{
    int64_t plane = (int64_t)s->out_h * s->out_w, taps = (int64_t)s->kernel_h * s->kernel_w;
    int64_t images = (GEMM_TILE_N - 1) / plane + 2;
    if (images > s->n_batch)
        images = s->n_batch;
    int64_t pixels = plane < (int64_t)GEMM_TILE_N ? plane : (int64_t)GEMM_TILE_N;
    int64_t out_rows = (pixels + s->out_w - 2) / s->out_w + 1;
    if (out_rows > s->out_h)
        out_rows = s->out_h;
    int64_t in_rows = (out_rows - 1) * s->stride_h + (s->kernel_h - 1) * s->dilation_h + 1;
    if (in_rows > s->in_h)
        in_rows = s->in_h;
    int64_t channels = (columns - 1 + taps - 1) / taps + 1;
    if (channels > s->in_channels / s->groups)
        channels = s->in_channels / s->groups;
    int64_t floats = channels * images * in_rows * s->in_w;
    return floats <= CONV_PATCH_MAX ? (int)(floats > 0 ? floats : 1) : 0;
}

/*
 * Backward data at stride 1 is a forward convolution of dy with the
 * flipped, transposed kernel: dx[n, c, ih, iw] = sum_{o,i',j'} w'[c, o, i',
 * j'] dy[n, o, ih - p'h + i' dh, iw - p'w + j' dw], where w'[c, o, i', j'] =
 * w[o, c, KH-1-i', KW-1-j'] and p' = (K-1) d - p.  So it runs on
 * conv_forward_problem (dy's rows staged like x's), after one pass packs
 * w transposed, wt[c, o, t] = w[o, c, t], with rows of Og*KK padded to whole
 * sectors, so that each k slice of a row is a sector-aligned read; the flip
 * is in the reading (flip_taps: k = (o, t) reads dy at tap KK-1-t).  Read in
 * place, w's rows along that k are runs of KK with jumps of Cg*KK (about
 * half of each sector used).  Other strides use conv_backward_data_problem
 * below.
 */
struct conv_backward_data_flipped_problem : conv_forward_problem {
    static constexpr const char *kernel_name = "gemm<conv_backward_data>";
};

static int conv_sector_pitch(int floats)
{
    return (floats + 7) / 8 * 8;
}

static bool conv_backward_data_flips(const ct_conv2d_shape *s)
{
    return s->stride_h == 1 && s->stride_w == 1 &&
           (s->kernel_h - 1) * s->dilation_h >= s->pad_h &&
           (s->kernel_w - 1) * s->dilation_w >= s->pad_w;
}

/*
 * The packing: wt[(g*Cg + c)*pitch + o*KK + t] = w[((g*Og + o)*Cg + c)*KK + t],
 * a transpose of each group's Og x Cg matrix of KK-vectors.  A
 * block moves a T x T tile of vectors through shared memory: it reads T
 * runs of T*KK floats of w (rows o; ct_copy_runs) and writes T runs of
 * T*KK floats of wt (rows c), both with consecutive threads on consecutive
 * words.  In shared
 * memory row o_l starts every `stride` floats, stride = KK mod 32, so that
 * the write phase's reads (KK-vectors of rows o_l, o_l+1, ... for one c) fall
 * in consecutive banks, as if the vectors were adjacent.  T: the largest of 16, 8, 4, 2, 1 whose tile fits
 * CONV_PACK_TILE floats.
 */
enum {
    CONV_PACK_TILE = 4096, /* floats of shared memory per block */
};

struct conv_pack_tile {
    int t;      /* vectors per tile side */
    int stride; /* floats between the tile's rows in shared memory */
    int tiles_o, tiles_c;
};

static conv_pack_tile conv_pack_tile_for(const ct_conv2d_shape *s)
{
    int taps = s->kernel_h * s->kernel_w;
    conv_pack_tile p = {16, 0, 0, 0};
    while (p.t > 1 && p.t * (p.t * taps + CT_CUDA_WARP) > CONV_PACK_TILE)
        p.t /= 2;
    p.stride = p.t * taps;
    while (p.stride % CT_CUDA_WARP != taps % CT_CUDA_WARP)
        p.stride++;
    p.tiles_o = (s->out_channels / s->groups + p.t - 1) / p.t;
    p.tiles_c = (s->in_channels / s->groups + p.t - 1) / p.t;
    return p;
}

/* block (g * tiles_o + tile of o) * tiles_c + tile of c */
__global__ void conv_pack_transposed(ct_conv2d_shape s, conv_pack_tile tile, int pitch,
                                  const float *w, float *wt)
{
    CT_CUDA_DYNAMIC_SHARED(float, vectors);
    int taps = s.kernel_h * s.kernel_w;
    int cg = s.in_channels / s.groups, og = s.out_channels / s.groups;
    int c0 = (int)(blockIdx.x % tile.tiles_c) * tile.t;
    int o0 = (int)(blockIdx.x / tile.tiles_c % tile.tiles_o) * tile.t;
    int g = (int)(blockIdx.x / tile.tiles_c / tile.tiles_o);
    int runs_o = min(tile.t, og - o0), width_c = min(tile.t, cg - c0) * taps;
    ct_copy_runs(vectors, tile.stride, w + (((size_t)g * og + o0) * cg + c0) * taps,
                   (size_t)cg * taps, runs_o, width_c);
    __syncthreads();
    /* rows c of wt, a warp never straddling two (as ct_copy_runs) */
    int runs_c = min(tile.t, cg - c0), width_o = runs_o * taps;
    int lanes = (width_o + CT_CUDA_WARP - 1) / CT_CUDA_WARP * CT_CUDA_WARP;
    for (int e = threadIdx.x; e < runs_c * lanes; e += blockDim.x) {
        int c = e / lanes, at = min(e % lanes, width_o - 1), o = at / taps, t = at % taps;
        wt[((size_t)g * cg + c0 + c) * pitch + o0 * taps + at] =
            vectors[o * tile.stride + c * taps + t];
    }
}

struct conv_backward_data_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<conv_backward_data>";
    int m, n, k, splits, k_chunk; /* m = Cg, n = N*H*W, k = Og*KK */
    ct_conv2d_shape s;
    const float *dy, *w;
    float *dx;

    /* w[o, c, ij] as a(c, oij): runs of KK along k, stride KK along m (so
     * along m for 1x1 kernels); dy along n (input pixels). */
    __device__ bool a_along_k() const { return s.kernel_h * s.kernel_w > 1; }
    __device__ bool b_along_k() const { return false; }

    __device__ float load_a(int g, int c, int oij) const
    {
        int kk = s.kernel_h * s.kernel_w, og = s.out_channels / s.groups;
        int o = oij / kk, ij = oij % kk;
        return w[(((size_t)g * og + o) * m + c) * kk + ij];
    }
    __device__ float load_b(int g, int oij, int nhw) const
    {
        int kk = s.kernel_h * s.kernel_w, og = s.out_channels / s.groups;
        int o = oij / kk, i = oij % kk / s.kernel_w, j = oij % s.kernel_w;
        int plane = s.in_h * s.in_w, pix = nhw % plane, n = nhw / plane;
        int oh = ct_window_output(pix / s.in_w, i, s.stride_h, s.pad_h, s.dilation_h, s.out_h);
        int ow = ct_window_output(pix % s.in_w, j, s.stride_w, s.pad_w, s.dilation_w, s.out_w);
        if (oh < 0 || ow < 0)
            return 0.0f;
        return dy[(((size_t)n * s.out_channels + g * og + o) * s.out_h + oh) * s.out_w + ow];
    }
    __device__ void store(int g, int, int c, int nhw, float value) const
    {
        int plane = s.in_h * s.in_w;
        dx[((size_t)(nhw / plane) * s.in_channels + g * m + c) * plane + nhw % plane] = value;
    }
};

/*
 * The weight gradient's b (col along k = output pixels) is staged like the
 * forward pass's, but per group of CONV_WEIGHT_PIXELS pixels (four k
 * slices) and for the channels of the block's 64 columns (c, tap): the
 * input rows those pixels read, copied once and used by the four slices.
 * Read through the im2col map, each warp's 16 pixels of one column were
 * 16 shifted inputs, 3 sectors for 2.
 */
enum {
    CONV_WEIGHT_PIXELS = 4 * GEMM_TILE_K, /* pixels per staged patch */
};

struct conv_backward_weight_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<conv_backward_weight>";
    static constexpr bool stages_b = true;
    int m, n, k, splits, k_chunk; /* m = Og, n = Cg*KK, k = N*P */
    int scratch_floats;           /* the patch; 0: read b through load_b */
    ct_conv2d_shape s;
    const float *x, *dy;
    float *dw, *parts; /* parts: [splits, O, Cg*KK] when splits > 1 */

    /* dy[n, o, p] and col[cij, np] both run along k (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return true; }

    __device__ float load_a(int g, int o, int np) const
    {
        int p = s.out_h * s.out_w;
        return dy[((size_t)(np / p) * s.out_channels + g * m + o) * p + np % p];
    }
    __device__ float load_b(int g, int np, int cij) const
    {
        int p = s.out_h * s.out_w, pix = np % p;
        return conv_col(s, x, g, cij, np / p, pix / s.out_w, pix % s.out_w);
    }
    __device__ void stage_b(float (*tile)[GEMM_TILE_N + GEMM_PAD], int g, int k0, int k_end,
                            int n0, float *patch) const
    {
        if (scratch_floats == 0) {
            gemm_stage<GEMM_TILE_N>(tile, true, n0, n, k0, k_end,
                                    [&](int np, int cij) { return load_b(g, np, cij); });
            return;
        }
        int taps = s.kernel_h * s.kernel_w, cols_end = min(n0 + GEMM_TILE_N, n);
        int c_lo = n0 / taps, nc = (cols_end - 1) / taps - c_lo + 1;
        int k_begin = (int)(blockIdx.z % splits) * k_chunk;
        int first = k_begin + (k0 - k_begin) / CONV_WEIGHT_PIXELS * CONV_WEIGHT_PIXELS;
        conv_patch at = conv_patch_for(s, c_lo, nc, first, min(first + CONV_WEIGHT_PIXELS, k_end));
        if (k0 == first) { /* the previous patch's readers passed the loop's last barrier */
            conv_patch_stage(at, s, x, g, patch);
            __syncthreads();
        }
        for (int e = threadIdx.x; e < GEMM_TILE_K * GEMM_TILE_N; e += GEMM_THREADS) {
            int kk = e % GEMM_TILE_K, i = e / GEMM_TILE_K, cij = n0 + i;
            tile[kk][i] = k0 + kk < k_end && cij < cols_end
                              ? conv_patch_read(at, s, patch, cij / taps - c_lo, cij % taps, k0 + kk)
                              : 0.0f;
        }
    }
    __device__ void store(int g, int split, int o, int cij, float value) const
    {
        size_t index = ((size_t)g * m + o) * n + cij;
        if (splits == 1)
            dw[index] = value;
        else
            parts[(size_t)split * s.out_channels * n + index] = value;
    }
};

/* dw[i] = sum_{split in order} parts[split, i] */
__global__ void conv_sum_parts(int64_t count, int splits, const float *parts, float *dw)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        float sum = 0.0f;
        for (int split = 0; split < splits; split++)
            sum += parts[split * count + i];
        dw[i] = sum;
    }
}

/* The weight gradient's split of its reduction: enough blocks to fill the
 * device twice over, chunks no shorter than CONV_SPLIT_MIN_DEPTH. */
static void conv_weight_split(const ct_conv2d_shape *s, int *splits, int *k_chunk)
{
    int og = s->out_channels / s->groups;
    int cols = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    int64_t depth = (int64_t)s->n_batch * s->out_h * s->out_w;
    int64_t tiles = (int64_t)((og + GEMM_TILE_M - 1) / GEMM_TILE_M) *
                    ((cols + GEMM_TILE_N - 1) / GEMM_TILE_N) * s->groups;
    int64_t wanted = (2 * (int64_t)ct_cuda_sm_count() + tiles - 1) / tiles;
    int64_t most = depth / CONV_SPLIT_MIN_DEPTH;
    int64_t count = wanted < most ? wanted : most;
    if (count > CONV_SPLIT_MAX)
        count = CONV_SPLIT_MAX;
    if (count < 1)
        count = 1;
    int64_t chunk = (depth + count - 1) / count;
    chunk = (chunk + GEMM_TILE_K - 1) / GEMM_TILE_K * GEMM_TILE_K;
    *k_chunk = count == 1 ? (int)depth : (int)chunk;
    *splits = count == 1 ? 1 : (int)((depth + chunk - 1) / chunk);
}

extern "C" size_t ct_cuda_conv2d_workspace(const ct_conv2d_shape *s)
{
    int splits, k_chunk;
    conv_weight_split(s, &splits, &k_chunk);
    size_t weights = (size_t)s->out_channels * (s->in_channels / s->groups) * s->kernel_h *
                     s->kernel_w;
    return splits > 1 ? sizeof(float) * splits * weights : 0;
}

/*
 * The direct forward kernel, for the first layers (Cg <= 4): a GEMM's k
 * (Cg*KH*KW) is too short there to tile, and reading x through the im2col
 * map repeats every input KH*KW times, shifted off the 32-byte sectors.
 *
 * A block computes output rows [oh0, oh0 + rows) of one image and one group,
 * every output channel of the group.  It stages in shared memory:
 *   - the window of input those outputs read, for every channel of the
 *     group, padding included as zeros (so the compute loop has no bounds
 *     checks and no divergence).  The valid rows of a channel are
 *     contiguous in x: one coalesced read per channel.  A staged row holds
 *     the columns by phase (u % stride_w first, then u / stride_w, with
 *     u = iw + pad_w), so consecutive outputs read consecutive words at any
 *     stride; the row pitch is chosen so that stride_h rows on, the words
 *     continue the same run of banks (pitch * stride_h = out_w mod 32),
 *     which keeps a warp that spans several output rows free of bank
 *     conflicts too;
 *   - the group's weights and biases, in chunks of output channels that fit
 *     (DIRECT_WEIGHTS floats), as contiguous copies; a warp reads one
 *     weight at a time (a broadcast).
 * Each thread then computes pixels t, t + 256, ... of the tile, DIRECT_OUTS
 * output channels at a time in registers (one patch read feeds DIRECT_OUTS
 * FMAs).  rows: enough whole output rows for the block's 256 threads, fewer
 * if the patch would pass DIRECT_PATCH floats; a shape whose single output
 * row does not fit goes to the implicit GEMM (ct_cuda_conv2d_direct_fits).
 * Shared memory is at most (DIRECT_PATCH + DIRECT_WEIGHTS) * 4 = 40 KiB.
 * nvcc gives it 64 registers (the accumulators and the tap addresses): 50%
 * occupancy on sm_90, enough here, where every patch read feeds 8 FMAs.
 * The staging stores can meet a bank twice where a warp's 32 inputs cross
 * a row end and the pitch (chosen for the compute reads) differs from
 * in_w mod 32; they are a few percent of the shared accesses.
 *
 * Each output sums its taps in (c, i, j) order with float FMAs from 0 and
 * then adds the bias; a tap in the padding adds 0 * w, which leaves a sum
 * started at +0 unchanged for finite weights: the same bits as a thread
 * per output that skips the padding.
 */
enum {
    DIRECT_PATCH = 6144,   /* floats of staged input */
    DIRECT_WEIGHTS = 4096, /* floats of staged weights and biases */
    DIRECT_OUTS = 8,       /* output channels per register block */
};

struct conv_direct_tile {
    int rows;       /* output rows per block */
    int tiles;      /* blocks per image and group: ceil(out_h / rows) */
    int span;       /* staged rows per channel: (rows-1)*sh + (KH-1)*dh + 1 */
    int width;      /* staged columns u = iw + pad_w: (out_w-1)*sw + (KW-1)*dw + 1 */
    int phase_w;    /* ceil(width / stride_w): columns of one phase */
    int pitch;      /* floats per staged row, >= stride_w * phase_w */
    int outs_chunk; /* output channels whose weights are staged at once */
};

static int conv_direct_patch(const ct_conv2d_shape *s, int rows, int pitch)
{
    int span = (rows - 1) * s->stride_h + (s->kernel_h - 1) * s->dilation_h + 1;
    return s->in_channels / s->groups * span * pitch;
}

static conv_direct_tile conv_direct_tile_for(const ct_conv2d_shape *s)
{
    conv_direct_tile t;
    t.width = (s->out_w - 1) * s->stride_w + (s->kernel_w - 1) * s->dilation_w + 1;
    t.phase_w = (t.width + s->stride_w - 1) / s->stride_w;
    t.pitch = s->stride_w * t.phase_w;
    for (int pitch = t.pitch; pitch < t.pitch + CT_CUDA_WARP; pitch++)
        if ((int64_t)pitch * s->stride_h % CT_CUDA_WARP == s->out_w % CT_CUDA_WARP) {
            t.pitch = pitch;
            break;
        }
    t.rows = (CT_CUDA_BLOCK + s->out_w - 1) / s->out_w;
    if (t.rows > s->out_h)
        t.rows = s->out_h;
    while (t.rows > 1 && conv_direct_patch(s, t.rows, t.pitch) > DIRECT_PATCH)
        t.rows--;
    t.tiles = (s->out_h + t.rows - 1) / t.rows;
    t.span = (t.rows - 1) * s->stride_h + (s->kernel_h - 1) * s->dilation_h + 1;
    int taps = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    int og = s->out_channels / s->groups;
    t.outs_chunk = DIRECT_WEIGHTS / (taps + 1) / DIRECT_OUTS * DIRECT_OUTS;
    if (t.outs_chunk > og)
        t.outs_chunk = og;
    return t;
}

__global__ void conv_forward_direct(ct_conv2d_shape s, conv_direct_tile t, const float *x,
                                    const float *w, const float *bias, float *y)
{
    CT_CUDA_DYNAMIC_SHARED(float, staged);
    int cg = s.in_channels / s.groups, og = s.out_channels / s.groups;
    int taps = cg * s.kernel_h * s.kernel_w;
    int patch_size = cg * t.span * t.pitch;
    float *patch = staged, *weights = staged + patch_size, *biases = weights + t.outs_chunk * taps;
    int n = (int)(blockIdx.x / t.tiles), g = (int)blockIdx.y;
    int oh0 = (int)(blockIdx.x % t.tiles) * t.rows;
    int rows = min(t.rows, s.out_h - oh0);
    int ih_base = oh0 * s.stride_h - s.pad_h; /* staged row 0 */
    int span = (rows - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h + 1;
    int ih_lo = max(ih_base, 0), ih_hi = min(ih_base + span, s.in_h);
    for (int e = threadIdx.x; e < patch_size; e += blockDim.x)
        patch[e] = 0.0f;
    __syncthreads();
    for (int c = 0; c < cg && ih_lo < ih_hi; c++) {
        const float *from = x + (((size_t)n * s.in_channels + g * cg + c) * s.in_h + ih_lo) * s.in_w;
        float *to = patch + ((size_t)c * t.span + ih_lo - ih_base) * t.pitch;
        for (int e = threadIdx.x; e < (ih_hi - ih_lo) * s.in_w; e += blockDim.x) {
            int u = e % s.in_w + s.pad_w;
            if (u < t.width)
                to[e / s.in_w * t.pitch + u % s.stride_w * t.phase_w + u / s.stride_w] = from[e];
        }
    }
    int pixels = rows * s.out_w;
    for (int o0 = 0; o0 < og; o0 += t.outs_chunk) {
        int chunk = min(t.outs_chunk, og - o0);
        __syncthreads(); /* the patch is staged; the previous chunk's weights are read */
        const float *wg = w + (size_t)(g * og + o0) * taps;
        for (int e = threadIdx.x; e < chunk * taps; e += blockDim.x)
            weights[e] = wg[e];
        for (int e = threadIdx.x; e < chunk; e += blockDim.x)
            biases[e] = bias ? bias[g * og + o0 + e] : 0.0f;
        __syncthreads();
        for (int pix = threadIdx.x; pix < pixels; pix += blockDim.x) {
            int oh = pix / s.out_w, ow = pix % s.out_w;
            for (int q0 = 0; q0 < chunk; q0 += DIRECT_OUTS) {
                float acc[DIRECT_OUTS];
#pragma unroll
                for (int q = 0; q < DIRECT_OUTS; q++)
                    acc[q] = 0.0f;
                const float *wq = weights + (size_t)q0 * taps;
                for (int c = 0; c < cg; c++)
                    for (int i = 0; i < s.kernel_h; i++) {
                        const float *row =
                            patch + (c * t.span + oh * s.stride_h + i * s.dilation_h) * t.pitch;
                        for (int j = 0; j < s.kernel_w; j++, wq++) {
                            int shift = j * s.dilation_w;
                            float v = row[shift % s.stride_w * t.phase_w + ow + shift / s.stride_w];
#pragma unroll
                            for (int q = 0; q < DIRECT_OUTS; q++)
                                acc[q] = fmaf(v, wq[(q < chunk - q0 ? q : 0) * taps], acc[q]);
                        }
                    }
                for (int q = 0; q < DIRECT_OUTS && q < chunk - q0; q++) {
                    size_t o = (size_t)g * og + o0 + q0 + q;
                    y[(((size_t)n * s.out_channels + o) * s.out_h + oh0 + oh) * s.out_w + ow] =
                        acc[q] + biases[q0 + q];
                }
            }
        }
    }
}

static size_t conv_direct_shared_bytes(const ct_conv2d_shape *s, const conv_direct_tile &t)
{
    int taps = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    return sizeof(float) * ((size_t)conv_direct_patch(s, t.rows, t.pitch) +
                            (size_t)t.outs_chunk * (taps + 1));
}

extern "C" bool ct_cuda_conv2d_direct_fits(const ct_conv2d_shape *s)
{
    int cg = s->in_channels / s->groups;
    if (cg > CONV_DIRECT_MAX_CHANNELS || s->groups > 65535)
        return false;
    conv_direct_tile t = conv_direct_tile_for(s);
    return conv_direct_patch(s, 1, t.pitch) <= DIRECT_PATCH &&
           (int64_t)s->n_batch * t.tiles <= INT32_MAX;
}

extern "C" ct_status ct_cuda_conv2d_forward_direct(const ct_conv2d_shape *s, const float *x,
                                                   const float *w, const float *bias, float *y,
                                                   cudaStream_t stream)
{
    if ((int64_t)s->n_batch * s->out_channels * s->out_h * s->out_w == 0)
        return CT_OK;
    conv_direct_tile t = conv_direct_tile_for(s);
    dim3 grid((unsigned)(s->n_batch * t.tiles), (unsigned)s->groups);
    CT_CUDA_LAUNCH(conv_forward_direct, grid, CT_CUDA_BLOCK, conv_direct_shared_bytes(s, t),
                   stream, *s, t, x, w, bias, y);
    return CT_OK;
}

extern "C" ct_status ct_cuda_conv2d_forward(const ct_conv2d_shape *s, const float *x,
                                            const float *w, const float *bias, float *y,
                                            void *workspace, cudaStream_t stream)
{
    (void)workspace;
    conv_forward_problem p;
    p.m = s->out_channels / s->groups;
    p.n = s->n_batch * s->out_h * s->out_w;
    p.k = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.splits = 1;
    p.k_chunk = p.k;
    p.scratch_floats = conv_patch_bound(s, GEMM_TILE_K);
    p.a_pitch = p.k;
    p.flip_taps = false;
    p.s = *s;
    p.x = x;
    p.w = w;
    p.bias = bias;
    p.y = y;
    return ct_cuda_launch_gemm(p, s->groups, stream);
}

extern "C" size_t ct_cuda_conv2d_backward_data_workspace(const ct_conv2d_shape *s)
{
    if (!conv_backward_data_flips(s))
        return 0;
    int taps = s->kernel_h * s->kernel_w;
    return sizeof(float) * (size_t)s->in_channels *
           (size_t)conv_sector_pitch(s->out_channels / s->groups * taps);
}

/* dx as the forward convolution of dy with w' (conv_backward_data_flips) */
static ct_status conv_backward_data_flipped(const ct_conv2d_shape *s, const float *dy,
                                            const float *w, float *dx, float *packed,
                                            cudaStream_t stream)
{
    ct_conv2d_shape t = *s; /* the transposed convolution: dy -> dx */
    t.in_channels = s->out_channels;
    t.in_h = s->out_h;
    t.in_w = s->out_w;
    t.out_channels = s->in_channels;
    t.out_h = s->in_h;
    t.out_w = s->in_w;
    t.pad_h = (s->kernel_h - 1) * s->dilation_h - s->pad_h;
    t.pad_w = (s->kernel_w - 1) * s->dilation_w - s->pad_w;
    conv_backward_data_flipped_problem p;
    p.m = s->in_channels / s->groups;
    p.n = s->n_batch * s->in_h * s->in_w;
    p.k = s->out_channels / s->groups * s->kernel_h * s->kernel_w;
    p.splits = 1;
    p.k_chunk = p.k;
    p.scratch_floats = conv_patch_bound(&t, GEMM_TILE_K);
    p.a_pitch = conv_sector_pitch(p.k);
    p.flip_taps = true;
    p.s = t;
    p.x = dy;
    p.w = packed;
    p.bias = NULL;
    p.y = dx;
    conv_pack_tile tile = conv_pack_tile_for(s);
    CT_CUDA_LAUNCH(conv_pack_transposed, (unsigned)(s->groups * tile.tiles_o * tile.tiles_c),
                   CT_CUDA_BLOCK, sizeof(float) * (size_t)tile.t * tile.stride, stream, *s, tile,
                   p.a_pitch, w, packed);
    return ct_cuda_launch_gemm(p, s->groups, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy,
                                                  const float *w, float *dx, void *workspace,
                                                  cudaStream_t stream)
{
    if (conv_backward_data_flips(s))
        return conv_backward_data_flipped(s, dy, w, dx, (float *)workspace, stream);
    conv_backward_data_problem p;
    p.m = s->in_channels / s->groups;
    p.n = s->n_batch * s->in_h * s->in_w;
    p.k = s->out_channels / s->groups * s->kernel_h * s->kernel_w;
    p.splits = 1;
    p.k_chunk = p.k;
    p.s = *s;
    p.dy = dy;
    p.w = w;
    p.dx = dx;
    return ct_cuda_launch_gemm(p, s->groups, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x,
                                                    const float *dy, float *dw,
                                                    void *workspace, cudaStream_t stream)
{
    conv_backward_weight_problem p;
    p.m = s->out_channels / s->groups;
    p.n = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.k = s->n_batch * s->out_h * s->out_w;
    conv_weight_split(s, &p.splits, &p.k_chunk);
    p.scratch_floats = conv_patch_bound(s, GEMM_TILE_N);
    p.s = *s;
    p.x = x;
    p.dy = dy;
    p.dw = dw;
    p.parts = (float *)workspace;
    CT_TRY(ct_cuda_launch_gemm(p, s->groups, stream));
    if (p.splits == 1)
        return CT_OK;
    int64_t count = (int64_t)s->out_channels * p.n;
    CT_CUDA_LAUNCH_ITEMS(conv_sum_parts, count, stream, count, p.splits, p.parts, dw);
    return CT_OK;
}
