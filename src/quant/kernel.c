/* Which INT8 path runs: forced by ct_int8_kernel_set, else CT_INT8_KERNEL,
 * else the best this CPU has (CPUID, through GCC's __builtin_cpu_supports,
 * which also checks that the OS saves the AVX-512 registers).  The state is
 * atomic: plans may run in several threads. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "quant/int8_paths.h"

static const char *const KERNEL_NAMES[CT_INT8_KERNEL_COUNT] = {"ref", "avx2", "vnni"};

/* CT_INT8_AUTO until set; the environment's choice is read once. */
static atomic_int forced_kernel = CT_INT8_AUTO;
static atomic_int default_kernel = CT_INT8_KERNEL_COUNT; /* not decided yet */

const char *ct_int8_kernel_name(ct_int8_kernel kernel)
{
    if (kernel >= 0 && kernel < CT_INT8_KERNEL_COUNT)
        return KERNEL_NAMES[kernel];
    return "auto";
}

bool ct_int8_kernel_supported(ct_int8_kernel kernel)
{
    if (kernel == CT_INT8_REF)
        return true;
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    if (kernel == CT_INT8_AVX2)
        return __builtin_cpu_supports("avx2");
    if (kernel == CT_INT8_VNNI)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#endif
    return false;
}

static ct_int8_kernel kernel_default(void)
{
    const char *env = getenv("CT_INT8_KERNEL");
    for (int k = 0; env && k < CT_INT8_KERNEL_COUNT; k++)
        if (strcmp(env, KERNEL_NAMES[k]) == 0 && ct_int8_kernel_supported(k))
            return k;
    for (int k = CT_INT8_KERNEL_COUNT - 1; k > CT_INT8_REF; k--)
        if (ct_int8_kernel_supported(k))
            return k;
    return CT_INT8_REF;
}

ct_int8_kernel ct_int8_kernel_active(void)
{
    int forced = atomic_load_explicit(&forced_kernel, memory_order_relaxed);
    if (forced != CT_INT8_AUTO)
        return forced;
    int chosen = atomic_load_explicit(&default_kernel, memory_order_relaxed);
    if (chosen == CT_INT8_KERNEL_COUNT) {
        chosen = kernel_default();
        atomic_store_explicit(&default_kernel, chosen, memory_order_relaxed);
    }
    return chosen;
}

ct_status ct_int8_kernel_set(ct_int8_kernel kernel)
{
    if (kernel < CT_INT8_AUTO || kernel >= CT_INT8_KERNEL_COUNT)
        return ct_set_error(CT_ERR_ARG, "int8 kernel %d: expected ref, avx2, vnni or auto",
                            (int)kernel);
    if (kernel != CT_INT8_AUTO && !ct_int8_kernel_supported(kernel))
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "int8 kernel %s: this CPU or build does not have it",
                            ct_int8_kernel_name(kernel));
    atomic_store_explicit(&forced_kernel, kernel, memory_order_relaxed);
    return CT_OK;
}

const ct_int8_path_i *ct_int8_path(ct_int8_kernel kernel)
{
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    if (kernel == CT_INT8_AVX2)
        return &ct_int8_avx2_path;
    if (kernel == CT_INT8_VNNI)
        return &ct_int8_vnni_path;
#endif
    CT_ASSERT(kernel == CT_INT8_REF);
    return NULL;
}

static atomic_bool image_packing_off = false;

void ct_int8_image_packing_allow(bool allow)
{
    atomic_store(&image_packing_off, !allow);
}

bool ct_int8_image_packing(ct_int8_kernel kernel)
{
    const ct_int8_path_i *path = ct_int8_path(kernel);
    if (atomic_load(&image_packing_off))
        return false;
#ifdef CT_CPU_HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    return path && path->pack_image_panel && __builtin_cpu_supports("avx512vbmi");
#else
    return path && path->pack_image_panel;
#endif
}
