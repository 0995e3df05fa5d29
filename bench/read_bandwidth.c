/*
 * How fast the threads read memory, by buffer size: all threads read a
 * buffer of S MB, one word of each 64-byte line (the whole line comes in;
 * summing every word would measure the adds, not the memory), the best of
 * 10 passes.  Small buffers stay in the
 * caches, large ones come from DRAM: what a kernel whose weights or
 * transforms stream from memory can get (docs/perf.md).
 *   read_bandwidth [MB ...]   (default 4 16 32 64 256)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

#define LINE_WORDS 8 /* uint64 words per 64-byte cache line */

/* Where the sums go, so that the reads are not optimized away. */
static volatile uint64_t sink;

static double read_gbps(const uint64_t *words, size_t count)
{
    double best = 1e30;
    for (int pass = 0; pass < 10; pass++) {
        uint64_t total = 0;
        double start = now_seconds();
#pragma omp parallel for reduction(+ : total) schedule(static)
        for (size_t i = 0; i < count; i += LINE_WORDS)
            total += words[i];
        double seconds = now_seconds() - start;
        best = seconds < best ? seconds : best;
        sink = total;
    }
    return (double)(count * sizeof *words) / best * 1e-9;
}

int main(int argc, char **argv)
{
    static const int defaults[] = {4, 16, 32, 64, 256};
    int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
    for (int k = 0; k < n; k++) {
        int mb = argc > 1 ? atoi(argv[k + 1]) : defaults[k];
        if (mb < 1) {
            fprintf(stderr, "read_bandwidth: sizes are whole megabytes, got %s\n", argv[k + 1]);
            return 2;
        }
        size_t count = ((size_t)mb << 20) / sizeof(uint64_t);
        uint64_t *words = malloc(count * sizeof *words);
        if (!words) {
            fprintf(stderr, "read_bandwidth: no memory for %d MB\n", mb);
            return 1;
        }
        memset(words, 1, count * sizeof *words); /* pages of its own, not the zero page */
        printf("{\"mb\": %d, \"read_gbps\": %.1f}\n", mb, read_gbps(words, count));
        free(words);
    }
    return 0;
}
