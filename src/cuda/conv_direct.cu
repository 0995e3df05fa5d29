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
 *     (DIRECT_WEIGHTS floats), whole register blocks of DIRECT_OUTS
 *     channels (zeros past the group's last), by tap: a tap's weights for
 *     a register block are two float4s, read by the whole warp (a
 *     broadcast);
 *   - each tap's offset in the patch (tap_at), made once a block: a tap's
 *     read is then that offset from its output's first tap, where its
 *     phase and column took two run-time divisions per tap per output and
 *     the last block's weights a select per FMA, and each weight its own
 *     load and address (8 instructions a FMA on VGG-11's first layer,
 *     emulated counts; docs/perf.md 2026-12-02).
 * Each thread then computes pixels t, t + 256, ... of the tile, DIRECT_OUTS
 * output channels at a time in registers (one patch read feeds DIRECT_OUTS
 * FMAs).  rows: enough whole output rows for the block's 256 threads, fewer
 * if the patch would pass DIRECT_PATCH floats; a shape whose single output
 * row does not fit goes to the implicit GEMM (ct_cuda_conv2d_direct_fits).
 * Shared memory is at most (DIRECT_PATCH + DIRECT_WEIGHTS + 340) * 4 =
 * 42 KiB (at most 340 taps: a register block's weights must fit).
 * nvcc 13 gives it 48 registers (the accumulators and two float4s of
 * weights): 62.5% occupancy on sm_90, enough here, where every patch read
 * feeds 8 FMAs.  The weights' reads are whole sectors but a row of taps
 * is no whole number of them (27 floats: 4 or 5 sectors, and a warp's
 * trips past a row's end re-read its last): 78% load efficiency over the
 * kernel on VGG-11's first layer, against 100% for the contiguous copy of
 * [channel][tap] rows that the per-FMA loads needed.
 * The staging stores can meet a bank twice where a warp's 32 inputs cross
 * a row end and the pitch (chosen for the compute reads) differs from
 * in_w mod 32; they are a few percent of the shared accesses.
 *
 * Each output sums its taps in (c, i, j) order with float FMAs from 0 and
 * then adds the bias; a tap in the padding adds 0 * w, which leaves a sum
 * started at +0 unchanged for finite weights: the same bits as a thread
 * per output that skips the padding.
 */
#include "core/window_math.h"
#include "cuda/common.cuh"
#include "cuda/elementwise.cuh"

enum {
    CONV_DIRECT_MAX_CHANNELS = 4, /* Cg at or below this: the direct kernel */
    DIRECT_PATCH = 6144,          /* floats of staged input */
    DIRECT_WEIGHTS = 4096,        /* floats of staged weights and biases */
    DIRECT_OUTS = 8,              /* output channels per register block */
    DIRECT_WEIGHT_PAD = 4,        /* floats after a tap's row of staged weights */
};

/* `channels` rounded up to whole register blocks. */
static __host__ __device__ inline int conv_direct_blocked(int channels)
{
    return (channels + DIRECT_OUTS - 1) / DIRECT_OUTS * DIRECT_OUTS;
}

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
    /* whole register blocks (their rows past og hold zero weights); a
     * tap's row of outs_chunk + DIRECT_WEIGHT_PAD weights, and the biases */
    t.outs_chunk = (DIRECT_WEIGHTS - DIRECT_WEIGHT_PAD * taps) / (taps + 1) / DIRECT_OUTS *
                   DIRECT_OUTS;
    if (t.outs_chunk > conv_direct_blocked(og))
        t.outs_chunk = conv_direct_blocked(og);
    return t;
}

__global__ void conv_forward_direct(ct_conv2d_shape s, conv_direct_tile t, const float *x,
                                    const float *w, const float *bias, bool relu, float *y)
{
    CT_CUDA_DYNAMIC_SHARED(float, staged);
    int cg = s.in_channels / s.groups, og = s.out_channels / s.groups;
    int taps = cg * s.kernel_h * s.kernel_w;
    int patch_size = cg * t.span * t.pitch;
    /* the weights first: their rows are float4s (pitch a multiple of 4) */
    int pitch = t.outs_chunk + DIRECT_WEIGHT_PAD;
    float *weights = staged, *biases = weights + pitch * taps, *patch = biases + t.outs_chunk;
    int *tap_at = (int *)(patch + patch_size);
    int n = (int)(blockIdx.x / t.tiles), g = (int)blockIdx.y;
    int oh0 = (int)(blockIdx.x % t.tiles) * t.rows;
    int rows = min(t.rows, s.out_h - oh0);
    int ih_base = oh0 * s.stride_h - s.pad_h; /* staged row 0 */
    int span = (rows - 1) * s.stride_h + (s.kernel_h - 1) * s.dilation_h + 1;
    int ih_lo = max(ih_base, 0), ih_hi = min(ih_base + span, s.in_h);
    for (int e = threadIdx.x; e < patch_size; e += blockDim.x)
        patch[e] = 0.0f;
    /* each tap's offset in the patch from its output's first tap (c, i, j
     * in that order): the phase and column of j made once a block, not
     * with two run-time divisions for every tap of every output */
    for (int tap = threadIdx.x; tap < taps; tap += blockDim.x) {
        int c = tap / (s.kernel_h * s.kernel_w), ij = tap - c * s.kernel_h * s.kernel_w;
        int i = ij / s.kernel_w, shift = (ij - i * s.kernel_w) * s.dilation_w;
        tap_at[tap] = (c * t.span + i * s.dilation_h) * t.pitch +
                      shift % s.stride_w * t.phase_w + shift / s.stride_w;
    }
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
        /* the register blocks' rows past the group's channels: weights 0 */
        int blocked = conv_direct_blocked(chunk);
        __syncthreads(); /* the patch is staged; the previous chunk's weights are read */
        const float *wg = w + (size_t)(g * og + o0) * taps;
        /* weights[tap * pitch + q] = w[o0 + q, tap]: a warp takes a 32-byte
         * sector of each of 4 channels' rows, lane l 8 taps of channel 4 quad
         * + l / 8 from a sector boundary on: its reads are whole sectors,
         * its stores 32 banks (8 consecutive taps of a channel are 8
         * multiples of 4 modulo 32, pitch being 4 times an odd number; the
         * 4 channels differ modulo 4) */
        int runs = (taps + 7) / 8 + 1, lane = (int)threadIdx.x % CT_CUDA_WARP;
        for (int item = (int)threadIdx.x / CT_CUDA_WARP; item < runs * (blocked / 4);
             item += (int)blockDim.x / CT_CUDA_WARP) {
            int quad = item / runs, q = 4 * quad + lane / 8;
            int lead = (int)(((uintptr_t)wg / sizeof(float) + (size_t)q * taps) % 8);
            /* lanes before the row or past it copy its first or last tap,
             * as their neighbour does: no branch around the access */
            int tap = min(max(8 * (item - quad * runs) + lane % 8 - lead, 0), taps - 1);
            weights[tap * pitch + q] = q < chunk ? wg[(size_t)q * taps + tap] : 0.0f;
        }
        for (int e = threadIdx.x; e < chunk; e += blockDim.x)
            biases[e] = bias ? bias[g * og + o0 + e] : 0.0f;
        __syncthreads();
        for (int pix = threadIdx.x; pix < pixels; pix += blockDim.x) {
            int oh = pix / s.out_w, ow = pix % s.out_w;
            const float *at = patch + oh * s.stride_h * t.pitch + ow;
            for (int q0 = 0; q0 < chunk; q0 += DIRECT_OUTS) {
                float acc[DIRECT_OUTS];
#pragma unroll
                for (int q = 0; q < DIRECT_OUTS; q++)
                    acc[q] = 0.0f;
                const float *wq = weights + q0;
                for (int tap = 0; tap < taps; tap++, wq += pitch) {
                    float v = at[tap_at[tap]], wv[DIRECT_OUTS];
                    static_assert(DIRECT_OUTS == 2 * CT_VEC, "a register block is two float4s");
                    ct_load4(wq, wv);
                    ct_load4(wq + CT_VEC, wv + CT_VEC);
#pragma unroll
                    for (int q = 0; q < DIRECT_OUTS; q++)
                        acc[q] = fmaf(v, wv[q], acc[q]);
                }
                for (int q = 0; q < DIRECT_OUTS && q < chunk - q0; q++) {
                    size_t o = (size_t)g * og + o0 + q0 + q;
                    float v = acc[q] + biases[q0 + q];
                    y[(((size_t)n * s.out_channels + o) * s.out_h + oh0 + oh) * s.out_w + ow] =
                        relu && v < 0.0f ? 0.0f : v;
                }
            }
        }
    }
}

static size_t conv_direct_shared_bytes(const ct_conv2d_shape *s, const conv_direct_tile &t)
{
    int taps = s->in_channels / s->groups * s->kernel_h * s->kernel_w;
    return sizeof(float) * ((size_t)conv_direct_patch(s, t.rows, t.pitch) +
                            (size_t)(t.outs_chunk + DIRECT_WEIGHT_PAD) * taps +
                            (size_t)t.outs_chunk + (size_t)taps);
}

extern "C" bool ct_cuda_conv2d_direct_fits(const ct_conv2d_shape *s)
{
    int cg = s->in_channels / s->groups;
    if (cg > CONV_DIRECT_MAX_CHANNELS || s->groups > 65535)
        return false;
    conv_direct_tile t = conv_direct_tile_for(s);
    /* a register block's weights fit (a kernel of more than 340 taps does
     * not: 0 channels a chunk would never finish) */
    return t.outs_chunk >= DIRECT_OUTS && conv_direct_patch(s, 1, t.pitch) <= DIRECT_PATCH &&
           (int64_t)s->n_batch * t.tiles <= INT32_MAX;
}

extern "C" ct_status ct_cuda_conv2d_forward_direct(const ct_conv2d_shape *s, const float *x,
                                                   const float *w, const float *bias, bool relu,
                                                   float *y, cudaStream_t stream)
{
    if ((int64_t)s->n_batch * s->out_channels * s->out_h * s->out_w == 0)
        return CT_OK;
    conv_direct_tile t = conv_direct_tile_for(s);
    dim3 grid((unsigned)(s->n_batch * t.tiles), (unsigned)s->groups);
    CT_CUDA_LAUNCH(conv_forward_direct, grid, CT_CUDA_BLOCK, conv_direct_shared_bytes(s, t),
                   stream, *s, t, x, w, bias, relu, y);
    return CT_OK;
}
