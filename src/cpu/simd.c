/* Run-time choice between the AVX2+FMA kernels and the portable ones.
 * Plans may run in several threads at once: the state is atomic (the first
 * callers may all probe the CPU; they find the same answer). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/simd.h"

/* -1: not asked yet; 0: portable kernels; 1: AVX2+FMA kernels. */
static atomic_int simd_state = -1;
static atomic_bool simd_allowed = true;

static bool simd_cpu_has_avx2(void)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

bool ct_cpu_simd_avx2(void)
{
    int state = atomic_load_explicit(&simd_state, memory_order_relaxed);
    if (state < 0) {
        const char *env = getenv("CT_CPU_SIMD");
        bool env_off = env && strcmp(env, "0") == 0;
        state = simd_cpu_has_avx2() && !env_off;
        atomic_store_explicit(&simd_state, state, memory_order_relaxed);
    }
    return atomic_load_explicit(&simd_allowed, memory_order_relaxed) && state == 1;
}

void ct_cpu_simd_set(bool allow_fast)
{
    atomic_store_explicit(&simd_allowed, allow_fast, memory_order_relaxed);
}

static atomic_bool avx512_allowed = true;

void ct_cpu_simd_set_avx512(bool allow)
{
    atomic_store_explicit(&avx512_allowed, allow, memory_order_relaxed);
}

bool ct_cpu_simd_avx512(void)
{
    static atomic_int has_avx512 = -1;
    int has = atomic_load_explicit(&has_avx512, memory_order_relaxed);
    if (has < 0) {
#ifdef CT_CPU_HAVE_AVX2_KERNELS
        __builtin_cpu_init();
        /* VL too: the 32-register kernels use it on 8-float vectors */
        has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
#else
        has = 0;
#endif
        atomic_store_explicit(&has_avx512, has, memory_order_relaxed);
    }
    return has == 1 && atomic_load_explicit(&avx512_allowed, memory_order_relaxed) &&
           ct_cpu_simd_avx2();
}
