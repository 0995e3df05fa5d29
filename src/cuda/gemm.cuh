/*
 * One shared-memory tiled GEMM kernel for every matrix product of the
 * backend: c[m,n] = sum_k a(m,k) b(k,n), where a Problem says how to read
 * a and b and where to store c.  A plain SGEMM reads row-major matrices; a
 * convolution reads its input through the im2col index map on the fly
 * ("implicit GEMM", src/cuda/conv.cu), so no column buffer is built.
 *
 * A block computes a TILE_M x TILE_N tile of c; its 256 threads stage
 * TILE_K-deep slices of a and b in shared memory, and each thread keeps a
 * 4x4 register block (rows ty + 16i, columns tx + 16j, so a warp reads
 * shared memory without bank conflicts).  The slices are loaded with
 * consecutive threads on consecutive addresses: along k when the problem
 * stores an operand along k (a row-major a, a transposed b), along m or n
 * otherwise, so a warp's 32 loads touch 4 sectors of 32 bytes, not 32.
 * The tiles' rows are padded by 2 floats, which keeps both the staging
 * writes (either direction) and the compute loop's reads free of bank
 * conflicts.  blockIdx.z is group * splits +
 * split: a problem may hold independent groups (grouped convolution) and
 * may split k into `splits` chunks of k_chunk (a multiple of TILE_K), each
 * block summing one chunk; the problem then sums the parts itself.
 *
 * Each c element sums its chunk's products in increasing k with float FMAs:
 * the same bits from run to run.  Static shared memory is 8.25 KiB, under
 * the 48 KiB that every architecture gives a block without opting in.
 *
 * A Problem has: int m, n, k, splits, k_chunk; a static constexpr
 * kernel_name (its launches' name, "gemm<conv_forward>"); and device methods
 *   float load_a(int group, int m, int k), float load_b(int group, int k, int n),
 *   void store(int group, int split, int m, int n, float value),
 *   bool a_along_k(), bool b_along_k(): whether consecutive k are
 *     consecutive addresses of a (of b), rather than consecutive m (n);
 * and, from ct_gemm_defaults or its own, `static constexpr bool stages_b`,
 * `static constexpr bool adds_row_bias` and `int scratch_floats`.  A
 * problem with adds_row_bias has `float row_bias(int group, int m)`, which
 * the block reads once per tile row into shared memory (a coalesced read,
 * where each output reading its own would be a broadcast request per
 * store) and adds to value before store.  A problem with stages_b fills
 * b's slices itself, through the launch's dynamic shared memory of
 * scratch_floats floats (a convolution stages its input rows there,
 * conv.cu):
 *   template <class Tile> void stage_b(float (*tile)[Tile::n + Tile::pad],
 *                int group, int k0, int k_end, int n0, float *scratch),
 *     called by every thread, leaving tile[kk][i] = b(k0 + kk, n0 + i) for
 *     kk < Tile::depth, i < Tile::n (0 outside the problem) once the
 *     block's next barrier is passed.  A problem with stages_a fills a's
 *     slices the same way (the tiles' a, not the narrow tile's strip):
 *   template <class Tile> void stage_a(float (*tile)[Tile::m + Tile::pad],
 *                int group, int k0, int k_end, int m0),
 *     leaving tile[kk][i] = a(m0 + i, k0 + kk).
 * A problem with `static constexpr bool strips_a` whose launch sets
 * `int a_strip` (a row pitch, ct_gemm_narrow_strip) has a's rows along k,
 * each contiguous from `const float *a_row(int group, int m)` on, rows
 * `size_t a_row_pitch()` floats apart; the narrow tile then copies its
 * rows of a over the whole k chunk once, after the scratch (below).
 *
 * Split k (`static constexpr bool sums_parts`, ct_gemm_split): a grid of
 * fewer tiles than the device has SMs leaves most of it idle while each
 * block loops over the whole of k, a round trip to memory per k slice
 * (the latency term of docs/roofline.md: SimpleCNN's linear layers ran on
 * 1 to 4 blocks).  A problem with sums_parts may be launched with splits >
 * 1 and `parts` (splits x part_rows rows of part_pitch floats of workspace:
 * part_rows = groups x m, part_pitch = n rounded up to whole 32-byte
 * sectors, so that a warp's stores of a row cover whole sectors; both set
 * by the launch): each block stores its chunk's sums there; on the
 * narrow tile, and on the wide ones up to GEMM_WIDE_FINISH splits of deep
 * enough chunks, the last of a tile's blocks to finish (ct_last_arrival,
 * on the stream's tickets) adds each of the tile's c elements' parts in
 * split order, adds the row bias and calls store(group, 0, m, n, sum):
 * the same bits from run to run, whichever block came last, and the
 * problem's epilogue (bias, relu, beta) applied once.  Other tiles and
 * splits, and a stream without tickets (or with fewer than the tiles), get
 * a second kernel that does the same (ct_gemm_finish_parts,
 * gemm_finish_tile says why).
 */
#ifndef CT_CUDA_GEMM_CUH
#define CT_CUDA_GEMM_CUH

#include "cuda/common.cuh"
#include "cuda/divmod.cuh"
#include "cuda/elementwise.cuh"

enum {
    GEMM_TILE_M = 64,
    GEMM_TILE_N = 64,
    GEMM_TILE_K = 16,
    GEMM_THREADS = 256,
    GEMM_THREADS_N = 16, /* threads along n; 16 along m */
    GEMM_REG = 4,        /* register block: GEMM_REG x GEMM_REG outputs per thread */
    GEMM_PAD = 2,        /* floats after each tile row: no bank conflicts (see above) */
    /* Blocks per SM the 64 x 64 tile asks ptxas to fit (at most 64 registers
     * a thread, 50% occupancy): left to itself, ptxas gave the matrix
     * problem 48 registers and spilled 16 bytes (scripts/kernel-resources.sh). */
    GEMM_MIN_BLOCKS = 4,
};

/* The wide tiles (ct_tiled_gemm_wide, below). */
enum {
    GEMM_WIDE = 128,    /* tile columns, and rows of the full-height tile */
    GEMM_WIDE_K = 16,   /* k slice */
    GEMM_WIDE_PAD = 4,  /* floats after each tile row */
    GEMM_WIDE_MIN = 512, /* rows and columns from which matrix products use it */
    /* the most splits whose parts the wide tiles' last blocks add
     * (gemm_finish_tile: 4 rounds of 64 loads a thread at 16), and only
     * where each block's chunk of k is at least GEMM_WIDE_K x splits deep:
     * the last block then adds splits parts an output against k_chunk
     * multiply-adds, and its extra work hides behind the others' main
     * loops; a shallower chunk, or more splits, gets the finishing kernel,
     * whose grid spreads the adds over every SM (ResNet-18 B64 on the
     * model: per launch, 1x1 downsamplings of 32-deep chunks in 8 or 16
     * splits lost 2-6 us each in-kernel, 3x3 layers' 192-384 won 1-6 us;
     * docs/perf.md, 2026-12-06 sixth session) */
    GEMM_WIDE_FINISH = 16,
    /* outputs a thread sums at a time there: in the 64-row tile (at most
     * 85 registers) 16 spilled 156 bytes, 8 none (nvcc 13) */
    GEMM_WIDE_FINISH_G = 16,
};

/* The wide tile's static shared memory for `rows` (128 or 64): its a and b
 * slices and row bias, 17 KiB at 128. */
static constexpr size_t gemm_wide_static_bytes(int rows)
{
    return sizeof(float) *
           ((size_t)GEMM_WIDE_K * (rows + GEMM_WIDE_PAD + GEMM_WIDE + GEMM_WIDE_PAD) + rows);
}

/* The narrow tile (ct_tiled_gemm_narrow, below). */
enum {
    GEMM_NARROW_M = 16, /* tile rows: products of at most this many rows use it */
    GEMM_NARROW_N = 64,
    GEMM_NARROW_COLUMN_THREADS = 32, /* threads along n; 8 along m */
};

/* The tile shapes, for a problem's stage_b<Tile> (below): the 64 x 64 tile
 * of ct_tiled_gemm, the 128 x 128 and 64 x 128 tiles of
 * ct_tiled_gemm_wide and the 16 x 64 tile of ct_tiled_gemm_narrow. */
template <int rows, int cols, int depth_, int pad_>
struct ct_gemm_tile {
    static constexpr int m = rows, n = cols, depth = depth_, pad = pad_;
};
typedef ct_gemm_tile<GEMM_TILE_M, GEMM_TILE_N, GEMM_TILE_K, GEMM_PAD> ct_gemm_small;
typedef ct_gemm_tile<GEMM_WIDE, GEMM_WIDE, GEMM_WIDE_K, GEMM_WIDE_PAD> ct_gemm_wide;
typedef ct_gemm_tile<GEMM_WIDE / 2, GEMM_WIDE, GEMM_WIDE_K, GEMM_WIDE_PAD> ct_gemm_wide_64;
typedef ct_gemm_tile<GEMM_NARROW_M, GEMM_NARROW_N, GEMM_TILE_K, GEMM_PAD> ct_gemm_narrow;

/* Element e's (kk, i) in a depth x `width` slice staged along k into
 * rows `pitch` floats apart: e % depth and e / depth, except where the
 * pitch is 4 mod 32 and the slice deeper than 8 (the wide tiles' 16): a
 * warp of 16 k x 2 i put words kk and kk + 8 on one bank (4 kk + i), so
 * it takes 8 k x 4 i, 32 banks, and reads 4 whole sectors along k.  For
 * e + r GEMM_THREADS, i grows by r GEMM_THREADS / depth either way. */
template <int depth, int pitch>
static __device__ inline void gemm_along_k(int e, int *kk, int *i)
{
    if constexpr (depth > 8 && depth % 8 == 0 && pitch % CT_CUDA_WARP == 4) {
        enum { GROUPS = depth / 8 };
        int lane = e % CT_CUDA_WARP, warp = e / CT_CUDA_WARP;
        *kk = lane % 8 + 8 * (warp % GROUPS);
        *i = lane / 8 + 4 * (warp / GROUPS);
    } else {
        *kk = e % depth;
        *i = e / depth;
    }
}

/* Element e's (kk, i) in gemm_stage's slice. */
template <int width, int depth, int pad>
static __device__ inline void gemm_stage_place(int e, bool along_k, int *kk, int *i)
{
    *kk = e / width;
    *i = e % width;
    if (along_k)
        gemm_along_k<depth, width + pad>(e, kk, i);
    if constexpr (width == CT_CUDA_WARP / 2 && depth / 2 * (width + pad) % 32 == 16) {
        /* a warp along i covers two rows of the narrow tile's a: rows kk
         * and kk + depth / 2, whose 16 words lie in opposite halves of the
         * banks (rows kk and kk + 1 shared 2 banks of 32) */
        if (!along_k)
            *kk = e / CT_CUDA_WARP + depth / 2 * (e / width % 2);
    }
}

/* Stage tile[kk][i] = load(group, k0 + kk, i0 + i) for a `depth` x `width`
 * slice (0 outside [0, limit) x [.., k_end)): threads run along k when
 * `along_k`, along i otherwise.  `load` reads a or b.  `together`: a
 * thread's elements (4 in the narrow and 64 x 64 tiles' b) all loaded
 * before any is stored, one round trip to memory a slice where a load and
 * its store an iteration made one each (the loop keeps one load in it,
 * under nvcc as under the host compiler, which sees the tile as any
 * float); only where registers allow (gemm_stages_together). */
template <int width, int depth = GEMM_TILE_K, int pad = GEMM_PAD, bool together = false,
          class Load>
static __device__ inline void gemm_stage(float (*tile)[width + pad], bool along_k, int i0,
                                         int limit, int k0, int k_end, Load load)
{
    if constexpr (together) {
        enum { EACH = (depth * width + GEMM_THREADS - 1) / GEMM_THREADS };
        float v[EACH];
        int at[EACH]; /* the element's word in the tile; -1 past the slice */
#pragma unroll
        for (int r = 0; r < EACH; r++) {
            int e = (int)threadIdx.x + r * GEMM_THREADS, kk, i;
            gemm_stage_place<width, depth, pad>(e, along_k, &kk, &i);
            at[r] = depth * width % GEMM_THREADS == 0 || e < depth * width
                        ? kk * (width + pad) + i
                        : -1;
            v[r] = at[r] >= 0 && i0 + i < limit && k0 + kk < k_end ? load(k0 + kk, i0 + i)
                                                                   : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < EACH; r++)
            if (at[r] >= 0)
                (&tile[0][0])[at[r]] = v[r];
    } else {
        for (int e = threadIdx.x; e < depth * width; e += GEMM_THREADS) {
            int kk, i;
            gemm_stage_place<width, depth, pad>(e, along_k, &kk, &i);
            int k = k0 + kk;
            tile[kk][i] = i0 + i < limit && k < k_end ? load(k, i0 + i) : 0.0f;
        }
    }
}

/* The defaults of a Problem's optional members: b read element by element
 * through load_b, no row bias. */
struct ct_gemm_defaults {
    static constexpr bool stages_a = false;
    static constexpr bool stages_b = false;
    static constexpr bool adds_row_bias = false;
    static constexpr bool strips_a = false;
    static constexpr bool sums_parts = false;
    static constexpr bool stores_quads = false;
    static constexpr bool wide_only = false; /* kernels of the wide tiles only */
    /* gemm_stage's loads issued together in the narrow and 64 x 64 tiles
     * (gemm_stages_together): the matrix products'; the convolutions'
     * kernels spilled with it (8-204 bytes, nvcc 13) */
    static constexpr bool loads_together = false;
    int scratch_floats = 0;
    int a_strip = 0;
    float *parts = nullptr; /* with sums_parts and splits > 1 */
    int part_rows = 0;      /* groups x m, set by ct_cuda_launch_gemm */
    int part_pitch = 0;     /* floats between rows of parts: n in whole sectors */
    unsigned *tickets = nullptr; /* with parts: one per tile, or NULL (ct_gemm_finish_parts) */
};

/* Which block of a GEMM's grid this is: blockIdx and gridDim, or a block
 * of one of the two grids of a paired launch (ct_tiled_gemm_pair). */
struct ct_gemm_block {
    int x, y, z, grid_x, grid_y;
};

static __device__ inline ct_gemm_block ct_gemm_block_here()
{
    ct_gemm_block b = {(int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)gridDim.x,
                       (int)gridDim.y};
    return b;
}

/* part[0] + part[step] + ... + part[(splits - 1) step], added in that
 * order, four loads in flight (one round trip per four parts, not one
 * per part); read past L1 (other blocks stored them in this kernel). */
static __device__ inline float ct_sum_parts(const float *part, size_t step, int splits)
{
    float sum = 0.0f;
    int split = 0;
    for (; split + 4 <= splits; split += 4) {
        float v0 = __ldcg(part + split * step), v1 = __ldcg(part + (split + 1) * step);
        float v2 = __ldcg(part + (split + 2) * step), v3 = __ldcg(part + (split + 3) * step);
        sum += v0;
        sum += v1;
        sum += v2;
        sum += v3;
    }
    for (; split < splits; split++)
        sum += __ldcg(part + split * step);
    return sum;
}

/* ct_sum_parts with GEMM_FEW_DEPTH loads in flight: the same sum in the
 * same order, a round trip per GEMM_FEW_DEPTH parts (for a thread that
 * sums one output).  Past the last part a load repeats the last one (no
 * branch around a load; the same sector) and adds nothing. */
enum {
    GEMM_FEW_DEPTH = 16,
};

static __device__ inline float ct_sum_parts_deep(const float *part, size_t step, int splits)
{
    float sum = 0.0f;
    for (int split = 0; split < splits; split += GEMM_FEW_DEPTH) {
        float v[GEMM_FEW_DEPTH];
#pragma unroll
        for (int u = 0; u < GEMM_FEW_DEPTH; u++)
            v[u] = __ldcg(part + min(split + u, splits - 1) * step);
#pragma unroll
        for (int u = 0; u < GEMM_FEW_DEPTH; u++)
            if (split + u < splits)
                sum += v[u];
    }
    return sum;
}

/* On the narrow and wide tiles, after each thread of the block stored its
 * sums of the tile at (m0, n0) to the parts, the last of the tile's blocks
 * over k adds the tile's parts, as ct_gemm_finish_parts does (row_bias: the
 * tile's rows' staged bias).  Consecutive threads on consecutive n, G
 * outputs of a column a thread at a time with 4 parts each in flight (4 G
 * loads, the last round's past the splits not loaded): a round trip to
 * memory per 4 parts of G outputs.  The narrow tile's 1,024 outputs are 4
 * a thread (G 4), one trip per 4 parts, as the finishing kernel's (one
 * output a thread): its chain is no longer, and a kernel (a tail of about
 * 1 us) is saved.  The wide tiles' 32 or 64 outputs a thread take G 16
 * (64 loads in flight, the accumulators dead by then): 2 or 4 trips of
 * ceil(splits / 4) rounds, for products of few splits of deep chunks
 * (GEMM_WIDE_FINISH).
 * With 16 loads in flight they took 8 times the finishing kernel's chain
 * (VGG-11 at batch 8: 1.75 -> 1.92 ms on the model), as the 64 x 64
 * tile's 16 outputs a thread still would: it keeps the kernel.  The loop
 * is kept rolled and its state small (one address a trip, the G outputs
 * ROW_STEP rows apart): unrolled over a thread's register block with an
 * address per output it took the wide tile from 128 registers to 214. */
template <int THREADS, int TILE_M, int TILE_N, int G, class Problem>
static __device__ inline void gemm_finish_tile(const Problem &p, ct_gemm_block b, int group,
                                               int m0, int n0, const float *row_bias)
{
    if constexpr (Problem::sums_parts) {
        if (p.splits == 1 || !p.tickets)
            return;
        size_t tile = ((size_t)group * b.grid_y + b.y) * b.grid_x + b.x;
        if (!ct_last_arrival(p.tickets + tile, p.splits))
            return;
        size_t step = (size_t)p.part_rows * p.part_pitch;
        const float *parts = p.parts + (size_t)group * p.m * p.part_pitch;
        int rows = min(TILE_M, p.m - m0), cols = min(TILE_N, p.n - n0);
        if (rows * cols <= THREADS) {
            /* A tile of at most one output a thread (a weight gradient of
             * few outputs over a long k: conv1's 6 x 26 in 128 parts):
             * FEW_DEPTH of its parts in flight, not 4. */
            if ((int)threadIdx.x < rows * cols) {
                int row = threadIdx.x / cols, col = threadIdx.x - row * cols;
                const float *at = parts + (m0 + row) * p.part_pitch + n0 + col;
                float value = ct_sum_parts_deep(at, step, p.splits);
                if constexpr (Problem::adds_row_bias)
                    value += row_bias[row];
                p.store(group, 0, m0 + row, n0 + col, value);
            }
            return;
        }
        static_assert(THREADS % TILE_N == 0 && TILE_M * TILE_N % (G * THREADS) == 0,
                      "a thread's G outputs of a trip share a column");
        enum { ROW_STEP = THREADS / TILE_N, PARTS = 4 };
        size_t row_gap = (size_t)ROW_STEP * p.part_pitch;
#pragma unroll 1
        for (int e0 = threadIdx.x; e0 < TILE_M * TILE_N; e0 += G * THREADS) {
            /* outputs (row + g ROW_STEP, col), the first `count` inside */
            int row = e0 / TILE_N, col = e0 % TILE_N;
            int count = n0 + col < p.n ? (p.m - m0 - row + ROW_STEP - 1) / ROW_STEP : 0;
            count = max(min(count, G), 0);
            const float *at = parts + (size_t)(m0 + row) * p.part_pitch + n0 + col;
            float sum[G];
#pragma unroll
            for (int g = 0; g < G; g++)
                sum[g] = 0.0f;
            /* PARTS parts of the G outputs in flight, the last round's
             * past p.splits not loaded (0 and not added: the same adds in
             * the same order as ct_sum_parts) */
            for (int split = 0; split < p.splits; split += PARTS) {
                float v[PARTS][G];
#pragma unroll
                for (int u = 0; u < PARTS; u++)
#pragma unroll
                    for (int g = 0; g < G; g++)
                        v[u][g] = g < count && split + u < p.splits
                                      ? __ldcg(at + (split + u) * step + g * row_gap)
                                      : 0.0f;
#pragma unroll
                for (int u = 0; u < PARTS; u++)
#pragma unroll
                    for (int g = 0; g < G; g++)
                        if (split + u < p.splits)
                            sum[g] += v[u][g];
            }
#pragma unroll
            for (int g = 0; g < G; g++) {
                if (g >= count)
                    continue;
                float value = sum[g];
                if constexpr (Problem::adds_row_bias)
                    value += row_bias[row + g * ROW_STEP];
                p.store(group, 0, m0 + row + g * ROW_STEP, n0 + col, value);
            }
        }
    }
}

/* Where a split's sum of c[m, n] (group `group`) lies in the parts. */
template <class Problem>
static __device__ inline float *gemm_part_at(const Problem &p, int group, int split, int m, int n)
{
    return p.parts + ((size_t)split * p.part_rows + (size_t)group * p.m + m) * p.part_pitch + n;
}

/* One sum of a tile: to the parts where the problem splits k and sums them
 * itself (the row bias comes with the sum, ct_gemm_finish_parts), else the
 * row bias added and stored. */
template <class Problem>
static __device__ inline void gemm_put(const Problem &p, int group, int split, int m, int n,
                                       float value, float row_bias)
{
    if constexpr (Problem::sums_parts) {
        if (p.splits > 1) {
            *gemm_part_at(p, group, split, m, n) = value;
            return;
        }
    }
    if constexpr (Problem::adds_row_bias)
        value += row_bias;
    p.store(group, split, m, n, value);
}

/* Four sums of a tile's row at columns n .. n + 3 (n a multiple of 4), as
 * gemm_put would put them one by one: one 128-bit store to the parts, or
 * the problem's store4 (a problem with stores_quads: it stores them as one
 * where its layout lets it); past p.n one by one. */
template <class Problem>
static __device__ inline void gemm_put4(const Problem &p, int group, int split, int m, int n,
                                        const float *value, float row_bias)
{
    if (n + CT_VEC > p.n) {
        for (int c = 0; c < CT_VEC && n + c < p.n; c++)
            gemm_put(p, group, split, m, n + c, value[c], row_bias);
        return;
    }
    if constexpr (Problem::sums_parts) {
        if (p.splits > 1) { /* rows of whole sectors: n is 16-byte aligned there */
            ct_store4(gemm_part_at(p, group, split, m, n), value);
            return;
        }
    }
    float biased[CT_VEC];
#pragma unroll
    for (int c = 0; c < CT_VEC; c++)
        biased[c] = Problem::adds_row_bias ? value[c] + row_bias : value[c];
    p.store4(group, split, m, n, biased);
}

/* row_bias[i] = p.row_bias(group, m0 + i) for the tile's `rows` rows (0
 * past p.m), where the problem adds one; visible after return. */
template <int rows, class Problem>
static __device__ inline void gemm_stage_row_bias(const Problem &p, float *row_bias, int group,
                                                  int m0)
{
    if constexpr (Problem::adds_row_bias) {
        if (threadIdx.x < rows)
            row_bias[threadIdx.x] =
                m0 + (int)threadIdx.x < p.m ? p.row_bias(group, m0 + threadIdx.x) : 0.0f;
        __syncthreads();
    }
}

/* Whether gemm_stage loads a Tile's slice for Problem together. */
template <class Problem, class Tile>
static constexpr __host__ __device__ bool gemm_stages_together()
{
    return Problem::loads_together && Tile::n <= GEMM_TILE_N;
}

/* One k slice of b into a Tile's shared tile (a problem with stages_b
 * fills it itself); a barrier must follow. */
template <class Tile, class Problem>
static __device__ inline void gemm_stage_b(const Problem &p, float (*b_tile)[Tile::n + Tile::pad],
                                           int group, int n0, int k0, int k_end)
{
    if constexpr (Problem::stages_b) {
        CT_CUDA_DYNAMIC_SHARED(float, scratch);
        p.template stage_b<Tile>(b_tile, group, k0, k_end, n0, scratch);
    } else {
        gemm_stage<Tile::n, Tile::depth, Tile::pad, gemm_stages_together<Problem, Tile>()>(
            b_tile, p.b_along_k(), n0, p.n, k0, k_end,
            [&](int k, int n) { return p.load_b(group, k, n); });
    }
}

/* One k slice of a into a Tile's shared tile from a's rows along k (a
 * problem with strips_a: a_row), four k a thread: tile[kk][i] = a(m0 + i,
 * k0 + kk), 0 outside the problem.  A row's four floats are one 128-bit
 * load where they lie whole before k_end on a 16-byte boundary (a
 * convolution's weights over a multiple of 4 channels, the backward
 * data's packed rows), four loads otherwise.  Element by element
 * (gemm_stage) each float took about 20 instructions of index arithmetic
 * and bounds (the emulator's counts per line: 12.7 of the forward
 * pass's 154 M on VGG's 8x8 probe).  Lanes (i, q) store tile[4q + c][i]:
 * with rows padded to 2, 4 floats (pitches 66, 132, 68) a warp's 32
 * stores land on 32 banks; its loads cover whole 32-byte sectors. */
template <class Tile, class Problem>
static __device__ inline void gemm_stage_a_rows(const Problem &p,
                                                float (*tile)[Tile::m + Tile::pad], int group,
                                                int m0, int k0, int k_end)
{
    enum { QUADS = Tile::depth / CT_VEC, ROW_STEP = GEMM_THREADS / QUADS };
    static_assert(Tile::depth % CT_VEC == 0, "whole float4s of a k slice");
    /* element e's row and quad; e + r GEMM_THREADS is row i + r ROW_STEP */
    auto place = [](int e, int *i, int *q) {
        *i = e / QUADS;
        *q = e % QUADS;
        if constexpr (QUADS > 2 && CT_VEC * (Tile::m + Tile::pad) % CT_CUDA_WARP == 16) {
            /* rows 4 mod 32 apart (the wide tiles): a warp on 16 rows x
             * 2 quads, where 8 x 4 put quads q and q + 2 on one bank */
            *i = e % 16 + 16 * (e / (16 * QUADS));
            *q = e / 16 % QUADS;
        }
    };
    if constexpr (Tile::m * QUADS % GEMM_THREADS == 0) {
        /* A slice wholly inside a and its rows' quads 16-byte aligned (the
         * same for every slice of the block: k0 is a multiple of 4): a
         * thread's quads without a bound or an alignment test each, from
         * one row's address (element by element they were a twentieth of
         * the forward GEMM's instructions, emulated counts, docs/perf.md) */
        const float *first = p.a_row(group, m0);
        size_t pitch = p.a_row_pitch();
        if (k0 + Tile::depth <= k_end && m0 + Tile::m <= p.m && pitch % CT_VEC == 0 &&
            ((uintptr_t)first & 15) == 0) {
            int i, q;
            place((int)threadIdx.x, &i, &q);
            const float *at = first + i * pitch + k0 + CT_VEC * q;
#pragma unroll
            for (int r = 0; r < Tile::m * QUADS / GEMM_THREADS; r++) {
                float v[CT_VEC];
                ct_load4(at + r * ROW_STEP * pitch, v);
#pragma unroll
                for (int c = 0; c < CT_VEC; c++)
                    tile[CT_VEC * q + c][i + r * ROW_STEP] = v[c];
            }
            return;
        }
    }
    for (int e = threadIdx.x; e < Tile::m * QUADS; e += GEMM_THREADS) {
        int i, q;
        place(e, &i, &q);
        int kk = CT_VEC * q, k = k0 + kk;
        float v[CT_VEC] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (m0 + i < p.m) {
            const float *at = p.a_row(group, m0 + i) + k;
            if (k + CT_VEC <= k_end && ((uintptr_t)at & 15) == 0) {
                ct_load4(at, v);
            } else {
#pragma unroll
                for (int c = 0; c < CT_VEC; c++)
                    v[c] = k + c < k_end ? at[c] : 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < CT_VEC; c++)
            tile[kk + c][i] = v[c];
    }
}

/* One k slice of a and b into a Tile's shared tiles; a barrier must follow. */
template <class Tile, class Problem>
static __device__ inline void gemm_stage_slices(const Problem &p,
                                                float (*a_tile)[Tile::m + Tile::pad],
                                                float (*b_tile)[Tile::n + Tile::pad], int group,
                                                int m0, int n0, int k0, int k_end)
{
    if constexpr (Problem::stages_a)
        p.template stage_a<Tile>(a_tile, group, k0, k_end, m0);
    else if constexpr (Problem::strips_a && Tile::m >= GEMM_TILE_M)
        gemm_stage_a_rows<Tile>(p, a_tile, group, m0, k0, k_end);
    else
        gemm_stage<Tile::m, Tile::depth, Tile::pad, gemm_stages_together<Problem, Tile>()>(
            a_tile, p.a_along_k(), m0, p.m, k0, k_end,
            [&](int k, int m) { return p.load_a(group, m, k); });
    gemm_stage_b<Tile>(p, b_tile, group, n0, k0, k_end);
}

/* The narrow tile's a strip (a problem with strips_a, launched with
 * a_strip): strip[r * a_strip + kk] = a(m0 + r, k_begin + kk) for its
 * `rows` rows, 0 past p.m and from k_end up to a_strip (a whole number of
 * k slices, so that the last slice's products past k_end are 0 x 0, never
 * 0 x garbage).  A row is one run from a sector boundary (ct_copy_runs):
 * a k slice of a row at a time, a warp reads 16 floats of it, 3 sectors
 * for 2 wherever the rows' pitch is no multiple of 8 floats (a 5x5
 * convolution's weights over 6 channels: 150).  Visible after the block's
 * next barrier. */
template <int rows, class Problem>
static __device__ inline void gemm_stage_a_strip(const Problem &p, float *strip, int group,
                                                 int m0, int k_begin, int k_end)
{
    int count = min(rows, p.m - m0), run = k_end - k_begin, tail = p.a_strip - run;
    ct_copy_runs(strip, p.a_strip, p.a_row(group, m0) + k_begin, p.a_row_pitch(), count, run);
    for (int e = threadIdx.x; e < count * tail; e += GEMM_THREADS)
        strip[e / tail * p.a_strip + run + e % tail] = 0.0f;
    for (int e = count * p.a_strip + threadIdx.x; e < rows * p.a_strip; e += GEMM_THREADS)
        strip[e] = 0.0f;
}

template <class Problem>
static __device__ void gemm_small_body(const Problem p, ct_gemm_block b)
{
    __shared__ float a_tile[GEMM_TILE_K][GEMM_TILE_M + GEMM_PAD];
    __shared__ float b_tile[GEMM_TILE_K][GEMM_TILE_N + GEMM_PAD];
    int group = b.z / p.splits, split = b.z % p.splits;
    int m0 = b.y * GEMM_TILE_M, n0 = b.x * GEMM_TILE_N;
    int tx = threadIdx.x % GEMM_THREADS_N, ty = threadIdx.x / GEMM_THREADS_N;
    int k_begin = split * p.k_chunk;
    int k_end = min(p.k, k_begin + p.k_chunk);
    __shared__ float row_bias[GEMM_TILE_M];
    gemm_stage_row_bias<GEMM_TILE_M>(p, row_bias, group, m0);
    float acc[GEMM_REG][GEMM_REG];
#pragma unroll
    for (int i = 0; i < GEMM_REG; i++)
#pragma unroll
        for (int j = 0; j < GEMM_REG; j++)
            acc[i][j] = 0.0f;
    for (int k0 = k_begin; k0 < k_end; k0 += GEMM_TILE_K) {
        gemm_stage_slices<ct_gemm_small>(p, a_tile, b_tile, group, m0, n0, k0, k_end);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < GEMM_TILE_K; kk++) {
            float a_frag[GEMM_REG], b_frag[GEMM_REG];
#pragma unroll
            for (int i = 0; i < GEMM_REG; i++)
                a_frag[i] = a_tile[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < GEMM_REG; j++)
                b_frag[j] = b_tile[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < GEMM_REG; i++)
#pragma unroll
                for (int j = 0; j < GEMM_REG; j++)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < GEMM_REG; i++)
#pragma unroll
        for (int j = 0; j < GEMM_REG; j++) {
            int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
            if (m < p.m && n < p.n)
                gemm_put(p, group, split, m, n, acc[i][j], row_bias[ty + 16 * i]);
        }
}

template <class Problem>
static __global__ void __launch_bounds__(GEMM_THREADS, GEMM_MIN_BLOCKS) ct_tiled_gemm(Problem p)
{
    gemm_small_body(p, ct_gemm_block_here());
}

/*
 * The wide tile, for products of at least 128 rows and columns (matrix
 * products from GEMM_WIDE_MIN; the convolutions choose for themselves,
 * ct_cuda_launch_gemm): 128 x 128 outputs per block of
 * 256 threads, 8 x 8 per thread, k slices 16 deep.  With `halves` = 1 it
 * is 64 x 128 (4 x 8 per thread: 9 wavefronts per 32 FMA instructions,
 * 89% of the FP32 rate), for convolutions of 64 to 127 channels, where
 * the 128-row tile would idle half its rows.  The 64 x 64 kernel
 * above reads 8 shared-memory words per 16 FMAs: each warp needs 8
 * wavefronts per k step against 16 FMA instructions, and an SM serves one
 * wavefront per clock while it issues four FMA instructions, so it can
 * reach at most half the FP32 rate.  Here a thread's 8 rows are two float4
 * reads (rows 4 ty .. 4 ty + 3 and 64 + 4 ty ..; the warp's two ty share a
 * wavefront) and its 8 columns tx + 16 j are eight scalar reads of 16
 * consecutive words (one wavefront each): 10 wavefronts per 64 FMA
 * instructions, compute-bound with the shared pipe 62% busy.  Columns
 * tx + 16 j keep the stores coalesced (16 lanes on 64 consecutive bytes).
 * A problem with stores_quads (the convolutions) takes columns 4 tx .. 4 tx
 * + 3 and 64 + 4 tx ..: two float4 reads a k step instead of eight (6
 * wavefronts per 64 FMAs, 66 instructions instead of 72), and stores of
 * four columns at a time (gemm_put4), 16 lanes on 256 consecutive bytes.
 * Staging writes are conflict-free with rows padded by 4 floats (k slices
 * along k: a warp's lanes (kk, i) on 8 x 4, banks 4 kk + i, gemm_along_k),
 * which also keeps each row's float4 reads 16-byte aligned.  16 deep, not
 * 8: a slice's fixed costs (two barriers, a round trip for a, the staging's
 * addresses) come half as often; on VGG's and ResNet's convolutions that
 * was 5-6 % of their instructions (emulated counts, docs/perf.md
 * 2026-12-04), and the staging's unrolled loads stay within the registers
 * (conv.cu's weight gradient unrolls 4 at a time in the 128-row tile).
 * Registers: 64 accumulators, near 128 per
 * thread; two blocks per SM (25% occupancy), the usual point for SGEMM,
 * where each warp has 64 independent FMAs per k step to hide latency.
 * The launch bounds hold that (and three blocks of the 64-row tile, at
 * most 85 registers): left free, nvcc kept the convolutions' staging
 * invariants (conv.cu's k patches) live across the k loop, 178 registers
 * and one block an SM; bounded, 128 and 80 with no spills (nvcc 13).
 * Static shared memory: gemm_wide_static_bytes, 17 KiB for 128 rows.
 *
 * The same sums in the same order as ct_tiled_gemm: each c element adds its
 * chunk's products in increasing k with float FMAs.
 */
template <class Problem, int halves>
static __device__ inline void gemm_wide_body(const Problem &p, ct_gemm_block b)
{
    typedef ct_gemm_tile<GEMM_WIDE / 2 * halves, GEMM_WIDE, GEMM_WIDE_K, GEMM_WIDE_PAD> tile;
    alignas(16) __shared__ float a_tile[GEMM_WIDE_K][tile::m + GEMM_WIDE_PAD];
    alignas(16) __shared__ float b_tile[GEMM_WIDE_K][GEMM_WIDE + GEMM_WIDE_PAD];
    int group = b.z / p.splits, split = b.z % p.splits;
    int m0 = b.y * tile::m, n0 = b.x * GEMM_WIDE;
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int k_begin = split * p.k_chunk;
    int k_end = min(p.k, k_begin + p.k_chunk);
    __shared__ float row_bias[tile::m];
    gemm_stage_row_bias<tile::m>(p, row_bias, group, m0);
    float acc[4 * halves][8];
#pragma unroll
    for (int i = 0; i < 4 * halves; i++)
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc[i][j] = 0.0f;
    for (int k0 = k_begin; k0 < k_end; k0 += GEMM_WIDE_K) {
        gemm_stage_slices<tile>(p, a_tile, b_tile, group, m0, n0, k0, k_end);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < GEMM_WIDE_K; kk++) {
            float a_frag[4 * halves], b_frag[8];
#pragma unroll
            for (int h = 0; h < halves; h++)
                ct_load4(&a_tile[kk][GEMM_WIDE / 2 * h + 4 * ty], a_frag + 4 * h);
            if constexpr (Problem::stores_quads) {
#pragma unroll
                for (int h = 0; h < 2; h++)
                    ct_load4(&b_tile[kk][GEMM_WIDE / 2 * h + 4 * tx], b_frag + 4 * h);
            } else {
#pragma unroll
                for (int j = 0; j < 8; j++)
                    b_frag[j] = b_tile[kk][tx + 16 * j];
            }
#pragma unroll
            for (int i = 0; i < 4 * halves; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4 * halves; i++) {
        int row = GEMM_WIDE / 2 * (i / 4) + 4 * ty + i % 4, m = m0 + row;
        if constexpr (Problem::stores_quads) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                /* by value: a pointer into acc kept it in memory on the
                 * emulator's host (its loop's instructions 1.17 -> 1.58 per
                 * FMA on the model) */
                float quad[CT_VEC] = {acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2],
                                      acc[i][4 * h + 3]};
                if (m < p.m)
                    gemm_put4(p, group, split, m, n0 + GEMM_WIDE / 2 * h + 4 * tx, quad,
                              row_bias[row]);
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int n = n0 + tx + 16 * j;
                if (m < p.m && n < p.n)
                    gemm_put(p, group, split, m, n, acc[i][j], row_bias[row]);
            }
        }
    }
    gemm_finish_tile<GEMM_THREADS, tile::m, GEMM_WIDE, GEMM_WIDE_FINISH_G / 2 * halves>(
        p, b, group, m0, n0, row_bias);
}

template <class Problem, int halves>
static __global__ void __launch_bounds__(GEMM_THREADS, halves == 1 ? 3 : 2) ct_tiled_gemm_wide(Problem p)
{
    gemm_wide_body<Problem, halves>(p, ct_gemm_block_here());
}

/*
 * The narrow tile, for products of at most 16 rows (a convolution's
 * backward data or weight gradient over few channels, a classifier's
 * weight gradient): 16 x 64 outputs per block of 256 threads, 2 x 2 per
 * thread (rows ty and ty + 8, columns tx and tx + 32).  The 64-row tile
 * computes 64 rows for every one of them, 4 to 11 times the work for 6 to
 * 16 rows (the "FLOP x" of the profile: 24x in SimpleCNN's backward data
 * with the k padding).  Per k step a warp (one ty) reads two broadcast
 * words of a and two runs of 32 words of b: 4 wavefronts for 4 FMA
 * instructions, a quarter of the FP32 rate where the 64 x 64 tile reaches
 * half, so it wins from 4 times less work on up to 16 rows.  Staging as
 * the 64 x 64 tile's (rows padded by 2 floats), the same sums in the same
 * order: each c element adds its chunk's products in increasing k with
 * float FMAs, so a product gives the same bits on either tile.  Static
 * shared memory: 16 x (18 + 66) x 4 = 5.25 KiB.  With an a strip (a
 * problem with strips_a), the block reads a's 16 rows over its whole k
 * chunk once, into the dynamic shared memory after the scratch, and each
 * k step's a words from there (a broadcast per warp, as from the tile).
 */
template <class Problem>
static __device__ void gemm_narrow_body(const Problem p, ct_gemm_block b)
{
    typedef ct_gemm_narrow tile;
    enum { ROWS = 2, COLS = 2, ROW_STEP = GEMM_THREADS / GEMM_NARROW_COLUMN_THREADS };
    __shared__ float a_tile[tile::depth][tile::m + tile::pad];
    __shared__ float b_tile[tile::depth][tile::n + tile::pad];
    int group = b.z / p.splits, split = b.z % p.splits;
    int m0 = b.y * tile::m, n0 = b.x * tile::n;
    int tx = threadIdx.x % GEMM_NARROW_COLUMN_THREADS, ty = threadIdx.x / GEMM_NARROW_COLUMN_THREADS;
    int k_begin = split * p.k_chunk;
    int k_end = min(p.k, k_begin + p.k_chunk);
    __shared__ float row_bias[tile::m];
    gemm_stage_row_bias<tile::m>(p, row_bias, group, m0);
    float acc[ROWS][COLS];
#pragma unroll
    for (int i = 0; i < ROWS; i++)
#pragma unroll
        for (int j = 0; j < COLS; j++)
            acc[i][j] = 0.0f;
    float *a_strip = nullptr;
    if constexpr (Problem::strips_a) {
        if (p.a_strip) {
            CT_CUDA_DYNAMIC_SHARED(float, scratch);
            a_strip = scratch + p.scratch_floats;
            gemm_stage_a_strip<tile::m>(p, a_strip, group, m0, k_begin, k_end);
        }
    }
    /* a(row, k0 + kk) at a_at[kk * k_step + row * row_step] */
    int k_step = a_strip ? 1 : tile::m + tile::pad, row_step = a_strip ? p.a_strip : 1;
    for (int k0 = k_begin; k0 < k_end; k0 += tile::depth) {
        if (a_strip)
            gemm_stage_b<tile>(p, b_tile, group, n0, k0, k_end);
        else
            gemm_stage_slices<tile>(p, a_tile, b_tile, group, m0, n0, k0, k_end);
        __syncthreads();
        const float *a_at = a_strip ? a_strip + (k0 - k_begin) : &a_tile[0][0];
#pragma unroll
        for (int kk = 0; kk < tile::depth; kk++) {
            float a_frag[ROWS], b_frag[COLS];
#pragma unroll
            for (int i = 0; i < ROWS; i++)
                a_frag[i] = a_at[kk * k_step + (ty + ROW_STEP * i) * row_step];
#pragma unroll
            for (int j = 0; j < COLS; j++)
                b_frag[j] = b_tile[kk][tx + GEMM_NARROW_COLUMN_THREADS * j];
#pragma unroll
            for (int i = 0; i < ROWS; i++)
#pragma unroll
                for (int j = 0; j < COLS; j++)
                    acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < ROWS; i++)
#pragma unroll
        for (int j = 0; j < COLS; j++) {
            int row = ty + ROW_STEP * i;
            int m = m0 + row, n = n0 + tx + GEMM_NARROW_COLUMN_THREADS * j;
            if (m < p.m && n < p.n)
                gemm_put(p, group, split, m, n, acc[i][j], row_bias[row]);
        }
    gemm_finish_tile<GEMM_THREADS, tile::m, tile::n, 4>(p, b, group, m0, n0, row_bias);
}

template <class Problem>
static __global__ void __launch_bounds__(GEMM_THREADS) ct_tiled_gemm_narrow(Problem p)
{
    gemm_narrow_body(p, ct_gemm_block_here());
}

/* The row pitch of the narrow tile's a strip (gemm_stage_a_strip) for a k
 * chunk of `depth` beside `scratch_floats` floats of scratch, or 0 where
 * the block's shared memory would pass the 48 KiB a block has without
 * opting in. */
static inline int ct_gemm_narrow_strip(int depth, int scratch_floats)
{
    int pitch = (depth + GEMM_TILE_K - 1) / GEMM_TILE_K * GEMM_TILE_K;
    size_t fixed = sizeof(float) * (GEMM_TILE_K * (GEMM_NARROW_M + GEMM_PAD + GEMM_NARROW_N +
                                                   GEMM_PAD) + GEMM_NARROW_M);
    size_t dynamic = sizeof(float) * ((size_t)scratch_floats + (size_t)GEMM_NARROW_M * pitch);
    return fixed + dynamic <= 48 * 1024 ? pitch : 0;
}

/* The rows and columns of the tile of `rows` (ct_cuda_launch_gemm's). */
static inline void ct_gemm_tile_sides(int rows, int *side_m, int *side_n)
{
    *side_m = rows ? rows : ct_gemm_small::m;
    *side_n = rows == GEMM_NARROW_M ? ct_gemm_narrow::n : rows ? ct_gemm_wide::n
                                                                : ct_gemm_small::n;
}

/* The blocks of an m x n product over `groups` on the tile of `rows` rows. */
static inline int64_t ct_gemm_tiles(int m, int n, int groups, int rows)
{
    int side_m, side_n;
    ct_gemm_tile_sides(rows, &side_m, &side_n);
    return (int64_t)((m + side_m - 1) / side_m) * ((n + side_n - 1) / side_n) * groups;
}

/* c = the sum of the parts in split order (plus the row bias), stored
 * through the problem: i runs over the parts' padded rows (part_pitch
 * floats, whole sectors), so that a warp reads each part in aligned runs;
 * the padding's i do nothing.  (Over c's own groups x m x n index a warp's
 * 32 values began mid-sector in most rows: the weight gradients' loads at
 * 94 % on VGG-11 B64, 99 % this way, as conv_sum_parts had it.) */
template <class Problem>
static __global__ void ct_gemm_finish_parts(Problem p, ct_divmod by_pitch, ct_divmod by_m,
                                            int64_t count)
{
    CT_CUDA_GRID_STRIDE(i, count)
    {
        int row_all = ct_div(by_pitch, (int)i), n = (int)i - row_all * p.part_pitch;
        if (n >= p.n)
            continue;
        int group = ct_div(by_m, row_all), m = row_all - group * p.m;
        /* the same sum either way; GEMM_FEW_DEPTH loads in flight where the
         * parts are that many: a round trip per four parts was most of the
         * chain of VGG-11's first weight gradient (128 parts of 64 x 28
         * outputs), and fewer parts would load past their last */
        size_t step = (size_t)p.part_rows * p.part_pitch;
        float sum = p.splits >= GEMM_FEW_DEPTH ? ct_sum_parts_deep(p.parts + i, step, p.splits)
                                               : ct_sum_parts(p.parts + i, step, p.splits);
        if constexpr (Problem::adds_row_bias)
            sum += p.row_bias(group, m);
        p.store(group, 0, m, n, sum);
    }
}

enum {
    GEMM_SPLIT_MIN_DEPTH = 16, /* shortest k chunk of a split product: one slice */
    GEMM_SPLIT_MAX = 32,
};

/* The split of a depth-k reduction over a grid of `tiles` blocks: enough
 * chunks to give `target` blocks (the device's SMs, or a multiple), none
 * shorter than min_depth and at most `most`; chunks are whole `granule`s
 * (k slices, GEMM_TILE_K, or a problem's coarser unit: the convolution
 * weight gradient's patches, which rounded up after the choice had undone
 * it).  splits 1 and k_chunk k where splitting does not pay.  From that count to twice it, the one whose grid ends soonest on `sms`
 * SMs: an SM's blocks share its schedulers, so a grid takes about the
 * most blocks one SM is given (blocks / sms, rounded up) times a block's
 * slices (and one more, its prologue and stores); ties take fewer parts.
 * Enough blocks for the target alone left VGG-11's 4x4 layers 9 chunks
 * of 32 tiles, 288 blocks: three of 512 deep on some SMs, where 12 chunks
 * give three of 384 (docs/perf.md, 2026-12-02).  Fewer blocks than the
 * target do not pay: one block an SM waits out its loads (the model's
 * chain), which the second block's warps hide. */
static inline void ct_gemm_split(int64_t tiles, int64_t k, int64_t target, int64_t sms,
                                 int64_t min_depth, int64_t most, int *splits, int *k_chunk,
                                 int64_t granule = GEMM_TILE_K)
{
    int64_t wanted = tiles >= target ? 1 : (target + tiles - 1) / tiles;
    int64_t deepest = k / min_depth, count = wanted < deepest ? wanted : deepest;
    if (count > most)
        count = most;
    *splits = 1;
    *k_chunk = (int)k;
    if (count <= 1)
        return;
    int64_t last = 2 * count < deepest ? 2 * count : deepest, best = INT64_MAX;
    if (last > most)
        last = most;
    for (int64_t c = count; c <= last; c++) {
        int64_t chunk = (k + c - 1) / c;
        chunk = (chunk + granule - 1) / granule * granule;
        int64_t used = (k + chunk - 1) / chunk, blocks = tiles * used;
        int64_t cost = (blocks + sms - 1) / sms * (chunk / GEMM_TILE_K + 1);
        if (cost < best) {
            best = cost;
            *splits = (int)used;
            *k_chunk = (int)chunk;
        }
    }
}

/* The floats between rows of split parts: n in whole 32-byte sectors. */
static inline int ct_gemm_part_pitch(int n)
{
    return (n + 7) / 8 * 8;
}

/* A product's tile (ct_cuda_launch_gemm's rows) and split of k. */
struct ct_gemm_layout {
    int rows, splits, k_chunk;
};

/* The clocks of a product's chain (the roofline's latency term, docs/
 * roofline.md: about 600 a round trip to memory, 2 an instruction, 2,000
 * a kernel's tail) on the 64 x 64 tile or the narrow one, split as `l`
 * says: per k slice a round trip and the thread's FMAs (16 or 4 outputs,
 * 16 deep), then a round trip per 4 parts (in the narrow tile's last
 * block, gemm_finish_tile, or in a kernel of its own). */
static inline double ct_gemm_chain(const ct_gemm_layout &l)
{
    bool narrow = l.rows == GEMM_NARROW_M;
    int outputs = narrow ? 4 : 16;
    double slices = (double)((l.k_chunk + GEMM_TILE_K - 1) / GEMM_TILE_K);
    double chain = slices * (600.0 + 2.0 * outputs * GEMM_TILE_K);
    if (l.splits > 1)
        chain += 600.0 * ((l.splits + 3) / 4) + (narrow ? 0.0 : 2000.0);
    return chain;
}

/* The tile and split of an m x n product of depth k over `groups`, a
 * problem with sums_parts: chunks no shorter than min_depth, at most `most`
 * (1: never split), and the parts' floats it then needs (0 for none).  The
 * narrow tile for at most GEMM_NARROW_M rows; else the wide tile of
 * `wide_rows` where the caller takes one; else the 64 x 64 tile or the
 * narrow one, whichever's chain is shorter (ct_gemm_chain).  The narrow
 * tile makes 4 times the tiles, so where 64 x 64 tiles would be fewer than
 * twice the SMs and split k, it splits less and adds the parts in the
 * kernel (gemm_finish_tile): on the model (docs/perf.md) SimpleCNN's
 * linear layers' predicted times went from 21 to 13 us (forward) and 21
 * to 12.5 (backward data).  A deep k keeps the 64 x 64 tile, four times
 * the FMAs per k slice.  `by_chain` false keeps the 64 x 64 tile (the
 * convolutions' weight gradients, whose k loop the estimate does not
 * know). */
static inline size_t ct_gemm_layout_for(int m, int n, int k, int groups, int wide_rows,
                                        int64_t min_depth, int64_t most, ct_gemm_layout *out,
                                        bool by_chain = true, int64_t granule = GEMM_TILE_K)
{
    int64_t sms = ct_cuda_sm_count(), target = 2 * sms;
    int candidates[2] = {m <= GEMM_NARROW_M ? (int)GEMM_NARROW_M : wide_rows, GEMM_NARROW_M};
    int count = m <= GEMM_NARROW_M || wide_rows || !by_chain ? 1 : 2;
    for (int c = 0; c < count; c++) {
        ct_gemm_layout l = {candidates[c], 1, k};
        ct_gemm_split(ct_gemm_tiles(m, n, groups, l.rows), k, target, sms, min_depth, most,
                      &l.splits, &l.k_chunk, granule);
        if (c == 0 || ct_gemm_chain(l) < ct_gemm_chain(*out))
            *out = l;
    }
    return out->splits > 1 ? (size_t)out->splits * groups * m * ct_gemm_part_pitch(n) : 0;
}

/* A split problem's parts for a grid of `tiles` tiles per split over
 * `groups`: their layout, and where its kernel adds them itself
 * (`in_kernel`: the narrow tile's), the stream's tickets (NULL: the parts
 * are added by gemm_finish_launch). */
template <class Problem>
static void gemm_parts_for(Problem &p, int groups, int64_t tiles, bool in_kernel,
                           cudaStream_t stream)
{
    p.part_rows = groups * p.m;
    p.part_pitch = ct_gemm_part_pitch(p.n);
    if constexpr (Problem::sums_parts)
        p.tickets = p.splits > 1 && in_kernel ? ct_cuda_tickets(stream, tiles) : nullptr;
}

/* After a split problem's GEMM whose kernel does not add its parts (no
 * tickets): the kernel that does. */
template <class Problem>
static ct_status gemm_finish_launch(const Problem &p, cudaStream_t stream)
{
    if constexpr (Problem::sums_parts) {
        if (p.splits > 1 && !p.tickets) {
            int64_t count = (int64_t)p.part_rows * p.part_pitch;
            CT_CUDA_LAUNCH_NAMED("gemm_finish_parts", ct_gemm_finish_parts<Problem>,
                                 ct_cuda_grid_for((const void *)ct_gemm_finish_parts<Problem>,
                                                  count),
                                 CT_CUDA_BLOCK, 0, stream, p, ct_divmod_of(p.part_pitch),
                                 ct_divmod_of(p.m), count);
        }
    }
    return CT_OK;
}

/* Whether the tile of `rows` takes its split parts' sum in the kernel
 * (gemm_finish_tile) for p: the narrow tile always, the wide ones for
 * few splits of deep chunks. */
template <class Problem>
static bool gemm_finishes_in_kernel(const Problem &p, int rows)
{
    return rows == GEMM_NARROW_M || (rows >= ct_gemm_wide_64::m && p.splits <= GEMM_WIDE_FINISH &&
                                     p.k_chunk >= GEMM_WIDE_K * p.splits);
}

/* Launch p over `groups` groups on the tile of `rows` rows: the wide tile
 * of 128 or 64 rows, the narrow tile of GEMM_NARROW_M, or the 64 x 64
 * tile for 0 (nothing to do for an empty c); for a problem that sums its
 * split parts, the narrow tile's last blocks do, or else a kernel after
 * it. */
template <class Problem>
static ct_status ct_cuda_launch_gemm(Problem p, int groups, int rows, cudaStream_t stream)
{
    if (p.m <= 0 || p.n <= 0 || groups <= 0)
        return CT_OK;
    int side_m, side_n;
    ct_gemm_tile_sides(rows, &side_m, &side_n);
    dim3 grid((unsigned)((p.n + side_n - 1) / side_n), (unsigned)((p.m + side_m - 1) / side_m),
              (unsigned)(groups * p.splits));
    gemm_parts_for(p, groups, (int64_t)grid.x * grid.y * groups, gemm_finishes_in_kernel(p, rows),
                   stream);
    size_t strip = rows == GEMM_NARROW_M ? (size_t)GEMM_NARROW_M * p.a_strip : 0;
    size_t shared = sizeof(float) * ((size_t)p.scratch_floats + strip);
    if (rows == ct_gemm_wide::m)
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, (ct_tiled_gemm_wide<Problem, 2>), grid,
                             GEMM_THREADS, shared, stream, p);
    else if (rows == ct_gemm_wide_64::m)
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, (ct_tiled_gemm_wide<Problem, 1>), grid,
                             GEMM_THREADS, shared, stream, p);
    else if constexpr (Problem::wide_only)
        return ct_set_error(CT_ERR_INTERNAL, "%s: launched on a tile of %d rows, but only its "
                            "wide tiles' kernels are compiled", Problem::kernel_name, rows);
    else if (rows == GEMM_NARROW_M)
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, ct_tiled_gemm_narrow<Problem>, grid,
                             GEMM_THREADS, shared, stream, p);
    else
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, ct_tiled_gemm<Problem>, grid, GEMM_THREADS,
                             shared, stream, p);
    return gemm_finish_launch(p, stream);
}

/*
 * Two products in one launch (a layer's backward data and its weight
 * gradient, from the same dy: graph/impl.h's run_pair): the first grid's
 * blocks, then the second's, as blockIdx.x, each on its own tile (the 64 x
 * 64 or the narrow one: `rows` as ct_cuda_launch_gemm's).  The products of
 * small layers run on a few blocks each, a chain of k slices long; side by
 * side their chains overlap and one kernel's tail is saved.  Shared memory
 * is both bodies' static arrays and the larger dynamic part; registers
 * the larger body's.
 */
enum {
    GEMM_PAIR_MIN_BLOCKS = 2,
};

struct ct_gemm_grid {
    int x, y, z;
};

static __device__ inline ct_gemm_block ct_gemm_block_of(ct_gemm_grid g, int index)
{
    ct_gemm_block b = {index % g.x, index / g.x % g.y, index / g.x / g.y, g.x, g.y};
    return b;
}

template <int rows, class Problem>
static __device__ inline void gemm_body(const Problem &p, ct_gemm_block b)
{
    if constexpr (rows == GEMM_NARROW_M)
        gemm_narrow_body(p, b);
    else
        gemm_small_body(p, b);
}

/* Three blocks an SM: at GEMM_MIN_BLOCKS' 64 registers the pairs with a
 * narrow body spilled 8 to 16 bytes (nvcc 13, sm_90); at 72, none. */
template <class First, int first_rows, class Second, int second_rows>
static __global__ void __launch_bounds__(GEMM_THREADS, GEMM_PAIR_MIN_BLOCKS)
    ct_tiled_gemm_pair(First first, ct_gemm_grid first_grid, Second second,
                       ct_gemm_grid second_grid)
{
    int blocks = first_grid.x * first_grid.y * first_grid.z;
    if ((int)blockIdx.x < blocks)
        gemm_body<first_rows>(first, ct_gemm_block_of(first_grid, blockIdx.x));
    else
        gemm_body<second_rows>(second, ct_gemm_block_of(second_grid, blockIdx.x - blocks));
}

/* The grid of p over `groups` on the tile of `rows` rows (p.splits set). */
template <class Problem>
static ct_gemm_grid gemm_grid_of(const Problem &p, int groups, int rows)
{
    int side_m, side_n;
    ct_gemm_tile_sides(rows, &side_m, &side_n);
    ct_gemm_grid g = {(p.n + side_n - 1) / side_n, (p.m + side_m - 1) / side_m,
                      groups * p.splits};
    return g;
}

/* Whether two products can run paired: both on the 64 x 64 or the narrow
 * tile. */
static inline bool ct_gemm_pairs(int first_rows, int second_rows)
{
    return (first_rows == 0 || first_rows == GEMM_NARROW_M) &&
           (second_rows == 0 || second_rows == GEMM_NARROW_M);
}

/* The static shared memory of the 64 x 64 (rows 0) or the narrow tile's
 * body: its a and b slices and row bias. */
static inline size_t gemm_body_static_bytes(int rows)
{
    int m = rows ? (int)GEMM_NARROW_M : (int)GEMM_TILE_M;
    int n = rows ? (int)GEMM_NARROW_N : (int)GEMM_TILE_N;
    return sizeof(float) * ((size_t)GEMM_TILE_K * (m + GEMM_PAD + n + GEMM_PAD) + m);
}

/* A problem's dynamic shared memory on the tile of `rows` (its scratch, and
 * the narrow tile's a strip). */
template <class Problem>
static size_t gemm_dynamic_bytes(const Problem &p, int rows)
{
    size_t strip = rows == GEMM_NARROW_M ? (size_t)GEMM_NARROW_M * p.a_strip : 0;
    return sizeof(float) * ((size_t)p.scratch_floats + strip);
}

/* first and second in one launch named `name` where they pair
 * (ct_gemm_pairs; their blocks one wave; both bodies' static shared memory
 * and the larger dynamic part within the 48 KiB a block has without
 * opting in), else one after the other (ct_cuda_launch_gemm).  A split problem's tickets: the
 * first's tiles', then the second's; one whose parts need the finishing
 * kernel gets it after the launch. */
template <class First, class Second>
static ct_status ct_cuda_launch_gemm_pair(const char *name, First first, int first_groups,
                                          int first_rows, Second second, int second_groups,
                                          int second_rows, cudaStream_t stream)
{
    bool empty = first.m <= 0 || first.n <= 0 || first_groups <= 0 || second.m <= 0 ||
                 second.n <= 0 || second_groups <= 0;
    ct_gemm_grid g1 = gemm_grid_of(first, first_groups, first_rows);
    ct_gemm_grid g2 = gemm_grid_of(second, second_groups, second_rows);
    int64_t tiles1 = (int64_t)g1.x * g1.y * first_groups;
    int64_t tiles2 = (int64_t)g2.x * g2.y * second_groups;
    int64_t blocks = (int64_t)g1.x * g1.y * g1.z + (int64_t)g2.x * g2.y * g2.z;
    size_t shared1 = gemm_dynamic_bytes(first, first_rows);
    size_t shared2 = gemm_dynamic_bytes(second, second_rows);
    size_t shared = shared1 > shared2 ? shared1 : shared2;
    size_t statics = gemm_body_static_bytes(first_rows) + gemm_body_static_bytes(second_rows);
    /* one wave: the pair's registers hold GEMM_PAIR_MIN_BLOCKS blocks an
     * SM, where a lone 64 x 64 tile holds 4 (SimpleCNN's conv2 at batch
     * 64, 192 + 96 blocks, took two waves paired: 58 us on the model
     * against 24.5 one after the other) */
    int64_t wave = (int64_t)GEMM_PAIR_MIN_BLOCKS * ct_cuda_sm_count();
    if (empty || !ct_gemm_pairs(first_rows, second_rows) || blocks > wave ||
        shared + statics > 48 * 1024) {
        CT_TRY(ct_cuda_launch_gemm(first, first_groups, first_rows, stream));
        return ct_cuda_launch_gemm(second, second_groups, second_rows, stream);
    }
    gemm_parts_for(first, first_groups, tiles1 + tiles2, first_rows == GEMM_NARROW_M, stream);
    gemm_parts_for(second, second_groups, tiles1 + tiles2, second_rows == GEMM_NARROW_M, stream);
    if constexpr (Second::sums_parts) {
        if (second.tickets)
            second.tickets += tiles1;
    }
    bool narrow1 = first_rows == GEMM_NARROW_M, narrow2 = second_rows == GEMM_NARROW_M;
    if (narrow1 && narrow2)
        CT_CUDA_LAUNCH_NAMED(name, (ct_tiled_gemm_pair<First, GEMM_NARROW_M, Second, GEMM_NARROW_M>),
                             (unsigned)blocks, GEMM_THREADS, shared, stream, first, g1, second, g2);
    else if (narrow1)
        CT_CUDA_LAUNCH_NAMED(name, (ct_tiled_gemm_pair<First, GEMM_NARROW_M, Second, 0>),
                             (unsigned)blocks, GEMM_THREADS, shared, stream, first, g1, second, g2);
    else if (narrow2)
        CT_CUDA_LAUNCH_NAMED(name, (ct_tiled_gemm_pair<First, 0, Second, GEMM_NARROW_M>),
                             (unsigned)blocks, GEMM_THREADS, shared, stream, first, g1, second, g2);
    else
        CT_CUDA_LAUNCH_NAMED(name, (ct_tiled_gemm_pair<First, 0, Second, 0>), (unsigned)blocks,
                             GEMM_THREADS, shared, stream, first, g1, second, g2);
    CT_TRY(gemm_finish_launch(first, stream));
    return gemm_finish_launch(second, stream);
}

/*
 * Up to GEMM_GROUP_MAX products of one type on one wide tile in one
 * launch (a stride-2 convolution's backward data by phases, conv.cu: four
 * products of one m whose k are Og x 4, 2, 2 and 1 taps).  The grid is
 * the widest product's columns of tiles by the rows of tiles (one m) by
 * every product's groups x splits one after the other: blockIdx.z in
 * [first[i], first[i + 1]) is product i's (a narrower product's blocks
 * past its columns return).  Each product's split parts have their own
 * region of the workspace (the caller's) and their tickets their own
 * range: the products' tiles one after the other.  The products sit in
 * the launch's parameters (__grid_constant__: read in place, by the
 * block's index).  Only the wide tiles, two blocks an SM: read from a
 * computed address, the 128-row body's fields cost no more registers than
 * a lone launch's constants (128, no spills; nvcc 13, sm_90), where the
 * 64-row body at three blocks an SM (80 registers) spilled 4 bytes (116
 * registers at two), the 64 x 64 tile's 64 registers spilled 372 bytes
 * and a paired launch's 4 to 44.  One body inlined per index instead
 * spilled 144 to 304 bytes; the product copied to shared memory lost the
 * loads' global space (generic loads, no LDG.128).
 */
enum {
    GEMM_GROUP_MAX = 4,
};

template <class Problem>
struct ct_gemm_group {
    int count;
    int first[GEMM_GROUP_MAX + 1];
    ct_gemm_grid grid[GEMM_GROUP_MAX];
    Problem p[GEMM_GROUP_MAX];
};

template <class Problem, int halves>
static __global__ void __launch_bounds__(GEMM_THREADS, 2)
    ct_tiled_gemm_group(const __grid_constant__ ct_gemm_group<Problem> group)
{
    int z = (int)blockIdx.z, i = 0;
    while (i + 1 < group.count && z >= group.first[i + 1])
        i++;
    if ((int)blockIdx.x >= group.grid[i].x) /* a narrower product's */
        return;
    ct_gemm_block b = {(int)blockIdx.x, (int)blockIdx.y, z - group.first[i], group.grid[i].x,
                       (int)gridDim.y};
    gemm_wide_body<Problem, halves>(group.p[i], b);
}

/*
 * p[0..count) over `groups` groups on the wide tile of `rows` (128 or 64)
 * in one launch (count <= GEMM_GROUP_MAX; each p[i]'s splits, k_chunk,
 * parts and scratch set by the caller, its parts apart from the others');
 * a product whose parts its blocks do not add (gemm_finishes_in_kernel)
 * gets the finishing kernel after.
 */
template <class Problem>
static ct_status ct_cuda_launch_gemm_group(const Problem *p, int count, int groups, int rows,
                                           cudaStream_t stream)
{
    /* within the 4 KB of parameters every CUDA 12 driver takes */
    static_assert(sizeof(ct_gemm_group<Problem>) <= 4096, "a group's products are too large");
    ct_gemm_group<Problem> group{};
    int64_t tiles = 0;
    dim3 grid(1, 1, 0);
    size_t shared = 0;
    for (int i = 0; i < count; i++) {
        if (p[i].m <= 0 || p[i].n <= 0 || groups <= 0)
            continue;
        int at = group.count++;
        group.p[at] = p[i];
        group.grid[at] = gemm_grid_of(p[i], groups, rows);
        group.first[at] = (int)grid.z;
        grid.x = grid.x > (unsigned)group.grid[at].x ? grid.x : (unsigned)group.grid[at].x;
        grid.y = (unsigned)group.grid[at].y; /* one m */
        grid.z += (unsigned)group.grid[at].z;
        tiles += (int64_t)group.grid[at].x * group.grid[at].y * groups;
        size_t bytes = gemm_dynamic_bytes(p[i], rows);
        shared = bytes > shared ? bytes : shared;
    }
    if (group.count == 0)
        return CT_OK;
    group.first[group.count] = (int)grid.z;
    int64_t offset = 0;
    for (int i = 0; i < group.count; i++) {
        Problem &q = group.p[i];
        gemm_parts_for(q, groups, tiles, gemm_finishes_in_kernel(q, rows), stream);
        if constexpr (Problem::sums_parts) {
            if (q.tickets)
                q.tickets += offset;
        }
        offset += (int64_t)group.grid[i].x * group.grid[i].y * groups;
    }
    if (rows == ct_gemm_wide::m)
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, (ct_tiled_gemm_group<Problem, 2>), grid,
                             GEMM_THREADS, shared, stream, group);
    else
        CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, (ct_tiled_gemm_group<Problem, 1>), grid,
                             GEMM_THREADS, shared, stream, group);
    for (int i = 0; i < group.count; i++)
        CT_TRY(gemm_finish_launch(group.p[i], stream));
    return CT_OK;
}

#endif
