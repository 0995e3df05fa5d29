/*
 * Times the CPU's convolution paths on one shape: one JSON line per path
 * and kernel (forward, backward data, backward weight, forward with relu
 * and 2x2 max pool), for each path that fits the shape: "direct" and
 * "winograd" (AVX2; not with CT_CPU_SIMD=0), "im2col" (any shape),
 * "panel" (AVX-512; forward with bias only) and "winograd_kept" (the forward
 * on weights transformed once, as inference keeps them), so they stay
 * comparable (docs/perf.md).  --forward times the forward kernel alone;
 * --flush MB reads MB megabytes between runs (untimed), so that weights
 * and workspace come from memory, as in a whole network.  --path NAME and
 * --only KERNEL (forward, backward_data, backward_weight,
 * forward_relu_maxpool) time one path or kernel, for a profiler.
 *   conv_kernels [--batch N] [--in C] [--out O] [--size S] [--kernel K]
 *                [--pad P] [--stride T] [--reps R] [--threads T] [--forward]
 *                [--flush MB] [--path NAME] [--only KERNEL]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/conv_direct.h"
#include "cpu/conv_winograd.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"
#include "cpu/threads.h"
#include "timing.h"

static float *random_floats(size_t count, unsigned seed)
{
    float *p = malloc(sizeof(float) * (count ? count : 1));
    for (size_t i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
    return p;
}

enum { N_PATHS = 5, PATH_PANEL = 3, PATH_WINOGRAD_KEPT = 4 };
static const char *const PATHS[N_PATHS] = {"direct", "winograd", "im2col", "panel",
                                           "winograd_kept"};

/* direct (0) and Winograd (1, 4) need AVX2 and their shapes, panel (3)
 * AVX-512 and its; im2col (2) runs any. */
static int path_fits(int path, const ct_conv2d_shape *s)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (path == 2)
        return 1;
    if (path == PATH_PANEL)
        return ct_cpu_simd_avx512() && ct_cpu_conv2d_panel_fits(s);
    if (!ct_cpu_simd_avx2())
        return 0;
    return path == 0 ? ct_cpu_conv2d_direct_fits(s) : ct_cpu_conv2d_winograd_fits(s);
#else
    (void)path;
    (void)s;
    return 0;
#endif
}

/* Kernel k (forward, backward data, backward weight, relu+maxpool) of a
 * path; u: the kept Winograd weights (path 4).  The direct backward weight
 * computes the bias gradient too, as in training (graph/fuse.c). */
static void run_kernel(int path, int k, const ct_conv2d_shape *s, const float *x, const float *w,
                       const float *u, const float *bias, const float *dy, float *y, float *dx,
                       float *dw, float *db, float *pooled, void *workspace)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (path == PATH_PANEL) {
        ct_cpu_conv2d_panel_forward(s, x, w, bias, false, y, workspace);
        return;
    }
    if (path == PATH_WINOGRAD_KEPT) {
        ct_cpu_conv2d_winograd_forward_transformed(s, x, u, bias, false, y, workspace);
        return;
    }
    if (path == 0) {
        if (k == 0) ct_cpu_conv2d_direct_forward(s, x, w, bias, false, y, workspace);
        else if (k == 1) ct_cpu_conv2d_direct_backward_data(s, dy, w, dx, workspace);
        else if (k == 2) ct_cpu_conv2d_direct_backward_weight(s, x, dy, dw, db, workspace);
        else ct_cpu_conv2d_direct_forward_relu_maxpool(s, x, w, bias, NULL, false, pooled, workspace);
        return;
    }
    if (path == 1 && k < 3) {
        if (k == 0) ct_cpu_conv2d_winograd_forward(s, x, w, bias, false, y, workspace);
        else if (k == 1) ct_cpu_conv2d_winograd_backward_data(s, dy, w, dx, workspace);
        else ct_cpu_conv2d_winograd_backward_weight(s, x, dy, dw, workspace);
        return;
    }
    if (path == 1) { /* Winograd's fused pool is its relu forward, then the pool */
        ct_pool2d_shape pool = {s->n_batch, s->out_channels, s->out_h, s->out_w, s->out_h / 2,
                                s->out_w / 2, 2, 2, 2, 2, 0, 0, false};
        ct_cpu_conv2d_winograd_forward(s, x, w, bias, true, y, workspace);
        ct_cpu_maxpool2d_forward(&pool, y, pooled);
        return;
    }
#endif
    (void)path;
    (void)u;
    if (k == 0) ct_cpu_conv2d_forward(s, x, w, bias, y, workspace);
    else if (k == 1) ct_cpu_conv2d_backward_data(s, dy, w, dx, workspace);
    else if (k == 2) ct_cpu_conv2d_backward_weight(s, x, dy, dw, workspace);
    else ct_cpu_conv2d_forward_relu_maxpool(s, x, w, bias, y, pooled, workspace);
}

int main(int argc, char **argv)
{
    int batch = 64, in_c = 6, out_c = 16, size = 12, kernel = 5, pad = 0, stride = 1;
    int reps = 200, threads = 0, kernels = 4, flush_mb = 0;
    const char *only_path = NULL, *only_kernel = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--forward") == 0) {
            kernels = 1;
            i--;
            continue;
        }
        if (i + 1 == argc) { fprintf(stderr, "conv_kernels: %s needs a value\n", argv[i]); return 2; }
        if (strcmp(argv[i], "--path") == 0) { only_path = argv[i + 1]; continue; }
        if (strcmp(argv[i], "--only") == 0) { only_kernel = argv[i + 1]; continue; }
        int value = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--batch") == 0) batch = value;
        else if (strcmp(argv[i], "--in") == 0) in_c = value;
        else if (strcmp(argv[i], "--out") == 0) out_c = value;
        else if (strcmp(argv[i], "--size") == 0) size = value;
        else if (strcmp(argv[i], "--kernel") == 0) kernel = value;
        else if (strcmp(argv[i], "--pad") == 0) pad = value;
        else if (strcmp(argv[i], "--stride") == 0) stride = value;
        else if (strcmp(argv[i], "--reps") == 0) reps = value;
        else if (strcmp(argv[i], "--threads") == 0) threads = value;
        else if (strcmp(argv[i], "--flush") == 0) flush_mb = value;
        else { fprintf(stderr, "conv_kernels: unknown option %s\n", argv[i]); return 2; }
    }
    int out_size = (size + 2 * pad - kernel) / stride + 1;
    if (batch < 1 || reps < 1 || out_size < 1 || flush_mb < 0) {
        fprintf(stderr, "conv_kernels: bad sizes\n");
        return 2;
    }
    if (threads > 0)
        ct_cpu_set_threads(threads);
    ct_conv2d_shape s = {batch, in_c, size, size, out_c, out_size, out_size, kernel, kernel,
                         stride, stride, pad, pad, 1, 1, 1};
    size_t nx = (size_t)batch * in_c * size * size, ny = (size_t)batch * out_c * out_size * out_size;
    size_t nw = (size_t)out_c * in_c * kernel * kernel;
    float *x = random_floats(nx, 1), *w = random_floats(nw, 2), *bias = random_floats(out_c, 3);
    float *dy = random_floats(ny, 4), *y = random_floats(ny, 5), *dx = random_floats(nx, 6);
    float *dw = random_floats(nw, 7), *db = random_floats(out_c, 9);
    float *pooled = random_floats(ny / 4 + 1, 8);
    size_t bytes = ct_cpu_conv2d_workspace(&s, ct_cpu_max_threads());
    size_t panel_bytes = ct_cpu_conv2d_panel_workspace(&s, ct_cpu_max_threads());
    void *workspace = malloc((bytes > panel_bytes ? bytes : panel_bytes) + 64);
    double *times = malloc(sizeof(double) * (size_t)reps);
    float *u = NULL;
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (path_fits(1, &s)) {
        u = malloc(ct_cpu_conv2d_winograd_weights_bytes(&s));
        ct_cpu_conv2d_winograd_transform_weights(&s, w, u);
    }
#endif
    size_t flush_bytes = (size_t)flush_mb << 20;
    /* written, so that its pages are its own (calloc's untouched pages are
     * all one zero page, which evicts nothing) */
    volatile unsigned char *flush = flush_bytes ? malloc(flush_bytes) : NULL;
    if (flush)
        memset((void *)flush, 1, flush_bytes);
    double flop = 2.0 * ny * in_c * kernel * kernel;
    const char *names[4] = {"forward", "backward_data", "backward_weight",
                            "forward_relu_maxpool"};
    for (int path = 0; path < N_PATHS; path++) {
        if (!path_fits(path == PATH_WINOGRAD_KEPT ? 1 : path, &s))
            continue;
        if (only_path && strcmp(only_path, PATHS[path]) != 0)
            continue;
        for (int k = 0; k < (path >= PATH_PANEL ? 1 : kernels); k++) {
            if (only_kernel && strcmp(only_kernel, names[k]) != 0)
                continue;
            for (int rep = -reps / 10 - 1; rep < reps; rep++) {
                for (size_t b = 0; b < flush_bytes; b += 64)
                    (void)flush[b]; /* a volatile read: it happens */
                double start = now_seconds();
                run_kernel(path, k, &s, x, w, u, bias, dy, y, dx, dw, db, pooled, workspace);
                if (rep >= 0)
                    times[rep] = now_seconds() - start;
            }
            qsort(times, (size_t)reps, sizeof *times, compare_doubles);
            double median = times[reps / 2];
            printf("{\"kernel\": \"conv2d_%s\", \"path\": \"%s\", \"shape\": \"%dx%dx%dx%d -> "
                   "%d k%d p%d s%d\", \"threads\": %d, \"median_us\": %.1f, \"gflops\": %.1f}\n",
                   names[k], PATHS[path], batch, in_c, size, size, out_c, kernel, pad, stride,
                   ct_cpu_max_threads(), 1e6 * median, flop / median * 1e-9);
        }
    }
    free(x); free(w); free(bias); free(dy); free(y); free(dx); free(dw); free(db); free(pooled);
    free(workspace);
    free(times);
    free(u);
    free((void *)flush);
    return 0;
}
