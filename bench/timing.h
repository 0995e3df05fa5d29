/* The clock and the sort of the benchmarks in bench/: medians of
 * CLOCK_MONOTONIC intervals. */
#ifndef CT_BENCH_TIMING_H
#define CT_BENCH_TIMING_H

#include <time.h>

static inline double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort's comparison of doubles, ascending. */
static inline int compare_doubles(const void *a, const void *b)
{
    double da = *(const double *)a, db = *(const double *)b;
    return da < db ? -1 : da > db;
}

#endif
