/* ct_build_info_get: the build's options (from the Makefile's -D flags)
 * and what this machine's CPU lets the kernels use. */
#include "cuttle.h"

#include <stdio.h>

#include "cpu/simd.h"
#include "quant/int8.h"

#ifdef CT_HAVE_OPENBLAS
#include <cblas.h>
#endif

static const char *blas_description(void)
{
#ifdef CT_HAVE_OPENBLAS
    static char text[256];
    static const char *const parallel[] = {"sequential", "pthreads", "openmp"};
    int kind = openblas_get_parallel();
    snprintf(text, sizeof text, "%s (%s)", openblas_get_config(),
             kind >= 0 && kind <= 2 ? parallel[kind] : "?");
    return text;
#else
    return "built-in GEMM";
#endif
}

void ct_build_info_get(ct_build_info *out)
{
    *out = (ct_build_info){
        .version = ct_version(),
#if defined(__clang__)
        .compiler = "clang " __clang_version__,
#elif defined(__GNUC__)
        .compiler = "gcc " __VERSION__,
#else
        .compiler = "unknown",
#endif
#if defined(CT_CUDA_EMULATED)
        .cuda = "emulated",
#elif defined(CT_HAVE_CUDA)
        .cuda = "cuda",
#else
        .cuda = "none",
#endif
#ifdef CT_CUDA_ARCHS
        .cuda_archs = CT_CUDA_ARCHS,
#else
        .cuda_archs = "",
#endif
#ifdef CT_HAVE_CUBLAS
        .cublas = true,
#endif
#ifdef CT_HAVE_CUDNN
        .cudnn = true,
#endif
#ifdef CT_HAVE_NCCL_H
        .nccl_header = true,
#endif
        .blas = blas_description(),
#ifdef _OPENMP
        .openmp = true,
#endif
#ifdef CT_HAVE_ZLIB
        .zlib = true,
#endif
#ifdef CT_HAVE_PNG
        .png = true,
#endif
#ifdef CT_HAVE_JPEG
        .jpeg = true,
#endif
#ifdef CT_HAVE_MPI
        .mpi = true,
#endif
        .cpu_simd = ct_cpu_simd_avx512() ? "avx512" : ct_cpu_simd_avx2() ? "avx2" : "scalar",
        .int8_kernel = ct_int8_kernel_name(ct_int8_kernel_active()),
    };
}
