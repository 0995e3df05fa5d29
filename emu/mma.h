/*
 * The warp matrix API (nvcuda::wmma, <mma.h>) on the emulated device,
 * written from the CUDA C++ Programming Guide's "Warp Matrix Functions".
 *
 * Shapes: m16n16k16, m32n8k16 and m8n32k16 with __half or __nv_bfloat16
 * A and B, and m16n16k8 with precision::tf32 (stored as float); the
 * accumulator is float.  A fragment holds its matrix (A: M x K, B: K x N,
 * accumulator: M x N) once over the warp.  Taken in the order of the
 * fragment's layout (row-major for an accumulator), the matrix is cut into
 * runs of 16 bytes (8 halves, 4 floats; less where a lane holds less),
 * dealt to the lanes in turn: lane l holds runs l, l + 32, ..., so x[i] of
 * lane l is element ((i / run) * 32 + l) * run + i % run.  A run is
 * consecutive in memory, and the lanes' n-th runs together are whole rows
 * (or columns), so a warp's load or store moves whole sectors, as a GPU's
 * does.  CUDA
 * leaves the mapping unspecified; it promises only that an element-wise
 * loop over x[] on every lane touches each element once, which holds here
 * (a GPU's fragments of A and B may hold elements twice: its num_elements
 * can be larger).
 *
 * Every function is a warp collective (emu/block.cpp): the 32 lanes of a
 * full warp must make the same call, and a lane that does not fails the
 * kernel as a shuffle's would.  Loads and stores are each lane's own
 * accesses, a run in one 8- or 16-byte access where memory holds it in
 * order (element by element for an accumulator in the other layout),
 * before the lanes meet, so the memory counters see them; they check
 * CUDA's rules (a 32-byte aligned pointer, ldm a multiple of 16 bytes).
 * mma_sync is done once, by the last lane to arrive, on every
 * lane's fragments: D[m][n] = C[m][n] + sum_k A[m][k] * B[k][n], each
 * product exact in float (tf32 operands: the top 19 bits of each float,
 * the rest ignored) and added in fp32, rounded to nearest, in the order
 * k = 0, 1, ..., K-1.  A GPU adds in an order and with internal rounding
 * of its own: compare with a tolerance of a few ulps of sum_k |A B|.  It
 * counts M x N x K tensor-core multiply-adds (mma_ops) and 2 M N K FLOPs
 * for the warp, once.
 */
#ifndef CT_EMU_MMA_H
#define CT_EMU_MMA_H

#include <stddef.h>

#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a;
struct matrix_b;
struct accumulator;
struct row_major;
struct col_major;
enum layout_t { mem_row_major, mem_col_major };
namespace precision {
struct tf32;
}

/* To TF32: round to nearest, ties away from zero (PTX cvt.rna.tf32.f32),
 * the low 13 bits zero; NaN and infinity stay. */
inline float __float_to_tf32(float value)
{
    uint32_t bits = emu::float_bits(value);
    if ((bits & 0x7f800000u) != 0x7f800000u)
        bits = (bits + 0x1000u) & ~0x1fffu;
    return emu::bits_float(bits);
}

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment;

} // namespace wmma
} // namespace nvcuda

namespace emu {
namespace wmma_detail {

using namespace nvcuda::wmma;

template <class Use, int M, int N, int K>
struct matrix_shape;
template <int M, int N, int K>
struct matrix_shape<matrix_a, M, N, K> {
    enum { rows = M, cols = K };
};
template <int M, int N, int K>
struct matrix_shape<matrix_b, M, N, K> {
    enum { rows = K, cols = N };
};
template <int M, int N, int K>
struct matrix_shape<accumulator, M, N, K> {
    enum { rows = M, cols = N };
};

template <class T>
struct storage {
    typedef T type;
};
template <>
struct storage<precision::tf32> {
    typedef float type;
};

template <class Use, int M, int N, int K, class T, class Layout>
constexpr bool supported()
{
    bool half_shape = (M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) ||
                      (M == 8 && N == 32 && K == 16);
    bool half_type = std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;
    bool tf32 = std::is_same<T, precision::tf32>::value && M == 16 && N == 16 && K == 8;
    bool layout = std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value;
    if (std::is_same<Use, accumulator>::value)
        return std::is_same<T, float>::value && std::is_void<Layout>::value &&
               (half_shape || (M == 16 && N == 16 && K == 8));
    return layout && ((half_type && half_shape) || tf32);
}

/* The calling lane: its place in its warp (the block's threads in x, y, z order). */
inline unsigned lane()
{
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % warpSize;
}

/* Where `ptr` holds element (row, col): a row every ldm elements, or a column. */
inline size_t offset(int row, int col, unsigned ldm, bool column_major)
{
    return column_major ? (size_t)col * ldm + (size_t)row : (size_t)row * ldm + (size_t)col;
}

/* The lanes meet (a warp collective of `kind`, the whole warp). */
inline void meet(const char *file, int line, collective_kind kind, uint64_t value = 0)
{
    warp_collective(file, line, kind, 0xffffffffu, value, 0, warpSize);
}

/* CUDA's rules for the memory of a load or store, checked, not undefined. */
inline void check_memory(const void *ptr, unsigned ldm, size_t element_bytes, const char *file,
                         int line, const char *what)
{
    if ((uintptr_t)ptr % 32 != 0 || ldm * element_bytes % 16 != 0)
        kernel_trap(file, line, what);
}

/* A fragment type's matrix: rows, columns, whether it is an accumulator,
 * whether its elements are in column-major order (a col_major A or B), and
 * its runs: 16 bytes (or the lane's whole share, if less) of consecutive
 * elements in that order, dealt to the lanes in turn. */
template <class Fragment>
struct traits;
template <class Use, int M, int N, int K, class T, class Layout>
struct traits<fragment<Use, M, N, K, T, Layout>> {
    typedef fragment<Use, M, N, K, T, Layout> F;
    enum {
        rows = matrix_shape<Use, M, N, K>::rows,
        cols = matrix_shape<Use, M, N, K>::cols,
        is_accumulator = std::is_same<Use, accumulator>::value,
        column_order = std::is_same<Layout, col_major>::value,
        per_16_bytes = 16 / sizeof(typename F::storage_element_type),
        run = (int)per_16_bytes < (int)F::num_elements ? (int)per_16_bytes : (int)F::num_elements,
    };
    static_assert((column_order ? rows : cols) % run == 0, "a run stays in its row or column");
};

/* The place in its matrix of x[i] of `lane`: element ((i / run) * 32 + lane)
 * * run + i % run in the fragment's order. */
template <class Fragment>
inline void position(unsigned lane, int i, int *row, int *col)
{
    typedef traits<Fragment> t;
    unsigned e = ((unsigned)i / t::run * warpSize + lane) * t::run + (unsigned)i % t::run;
    *row = (int)(t::column_order ? e % t::rows : e / t::cols);
    *col = (int)(t::column_order ? e / t::rows : e % t::cols);
}

/* One run between memory and a fragment, in one access of 8 or 16 bytes, as
 * the GPU's vector loads and stores: the counters see one access. */
typedef uint32_t run16 __attribute__((vector_size(16), may_alias));
typedef uint64_t run8 __attribute__((may_alias));
inline void load_run(void *fragment_x, const void *memory, size_t bytes)
{
    if (bytes == 16) {
        run16 bits = *static_cast<const run16 *>(memory);
#ifdef __x86_64__
        asm("" : "+x"(bits)); /* keeps the host compiler from splitting the access */
#endif
        memcpy(fragment_x, &bits, sizeof bits);
    } else {
        run8 bits = *static_cast<const run8 *>(memory);
        memcpy(fragment_x, &bits, sizeof bits);
    }
}
inline void store_run(void *memory, const void *fragment_x, size_t bytes)
{
    if (bytes == 16) {
        run16 bits;
        memcpy(&bits, fragment_x, sizeof bits);
#ifdef __x86_64__
        asm("" : "+x"(bits));
#endif
        *static_cast<run16 *>(memory) = bits;
    } else {
        run8 bits;
        memcpy(&bits, fragment_x, sizeof bits);
        *static_cast<run8 *>(memory) = bits;
    }
}

/* Between `ptr` (row- or column-major, leading dimension ldm) and the
 * lane's elements of `f`: by runs where they are consecutive in memory,
 * else element by element. */
template <class Fragment, class Pointee>
inline void transfer(Fragment &f, Pointee *ptr, unsigned ldm, bool column_major, bool store)
{
    typedef traits<Fragment> t;
    unsigned me = lane();
    int row, col;
    if (column_major == (bool)t::column_order) {
        for (int i = 0; i < Fragment::num_elements; i += t::run) {
            position<Fragment>(me, i, &row, &col);
            Pointee *p = ptr + offset(row, col, ldm, column_major);
            size_t bytes = t::run * sizeof f.x[0];
            if (store)
                store_run((void *)p, (const void *)&f.x[i], bytes);
            else
                load_run((void *)&f.x[i], (const void *)p, bytes);
        }
        return;
    }
    for (int i = 0; i < Fragment::num_elements; i++) {
        position<Fragment>(me, i, &row, &col);
        Pointee *p = ptr + offset(row, col, ldm, column_major);
        if (store)
            memcpy((void *)p, (const void *)&f.x[i], sizeof f.x[i]);
        else
            memcpy((void *)&f.x[i], (const void *)p, sizeof f.x[i]);
    }
}

template <class Fragment, class Pointee>
inline void load(Fragment &f, const Pointee *ptr, unsigned ldm, bool column_major,
                 const char *file, int line)
{
    check_memory(ptr, ldm, sizeof(Pointee), file, line,
                 "wmma::load_matrix_sync with a pointer not 32-byte aligned or an ldm not a "
                 "multiple of 16 bytes (CUDA leaves it undefined)");
    transfer(f, const_cast<Pointee *>(ptr), ldm, column_major, false);
    meet(file, line, COLLECTIVE_WMMA_LOAD);
}

/* An operand of A or B as the tensor cores take it: exact in float. */
inline float operand(__half value)
{
    return __half2float(value);
}
inline float operand(__nv_bfloat16 value)
{
    return __bfloat162float(value);
}
inline float operand(float tf32)
{
    return bits_float(float_bits(tf32) & ~0x1fffu);
}

template <int M, int N, int K, class A, class B>
struct mma_work : warp_work {
    typedef fragment<accumulator, M, N, K, float> C;
    C *d;
    const A *a;
    const B *b;
    const C *c;
};

/* Every lane's fragment (the `member` of its work), as the matrix it holds. */
template <class Fragment, class Work, class Member>
inline void gather(warp_work *const *lanes, Member member, float *matrix)
{
    int row, col;
    for (int l = 0; l < warpSize; l++) {
        const Fragment &f = *(static_cast<Work *>(lanes[l])->*member);
        for (int i = 0; i < Fragment::num_elements; i++) {
            position<Fragment>((unsigned)l, i, &row, &col);
            if constexpr (traits<Fragment>::is_accumulator)
                matrix[row * traits<Fragment>::cols + col] = f.x[i];
            else
                matrix[row * traits<Fragment>::cols + col] = operand(f.x[i]);
        }
    }
}

/* D = A B + C for the whole warp, run by the last lane to arrive. */
template <int M, int N, int K, class A, class B>
void multiply_add(warp_work *const *lanes)
{
    typedef mma_work<M, N, K, A, B> work;
    typedef typename work::C C;
    float a[M * K], b[K * N], sum[M * N];
    gather<A, work>(lanes, &work::a, a);
    gather<B, work>(lanes, &work::b, b);
    gather<C, work>(lanes, &work::c, sum); /* before any d is written: d may be c */
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                sum[m * N + n] = fmaf(a[m * K + k], b[k * N + n], sum[m * N + n]);
    int row, col;
    for (int l = 0; l < warpSize; l++) {
        C &d = *static_cast<work *>(lanes[l])->d;
        for (int i = 0; i < C::num_elements; i++) {
            position<C>((unsigned)l, i, &row, &col);
            d.x[i] = sum[row * N + col];
        }
    }
    count_fp_work<0, M * N * K, 2 * M * N * K>();
}

} // namespace wmma_detail
} // namespace emu

namespace nvcuda {
namespace wmma {

template <class Use, int M, int N, int K, class T, class Layout>
class alignas(8) fragment {
    static_assert(emu::wmma_detail::supported<Use, M, N, K, T, Layout>(),
                  "the emulator's wmma has m16n16k16, m32n8k16 and m8n32k16 with __half or "
                  "__nv_bfloat16, m16n16k8 with precision::tf32, row_major or col_major A "
                  "and B, and float accumulators (no layout)");

  public:
    typedef T element_type;
    typedef typename emu::wmma_detail::storage<T>::type storage_element_type;
    enum {
        num_elements = emu::wmma_detail::matrix_shape<Use, M, N, K>::rows *
                       emu::wmma_detail::matrix_shape<Use, M, N, K>::cols / 32,
        num_storage_elements = num_elements,
    };
    storage_element_type x[num_elements];
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(
    fragment<Use, M, N, K, T, Layout> &f,
    const typename fragment<Use, M, N, K, T, Layout>::storage_element_type &value,
    const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    for (int i = 0; i < f.num_elements; i++)
        f.x[i] = value;
    emu::wmma_detail::meet(file, line, emu::COLLECTIVE_WMMA_FILL);
}

/* A or B: the layout is the fragment's. */
template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(
    fragment<Use, M, N, K, T, Layout> &f,
    const typename fragment<Use, M, N, K, T, Layout>::storage_element_type *ptr, unsigned ldm,
    const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    static_assert(!std::is_void<Layout>::value,
                  "an accumulator's load_matrix_sync names the memory's layout_t");
    emu::wmma_detail::load(f, ptr, ldm, std::is_same<Layout, col_major>::value, file, line);
}

template <int M, int N, int K>
inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *ptr,
                             unsigned ldm, layout_t layout, const char *file = __builtin_FILE(),
                             int line = __builtin_LINE())
{
    emu::wmma_detail::load(f, ptr, ldm, layout == mem_col_major, file, line);
}

template <int M, int N, int K>
inline void store_matrix_sync(float *ptr, const fragment<accumulator, M, N, K, float> &f,
                              unsigned ldm, layout_t layout,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    emu::wmma_detail::check_memory(ptr, ldm, sizeof(float), file, line,
                                   "wmma::store_matrix_sync with a pointer not 32-byte aligned "
                                   "or an ldm not a multiple of 16 bytes (CUDA leaves it "
                                   "undefined)");
    /* f is only read: transfer() moves either way */
    emu::wmma_detail::transfer(const_cast<fragment<accumulator, M, N, K, float> &>(f), ptr, ldm,
                               layout == mem_col_major, true);
    emu::wmma_detail::meet(file, line, emu::COLLECTIVE_WMMA_STORE);
}

template <int M, int N, int K, class T, class LayoutA, class LayoutB>
inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
                     const fragment<matrix_a, M, N, K, T, LayoutA> &a,
                     const fragment<matrix_b, M, N, K, T, LayoutB> &b,
                     const fragment<accumulator, M, N, K, float> &c,
                     const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    typedef fragment<matrix_a, M, N, K, T, LayoutA> A;
    typedef fragment<matrix_b, M, N, K, T, LayoutB> B;
    emu::wmma_detail::mma_work<M, N, K, A, B> work;
    work.complete = emu::wmma_detail::multiply_add<M, N, K, A, B>;
    work.d = &d;
    work.a = &a;
    work.b = &b;
    work.c = &c;
    emu::wmma_detail::meet(file, line, emu::COLLECTIVE_WMMA_MMA,
                           (uint64_t)(uintptr_t)static_cast<emu::warp_work *>(&work));
}

} // namespace wmma
} // namespace nvcuda

#endif
