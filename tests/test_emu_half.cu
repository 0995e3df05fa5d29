/*
 * Half precision and tensor cores on the emulated device (emu/cuda_fp16.h,
 * emu/cuda_bf16.h, emu/mma.h):
 *   - every __half and __nv_bfloat16 bit pattern widens to float exactly
 *     and back to itself (NaNs to a NaN);
 *   - float -> half and float -> bfloat16 give the nearest value, ties to
 *     even, for millions of random and edge floats (every midpoint between
 *     neighbours and the floats either side of it), against a reference
 *     made differently (tests/half_reference.h: a table of every value,
 *     searched in double);
 *   - the same conversions, arithmetic rounded once, and shuffles of the
 *     16-bit types, inside kernels;
 *   - a 64x48x32 GEMM by wmma, 16x16x16 tiles over several warps, every
 *     layout of A and B, half and bfloat16 (and tf32 m16n16k8), against a
 *     double reference within 32 float ulps of sum |a b|; accumulator
 *     elements cover the tile once; a lane that skips mma_sync fails the
 *     kernel; the counters see 2 M N K tensor FLOPs and the tiles' bytes,
 *     in whole sectors.
 * The kernels compile with nvcc against the real headers as well.
 */
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>

extern "C" {
#include "harness.h"
}
#include "half_reference.h"

using namespace nvcuda;

enum { THREADS = 256, BLOCKS = 8 };
enum { GM = 64, GN = 48, GK = 32, TILE = 16, TILES = (GM / TILE) * (GN / TILE) };

/* ---- conversions on the host ----------------------------------------------------------- */

static void every_pattern_round_trips(void)
{
    int failures = 0;
    for (unsigned bits = 0; bits < PATTERNS; bits++) {
        float h = __half2float(__ushort_as_half((unsigned short)bits));
        float b = __bfloat162float(__ushort_as_bfloat16((unsigned short)bits));
        unsigned h_back = __half_as_ushort(__float2half(h));
        unsigned b_back = __bfloat16_as_ushort(__float2bfloat16(b));
        bool ok = round_trips(half_format, bits, h, h_back) &&
                  round_trips(bf16_format, bits, b, b_back);
        if (!ok && failures++ < 5)
            CHECK(false, "pattern 0x%04x: half %g -> 0x%04x, bfloat16 %g -> 0x%04x", bits, h,
                  h_back, b, b_back);
    }
    CHECK(failures == 0, "%d patterns do not round-trip", failures);
}

static void float_conversions_round_to_nearest_even(void)
{
    int n = 0, failures = 0;
    float *x = test_floats(&n);
    for (int i = 0; i < n; i++) {
        unsigned h = __half_as_ushort(__float2half_rn(x[i]));
        unsigned b = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
        bool ok = rounds_right(half_format, x[i], h) && rounds_right(bf16_format, x[i], b);
        if (!ok && failures++ < 5)
            CHECK(false, "%a: half 0x%04x (want 0x%04x), bfloat16 0x%04x (want 0x%04x)", x[i],
                  h, nearest(half_format, x[i]), b, nearest(bf16_format, x[i]));
    }
    CHECK(failures == 0, "%d of %d floats rounded wrongly", failures, n);
    CHECK(n > 3000000, "only %d floats", n);
    free(x);
}

/* ---- the same inside kernels ------------------------------------------------------------ */

static __global__ void convert_floats(const float *x, unsigned short *half_bits,
                                      unsigned short *bf16_bits, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        half_bits[i] = __half_as_ushort(__float2half_rn(x[i]));
        bf16_bits[i] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
    }
}

static __global__ void widen_patterns(float *half_values, float *bf16_values)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < PATTERNS; i += gridDim.x * blockDim.x) {
        half_values[i] = __half2float(__ushort_as_half((unsigned short)i));
        bf16_values[i] = __bfloat162float(__ushort_as_bfloat16((unsigned short)i));
    }
}

template <class T>
static T *device_alloc(size_t n)
{
    T *dev = NULL;
    CHECK(cudaMalloc((void **)&dev, sizeof(T) * n) == cudaSuccess, "cudaMalloc");
    return dev;
}

template <class T>
static T *to_device(const T *host, size_t n)
{
    T *dev = device_alloc<T>(n);
    CHECK(cudaMemcpy(dev, host, sizeof(T) * n, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    return dev;
}

template <class T>
static T *from_device(T *dev, size_t n)
{
    T *host = (T *)malloc(sizeof(T) * n);
    cudaError_t error = cudaMemcpy(host, dev, sizeof(T) * n, cudaMemcpyDeviceToHost);
    CHECK(error == cudaSuccess, "download: %s", cudaGetErrorString(error));
    cudaFree(dev);
    return host;
}

/* The kernels convert as the host does (which the cases above checked). */
static void conversions_in_a_kernel(void)
{
    int n = 0, failures = 0;
    float *x = test_floats(&n), *dev_x = to_device(x, (size_t)n);
    unsigned short *dev_h = device_alloc<unsigned short>((size_t)n);
    unsigned short *dev_b = device_alloc<unsigned short>((size_t)n);
    float *dev_hw = device_alloc<float>(PATTERNS), *dev_bw = device_alloc<float>(PATTERNS);
    CT_EMU_LAUNCH(convert_floats, BLOCKS, THREADS, 0, 0, dev_x, dev_h, dev_b, n);
    CT_EMU_LAUNCH(widen_patterns, BLOCKS, THREADS, 0, 0, dev_hw, dev_bw);
    unsigned short *h = from_device(dev_h, (size_t)n), *b = from_device(dev_b, (size_t)n);
    float *hw = from_device(dev_hw, PATTERNS), *bw = from_device(dev_bw, PATTERNS);
    for (int i = 0; i < n; i++)
        failures += h[i] != __half_as_ushort(__float2half(x[i])) ||
                    b[i] != __bfloat16_as_ushort(__float2bfloat16(x[i]));
    for (unsigned bits = 0; bits < PATTERNS; bits++) {
        float h_host = __half2float(__ushort_as_half((unsigned short)bits));
        float b_host = __bfloat162float(__ushort_as_bfloat16((unsigned short)bits));
        failures += memcmp(&hw[bits], &h_host, 4) != 0 || memcmp(&bw[bits], &b_host, 4) != 0;
    }
    CHECK(failures == 0, "%d conversions in the kernels differ from the host's", failures);
    cudaFree(dev_x);
    free(x), free(h), free(b), free(hw), free(bw);
}

enum { OPS = 5 };

/* out[OPS i ..]: a + b, a - b, a * b, a / b, fma(a, b, c), each rounded once */
template <class T>
static __global__ void arithmetic(const T *a, const T *b, const T *c, T *out, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[OPS * i + 0] = a[i] + b[i];
        out[OPS * i + 1] = a[i] - b[i];
        out[OPS * i + 2] = a[i] * b[i];
        out[OPS * i + 3] = a[i] / b[i];
        out[OPS * i + 4] = __hfma(a[i], b[i], c[i]);
    }
}

static unsigned bits_of(__half h) { return __half_as_ushort(h); }
static unsigned bits_of(__nv_bfloat16 b) { return __bfloat16_as_ushort(b); }
static float value_of(__half h) { return __half2float(h); }
static float value_of(__nv_bfloat16 b) { return __bfloat162float(b); }
static void set(__half *h, float v) { *h = __float2half(v); }
static void set(__nv_bfloat16 *b, float v) { *b = __float2bfloat16(v); }
static float value_of(float tf32) { return tf32; }
static void set(float *tf32, float v) /* a float whose low 13 bits are zero */
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    *tf32 = float_of(bits & ~0x1fffu);
}

/* Each result is the nearest value to the exact one (exact in double for
 * these operands; a quotient rounded in double first rounds right too). */
template <class T>
static void arithmetic_case(const format &f)
{
    enum { N = 4096 };
    T a[N], b[N], c[N];
    uint64_t state = 3;
    for (int i = 0; i < N; i++) {
        set(&a[i], harness_uniform(&state, -8.0f, 8.0f) * (i % 4 ? 1.0f : 0x1p-20f));
        set(&b[i], harness_uniform(&state, 0.25f, 8.0f) * (i % 3 ? 1.0f : -1.0f));
        set(&c[i], harness_uniform(&state, -8.0f, 8.0f));
    }
    /* a b + c just under a midpoint (half: 1 + 3 x 2^-11 - 2^-31, bfloat16: 1 + 3 x 2^-8 -
     * 2^-30): rounded to float first, it would be the midpoint, then go up to even */
    bool half = std::is_same<T, __half>::value;
    set(&a[0], half ? 0x1.004p-11f : 0x1.28p+0f);
    set(&b[0], half ? 0x1.ff8p-1f : 0x1.cp-1f);
    set(&c[0], half ? 0x1.004p+0f : -0x1p-30f);
    T *dev_a = to_device(a, N), *dev_b = to_device(b, N), *dev_c = to_device(c, N);
    T *dev_out = device_alloc<T>(N * OPS);
    CT_EMU_LAUNCH(arithmetic<T>, BLOCKS, THREADS, 0, 0, dev_a, dev_b, dev_c, dev_out, (int)N);
    T *out = from_device(dev_out, (size_t)N * OPS);
    int failures = 0;
    for (int i = 0; i < N; i++) {
        double x = value_of(a[i]), y = value_of(b[i]), z = value_of(c[i]);
        double exact[OPS] = {x + y, x - y, x * y, x / y, x * y + z};
        for (int op = 0; op < OPS; op++)
            if (bits_of(out[OPS * i + op]) != nearest(f, exact[op]) && failures++ < 5)
                CHECK(false, "%s op %d of %a, %a, %a: 0x%04x, want 0x%04x", f.name, op, x, y, z,
                      bits_of(out[OPS * i + op]), nearest(f, exact[op]));
    }
    CHECK(failures == 0, "%s: %d results wrong", f.name, failures);
    cudaFree(dev_a), cudaFree(dev_b), cudaFree(dev_c);
    free(out);
}

static void arithmetic_rounds_once(void)
{
    arithmetic_case<__half>(half_format);
    arithmetic_case<__nv_bfloat16>(bf16_format);
}

static __global__ void shuffle_16_bit(const __half *h, const __nv_bfloat162 *b, __half *h_out,
                                      __nv_bfloat162 *b_out)
{
    int lane = threadIdx.x;
    h_out[lane] = __shfl_xor_sync(0xffffffffu, h[lane], 1);
    b_out[lane] = __shfl_down_sync(0xffffffffu, b[lane], 3);
}

static void shuffles_move_16_bit_types(void)
{
    __half h[32];
    __nv_bfloat162 b[32];
    for (int l = 0; l < 32; l++) {
        h[l] = __float2half(0.5f * (float)l - 3.0f);
        b[l] = __floats2bfloat162_rn((float)l, -(float)l * 0.25f);
    }
    __half *dev_h = to_device(h, 32), *dev_h_out = device_alloc<__half>(32);
    __nv_bfloat162 *dev_b = to_device(b, 32), *dev_b_out = device_alloc<__nv_bfloat162>(32);
    CT_EMU_LAUNCH(shuffle_16_bit, 1, 32, 0, 0, dev_h, dev_b, dev_h_out, dev_b_out);
    __half *h_out = from_device(dev_h_out, 32);
    __nv_bfloat162 *b_out = from_device(dev_b_out, 32);
    for (int l = 0; l < 32; l++) {
        int from = l + 3 < 32 ? l + 3 : l;
        CHECK(bits_of(h_out[l]) == bits_of(h[l ^ 1]), "lane %d: half %g", l, value_of(h_out[l]));
        float2 got = __bfloat1622float2(b_out[l]);
        CHECK(got.x == (float)from && got.y == -(float)from * 0.25f &&
                  __low2float(b_out[l]) == got.x && __high2float(b_out[l]) == got.y,
              "lane %d: bfloat162 (%g, %g)", l, got.x, got.y);
    }
    cudaFree(dev_h), cudaFree(dev_b);
    free(h_out), free(b_out);
}

/* ---- wmma ------------------------------------------------------------------------------------ */

template <class T>
struct memory_of {
    typedef T type;
};
template <>
struct memory_of<wmma::precision::tf32> {
    typedef float type;
};

/* C[GM x GN] = A[GM x GK] B[GK x GN], one 16x16 tile of C per warp, K in
 * steps of TK; A and B as their layouts say, C row- or column-major. */
template <class T, class LayoutA, class LayoutB, int TK>
static __global__ void wmma_gemm(const typename memory_of<T>::type *a,
                                 const typename memory_of<T>::type *b, float *c, int c_col_major)
{
    const bool a_col = std::is_same<LayoutA, wmma::col_major>::value;
    const bool b_col = std::is_same<LayoutB, wmma::col_major>::value;
    int warp = (int)(blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int m0 = warp / (GN / TILE) * TILE, n0 = warp % (GN / TILE) * TILE;
    wmma::fragment<wmma::matrix_a, TILE, TILE, TK, T, LayoutA> fa;
    wmma::fragment<wmma::matrix_b, TILE, TILE, TK, T, LayoutB> fb;
    wmma::fragment<wmma::accumulator, TILE, TILE, TK, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = 0; k0 < GK; k0 += TK) {
        wmma::load_matrix_sync(fa, a_col ? a + k0 * GM + m0 : a + m0 * GK + k0, a_col ? GM : GK);
        wmma::load_matrix_sync(fb, b_col ? b + n0 * GK + k0 : b + k0 * GN + n0, b_col ? GK : GN);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c_col_major ? c + n0 * GM + m0 : c + m0 * GN + n0, acc,
                            c_col_major ? GM : GN,
                            c_col_major ? wmma::mem_col_major : wmma::mem_row_major);
}

enum { WARPS_PER_BLOCK = 6, GEMM_BLOCKS = TILES / WARPS_PER_BLOCK };

/* The largest error of one GEMM against double, in units of 2^-24 sum_k |a b|. */
template <class T, class LayoutA, class LayoutB, int TK>
static double gemm_error(bool c_col_major, uint64_t seed)
{
    typedef typename memory_of<T>::type M;
    const bool a_col = std::is_same<LayoutA, wmma::col_major>::value;
    const bool b_col = std::is_same<LayoutB, wmma::col_major>::value;
    static M a[GM * GK], b[GK * GN];
    uint64_t state = seed;
    for (int i = 0; i < GM * GK; i++)
        set(&a[i], harness_uniform(&state, -2.0f, 2.0f));
    for (int i = 0; i < GK * GN; i++)
        set(&b[i], harness_uniform(&state, -2.0f, 2.0f));
    M *dev_a = to_device(a, GM * GK), *dev_b = to_device(b, GK * GN);
    float *dev_c = device_alloc<float>(GM * GN);
    void (*const gemm)(const M *, const M *, float *, int) = wmma_gemm<T, LayoutA, LayoutB, TK>;
    CT_EMU_LAUNCH(gemm, GEMM_BLOCKS, WARPS_PER_BLOCK * 32, 0, 0, dev_a, dev_b, dev_c,
                  (int)c_col_major);
    float *c = from_device(dev_c, GM * GN);
    double worst = 0.0;
    for (int m = 0; m < GM; m++)
        for (int n = 0; n < GN; n++) {
            double sum = 0.0, magnitude = 0.0;
            for (int k = 0; k < GK; k++) {
                double p = (double)value_of(a[a_col ? k * GM + m : m * GK + k]) *
                           (double)value_of(b[b_col ? n * GK + k : k * GN + n]);
                sum += p;
                magnitude += fabs(p);
            }
            double got = c[c_col_major ? n * GM + m : m * GN + n];
            worst = fmax(worst, fabs(got - sum) / (magnitude * 0x1p-24));
        }
    cudaFree(dev_a), cudaFree(dev_b);
    free(c);
    return worst;
}

static void wmma_gemm_matches_double(void)
{
    typedef wmma::row_major row;
    typedef wmma::col_major col;
    typedef wmma::precision::tf32 tf32;
    const double ULPS = 32.0; /* fp32 sums of 32 products: at most 31 roundings */
    double errors[] = {
        gemm_error<__half, row, row, 16>(false, 1), gemm_error<__half, row, col, 16>(true, 2),
        gemm_error<__half, col, row, 16>(false, 3), gemm_error<__half, col, col, 16>(true, 4),
        gemm_error<__nv_bfloat16, row, row, 16>(true, 5),
        gemm_error<__nv_bfloat16, row, col, 16>(false, 6),
        gemm_error<__nv_bfloat16, col, row, 16>(true, 7),
        gemm_error<__nv_bfloat16, col, col, 16>(false, 8),
        gemm_error<tf32, row, col, 8>(false, 9), gemm_error<tf32, col, row, 8>(true, 10),
    };
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        CHECK(errors[i] <= ULPS, "case %zu: error %.1f x 2^-24 sum |a b|", i, errors[i]);
}

/* Lane l numbers its accumulator elements l * num_elements + i. */
static __global__ void number_elements(float *out)
{
    wmma::fragment<wmma::accumulator, TILE, TILE, TILE, float> acc;
    for (int i = 0; i < acc.num_elements; i++)
        acc.x[i] = (float)(threadIdx.x * acc.num_elements + i);
    wmma::store_matrix_sync(out, acc, TILE, wmma::mem_row_major);
}

static void accumulator_elements_cover_the_tile(void)
{
    float *dev = device_alloc<float>(TILE * TILE);
    CT_EMU_LAUNCH(number_elements, 1, 32, 0, 0, dev);
    float *out = from_device(dev, TILE * TILE);
    bool seen[TILE * TILE] = {false};
    for (int i = 0; i < TILE * TILE; i++) {
        int e = (int)out[i];
        CHECK(e >= 0 && e < TILE * TILE && !seen[e], "element %d at %d", e, i);
        if (e >= 0 && e < TILE * TILE)
            seen[e] = true;
    }
    free(out);
}

static __global__ void lane_skips_mma(const __half *a, float *c)
{
    wmma::fragment<wmma::matrix_a, TILE, TILE, TILE, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, TILE, TILE, TILE, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, TILE, TILE, TILE, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, TILE);
    wmma::load_matrix_sync(fb, a, TILE);
    if (threadIdx.x != 7)
        wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, TILE, wmma::mem_row_major);
}

static __global__ void misaligned_load(const __half *a)
{
    wmma::fragment<wmma::matrix_a, TILE, TILE, TILE, __half, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a + 8, TILE);
}

/* A kernel failure is sticky until cudaDeviceReset; check its message. */
static void expect_kernel_failure(const char *must_contain, const char *also)
{
    cudaError_t error = cudaDeviceSynchronize();
    const char *text = cudaGetErrorString(error);
    CHECK(error == cudaErrorLaunchFailure, "expected a launch failure, got %s",
          cudaGetErrorName(error));
    CHECK(strstr(text, must_contain) != NULL, "'%s' not in: %s", must_contain, text);
    CHECK(strstr(text, also) != NULL, "'%s' not in: %s", also, text);
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
}

static void wmma_misuse_fails(void)
{
    __half *a = device_alloc<__half>(TILE * TILE);
    float *c = device_alloc<float>(TILE * TILE);
    cudaMemset(a, 0, sizeof(__half) * TILE * TILE);
    CT_EMU_LAUNCH(lane_skips_mma, 1, 32, 0, 0, a, c);
    expect_kernel_failure("wmma::mma_sync at test_emu_half.cu:", "wmma::store_matrix_sync");
    a = device_alloc<__half>(TILE * TILE); /* the reset freed the first */
    CT_EMU_LAUNCH(misaligned_load, 1, 32, 0, 0, a);
    expect_kernel_failure("32-byte aligned", "test_emu_half.cu:");
}

/* ---- counters ---------------------------------------------------------------------------------- */

/* One half FMA and one half add a thread: 2 fp16 operations, 3 FLOPs. */
static __global__ void half_work(const __half *x, __half *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = __hfma(x[i], x[i], x[i]) + x[i];
}

static void counters_see_tensor_work(void)
{
    cuda_emu_counters_reset();
    cuda_emu_counters_enable(1);
    (void)gemm_error<__half, wmma::row_major, wmma::row_major, 16>(false, 11);
    __half *x = device_alloc<__half>(THREADS), *y = device_alloc<__half>(THREADS);
    cudaMemset(x, 0, sizeof(__half) * THREADS);
    CT_EMU_LAUNCH(half_work, 1, THREADS, 0, 0, x, y);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
    cuda_emu_kernel_counters gemm, half;
    memset(&gemm, 0, sizeof gemm);
    memset(&half, 0, sizeof half);
    CHECK(cuda_emu_counters_find("gemm", &gemm) == 0, "the GEMM was not counted");
    CHECK(cuda_emu_counters_find("half_work", &half) == 0, "half_work was not counted");
    const unsigned long long mads = (unsigned long long)GM * GN * GK;
    CHECK(gemm.global_load_bytes == 2ull * TILES * (GK / TILE) * 2 * TILE * TILE &&
              gemm.global_store_bytes == 4ull * GM * GN,
          "GEMM: %llu bytes loaded, %llu stored", gemm.global_load_bytes,
          gemm.global_store_bytes);
    CHECK(gemm.global_load_sectors * 32 == gemm.global_load_bytes &&
              gemm.global_store_sectors * 32 == gemm.global_store_bytes,
          "GEMM: tiles not moved as whole sectors (%llu, %llu)", gemm.global_load_sectors,
          gemm.global_store_sectors);
    if (cuda_emu_counters_fp_and_branches()) {
        CHECK(gemm.mma_ops == mads && gemm.flops == 2 * mads && gemm.fp16_ops == 0 &&
                  gemm.fp32_adds + gemm.fp32_muls + gemm.fp32_fmas + gemm.fp32_other == 0,
              "GEMM: %llu mma ops, %llu FLOPs, %llu fp16, want %llu mma ops, %llu FLOPs",
              gemm.mma_ops, gemm.flops, gemm.fp16_ops, mads, 2 * mads);
        CHECK(half.fp16_ops == 2ull * THREADS && half.flops == 3ull * THREADS,
              "half_work: %llu fp16 ops, %llu FLOPs", half.fp16_ops, half.flops);
    } else {
        printf("# fp work: not in this build (emu/count_pass.cpp needs LLVM 14's headers)\n");
    }
    cuda_emu_counters_enable(0);
    cudaFree(x), cudaFree(y);
}

int main(void)
{
    make_table(&half_format);
    make_table(&bf16_format);
    RUN(every_pattern_round_trips);
    RUN(float_conversions_round_to_nearest_even);
    RUN(conversions_in_a_kernel);
    RUN(arithmetic_rounds_once);
    RUN(shuffles_move_16_bit_types);
    RUN(wmma_gemm_matches_double);
    RUN(accumulator_elements_cover_the_tile);
    RUN(wmma_misuse_fails);
    if (cuda_emu_counters_available())
        RUN(counters_see_tensor_work);
    else
        printf("# kernel counters: not in this build (they need clang, without SANITIZE)\n");
    free(half_format.values);
    free(bf16_format.values);
    return harness_finish();
}
