/*
 * Times the INT8 GEMM on each path this CPU runs (ref, avx2, vnni; float
 * and uint8 output) against the float GEMM (ct_cpu_gemm: OpenBLAS where
 * built with it, and the built-in one) on one conv-like shape
 *   out[M, N] = W[M, K] . B[K, N]     (M channels, K = C*KH*KW, N pixels)
 * One JSON line per path: the median of --reps runs, the paths taking turns
 * in every repetition (A B C A B C ...).  GOP/s counts 2*M*N*K.  An int8
 * run includes packing B and the epilogue (scale, bias); the weights are
 * packed once, before timing (docs/quantization.md).
 *   int8_gemm [--m M] [--n N] [--k K] [--reps R] [--threads T]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "quant/int8.h"
#include "timing.h"

enum { PATHS = 8 };

typedef struct bench_path {
    const char *name, *out;
    ct_int8_weights *w; /* NULL: float */
    bool out_u8, native;
    double *times;
} bench_path;

int main(int argc, char **argv)
{
    int m = 64, n = 3136, k = 576, reps = 9, threads = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        int value = atoi(argv[i + 1]);
        if (strcmp(argv[i], "--m") == 0) m = value;
        else if (strcmp(argv[i], "--n") == 0) n = value;
        else if (strcmp(argv[i], "--k") == 0) k = value;
        else if (strcmp(argv[i], "--reps") == 0) reps = value;
        else if (strcmp(argv[i], "--threads") == 0) threads = value;
        else { fprintf(stderr, "int8_gemm: unknown option %s\n", argv[i]); return 2; }
    }
    if (m < 1 || n < 1 || k < 1 || k > CT_INT8_MAX_DEPTH || reps < 1) {
        fprintf(stderr, "int8_gemm: bad sizes\n");
        return 2;
    }
    if (threads > 0)
        ct_cpu_set_threads(threads);
    float *wf = malloc(sizeof(float) * m * k), *bf = malloc(sizeof(float) * k * n);
    float *yf = malloc(sizeof(float) * m * n), *scales = malloc(sizeof(float) * m);
    float *bias = malloc(sizeof(float) * m);
    int8_t *wq = malloc((size_t)m * k);
    uint8_t *bq = malloc((size_t)k * n);
    unsigned seed = 1;
    for (size_t i = 0; i < (size_t)m * k; i++, seed = seed * 1664525u + 1013904223u)
        wf[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < (size_t)k * n; i++, seed = seed * 1664525u + 1013904223u)
        bf[i] = (float)(seed >> 8) / 16777216.0f;
    for (int i = 0; i < m; i++)
        bias[i] = 0.01f * (float)i;
    ct_quant_act b_q, out_q = {0.05f, 0};
    if (ct_quant_act_from_range(0.0f, 1.0f, &b_q) != CT_OK ||
        ct_int8_weights_quantize(m, k, wf, wq, scales) != CT_OK) {
        fprintf(stderr, "int8_gemm: %s\n", ct_last_error());
        return 1;
    }
    ct_int8_quantize((int64_t)k * n, bf, b_q, bq);

    bench_path paths[PATHS];
    int n_paths = 0;
    size_t workspace_bytes = 1;
    for (int kernel = 0; kernel < CT_INT8_KERNEL_COUNT; kernel++) {
        if (!ct_int8_kernel_supported(kernel))
            continue;
        ct_int8_weights *w;
        if (ct_int8_kernel_set(kernel) != CT_OK ||
            ct_int8_weights_pack(m, k, wq, scales, &w) != CT_OK) {
            fprintf(stderr, "int8_gemm: %s\n", ct_last_error());
            return 1;
        }
        size_t bytes = ct_int8_gemm_workspace(w, n);
        workspace_bytes = bytes > workspace_bytes ? bytes : workspace_bytes;
        for (int u8 = 0; u8 < 2; u8++)
            paths[n_paths++] = (bench_path){ct_int8_kernel_name(kernel), u8 ? "u8" : "float",
                                            w, u8, false, NULL};
    }
    paths[n_paths++] = (bench_path){ct_cpu_gemm_name(), "float", NULL, false, false, NULL};
    paths[n_paths++] = (bench_path){"native", "float", NULL, false, true, NULL};
    void *workspace = malloc(workspace_bytes);
    void *out = malloc(sizeof(float) * m * n);
    for (int p = 0; p < n_paths; p++)
        paths[p].times = malloc(sizeof(double) * reps);

    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms up */
        for (int p = 0; p < n_paths; p++) {
            bench_path *path = &paths[p];
            double start = now_seconds();
            if (path->w) {
                ct_int8_epilogue e = {bias, false, path->out_u8, out_q};
                ct_int8_gemm(path->w, n, (ct_int8_matrix){bq, n, 1}, b_q, &e,
                             (ct_int8_matrix){out, n, 1}, workspace);
            } else if (path->native) {
                ct_cpu_gemm_native(false, false, m, n, k, 1.0f, wf, k, bf, n, 0.0f, yf, n);
            } else {
                ct_cpu_gemm(false, false, m, n, k, 1.0f, wf, k, bf, n, 0.0f, yf, n);
            }
            if (rep >= 0)
                path->times[rep] = now_seconds() - start;
        }
    }
    double ops = 2.0 * m * n * k;
    for (int p = 0; p < n_paths; p++) {
        qsort(paths[p].times, (size_t)reps, sizeof(double), compare_doubles);
        double median = paths[p].times[reps / 2];
        printf("{\"kernel\": \"gemm\", \"path\": \"%s\", \"out\": \"%s\", \"m\": %d, \"n\": %d, "
               "\"k\": %d, \"threads\": %d, \"median_us\": %.1f, \"gops\": %.1f}\n",
               paths[p].name, paths[p].out, m, n, k, ct_cpu_max_threads(), 1e6 * median,
               ops / median * 1e-9);
        if (paths[p].out_u8)
            ct_int8_weights_free(paths[p].w);
        free(paths[p].times);
    }
    free(wf); free(bf); free(yf); free(scales); free(bias); free(wq); free(bq);
    free(workspace); free(out);
    return 0;
}
