/*
 * The emulated device's CUDA C++ language: what a .cu file sees when it is
 * compiled as plain C++ (g++ or clang++) for the emulator instead of by nvcc.
 *
 * Every GPU thread of a block runs as its own fiber; __syncthreads() and
 * the warp collectives switch fibers and are checked (a barrier that not
 * every thread reaches, a warp collective whose mask names a lane that does
 * not take part: the kernel fails with a message naming kernel, block,
 * thread and source line).  __shared__ variables live in one thread-local
 * section per host worker, NaN-filled (0xff bytes) when each block starts.
 * docs/emulator.md describes the model and what it cannot show.
 */
#ifndef CT_EMU_DEVICE_H
#define CT_EMU_DEVICE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

/* ---- vector types ----------------------------------------------------------- */

struct uint3 {
    unsigned x, y, z;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

#define CT_EMU_VECTOR2(name, type)                                                     \
    struct alignas(2 * sizeof(type)) name {                                            \
        type x, y;                                                                     \
    };                                                                                 \
    static inline name make_##name(type x, type y) { return name{x, y}; }
#define CT_EMU_VECTOR4(name, type)                                                     \
    struct alignas(4 * sizeof(type)) name {                                            \
        type x, y, z, w;                                                               \
    };                                                                                 \
    static inline name make_##name(type x, type y, type z, type w) { return name{x, y, z, w}; }
CT_EMU_VECTOR2(float2, float)
CT_EMU_VECTOR4(float4, float)
CT_EMU_VECTOR2(int2, int)
CT_EMU_VECTOR4(int4, int)
CT_EMU_VECTOR2(uint2, unsigned)
CT_EMU_VECTOR4(uint4, unsigned)
CT_EMU_VECTOR2(double2, double)
#undef CT_EMU_VECTOR2
#undef CT_EMU_VECTOR4

/* ---- qualifiers ------------------------------------------------------------------ */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline)) /* as nvcc: inlined, or an error */
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
/* A kernel parameter read in place in the parameter space, never copied to
 * the thread's local memory: a parameter is a bound copy here anyway. */
#define __grid_constant__
#define __constant__ static
/* Per host worker (one block runs on a worker at a time), in a section the
 * runtime poisons at each block's start (emu/shared_begin.cpp). */
#define __shared__ static thread_local __attribute__((section(".tbss.cuda_emu_shared")))

namespace emu {

/* What a running GPU thread sees of itself (set by the scheduler). */
struct thread_view {
    uint3 thread_idx, block_idx;
    dim3 block_dim, grid_dim;
};
extern thread_local thread_view *current_view;

/* ---- barriers and warp collectives (emu/block.cpp) -------------------------------- */

enum collective_kind {
    COLLECTIVE_SHFL,
    COLLECTIVE_SHFL_UP,
    COLLECTIVE_SHFL_DOWN,
    COLLECTIVE_SHFL_XOR,
    COLLECTIVE_BALLOT,
    COLLECTIVE_ANY,
    COLLECTIVE_ALL,
    COLLECTIVE_SYNCWARP,
    /* the warp matrix API (emu/mma.h): the whole warp, every lane at the same call */
    COLLECTIVE_WMMA_FILL,
    COLLECTIVE_WMMA_LOAD,
    COLLECTIVE_WMMA_STORE,
    COLLECTIVE_WMMA_MMA,
};

/* Work a warp does once for all its lanes (mma_sync, emu/mma.h): each lane
 * passes its own as the value of a COLLECTIVE_WMMA_MMA; the last lane to
 * arrive runs `complete` with every lane's, indexed by lane, while the
 * others still wait (so what they point to stays put). */
struct warp_work {
    void (*complete)(warp_work *const *lanes);
};

void syncthreads(const char *file, int line);
/* The calling lane's result of a collective over the lanes in `mask`:
 * every lane named must make the same call (kind, mask, width, line). */
uint64_t warp_collective(const char *file, int line, collective_kind kind, unsigned mask,
                         uint64_t value, int arg, int width);
unsigned active_mask();
/* The block's dynamic shared memory: the launch's shared_bytes, 16-byte
 * aligned, a heap block of exactly that size (so ASan sees an access past
 * it), NaN-filled at each block's start; null when the launch asked for
 * none. */
void *dynamic_shared();
/* A failure inside a kernel (trap, failed assert): ends the kernel. */
[[noreturn]] void kernel_trap(const char *file, int line, const char *what);

template <class T>
inline T shuffle(const char *file, int line, collective_kind kind, unsigned mask, T value,
                 int arg, int width)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "warp shuffles move at most 8 bytes");
    static_assert(std::is_trivially_copyable<T>::value, "warp shuffles move bits");
    uint64_t bits = 0;
    memcpy(&bits, &value, sizeof value);
    bits = warp_collective(file, line, kind, mask, bits, arg, width);
    T result;
    memcpy((void *)&result, &bits, sizeof result); /* (void *): a class such as __half too */
    return result;
}

/* ---- the launch (emu/runtime.cpp) ----------------------------------------------- */

struct kernel_launch {
    const char *name, *file;
    int line;
    const void *kernel; /* its attributes (cudaFuncSetAttribute) */
    dim3 grid, block;
    size_t shared_bytes; /* dynamic shared memory per block */
    std::function<void()> thread_body; /* runs one GPU thread: kernel(args...) */
};
cudaError_t launch_kernel(kernel_launch &&launch, cudaStream_t stream);

/* The parameters are converted and copied once, at the launch, as the
 * hardware copies them into parameter memory. */
template <class... Params, class... Args>
cudaError_t launch(const char *name, const char *file, int line, void (*kernel)(Params...),
                   dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Args &&...args)
{
    static_assert(sizeof...(Params) == sizeof...(Args), "wrong number of kernel arguments");
    std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
    kernel_launch l{name, file, line, (const void *)kernel, grid, block, shared_bytes,
                    [kernel, params]() { std::apply(kernel, params); }};
    return launch_kernel(std::move(l), stream);
}

} // namespace emu

#define threadIdx (emu::current_view->thread_idx)
#define blockIdx (emu::current_view->block_idx)
#define blockDim (emu::current_view->block_dim)
#define gridDim (emu::current_view->grid_dim)
constexpr int warpSize = 32;

#define __syncthreads() emu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...)                                                                   \
    ((void)emu::warp_collective(__FILE__, __LINE__, emu::COLLECTIVE_SYNCWARP,                \
                                (__VA_ARGS__ + 0u ?: 0xffffffffu), 0, 0, 32))
#define __shfl_sync(mask, value, lane, ...) \
    emu::shuffle(__FILE__, __LINE__, emu::COLLECTIVE_SHFL, mask, value, lane, __VA_ARGS__ + 0 ?: 32)
#define __shfl_up_sync(mask, value, delta, ...) \
    emu::shuffle(__FILE__, __LINE__, emu::COLLECTIVE_SHFL_UP, mask, value, delta, __VA_ARGS__ + 0 ?: 32)
#define __shfl_down_sync(mask, value, delta, ...) \
    emu::shuffle(__FILE__, __LINE__, emu::COLLECTIVE_SHFL_DOWN, mask, value, delta, __VA_ARGS__ + 0 ?: 32)
#define __shfl_xor_sync(mask, value, lane_mask, ...) \
    emu::shuffle(__FILE__, __LINE__, emu::COLLECTIVE_SHFL_XOR, mask, value, lane_mask, __VA_ARGS__ + 0 ?: 32)
#define __ballot_sync(mask, predicate) \
    ((unsigned)emu::warp_collective(__FILE__, __LINE__, emu::COLLECTIVE_BALLOT, mask, (predicate) != 0, 0, 32))
#define __any_sync(mask, predicate) \
    ((int)emu::warp_collective(__FILE__, __LINE__, emu::COLLECTIVE_ANY, mask, (predicate) != 0, 0, 32))
#define __all_sync(mask, predicate) \
    ((int)emu::warp_collective(__FILE__, __LINE__, emu::COLLECTIVE_ALL, mask, (predicate) != 0, 0, 32))
#define __activemask() emu::active_mask()
#define __trap() emu::kernel_trap(__FILE__, __LINE__, "__trap()")

/* `extern __shared__ type name[]` cannot be spelled in C++ (a __shared__
 * variable here is a static thread_local), so kernels declare their dynamic
 * shared memory with this, which src/cuda/common.cuh spells as the extern
 * array under nvcc. */
#define CT_EMU_DYNAMIC_SHARED(type, name) type *const name = static_cast<type *>(emu::dynamic_shared())

/* The C++ overload of cuda_runtime.h: any kernel's pointer. */
template <class T>
inline cudaError_t cudaFuncSetAttribute(T *kernel, cudaFuncAttribute attribute, int value)
{
    return cudaFuncSetAttribute((const void *)kernel, attribute, value);
}

/* ---- memory access helpers and atomics ---------------------------------------------- */

template <class T>
inline T __ldg(const T *p)
{
    return *p;
}
/* A load that bypasses L1 (ld.global.cg): the host has one coherent cache. */
template <class T>
inline T __ldcg(const T *p)
{
    return *p;
}

/* Counts an atomic operation for the kernel counters (emu/counters.cpp). */
namespace emu {
void count_atomic();
}

/* Blocks run on several host threads: atomics are host atomics (relaxed,
 * like CUDA's plain atomicXxx, which order nothing). */
template <class T>
inline T atomicAdd(T *address, T value)
{
    emu::count_atomic();
    if constexpr (std::is_floating_point_v<T>) {
        T old, sum;
        __atomic_load(address, &old, __ATOMIC_RELAXED);
        do
            sum = old + value;
        while (!__atomic_compare_exchange(address, &old, &sum, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
        return old;
    } else {
        return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
    }
}
template <class T>
inline T atomicSub(T *address, T value)
{
    emu::count_atomic();
    return __atomic_fetch_sub(address, value, __ATOMIC_RELAXED);
}
template <class T>
inline T atomicExch(T *address, T value)
{
    emu::count_atomic();
    return __atomic_exchange_n(address, value, __ATOMIC_RELAXED);
}
/* old >= limit ? 0 : old + 1, returning old (CUDA's wrapping counter). */
inline unsigned atomicInc(unsigned *address, unsigned limit)
{
    emu::count_atomic();
    unsigned old = __atomic_load_n(address, __ATOMIC_RELAXED), next;
    do
        next = old >= limit ? 0u : old + 1u;
    while (!__atomic_compare_exchange_n(address, &old, next, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    return old;
}
template <class T>
inline T atomicCAS(T *address, T expected, T desired)
{
    emu::count_atomic();
    __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    return expected;
}
template <class T>
inline T atomicMin(T *address, T value)
{
    emu::count_atomic();
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (value < old && !__atomic_compare_exchange_n(address, &old, value, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
template <class T>
inline T atomicMax(T *address, T value)
{
    emu::count_atomic();
    T old = __atomic_load_n(address, __ATOMIC_RELAXED);
    while (value > old && !__atomic_compare_exchange_n(address, &old, value, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---- math: CUDA's device overloads that the C++ library spells differently --------- */

using std::isfinite;
using std::isinf;
using std::isnan;

template <class A, class B>
inline std::common_type_t<A, B> min(A a, B b)
{
    return b < a ? b : a;
}
template <class A, class B>
inline std::common_type_t<A, B> max(A a, B b)
{
    return a < b ? b : a;
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
/* c + the sum of the four products of a's and b's bytes (signed bytes, or
 * unsigned in the unsigned overload), wrapping like the hardware's 32-bit add. */
inline int __dp4a(int a, int b, int c)
{
    unsigned sum = (unsigned)c;
    for (int i = 0; i < 4; i++)
        sum += (unsigned)((signed char)(a >> 8 * i) * (signed char)(b >> 8 * i));
    return (int)sum;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c)
{
    for (int i = 0; i < 4; i++)
        c += (unsigned char)(a >> 8 * i) * (unsigned)(unsigned char)(b >> 8 * i);
    return c;
}

/* ---- the launch, the same line under nvcc and here (src/cuda/launch.h) -------------- */

#define CT_EMU_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                       \
    emu::launch(#kernel, __FILE__, __LINE__, kernel, grid, block, shared_bytes, stream,     \
                __VA_ARGS__)

#endif
