/*
 * The emulated CUDA device itself (emu/): that it computes what a GPU
 * computes (barriers, every warp collective with masks and widths, atomics,
 * streams, events, copies), and that it refuses what a GPU would do wrong
 * or leave undefined, naming kernel, block, thread and line: barriers not
 * every thread reaches, collectives whose mask names a lane that is not
 * there, shared memory (static and dynamic) read before it is written,
 * launches outside the limits (dynamic shared memory without the opt-in), copies past an allocation, memory over the cap.
 *
 * Some results depend on CUDA_EMU_ORDER (a racy kernel is right in forward
 * order and caught in reverse); make test-gpu-emu runs all three orders.
 * Built only with `make CUDA=emu`.
 */
#include <string.h>

#include "cuda/gemm.cuh"

extern "C" {
#include "harness.h"
}

static bool order_is(const char *name)
{
    const char *order = getenv("CUDA_EMU_ORDER");
    return strcmp(order && *order ? order : "forward", name) == 0;
}

/* Device buffers of n floats or ints, filled with `value` from the host. */
template <class T>
static T *device_buffer(int n, T value)
{
    T *host = (T *)malloc(sizeof(T) * (size_t)n), *dev = NULL;
    for (int i = 0; i < n; i++)
        host[i] = value;
    CHECK(cudaMalloc((void **)&dev, sizeof(T) * (size_t)n) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(dev, host, sizeof(T) * (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess,
          "upload");
    free(host);
    return dev;
}

template <class T>
static void download(T *host, const T *dev, int n)
{
    cudaError_t error = cudaMemcpy(host, dev, sizeof(T) * (size_t)n, cudaMemcpyDeviceToHost);
    CHECK(error == cudaSuccess, "download: %s", cudaGetErrorString(error));
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
    CHECK(cudaMalloc((void **)&text, 4) == cudaErrorLaunchFailure, "the error is not sticky");
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
    CHECK(cudaGetLastError() == cudaSuccess, "reset leaves an error");
}

/* ---- what a GPU computes ------------------------------------------------------- */

/* out[block] = sum of (block*1000 + thread) over the block */
__global__ void block_sum_kernel(double *out)
{
    double total = ct_block_sum((double)(blockIdx.x * 1000 + threadIdx.x));
    if (threadIdx.x == 0)
        out[blockIdx.x] = total;
}

static void block_sums(void)
{
    int blocks = 5, threads = 96;
    double *out = device_buffer<double>(blocks, 0.0), host[5];
    CT_EMU_LAUNCH(block_sum_kernel, blocks, threads, 0, 0, out);
    download(host, out, blocks);
    for (int b = 0; b < blocks; b++) {
        double expected = b * 1000.0 * threads + threads * (threads - 1) / 2.0;
        CHECK(host[b] == expected, "block %d: %g, expected %g", b, host[b], expected);
    }
    cudaFree(out);
}

enum { COLLECTIVE_RESULTS = 8 };

/* Every collective, full and half warps, widths 32 and 8. */
__global__ void collectives_kernel(int *out)
{
    int lane = threadIdx.x;
    int *r = out + lane * COLLECTIVE_RESULTS;
    r[0] = __shfl_sync(0xffffffffu, lane * 10, (lane + 3) % 32);
    r[1] = __shfl_up_sync(0xffffffffu, lane * 10, 2);
    r[2] = __shfl_down_sync(0xffffffffu, lane * 10, 5, 8);
    r[3] = __shfl_xor_sync(0xffffffffu, lane * 10, 9);
    r[4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    r[5] = __any_sync(0xffffffffu, lane == 7) * 10 + __all_sync(0xffffffffu, lane < 31);
    if (lane < 16) /* half a warp with its own mask */
        r[6] = __shfl_xor_sync(0x0000ffffu, lane, 1);
    else
        r[6] = __shfl_down_sync(0xffff0000u, lane, 1);
    __syncwarp();
    r[7] = __shfl_sync(0xffffffffu, lane * 10, 3, 8);
}

static void warp_collectives(void)
{
    int *out = device_buffer<int>(32 * COLLECTIVE_RESULTS, -1), host[32 * COLLECTIVE_RESULTS];
    CT_EMU_LAUNCH(collectives_kernel, 1, 32, 0, 0, out);
    download(host, out, 32 * COLLECTIVE_RESULTS);
    unsigned ballot = 0;
    for (int l = 0; l < 32; l += 3)
        ballot |= 1u << l;
    for (int lane = 0; lane < 32; lane++) {
        int *r = host + lane * COLLECTIVE_RESULTS;
        int down = lane % 8 + 5 < 8 ? lane + 5 : lane;
        int half = lane < 16 ? lane ^ 1 : lane < 31 ? lane + 1 : lane;
        CHECK(r[0] == (lane + 3) % 32 * 10, "shfl lane %d: %d", lane, r[0]);
        CHECK(r[1] == (lane >= 2 ? lane - 2 : lane) * 10, "shfl_up lane %d: %d", lane, r[1]);
        CHECK(r[2] == down * 10, "shfl_down width 8 lane %d: %d", lane, r[2]);
        CHECK(r[3] == (lane ^ 9) * 10, "shfl_xor lane %d: %d", lane, r[3]);
        CHECK((unsigned)r[4] == ballot, "ballot lane %d: %x", lane, (unsigned)r[4]);
        CHECK(r[5] == 10, "any/all lane %d: %d", lane, r[5]);
        CHECK(r[6] == half, "half-warp masks lane %d: %d", lane, r[6]);
        CHECK(r[7] == (lane / 8 * 8 + 3) * 10, "shfl width 8 lane %d: %d", lane, r[7]);
    }
    cudaFree(out);
}

__global__ void atomic_kernel(int *count, float *sum, int *lowest)
{
    atomicAdd(count, 1);
    atomicAdd(sum, 0.5f);
    atomicMin(lowest, (int)(blockIdx.x * blockDim.x + threadIdx.x) - 7);
}

static void atomics_across_blocks(void)
{
    int *count = device_buffer<int>(1, 0), *lowest = device_buffer<int>(1, 1 << 30);
    float *sum = device_buffer<float>(1, 0.0f);
    CT_EMU_LAUNCH(atomic_kernel, 64, 128, 0, 0, count, sum, lowest);
    int c = 0, low = 0;
    float s = 0;
    download(&c, count, 1);
    download(&s, sum, 1);
    download(&low, lowest, 1);
    CHECK(c == 64 * 128 && s == 64 * 128 * 0.5f && low == -7, "%d %g %d", c, s, low);
    cudaFree(count);
    cudaFree(sum);
    cudaFree(lowest);
}

/* The tiled GEMM's loads: each warp's 32 loads of an operand must fall in
 * 4 sectors of 32 bytes (128 contiguous bytes: coalesced), whichever way
 * the operand is stored.  The problem logs the element offset of every
 * load, per thread, in order. */
enum { GEMM_LOG = GEMM_TILE_K * GEMM_TILE_M / GEMM_THREADS }; /* loads per thread and operand */

struct recording_problem : ct_gemm_defaults {
    static constexpr const char *kernel_name = "gemm<recording>";
    int m, n, k, splits, k_chunk;
    bool a_k, b_k;   /* a stored [m][k] (else [k][m]); b stored [n][k] (else [k][n]) */
    int *offsets;    /* [thread][operand][GEMM_LOG] */
    int *counts;     /* [thread][operand] */

    __device__ bool a_along_k() const { return a_k; }
    __device__ bool b_along_k() const { return b_k; }
    __device__ void log(int operand, int offset) const
    {
        int t = threadIdx.x, *count = &counts[t * 2 + operand];
        if (*count < GEMM_LOG)
            offsets[(t * 2 + operand) * GEMM_LOG + (*count)++] = offset;
    }
    __device__ float load_a(int, int row, int depth) const
    {
        log(0, a_k ? row * k + depth : depth * m + row);
        return 1.0f;
    }
    __device__ float load_b(int, int depth, int col) const
    {
        log(1, b_k ? col * k + depth : depth * n + col);
        return 1.0f;
    }
    __device__ void store(int, int, int, int, float) const {}
};

/* The most 32-byte sectors one warp's loads touch, over every load step. */
static int worst_sectors(const int *offsets, int operand)
{
    int worst = 0;
    for (int warp = 0; warp < GEMM_THREADS / 32; warp++)
        for (int step = 0; step < GEMM_LOG; step++) {
            int sectors[32], n = 0;
            for (int lane = 0; lane < 32; lane++) {
                int t = warp * 32 + lane;
                int offset = offsets[(t * 2 + operand) * GEMM_LOG + step];
                if (offset < 0)
                    return 99; /* a load that never happened: the tile is not staged */
                int sector = offset * 4 / 32;
                bool seen = false;
                for (int i = 0; i < n; i++)
                    seen = seen || sectors[i] == sector;
                if (!seen)
                    sectors[n++] = sector;
            }
            worst = n > worst ? n : worst;
        }
    return worst;
}

static void gemm_loads_coalesce(void)
{
    int threads = GEMM_THREADS, size = threads * 2 * GEMM_LOG;
    for (int layout = 0; layout < 4; layout++) {
        recording_problem p = {{}, GEMM_TILE_M, GEMM_TILE_N, GEMM_TILE_K, 1, GEMM_TILE_K,
                               (layout & 1) != 0, (layout & 2) != 0, NULL, NULL};
        p.offsets = device_buffer<int>(size, -1);
        p.counts = device_buffer<int>(threads * 2, 0);
        CT_EMU_LAUNCH(ct_tiled_gemm<recording_problem>, 1, GEMM_THREADS, 0, 0, p);
        int *host = (int *)malloc(sizeof(int) * (size_t)size);
        download(host, p.offsets, size);
        for (int operand = 0; operand < 2; operand++) {
            int sectors = worst_sectors(host, operand);
            CHECK(sectors <= 4, "%s stored along %s: a warp's loads touch %d sectors, not 4",
                  operand ? "b" : "a", (operand ? p.b_k : p.a_k) ? "k" : (operand ? "n" : "m"),
                  sectors);
        }
        free(host);
        cudaFree(p.offsets);
        cudaFree(p.counts);
    }
}

/* ---- what a GPU leaves undefined: the emulator refuses it ------------------------- */

__global__ void split_barrier_kernel(float *out)
{
    if (threadIdx.x % 2)
        __syncthreads();
    else
        __syncthreads();
    out[threadIdx.x] = 1.0f;
}

static void different_barriers_fail(void)
{
    float *out = device_buffer<float>(64, 0.0f);
    CT_EMU_LAUNCH(split_barrier_kernel, 2, 64, 0, 0, out);
    expect_kernel_failure("split_barrier_kernel", "same barrier");
}

__global__ void early_exit_kernel(float *out)
{
    if (threadIdx.x == 5)
        return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

static void exit_before_barrier_fails(void)
{
    float *out = device_buffer<float>(64, 0.0f);
    CT_EMU_LAUNCH(early_exit_kernel, 1, 64, 0, 0, out);
    expect_kernel_failure("block (0,0,0)", "__syncthreads()");
}

__global__ void missing_lane_kernel(int *out)
{
    if (threadIdx.x >= 16)
        return; /* but the mask names lanes 16-31 */
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}

static void mask_naming_exited_lane_fails(void)
{
    int *out = device_buffer<int>(32, 0);
    CT_EMU_LAUNCH(missing_lane_kernel, 1, 32, 0, 0, out);
    expect_kernel_failure("__shfl_down_sync", "test_emu.cu:");
}

__global__ void wrong_mask_kernel(int *out)
{
    out[threadIdx.x] = __shfl_sync(0x0000ffffu, (int)threadIdx.x, 0);
}

static void mask_without_own_lane_fails(void)
{
    int *out = device_buffer<int>(32, 0);
    CT_EMU_LAUNCH(wrong_mask_kernel, 1, 32, 0, 0, out);
    expect_kernel_failure("does not name its own lane", "with mask 0x0000ffff");
}

/* Thread 0 writes the tile, the others read it: correct only with the barrier. */
__global__ void tile_kernel(float *out, bool with_barrier)
{
    __shared__ float tile[64];
    if (threadIdx.x == 0)
        for (int i = 0; i < 64; i++)
            tile[i] = (float)i;
    if (with_barrier)
        __syncthreads();
    out[blockIdx.x * 64 + threadIdx.x] = tile[63 - threadIdx.x];
}

static void shared_memory_starts_poisoned(void)
{
    float *out = device_buffer<float>(3 * 64, 0.0f), host[3 * 64];
    CT_EMU_LAUNCH(tile_kernel, 3, 64, 0, 0, out, true);
    download(host, out, 3 * 64);
    for (int i = 0; i < 3 * 64; i++)
        CHECK(host[i] == (float)(63 - i % 64), "with the barrier, out[%d] = %g", i, host[i]);
    /* Without the barrier, a thread that runs before thread 0 reads the
     * block's fresh (NaN) shared memory: every order but forward shows it. */
    CT_EMU_LAUNCH(tile_kernel, 3, 64, 0, 0, out, false);
    download(host, out, 3 * 64);
    int nan_count = 0;
    for (int i = 0; i < 3 * 64; i++)
        nan_count += isnan(host[i]);
    if (order_is("forward"))
        CHECK(nan_count == 0, "forward order: %d NaN", nan_count);
    else
        CHECK(nan_count > 0, "the race went unseen in %s order", getenv("CUDA_EMU_ORDER"));
    cudaFree(out);
}

/* Each block reverses its stretch of `in` through dynamic shared memory;
 * `first` gets what each thread read from it before any write. */
__global__ void reverse_dynamic(const float *in, float *out, float *first, int n)
{
    CT_CUDA_DYNAMIC_SHARED(float, stage);
    int i = blockIdx.x * n + threadIdx.x;
    first[i] = stage[threadIdx.x];
    __syncthreads();
    stage[threadIdx.x] = in[i];
    __syncthreads();
    out[i] = stage[n - 1 - threadIdx.x];
}

static void dynamic_shared_memory(void)
{
    enum { N = 100, BLOCKS = 3 }; /* N: not a power of two */
    float host[BLOCKS * N];
    for (int i = 0; i < BLOCKS * N; i++)
        host[i] = (float)i;
    float *in = device_buffer<float>(BLOCKS * N, 0.0f), *out = device_buffer<float>(BLOCKS * N, 0.0f);
    float *first = device_buffer<float>(BLOCKS * N, 0.0f);
    cudaMemcpy(in, host, sizeof host, cudaMemcpyHostToDevice);
    CT_EMU_LAUNCH(reverse_dynamic, BLOCKS, N, N * sizeof(float), 0, in, out, first, (int)N);
    CHECK(cudaGetLastError() == cudaSuccess, "launch");
    download(host, out, BLOCKS * N);
    for (int i = 0; i < BLOCKS * N; i++)
        CHECK(host[i] == (float)(i / N * N + N - 1 - i % N), "out[%d] = %g", i, host[i]);
    /* Fresh for every block: even after other blocks wrote theirs. */
    download(host, first, BLOCKS * N);
    for (int i = 0; i < BLOCKS * N; i++)
        CHECK(isnan(host[i]), "block %d read %g from fresh dynamic shared memory", i / N, host[i]);

    /* More than 48 KiB needs the kernel's opt-in, up to the device's 227 KiB. */
    size_t big = 64 << 10;
    CT_EMU_LAUNCH(reverse_dynamic, 1, N, big, 0, in, out, first, (int)N);
    cudaError_t error = cudaGetLastError();
    CHECK(error == cudaErrorInvalidValue, "64 KiB without opting in: %s", cudaGetErrorName(error));
    CHECK(strstr(cudaGetErrorString(error), "cudaFuncAttributeMaxDynamicSharedMemorySize"), "%s",
          cudaGetErrorString(error));
    CHECK(cudaFuncSetAttribute(reverse_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               228 << 10) == cudaErrorInvalidValue,
          "opting in to more than the device has");
    cudaGetLastError();
    CHECK(cudaFuncSetAttribute(reverse_dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               (int)big) == cudaSuccess, "opting in to 64 KiB");
    CT_EMU_LAUNCH(reverse_dynamic, 1, N, big, 0, in, out, first, (int)N);
    CHECK(cudaGetLastError() == cudaSuccess, "64 KiB after opting in");
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync");
    cudaFree(in);
    cudaFree(out);
    cudaFree(first);
}

static void launch_outside_limits_fails(void)
{
    float *out = device_buffer<float>(1, 0.0f);
    CT_EMU_LAUNCH(tile_kernel, 1, 2048, 0, 0, out, true);
    cudaError_t error = cudaGetLastError();
    CHECK(error == cudaErrorInvalidConfiguration, "%s", cudaGetErrorName(error));
    CHECK(strstr(cudaGetErrorString(error), "tile_kernel") != NULL, "%s",
          cudaGetErrorString(error));
    CHECK(cudaGetLastError() == cudaSuccess, "a launch error is not sticky");
    cudaFree(out);
}

/* ---- memory, copies, streams and events --------------------------------------------- */

static void memory_errors(void)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, (size_t)1 << 50) == cudaErrorMemoryAllocation, "over the cap");
    CHECK(strstr(cudaGetErrorString(cudaErrorMemoryAllocation), "CUDA_EMU_MEMORY") != NULL,
          "%s", cudaGetErrorString(cudaErrorMemoryAllocation));
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "last error");
    CHECK(cudaGetLastError() == cudaSuccess, "cleared");
    float *dev = device_buffer<float>(16, 1.0f), host[17];
    CHECK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "a copy past the end of the allocation");
    CHECK(cudaMemcpy(dev, host, 16, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
          "a copy in the wrong direction");
    size_t free_bytes = 0, total = 0;
    CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && free_bytes < total, "info");
    CHECK(cudaFree(host) == cudaErrorInvalidDevicePointer, "freeing host memory");
    (void)cudaGetLastError();
    cudaFree(dev);
    int count = 0;
    CHECK(cudaGetDeviceCount(&count) == cudaSuccess && count >= 1, "count %d", count);
    CHECK(cudaSetDevice(count) == cudaErrorInvalidDevice, "device %d", count);
    (void)cudaGetLastError();
    cudaDeviceProp props;
    CHECK(cudaGetDeviceProperties(&props, 0) == cudaSuccess, "properties");
    CHECK(strstr(props.name, "emulated") && props.major == 9 && props.warpSize == 32, "%s",
          props.name);
}

static void copies_follow_the_runtime_rules(void)
{
    float *dev = device_buffer<float>(4, 0.0f), *pinned = NULL;
    float pageable[4] = {1, 2, 3, 4};
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "stream");
    /* From pageable memory the data is taken at the call. */
    cudaMemcpyAsync(dev, pageable, sizeof pageable, cudaMemcpyHostToDevice, s);
    pageable[0] = 100;
    /* Into pinned memory it lands only when the stream has run. */
    CHECK(cudaMallocHost((void **)&pinned, sizeof pageable) == cudaSuccess, "pinned");
    memset(pinned, 0, sizeof pageable);
    cudaMemcpyAsync(pinned, dev, sizeof pageable, cudaMemcpyDeviceToHost, s);
    CHECK(pinned[0] == 0.0f, "the copy ran before the stream was waited for");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    CHECK(pinned[0] == 1.0f && pinned[3] == 4.0f, "%g %g", pinned[0], pinned[3]);
    cudaFreeHost(pinned);
    cudaStreamDestroy(s);
    cudaFree(dev);
}

__global__ void fill_kernel(float *y, float value)
{
    y[threadIdx.x] = value;
}

/* Stream b reads what stream a writes: right with an event between them,
 * and in reverse order wrong without one. */
static void streams_and_events(void)
{
    float *x = device_buffer<float>(32, 0.0f), *y = device_buffer<float>(32, 0.0f), host[32];
    cudaStream_t a, b;
    cudaEvent_t written, start, stop;
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
    cudaEventCreate(&written);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    for (int with_event = 1; with_event >= 0; with_event--) {
        float value = with_event ? 7.0f : 9.0f;
        cudaEventRecord(start, a);
        CT_EMU_LAUNCH(fill_kernel, 1, 32, 0, a, x, value);
        cudaEventRecord(written, a);
        if (with_event)
            cudaStreamWaitEvent(b, written, 0);
        cudaMemcpyAsync(y, x, sizeof host, cudaMemcpyDeviceToDevice, b);
        cudaEventRecord(stop, b);
        CHECK(cudaEventSynchronize(stop) == cudaSuccess, "event sync");
        float ms = -1;
        if (with_event)
            CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms >= 0, "%g", ms);
        cudaDeviceSynchronize();
        download(host, y, 32);
        bool right = host[0] == value && host[31] == value;
        if (with_event || order_is("forward"))
            CHECK(right, "with_event %d: %g", with_event, host[0]);
        else if (order_is("reverse"))
            CHECK(!right, "reverse order missed the race between streams");
    }
    cudaEventDestroy(written);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFree(x);
    cudaFree(y);
}

int main(void)
{
    RUN(block_sums);
    RUN(warp_collectives);
    RUN(atomics_across_blocks);
    RUN(gemm_loads_coalesce);
    RUN(different_barriers_fail);
    RUN(exit_before_barrier_fails);
    RUN(mask_naming_exited_lane_fails);
    RUN(mask_without_own_lane_fails);
    RUN(shared_memory_starts_poisoned);
    RUN(dynamic_shared_memory);
    RUN(launch_outside_limits_fails);
    RUN(memory_errors);
    RUN(copies_follow_the_runtime_rules);
    RUN(streams_and_events);
    return harness_finish();
}
