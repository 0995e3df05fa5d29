/*
 * The tensor-core sibling of gemm.cuh's tiled GEMM, for 16-bit operands
 * (bf16 or f16, a bf16 or fp16 graph): c[m,n] = sum_k a(m,k) b(k,n) with
 * every product exact in f32 and the sums in f32 (wmma m16n16k16, float
 * accumulators), each c value rounded once to 16 bits where the problem
 * stores it, after the f32 bias and the fused relu: the CPU reference's
 * rounding point (cpu/widen.c), so the two differ only by the order of
 * their f32 sums.
 *
 * A block of 4 warps computes a 64 x 64 tile of c; warp w its 32 x 32
 * quarter (rows 32 (w / 2), columns 32 (w % 2)) as 2 x 2 accumulator
 * fragments.  Per 32-deep k slice the block stages a (as a_tile[k][m]: a
 * col_major matrix_a) and b (b_tile[k][n]: row_major matrix_b) in shared
 * memory, the 16-bit bits moved as they are (no conversion: the operands
 * are already of the mma's type); then each warp runs 2 k steps of 2 x 2
 * mma_sync.  The staging threads run along k where the problem stores an
 * operand along k (a_along_k, b_along_k), along m or n otherwise, so their
 * global reads are coalesced either way.  The tiles' rows are padded by 8
 * halves: wmma needs 32-byte aligned fragments and an ldm of whole 16 bytes,
 * and 72 halves (36 words) a row moves the rows of a fragment's load across
 * the banks.  After the k loop the accumulators go through shared memory
 * (c_tile, rows padded by 4 floats) so that the block's threads store c
 * with consecutive threads on consecutive n, as gemm.cuh does: the problem
 * rounds each value there.
 *
 * blockIdx.z is group * splits + split as in gemm.cuh (k_chunk a multiple
 * of TC_TILE_K); a problem with splits > 1 stores its parts in f32 and
 * rounds their sum once (conv_tc.cu).  Static shared memory: 2 x 32 x 72 x
 * 2 + 64 x 68 x 4 + 64 x 4 = 26,880 bytes (26.25 KiB).
 *
 * A Problem has: typedef S (ct_bf16_bits or ct_f16_bits, elementwise.cuh),
 * int m, n, k, splits, k_chunk, kernel_name, a_along_k(), b_along_k() and
 * store(group, split, m, n, float value) as gemm.cuh's, and
 *   uint16_t load_a(int group, int m, int k), load_b(int group, int k, int n):
 *     the operand's 16 bits;
 * adds_row_bias and row_bias(group, m) as in gemm.cuh (ct_gemm_defaults).
 */
#ifndef CT_CUDA_GEMM_TC_CUH
#define CT_CUDA_GEMM_TC_CUH

#include <mma.h>
#include <type_traits>

#include "cuda/elementwise.cuh"
#include "cuda/gemm.cuh"

enum {
    TC_TILE_M = 64,
    TC_TILE_N = 64,
    TC_TILE_K = 32,
    TC_THREADS = 128,
    TC_FRAG = 16,  /* the m16n16k16 fragment's side */
    TC_WARP_SIDE = 32, /* each warp's square of c: 2 x 2 fragments */
    TC_PAD = 8,    /* halves after each a and b tile row: 16 bytes, see above */
    TC_C_PAD = 4,  /* floats after each c tile row: 16 bytes */
};

/* The wmma operand type of a storage type. */
template <class S> struct ct_tc_type;
template <> struct ct_tc_type<ct_bf16_bits> {
    typedef __nv_bfloat16 type;
};
template <> struct ct_tc_type<ct_f16_bits> {
    typedef __half type;
};

/* tile[kk][i] = load(k0 + kk, i0 + i) for a TC_TILE_K x width slice (0
 * outside [0, limit) x [.., k_end)): threads along k when along_k. */
template <int width, class Load>
static __device__ inline void tc_stage(uint16_t (*tile)[width + TC_PAD], bool along_k, int i0,
                                       int limit, int k0, int k_end, Load load)
{
    for (int e = threadIdx.x; e < TC_TILE_K * width; e += TC_THREADS) {
        int kk = along_k ? e % TC_TILE_K : e / width;
        int i = along_k ? e / TC_TILE_K : e % width;
        int k = k0 + kk;
        tile[kk][i] = i0 + i < limit && k < k_end ? load(k, i0 + i) : (uint16_t)0;
    }
}

/* bf16 mma needs sm_80, f16 sm_70 (the default architectures are 80 and
 * up; a plan of a precision the device lacks is refused, docs/precision.md). */
template <class T> static __device__ constexpr bool ct_tc_compiled()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
    return false;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    return !std::is_same<T, __nv_bfloat16>::value;
#else
    return true;
#endif
}

template <class Problem>
static __global__ void __launch_bounds__(TC_THREADS) ct_tc_gemm(Problem p)
{
    using namespace nvcuda;
    typedef typename ct_tc_type<typename Problem::S>::type T;
    enum { FRAGS = TC_WARP_SIDE / TC_FRAG, A_LD = TC_TILE_M + TC_PAD, B_LD = TC_TILE_N + TC_PAD,
           C_LD = TC_TILE_N + TC_C_PAD };
    alignas(32) __shared__ uint16_t a_tile[TC_TILE_K][A_LD];
    alignas(32) __shared__ uint16_t b_tile[TC_TILE_K][B_LD];
    alignas(32) __shared__ float c_tile[TC_TILE_M][C_LD];
    __shared__ float row_bias[TC_TILE_M];
    int group = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
    int m0 = blockIdx.y * TC_TILE_M, n0 = blockIdx.x * TC_TILE_N;
    int warp = threadIdx.x / CT_CUDA_WARP;
    int warp_m = warp / 2 * TC_WARP_SIDE, warp_n = warp % 2 * TC_WARP_SIDE;
    int k_begin = split * p.k_chunk;
    int k_end = min(p.k, k_begin + p.k_chunk);
    gemm_stage_row_bias<TC_TILE_M>(p, row_bias, group, m0);
    if constexpr (ct_tc_compiled<T>()) {
        wmma::fragment<wmma::accumulator, TC_FRAG, TC_FRAG, TC_FRAG, float> acc[FRAGS][FRAGS];
        for (int i = 0; i < FRAGS; i++)
            for (int j = 0; j < FRAGS; j++)
                wmma::fill_fragment(acc[i][j], 0.0f);
        for (int k0 = k_begin; k0 < k_end; k0 += TC_TILE_K) {
            tc_stage<TC_TILE_M>(a_tile, p.a_along_k(), m0, p.m, k0, k_end,
                                [&](int k, int m) { return p.load_a(group, m, k); });
            tc_stage<TC_TILE_N>(b_tile, p.b_along_k(), n0, p.n, k0, k_end,
                                [&](int k, int n) { return p.load_b(group, k, n); });
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < TC_TILE_K; kk += TC_FRAG) {
                wmma::fragment<wmma::matrix_a, TC_FRAG, TC_FRAG, TC_FRAG, T, wmma::col_major>
                    a_frag[FRAGS];
                wmma::fragment<wmma::matrix_b, TC_FRAG, TC_FRAG, TC_FRAG, T, wmma::row_major>
                    b_frag[FRAGS];
#pragma unroll
                for (int i = 0; i < FRAGS; i++)
                    wmma::load_matrix_sync(
                        a_frag[i], reinterpret_cast<const T *>(&a_tile[kk][warp_m + TC_FRAG * i]),
                        A_LD);
#pragma unroll
                for (int j = 0; j < FRAGS; j++)
                    wmma::load_matrix_sync(
                        b_frag[j], reinterpret_cast<const T *>(&b_tile[kk][warp_n + TC_FRAG * j]),
                        B_LD);
#pragma unroll
                for (int i = 0; i < FRAGS; i++)
#pragma unroll
                    for (int j = 0; j < FRAGS; j++)
                        wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
            }
            __syncthreads();
        }
        for (int i = 0; i < FRAGS; i++)
            for (int j = 0; j < FRAGS; j++)
                wmma::store_matrix_sync(&c_tile[warp_m + TC_FRAG * i][warp_n + TC_FRAG * j],
                                        acc[i][j], C_LD, wmma::mem_row_major);
    } else {
        __trap();
    }
    __syncthreads();
    for (int e = threadIdx.x; e < TC_TILE_M * TC_TILE_N; e += TC_THREADS) {
        int row = e / TC_TILE_N, col = e % TC_TILE_N;
        float value = c_tile[row][col];
        if constexpr (Problem::adds_row_bias)
            value += row_bias[row];
        if (m0 + row < p.m && n0 + col < p.n)
            p.store(group, split, m0 + row, n0 + col, value);
    }
}

/* Launches p over `groups` groups (nothing to do for an empty c). */
template <class Problem>
static ct_status ct_cuda_launch_tc_gemm(const Problem &p, int groups, cudaStream_t stream)
{
    if (p.m <= 0 || p.n <= 0 || groups <= 0)
        return CT_OK;
    dim3 grid((unsigned)((p.n + TC_TILE_N - 1) / TC_TILE_N),
              (unsigned)((p.m + TC_TILE_M - 1) / TC_TILE_M), (unsigned)(groups * p.splits));
    CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, ct_tc_gemm<Problem>, grid, TC_THREADS, 0, stream,
                         p);
    return CT_OK;
}

/* The 16-bit bits of element i of a storage array. */
template <class S> __device__ inline uint16_t ct_tc_bits(const S *array, size_t i)
{
    return array[i].bits;
}

/* launch(tag) with a value of the storage type of a 16-bit dtype. */
template <class Launch> inline ct_status ct_with_half_storage(ct_dtype dtype, Launch launch)
{
    switch (dtype) {
    case CT_BF16: return launch(ct_bf16_bits{});
    case CT_F16: return launch(ct_f16_bits{});
    default: break;
    }
    return ct_set_error(CT_ERR_DTYPE, "a tensor-core kernel of f16 and bf16 was given %s data",
                        ct_dtype_name(dtype));
}

#endif
