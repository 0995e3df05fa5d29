/*
 * Times the INT8 convolution (ct_int8_conv2d_forward, uint8 output with
 * relu: what feeds the next quantized layer) on each path this CPU runs,
 * over the whole batch and one image at a time (the difference is the
 * images that share a GEMM on small planes), against the fp32 im2col
 * convolution (ct_cpu_conv2d_forward: OpenBLAS where built with it).  One
 * JSON line per variant: the median of --reps, the variants taking turns in
 * every repetition.  GOP/s counts 2 * N * O * C*KH*KW * out_h*out_w.
 *   int8_conv [--batch N] [--in C] [--out O] [--size S] [--kernel K] [--pad P]
 *             [--stride T] [--reps R] [--threads T]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "quant/int8.h"
#include "timing.h"

enum { VARIANTS = 2 * CT_INT8_KERNEL_COUNT + 1 };

int main(int argc, char **argv)
{
    int batch = 8, in_c = 512, out_c = 512, size = 7, kernel = 3, pad = 1, stride = 1;
    int reps = 15, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
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
        else { fprintf(stderr, "int8_conv: unknown option %s\n", argv[i]); return 2; }
    }
    int out_size = (size + 2 * pad - kernel) / stride + 1, depth = in_c * kernel * kernel;
    if (batch < 1 || reps < 1 || out_size < 1 || depth > CT_INT8_MAX_DEPTH) {
        fprintf(stderr, "int8_conv: bad sizes\n");
        return 2;
    }
    if (threads > 0)
        ct_cpu_set_threads(threads);
    threads = ct_cpu_max_threads();
    ct_conv2d_shape s = {batch, in_c, size, size, out_c, out_size, out_size, kernel, kernel,
                         stride, stride, pad, pad, 1, 1, 1};
    ct_conv2d_shape one = s;
    one.n_batch = 1;
    size_t nx = (size_t)batch * in_c * size * size;
    size_t ny = (size_t)batch * out_c * out_size * out_size;
    size_t nw = (size_t)out_c * depth;
    float *xf = malloc(sizeof(float) * nx), *wf = malloc(sizeof(float) * nw);
    float *yf = malloc(sizeof(float) * ny), *scales = malloc(sizeof(float) * out_c);
    uint8_t *x = malloc(nx), *y = malloc(ny);
    int8_t *q = malloc(nw);
    unsigned seed = 1;
    for (size_t i = 0; i < nx; i++, seed = seed * 1664525u + 1013904223u)
        xf[i] = (float)(seed >> 8) / 16777216.0f;
    for (size_t i = 0; i < nw; i++, seed = seed * 1664525u + 1013904223u)
        wf[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    ct_quant_act x_q, y_q = {0.05f, 0};
    if (ct_quant_act_from_range(0.0f, 1.0f, &x_q) != CT_OK ||
        ct_int8_weights_quantize(out_c, depth, wf, q, scales) != CT_OK) {
        fprintf(stderr, "int8_conv: %s\n", ct_last_error());
        return 1;
    }
    ct_int8_quantize((int64_t)nx, xf, x_q, x);
    ct_int8_epilogue e = {NULL, true, true, y_q};

    ct_int8_weights *weights[CT_INT8_KERNEL_COUNT] = {NULL};
    size_t workspace_bytes = ct_cpu_conv2d_im2col_workspace(&s) + 1;
    for (int k = 0; k < CT_INT8_KERNEL_COUNT; k++) {
        if (!ct_int8_kernel_supported(k) || ct_int8_kernel_set(k) != CT_OK ||
            ct_int8_weights_pack(out_c, depth, q, scales, &weights[k]) != CT_OK)
            continue;
        size_t bytes = ct_int8_conv2d_workspace(&s, weights[k], threads);
        workspace_bytes = bytes > workspace_bytes ? bytes : workspace_bytes;
    }
    ct_int8_kernel_set(CT_INT8_AUTO);
    void *workspace = malloc(workspace_bytes);
    double *times = malloc(sizeof(double) * VARIANTS * reps);
    size_t x_image = nx / batch, y_image = ny / batch;
    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms up */
        for (int v = 0; v < VARIANTS; v++) {
            ct_int8_weights *w = v < 2 * CT_INT8_KERNEL_COUNT ? weights[v / 2] : NULL;
            if (v < 2 * CT_INT8_KERNEL_COUNT && !w)
                continue;
            double start = now_seconds();
            if (!w)
                ct_cpu_conv2d_forward(&s, xf, wf, NULL, yf, workspace);
            else if (v % 2 == 0)
                ct_int8_conv2d_forward(&s, x, x_q, w, &e, y, workspace, threads);
            else
                for (int n = 0; n < batch; n++)
                    ct_int8_conv2d_forward(&one, x + n * x_image, x_q, w, &e, y + n * y_image,
                                           workspace, threads);
            if (rep >= 0)
                times[v * reps + rep] = now_seconds() - start;
        }
    }
    double ops = 2.0 * ny * depth;
    for (int v = 0; v < VARIANTS; v++) {
        bool int8 = v < 2 * CT_INT8_KERNEL_COUNT;
        if (int8 && !weights[v / 2])
            continue;
        qsort(times + v * reps, (size_t)reps, sizeof(double), compare_doubles);
        double median = times[v * reps + reps / 2];
        printf("{\"kernel\": \"conv2d\", \"path\": \"%s%s\", \"batching\": \"%s\", \"shape\": "
               "\"%dx%dx%dx%d -> %d k%d p%d s%d\", \"threads\": %d, \"median_us\": %.1f, "
               "\"gops\": %.1f}\n",
               int8 ? "int8 " : "fp32 im2col+",
               int8 ? ct_int8_kernel_name(v / 2) : ct_cpu_gemm_name(),
               !int8 || v % 2 == 0 ? "batch" : "per image", batch, in_c, size, size, out_c,
               kernel, pad, stride, ct_cpu_max_threads(), 1e6 * median, ops / median * 1e-9);
    }
    for (int k = 0; k < CT_INT8_KERNEL_COUNT; k++)
        ct_int8_weights_free(weights[k]);
    free(xf); free(wf); free(yf); free(scales); free(x); free(y); free(q);
    free(workspace); free(times);
    return 0;
}
