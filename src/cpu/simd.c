/* Run-time choice between the AVX2+FMA kernels and the portable ones. */
#include <stdlib.h>
#include <string.h>

#include "cpu/simd.h"

/* -1: not asked yet; 0: portable kernels; 1: AVX2+FMA kernels. */
static int simd_state = -1;
static bool simd_allowed = true;

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
    if (simd_state < 0) {
        const char *env = getenv("CT_CPU_SIMD");
        bool env_off = env && strcmp(env, "0") == 0;
        simd_state = simd_cpu_has_avx2() && !env_off;
    }
    return simd_allowed && simd_state == 1;
}

void ct_cpu_simd_set(bool allow_fast)
{
    simd_allowed = allow_fast;
}
