/*
 * A small test harness.  Each test binary runs its cases with RUN(case);
 * a case fails when any CHECK in it fails.  Every binary prints one line per
 * case ("PASS name" / "FAIL name") and exits non-zero if any case failed;
 * tests/run.sh adds the lines up into "N passed, N failed".
 */
#ifndef CT_TESTS_HARNESS_H
#define CT_TESTS_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One count per binary, shared by every file linked into it (weak
 * definitions merge), so a CHECK in a shared fixture such as
 * tests/gradcheck.c fails the case that is running. */
__attribute__((weak)) int harness_case_failures;
__attribute__((weak)) int harness_passed;
__attribute__((weak)) int harness_failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            harness_case_failures++;                                          \
            fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__, __LINE__, \
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
        }                                                                     \
    } while (0)

/* Check a ct_status-returning call; prints ct_last_error() on failure. */
#define CHECK_OK(call)                                                        \
    do {                                                                      \
        ct_status check_ok_status_ = (call);                                  \
        CHECK(check_ok_status_ == CT_OK, "%s returned %s: %s", #call,         \
              ct_status_name(check_ok_status_), ct_last_error());             \
    } while (0)

#define RUN(case_fn)                                                          \
    do {                                                                      \
        harness_case_failures = 0;                                            \
        case_fn();                                                            \
        if (harness_case_failures == 0) {                                     \
            harness_passed++;                                                 \
            printf("PASS %s\n", #case_fn);                                    \
        } else {                                                              \
            harness_failed++;                                                 \
            printf("FAIL %s\n", #case_fn);                                    \
        }                                                                     \
        fflush(stdout);                                                       \
    } while (0)

/* Print this binary's summary; the exit status of main. */
static inline int harness_finish(void)
{
    fprintf(stderr, "%d passed, %d failed\n", harness_passed, harness_failed);
    return harness_failed == 0 ? 0 : 1;
}

/* Deterministic test data: uniform in [lo, hi), never all zeros. */
static inline float harness_uniform(uint64_t *state, float lo, float hi)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    double unit = (double)(*state >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * unit);
}

static inline void harness_fill(float *data, int64_t count, uint64_t seed, float lo, float hi)
{
    uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < count; i++)
        data[i] = harness_uniform(&state, lo, hi);
}

/* max_i |a_i - b_i| / max(max_i |b_i|, 1e-12): relative to the reference's
 * largest magnitude, so that values near zero do not blow up the ratio. */
static inline double harness_rel_err_f32(const float *a, const float *b, int64_t count)
{
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < count; i++) {
        double diff = fabs((double)a[i] - (double)b[i]);
        if (diff > max_diff || isnan(diff))
            max_diff = isnan(diff) ? INFINITY : diff;
        if (fabs((double)b[i]) > max_ref)
            max_ref = fabs((double)b[i]);
    }
    return max_diff / (max_ref > 1e-12 ? max_ref : 1e-12);
}

static inline double harness_rel_err_f64(const float *a, const double *b, int64_t count)
{
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < count; i++) {
        double diff = fabs((double)a[i] - b[i]);
        if (diff > max_diff || isnan(diff))
            max_diff = isnan(diff) ? INFINITY : diff;
        if (fabs(b[i]) > max_ref)
            max_ref = fabs(b[i]);
    }
    return max_diff / (max_ref > 1e-12 ? max_ref : 1e-12);
}

#endif
