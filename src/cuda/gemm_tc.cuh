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
 * fragments.  Per 32-deep k slice the block stages a and b in shared
 * memory, the 16-bit bits moved as they are (no conversion: the operands
 * are already of the mma's type); then each warp runs 2 k steps of 2 x 2
 * mma_sync.  Each operand's tile keeps the order the problem stores it in
 * (a_along_k, b_along_k), so that the staging threads both read global
 * memory and write shared memory at consecutive addresses:
 *   along k: by_i[i][k], threads along k (a row_major matrix_a, a col_major
 *            matrix_b); rows of 32 + 8 halves (80 bytes);
 *   along i: by_k[k][i], threads along m or n (a col_major matrix_a, a
 *            row_major matrix_b); rows of 64 + 8 halves (144 bytes).
 * (One [k][i] tile for both made the along-k staging write a column: 32
 * lanes' halves 36 words apart, 4 to a bank, 26-59% excess wavefronts in
 * the convolutions.)  wmma needs 32-byte aligned fragments and an ldm of
 * whole 16 bytes; both row lengths are 16 bytes mod 128 or 80 bytes, so
 * the 8 rows of 16 bytes that a fragment load reads at once (ldmatrix) lie
 * in distinct banks, and so do the emulator's lanes' runs.  After the k loop the accumulators go through shared memory
 * (c_tile, rows padded by 4 floats) so that the block's threads store c
 * with consecutive threads on consecutive n, as gemm.cuh does: the problem
 * rounds each value there.
 *
 * blockIdx.z is group * splits + split as in gemm.cuh (k_chunk a multiple
 * of TC_TILE_K); a problem with sums_parts may split k as there (its parts
 * in f32, added by gemm.cuh's finishing kernel, the sum rounded once where
 * the problem stores it: conv_tc.cu's weight gradient).  Static shared memory: 2 x 64 x 40 x
 * 2 + 64 x 68 x 4 + 64 x 4 = 27,904 bytes (27.25 KiB).
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
    TC_TILE_SIDE = 64, /* both: one operand tile type serves a and b */
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

/* An operand's slice of TC_TILE_K x TC_TILE_SIDE, in the problem's order. */
union tc_tile {
    uint16_t by_k[TC_TILE_K][TC_TILE_SIDE + TC_PAD];
    uint16_t by_i[TC_TILE_SIDE][TC_TILE_K + TC_PAD];
};
static_assert(TC_TILE_M == TC_TILE_SIDE && TC_TILE_N == TC_TILE_SIDE, "one tile type");

/* The slice load(k0 + kk, i0 + i) (0 outside [0, limit) x [.., k_end)):
 * threads along k into by_i when along_k, along i into by_k otherwise. */
template <bool along_k, class Load>
static __device__ inline void tc_stage(tc_tile &tile, int i0, int limit, int k0, int k_end,
                                       Load load)
{
    for (int e = threadIdx.x; e < TC_TILE_K * TC_TILE_SIDE; e += TC_THREADS) {
        int kk = along_k ? e % TC_TILE_K : e / TC_TILE_SIDE;
        int i = along_k ? e / TC_TILE_K : e % TC_TILE_SIDE;
        int k = k0 + kk;
        uint16_t bits = i0 + i < limit && k < k_end ? load(k, i0 + i) : (uint16_t)0;
        if (along_k)
            tile.by_i[i][kk] = bits;
        else
            tile.by_k[kk][i] = bits;
    }
}

/* The fragment layouts of the two orders: a[m][k] is a row_major matrix_a,
 * a[k][m] a col_major one; b[n][k] a col_major matrix_b, b[k][n] row_major. */
template <bool along_k> struct tc_a_layout {
    typedef nvcuda::wmma::col_major type;
};
template <> struct tc_a_layout<true> {
    typedef nvcuda::wmma::row_major type;
};
template <bool along_k> struct tc_b_layout {
    typedef nvcuda::wmma::row_major type;
};
template <> struct tc_b_layout<true> {
    typedef nvcuda::wmma::col_major type;
};

/* The fragment of the tile at (kk, i) and its ldm. */
template <bool along_k, class T>
static __device__ inline const T *tc_fragment_at(const tc_tile &tile, int kk, int i)
{
    return reinterpret_cast<const T *>(along_k ? &tile.by_i[i][kk] : &tile.by_k[kk][i]);
}
template <bool along_k> static __device__ constexpr unsigned tc_ldm()
{
    return along_k ? TC_TILE_K + TC_PAD : TC_TILE_SIDE + TC_PAD;
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

/* The k loop of ct_tc_gemm for operands stored in the orders A_K, B_K:
 * the block's 64 x 64 tile of c into c_tile. */
template <bool A_K, bool B_K, class Problem>
static __device__ inline void tc_gemm_tile(const Problem &p, tc_tile &a_tile, tc_tile &b_tile,
                                           float (*c_tile)[TC_TILE_N + TC_C_PAD])
{
    using namespace nvcuda;
    typedef typename ct_tc_type<typename Problem::S>::type T;
    enum { FRAGS = TC_WARP_SIDE / TC_FRAG };
    int group = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
    int m0 = blockIdx.y * TC_TILE_M, n0 = blockIdx.x * TC_TILE_N;
    int warp = threadIdx.x / CT_CUDA_WARP;
    int warp_m = warp / 2 * TC_WARP_SIDE, warp_n = warp % 2 * TC_WARP_SIDE;
    int k_begin = split * p.k_chunk;
    int k_end = min(p.k, k_begin + p.k_chunk);
    wmma::fragment<wmma::accumulator, TC_FRAG, TC_FRAG, TC_FRAG, float> acc[FRAGS][FRAGS];
    for (int i = 0; i < FRAGS; i++)
        for (int j = 0; j < FRAGS; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k0 = k_begin; k0 < k_end; k0 += TC_TILE_K) {
        tc_stage<A_K>(a_tile, m0, p.m, k0, k_end,
                      [&](int k, int m) { return p.load_a(group, m, k); });
        tc_stage<B_K>(b_tile, n0, p.n, k0, k_end,
                      [&](int k, int n) { return p.load_b(group, k, n); });
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TC_TILE_K; kk += TC_FRAG) {
            wmma::fragment<wmma::matrix_a, TC_FRAG, TC_FRAG, TC_FRAG, T,
                           typename tc_a_layout<A_K>::type>
                a_frag[FRAGS];
            wmma::fragment<wmma::matrix_b, TC_FRAG, TC_FRAG, TC_FRAG, T,
                           typename tc_b_layout<B_K>::type>
                b_frag[FRAGS];
#pragma unroll
            for (int i = 0; i < FRAGS; i++)
                wmma::load_matrix_sync(
                    a_frag[i], tc_fragment_at<A_K, T>(a_tile, kk, warp_m + TC_FRAG * i),
                    tc_ldm<A_K>());
#pragma unroll
            for (int j = 0; j < FRAGS; j++)
                wmma::load_matrix_sync(
                    b_frag[j], tc_fragment_at<B_K, T>(b_tile, kk, warp_n + TC_FRAG * j),
                    tc_ldm<B_K>());
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
                                    acc[i][j], TC_TILE_N + TC_C_PAD, wmma::mem_row_major);
}

template <class Problem>
static __global__ void __launch_bounds__(TC_THREADS) ct_tc_gemm(Problem p)
{
    typedef typename ct_tc_type<typename Problem::S>::type T;
    alignas(32) __shared__ tc_tile a_tile, b_tile;
    alignas(32) __shared__ float c_tile[TC_TILE_M][TC_TILE_N + TC_C_PAD];
    __shared__ float row_bias[TC_TILE_M];
    int group = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
    int m0 = blockIdx.y * TC_TILE_M, n0 = blockIdx.x * TC_TILE_N;
    gemm_stage_row_bias<TC_TILE_M>(p, row_bias, group, m0);
    if constexpr (ct_tc_compiled<T>()) {
        /* one body per pair of orders (a convolution's are fixed: one) */
        if (p.a_along_k() && p.b_along_k())
            tc_gemm_tile<true, true>(p, a_tile, b_tile, c_tile);
        else if (p.a_along_k())
            tc_gemm_tile<true, false>(p, a_tile, b_tile, c_tile);
        else if (p.b_along_k())
            tc_gemm_tile<false, true>(p, a_tile, b_tile, c_tile);
        else
            tc_gemm_tile<false, false>(p, a_tile, b_tile, c_tile);
    } else {
        __trap();
    }
    __syncthreads();
    for (int e = threadIdx.x; e < TC_TILE_M * TC_TILE_N; e += TC_THREADS) {
        int row = e / TC_TILE_N, col = e % TC_TILE_N;
        if (m0 + row < p.m && n0 + col < p.n)
            gemm_put(p, group, split, m0 + row, n0 + col, c_tile[row][col], row_bias[row]);
    }
}

/* Launches p over `groups` groups (nothing to do for an empty c). */
template <class Problem>
static ct_status ct_cuda_launch_tc_gemm(Problem p, int groups, cudaStream_t stream)
{
    if (p.m <= 0 || p.n <= 0 || groups <= 0)
        return CT_OK;
    dim3 grid((unsigned)((p.n + TC_TILE_N - 1) / TC_TILE_N),
              (unsigned)((p.m + TC_TILE_M - 1) / TC_TILE_M), (unsigned)(groups * p.splits));
    gemm_parts_for(p, groups, (int64_t)grid.x * grid.y * groups, false, stream);
    CT_CUDA_LAUNCH_NAMED(Problem::kernel_name, ct_tc_gemm<Problem>, grid, TC_THREADS, 0, stream,
                         p);
    return gemm_finish_launch(p, stream);
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
