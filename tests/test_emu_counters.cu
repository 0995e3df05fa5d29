/*
 * The emulated device's kernel counters (emu/counters.cpp) on kernels whose
 * answers are known by hand:
 *   - a copy where lane i reads float i reads 100% of the bytes it moves
 *     (one 128-byte request = 4 sectors per warp) and writes the same;
 *   - a read of every 8th float moves 8 times the bytes it uses (12.5%);
 *   - a warp reading a column of a 32x32 float tile in shared memory needs
 *     32 wavefronts (32-way conflict), the tile padded to 33 columns one;
 *     every lane reading one word is a broadcast, one wavefront;
 *   - 64-bit and 128-bit accesses counted by width; barriers per block;
 *     atomics per lane; launches, blocks and threads;
 *   - the distinct sectors of a launch (what DRAM must deliver once), and
 *     events that bracket a launch with its counts.
 * The counters need the kernels built with clang's hooks (`make CUDA=emu`
 * with clang, not the sanitized build): without them the test says so and
 * checks only that nothing is counted.
 */
#include <string.h>

extern "C" {
#include "harness.h"
}

enum { N = 1 << 14, THREADS = 256, TILE = 32 };

static __global__ void copy_floats(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i];
}

static __global__ void strided_read(const float *x, float *y, int n, int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[(size_t)i * stride];
}

/* Each warp writes the tile by rows (conflict-free) and reads it back by
 * columns: lane l reads tile[l][column]. */
template <int PITCH>
static __global__ void tile_columns(float *out)
{
    __shared__ float tile[TILE][PITCH];
    int lane = threadIdx.x;
    for (int row = 0; row < TILE; row++)
        tile[row][lane] = (float)(row * TILE + lane);
    __syncthreads();
    float sum = 0.0f;
    for (int column = 0; column < TILE; column++)
        sum += tile[lane][column];
    out[lane] = sum;
}

static __global__ void broadcast(float *out)
{
    __shared__ float word;
    if (threadIdx.x == 0)
        word = 2.0f;
    __syncthreads();
    out[threadIdx.x] = word;
}

static __global__ void wide_copy(const double *x, double *y, const unsigned __int128 *xl,
                          unsigned __int128 *yl)
{
    int i = threadIdx.x;
    y[i] = x[i];
    yl[i] = xl[i];
}

static __global__ void count_up(int *counter)
{
    atomicAdd(counter, 1);
}

static float *device_floats(size_t n)
{
    float *p = NULL;
    CHECK(cudaMalloc((void **)&p, sizeof(float) * n) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemset(p, 0, sizeof(float) * n) == cudaSuccess, "cudaMemset");
    return p;
}

/* The counters of `kernel` after the launches queued so far. */
static cuda_emu_kernel_counters counted(const char *kernel)
{
    cuda_emu_kernel_counters c;
    memset(&c, 0, sizeof c);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
    CHECK(cuda_emu_counters_find(kernel, &c) == 0, "%s was not counted", kernel);
    return c;
}

/* distinct bytes used / bytes moved */
static double efficiency(unsigned long long bytes, unsigned long long sectors)
{
    return sectors ? (double)bytes / (32.0 * (double)sectors) : 0.0;
}

static void coalesced_copy_is_100_percent(void)
{
    float *x = device_floats(N), *y = device_floats(N);
    CT_EMU_LAUNCH(copy_floats, N / THREADS, THREADS, 0, 0, x, y, N);
    cuda_emu_kernel_counters c = counted("copy_floats");
    CHECK(c.launches == 1 && c.blocks == N / THREADS && c.threads == N,
          "%llu launches, %llu blocks, %llu threads", c.launches, c.blocks, c.threads);
    CHECK(c.global_load_requests == N / 32 && c.global_store_requests == N / 32,
          "%llu load and %llu store requests, %d warps", c.global_load_requests,
          c.global_store_requests, N / 32);
    CHECK(c.global_load_bytes == 4ull * N && c.global_load_sectors == N / 8,
          "loads: %llu bytes in %llu sectors", c.global_load_bytes, c.global_load_sectors);
    CHECK(efficiency(c.global_load_unique_bytes, c.global_load_sectors) == 1.0 &&
              efficiency(c.global_store_unique_bytes, c.global_store_sectors) == 1.0,
          "load %.3f, store %.3f",
          efficiency(c.global_load_unique_bytes, c.global_load_sectors),
          efficiency(c.global_store_unique_bytes, c.global_store_sectors));
    CHECK(c.accesses_by_width[2] == 2ull * N, "%llu 32-bit accesses", c.accesses_by_width[2]);
    CHECK(c.distinct_sectors == 2ull * N * 4 / 32, "%llu distinct sectors (x and y once)",
          c.distinct_sectors);
    cudaFree(x);
    cudaFree(y);
}

static void stride_8_read_is_12_5_percent(void)
{
    float *x = device_floats((size_t)N * 8), *y = device_floats(N);
    CT_EMU_LAUNCH(strided_read, N / THREADS, THREADS, 0, 0, x, y, N, 8);
    cuda_emu_kernel_counters c = counted("strided_read");
    double load = efficiency(c.global_load_unique_bytes, c.global_load_sectors);
    CHECK(load == 0.125, "stride-8 reads at %.4f (want 0.125): %llu bytes, %llu sectors",
          load, c.global_load_bytes, c.global_load_sectors);
    CHECK(c.global_load_sectors == (unsigned long long)N, "one sector per lane: %llu",
          c.global_load_sectors);
    CHECK(efficiency(c.global_store_unique_bytes, c.global_store_sectors) == 1.0,
          "its stores are coalesced");
    /* stride 0: every lane reads x[0], one sector and 4 distinct bytes a warp */
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(strided_read, N / THREADS, THREADS, 0, 0, x, y, N, 0);
    c = counted("strided_read");
    CHECK(c.global_load_sectors == N / 32 && c.global_load_unique_bytes == 4ull * N / 32 &&
              c.global_load_bytes == 4ull * N,
          "a broadcast read: %llu sectors, %llu distinct of %llu bytes",
          c.global_load_sectors, c.global_load_unique_bytes, c.global_load_bytes);
    cudaFree(x);
    cudaFree(y);
}

static void shared_column_conflicts(void)
{
    float *out = device_floats(TILE);
    CT_EMU_LAUNCH(tile_columns<TILE>, 1, TILE, 0, 0, out);
    CT_EMU_LAUNCH(tile_columns<TILE + 1>, 1, TILE, 0, 0, out);
    cuda_emu_kernel_counters plain = counted("tile_columns<TILE>");
    cuda_emu_kernel_counters padded = counted("tile_columns<TILE + 1>");
    /* 32 row stores (1 wavefront each) and 32 column loads */
    CHECK(plain.shared_store_requests == TILE && plain.shared_load_requests == TILE,
          "%llu stores, %llu loads", plain.shared_store_requests, plain.shared_load_requests);
    CHECK(plain.shared_wavefronts == TILE + TILE * TILE &&
              plain.shared_ideal_wavefronts == 2 * TILE,
          "32x32 tile: %llu wavefronts, ideal %llu (want %d and %d)", plain.shared_wavefronts,
          plain.shared_ideal_wavefronts, TILE + TILE * TILE, 2 * TILE);
    CHECK(padded.shared_wavefronts == 2 * TILE && padded.shared_ideal_wavefronts == 2 * TILE,
          "32x33 tile: %llu wavefronts, ideal %llu (want no conflicts)",
          padded.shared_wavefronts, padded.shared_ideal_wavefronts);
    CHECK(plain.barriers == 1, "%llu barriers", plain.barriers);
    CT_EMU_LAUNCH(broadcast, 1, TILE, 0, 0, out);
    cuda_emu_kernel_counters b = counted("broadcast");
    /* thread 0's store, then one load all 32 lanes make of the same word */
    CHECK(b.shared_store_requests == 1 && b.shared_load_requests == 1 &&
              b.shared_wavefronts == 2 && b.shared_ideal_wavefronts == 2,
          "a broadcast: %llu stores, %llu loads, %llu wavefronts (ideal %llu)",
          b.shared_store_requests, b.shared_load_requests, b.shared_wavefronts,
          b.shared_ideal_wavefronts);
    cudaFree(out);
}

static void widths_and_atomics(void)
{
    double *x = NULL, *y = NULL;
    unsigned __int128 *xl = NULL, *yl = NULL;
    CHECK(cudaMalloc((void **)&x, sizeof(double) * TILE) == cudaSuccess &&
              cudaMalloc((void **)&y, sizeof(double) * TILE) == cudaSuccess &&
              cudaMalloc((void **)&xl, 16 * TILE) == cudaSuccess &&
              cudaMalloc((void **)&yl, 16 * TILE) == cudaSuccess,
          "cudaMalloc");
    CT_EMU_LAUNCH(wide_copy, 1, TILE, 0, 0, x, y, xl, yl);
    cuda_emu_kernel_counters c = counted("wide_copy");
    CHECK(c.accesses_by_width[3] == 2 * TILE && c.accesses_by_width[4] == 2 * TILE,
          "%llu 64-bit and %llu 128-bit accesses", c.accesses_by_width[3],
          c.accesses_by_width[4]);
    CHECK(c.global_load_bytes == TILE * (8 + 16) && c.global_load_sectors == 8 + 16,
          "%llu bytes loaded in %llu sectors", c.global_load_bytes, c.global_load_sectors);
    int *counter = NULL;
    CHECK(cudaMalloc((void **)&counter, sizeof(int)) == cudaSuccess, "cudaMalloc");
    CT_EMU_LAUNCH(count_up, 4, 64, 0, 0, counter);
    cuda_emu_kernel_counters a = counted("count_up");
    CHECK(a.atomics == 256, "%llu atomics", a.atomics);
    cudaFree(x);
    cudaFree(y);
    cudaFree(xl);
    cudaFree(yl);
    cudaFree(counter);
}

/* Two events around a launch: their counters differ by that launch's; a
 * sector read twice in one launch comes from DRAM once. */
__global__ static void read_twice(const float *x, float *y)
{
    int i = threadIdx.x;
    y[i] = x[i] + x[(i + 1) % 32];
}

static void events_bracket_the_counts(void)
{
    float *x = device_floats(TILE), *y = device_floats(TILE);
    cudaEvent_t before = NULL, after = NULL;
    CHECK(cudaEventCreate(&before) == cudaSuccess && cudaEventCreate(&after) == cudaSuccess,
          "events");
    CHECK(cudaEventRecord(before, 0) == cudaSuccess, "record");
    CT_EMU_LAUNCH(read_twice, 1, TILE, 0, 0, x, y);
    CHECK(cudaEventRecord(after, 0) == cudaSuccess, "record");
    CHECK(cudaEventSynchronize(after) == cudaSuccess, "synchronize");
    cuda_emu_kernel_counters a, b;
    CHECK(cuda_emu_event_counters(before, &a) == 0 && cuda_emu_event_counters(after, &b) == 0,
          "event counters");
    CHECK(b.launches - a.launches == 1 && b.global_load_requests - a.global_load_requests == 2,
          "%llu launches, %llu load requests between the events", b.launches - a.launches,
          b.global_load_requests - a.global_load_requests);
    CHECK(b.global_load_sectors - a.global_load_sectors == 8 &&
              b.distinct_sectors - a.distinct_sectors == 8,
          "x read twice: %llu sectors moved, %llu distinct (want 8 and 4 + 4 of y)",
          b.global_load_sectors - a.global_load_sectors, b.distinct_sectors - a.distinct_sectors);
    cudaEvent_t never;
    CHECK(cudaEventCreate(&never) == cudaSuccess, "event");
    CHECK(cuda_emu_event_counters(never, &a) == -1, "an event never recorded has no counters");
    cudaEventDestroy(before);
    cudaEventDestroy(after);
    cudaEventDestroy(never);
    cudaFree(x);
    cudaFree(y);
}

/* Enables nest: the end of one user's counting (a profiler's timer, the
 * autotuner's) leaves another's on. */
static void enables_nest(void)
{
    float *x = device_floats(N), *y = device_floats(N);
    cuda_emu_counters_reset();
    cuda_emu_counters_enable(1); /* a second user beside main's */
    cuda_emu_counters_enable(0);
    CT_EMU_LAUNCH(copy_floats, N / THREADS, THREADS, 0, 0, x, y, N);
    CHECK(counted("copy_floats").launches == 1, "counting stopped when one of two users ended");
    cudaFree(x);
    cudaFree(y);
}

static void counting_off_counts_nothing(void)
{
    cuda_emu_counters_enable(0);
    cuda_emu_counters_reset();
    float *x = device_floats(N), *y = device_floats(N);
    CT_EMU_LAUNCH(copy_floats, N / THREADS, THREADS, 0, 0, x, y, N);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
    CHECK(cuda_emu_counters_count() == 0, "%d kernels counted with counting off",
          cuda_emu_counters_count());
    cudaFree(x);
    cudaFree(y);
}

int main(void)
{
    if (!cuda_emu_counters_available()) {
        printf("# kernel counters: not in this build (they need the kernels compiled by "
               "clang, without SANITIZE)\n");
        RUN(counting_off_counts_nothing);
        return harness_finish();
    }
    cuda_emu_counters_enable(1);
    RUN(coalesced_copy_is_100_percent);
    RUN(stride_8_read_is_12_5_percent);
    RUN(shared_column_conflicts);
    RUN(widths_and_atomics);
    RUN(events_bracket_the_counts);
    RUN(enables_nest);
    RUN(counting_off_counts_nothing);
    return harness_finish();
}
