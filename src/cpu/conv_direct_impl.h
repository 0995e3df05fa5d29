/*
 * What the direct convolution's two files share (internal to src/cpu):
 * conv_avx2.c (the forward, the backward data, the workspace) and
 * conv_weight_avx2.c (the backward weight).  The geometry of a padded
 * image, the workspace's layout and the channel blocking live here so both
 * halves agree on them.  Include only where CT_CPU_HAVE_AVX2_KERNELS holds.
 */
#ifndef CT_CPU_CONV_DIRECT_IMPL_H
#define CT_CPU_CONV_DIRECT_IMPL_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/shapes.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline
/* The same 8-float kernels with AVX-512VL's 32 vector registers. */
#define AVX512VL __attribute__((target("avx2,fma,avx512f,avx512vl")))

enum {
    LANES = 8,          /* floats per AVX register */
    MAX_OB = 4,         /* output channels in a register block */
    MAX_R = 4,          /* vectors of outputs in a register block */
    WEIGHT_J = 3,       /* kernel columns in a backward-weight register block */
    WIDE_J = 5,         /* the same with AVX-512VL's 32 vector registers */
    SLACK = 2 * LANES,  /* zeros after a padded image: a tail vector may read past it */
    WEIGHT_CHUNKS = 8,  /* backward weight: fixed chunks of the batch */
    WEIGHT_GROUP = 4,   /* backward weight: images per pass over the lane sums */
    ALIGN_FLOATS = 16,  /* per-thread regions start on 64-byte boundaries */
};

/* The padded input of one image as the kernels see it, and the output. */
typedef struct plane_geom {
    int in_c, hp, wp;         /* padded input: [in_c, hp, wp] */
    int top, rows;            /* its rows [top, top+rows) hold data, the others zeros */
    int out_c, out_h, out_w;  /* output: [out_c, out_h, out_w] */
    int kh, kw;
    bool relu;                /* forward: store max(y, 0) */
    bool pool;                /* forward: store the 2x2/2 max pool of y instead */
} plane_geom;

static inline size_t round_floats(size_t count)
{
    return (count + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

/* Floats of one padded image with its slack. */
static inline size_t padded_floats(int channels, int hp, int wp)
{
    return round_floats((size_t)channels * hp * wp + SLACK);
}

static inline plane_geom forward_geom(const ct_conv2d_shape *s)
{
    plane_geom g = {s->in_channels, s->in_h + 2 * s->pad_h, s->in_w + 2 * s->pad_w,
                    s->pad_h, s->in_h, s->out_channels, s->out_h, s->out_w, s->kernel_h, s->kernel_w, false, false};
    return g;
}

static inline size_t weight_count(const ct_conv2d_shape *s)
{
    return (size_t)s->out_channels * s->in_channels * s->kernel_h * s->kernel_w;
}

/* The chunks' bias sums (doubles) after their weight sums. */
static inline size_t bias_sum_floats(const ct_conv2d_shape *s)
{
    return round_floats((size_t)s->out_channels * WEIGHT_CHUNKS * 2);
}

/* Output channels o0..o1 of block `block`: the channels split as evenly as
 * blocks of at most max_ob allow (max_ob 4: 6 -> 3+3, 10 -> 3+3+4). */
static inline int channel_blocks(int channels, int max_ob)
{
    return (channels + max_ob - 1) / max_ob;
}

static inline void channel_block(int channels, int max_ob, int block, int *o0, int *o1)
{
    int n_blocks = channel_blocks(channels, max_ob);
    *o0 = block * channels / n_blocks;
    *o1 = (block + 1) * channels / n_blocks;
}

/* The images [first, last) of n split evenly over `parts`. */
static inline void split_range(int n, int part, int parts, int *first, int *last)
{
    *first = (int)((long long)n * part / parts);
    *last = (int)((long long)n * (part + 1) / parts);
}

/* Whether image n of n_batch ([in_c, h, w] each, unpadded) can be read
 * where it lies instead of copied into the padded buffer: the geometry has
 * no padding (hp == h, wp == w) and SLACK floats of the batch follow the
 * image (a row's last vector reads past the image's end into the next one;
 * those lanes are never stored).  SimpleCNN's convolutions have no padding:
 * every image but the last is read in place. */
static inline bool image_in_place(const plane_geom *g, int h, int w, int n, int n_batch)
{
    return g->hp == h && g->wp == w &&
           (size_t)(n_batch - 1 - n) * (size_t)g->in_c * h * w >= SLACK;
}

AVX2_INLINE __m256i lane_mask(int lanes)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Floats of one thread's region of the workspace (the larger of what the
 * forward, the backward data and the backward weight need). */
size_t ct_cpu_conv_direct_thread_floats(const ct_conv2d_shape *s);
/* xp[c, top+h, left+w] = x[c, h, w], zeros around and SLACK zeros after. */
void ct_cpu_conv_direct_pad_image(int channels, int h, int w, int top, int left, int hp, int wp,
                                  const float *x, float *xp);

#endif
