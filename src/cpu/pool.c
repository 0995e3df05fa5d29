/*
 * Pooling: max, average and global average.  Window bounds, divisors and the
 * max rule (NaN wins, the first maximum in row-major order wins a tie) follow
 * PyTorch's CPU kernels, so results agree with nn.MaxPool2d / nn.AvgPool2d.
 *
 * Every kernel runs one (n, c) plane per OpenMP iteration.  Outputs are
 * written with =; a backward pass zeroes its own dx plane first and then adds
 * each window's share into it in output order, so overlapping windows sum in
 * a fixed order whatever the thread count.
 *
 * The window arithmetic and the divisor are core/window_math.h's, the max
 * rule core/math_shared.h's, shared with the CUDA kernels.
 */
#include <math.h>
#include <string.h>

#include "core/math_shared.h"
#include "core/window_math.h"
#include "cpu/kernels.h"
#include "cpu/pool_avx2.h"
#include "cpu/threads.h"

/* Below this many input elements a parallel region costs more than it saves. */
#define PARALLEL_MIN_ELEMENTS 32768

static inline bool pool_parallel(int64_t planes, int64_t plane_elements)
{
    return planes * plane_elements >= PARALLEL_MIN_ELEMENTS;
}

static int64_t plane_count(const ct_pool2d_shape *s)
{
    return (int64_t)s->n_batch * s->channels;
}

/* The window's maximum and its index in the plane.  Like PyTorch, the search
 * starts from -inf at the window's first element, so an all -inf window
 * points there.  The window must not be empty. */
static int64_t window_argmax(const float *plane, int in_w, ct_pool_window win,
                             float *max_value)
{
    int64_t best = (int64_t)win.h0 * in_w + win.w0;
    float best_value = -INFINITY;
    for (int h = win.h0; h < win.h1; h++)
        for (int w = win.w0; w < win.w1; w++) {
            float v = plane[(int64_t)h * in_w + w];
            if (ct_max_replaces(v, best_value)) {
                best_value = v;
                best = (int64_t)h * in_w + w;
            }
        }
    *max_value = best_value;
    return best;
}

/* Whether a plane holds a NaN: an integer test on the bits that gcc
 * vectorizes (a float compare per element would not be). */
static bool plane_has_nan(const float *plane, int64_t n)
{
    uint32_t any = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &plane[i], sizeof bits);
        any |= (bits & 0x7fffffffu) > 0x7f800000u;
    }
    return any != 0;
}

/* The window's maximum in a plane without NaN: `v > best ? v : best` is
 * one maxss, no branch to mispredict (ResNet's 3x3/2 stem pool took 2.7 ms
 * with window_argmax's branches, docs/perf.md); -inf when empty. */
static float window_max(const float *plane, int in_w, ct_pool_window win)
{
    float best = -INFINITY;
    for (int h = win.h0; h < win.h1; h++) {
        const float *row = plane + (int64_t)h * in_w;
        for (int w = win.w0; w < win.w1; w++)
            best = row[w] > best ? row[w] : best;
    }
    return best;
}

enum { SEPARABLE_MAX_WIDTH = 4096 };

/* The windows' maxima of one plane without NaN (in_w <= SEPARABLE_MAX_WIDTH),
 * separably: for each output row, the maxima down its window's rows (whole
 * rows at once, which gcc vectorizes), then each output's maximum across
 * its window's columns.  window_max's values, in about a quarter of the
 * time for ResNet's 3x3/2 stem pool (docs/perf.md); where +0 and -0 tie,
 * the other zero may win. */
static void maxpool_separable_plane(const ct_pool2d_shape *s, const float *restrict x,
                                    float *restrict y)
{
    float columns[SEPARABLE_MAX_WIDTH];
    for (int oh = 0; oh < s->out_h; oh++) {
        ct_pool_window rows = ct_pool_window_at(s, oh, 0);
        float *out = y + (int64_t)oh * s->out_w;
        for (int w = 0; w < s->in_w; w++)
            columns[w] = -INFINITY;
        for (int h = rows.h0; h < rows.h1; h++) {
            const float *restrict row = x + (int64_t)h * s->in_w;
            for (int w = 0; w < s->in_w; w++)
                columns[w] = row[w] > columns[w] ? row[w] : columns[w];
        }
        for (int ow = 0; ow < s->out_w; ow++) {
            ct_pool_window win = ct_pool_window_at(s, oh, ow);
            float best = -INFINITY;
            for (int w = win.w0; w < win.w1; w++)
                best = columns[w] > best ? columns[w] : best;
            out[ow] = best;
        }
    }
}

/* y[oh,ow] = max(x[2oh,2ow], x[2oh,2ow+1], x[2oh+1,2ow], x[2oh+1,2ow+1]): the common
 * 2x2/2 unpadded case, one plane, no bounds checks so gcc vectorizes over ow.
 * The first element needs no comparison: max(-inf, a) is a for every a. */
static void maxpool_2x2_plane(int in_w, int out_h, int out_w, const float *restrict x,
                              float *restrict y)
{
    int first_ow = 0; /* columns before it are done by the vector kernel */
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx512() && ct_cpu_maxpool2x2_forward_avx512_fits(in_w, out_w))
        first_ow = ct_cpu_maxpool2x2_forward_avx512(in_w, out_h, out_w, x, y);
    else if (ct_cpu_simd_avx2())
        first_ow = ct_cpu_maxpool2x2_forward_avx2(in_w, out_h, out_w, x, y);
#endif
    for (int oh = 0; oh < out_h; oh++) {
        const float *restrict row0 = x + (int64_t)2 * oh * in_w;
        const float *restrict row1 = row0 + in_w;
        float *restrict out = y + (int64_t)oh * out_w;
        for (int ow = first_ow; ow < out_w; ow++) {
            float m = row0[2 * ow];
            m = ct_max_replaces(row0[2 * ow + 1], m) ? row0[2 * ow + 1] : m;
            m = ct_max_replaces(row1[2 * ow], m) ? row1[2 * ow] : m;
            m = ct_max_replaces(row1[2 * ow + 1], m) ? row1[2 * ow + 1] : m;
            out[ow] = m;
        }
    }
}

/* A 2x2/2 pool's backward: dx = 0 in the rows past the last window (the
 * plane loops zero the columns past it themselves). */
static void zero_rows_past_windows(int in_h, int in_w, int out_h, float *dx)
{
    memset(dx + (int64_t)2 * out_h * in_w, 0, sizeof(float) * (size_t)(in_h - 2 * out_h) * in_w);
}

static bool is_plain_2x2(const ct_pool2d_shape *s)
{
    return s->kernel_h == 2 && s->kernel_w == 2 && s->stride_h == 2 && s->stride_w == 2 &&
           s->pad_h == 0 && s->pad_w == 0 && 2 * s->out_h <= s->in_h && 2 * s->out_w <= s->in_w;
}

/* Planes a 2x2/2 loop takes at once: where no input row is left past the
 * last window (in_h = 2 out_h), consecutive planes' rows follow each other
 * as one taller plane's, so a group of them is one call of the plane
 * kernel (SimpleCNN's 8x8 planes were a call, a dispatch and a memset for
 * 16 windows each).  About STACK_WINDOWS windows a group; 1 otherwise. */
enum { STACK_WINDOWS = 1024 };

static int64_t stacked_planes(const ct_pool2d_shape *s)
{
    int64_t windows = (int64_t)s->out_h * s->out_w;
    if (!is_plain_2x2(s) || s->in_h != 2 * s->out_h || windows == 0 || windows >= STACK_WINDOWS)
        return 1;
    return STACK_WINDOWS / windows;
}

void ct_cpu_maxpool2x2_planes(int planes, int in_h, int in_w, const float *x, float *y)
{
    int out_h = in_h / 2, out_w = in_w / 2;
    if (in_h == 2 * out_h) { /* the planes' rows follow each other: one taller plane */
        maxpool_2x2_plane(in_w, planes * out_h, out_w, x, y);
        return;
    }
    for (int p = 0; p < planes; p++)
        maxpool_2x2_plane(in_w, out_h, out_w, x + (int64_t)p * in_h * in_w,
                          y + (int64_t)p * out_h * out_w);
}

/* maxpool_2x2_plane with each window's code (kernels.h): x not restrict,
 * codes may be its bytes, so a row is finished (the vector kernel's
 * columns, then the rest) before the next one's codes are written. */
static void maxpool_2x2_codes_plane(int in_w, int out_h, int out_w, const float *x, float *y,
                                    uint8_t *codes)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    /* every column on the vector kernel (which goes row by row): one call */
    if (ct_cpu_simd_avx512() && out_w >= CT_POOL_AVX512_MIN_WINDOWS) {
        ct_cpu_maxpool2x2_codes_avx512(in_w, out_h, out_w, x, y, codes);
        return;
    }
#endif
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (int64_t)2 * oh * in_w, *row1 = row0 + in_w;
        int first_ow = 0; /* columns before it are done by the vector kernel */
#ifdef CT_CPU_HAVE_AVX2_KERNELS
        if (ct_cpu_simd_avx2())
            first_ow = ct_cpu_maxpool2x2_codes_avx2(in_w, 1, out_w, row0, y + (int64_t)oh * out_w,
                                                    codes + (int64_t)oh * out_w);
#endif
        for (int ow = first_ow; ow < out_w; ow++) {
            float m = row0[2 * ow];
            int code = 0;
            bool take = ct_max_replaces(row0[2 * ow + 1], m);
            m = take ? row0[2 * ow + 1] : m;
            code = take ? CT_POOL_CODE_RIGHT : code;
            take = ct_max_replaces(row1[2 * ow], m);
            m = take ? row1[2 * ow] : m;
            code = take ? CT_POOL_CODE_DOWN : code;
            take = ct_max_replaces(row1[2 * ow + 1], m);
            m = take ? row1[2 * ow + 1] : m;
            code = take ? CT_POOL_CODE_DOWN | CT_POOL_CODE_RIGHT : code;
            y[(int64_t)oh * out_w + ow] = m;
            codes[(int64_t)oh * out_w + ow] = (uint8_t)(code | (m <= 0.0f ? 0 : CT_POOL_CODE_PASS));
        }
    }
}

void ct_cpu_maxpool2x2_planes_codes(int planes, int in_h, int in_w, const float *x, float *y,
                                    uint8_t *codes)
{
    int out_h = in_h / 2, out_w = in_w / 2;
    int64_t windows = (int64_t)out_h * out_w;
    if (in_h == 2 * out_h) { /* the planes' rows follow each other: one taller plane */
        maxpool_2x2_codes_plane(in_w, planes * out_h, out_w, x, y, codes);
        return;
    }
    for (int p = 0; p < planes; p++)
        maxpool_2x2_codes_plane(in_w, out_h, out_w, x + (int64_t)p * in_h * in_w, y + p * windows,
                                codes + p * windows);
}

/* y[n,c,oh,ow] = max_{i,j} x[n,c, oh*sh-ph+i, ow*sw-pw+j];  x: [N,C,H,W], y: [N,C,OH,OW] */
void ct_cpu_maxpool2d_forward(const ct_pool2d_shape *s, const float *x, float *y)
{
    int64_t in_plane = (int64_t)s->in_h * s->in_w, out_plane = (int64_t)s->out_h * s->out_w;
    int64_t planes = plane_count(s);
    bool plain_2x2 = is_plain_2x2(s);
    int64_t stack = stacked_planes(s);
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, in_plane)) schedule(static)
    for (int64_t p = 0; p < planes; p += stack) {
        const float *xp = x + p * in_plane;
        float *yp = y + p * out_plane;
        if (plain_2x2) {
            int64_t count = planes - p < stack ? planes - p : stack;
            maxpool_2x2_plane(s->in_w, (int)(s->out_h * count), s->out_w, xp, yp);
            continue;
        }
        bool nan = plane_has_nan(xp, in_plane);
        if (!nan && s->in_w <= SEPARABLE_MAX_WIDTH) {
            maxpool_separable_plane(s, xp, yp);
            continue;
        }
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                ct_pool_window win = ct_pool_window_at(s, oh, ow);
                float m = -INFINITY;
                if (!nan)
                    m = window_max(xp, s->in_w, win);
                else if (!ct_pool_window_empty(win)) /* NaN wins: the exact rule */
                    window_argmax(xp, s->in_w, win, &m);
                yp[(int64_t)oh * s->out_w + ow] = m;
            }
    }
}

/* The same on u8 values (an int8 model's activations between layers,
 * quant/model.c): max commutes with the monotone quantization, so this is
 * the f32 pool's result quantized.  An empty window gives 0. */
void ct_cpu_maxpool2d_forward_u8(const ct_pool2d_shape *s, const uint8_t *x, uint8_t *y)
{
    int64_t in_plane = (int64_t)s->in_h * s->in_w, out_plane = (int64_t)s->out_h * s->out_w;
    int64_t planes = plane_count(s);
    bool plain_2x2 = is_plain_2x2(s);
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, in_plane / 4)) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const uint8_t *xp = x + p * in_plane;
        uint8_t *yp = y + p * out_plane;
        if (plain_2x2) {
            for (int oh = 0; oh < s->out_h; oh++) {
                const uint8_t *restrict row0 = xp + (int64_t)2 * oh * s->in_w;
                const uint8_t *restrict row1 = row0 + s->in_w;
                uint8_t *restrict out = yp + (int64_t)oh * s->out_w;
                for (int ow = 0; ow < s->out_w; ow++) {
                    uint8_t top = row0[2 * ow] > row0[2 * ow + 1] ? row0[2 * ow] : row0[2 * ow + 1];
                    uint8_t bottom =
                        row1[2 * ow] > row1[2 * ow + 1] ? row1[2 * ow] : row1[2 * ow + 1];
                    out[ow] = top > bottom ? top : bottom;
                }
            }
            continue;
        }
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                ct_pool_window win = ct_pool_window_at(s, oh, ow);
                uint8_t m = 0;
                for (int h = win.h0; h < win.h1; h++)
                    for (int w = win.w0; w < win.w1; w++)
                        m = xp[(int64_t)h * s->in_w + w] > m ? xp[(int64_t)h * s->in_w + w] : m;
                yp[(int64_t)oh * s->out_w + ow] = m;
            }
    }
}

/* The 2x2/2 unpadded backward of one plane: each input belongs to at most
 * one window, so every dx element is written once, without a memset and
 * without branches (the argmax of random data mispredicts half the time):
 * dx[2oh+a, 2ow+b] = (a,b) == argmax ? dy[oh,ow] : 0;  inputs past the last
 * window (odd sizes) get 0.  relu: dy[oh,ow] is replaced by
 * ct_relu_grad(window max, dy[oh,ow]) (see ct_cpu_maxpool2d_backward). */
static void maxpool_2x2_backward_plane(int in_h, int in_w, int out_h, int out_w,
                                       const float *restrict x, const float *restrict dy,
                                       bool relu, float *restrict dx)
{
    int first_ow = 0; /* columns before it are done by the vector kernel */
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (ct_cpu_simd_avx512() && out_w >= CT_POOL_AVX512_MIN_WINDOWS)
        first_ow = ct_cpu_maxpool2x2_backward_avx512(in_w, out_h, out_w, x, dy, relu, dx);
    else if (ct_cpu_simd_avx2())
        first_ow = ct_cpu_maxpool2x2_backward_avx2(in_w, out_h, out_w, x, dy, relu, dx);
#endif
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (int64_t)2 * oh * in_w, *row1 = row0 + in_w;
        float *dx0 = dx + (int64_t)2 * oh * in_w, *dx1 = dx0 + in_w;
        const float *grad = dy + (int64_t)oh * out_w;
        for (int ow = first_ow; ow < out_w; ow++) {
            float m = row0[2 * ow];
            int best = 0;
            bool take = ct_max_replaces(row0[2 * ow + 1], m);
            m = take ? row0[2 * ow + 1] : m;
            best = take ? 1 : best;
            take = ct_max_replaces(row1[2 * ow], m);
            m = take ? row1[2 * ow] : m;
            best = take ? 2 : best;
            take = ct_max_replaces(row1[2 * ow + 1], m);
            m = take ? row1[2 * ow + 1] : m;
            best = take ? 3 : best;
            float g = relu ? ct_relu_grad(m, grad[ow]) : grad[ow];
            dx0[2 * ow] = best == 0 ? g : 0.0f;
            dx0[2 * ow + 1] = best == 1 ? g : 0.0f;
            dx1[2 * ow] = best == 2 ? g : 0.0f;
            dx1[2 * ow + 1] = best == 3 ? g : 0.0f;
        }
        for (int w = 2 * out_w; w < in_w; w++)
            dx0[w] = dx1[w] = 0.0f;
    }
    zero_rows_past_windows(in_h, in_w, out_h, dx);
}

typedef struct max_backward_job {
    const ct_pool2d_shape *s;
    const float *x, *dy;
    bool relu;
    float *dx;
} max_backward_job;

/* One thread's planes of ct_cpu_maxpool2d_backward (below). */
static void max_backward_part(void *arg)
{
    const max_backward_job *j = arg;
    const ct_pool2d_shape *s = j->s;
    int64_t in_plane = (int64_t)s->in_h * s->in_w, out_plane = (int64_t)s->out_h * s->out_w;
    int64_t planes = plane_count(s), stack = stacked_planes(s);
    bool plain_2x2 = is_plain_2x2(s), relu = j->relu;
    int64_t first, last; /* in stacks of planes */
    ct_cpu_split((planes + stack - 1) / stack, &first, &last);
    for (int64_t p = first * stack; p < last * stack && p < planes; p += stack) {
        const float *xp = j->x + p * in_plane, *dyp = j->dy + p * out_plane;
        float *dxp = j->dx + p * in_plane;
        if (plain_2x2) {
            int count = (int)(planes - p < stack ? planes - p : stack);
            maxpool_2x2_backward_plane(s->in_h * count, s->in_w, s->out_h * count, s->out_w,
                                       xp, dyp, relu, dxp);
            continue;
        }
        memset(dxp, 0, (size_t)in_plane * sizeof(float));
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                ct_pool_window win = ct_pool_window_at(s, oh, ow);
                if (ct_pool_window_empty(win))
                    continue;
                float max, g = dyp[(int64_t)oh * s->out_w + ow];
                int64_t at = window_argmax(xp, s->in_w, win, &max);
                dxp[at] += relu ? ct_relu_grad(max, g) : g;
            }
    }
}

/* dx[n,c,argmax window(oh,ow)] += dy[n,c,oh,ow], dx = 0 elsewhere;  dx: [N,C,H,W].
 * relu: x is a relu's output (conv -> relu -> pool) and dx is that relu's
 * input gradient, its backward done here (graph/fuse.c): each window's
 * dy adds ct_relu_grad(window max, dy), 0 where the max is <= 0. */
void ct_cpu_maxpool2d_backward(const ct_pool2d_shape *s, const float *x, const float *dy,
                               bool relu, float *dx)
{
    int64_t in_plane = (int64_t)s->in_h * s->in_w;
    max_backward_job job = {s, x, dy, relu, dx};
    ct_cpu_parallel(pool_parallel(plane_count(s), in_plane) ? ct_cpu_max_threads() : 1,
                    max_backward_part, &job);
}

/* The unpadded 2x2/2 average (LeNet-5's): the general loop's sums in the
 * same order, so the same bits, without its window bookkeeping. */
static void avgpool_2x2_forward_plane(int in_w, int out_h, int out_w, const float *x, float *y)
{
    for (int oh = 0; oh < out_h; oh++) {
        const float *row0 = x + (int64_t)2 * oh * in_w, *row1 = row0 + in_w;
        float *out = y + (int64_t)oh * out_w;
        for (int ow = 0; ow < out_w; ow++) {
            double sum = (double)row0[2 * ow] + row0[2 * ow + 1] + row1[2 * ow] + row1[2 * ow + 1];
            out[ow] = (float)(sum / 4);
        }
    }
}

/* Every input of a window gets dy/4; rows and columns no window covers, 0. */
static void avgpool_2x2_backward_plane(int in_h, int in_w, int out_h, int out_w,
                                       const float *dy, float *dx)
{
    for (int oh = 0; oh < out_h; oh++) {
        float *dx0 = dx + (int64_t)2 * oh * in_w, *dx1 = dx0 + in_w;
        const float *grad = dy + (int64_t)oh * out_w;
        for (int ow = 0; ow < out_w; ow++) {
            float share = grad[ow] / 4.0f;
            dx0[2 * ow] = dx0[2 * ow + 1] = dx1[2 * ow] = dx1[2 * ow + 1] = share;
        }
        for (int w = 2 * out_w; w < in_w; w++)
            dx0[w] = dx1[w] = 0.0f;
    }
    zero_rows_past_windows(in_h, in_w, out_h, dx);
}

/* y[n,c,oh,ow] = sum_{window} x[n,c,h,w] / divisor(oh,ow);  an empty window gives 0 */
void ct_cpu_avgpool2d_forward(const ct_pool2d_shape *s, const float *x, float *y)
{
    int64_t in_plane = (int64_t)s->in_h * s->in_w, out_plane = (int64_t)s->out_h * s->out_w;
    int64_t planes = plane_count(s);
    bool plain_2x2 = is_plain_2x2(s);
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, in_plane)) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * in_plane;
        float *yp = y + p * out_plane;
        if (plain_2x2) {
            avgpool_2x2_forward_plane(s->in_w, s->out_h, s->out_w, xp, yp);
            continue;
        }
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                ct_pool_window win = ct_pool_window_at(s, oh, ow);
                double sum = 0;
                for (int h = win.h0; h < win.h1; h++)
                    for (int w = win.w0; w < win.w1; w++)
                        sum += xp[(int64_t)h * s->in_w + w];
                yp[(int64_t)oh * s->out_w + ow] =
                    ct_pool_window_empty(win)
                        ? 0.0f
                        : (float)(sum / ct_pool_avg_divisor(s, oh, ow, win));
            }
    }
}

/* dx[n,c,h,w] = sum_{windows (oh,ow) holding (h,w)} dy[n,c,oh,ow] / divisor(oh,ow) */
void ct_cpu_avgpool2d_backward(const ct_pool2d_shape *s, const float *dy, float *dx)
{
    int64_t in_plane = (int64_t)s->in_h * s->in_w, out_plane = (int64_t)s->out_h * s->out_w;
    int64_t planes = plane_count(s);
    bool plain_2x2 = is_plain_2x2(s);
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, in_plane)) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *dyp = dy + p * out_plane;
        float *dxp = dx + p * in_plane;
        if (plain_2x2) {
            avgpool_2x2_backward_plane(s->in_h, s->in_w, s->out_h, s->out_w, dyp, dxp);
            continue;
        }
        memset(dxp, 0, (size_t)in_plane * sizeof(float));
        for (int oh = 0; oh < s->out_h; oh++)
            for (int ow = 0; ow < s->out_w; ow++) {
                ct_pool_window win = ct_pool_window_at(s, oh, ow);
                if (ct_pool_window_empty(win))
                    continue;
                float divisor = (float)ct_pool_avg_divisor(s, oh, ow, win);
                float share = dyp[(int64_t)oh * s->out_w + ow] / divisor;
                for (int h = win.h0; h < win.h1; h++)
                    for (int w = win.w0; w < win.w1; w++)
                        dxp[(int64_t)h * s->in_w + w] += share;
            }
    }
}

/* y[n,c] = sum_i x[n,c,i] / inner;  x: [n, c, inner], y: [n, c] */
void ct_cpu_global_avgpool_forward(int n, int c, int inner, const float *x, float *y)
{
    int64_t planes = (int64_t)n * c;
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, inner)) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        const float *xp = x + p * inner;
        double sum = 0;
        for (int i = 0; i < inner; i++)
            sum += xp[i];
        y[p] = (float)(sum / inner);
    }
}

/* dx[n,c,i] = dy[n,c] / inner (masked by relu_y where given: kernels.h);
 * dy: [n, c], dx and relu_y: [n, c, inner] */
void ct_cpu_global_avgpool_backward(int n, int c, int inner, const float *dy,
                                    const float *relu_y, float *dx)
{
    int64_t planes = (int64_t)n * c;
    ct_cpu_openmp_region();
#pragma omp parallel for if (pool_parallel(planes, inner)) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        float share = dy[p] / (float)inner;
        float *restrict dxp = dx + p * inner;
        if (relu_y)
            for (int i = 0; i < inner; i++)
                dxp[i] = ct_relu_grad(relu_y[p * inner + i], share);
        else
            for (int i = 0; i < inner; i++)
                dxp[i] = share;
    }
}
