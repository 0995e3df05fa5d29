/*
 * The emulated device's cuBLAS (cublas_v2.h): handles, streams, math modes
 * and SGEMM, computed on the CPU in stream order.
 *
 * Written from NVIDIA's public cuBLAS documentation to test cuttle's glue
 * (src/cuda/blas.c): arguments are checked at call time as the
 * documentation says, device pointers are checked against live allocations,
 * and the product runs when the stream does.  It is a readable reference,
 * not NVIDIA's library: each dot product accumulates in float with fmaf in
 * increasing k; CUBLAS_TF32_TENSOR_OP_MATH rounds each input of the product
 * to TF32 first, as tensor cores read them.
 */
#include "cublas_v2.h"

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "cuda_bf16.h"
#include "emu.h"

struct cublasContext {
    cudaStream_t stream;
    cublasMath_t math_mode;
};

namespace {

/* Say on stderr why a call failed (the status alone rarely names the argument). */
__attribute__((format(printf, 3, 4))) cublasStatus_t reject(cublasStatus_t status,
                                                             const char *function,
                                                             const char *format, ...)
{
    va_list args;
    va_start(args, format);
    emu::report_rejection(function, format, args);
    va_end(args);
    return status;
}

/* Bytes spanned by a column-major rows x cols matrix with leading dimension
 * ld, of elements of `element` bytes. */
size_t matrix_bytes(int rows, int cols, int ld, size_t element)
{
    if (rows == 0 || cols == 0)
        return 0;
    return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * element;
}

/* out[o * depth + d] = element (o, d) of a column-major matrix, stored at
 * M[d + o * ld] when `depth_is_contiguous`, else at M[o + d * ld]; the reads
 * run down the stored columns. */
void pack_rows(const float *M, int ld, bool depth_is_contiguous, int outer, int depth,
               bool tf32, float *out)
{
    auto put = [&](int o, int d, float v) {
        out[(size_t)o * depth + d] = tf32 ? emu::tf32_round(v) : v;
    };
    if (depth_is_contiguous) {
        for (int o = 0; o < outer; o++)
            for (int d = 0; d < depth; d++)
                put(o, d, M[(size_t)o * ld + d]);
    } else {
        for (int d = 0; d < depth; d++)
            for (int o = 0; o < outer; o++)
                put(o, d, M[(size_t)d * ld + o]);
    }
}

/* sum_l a[l] * b[l], fmaf in increasing l */
float dot(const float *a, const float *b, int k)
{
    float sum = 0.0f;
    for (int l = 0; l < k; l++)
        sum = std::fma(a[l], b[l], sum);
    return sum;
}

/* What one SGEMM needs once its stream reaches it (all by value). */
struct sgemm_args {
    bool trans_a, trans_b, tf32;
    int m, n, k;
    float alpha, beta;
    const float *A;
    int lda;
    const float *B;
    int ldb;
    float *C;
    int ldc;
};

/* C[i,j] = alpha sum_l op(A)[i,l] op(B)[l,j] + beta C[i,j];  A, B, C column-major,
 * op(A) m x k, op(B) k x n, C m x n.  C is not read when beta is 0, and A and B
 * are not read when alpha or k is 0 (BLAS's rules). */
void sgemm_run(const sgemm_args &g)
{
    bool reads_ab = g.k > 0 && g.alpha != 0.0f;
    std::vector<float> a_rows, b_cols; /* op(A) by rows, op(B) by columns */
    if (reads_ab) {
        a_rows.resize((size_t)g.m * (size_t)g.k);
        b_cols.resize((size_t)g.n * (size_t)g.k);
        pack_rows(g.A, g.lda, g.trans_a, g.m, g.k, g.tf32, a_rows.data());
        pack_rows(g.B, g.ldb, !g.trans_b, g.n, g.k, g.tf32, b_cols.data());
    }
    for (int j = 0; j < g.n; j++) {
        float *c = g.C + (size_t)j * (size_t)g.ldc;
        for (int i = 0; i < g.m; i++) {
            float value = 0.0f;
            if (reads_ab)
                value = g.alpha * dot(&a_rows[(size_t)i * g.k], &b_cols[(size_t)j * g.k], g.k);
            if (g.beta != 0.0f)
                value = reads_ab ? value + g.beta * c[i] : g.beta * c[i];
            c[i] = value;
        }
    }
}

bool valid_operation(cublasOperation_t op)
{
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

const char *operation_name(cublasOperation_t op)
{
    return op == CUBLAS_OP_N ? "N" : "T";
}

/* The bytes of one element of a type gemm() takes. */
size_t element_bytes(cudaDataType type)
{
    return type == CUDA_R_32F ? sizeof(float) : sizeof(uint16_t);
}

/* The column-major rows x cols matrix at M (leading dimension ld, elements
 * of `type`) widened to floats with the same layout. */
std::vector<float> widened(const void *M, cudaDataType type, int rows, int cols, int ld)
{
    size_t count = rows == 0 || cols == 0 ? 0 : (size_t)(cols - 1) * ld + rows;
    std::vector<float> out(count);
    const uint16_t *bits = (const uint16_t *)M;
    for (size_t i = 0; i < count; i++)
        out[i] = emu::bits16_to_float(type == CUDA_R_16BF, bits[i]);
    return out;
}

/* cublasSgemm and cublasGemmEx: the arguments checked as cuBLAS documents,
 * then the product queued; 16-bit operands are widened, and a 16-bit C
 * rounded once, when the stream reaches it. */
cublasStatus_t gemm(const char *fn, cublasHandle_t handle, cublasOperation_t transa,
                    cublasOperation_t transb, int m, int n, int k, const float *alpha,
                    const void *A, cudaDataType a_type, int lda, const void *B,
                    cudaDataType b_type, int ldb, const float *beta, void *C,
                    cudaDataType c_type, int ldc)
{
    if (emu::injected_failure(fn))
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, fn, "failure injected (CUDA_EMU_FAIL)");
    if (!handle)
        return reject(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is NULL");
    if (!valid_operation(transa) || !valid_operation(transb))
        return reject(CUBLAS_STATUS_INVALID_VALUE, fn, "transa %d or transb %d is not an operation",
                      (int)transa, (int)transb);
    if (m < 0 || n < 0 || k < 0)
        return reject(CUBLAS_STATUS_INVALID_VALUE, fn, "m %d, n %d, k %d: none may be negative",
                      m, n, k);
    /* op(A) is m x k, so A is stored m x k (N) or k x m (T); likewise B. */
    bool trans_a = transa != CUBLAS_OP_N, trans_b = transb != CUBLAS_OP_N;
    int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const struct {
        const char *name;
        int ld, rows;
    } lds[] = {{"lda", lda, a_rows}, {"ldb", ldb, b_rows}, {"ldc", ldc, m}};
    for (const auto &l : lds)
        if (l.ld < (l.rows > 1 ? l.rows : 1))
            return reject(CUBLAS_STATUS_INVALID_VALUE, fn,
                          "op %s%s, m %d n %d k %d: %s %d is below max(1, %d), the rows it holds",
                          operation_name(transa), operation_name(transb), m, n, k, l.name, l.ld,
                          l.rows);
    if (!alpha || !beta)
        return reject(CUBLAS_STATUS_INVALID_VALUE, fn, "alpha or beta is NULL");
    sgemm_args g = {trans_a, trans_b, false, m, n, k, *alpha, *beta, (const float *)A, lda,
                    (const float *)B, ldb, (float *)C, ldc};
    if (m == 0 || n == 0 || ((k == 0 || g.alpha == 0.0f) && g.beta == 1.0f))
        return CUBLAS_STATUS_SUCCESS; /* nothing to compute (BLAS's quick return) */
    if (k > 0 && g.alpha != 0.0f) {
        if (!emu::is_device_range(A, matrix_bytes(a_rows, a_cols, lda, element_bytes(a_type))))
            return reject(CUBLAS_STATUS_INVALID_VALUE, fn,
                          "A = %p (%d x %d, lda %d) is not inside one device allocation", A,
                          a_rows, a_cols, lda);
        if (!emu::is_device_range(B, matrix_bytes(b_rows, b_cols, ldb, element_bytes(b_type))))
            return reject(CUBLAS_STATUS_INVALID_VALUE, fn,
                          "B = %p (%d x %d, ldb %d) is not inside one device allocation", B,
                          b_rows, b_cols, ldb);
    }
    if (!emu::is_device_range(C, matrix_bytes(m, n, ldc, element_bytes(c_type))))
        return reject(CUBLAS_STATUS_INVALID_VALUE, fn,
                      "C = %p (%d x %d, ldc %d) is not inside one device allocation", C, m, n,
                      ldc);
    int base_mode =
        (int)handle->math_mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    g.tf32 = a_type == CUDA_R_32F && base_mode == CUBLAS_TF32_TENSOR_OP_MATH;
    cudaError_t error = emu::enqueue(handle->stream, fn, [=]() {
        try {
            if (a_type == CUDA_R_32F && c_type == CUDA_R_32F) {
                sgemm_run(g);
                return;
            }
            bool reads_ab = g.k > 0 && g.alpha != 0.0f;
            std::vector<float> a, b, c;
            sgemm_args f = g;
            if (reads_ab && a_type != CUDA_R_32F) {
                a = widened(A, a_type, a_rows, a_cols, lda);
                b = widened(B, b_type, b_rows, b_cols, ldb);
                f.A = a.data();
                f.B = b.data();
            }
            if (c_type != CUDA_R_32F) {
                c = g.beta != 0.0f ? widened(C, c_type, m, n, ldc)
                                   : std::vector<float>((size_t)(n - 1) * ldc + m);
                f.C = c.data();
            }
            sgemm_run(f);
            uint16_t *bits = (uint16_t *)C;
            for (int j = 0; c_type != CUDA_R_32F && j < n; j++)
                for (int i = 0; i < m; i++) {
                    size_t at = (size_t)j * ldc + i;
                    bits[at] = emu::float_to_bits16(c_type == CUDA_R_16BF, c[at]);
                }
        } catch (const std::bad_alloc &) {
            emu::fail_current_work(cudaErrorMemoryAllocation,
                                   "cuBLAS: out of host memory for the packed operands");
        }
    });
    if (error != cudaSuccess)
        return reject(CUBLAS_STATUS_EXECUTION_FAILED, fn, "could not queue the work: %s",
                      cudaGetErrorName(error));
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    if (!handle)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "handle pointer is NULL");
    *handle = new (std::nothrow) cublasContext{nullptr, CUBLAS_DEFAULT_MATH};
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    (void)cudaDeviceSynchronize(); /* an error here belongs to the work, not to us */
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream)
        return CUBLAS_STATUS_INVALID_VALUE;
    *stream = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base == CUBLAS_TENSOR_OP_MATH)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, "cublasSetMathMode",
                      "the emulator does not model the deprecated CUBLAS_TENSOR_OP_MATH");
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_PEDANTIC_MATH &&
        base != CUBLAS_TF32_TENSOR_OP_MATH)
        return reject(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode",
                      "unknown math mode %d", (int)mode);
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t *mode)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!mode)
        return CUBLAS_STATUS_INVALID_VALUE;
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION:
        *value = CUBLAS_VER_MAJOR;
        return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = CUBLAS_VER_MINOR;
        return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = CUBLAS_VER_PATCH;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires a license";
    }
    return "unknown cuBLAS status";
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa,
                           cublasOperation_t transb, int m, int n, int k, const float *alpha,
                           const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc)
{
    return gemm("cublasSgemm", handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B,
                CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
    static const char fn[] = "cublasGemmEx";
    if (computeType != CUBLAS_COMPUTE_32F || algo != CUBLAS_GEMM_DEFAULT)
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                      "the emulator computes CUBLAS_COMPUTE_32F with CUBLAS_GEMM_DEFAULT only, "
                      "not compute type %d, algorithm %d",
                      (int)computeType, (int)algo);
    bool known = Atype == CUDA_R_32F || Atype == CUDA_R_16F || Atype == CUDA_R_16BF;
    if (!known || Btype != Atype || (Ctype != Atype && Ctype != CUDA_R_32F))
        return reject(CUBLAS_STATUS_NOT_SUPPORTED, fn,
                      "types A %d, B %d, C %d: A and B must be one of float, half and "
                      "bfloat16, C theirs or float",
                      (int)Atype, (int)Btype, (int)Ctype);
    return gemm(fn, handle, transa, transb, m, n, k, (const float *)alpha, A, Atype, lda, B,
                Btype, ldb, (const float *)beta, C, Ctype, ldc);
}

} // extern "C"
