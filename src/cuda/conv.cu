/*
 * 2-D convolution on the GPU, native kernels: implicit GEMM on the tiled
 * kernel of gemm.cuh, one GEMM per group (blockIdx.z), nothing materialized.
 * With Cg = C/groups, Og = O/groups, P = out_h*out_w, KK = KH*KW:
 *   forward:         y_g[o, (n,p)]        = sum_{(c,i,j)} w[o,(c,i,j)] col[(c,i,j),(n,p)]
 *   backward data:   dx_g[c, (n,ih,iw)]   = sum_{(o,i,j)} wt[c,(o,i,j)] dcol[(o,i,j),(n,ih,iw)]
 *   backward weight: dw_g[o, (c,i,j)]     = sum_{(n,p)} dy[n,o,p] col[(c,i,j),(n,p)]
 * col[(c,i,j),(n,oh,ow)] = x[n, g*Cg+c, oh*sh-ph+i*dh, ow*sw-pw+j*dw] and
 * dcol[(o,i,j),(n,ih,iw)] = dy[n, g*Og+o, oh, ow] where oh*sh - ph + i*dh = ih
 * and ow*sw - pw + j*dw = iw (0 outside); conv_patch.cuh stages both.  wt is
 * w transposed per group (wt[c, o, ij] = w[o, c, ij]), packed in the
 * workspace by conv_pack_transposed.  The weight gradient's reduction (N*P
 * long) is split over blocks when its output is small; the parts land in
 * the workspace and are added in split order (gemm.cuh's split k), so the
 * result is deterministic.  The first layers (few input channels per
 * group) have a direct forward kernel (conv_direct.cu), which the op table
 * prefers.
 *
 * Accumulation: all outputs (y, dx, dw, db) are written with =.
 */
#include <limits.h>
#include <string.h>

#include "core/math_shared.h"
#include "cuda/conv_patch.cuh"

enum {
    CONV_SPLIT_MIN_DEPTH = 128,   /* shortest k chunk worth its own block */
    /* the most chunks of a weight gradient's k: a first layer's few
     * outputs over every pixel (6 x 25 over 200,704 at batch 256) split to
     * twice the SMs, where 128 left 98 slices a block (55.4 -> 33.1 us on
     * the model; the parts are summed 16 in flight, ct_sum_parts_deep) */
    CONV_SPLIT_MAX = 512,
    CONV_COLUMN_FLOATS = 4,       /* a column's conv_column in the scratch */
    CONV_SPOT_FLOATS = 4,         /* a pixel's conv_patch_spot in the scratch */
};

/* The floats of the forward pass's and backward data's tables before a k
 * patch's rows: patch_k columns, then a tile's `width` pixels (16-byte
 * aligned: patch_k is a multiple of 8 and the header 16 floats). */
static constexpr __host__ __device__ int conv_table_floats(int patch_k, int width)
{
    return CONV_COLUMN_FLOATS * patch_k + CONV_SPOT_FLOATS * width;
}
static_assert(sizeof(conv_patch_spot) == CONV_SPOT_FLOATS * sizeof(float), "a spot is 16 bytes");
static_assert(sizeof(conv_column) == CONV_COLUMN_FLOATS * sizeof(float), "a column is 16 bytes");

/*
 * The forward pass and backward data, as one GEMM: d[m, pixel] = sum_k
 * a[m, k] col[k, pixel] with a = w (forward, rows of Cg*KK) or the packed wt
 * (backward data, rows of Og*KK padded to whole sectors, so that each k
 * slice of a row is a sector-aligned read; read in place, w's rows along
 * k = (o, tap) are runs of KK with jumps of Cg*KK: about half of each
 * sector used), and col the gather of conv_patch.cuh over the destination
 * plane (y's, or dx's when transposed).  b is staged per k patch of
 * patch_k columns (2^j k slices, conv_patch_k): the channels its taps
 * cover, the source rows of the block's pixels, copied at the patch's
 * first slice and read by each of its slices, a thread's pixel decomposed
 * once a slice (conv_patch_pixel); scratch_floats 0 reads through the map
 * instead.  The forward
 * pass's bias is one coalesced read of the tile's 64 values (row_bias).
 * On the narrow tile (at most 16 channels) a's rows are read whole, once
 * per block (gemm_stage_a_strip): w's rows of Cg*KK floats are no whole
 * number of sectors where Cg*KK is no multiple of 8, and a 16-float k
 * slice of them was 3 sectors for 2 (71% of SimpleCNN's conv2 reads).
 */
struct conv_gemm_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<conv_forward>";
    static constexpr bool stages_b = true;
    static constexpr bool adds_row_bias = true;
    static constexpr bool strips_a = true; /* on the narrow tile, where it fits */
    static constexpr bool sums_parts = true; /* k split where the tiles are few (gemm.cuh) */
    static constexpr bool stores_quads = true; /* the wide tile's columns in fours (gemm.cuh) */
    int m, n, k, splits, k_chunk; /* m = Og (Cg), n = N * dst plane, k = Cg*KK (Og*KK) */
    /* scratch_floats: the patch; 0: read b through the map */
    int a_pitch; /* floats between rows of a */
    int patch_k; /* columns (c, tap) per staged patch: 2^j whole k slices (conv_patch_k) */
    ct_divmod by_k_chunk; /* k_chunk's, for a slice's split (conv_patch_floats) */
    /* the patch's columns are staged as a table (conv_patch_column_of):
     * the index map is additive, not transposed or at stride 1 */
    bool column_table;
    /* and the patch bordered with the padding's zeros (conv_border_for):
     * read with no test, where it fits */
    bool bordered;
    conv_geometry g;
    const float *a, *src, *bias;
    float *dst;
    bool relu; /* forward: store max(y, 0) (a fused relu; NaN stays NaN) */
    /* backward data: store the backward of the relu whose output this is
     * (same layout as dst; a fused relu_bwd), else NULL */
    const float *relu_mask;

    /* a[m, k] runs along k; col along n (destination pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return false; }

    __device__ float load_a(int grp, int row, int depth) const
    {
        return a[((size_t)grp * m + row) * a_pitch + depth];
    }
    __device__ const float *a_row(int grp, int row) const
    {
        return a + ((size_t)grp * m + row) * a_pitch;
    }
    __device__ size_t a_row_pitch() const { return (size_t)a_pitch; }
    __device__ float load_b(int grp, int depth, int pixel) const
    {
        int c = conv_channel_of(g, depth);
        return conv_gather(g, src, grp, c, depth - c * (int)g.by_taps.divisor, pixel);
    }
    /* the bordered patch's code is in the wide tiles' kernels only, and
     * not in the phases' (conv_backward_phase_problem): in the 64 x 64
     * tile's it spilled 48 bytes at 64 registers, took the pairs' 96 to
     * 120, and spilled 12-24 in the phases' wide tiles (nvcc 13,
     * scripts/kernel-resources.sh) */
    static constexpr bool borders = true;
    template <class Tile>
    __device__ void stage_b(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                            int n0, float *patch) const
    {
        stage_b_of<Tile, borders && Tile::n == GEMM_WIDE>(tile, grp, k0, k_end, n0, patch);
    }
    template <class Tile, bool Borders>
    __device__ void stage_b_of(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                               int n0, float *patch) const
    {
        if (scratch_floats == 0) {
            gemm_stage<Tile::n, Tile::depth, Tile::pad>(
                tile, false, n0, n, k0, k_end,
                [&](int depth, int pixel) { return load_b(grp, depth, pixel); });
            return;
        }
        /* the patch of the patch_k columns from its first slice on, staged
         * there and read by each of its slices; its conv_patch is kept in
         * the scratch's first floats, not in registers: the 128-row tile
         * then stays within its 128 (gemm.cuh) without spilling */
        int taps = g.kernel_h * g.kernel_w, n_end = min(n0 + Tile::n, n);
        int k_begin = splits > 1 ? ct_div(by_k_chunk, k0) * k_chunk : 0; /* the block's split's */
        int first = k_begin + ((k0 - k_begin) & -patch_k); /* patch_k: a power of two */
        conv_patch *header = (conv_patch *)patch;
        /* the patch's columns (c, tap) as conv_patch_column_read takes them,
         * made once per patch, where the index map is additive (not
         * transposed, or at stride 1): read per element through the map,
         * with the column's divisions, they were a fifth of the kernel's
         * instructions (emulated counts per line, docs/perf.md); and the
         * tile's pixels (conv_patch_spot), made once per patch too, where
         * each slice made its threads' (a seventh of the staging) */
        conv_column *columns = (conv_column *)(patch + CONV_PATCH_HEADER);
        conv_patch_spot *spots = (conv_patch_spot *)(columns + patch_k);
        patch += CONV_PATCH_HEADER + (column_table ? conv_table_floats(patch_k, Tile::n) : 0);
        conv_patch at;
        if (k0 == first) { /* the previous patch's readers passed the loop's last barrier */
            int c_lo = conv_channel_of(g, first);
            /* columns past the block's k read nothing */
            for (int e = threadIdx.x; column_table && e < patch_k; e += GEMM_THREADS) {
                conv_column column =
                    first + e >= k_end    ? conv_column_none(0.0f)
                    : Borders && bordered ? conv_border_column_of(g, first + e, c_lo)
                                          : conv_patch_column_of(g, first + e, c_lo, g.transposed);
                ct_store16(columns + e, &column);
            }
            int nc = conv_channel_of(g, min(first + patch_k, k_end) - 1) - c_lo + 1;
            at = Borders && bordered ? conv_border_for(g, c_lo, nc, n0, n_end)
                                     : conv_patch_for(g, c_lo, nc, n0, n_end);
            if (column_table && threadIdx.x < Tile::n) { /* pixels past the tile's: no taps */
                int pixel = at.n0 + (int)threadIdx.x;
                conv_patch_spot spot =
                    Borders && bordered
                        ? conv_border_spot_of(at, g, pixel, pixel < at.n_end)
                        : conv_patch_spot_of<false>(at, g, min(pixel, at.n_end - 1),
                                                    pixel < at.n_end, g.transposed);
                ct_store16(spots + threadIdx.x, &spot);
            }
            if (threadIdx.x == 0)
                *header = at;
            if (Borders && bordered)
                conv_border_stage(at, g, src, grp, patch);
            else
                conv_patch_stage(at, g, src, grp, patch);
            __syncthreads();
        } else {
            /* read on the table's path too, which does not use it: without
             * it nvcc 13 spilled 48 bytes in the 128-row tiles */
            at = *header;
        }
        static_assert(GEMM_THREADS % Tile::n == 0, "a thread stages one pixel's taps");
        static_assert((Tile::depth & (Tile::depth - 1)) == 0, "patch_k is 2^j slices");
        int i = threadIdx.x % Tile::n;
        if (column_table) {
            enum { STEP = GEMM_THREADS / Tile::n, READS = Tile::depth / STEP };
            conv_patch_spot spot;
            ct_load16(spots + i, &spot);
            const conv_column *slice = columns + (k0 - first);
            if (Borders && bordered) {
                if (k0 + Tile::depth <= k_end) {
#pragma unroll
                    for (int r = 0; r < READS; r++) {
                        int kk = (int)threadIdx.x / Tile::n + r * STEP;
                        conv_column column;
                        ct_load16(slice + kk, &column);
                        tile[kk][i] = conv_border_read(spot, patch, column);
                    }
                    return;
                }
                /* the last slice's columns past k_end read a word of the
                 * patch and take 0 (a's 0 times an inf there is no 0) */
#pragma unroll
                for (int r = 0; r < READS; r++) {
                    int kk = (int)threadIdx.x / Tile::n + r * STEP;
                    conv_column column;
                    ct_load16(slice + kk, &column);
                    float v = conv_border_read(spot, patch, column);
                    tile[kk][i] = column.bits != CONV_COLUMN_NONE ? v : 0.0f;
                }
                return;
            }
#pragma unroll
            for (int r = 0; r < READS; r++) { /* k_end and n_end: in the column and the spot */
                int kk = (int)threadIdx.x / Tile::n + r * STEP;
                conv_column column;
                ct_load16(slice + kk, &column);
                tile[kk][i] = conv_patch_column_read(spot, patch, column);
            }
            return;
        }
        /* at.n0, not n0: from the header, it keeps nvcc from holding the
         * pixel's row and column across the k loop (spills at 128) */
        int c_lo = at.c_lo;
        conv_patch_pixel px = conv_patch_pixel_of(at, g, at.n0 + i);
        for (int kk = threadIdx.x / Tile::n; kk < Tile::depth; kk += GEMM_THREADS / Tile::n) {
            int depth = k0 + kk, c = conv_channel_of(g, depth);
            tile[kk][i] = depth < k_end && n0 + i < n_end
                              ? conv_patch_pixel_read(px, g, patch, c - c_lo, depth - c * taps)
                              : 0.0f;
        }
    }
    __device__ float row_bias(int grp, int row) const { return bias ? bias[grp * m + row] : 0.0f; }
    __device__ void store(int grp, int, int row, int pixel, float value) const
    {
        size_t at = conv_dst_offset(g, grp * m + row, pixel);
        if (relu_mask)
            value = ct_relu_grad(relu_mask[at], value);
        dst[at] = relu && value < 0.0f ? 0.0f : value;
    }
    /* pixels pixel .. pixel + 3 (pixel a multiple of 4): one image's where
     * its plane is a multiple of 4, one 128-bit store there */
    __device__ void store4(int grp, int split, int row, int pixel, const float *value) const
    {
        size_t at = conv_dst_offset(g, grp * m + row, pixel);
        bool whole = g.by_plane.divisor % CT_VEC == 0 && ((uintptr_t)(dst + at) & 15) == 0 &&
                     (!relu_mask || ((uintptr_t)(relu_mask + at) & 15) == 0);
        if (!whole) {
            for (int c = 0; c < CT_VEC; c++)
                store(grp, split, row, pixel + c, value[c]);
            return;
        }
        float out[CT_VEC], mask[CT_VEC];
        if (relu_mask)
            ct_load4(relu_mask + at, mask);
#pragma unroll
        for (int c = 0; c < CT_VEC; c++) {
            float v = relu_mask ? ct_relu_grad(mask[c], value[c]) : value[c];
            out[c] = relu && v < 0.0f ? 0.0f : v;
        }
        ct_store4(dst + at, out);
    }
};

struct conv_backward_data_problem : conv_gemm_problem {
    static constexpr const char *kernel_name = "gemm<conv_backward_data>";
};

static int conv_sector_pitch(int floats)
{
    return (floats + 7) / 8 * 8;
}

/*
 * The packing: wt[(g*Cg + c)*pitch + o*KK + t] = w[((g*Og + o)*Cg + c)*KK + t],
 * a transpose of each group's Og x Cg matrix of KK-vectors.  A block moves
 * a T x T tile of vectors through shared memory: it reads T runs of T*KK
 * floats of w (rows o; as float4s where aligned, conv_pack_copy_quads;
 * else ct_copy_runs) and writes T runs of T*KK floats of wt (rows c),
 * both with consecutive threads on consecutive words.  In shared
 * memory row o_l starts every `stride` floats, stride = KK mod 32, so that
 * the write phase's reads (KK-vectors of rows o_l, o_l+1, ... for one c)
 * fall in consecutive banks, as if the vectors were adjacent.  T: the
 * largest of 16, 8, 4, 2, 1 whose tile fits CONV_PACK_TILE floats.
 */
enum {
    CONV_PACK_TILE = 4096, /* floats of shared memory per block */
    CONV_PACK_ROUND = 2,   /* quads a thread loads at once */
};

struct conv_pack_tile {
    int t;      /* vectors per tile side */
    int stride; /* floats between the tile's rows in shared memory */
    int tiles_o, tiles_c;
    /* the divisors of the write phase's indices: the taps, and a row's
     * lanes in a tile of t rows o and in the last tile of o (fewer) */
    ct_divmod by_taps, by_lanes, by_last_lanes;
    /* quads: full tiles read as float4s (conv_pack_copy_quads: rows of
     * w 16-byte aligned, a row's t*KK floats a multiple of 4), a row's
     * quads rounded up to 8 slots (by_slots); else by ct_copy_runs */
    bool quads;
    ct_divmod by_slots;
};

/* Backward data by phases (below) packs each phase's wt_p[c, (o, t, u)]
 * on its own: tap `tap` of w goes to phase phase[tap], as its local[tap]-th
 * tap, the phase's rows `pitch` floats apart from `base` on. */
enum {
    CONV_PHASES_MAX = 16, /* phases of backward data by phases: rows' x columns' */
    CONV_PHASE_TAPS = 64, /* the most taps a kernel read by phases has */
};

struct conv_pack_phases {
    int count; /* 0: the one layout of conv_pack_transposed's comment */
    unsigned char phase[CONV_PHASE_TAPS], local[CONV_PHASE_TAPS];
    int taps[CONV_PHASES_MAX], pitch[CONV_PHASES_MAX];
    int64_t base[CONV_PHASES_MAX];
};

/* A write phase's lanes for `runs_o` rows o of `taps` floats: whole warps. */
static inline __host__ __device__ int conv_pack_lanes(int runs_o, int taps)
{
    return (runs_o * taps + CT_CUDA_WARP - 1) / CT_CUDA_WARP * CT_CUDA_WARP;
}

static conv_pack_tile conv_pack_tile_for(const ct_conv2d_shape *s, const float *w)
{
    int taps = s->kernel_h * s->kernel_w;
    conv_pack_tile p = {};
    p.t = 16;
    while (p.t > 1 && p.t * (p.t * taps + CT_CUDA_WARP) > CONV_PACK_TILE)
        p.t /= 2;
    p.stride = p.t * taps;
    while (p.stride % CT_CUDA_WARP != taps % CT_CUDA_WARP)
        p.stride++;
    int og = s->out_channels / s->groups;
    p.tiles_o = (og + p.t - 1) / p.t;
    p.tiles_c = (s->in_channels / s->groups + p.t - 1) / p.t;
    p.by_taps = ct_divmod_of(taps);
    p.by_lanes = ct_divmod_of(conv_pack_lanes(p.t, taps));
    p.by_last_lanes = ct_divmod_of(conv_pack_lanes(og - (p.tiles_o - 1) * p.t, taps));
    p.quads = (size_t)(s->in_channels / s->groups) * taps % 4 == 0 && p.t * taps % 4 == 0 &&
              (uintptr_t)w % 16 == 0;
    p.by_slots = ct_divmod_of((p.t * taps / 4 + 7) / 8 * 8);
    return p;
}

/* A full tile's rows o of w into shared memory as 128-bit loads
 * (ct_load4), CONV_PACK_ROUND quads a thread loaded before any is stored:
 * a 16 x 16 tile of 3x3 vectors is two rounds of loads, where
 * ct_copy_runs's float a thread took ten in series (ResNet-18 B64's
 * packings 69.4 -> 37.0 us busy on the model, docs/perf.md).  Three a round
 * took 40 registers (four 48; forced to 32, spills): 6 blocks an SM where
 * 32 registers leave 8, so a 1,024-block packing (layer4's) would take
 * two waves on an H100.
 *
 * The tile's rows in shared memory are KK mod 32 floats apart (for the
 * write phase's banks), rarely a multiple of 4: four scalar stores a quad.
 * Word k of every lane's quad, 4 floats apart, would be 4 words a bank.
 * So a row's quads go to whole groups of 8 lanes (its slots: the quads
 * rounded up to 8, the lanes past the last quad repeating it), each group
 * 8 consecutive quads of one row, 4 floats apart: 8 banks of one residue
 * mod 4 for words of one residue; the k-th store of a lane of group g (of
 * its warp's 4) writes the word of its quad whose bank is k + g (mod 4),
 * so the groups' residues differ and the warp's 32 words fill 32 banks. */
static __device__ __forceinline__ float conv_quad_word(const float v[CT_VEC], int word)
{
    /* two levels of selects, no branch (a chain of word == tests became
     * a switch under the host compiler: divergent branches, emulated) */
    float low = word & 1 ? v[1] : v[0], high = word & 1 ? v[3] : v[2];
    return word & 2 ? high : low;
}

static __device__ __forceinline__ void conv_pack_copy_quads(float *vectors,
                                                            const conv_pack_tile &tile,
                                                            const float *from, size_t pitch,
                                                            int rows, int quads)
{
    int slots = (int)tile.by_slots.divisor, count = rows * slots;
    int lane = (int)threadIdx.x % CT_CUDA_WARP, group = lane / 8;
    int step = CONV_PACK_ROUND * (int)blockDim.x;
    for (int warp0 = (int)threadIdx.x - lane; warp0 < count; warp0 += step) {
        float v[CONV_PACK_ROUND][CT_VEC];
        int at[CONV_PACK_ROUND];
#pragma unroll
        for (int u = 0; u < CONV_PACK_ROUND; u++) {
            if (warp0 + u * (int)blockDim.x >= count)
                break; /* uniform: the warp's */
            int e = min(warp0 + u * (int)blockDim.x + lane, count - 1);
            int o = ct_div(tile.by_slots, e), q = min(e - o * slots, quads - 1);
            at[u] = o * tile.stride + 4 * q;
            ct_load4(from + o * pitch + 4 * q, v[u]);
        }
#pragma unroll
        for (int u = 0; u < CONV_PACK_ROUND; u++) {
            if (warp0 + u * (int)blockDim.x >= count)
                break;
#pragma unroll
            for (int k = 0; k < CT_VEC; k++) {
                int word = (k + group - at[u]) & (CT_VEC - 1);
                vectors[at[u] + word] = conv_quad_word(v[u], word);
            }
        }
    }
}

/* block (g * tiles_o + tile of o) * tiles_c + tile of c */
__global__ void conv_pack_transposed(ct_conv2d_shape s, conv_pack_tile tile, int pitch,
                                     conv_pack_phases phases, const float *w, float *wt)
{
    CT_CUDA_DYNAMIC_SHARED(float, vectors);
    int taps = s.kernel_h * s.kernel_w;
    int cg = s.in_channels / s.groups, og = s.out_channels / s.groups;
    int c0 = (int)(blockIdx.x % tile.tiles_c) * tile.t;
    int o0 = (int)(blockIdx.x / tile.tiles_c % tile.tiles_o) * tile.t;
    int g = (int)(blockIdx.x / tile.tiles_c / tile.tiles_o);
    int runs_o = min(tile.t, og - o0), width_c = min(tile.t, cg - c0) * taps;
    const float *from = w + (((size_t)g * og + o0) * cg + c0) * taps;
    if (tile.quads && width_c == tile.t * taps) /* uniform: the block's */
        conv_pack_copy_quads(vectors, tile, from, (size_t)cg * taps, runs_o, width_c / 4);
    else
        ct_copy_runs(vectors, tile.stride, from, (size_t)cg * taps, runs_o, width_c);
    __syncthreads();
    /* rows c of wt, a warp never straddling two (as ct_copy_runs); the
     * indices by the tile's divisors (four run-time divisions an element
     * were 67 instructions of its 70, emulated counts) */
    int runs_c = min(tile.t, cg - c0), width_o = runs_o * taps;
    ct_divmod by_lanes = runs_o == tile.t ? tile.by_lanes : tile.by_last_lanes;
    ct_divmod by_taps = tile.by_taps;
    int lanes = (int)by_lanes.divisor, end = runs_c * lanes;
    float *rows = wt + ((size_t)g * cg + c0) * pitch + o0 * taps; /* the tile's row c = 0 */
    for (int e = threadIdx.x; e < end; e += blockDim.x) {
        int c = ct_div(by_lanes, e), at = min(e - c * lanes, width_o - 1);
        int o = ct_div(by_taps, at), t = at - o * taps;
        float *to = rows + (size_t)c * pitch + at;
        if (phases.count) { /* a uniform branch: the launch's */
            int ph = phases.phase[t];
            to = wt + (size_t)phases.base[ph] + ((size_t)g * cg + c0 + c) * phases.pitch[ph] +
                 (size_t)(o0 + o) * phases.taps[ph] + phases.local[t];
        }
        *to = vectors[o * tile.stride + c * taps + t];
    }
}

/*
 * The weight gradient's b (col along k = output pixels) is staged like the
 * forward pass's, but per group of CONV_WEIGHT_PIXELS pixels (four or eight
 * k slices, by tile) and for the channels of the block's columns (c, tap):
 * the input rows those pixels read, copied once and used by its slices.
 * Read through the im2col map, each warp's 16 pixels of one column were
 * 16 shifted inputs, 3 sectors for 2.
 */
enum {
    CONV_WEIGHT_PIXELS = 64, /* pixels per staged patch: whole k slices of either tile */
};

struct conv_backward_weight_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<conv_backward_weight>";
    /* the patch bordered (as the forward pass's) where it fits, in the
     * wide tiles only: by conv_bordered_weight_problem's kernels */
    static constexpr bool borders = true;
    static constexpr bool stages_a = true;
    static constexpr bool stages_b = true;
    static constexpr bool sums_parts = true; /* k (the pixels) split where the tiles are few */
    static constexpr bool stores_quads = true; /* the wide tile's columns in fours (gemm.cuh) */
    int m, n, k, splits, k_chunk; /* m = Og, n = Cg*KK (+ 1 with db), k = N*P */
    int n_w;                      /* Cg*KK: the weight columns; column n_w is db's */
    /* scratch_floats: the patch; 0: read b through load_b */
    conv_geometry g;              /* forward: col as the forward pass reads it */
    const float *x, *dy;
    float *dw, *db;
    bool bordered; /* the patch bordered (conv_border_for), where it fits */

    /* dy[n, o, p] and col[cij, np] both run along k (output pixels). */
    __device__ bool a_along_k() const { return true; }
    __device__ bool b_along_k() const { return true; }

    __device__ float load_a(int grp, int o, int np) const
    {
        return dy[conv_dst_offset(g, grp * m + o, np)];
    }
    /* a's slice: a thread takes one pixel (kk) of it, as gemm_stage's
     * order has it, for several output channels: its image and place in
     * the plane found once a slice, not per element (conv_dst_offset
     * divides by the plane: a tenth of the kernel's instructions) */
    template <class Tile>
    __device__ void stage_a(float (*tile)[Tile::m + Tile::pad], int grp, int k0, int k_end,
                            int m0) const
    {
        static_assert(GEMM_THREADS % Tile::depth == 0, "a thread stages one pixel's rows");
        int kk, i0;
        gemm_along_k<Tile::depth, Tile::m + Tile::pad>((int)threadIdx.x, &kk, &i0);
        int pixel = k0 + kk;
        int plane = (int)g.by_plane.divisor, img = ct_div(g.by_plane, min(pixel, k - 1));
        const float *at = dy + ((size_t)img * g.dst_c + grp * m) * plane + (min(pixel, k - 1) -
                                                                           img * plane);
        enum { STEP = GEMM_THREADS / Tile::depth, READS = Tile::m / STEP };
        at += (size_t)(m0 + i0) * plane;
        /* the thread's rows within m, none past k_end: one compare an
         * element, its address one add (the bounds and the offset per
         * element were 14 instructions an element, emulated counts) */
        int rows = pixel < k_end ? m - m0 - i0 : 0;
        size_t step = (size_t)STEP * plane;
        /* all of them, no compares (not in the 128-row tile: its loads
         * then spilled 36 bytes at 128 registers, nvcc 13) */
        if (Tile::m <= GEMM_WIDE / 2 && rows > (READS - 1) * STEP) {
#pragma unroll
            for (int r = 0; r < READS; r++, at += step)
                tile[kk][i0 + r * STEP] = *at;
            return;
        }
#pragma unroll
        for (int r = 0; r < READS; r++, at += step)
            tile[kk][i0 + r * STEP] = r * STEP < rows ? *at : 0.0f;
    }
    __device__ float load_b(int grp, int np, int cij) const
    {
        if (cij >= n_w)
            return 1.0f;
        int c = conv_channel_of(g, cij);
        return conv_gather(g, x, grp, c, cij - c * (int)g.by_taps.divisor, np);
    }
    /* The patch of pixels [first, first + CONV_WEIGHT_PIXELS) (to k_end) for
     * the block's columns from n0, bordered or not, with its header, its
     * columns' table and its pixels' spots; a barrier must follow. */
    template <class Tile, bool Bordered>
    __device__ void stage_patch(int grp, int first, int k_end, int n0, conv_patch *header,
                                conv_column *columns, conv_patch_spot *spots, float *patch) const
    {
        int cols_end = min(n0 + Tile::n, n);
        int w_end = min(cols_end, n_w); /* the weight columns; db's, of ones, after */
        int c_lo = conv_channel_of(g, n0);
        int nc = w_end > n0 ? conv_channel_of(g, w_end - 1) - c_lo + 1 : 0;
        for (int i = threadIdx.x; i < Tile::n; i += GEMM_THREADS) {
            int cij = n0 + i; /* after the weights' columns, db's (ones), then none */
            conv_column column = cij < w_end ? Bordered ? conv_border_column_of(g, cij, c_lo)
                                                        : conv_patch_column_of(g, cij, c_lo, false)
                                             : conv_column_none(cij < cols_end ? 1.0f : 0.0f);
            ct_store16(columns + i, &column);
        }
        int last = min(first + CONV_WEIGHT_PIXELS, k_end);
        conv_patch at = Bordered ? conv_border_for(g, c_lo, nc, first, last)
                                 : conv_patch_for(g, c_lo, nc, first, last);
        /* the patch's pixels, decomposed once a patch (once a slice, they
         * were a twentieth of the kernel's instructions) */
        if (threadIdx.x < CONV_WEIGHT_PIXELS) { /* past k_end: no taps (a's are 0 there) */
            int pixel = first + (int)threadIdx.x;
            conv_patch_spot spot = Bordered ? conv_border_spot_of(at, g, pixel, pixel < last)
                                            : conv_patch_spot_of<true>(at, g, min(pixel, last - 1),
                                                                       pixel < last, false);
            ct_store16(spots + threadIdx.x, &spot);
        }
        if (Bordered)
            conv_border_stage(at, g, x, grp, patch);
        else
            conv_patch_stage(at, g, x, grp, patch);
        if (threadIdx.x == 0)
            *header = at;
    }
    template <class Tile>
    __device__ void stage_b(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                            int n0, float *patch) const
    {
        if (scratch_floats == 0) {
            gemm_stage<Tile::n, Tile::depth, Tile::pad>(
                tile, true, n0, n, k0, k_end,
                [&](int np, int cij) { return load_b(grp, np, cij); });
            return;
        }
        stage_b_patch<Tile, false>(tile, grp, k0, k_end, n0, patch);
    }
    /* stage_b's slice from the patch, bordered or not */
    template <class Tile, bool Bordered>
    __device__ void stage_b_patch(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                                  int n0, float *patch) const
    {
        /* the slice's patch: a split's chunk is whole patches (or all of
         * k), conv_weight_layout */
        int first = k0 & -CONV_WEIGHT_PIXELS;
        /* the patch's conv_patch is made once, when it is staged, and kept
         * in the scratch's first floats (as the forward pass's), and so is
         * each of the block's columns (c, tap) as conv_patch_column_read
         * takes it: made by every thread for every element, with the
         * pixel's decomposition, they were two thirds of the kernel's
         * instructions (emulated counts per line, docs/perf.md) */
        conv_patch *header = (conv_patch *)patch;
        conv_column *columns = (conv_column *)(patch + CONV_PATCH_HEADER);
        conv_patch_spot *spots = (conv_patch_spot *)(columns + Tile::n);
        patch += CONV_PATCH_HEADER + conv_table_floats(Tile::n, CONV_WEIGHT_PIXELS);
        if (k0 == first) { /* the previous patch's readers passed the loop's last barrier */
            stage_patch<Tile, Bordered>(grp, first, k_end, n0, header, columns, spots, patch);
            __syncthreads();
        }
        /* a thread stages one pixel (kk) of the slice, for several columns */
        enum { STEP = GEMM_THREADS / Tile::depth, READS = Tile::n / STEP };
        static_assert(GEMM_THREADS % Tile::depth == 0, "a thread stages one pixel's columns");
        static_assert(CONV_WEIGHT_PIXELS % Tile::depth == 0, "a patch is whole k slices");
        int kk, i0;
        gemm_along_k<Tile::depth, Tile::n + Tile::pad>((int)threadIdx.x, &kk, &i0);
        int pixel = k0 + kk;
        conv_patch_spot spot;
        ct_load16(spots + (pixel - first), &spot);
        /* four at a time in the 128-row tile: unrolled whole, its loads
         * spilled 40 bytes at 128 registers (nvcc 13) */
        enum { UNROLL = Tile::m > GEMM_WIDE / 2 ? 4 : READS };
        if constexpr (Bordered) {
            /* each column one load at a fixed offset from the pixel's
             * place, no test, where the block's columns are all weights
             * and the pixel is k's; else db's column takes its fill, and a
             * pixel past k 0 (a's are 0 there, and 0 times an inf of the
             * word its spot reads is no 0) */
            if (spot.plane == 0) { /* conv_border_spot_of's past k */
#pragma unroll UNROLL
                for (int r = 0; r < READS; r++)
                    tile[kk][i0 + r * STEP] = 0.0f;
                return;
            }
            if (n0 + Tile::n <= n_w) {
#pragma unroll UNROLL
                for (int r = 0; r < READS; r++) {
                    int i = i0 + r * STEP;
                    conv_column column;
                    ct_load16(columns + i, &column);
                    tile[kk][i] = conv_border_read(spot, patch, column);
                }
                return;
            }
#pragma unroll UNROLL
            for (int r = 0; r < READS; r++) {
                int i = i0 + r * STEP;
                conv_column column;
                ct_load16(columns + i, &column);
                float v = conv_border_read(spot, patch, column);
                tile[kk][i] = column.bits != CONV_COLUMN_NONE ? v : column.fill;
            }
        } else {
#pragma unroll UNROLL
            for (int r = 0; r < READS; r++) {
                /* what the column is comes from the table too: the block's
                 * column bounds held in registers across the k loop spilled */
                int i = i0 + r * STEP;
                conv_column column;
                ct_load16(columns + i, &column);
                tile[kk][i] = conv_patch_column_read(spot, patch, column);
            }
        }
    }
    __device__ void store(int grp, int, int o, int cij, float value) const
    {
        if (cij < n_w)
            dw[((size_t)grp * m + o) * n_w + cij] = value;
        else
            db[grp * m + o] = value;
    }
    /* columns cij .. cij + 3: one 128-bit store where they are weights on a
     * 16-byte boundary */
    __device__ void store4(int grp, int split, int o, int cij, const float *value) const
    {
        float *at = dw + ((size_t)grp * m + o) * n_w + cij;
        if (cij + CT_VEC <= n_w && ((uintptr_t)at & 15) == 0) {
            ct_store4(at, value);
            return;
        }
        for (int c = 0; c < CT_VEC; c++)
            store(grp, split, o, cij + c, value[c]);
    }
};

/* The weight gradient with its patch bordered (p.bordered: conv_patch_floats),
 * on the wide tiles: kernels of its own, as both patches' code in one
 * kernel spilled 16 bytes in the 64-row wide tile at its 80 registers
 * (nvcc 13, scripts/kernel-resources.sh), where either alone does not. */
struct conv_bordered_weight_problem : conv_backward_weight_problem {
    static constexpr bool wide_only = true;
    template <class Tile>
    __device__ void stage_b(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                            int n0, float *patch) const
    {
        static_assert(Tile::n == GEMM_WIDE, "bordered on the wide tiles only");
        /* never taken (bordered takes a patch), but without it nvcc 13
         * spilled 8 bytes in the 64-row tile */
        if (scratch_floats == 0)
            conv_backward_weight_problem::stage_b<Tile>(tile, grp, k0, k_end, n0, patch);
        else
            stage_b_patch<Tile, true>(tile, grp, k0, k_end, n0, patch);
    }
};

/* The wide tile of an m x n convolution GEMM, as ct_cuda_launch_gemm's
 * rows (ct_gemm_rows_for then takes the narrow one for few rows or few
 * tiles): the wide tile (twice the FMAs per shared-memory read or more,
 * gemm.cuh) with 128 rows, or 64 for 64 to 127 rows, where n fills its 128
 * columns; else 0, the 64 x 64 tile. */
static int conv_wide(int m, int n)
{
    if (n < ct_gemm_wide::n || m < ct_gemm_wide_64::m)
        return 0;
    return m >= ct_gemm_wide::m ? ct_gemm_wide::m : ct_gemm_wide_64::m;
}

/* conv_wide's tile where its grid, split as far as min_depth and `most`
 * let, gives every SM a block; else 0 (the 64 x 64 tile or the narrow
 * one).  Below a block an SM, a block's chain of k slices is the product's
 * time, and the 128-row tile's is about three times the 64 x 64 tile's per
 * k: the weight gradient of ResNet-18's 1x1 downsampling to 256 channels
 * at batch 64 (256 x 128 x 4096) was 64 blocks of 16 slices, 38 us of
 * chain on the model (emulated counts, docs/perf.md). */
static int conv_wide_min_blocks = -1; /* the SM count; ct_cuda_set_conv_wide_min_blocks */

static int conv_wide_for(int m, int n, int64_t k, int groups, int64_t min_depth, int64_t most,
                         int64_t granule = GEMM_TILE_K)
{
    int rows = conv_wide(m, n);
    if (!rows)
        return 0;
    int splits, k_chunk;
    int64_t tiles = ct_gemm_tiles(m, n, groups, rows), sms = ct_cuda_sm_count();
    ct_gemm_split(tiles, k, 2 * sms, sms, min_depth, most, &splits, &k_chunk, granule);
    return tiles * splits >= (conv_wide_min_blocks < 0 ? sms : conv_wide_min_blocks) ? rows : 0;
}

extern "C" void ct_cuda_set_conv_wide_min_blocks(int blocks)
{
    conv_wide_min_blocks = blocks;
}

enum {
    /* floats a k patch may grow to when it serves several k slices */
    CONV_PATCH_SPAN_FLOATS = 4096,
    /* and its columns: a table of 256 conv_columns is 4 KiB, the most
     * beside the largest patch and the tiles (under 48 KiB) */
    CONV_PATCH_SPAN_COLUMNS = 256,
};
static_assert(gemm_wide_static_bytes(GEMM_WIDE) +
                      sizeof(float) * (CONV_PATCH_HEADER + CONV_PATCH_MAX +
                                       conv_table_floats(CONV_PATCH_SPAN_COLUMNS, GEMM_WIDE)) <=
                  48 * 1024,
              "the largest patch and table beside the 128-row tile: within the 48 KiB a block "
              "has without opting in");

/* The columns (c, tap) of a k patch: a k slice's (8 or 16), doubled while the
 * patch stays within CONV_PATCH_SPAN_FLOATS (or one slice's, if more), so
 * that a block stages each channel's rows once for several slices instead
 * of once or twice per slice of 8 or 16 columns.  Staging a slice's
 * channels and reading them through the index map was over half of VGG-11's
 * convolution GEMMs' instructions on the model (3.4 per FMA against the
 * matrix tile's 1.5; docs/perf.md).  The narrow tile keeps one slice's:
 * its a strip shares the 48 KiB. */
static int conv_patch_k(const conv_geometry &g, int depth, int width, int k, bool narrow,
                        bool bordered)
{
    auto bound = [&](int columns) {
        return bordered ? conv_border_bound(g, columns, width)
                        : conv_patch_bound(g, columns, width);
    };
    int span = depth, floats = bound(depth);
    while (!narrow && span < k && 2 * span <= CONV_PATCH_SPAN_COLUMNS) {
        int wider = bound(2 * span);
        if (wider == 0 || (wider > CONV_PATCH_SPAN_FLOATS && wider > floats))
            break;
        span *= 2;
    }
    return span;
}

/* The patch's floats for a tile of `width` columns and k slices of `depth`
 * (the rows of the narrow tile): a k patch for the forward pass and
 * backward data, whose patch_k it sets; the weight gradient's, the tile's
 * columns and CONV_WEIGHT_PIXELS pixels of k. */
static int conv_patch_floats(conv_gemm_problem &p, int depth, int width, bool narrow,
                             bool borders)
{
    p.by_k_chunk = ct_divmod_of(p.k_chunk);
    p.column_table = (!p.g.transposed || (p.g.stride_h == 1 && p.g.stride_w == 1)) &&
                     conv_columns_fit(p.g);
    p.patch_k = conv_patch_k(p.g, depth, width, p.k_chunk, narrow, false);
    int floats = conv_patch_bound(p.g, p.patch_k, width);
    /* bordered where the border adds at most 20 % to the patch and leaves
     * its columns as many: ResNet-18's 8 x 8 layers at batch 64 (56 %
     * more) and 4 x 4 (125 %) took 0.4-0.7 us longer a launch bordered,
     * the 8 x 8 stride-2 layer (patches of half the columns) 8.7 us and
     * the 4 x 4 stride-2 one (27 %) 0.3 us, on the model, where the 32 x
     * 32 layers (6 %) took 7.6 us less and the 16 x 16 (10 %) 3.9 us
     * less (docs/perf.md, 2026-12-07 second session) */
    int border = borders && width == GEMM_WIDE && p.column_table
                     ? conv_border_bound(p.g, p.patch_k, width)
                     : 0;
    p.bordered = border > 0 && 10 * (int64_t)border <= 12 * (int64_t)floats &&
                 conv_patch_k(p.g, depth, width, p.k_chunk, narrow, true) == p.patch_k;
    if (p.bordered)
        floats = border;
    int table = p.column_table ? conv_table_floats(p.patch_k, width) : 0;
    return floats ? CONV_PATCH_HEADER + table + floats : 0;
}

static int conv_patch_floats(conv_backward_weight_problem &p, int, int width, bool,
                             bool borders)
{
    /* the staging reads its columns from the table only: without it, b
     * is read through the map (scratch 0) */
    int floats =
        conv_columns_fit(p.g) ? conv_patch_bound(p.g, width, CONV_WEIGHT_PIXELS) : 0;
    /* bordered as the forward pass's patch, by the same rule, at stride
     * 1: ResNet-18's 16 x 16 -> 8 x 8 stride-2 weight gradient (13 %
     * more floats) took 1.1 us longer bordered, the 32 x 32 -> 16 x 16
     * one (3 %) 0.2 us less, where the stride-1 layers took 1.5-2.6 us
     * less (the model, docs/perf.md 2026-12-07 third session) */
    int border = borders && width == GEMM_WIDE && floats && p.g.stride_h == 1 &&
                         p.g.stride_w == 1
                     ? conv_border_bound(p.g, width, CONV_WEIGHT_PIXELS)
                     : 0;
    p.bordered = border > 0 && 10 * (int64_t)border <= 12 * (int64_t)floats;
    if (p.bordered)
        floats = border;
    return floats ? CONV_PATCH_HEADER + conv_table_floats(width, CONV_WEIGHT_PIXELS) + floats : 0;
}

/* Launches p on the tile of `rows` (ct_cuda_launch_gemm's), the patch
 * sized for that tile (conv_patch_floats). */
template <class Problem>
static void conv_prepare(Problem &p, int rows)
{
    bool wide = rows == ct_gemm_wide::m || rows == ct_gemm_wide_64::m;
    int depth = wide ? ct_gemm_wide::depth : ct_gemm_small::depth;
    int width = wide ? ct_gemm_wide::n : rows ? ct_gemm_narrow::n : ct_gemm_small::n;
    p.scratch_floats = conv_patch_floats(p, depth, width, rows == GEMM_NARROW_M, Problem::borders);
    if constexpr (Problem::strips_a)
        p.a_strip = rows == GEMM_NARROW_M ? ct_gemm_narrow_strip(p.k_chunk, p.scratch_floats) : 0;
}

template <class Problem>
static ct_status conv_launch(Problem &p, int groups, int rows, cudaStream_t stream)
{
    conv_prepare(p, rows);
    return ct_cuda_launch_gemm(p, groups, rows, stream);
}

/*
 * Backward data by columns, for few input channels per group (at most
 * GEMM_NARROW_M, where the implicit GEMM takes the narrow tile): there each
 * staged element of dcol (above) serves at most 16 rows of dx, and staging
 * it (the transposed index map per element) is most of the kernel's
 * instructions: SimpleCNN's conv2 (6 <- 16 channels, 5x5) issued 33.7
 * million warp instructions for 0.3 million warp FMAs of work.  Instead:
 *   cols_g[(c, tap), (n, p)] = sum_o w[g*Og + o, c, tap] dy[n, g*Og + o, p]
 * a plain product (m = Cg*KK rows, k = Og, n = N*P output pixels, a and b
 * read in place, no index map), then one thread per dx element adds its
 * taps' columns in tap order (conv_col2im, each read where a stride lands
 * on the element, as the transposed map says), and the fused relu's
 * backward.  The columns take Cg*KK*N*P floats of workspace a group (2.4
 * MB for conv2 at batch 64); a batch whose columns pass
 * CONV_COLUMNS_BYTES goes in chunks of images.  Each dx element is the sum
 * over taps (i, j) of the sums over o: the same bits from run to run, not
 * the implicit GEMM's (one chain over (o, i, j)).
 */
enum {
    CONV_COLUMNS_BYTES = 32 << 20, /* the most workspace the columns take */
};

struct conv_columns_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<conv_columns>";
    int m, n, k, splits, k_chunk; /* m = Cg*KK, n = images * P, k = Og */
    int out_c;                    /* channels of dy */
    ct_divmod by_plane;           /* P: dy's plane */
    const float *w, *dy;
    float *cols; /* [groups][m][n] */

    /* w[o, (c, tap)] runs along m; dy[img, o, p] along n. */
    __device__ bool a_along_k() const { return false; }
    __device__ bool b_along_k() const { return false; }
    __device__ float load_a(int grp, int row, int o) const
    {
        return w[((size_t)grp * k + o) * m + row];
    }
    __device__ float load_b(int grp, int o, int pixel) const
    {
        int plane = (int)by_plane.divisor, img = ct_div(by_plane, pixel);
        return dy[((size_t)img * out_c + grp * k + o) * plane + (pixel - img * plane)];
    }
    __device__ void store(int grp, int, int row, int pixel, float value) const
    {
        cols[((size_t)grp * m + row) * n + pixel] = value;
    }
};

/* dx[img, c, r, q] = sum over taps (i, j) of cols[(c, i, j), (img, dy row,
 * dy column)] where the transposed map (g, conv_source) lands the tap on a
 * dy pixel, in tap order; then the relu's backward where relu_mask is
 * given.  One thread per dx element, consecutive threads on consecutive
 * columns q (coalesced stores; a tap's reads are runs of consecutive dy
 * columns at stride 1).  COL2IM_TAPS taps' loads in flight at a time (a
 * round trip to memory per eight taps, not per tap); a tap that lands in
 * the padding reads a clamped word of its plane, near its neighbours'
 * (no divergence, no extra sector), and adds nothing. */
enum {
    COL2IM_TAPS = 8,
};

__global__ void conv_col2im(conv_geometry g, ct_divmod by_channels, int images,
                            const float *cols, const float *relu_mask, float *dx)
{
    int taps = g.kernel_h * g.kernel_w, plane = g.dst_h * g.dst_w;
    int cg = g.dst_c / g.groups, src_plane = g.src_h * g.src_w;
    int count = images * g.dst_c * plane; /* below 2^31: conv_columns_images */
    size_t pixels = (size_t)images * src_plane; /* columns of cols */
    CT_CUDA_GRID_STRIDE(e, count)
    {
        int planes = ct_div(g.by_plane, (int)e), at = (int)e - planes * plane;
        int img = ct_div(by_channels, planes), channel = planes - img * g.dst_c;
        int r = ct_div(g.by_dst_w, at), q = at - r * g.dst_w;
        int grp = g.groups == 1 ? 0 : channel / cg, c = channel - grp * cg;
        const float *rows = cols + (size_t)(grp * cg + c) * taps * pixels +
                            (size_t)img * src_plane;
        float sum = 0.0f;
        for (int t0 = 0; t0 < taps; t0 += COL2IM_TAPS) {
            float v[COL2IM_TAPS];
#pragma unroll
            for (int u = 0; u < COL2IM_TAPS; u++) {
                int t = min(t0 + u, taps - 1), i = ct_div(g.by_kernel_w, t);
                int j = t - i * g.kernel_w;
                int row = conv_source(g, r, i, false), column = conv_source(g, q, j, true);
                int row_at = row >= 0 ? row : min(max(r + g.pad_h - i * g.dilation_h, 0),
                                                  g.src_h - 1);
                int column_at = column >= 0 ? column
                                            : min(max(q + g.pad_w - j * g.dilation_w, 0),
                                                  g.src_w - 1);
                float x = rows[(size_t)t * pixels + row_at * g.src_w + column_at];
                v[u] = row >= 0 && column >= 0 ? x : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < COL2IM_TAPS; u++)
                if (t0 + u < taps)
                    sum += v[u];
        }
        dx[e] = relu_mask ? ct_relu_grad(relu_mask[e], sum) : sum;
    }
}

/* Whether backward data goes by columns (above): the images of a chunk (at
 * most conv_columns_limit bytes of columns, fewer than 2^31 dx elements)
 * when it does, else 0. */
static size_t conv_columns_limit = CONV_COLUMNS_BYTES;

static int conv_columns_images(const ct_conv2d_shape *s)
{
    int cg = s->in_channels / s->groups;
    size_t per_image = sizeof(float) * (size_t)s->in_channels * s->kernel_h * s->kernel_w *
                       s->out_h * s->out_w;
    size_t dx_image = (size_t)s->in_channels * s->in_h * s->in_w;
    if (cg > GEMM_NARROW_M || s->n_batch <= 0 || per_image == 0 ||
        per_image > conv_columns_limit || dx_image > INT_MAX)
        return 0;
    size_t images = conv_columns_limit / per_image;
    if (images > INT_MAX / dx_image)
        images = INT_MAX / dx_image;
    return images < (size_t)s->n_batch ? (int)images : s->n_batch;
}

extern "C" void ct_cuda_set_conv_columns_limit(size_t bytes)
{
    conv_columns_limit = bytes;
}

/* The column product of images [0, s->n_batch) into `cols`; *rows: its
 * tile. */
static conv_columns_problem conv_columns_problem_of(const ct_conv2d_shape *s, const float *dy,
                                                    const float *w, float *cols, int *rows)
{
    conv_columns_problem p;
    p.m = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.k = s->out_channels / s->groups;
    p.n = s->n_batch * s->out_h * s->out_w;
    p.out_c = s->out_channels;
    p.by_plane = ct_divmod_of(s->out_h * s->out_w);
    p.w = w;
    p.dy = dy;
    p.cols = cols;
    /* the 64 x 64 tile or the narrow one, by chain: on the wide tile
     * conv2's 150 x 4096 product was 64 blocks of 64 outputs a thread, 9.4
     * us of chain on the model against 5.6 */
    ct_gemm_layout layout;
    ct_gemm_layout_for(p.m, p.n, p.k, s->groups, 0, GEMM_SPLIT_MIN_DEPTH, 1, &layout);
    p.splits = 1;
    p.k_chunk = p.k;
    *rows = layout.rows;
    return p;
}

/* dx of images [0, s->n_batch) from their columns. */
static ct_status conv_col2im_launch(const ct_conv2d_shape *s, const float *cols,
                                    const float *relu_mask, float *dx, cudaStream_t stream)
{
    int64_t count = (int64_t)s->n_batch * s->in_channels * s->in_h * s->in_w;
    CT_CUDA_LAUNCH_ITEMS(conv_col2im, count, stream, conv_geometry_of(s, true),
                         ct_divmod_of(s->in_channels), s->n_batch, cols, relu_mask, dx);
    return CT_OK;
}

/* dx of images [0, s->n_batch) by columns, in `cols` (a chunk's worth). */
static ct_status conv_backward_data_by_columns(const ct_conv2d_shape *s, const float *dy,
                                               const float *w, const float *relu_mask, float *dx,
                                               float *cols, cudaStream_t stream)
{
    int rows = 0;
    conv_columns_problem p = conv_columns_problem_of(s, dy, w, cols, &rows);
    CT_TRY(ct_cuda_launch_gemm(p, s->groups, rows, stream));
    return conv_col2im_launch(s, cols, relu_mask, dx, stream);
}

/* The weight gradient's tile and split of its reduction (enough blocks to
 * fill the device twice over, chunks no shorter than
 * CONV_SPLIT_MIN_DEPTH, counted on the weight's columns), and the floats
 * of its parts, which hold the bias gradient's column too.  The 64 x 64
 * tile where it is not narrow or wide: its k loop stages patches of 64
 * pixels, which ct_gemm_chain does not know. */
static size_t conv_weight_layout(const ct_conv2d_shape *s, ct_gemm_layout *out)
{
    int og = s->out_channels / s->groups;
    int cols = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    int depth = s->n_batch * s->out_h * s->out_w;
    int wide = conv_wide_for(og, cols, depth, s->groups, CONV_SPLIT_MIN_DEPTH, CONV_SPLIT_MAX,
                             CONV_WEIGHT_PIXELS);
    if (!ct_gemm_layout_for(og, cols, depth, s->groups, wide, CONV_SPLIT_MIN_DEPTH,
                            CONV_SPLIT_MAX, out, false, CONV_WEIGHT_PIXELS))
        return 0;
    /* chunks of whole patches (stage_b finds a slice's patch by a mask):
     * the split chose them so (its granule), and one chunk of all k is
     * rounded here.  Rounded after a choice in k slices, layer4's first
     * weight gradient in ResNet-18 at batch 64 (512 x 2304 x 1024) went
     * from 5 chunks of 208 to 4 of 256, 288 blocks, three on some SMs,
     * where 8 of 128 give 576 blocks of half the depth (docs/perf.md) */
    out->k_chunk = (out->k_chunk + CONV_WEIGHT_PIXELS - 1) / CONV_WEIGHT_PIXELS * CONV_WEIGHT_PIXELS;
    out->splits = (depth + out->k_chunk - 1) / out->k_chunk;
    return (size_t)out->splits * s->groups * og * ct_gemm_part_pitch(cols + 1);
}

/* The forward pass's (backward data's, `transposed`) GEMM: its tile and
 * split of k, and the floats of its parts. */
static size_t conv_gemm_layout(const ct_conv2d_shape *s, bool transposed, ct_gemm_layout *out)
{
    int taps = s->kernel_h * s->kernel_w;
    int cg = s->in_channels / s->groups, og = s->out_channels / s->groups;
    int m = transposed ? cg : og, k = (transposed ? og : cg) * taps;
    int n = s->n_batch * (transposed ? s->in_h * s->in_w : s->out_h * s->out_w);
    return ct_gemm_layout_for(m, n, k, s->groups,
                              conv_wide_for(m, n, k, s->groups, GEMM_SPLIT_MIN_DEPTH,
                                            GEMM_SPLIT_MAX),
                              GEMM_SPLIT_MIN_DEPTH, GEMM_SPLIT_MAX, out);
}

/* Bytes of backward data's packed weights, whole 256-byte blocks: its
 * split parts follow them in the workspace. */
static size_t conv_packed_bytes(const ct_conv2d_shape *s)
{
    int taps = s->kernel_h * s->kernel_w;
    size_t bytes = sizeof(float) * (size_t)s->in_channels *
                   (size_t)conv_sector_pitch(s->out_channels / s->groups * taps);
    return (bytes + 255) / 256 * 256;
}

extern "C" size_t ct_cuda_conv2d_forward_workspace(const ct_conv2d_shape *s)
{
    ct_gemm_layout layout;
    return sizeof(float) * conv_gemm_layout(s, false, &layout);
}

extern "C" size_t ct_cuda_conv2d_workspace(const ct_conv2d_shape *s)
{
    ct_gemm_layout layout;
    return sizeof(float) * conv_weight_layout(s, &layout);
}

extern "C" ct_status ct_cuda_conv2d_forward(const ct_conv2d_shape *s, const float *x,
                                            const float *w, const float *bias, bool relu,
                                            float *y, void *workspace, cudaStream_t stream)
{
    conv_gemm_problem p;
    p.m = s->out_channels / s->groups;
    p.n = s->n_batch * s->out_h * s->out_w;
    p.k = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    ct_gemm_layout layout;
    if (conv_gemm_layout(s, false, &layout))
        p.parts = (float *)workspace;
    p.splits = layout.splits;
    p.k_chunk = layout.k_chunk;
    p.g = conv_geometry_of(s, false);
    p.a_pitch = p.k;
    p.a = w;
    p.src = x;
    p.bias = bias;
    p.dst = y;
    p.relu = relu;
    p.relu_mask = NULL;
    return conv_launch(p, s->groups, layout.rows, stream);
}

/* The implicit GEMM of backward data (wt packed at the start of
 * `workspace`, its parts after); *rows: its tile. */
static conv_backward_data_problem conv_data_problem_of(const ct_conv2d_shape *s, const float *dy,
                                                       const float *relu_mask, float *dx,
                                                       void *workspace, int *rows)
{
    conv_backward_data_problem p;
    p.m = s->in_channels / s->groups;
    p.n = s->n_batch * s->in_h * s->in_w;
    p.k = s->out_channels / s->groups * s->kernel_h * s->kernel_w;
    ct_gemm_layout layout;
    if (conv_gemm_layout(s, true, &layout))
        p.parts = (float *)((char *)workspace + conv_packed_bytes(s));
    p.splits = layout.splits;
    p.k_chunk = layout.k_chunk;
    p.g = conv_geometry_of(s, true);
    p.a_pitch = conv_sector_pitch(p.k);
    p.a = (const float *)workspace;
    p.src = dy;
    p.bias = NULL;
    p.dst = dx;
    p.relu = false;
    p.relu_mask = relu_mask;
    *rows = layout.rows;
    return p;
}

/* wt into the start of the workspace (conv_pack_transposed), in one
 * layout or by phases. */
static ct_status conv_pack_launch(const ct_conv2d_shape *s, const float *w, int pitch,
                                  const conv_pack_phases &phases, void *workspace,
                                  cudaStream_t stream)
{
    conv_pack_tile tile = conv_pack_tile_for(s, w);
    CT_CUDA_LAUNCH(conv_pack_transposed, (unsigned)(s->groups * tile.tiles_o * tile.tiles_c),
                   CT_CUDA_BLOCK, sizeof(float) * (size_t)tile.t * tile.stride, stream, *s, tile,
                   pitch, phases, w, (float *)workspace);
    return CT_OK;
}

/*
 * Backward data at a stride past 1, by phases.  Tap i of dx row r lands
 * on a dy row only where the stride divides r + ph - i*dh: at stride 2 a
 * 3x3 kernel's rows land on 1 or 2 rows of 3, and the implicit GEMM over
 * all Og*KK columns multiplied zeros three times in four (ResNet-18's
 * stride-2 layers at batch 64: 12.5 GFLOP executed for 2.4 of work, 540
 * us on the model against a floor of 72 with the weight gradient;
 * emulated counts, docs/perf.md).  The dx rows whose r + ph has one
 * residue modulo sh take the kernel rows i whose i*dh has it: i0, i0 +
 * step, ... with step = sh / gcd(sh, dh) and i0 < step (the residues of
 * i*dh repeat with period step, distinct within it).  A phase, one such
 * set of rows and one of columns, is a transposed convolution at stride 1:
 *   dx[n, c, r'*sh + r0, q'*sw + q0]
 *     = sum_{o, t, u} wt_p[c, (o, t, u)] dy[n, o, r' + ph' - t*dh', q' + pw' - u*dw']
 * with kernel rows i = i0 + t*step, r0 = (i0*dh - ph) mod sh, ph' = (r0 +
 * ph - i0*dh) / sh (exact) and dh' = dh / gcd(sh, dh), the columns alike:
 * k = Og*T*U, every product a real one, and the staging's column tables
 * (stride 1).  dx rows of a residue no tap has (a 1x1 kernel at stride 2:
 * three phases of four) are 0: dx is cleared first.  A phase's stores go
 * sw floats apart (the counters' store efficiency 1/sw: each phase fills
 * its part of the sectors, the others the rest, in L2).  Not by phases:
 * a ph' < 0 (large dilations; the staging's maps assume none), more than
 * CONV_PHASES_MAX phases or CONV_PHASE_TAPS taps.
 */
struct conv_phase {
    int r0, q0;     /* its first dx row and column */
    int rows, cols; /* its dx rows and columns: its destination plane */
    int kh, kw;     /* its kernel: T x U taps */
    int pad_h, pad_w;
    int64_t base;   /* floats: where its wt_p starts in the workspace */
    int pitch;      /* floats between wt_p's rows: Og*T*U in whole sectors */
};

struct conv_phases {
    int count, dilation_h, dilation_w; /* dh', dw' */
    bool clears;                       /* some dx rows or columns take no tap */
    int64_t packed_floats;             /* the phases' wt_p, each in whole 256 bytes */
    conv_phase p[CONV_PHASES_MAX];
    conv_pack_phases pack;
};

static int conv_gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* One axis of the phases: for each i0 < min(step, kernel), the first dx
 * row, the rows, the taps and ph'; false where a ph' < 0. */
struct conv_phase_axis {
    int count, step, dilation;
    int first[CONV_PHASES_MAX], size[CONV_PHASES_MAX], taps[CONV_PHASES_MAX],
        pad[CONV_PHASES_MAX];
};

static bool conv_phase_axis_of(int dx_size, int kernel, int stride, int pad, int dilation,
                               conv_phase_axis *a)
{
    int g = conv_gcd(stride, dilation);
    a->step = stride / g;
    a->dilation = dilation / g;
    a->count = a->step < kernel ? a->step : kernel;
    if (a->count > CONV_PHASES_MAX)
        return false;
    for (int i0 = 0; i0 < a->count; i0++) {
        int r0 = ((i0 * dilation - pad) % stride + stride) % stride;
        a->first[i0] = r0;
        a->size[i0] = r0 < dx_size ? (dx_size - r0 + stride - 1) / stride : 0;
        a->taps[i0] = (kernel - i0 + a->step - 1) / a->step;
        a->pad[i0] = (r0 + pad - i0 * dilation) / stride;
        if (a->pad[i0] < 0)
            return false;
    }
    return true;
}

/* The phases of s's backward data, or false where it does not go by them
 * (stride 1, or the limits above). */
static bool conv_phases_of(const ct_conv2d_shape *s, conv_phases *out)
{
    int taps = s->kernel_h * s->kernel_w;
    conv_phase_axis rows, cols;
    if ((s->stride_h == 1 && s->stride_w == 1) || taps > CONV_PHASE_TAPS ||
        !conv_phase_axis_of(s->in_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h, &rows) ||
        !conv_phase_axis_of(s->in_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w, &cols) ||
        rows.count * cols.count > CONV_PHASES_MAX)
        return false;
    memset(out, 0, sizeof *out);
    out->count = rows.count * cols.count;
    out->dilation_h = rows.dilation;
    out->dilation_w = cols.dilation;
    out->clears = rows.count < s->stride_h || cols.count < s->stride_w;
    int og = s->out_channels / s->groups;
    for (int a = 0; a < rows.count; a++)
        for (int b = 0; b < cols.count; b++) {
            conv_phase *p = &out->p[a * cols.count + b];
            p->r0 = rows.first[a];
            p->q0 = cols.first[b];
            p->rows = rows.size[a];
            p->cols = cols.size[b];
            p->kh = rows.taps[a];
            p->kw = cols.taps[b];
            p->pad_h = rows.pad[a];
            p->pad_w = cols.pad[b];
            p->pitch = conv_sector_pitch(og * p->kh * p->kw);
            p->base = out->packed_floats;
            out->packed_floats += ((int64_t)s->in_channels * p->pitch + 63) / 64 * 64;
        }
    conv_pack_phases *pack = &out->pack;
    pack->count = out->count;
    for (int ph = 0; ph < out->count; ph++) {
        pack->taps[ph] = out->p[ph].kh * out->p[ph].kw;
        pack->pitch[ph] = out->p[ph].pitch;
        pack->base[ph] = out->p[ph].base;
    }
    for (int t = 0; t < taps; t++) {
        int i = t / s->kernel_w, j = t % s->kernel_w;
        int ph = i % rows.step * cols.count + j % cols.step;
        pack->phase[t] = (unsigned char)ph;
        pack->local[t] = (unsigned char)(i / rows.step * out->p[ph].kw + j / cols.step);
    }
    return true;
}

/* Phase ph as the shape whose transposed geometry (conv_geometry_of) is
 * its convolution at stride 1: dx's channels on its rows x cols, dy as it
 * is, its taps, padding and dilation. */
static ct_conv2d_shape conv_phase_shape(const ct_conv2d_shape *s, const conv_phases *phases,
                                        int ph)
{
    const conv_phase *p = &phases->p[ph];
    ct_conv2d_shape t = *s;
    t.in_h = p->rows;
    t.in_w = p->cols;
    t.kernel_h = p->kh;
    t.kernel_w = p->kw;
    t.stride_h = t.stride_w = 1;
    t.pad_h = p->pad_h;
    t.pad_w = p->pad_w;
    t.dilation_h = phases->dilation_h;
    t.dilation_w = phases->dilation_w;
    return t;
}

/* A phase's GEMM: conv_gemm_problem's over its plane, storing where its
 * pixels are in dx.  Its stores are scalar, consecutive lanes on
 * consecutive pixels (sw floats apart); in fours (stores_quads) a warp's
 * store would reach 4 * sw floats apart. */
struct conv_backward_phase_problem : conv_gemm_problem {
    static constexpr const char *kernel_name = "gemm<conv_backward_phase>";
    static constexpr bool stores_quads = false;
    static constexpr bool borders = false; /* (conv_gemm_problem's) */
    template <class Tile>
    __device__ void stage_b(float (*tile)[Tile::n + Tile::pad], int grp, int k0, int k_end,
                            int n0, float *patch) const
    {
        stage_b_of<Tile, false>(tile, grp, k0, k_end, n0, patch);
    }
    int dx_h, dx_w;           /* dx's plane */
    int step_h, step_w;       /* the strides */
    int r0, q0;               /* the phase's first row and column in it */

    __device__ size_t dx_at(int channel, int pixel) const
    {
        int plane = (int)g.by_plane.divisor, img = ct_div(g.by_plane, pixel);
        int at = pixel - img * plane, r = ct_div(g.by_dst_w, at), q = at - r * g.dst_w;
        return (((size_t)img * g.dst_c + channel) * dx_h + r * step_h + r0) * dx_w +
               q * step_w + q0;
    }
    __device__ void store(int grp, int, int row, int pixel, float value) const
    {
        size_t at = dx_at(grp * m + row, pixel);
        dst[at] = relu_mask ? ct_relu_grad(relu_mask[at], value) : value;
    }
    __device__ void store4(int grp, int split, int row, int pixel, const float *value) const
    {
        for (int c = 0; c < CT_VEC; c++)
            store(grp, split, row, pixel + c, value[c]);
    }
};

/* Phase ph's GEMM on its own (its wt_p in `workspace`, its parts after
 * all phases'); *rows: its tile. */
static conv_backward_phase_problem conv_phase_problem_of(const ct_conv2d_shape *s,
                                                         const conv_phases *phases, int ph,
                                                         const float *dy, const float *relu_mask,
                                                         float *dx, void *workspace, int *rows)
{
    ct_conv2d_shape t = conv_phase_shape(s, phases, ph);
    conv_backward_phase_problem p;
    static_cast<conv_gemm_problem &>(p) =
        conv_data_problem_of(&t, dy, relu_mask, dx, workspace, rows);
    const conv_phase *at = &phases->p[ph];
    if (p.parts)
        p.parts = (float *)workspace + phases->packed_floats;
    p.a_pitch = at->pitch;
    p.a = (const float *)workspace + at->base;
    p.dx_h = s->in_h;
    p.dx_w = s->in_w;
    p.step_h = s->stride_h;
    p.step_w = s->stride_w;
    p.r0 = at->r0;
    p.q0 = at->q0;
    return p;
}

/*
 * The phases in one launch (ct_cuda_launch_gemm_group, GEMM_GROUP_MAX at
 * a time), where they take a wide tile.  One after the other they were
 * four launches of a few blocks each at ResNet-18's stride-2 layers (batch
 * 64), each split to fill the GPU alone and most followed by a finishing
 * kernel: layer4's 3x3 took eight launches, layer3's seven (docs/perf.md,
 * 2026-12-07).  Together every phase takes conv_wide's tile for the
 * largest phase's plane, and k splits in chunks of one depth: a phase of
 * T taps gets about T / Tmax the splits of the deepest, so every block's
 * chain is alike, and the phases' blocks together fill the GPU as
 * ct_gemm_split fills it for one product (the chunk count from the first
 * that gives 2 blocks an SM to twice that, the fewest waves times slices).
 * Each split phase's parts have their own region after the packed
 * weights.  Where the wide tile does not apply (fewer blocks than SMs, or
 * fewer than 64 channels or 128 pixels), each phase goes alone as before,
 * the last paired with the weight gradient where their tiles pair.
 */
struct conv_phases_layout {
    int rows, k_chunk;
    int splits[CONV_PHASES_MAX];
    int64_t parts[CONV_PHASES_MAX]; /* floats from the workspace's start */
    int64_t floats;                 /* the workspace: wt_p and every phase's parts */
};

/* Phase ph's product: n and k (0 for a phase without pixels). */
static void conv_phase_dims(const ct_conv2d_shape *s, const conv_phases *phases, int ph,
                            int64_t *n, int64_t *k)
{
    const conv_phase *p = &phases->p[ph];
    bool empty = p->rows <= 0 || p->cols <= 0;
    *n = empty ? 0 : (int64_t)s->n_batch * p->rows * p->cols;
    *k = empty ? 0 : (int64_t)(s->out_channels / s->groups) * p->kh * p->kw;
}

/* The floats of the split parts of the phase that takes the most when
 * each goes alone (its own layout: conv_gemm_layout). */
static size_t conv_phases_alone_parts(const ct_conv2d_shape *s, const conv_phases *phases)
{
    size_t parts = 0;
    for (int ph = 0; ph < phases->count; ph++) {
        ct_conv2d_shape t = conv_phase_shape(s, phases, ph);
        ct_gemm_layout layout;
        size_t floats = conv_gemm_layout(&t, true, &layout);
        parts = floats > parts ? floats : parts;
    }
    return parts;
}

/* The phases' layout in one launch on the wide tile, or false where they
 * go one by one (a single phase with pixels, a 1x1 kernel's, goes alone).
 * The split is chosen for time, not for the parts' bytes: ResNet-18's
 * layer3 at batch 64 takes 8, 4, 4 and 2 chunks, 37.7 MB of parts where
 * the largest phase alone took 16.8 MB (its workspace that much larger);
 * held to 16.8 MB (4, 2, 2 and 1 chunks, twice as deep) the step was 41
 * us longer on the model (docs/perf.md, 2026-12-07). */
static bool conv_phases_grouped(const ct_conv2d_shape *s, const conv_phases *phases,
                                conv_phases_layout *l)
{
    int m = s->in_channels / s->groups, with_pixels = 0;
    int64_t n[CONV_PHASES_MAX], k[CONV_PHASES_MAX], nmax = 0, kmax = 0;
    for (int ph = 0; ph < phases->count; ph++) {
        conv_phase_dims(s, phases, ph, &n[ph], &k[ph]);
        nmax = n[ph] > nmax ? n[ph] : nmax;
        kmax = k[ph] > kmax ? k[ph] : kmax;
        with_pixels += k[ph] > 0;
    }
    int rows = conv_wide(m, (int)nmax);
    if (!rows || with_pixels < 2)
        return false;
    int64_t tiles[CONV_PHASES_MAX], all = 0;
    for (int ph = 0; ph < phases->count; ph++) {
        tiles[ph] = k[ph] ? ct_gemm_tiles(m, (int)n[ph], s->groups, rows) : 0;
        all += tiles[ph];
    }
    int64_t sms = ct_cuda_sm_count(), target = 2 * sms;
    int64_t most = kmax / GEMM_SPLIT_MIN_DEPTH;
    most = most < GEMM_SPLIT_MAX ? most : (int64_t)GEMM_SPLIT_MAX;
    int64_t chosen = kmax, blocks = all, best = INT64_MAX, first = 0;
    for (int64_t c = 2; all < target && c <= most; c++) {
        int64_t chunk = ((kmax + c - 1) / c + GEMM_TILE_K - 1) / GEMM_TILE_K * GEMM_TILE_K;
        int64_t count = 0;
        for (int ph = 0; ph < phases->count; ph++)
            count += tiles[ph] * ((k[ph] + chunk - 1) / chunk);
        if (!first && (count >= target || c == most))
            first = c;
        if (!first)
            continue;
        if (c > 2 * first)
            break;
        int64_t cost = (count + sms - 1) / sms * (chunk / GEMM_TILE_K + 1);
        if (cost < best) {
            best = cost;
            chosen = chunk;
            blocks = count;
        }
    }
    if (blocks < (conv_wide_min_blocks < 0 ? sms : conv_wide_min_blocks))
        return false;
    for (int ph = 0; ph < phases->count; ph++) {
        /* a split phase whose parts its last blocks would not add needs a
         * finishing launch of its own: one by one, the last phase pairs
         * with the weight gradient instead (ResNet-18 at batch 2: 195
         * launches a step grouped, 194 not) */
        ct_gemm_layout phase = {rows, (int)((k[ph] + chosen - 1) / chosen), (int)chosen};
        if (phase.splits > 1 && !gemm_finishes_in_kernel(phase, rows))
            return false;
    }
    l->rows = rows;
    l->k_chunk = (int)chosen;
    l->floats = phases->packed_floats;
    for (int ph = 0; ph < phases->count; ph++) {
        l->splits[ph] = k[ph] ? (int)((k[ph] + chosen - 1) / chosen) : 1;
        l->parts[ph] = l->floats;
        if (l->splits[ph] > 1)
            l->floats += (int64_t)l->splits[ph] * s->in_channels * ct_gemm_part_pitch((int)n[ph]);
    }
    return true;
}

/* The floats of the phases' workspace: their wt_p, then each split
 * phase's parts (in one launch) or the largest phase's (one by one). */
static size_t conv_phases_floats(const ct_conv2d_shape *s, const conv_phases *phases)
{
    conv_phases_layout l;
    if (conv_phases_grouped(s, phases, &l))
        return (size_t)l.floats;
    return (size_t)phases->packed_floats + conv_phases_alone_parts(s, phases);
}

/* The phases' GEMMs in launches of GEMM_GROUP_MAX on l's wide tile. */
static ct_status conv_phases_launch_grouped(const ct_conv2d_shape *s, const conv_phases *phases,
                                            const conv_phases_layout *l, const float *dy,
                                            const float *relu_mask, float *dx, void *workspace,
                                            cudaStream_t stream)
{
    conv_backward_phase_problem p[GEMM_GROUP_MAX];
    int count = 0;
    for (int ph = 0; ph < phases->count; ph++) {
        if (phases->p[ph].rows <= 0 || phases->p[ph].cols <= 0)
            continue;
        int rows = 0;
        p[count] = conv_phase_problem_of(s, phases, ph, dy, relu_mask, dx, workspace, &rows);
        p[count].splits = l->splits[ph];
        p[count].k_chunk = l->splits[ph] > 1 ? l->k_chunk : p[count].k;
        p[count].parts = l->splits[ph] > 1 ? (float *)workspace + l->parts[ph] : nullptr;
        conv_prepare(p[count], l->rows);
        if (++count == GEMM_GROUP_MAX) {
            CT_TRY(ct_cuda_launch_gemm_group(p, count, s->groups, l->rows, stream));
            count = 0;
        }
    }
    return ct_cuda_launch_gemm_group(p, count, s->groups, l->rows, stream);
}

/* dx by phases: wt_p packed, dx cleared where no tap lands, the phases'
 * GEMMs in one launch (conv_phases_grouped) or each its own, the last one
 * beside `partner` (the weight gradient's, paired where the tiles pair)
 * when there is one. */
template <class Partner>
static ct_status conv_backward_by_phases(const ct_conv2d_shape *s, const conv_phases *phases,
                                         const float *dy, const float *w, const float *relu_mask,
                                         float *dx, void *workspace, Partner *partner,
                                         int partner_rows, cudaStream_t stream)
{
    CT_TRY(conv_pack_launch(s, w, 0, phases->pack, workspace, stream));
    if (phases->clears)
        CT_CUDA_CALL(cudaMemsetAsync(dx, 0,
                                     sizeof(float) * (size_t)s->n_batch * s->in_channels *
                                         s->in_h * s->in_w,
                                     stream));
    conv_phases_layout l;
    int last = -1; /* the last phase with pixels, where they go one by one */
    if (conv_phases_grouped(s, phases, &l))
        CT_TRY(conv_phases_launch_grouped(s, phases, &l, dy, relu_mask, dx, workspace, stream));
    else
        for (int ph = 0; ph < phases->count; ph++)
            if (phases->p[ph].rows > 0 && phases->p[ph].cols > 0)
                last = ph;
    for (int ph = 0; ph <= last; ph++) {
        if (phases->p[ph].rows <= 0 || phases->p[ph].cols <= 0)
            continue;
        int rows = 0;
        conv_backward_phase_problem p =
            conv_phase_problem_of(s, phases, ph, dy, relu_mask, dx, workspace, &rows);
        conv_prepare(p, rows);
        if (ph == last && partner)
            return ct_cuda_launch_gemm_pair("gemm<conv_backward>", p, s->groups, rows, *partner,
                                            s->groups, partner_rows, stream);
        CT_TRY(ct_cuda_launch_gemm(p, s->groups, rows, stream));
    }
    if (partner)
        return ct_cuda_launch_gemm(*partner, s->groups, partner_rows, stream);
    return CT_OK;
}

extern "C" size_t ct_cuda_conv2d_backward_data_workspace(const ct_conv2d_shape *s)
{
    int images = conv_columns_images(s);
    if (images)
        return sizeof(float) * (size_t)images * s->in_channels * s->kernel_h * s->kernel_w *
               s->out_h * s->out_w;
    conv_phases phases;
    if (conv_phases_of(s, &phases))
        return sizeof(float) * conv_phases_floats(s, &phases);
    ct_gemm_layout layout;
    return conv_packed_bytes(s) + sizeof(float) * conv_gemm_layout(s, true, &layout);
}

/* dx by columns, a chunk of images at a time (above), or dx = wt . dcol
 * after packing wt into the workspace */
extern "C" ct_status ct_cuda_conv2d_backward_data(const ct_conv2d_shape *s, const float *dy,
                                                  const float *w, const float *relu_mask,
                                                  float *dx, void *workspace,
                                                  cudaStream_t stream)
{
    int images = conv_columns_images(s);
    if (images) {
        size_t dy_image = (size_t)s->out_channels * s->out_h * s->out_w;
        size_t dx_image = (size_t)s->in_channels * s->in_h * s->in_w;
        for (int img = 0; img < s->n_batch; img += images) {
            ct_conv2d_shape chunk = *s;
            chunk.n_batch = s->n_batch - img < images ? s->n_batch - img : images;
            CT_TRY(conv_backward_data_by_columns(
                &chunk, dy + img * dy_image, w, relu_mask ? relu_mask + img * dx_image : NULL,
                dx + img * dx_image, (float *)workspace, stream));
        }
        return CT_OK;
    }
    int rows = 0;
    conv_backward_data_problem p = conv_data_problem_of(s, dy, relu_mask, dx, workspace, &rows);
    if (p.m <= 0 || p.n <= 0)
        return CT_OK;
    conv_phases phases;
    if (conv_phases_of(s, &phases))
        return conv_backward_by_phases<conv_backward_weight_problem>(
            s, &phases, dy, w, relu_mask, dx, workspace, NULL, 0, stream);
    conv_pack_phases one = {};
    CT_TRY(conv_pack_launch(s, w, p.a_pitch, one, workspace, stream));
    return conv_launch(p, s->groups, rows, stream);
}

/* The weight gradient's problem (its parts in `workspace`); *rows: its
 * tile. */
static conv_backward_weight_problem conv_weight_problem_of(const ct_conv2d_shape *s,
                                                           const float *x, const float *dy,
                                                           float *dw, float *db, void *workspace,
                                                           int *rows)
{
    conv_backward_weight_problem p;
    p.m = s->out_channels / s->groups;
    p.n_w = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    p.n = p.n_w + (db ? 1 : 0);
    p.k = s->n_batch * s->out_h * s->out_w;
    ct_gemm_layout layout;
    conv_weight_layout(s, &layout);
    p.splits = layout.splits;
    p.k_chunk = layout.k_chunk;
    p.g = conv_geometry_of(s, false);
    p.x = x;
    p.dy = dy;
    p.dw = dw;
    p.db = db;
    if (p.splits > 1)
        p.parts = (float *)workspace;
    *rows = layout.rows;
    return p;
}

/* p (prepared: conv_prepare) on its own kernels, bordered or not. */
static ct_status conv_weight_launch(const conv_backward_weight_problem &p, int groups, int rows,
                                    cudaStream_t stream)
{
    if (!p.bordered)
        return ct_cuda_launch_gemm(p, groups, rows, stream);
    conv_bordered_weight_problem bordered;
    static_cast<conv_backward_weight_problem &>(bordered) = p;
    return ct_cuda_launch_gemm(bordered, groups, rows, stream);
}

extern "C" ct_status ct_cuda_conv2d_backward_weight(const ct_conv2d_shape *s, const float *x,
                                                    const float *dy, float *dw, float *db,
                                                    void *workspace, cudaStream_t stream)
{
    int rows = 0;
    conv_backward_weight_problem p = conv_weight_problem_of(s, x, dy, dw, db, workspace, &rows);
    conv_prepare(p, rows);
    return conv_weight_launch(p, s->groups, rows, stream);
}

/* Backward data and the weight gradient of one convolution (the same dy)
 * with their products in one launch where the tiles pair (gemm.cuh): the
 * column product (one chunk of images) or the implicit GEMM after its
 * weight packing, beside the weight gradient's; then col2im.  Else one
 * after the other. */
extern "C" ct_status ct_cuda_conv2d_backward_pair(const ct_conv2d_shape *s, const float *dy,
                                                  const float *w, const float *relu_mask,
                                                  float *dx, void *data_workspace,
                                                  const float *x, float *dw, float *db,
                                                  void *weight_workspace, cudaStream_t stream)
{
    int images = conv_columns_images(s), data_rows = 0, weight_rows = 0;
    if (images && images < s->n_batch) { /* chunks of columns: one after the other */
        CT_TRY(ct_cuda_conv2d_backward_data(s, dy, w, relu_mask, dx, data_workspace, stream));
        return ct_cuda_conv2d_backward_weight(s, x, dy, dw, db, weight_workspace, stream);
    }
    conv_backward_weight_problem weight =
        conv_weight_problem_of(s, x, dy, dw, db, weight_workspace, &weight_rows);
    conv_prepare(weight, weight_rows);
    if (weight.bordered) { /* on a wide tile: never paired (ct_gemm_pairs) */
        CT_TRY(ct_cuda_conv2d_backward_data(s, dy, w, relu_mask, dx, data_workspace, stream));
        return conv_weight_launch(weight, s->groups, weight_rows, stream);
    }
    if (images) {
        float *cols = (float *)data_workspace;
        conv_columns_problem data = conv_columns_problem_of(s, dy, w, cols, &data_rows);
        CT_TRY(ct_cuda_launch_gemm_pair("gemm<conv_backward>", data, s->groups, data_rows,
                                        weight, s->groups, weight_rows, stream));
        return conv_col2im_launch(s, cols, relu_mask, dx, stream);
    }
    conv_backward_data_problem data =
        conv_data_problem_of(s, dy, relu_mask, dx, data_workspace, &data_rows);
    if (data.m <= 0 || data.n <= 0) /* no dx to compute */
        return ct_cuda_launch_gemm(weight, s->groups, weight_rows, stream);
    conv_phases phases;
    if (conv_phases_of(s, &phases))
        return conv_backward_by_phases(s, &phases, dy, w, relu_mask, dx, data_workspace, &weight,
                                       weight_rows, stream);
    conv_pack_phases one = {};
    CT_TRY(conv_pack_launch(s, w, data.a_pitch, one, data_workspace, stream));
    conv_prepare(data, data_rows);
    return ct_cuda_launch_gemm_pair("gemm<conv_backward>", data, s->groups, data_rows, weight,
                                    s->groups, weight_rows, stream);
}
