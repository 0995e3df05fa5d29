/*
 * The direct convolution's weight gradient on vectors of 16 output
 * channels, on AVX-512, where the output channels come in sixteens
 * (SimpleCNN's 6 -> 16 layer; VGG's and the CIFAR ResNets' 3 -> 64 stems):
 *
 *   sums[c, i, j, o:o+16] += xp[n, c, oh+i, ow+j] * dy[n, o:o+16, oh, ow]
 *
 * one broadcast input (folded into the FMA) per 16 products, so no lane
 * holds a partial sum and none idles whatever the output's width, and no
 * load of an input splits a cache line.  dy is transposed per image to
 * [oh, ow, o] so its vector is one load.  conv_flat.c's 16-output vectors
 * do the same products with 16 partial sums a weight and an unaligned
 * input vector a product (half of them split on SimpleCNN's 8-wide rows).
 *
 * A register block: up to 4 (c, i) kernel rows x 5 kernel columns of one
 * vector of output channels (20 accumulators), over every output of the
 * group's images in one loop: one dy load and 20 broadcasts per 20 FMAs.
 * Each weight adds its products image by image, output by output: the
 * same order for any thread count (conv_weight_avx2.c keeps the chunks).
 */
#include "cpu/conv_channels.h"

#ifdef CT_CPU_HAVE_AVX2_KERNELS

#include <immintrin.h>
#include <string.h>

#include "cpu/conv_direct_impl.h"
#include "cpu/conv_flat.h"

#define AVX512_CH __attribute__((target("avx2,fma,avx512f,avx512vl")))
#define AVX512_CH_INLINE \
    __attribute__((target("avx2,fma,avx512f,avx512vl"), always_inline)) static inline

enum {
    VEC = 16,
    MAX_ROWS = 4,  /* (c, i) kernel rows in a block */
    MAX_J = 5,     /* kernel columns in a block */
    MAX_DY_GROUP_FLOATS = 1 << 16,
};

typedef struct channels_geom {
    int in_c, hp, wp;           /* padded input [in_c, hp, wp] */
    int out_c, out_h, out_w, area;
    int kh, kw;
    size_t dy_image, x_image;   /* floats of one image's transposed dy, padded input */
} channels_geom;

static channels_geom geom_of(const ct_conv2d_shape *s)
{
    channels_geom g = {s->in_channels, s->in_h + 2 * s->pad_h, s->in_w + 2 * s->pad_w,
                       s->out_channels, s->out_h, s->out_w, s->out_h * s->out_w,
                       s->kernel_h, s->kernel_w, 0, 0};
    g.dy_image = round_floats((size_t)g.out_c * g.area);
    g.x_image = padded_floats(g.in_c, g.hp, g.wp);
    return g;
}

/* Where a group's transposed dy stays in L2: every block of kernel rows
 * reads all of it once per vector of channels.  VGG's 3 -> 64 stem (32x32
 * outputs: 512 KiB an image) ran 1.3x slower here than on conv_flat.c's
 * vectors; SimpleCNN's 6 -> 16 layer (4 KiB) 1.65x faster. */
bool ct_cpu_conv2d_channels_shape_fits(const ct_conv2d_shape *s)
{
    double dy_group = (double)CT_CONV_FLAT_GROUP * s->out_channels * s->out_h * s->out_w;
    return ct_cpu_conv2d_flat_shape_fits(s) && s->out_channels % VEC == 0 &&
           dy_group <= MAX_DY_GROUP_FLOATS;
}

bool ct_cpu_conv2d_channels_fits(const ct_conv2d_shape *s)
{
    return ct_cpu_simd_avx512() && ct_cpu_conv2d_channels_shape_fits(s);
}

size_t ct_cpu_conv2d_channels_group_floats(const ct_conv2d_shape *s)
{
    channels_geom g = geom_of(s);
    return CT_CONV_FLAT_GROUP * (g.dy_image + g.x_image);
}

size_t ct_cpu_conv2d_channels_thread_floats(const ct_conv2d_shape *s)
{
    return ct_cpu_conv2d_channels_group_floats(s) + round_floats(weight_count(s));
}

/* dy_t[p, o] = dy[o, p] of one image: 16 channels of an output a gather. */
static AVX512_CH void transpose_dy(const channels_geom *g, const float *dy, float *dy_t)
{
    __m512i stride = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(g->area));
    for (int o0 = 0; o0 < g->out_c; o0 += VEC) {
        const float *from = dy + (size_t)o0 * g->area;
        for (int p = 0; p < g->area; p++)
            _mm512_storeu_ps(dy_t + (size_t)p * g->out_c + o0,
                             _mm512_i32gather_ps(stride, from + p, 4));
    }
}

/* sums[tap k, j0 + jj, o0:o0+16] += xp[row k, idx + j0 + jj] * dy_t[t, o0:o0+16]
 * over the outputs t (idx: where their inputs start) of n_images images,
 * x_stride floats apart.  rows[k] points at block row k's input row (c, i)
 * of the first image, row_tap[k] is the tap of its column 0. */
AVX512_CH_INLINE void channels_block(const channels_geom *g, const float *const *rows,
                                     const int *row_tap, int j0, int o0, int n_images,
                                     size_t x_stride, const float *dy_t, bool fresh,
                                     float *sums, const int R, const int J)
{
    __m512 acc[MAX_ROWS][MAX_J];
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            acc[k][jj] = fresh ? _mm512_setzero_ps()
                               : _mm512_loadu_ps(sums + (size_t)(row_tap[k] + j0 + jj) *
                                                 g->out_c + o0);
    const float *row[MAX_ROWS];
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        row[k] = rows[k] + j0;
    for (int image = 0; image < n_images; image++) {
        const float *d = dy_t + image * g->dy_image + o0;
        /* one loop over the outputs (a loop per output row left, mispredicted,
         * every 8 x 20 FMAs on SimpleCNN's 8-wide rows) */
        int idx = 0, ow = 0;
        for (int t = 0; t < g->area; t++) {
            __m512 dv = _mm512_loadu_ps(d + (size_t)t * g->out_c);
            #pragma GCC unroll 4
            for (int k = 0; k < R; k++)
                #pragma GCC unroll 5
                for (int jj = 0; jj < J; jj++)
                    acc[k][jj] = _mm512_fmadd_ps(_mm512_set1_ps(row[k][idx + jj]), dv,
                                                 acc[k][jj]);
            idx++;
            if (++ow == g->out_w) {
                ow = 0;
                idx += g->wp - g->out_w;
            }
        }
        #pragma GCC unroll 4
        for (int k = 0; k < R; k++)
            row[k] += x_stride;
    }
    #pragma GCC unroll 4
    for (int k = 0; k < R; k++)
        #pragma GCC unroll 5
        for (int jj = 0; jj < J; jj++)
            _mm512_storeu_ps(sums + (size_t)(row_tap[k] + j0 + jj) * g->out_c + o0, acc[k][jj]);
}

typedef void (*channels_block_fn)(const channels_geom *g, const float *const *rows,
                                  const int *row_tap, int j0, int o0, int n_images,
                                  size_t x_stride, const float *dy_t, bool fresh, float *sums);

#define CHANNELS_BLOCK(R, J)                                                                  \
    static AVX512_CH void channels_##R##_##J(const channels_geom *g, const float *const *rows, \
                                             const int *row_tap, int j0, int o0, int n_images, \
                                             size_t x_stride, const float *dy_t, bool fresh,   \
                                             float *sums)                                      \
    {                                                                                         \
        channels_block(g, rows, row_tap, j0, o0, n_images, x_stride, dy_t, fresh, sums, R,    \
                       J);                                                                    \
    }
#define CHANNELS_BLOCKS(R) CHANNELS_BLOCK(R, 1) CHANNELS_BLOCK(R, 2) CHANNELS_BLOCK(R, 3) \
    CHANNELS_BLOCK(R, 4) CHANNELS_BLOCK(R, 5)
CHANNELS_BLOCKS(1)
CHANNELS_BLOCKS(2)
CHANNELS_BLOCKS(3)
CHANNELS_BLOCKS(4)

#define CHANNELS_ROW(R) {channels_##R##_1, channels_##R##_2, channels_##R##_3, \
                         channels_##R##_4, channels_##R##_5}
static const channels_block_fn channels_blocks[MAX_ROWS][MAX_J] = {
    CHANNELS_ROW(1), CHANNELS_ROW(2), CHANNELS_ROW(3), CHANNELS_ROW(4),
};

void ct_cpu_conv2d_channels_weight_group(const ct_conv2d_shape *s, int n_images, const float *x,
                                         const float *dy, bool fresh, float *scratch,
                                         float *sums)
{
    channels_geom g = geom_of(s);
    size_t in_image = (size_t)s->in_channels * s->in_h * s->in_w;
    size_t out_image = (size_t)g.out_c * g.area, plane = (size_t)g.hp * g.wp;
    float *dy_t = scratch, *padded = scratch + CT_CONV_FLAT_GROUP * g.dy_image;
    /* unpadded images are read where they lie: the products read no input
     * past an image's plane */
    bool in_place = s->pad_h == 0 && s->pad_w == 0;
    const float *xp = in_place ? x : padded;
    size_t x_stride = in_place ? in_image : g.x_image;
    for (int k = 0; k < n_images; k++) {
        transpose_dy(&g, dy + k * out_image, dy_t + k * g.dy_image);
        if (!in_place)
            ct_cpu_conv_direct_pad_image(g.in_c, s->in_h, s->in_w, s->pad_h, s->pad_w, g.hp,
                                         g.wp, x + k * in_image, padded + k * g.x_image);
    }
    int n_rows = g.in_c * g.kh;
    for (int o0 = 0; o0 < g.out_c; o0 += VEC)
        for (int r0 = 0; r0 < n_rows; r0 += MAX_ROWS) {
            int r = n_rows - r0 < MAX_ROWS ? n_rows - r0 : MAX_ROWS;
            const float *rows[MAX_ROWS];
            int row_tap[MAX_ROWS];
            for (int k = 0; k < r; k++) {
                int c = (r0 + k) / g.kh, i = (r0 + k) % g.kh;
                rows[k] = xp + c * plane + (size_t)i * g.wp;
                row_tap[k] = (r0 + k) * g.kw;
            }
            for (int j0 = 0; j0 < g.kw; j0 += MAX_J) {
                int jn = g.kw - j0 < MAX_J ? g.kw - j0 : MAX_J;
                channels_blocks[r - 1][jn - 1](&g, rows, row_tap, j0, o0, n_images, x_stride,
                                               dy_t, fresh, sums);
            }
        }
}

void ct_cpu_conv2d_channels_weight_order(const ct_conv2d_shape *s, const float *sums,
                                         float *dw)
{
    int taps = s->in_channels * s->kernel_h * s->kernel_w, out_c = s->out_channels;
    for (int o = 0; o < out_c; o++)
        for (int t = 0; t < taps; t++)
            dw[(size_t)o * taps + t] = sums[(size_t)t * out_c + o];
}

#endif
