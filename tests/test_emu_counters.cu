/*
 * The emulated device's kernel counters (emu/counters.cpp) on kernels whose
 * answers are known by hand:
 *   - a copy where lane i reads float i reads 100% of the bytes it moves
 *     (one 128-byte request = 4 sectors per warp) and writes the same;
 *   - a read of every 8th float moves 8 times the bytes it uses (12.5%);
 *   - a warp reading a column of a 32x32 float tile in shared memory needs
 *     32 wavefronts (32-way conflict), the tile padded to 33 columns one;
 *     every lane reading one word is a broadcast, one wavefront;
 *   - the latency chain: a thread walking a linked list of K nodes waits K
 *     rounds of loads, four independent loads in one statement one (and
 *     in a helper left out of line that reads their offsets from a struct
 *     it takes by reference), a
 *     barrier between two loads makes two; a launch of one block more
 *     than the SMs hold at once runs two waves, which doubles its chain;
 *     five shuffles are five collectives; a division by a run-time
 *     divisor costs a GPU's division routine, by a constant a few
 *     instructions;
 *   - 64-bit and 128-bit accesses counted by width; barriers per block;
 *     atomics per lane; launches, blocks and threads;
 *   - the distinct sectors of a launch (what DRAM must deliver once), and
 *     events that bracket a launch with its counts;
 *   - floating-point work: K fmaf per thread are K FMAs and 2K FLOPs per
 *     thread, a multiply and an add kept apart are one of each, double
 *     arithmetic is fp64;
 *   - branches: one a warp takes one way is not divergent, one on the
 *     lane's parity is, once per warp; a loop whose trip count differs by
 *     lane diverges at its exit until the last lane leaves; the emulator's
 *     own loops (atomics, shuffles) inlined into a kernel count nothing;
 *     host code in a .cu file counts nothing.
 * The counters need the kernels built with clang's hooks (`make CUDA=emu`
 * with clang, not the sanitized build): without them the test says so and
 * checks only that nothing is counted.  Floating-point work and branches
 * also need emu/count_pass.cpp (LLVM 14's headers): without it the test
 * says so and skips their cases.
 */
#include <math.h>
#include <string.h>

#include <algorithm>

extern "C" {
#include "harness.h"
}

enum { N = 1 << 14, THREADS = 256, TILE = 32 };
/* The launches of the fp and branch cases: 4 blocks of 4 full warps. */
enum { BLOCKS = 4, BLOCK_THREADS = 128, WARPS = BLOCKS * BLOCK_THREADS / 32, FMAS = 8 };

static __global__ void copy_floats(const float *x, float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i];
}

/* x[i] += 1: every sector read from DRAM and written back */
static __global__ void increment_floats(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += 1.0f;
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

/* Each thread follows next[] `steps` times from its own index: every load
 * waits for the one before. */
static __global__ void chase(const int *next, int *out, int steps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (int s = 0; s < steps; s++)
        i = next[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = i;
}

/* Four loads no one of which waits for another: one round trip. */
static __global__ void four_loads(const float *x, float *y)
{
    int i = threadIdx.x;
    y[i] = x[i] + x[i + 32] + x[i + 64] + x[i + 96];
}

/* Four independent loads at offsets read from a struct the helper takes
 * by reference, left out of line: one round trip, as where nvcc inlines
 * it (the struct is the kernel's by-value parameter, not device memory). */
struct four_offsets {
    int a, b, c, d;
};

static __device__ __noinline__ float sum_at_offsets(const four_offsets &o, const float *x)
{
    int i = threadIdx.x;
    return x[i + o.a] + x[i + o.b] + x[i + o.c] + x[i + o.d];
}

static __global__ void four_loads_by_reference(four_offsets o, const float *x, float *y)
{
    y[threadIdx.x] = sum_at_offsets(o, x);
}

/* Two loads with a barrier between them: two rounds. */
static __global__ void loads_around_a_barrier(const float *x, float *y)
{
    int i = threadIdx.x;
    float a = x[i];
    __syncthreads();
    y[i] = a + x[i + 32];
}

/* y = x / d, d known only at run time, or a constant. */
static __global__ void divide_by(const int *x, int *y, int d)
{
    y[threadIdx.x] = x[threadIdx.x] / d;
}

static __global__ void divide_by_7(const int *x, int *y)
{
    y[threadIdx.x] = x[threadIdx.x] / 7;
}

/* Four floats a thread copied as one 16-byte access each way (ct_load4's
 * form on the emulator: a host vector the empty asm keeps whole), or as
 * four floats each way. */
typedef float floats4 __attribute__((vector_size(16)));

static __global__ void copy_vector4(const float *x, float *y)
{
    floats4 v = *reinterpret_cast<const floats4 *>(x + 4 * threadIdx.x);
    asm("" : "+x"(v));
    *reinterpret_cast<floats4 *>(y + 4 * threadIdx.x) = v;
}

static __global__ void copy_scalars4(const float *x, float *y)
{
    const float *from = x + 4 * threadIdx.x;
    float *to = y + 4 * threadIdx.x;
    float v0 = from[0], v1 = from[1], v2 = from[2], v3 = from[3];
    to[0] = v0, to[1] = v1, to[2] = v2, to[3] = v3;
}

/* a = fmaf(a, b, 1) FMAS times over: FMAS dependent FMAs a thread. */
static __global__ void fma_chain(const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i], b = x[i + 1];
    for (int j = 0; j < FMAS; j++)
        a = fmaf(a, b, 1.0f);
    y[i] = a;
}

/* The same with a trip count known only at run time: however the loop is
 * unrolled, each thread executes `count` FMAs. */
static __global__ void fma_loop(const float *x, float *y, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = x[i], b = x[i + 1];
    for (int j = 0; j < count; j++)
        a = fmaf(a, b, 1.0f);
    y[i] = a;
}

/* A device function left out of line, which two kernels call: once and
 * twice a thread.  Its instructions are the same addresses in both. */
static __device__ __attribute__((noinline)) float out_of_line(float v)
{
    return v * 3.0f + 1.0f;
}

static __global__ void calls_once(const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = out_of_line(x[i]);
}

static __global__ void calls_twice(const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = out_of_line(out_of_line(x[i]));
}

/* FMAS independent FMAs a thread, which clang turns into vector FMAs: each
 * counts once per element. */
static __global__ void fma_lanes(const float *x, float *y)
{
    int i = (blockIdx.x * blockDim.x + threadIdx.x) * FMAS;
    float a[FMAS], b = x[0];
    for (int j = 0; j < FMAS; j++)
        a[j] = x[i + j];
    for (int j = 0; j < FMAS; j++)
        a[j] = fmaf(a[j], b, 1.0f);
    for (int j = 0; j < FMAS; j++)
        y[i + j] = a[j];
}

/* One multiply and one add that the compiler may not contract into an FMA:
 * the product goes through a volatile variable. */
static __global__ void mul_then_add(const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    volatile float product = x[i] * x[i + 1];
    y[i] = product + 1.0f;
}

/* One fp64 FMA and one fp64 divide a thread. */
static __global__ void double_work(const double *x, double *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fma(x[i], x[i], 1.0) / x[i + 1];
}

/* A store under a condition cannot become a select: each is one branch
 * per warp, taken one way by a whole warp (odd warps, odd blocks) or by
 * half of it (odd lanes). */
static __global__ void odd_warps_store(float *y)
{
    if (threadIdx.x / 32 % 2)
        y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

static __global__ void odd_blocks_store(float *y)
{
    if (blockIdx.x % 2)
        y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

static __global__ void odd_lanes_store(float *y)
{
    if (threadIdx.x % 2)
        y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

/* Lane l adds trips[l] = 1 + l % 4 values. */
static __global__ void lane_trip_counts(const float *x, const int *trips, float *y)
{
    float sum = 0.0f;
    for (int j = 0; j < trips[threadIdx.x]; j++)
        sum += x[j];
    y[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/* A warp sum by shuffles, added up with atomics: no branch of its own; the
 * atomics' compare-and-swap loops are the emulator's (atomicMax's loop
 * ends at once for a lane whose value is not larger: divergent, if it
 * were counted). */
static __global__ void shuffle_and_atomics(const float *x, float *total, int *largest)
{
    float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    atomicAdd(total, v);
    atomicMax(largest, (int)(threadIdx.x % 7));
}

/* Block 0 runs `heavy` trips of a loop, the others `others`. */
static __global__ void one_heavy_block(const float *x, float *y, int heavy, int others)
{
    float v = x[threadIdx.x];
    int n = blockIdx.x == 0 ? heavy : others;
    for (int i = 0; i < n; i++)
        v = v * 0.5f + (float)i; /* no loads: one round trip a launch */
    y[blockIdx.x * blockDim.x + threadIdx.x] = v;
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

/* An update in place moves each sector twice: in from DRAM and back. */
static void in_place_moves_sectors_twice(void)
{
    float *x = device_floats(N);
    CT_EMU_LAUNCH(increment_floats, N / THREADS, THREADS, 0, 0, x, N);
    cuda_emu_kernel_counters c = counted("increment_floats");
    CHECK(c.distinct_sectors == 2ull * N * 4 / 32, "%llu distinct sectors (x in and out)",
          c.distinct_sectors);
    cudaFree(x);
}

/* Per source line: the 32x32 tile's conflicts all come from its column
 * read, one line of this file (the padded tile has none), the stride-8
 * read's line is one line with its load's waste, a branch on the lane is
 * one divergent line, and a loop's FLOPs add up over its lines. */
static void lines_name_the_conflicting_read(void)
{
    bool fp_and_branches = cuda_emu_counters_fp_and_branches() != 0;
    cuda_emu_counters_reset();
    cuda_emu_counters_lines(1);
    float *out = device_floats(TILE), *x = device_floats(8 * N), *y = device_floats(N);
    CT_EMU_LAUNCH(tile_columns<TILE>, 1, TILE, 0, 0, out);
    CT_EMU_LAUNCH(tile_columns<TILE + 1>, 1, TILE, 0, 0, out);
    CT_EMU_LAUNCH(strided_read, N / THREADS, THREADS, 0, 0, x, y, N, 8);
    if (fp_and_branches) {
        CT_EMU_LAUNCH(fma_loop, BLOCKS, BLOCK_THREADS, 0, 0, x, y, 37);
        CT_EMU_LAUNCH(odd_lanes_store, BLOCKS, BLOCK_THREADS, 0, 0, y);
        CT_EMU_LAUNCH(calls_once, BLOCKS, BLOCK_THREADS, 0, 0, x, y);
        CT_EMU_LAUNCH(calls_twice, BLOCKS, BLOCK_THREADS, 0, 0, x, y);
    }
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "synchronize");
    cuda_emu_counters_lines(0);
    enum { MOST_LINES = 256 };
    static cuda_emu_line_counters lines[MOST_LINES];
    int n = cuda_emu_counters_lines_get(lines, MOST_LINES);
    int conflicting = 0, padded_conflicting = 0, strided = 0, divergent_lines = 0;
    unsigned long long loop_flops = 0, loop_instructions = 0;
    for (int i = 0; i < n && i < MOST_LINES; i++) {
        const cuda_emu_line_counters *c = &lines[i];
        bool here = strncmp(c->where, "test_emu_counters.cu:", 21) == 0;
        unsigned long long excess = c->shared_wavefronts - c->shared_ideal_wavefronts;
        if (strcmp(c->kernel, "tile_columns<TILE>") == 0 && excess > 0) {
            conflicting++;
            CHECK(here && excess == TILE * TILE - TILE && c->requests == TILE,
                  "%s: %llu requests, %llu wavefronts above %llu", c->where, c->requests,
                  c->shared_wavefronts, c->shared_ideal_wavefronts);
        }
        if (strcmp(c->kernel, "tile_columns<TILE + 1>") == 0 && excess > 0)
            padded_conflicting++;
        if (strcmp(c->kernel, "fma_loop") == 0) {
            loop_flops += c->flops;
            loop_instructions += c->thread_instructions;
        }
        if (strcmp(c->kernel, "odd_lanes_store") == 0 && c->divergent_branches > 0) {
            divergent_lines++;
            CHECK(here && c->divergent_branches == WARPS && c->branches == WARPS,
                  "%s: %llu of %llu branches divergent", c->where, c->divergent_branches,
                  c->branches);
        }
        if (strcmp(c->kernel, "strided_read") == 0 && c->bytes_moved > 0) {
            /* y[i] = x[i * 8]: the load moves a sector for every 4 bytes,
             * the store every byte it moves */
            strided++;
            CHECK(here && c->bytes_used == 8ull * N && c->bytes_moved == 36ull * N,
                  "%s: %llu of %llu bytes used", c->where, c->bytes_used, c->bytes_moved);
        }
    }
    CHECK(conflicting == 1 && padded_conflicting == 0 && strided == 1,
          "%d conflicting lines in the 32x32 tile, %d in the padded one, %d strided reads "
          "(of %d lines)",
          conflicting, padded_conflicting, strided, n);
    /* the loop's FLOPs, wherever its blocks' lines are, add up to the kernel's */
    CHECK(!fp_and_branches || (divergent_lines == 1 &&
                               loop_flops == 2ull * 37 * BLOCKS * BLOCK_THREADS),
          "%d divergent lines, %llu FLOPs in fma_loop's lines", divergent_lines, loop_flops);
    if (fp_and_branches) {
        /* and so do its instructions: every lane runs them all (no
         * divergence, whole warps), so they are 32 x the warps' */
        cuda_emu_kernel_counters loop = counted("fma_loop");
        CHECK(loop.warp_instructions > 0 && loop_instructions == 32 * loop.warp_instructions,
              "%llu thread instructions in fma_loop's lines, %llu warp instructions",
              loop_instructions, loop.warp_instructions);
        /* the out-of-line function's lines count for each kernel that ran
         * them: twice the instructions in the kernel calling it twice */
        int shared_lines = 0;
        for (int i = 0; i < n && i < MOST_LINES; i++) {
            if (strcmp(lines[i].kernel, "calls_once") != 0 || lines[i].thread_instructions == 0)
                continue;
            for (int j = 0; j < n && j < MOST_LINES; j++)
                if (strcmp(lines[j].kernel, "calls_twice") == 0 &&
                    strcmp(lines[j].where, lines[i].where) == 0 &&
                    strstr(lines[i].where, "test_emu_counters.cu:") &&
                    lines[j].thread_instructions == 2 * lines[i].thread_instructions)
                    shared_lines++;
        }
        CHECK(shared_lines > 0, "no line of out_of_line counted for both kernels (of %d lines)",
              n);
    }
    cudaFree(out);
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

static void load_rounds_follow_dependences(void)
{
    enum { STEPS = 9, SMS = 132, RESIDENT = 2048 / THREADS };
    const int n = (SMS * RESIDENT + 1) * THREADS; /* one block past a wave */
    int *next = NULL, *out = NULL;
    CHECK(cudaMalloc((void **)&next, sizeof(int) * n) == cudaSuccess &&
              cudaMalloc((void **)&out, sizeof(int) * n) == cudaSuccess,
          "cudaMalloc");
    CHECK(cudaMemset(next, 0, sizeof(int) * n) == cudaSuccess, "cudaMemset");
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(chase, 1, THREADS, 0, 0, next, out, STEPS);
    cuda_emu_kernel_counters c = counted("chase");
    CHECK(c.chain_load_rounds == STEPS && c.chain_barriers == 0,
          "a list of %d nodes: %llu rounds, %llu barriers", STEPS, c.chain_load_rounds,
          c.chain_barriers);
    /* the emulated device's SMs: CUDA_EMU_SMS, 132 unless set */
    const char *sms = getenv("CUDA_EMU_SMS");
    if (!sms || atoi(sms) == SMS) {
        cuda_emu_counters_reset();
        CT_EMU_LAUNCH(chase, n / THREADS, THREADS, 0, 0, next, out, STEPS);
        c = counted("chase");
        CHECK(c.chain_load_rounds == 2 * STEPS,
              "%d blocks of %d threads, %d resident on each of %d SMs: %llu rounds (want 2 "
              "waves of %d)",
              n / THREADS, THREADS, RESIDENT, SMS, c.chain_load_rounds, STEPS);
    }
    float *x = device_floats(4 * TILE), *y = device_floats(TILE);
    CT_EMU_LAUNCH(four_loads, 1, TILE, 0, 0, x, y);
    c = counted("four_loads");
    CHECK(c.chain_load_rounds == 1 && c.global_load_requests == 4,
          "four independent loads: %llu rounds, %llu requests", c.chain_load_rounds,
          c.global_load_requests);
    four_offsets offsets = {0, 32, 64, 96};
    CT_EMU_LAUNCH(four_loads_by_reference, 1, TILE, 0, 0, offsets, x, y);
    c = counted("four_loads_by_reference");
    CHECK(c.chain_load_rounds == 1 && c.global_load_requests == 4,
          "four loads at offsets from a struct's reference: %llu rounds, %llu requests",
          c.chain_load_rounds, c.global_load_requests);
    CT_EMU_LAUNCH(loads_around_a_barrier, 1, TILE, 0, 0, x, y);
    c = counted("loads_around_a_barrier");
    CHECK(c.chain_load_rounds == 2 && c.chain_barriers == 1,
          "a barrier between two loads: %llu rounds, %llu barriers", c.chain_load_rounds,
          c.chain_barriers);
    cudaFree(next);
    cudaFree(out);
    cudaFree(x);
    cudaFree(y);
}

/* Instructions, collectives and the busiest SM (the LLVM pass's counts). */
static void chain_counts_instructions(void)
{
    float *x = device_floats(N), *total = device_floats(1);
    int *largest = NULL, *a = NULL, *b = NULL;
    CHECK(cudaMalloc((void **)&largest, sizeof(int)) == cudaSuccess &&
              cudaMalloc((void **)&a, sizeof(int) * TILE) == cudaSuccess &&
              cudaMalloc((void **)&b, sizeof(int) * TILE) == cudaSuccess,
          "cudaMalloc");
    CHECK(cudaMemset(a, 0, sizeof(int) * TILE) == cudaSuccess, "cudaMemset");
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(shuffle_and_atomics, 2, 64, 0, 0, x, total, largest);
    cuda_emu_kernel_counters c = counted("shuffle_and_atomics");
    CHECK(c.chain_collectives == 5, "five shuffles in a row: %llu collectives",
          c.chain_collectives);
    /* the warps differ by a few instructions (lane 0's atomics) */
    unsigned long long most = c.chain_instructions;
    CHECK(most > 10 && c.warp_instructions <= 4 * most && c.warp_instructions >= 4 * most - 8 &&
              c.sm_instructions <= 2 * most && c.sm_instructions >= 2 * most - 4,
          "4 warps in 2 blocks of 2 on 132 SMs, one block an SM: the longest %llu "
          "instructions, %llu in all, %llu on the busiest SM",
          c.chain_instructions, c.warp_instructions, c.sm_instructions);
    CT_EMU_LAUNCH(divide_by, 1, TILE, 0, 0, a, b, 7);
    CT_EMU_LAUNCH(divide_by_7, 1, TILE, 0, 0, a, b);
    cuda_emu_kernel_counters by_d = counted("divide_by"), by_7 = counted("divide_by_7");
    CHECK(by_d.chain_instructions >= by_7.chain_instructions + 15,
          "x / d: %llu instructions, x / 7: %llu (a GPU divides in some 20)",
          by_d.chain_instructions, by_7.chain_instructions);
    /* a 16-byte aligned float4 is one load and one store (LDG.E.128,
     * STG.E.128); four floats are four of each, vectorized by the host
     * compiler or not; the empty asm is no instruction */
    float *x4 = device_floats(4 * TILE), *y4 = device_floats(4 * TILE);
    CT_EMU_LAUNCH(copy_vector4, 1, TILE, 0, 0, x4, y4);
    CT_EMU_LAUNCH(copy_scalars4, 1, TILE, 0, 0, x4, y4);
    cuda_emu_kernel_counters vector = counted("copy_vector4"), scalars = counted("copy_scalars4");
    CHECK(vector.chain_instructions + 6 == scalars.chain_instructions &&
              vector.accesses_by_width[4] == 2 * TILE,
          "a float4 copied: %llu instructions, four floats: %llu (want 6 more); %llu "
          "128-bit accesses",
          vector.chain_instructions, scalars.chain_instructions, vector.accesses_by_width[4]);
    cudaFree(x4);
    cudaFree(y4);
    cudaFree(x);
    cudaFree(total);
    cudaFree(largest);
    cudaFree(a);
    cudaFree(b);
}

/* The busiest SM of a grid whose one block does more: its blocks at the
 * launch's mean, one of them the largest -- not every one the largest. */
static void busiest_sm_counts_one_largest_block(void)
{
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0) == cudaSuccess, "cudaGetDeviceProperties");
    unsigned blocks = 3u * (unsigned)p.multiProcessorCount; /* 3 on each SM */
    float *x = device_floats(32), *y = device_floats(32 * (size_t)blocks);
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(one_heavy_block, blocks, 32, 0, 0, x, y, 200, 1);
    cuda_emu_kernel_counters c = counted("one_heavy_block");
    /* one warp a block, one wave: the chain is the largest block */
    unsigned long long largest = c.chain_instructions, mean = c.warp_instructions / blocks;
    CHECK(largest > 10 * mean && c.sm_instructions == 2 * mean + largest,
          "%u blocks, one of them %llu warp instructions, the mean %llu: the busiest SM "
          "%llu (want 2 x the mean + the largest = %llu; 3 x the largest would be %llu)",
          blocks, largest, mean, c.sm_instructions, 2 * mean + largest, 3 * largest);
    cudaFree(x);
    cudaFree(y);
}

/* The latency of two launches, one bound by its chain and one by its
 * busiest SM's issue, is the sum of each one's larger term, more than the
 * larger of the two sums (with the weights set; none counted before). */
enum { INSTRUCTION = 2, LOAD_ROUND = 600, COLLECTIVE = 24, BARRIER = 24, SM_ISSUE = 4 };

static unsigned long long chain_clocks(const cuda_emu_kernel_counters &c)
{
    return INSTRUCTION * c.chain_instructions + LOAD_ROUND * c.chain_load_rounds +
           COLLECTIVE * c.chain_collectives + BARRIER * c.chain_barriers;
}

static void latency_is_each_launchs_larger_term(void)
{
    cudaDeviceProp p;
    CHECK(cudaGetDeviceProperties(&p, 0) == cudaSuccess, "cudaGetDeviceProperties");
    unsigned many = 40u * (unsigned)p.multiProcessorCount;
    float *x = device_floats(32), *y = device_floats(32 * (size_t)many);
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(one_heavy_block, 1, 32, 0, 0, x, y, 2000, 1);
    cuda_emu_kernel_counters unweighted = counted("one_heavy_block");
    CHECK(unweighted.latency_clocks == 0, "no weights: %llu latency clocks",
          unweighted.latency_clocks);
    cuda_emu_counters_latency_weights(INSTRUCTION, LOAD_ROUND, COLLECTIVE, BARRIER, SM_ISSUE);
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(one_heavy_block, 1, 32, 0, 0, x, y, 2000, 1);
    cuda_emu_kernel_counters chain = counted("one_heavy_block");
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(one_heavy_block, many, 32, 0, 0, x, y, 200, 200);
    cuda_emu_kernel_counters issue = counted("one_heavy_block");
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(one_heavy_block, 1, 32, 0, 0, x, y, 2000, 1);
    CT_EMU_LAUNCH(one_heavy_block, many, 32, 0, 0, x, y, 200, 200);
    cuda_emu_kernel_counters both = counted("one_heavy_block");
    cuda_emu_counters_latency_weights(0, 0, 0, 0, 0);
    unsigned long long chain_bound = chain_clocks(chain);
    unsigned long long issue_bound =
        (unsigned long long)llround(issue.sm_instructions / (double)SM_ISSUE);
    CHECK(chain.latency_clocks == chain_bound && chain_bound > chain.sm_instructions / SM_ISSUE,
          "one block of a long loop: %llu latency clocks (want its chain, %llu; its issue %llu)",
          chain.latency_clocks, chain_bound, chain.sm_instructions / SM_ISSUE);
    CHECK(issue.latency_clocks == issue_bound && issue_bound > chain_clocks(issue),
          "40 blocks an SM: %llu latency clocks (want its issue, %llu; its chain %llu)",
          issue.latency_clocks, issue_bound, chain_clocks(issue));
    unsigned long long sums = std::max(chain_clocks(both), both.sm_instructions / SM_ISSUE);
    CHECK(both.latency_clocks == chain_bound + issue_bound && both.latency_clocks > sums,
          "both launches: %llu latency clocks (want %llu + %llu; the larger of the sums %llu)",
          both.latency_clocks, chain_bound, issue_bound, sums);
    cudaFree(x);
    cudaFree(y);
}

static void fmas_are_two_flops(void)
{
    float *x = device_floats(N), *y = device_floats(N);
    const unsigned long long threads = BLOCKS * BLOCK_THREADS;
    cuda_emu_counters_reset();
    CT_EMU_LAUNCH(fma_chain, BLOCKS, BLOCK_THREADS, 0, 0, x, y);
    cuda_emu_kernel_counters c = counted("fma_chain");
    CHECK(c.fp32_fmas == threads * FMAS && c.flops == threads * 2 * FMAS,
          "%llu FMAs, %llu FLOPs (want %llu and %llu)", c.fp32_fmas, c.flops, threads * FMAS,
          threads * 2 * FMAS);
    CHECK(c.fp32_adds == 0 && c.fp32_muls == 0 && c.fp32_other == 0 && c.fp64_ops == 0 &&
              c.fp16_ops == 0 && c.mma_ops == 0,
          "only FMAs: %llu adds, %llu muls, %llu other, %llu fp64, %llu fp16, %llu mma",
          c.fp32_adds, c.fp32_muls, c.fp32_other, c.fp64_ops, c.fp16_ops, c.mma_ops);
    CT_EMU_LAUNCH(fma_lanes, BLOCKS, BLOCK_THREADS, 0, 0, x, y);
    c = counted("fma_lanes");
    CHECK(c.fp32_fmas == threads * FMAS && c.flops == threads * 2 * FMAS,
          "vector FMAs: %llu FMAs, %llu FLOPs (want %llu and %llu)", c.fp32_fmas, c.flops,
          threads * FMAS, threads * 2 * FMAS);
    CT_EMU_LAUNCH(fma_loop, BLOCKS, BLOCK_THREADS, 0, 0, x, y, 37);
    c = counted("fma_loop");
    CHECK(c.fp32_fmas == threads * 37 && c.flops == threads * 2 * 37,
          "a 37-trip loop: %llu FMAs, %llu FLOPs (want %llu and %llu)", c.fp32_fmas, c.flops,
          threads * 37, threads * 2 * 37);
    cudaFree(x);
    cudaFree(y);
}

static void mul_and_add_apart(void)
{
    float *x = device_floats(N), *y = device_floats(N);
    const unsigned long long threads = BLOCKS * BLOCK_THREADS;
    CT_EMU_LAUNCH(mul_then_add, BLOCKS, BLOCK_THREADS, 0, 0, x, y);
    cuda_emu_kernel_counters c = counted("mul_then_add");
    CHECK(c.fp32_muls == threads && c.fp32_adds == threads && c.fp32_fmas == 0 &&
              c.flops == 2 * threads,
          "%llu muls, %llu adds, %llu FMAs, %llu FLOPs (want %llu, %llu, 0, %llu)",
          c.fp32_muls, c.fp32_adds, c.fp32_fmas, c.flops, threads, threads, 2 * threads);
    double *dx = NULL, *dy = NULL;
    CHECK(cudaMalloc((void **)&dx, sizeof(double) * N) == cudaSuccess &&
              cudaMalloc((void **)&dy, sizeof(double) * N) == cudaSuccess,
          "cudaMalloc");
    CHECK(cudaMemset(dx, 0, sizeof(double) * N) == cudaSuccess, "cudaMemset");
    CT_EMU_LAUNCH(double_work, BLOCKS, BLOCK_THREADS, 0, 0, dx, dy);
    c = counted("double_work");
    CHECK(c.fp64_ops == 2 * threads && c.flops == 3 * threads && c.fp32_fmas == 0 &&
              c.fp32_other == 0,
          "fp64: %llu ops, %llu FLOPs, %llu fp32 FMAs, %llu fp32 other (want %llu, %llu, 0, 0)",
          c.fp64_ops, c.flops, c.fp32_fmas, c.fp32_other, 2 * threads, 3 * threads);
    cudaFree(x);
    cudaFree(y);
    cudaFree(dx);
    cudaFree(dy);
}

static void uniform_and_divergent_branches(void)
{
    float *y = device_floats(N);
    CT_EMU_LAUNCH(odd_warps_store, BLOCKS, BLOCK_THREADS, 0, 0, y);
    CT_EMU_LAUNCH(odd_blocks_store, BLOCKS, BLOCK_THREADS, 0, 0, y);
    CT_EMU_LAUNCH(odd_lanes_store, BLOCKS, BLOCK_THREADS, 0, 0, y);
    cuda_emu_kernel_counters warps = counted("odd_warps_store");
    cuda_emu_kernel_counters blocks = counted("odd_blocks_store");
    cuda_emu_kernel_counters lanes = counted("odd_lanes_store");
    CHECK(warps.branches == WARPS && warps.divergent_branches == 0,
          "a branch on the warp: %llu branches, %llu divergent (want %d and 0)", warps.branches,
          warps.divergent_branches, WARPS);
    CHECK(blocks.branches == WARPS && blocks.divergent_branches == 0,
          "a branch on the block: %llu branches, %llu divergent (want %d and 0)",
          blocks.branches, blocks.divergent_branches, WARPS);
    CHECK(lanes.branches == WARPS && lanes.divergent_branches == WARPS,
          "a branch on the lane: %llu branches, %llu divergent (want %d and %d)",
          lanes.branches, lanes.divergent_branches, WARPS, WARPS);
    cudaFree(y);
}

/* Lanes run 1 to 4 trips: the loop's exit branch diverges at the first,
 * second and third trip (some lanes leave, some stay) and not at the
 * fourth, where only the lanes of 4 trips are left. */
static void loop_exit_diverges(void)
{
    float *x = device_floats(N), *y = device_floats(N);
    int host_trips[BLOCK_THREADS], *trips = NULL;
    for (int l = 0; l < BLOCK_THREADS; l++)
        host_trips[l] = 1 + l % 4;
    CHECK(cudaMalloc((void **)&trips, sizeof host_trips) == cudaSuccess &&
              cudaMemcpy(trips, host_trips, sizeof host_trips, cudaMemcpyHostToDevice) ==
                  cudaSuccess,
          "trips");
    CT_EMU_LAUNCH(lane_trip_counts, BLOCKS, BLOCK_THREADS, 0, 0, x, trips, y);
    cuda_emu_kernel_counters c = counted("lane_trip_counts");
    CHECK(c.divergent_branches == 3 * WARPS, "%llu divergent branches (want %d: 3 a warp)",
          c.divergent_branches, 3 * WARPS);
    CHECK(c.fp32_adds == BLOCKS * BLOCK_THREADS / 4 * (1 + 2 + 3 + 4),
          "%llu adds (want the lanes' trips summed, %d)", c.fp32_adds,
          BLOCKS * BLOCK_THREADS / 4 * (1 + 2 + 3 + 4));
    cudaFree(x);
    cudaFree(y);
    cudaFree(trips);
}

static void emulator_code_counts_nothing(void)
{
    float *x = device_floats(N), *total = device_floats(1);
    int *largest = NULL;
    CHECK(cudaMalloc((void **)&largest, sizeof(int)) == cudaSuccess &&
              cudaMemset(largest, 0, sizeof(int)) == cudaSuccess,
          "cudaMalloc");
    CT_EMU_LAUNCH(shuffle_and_atomics, BLOCKS, BLOCK_THREADS, 0, 0, x, total, largest);
    cuda_emu_kernel_counters c = counted("shuffle_and_atomics");
    CHECK(c.branches == 0 && c.divergent_branches == 0,
          "%llu branches, %llu divergent (the kernel has none; the emulator's loops must not "
          "count)",
          c.branches, c.divergent_branches);
    CHECK(c.fp32_adds == 5ull * BLOCKS * BLOCK_THREADS,
          "%llu adds (want the shuffle sum's 5 a thread; atomicAdd's is the emulator's)",
          c.fp32_adds);
    CHECK(c.atomics == 2ull * BLOCKS * BLOCK_THREADS, "%llu atomics", c.atomics);
    cudaFree(x);
    cudaFree(total);
    cudaFree(largest);
}

/* Host code of a .cu file has the same calls as its kernels: outside a GPU
 * thread they count nothing (and must not fail). */
static __attribute__((noinline)) float host_arithmetic(int n)
{
    float sum = 0.0f;
    for (int i = 0; i < n; i++)
        sum = i % 3 ? fmaf(sum, 0.5f, (float)i) : sum * 0.25f;
    return sum;
}

static void host_code_counts_nothing(void)
{
    cuda_emu_counters_reset();
    volatile float sum = host_arithmetic(1000);
    (void)sum;
    cuda_emu_kernel_counters all;
    memset(&all, 0xff, sizeof all);
    cudaEvent_t event = NULL;
    CHECK(cudaEventCreate(&event) == cudaSuccess && cudaEventRecord(event, 0) == cudaSuccess &&
              cudaEventSynchronize(event) == cudaSuccess,
          "event");
    CHECK(cuda_emu_event_counters(event, &all) == 0, "event counters");
    CHECK(all.flops == 0 && all.branches == 0, "host code counted %llu FLOPs, %llu branches",
          all.flops, all.branches);
    cudaEventDestroy(event);
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
    RUN(in_place_moves_sectors_twice);
    RUN(stride_8_read_is_12_5_percent);
    RUN(shared_column_conflicts);
    RUN(lines_name_the_conflicting_read);
    RUN(widths_and_atomics);
    RUN(events_bracket_the_counts);
    RUN(load_rounds_follow_dependences);
    if (cuda_emu_counters_fp_and_branches()) {
        RUN(chain_counts_instructions);
        RUN(busiest_sm_counts_one_largest_block);
        RUN(latency_is_each_launchs_larger_term);
        RUN(fmas_are_two_flops);
        RUN(mul_and_add_apart);
        RUN(uniform_and_divergent_branches);
        RUN(loop_exit_diverges);
        RUN(emulator_code_counts_nothing);
        RUN(host_code_counts_nothing);
    } else {
        printf("# floating-point work and branches: not in this build (they need "
               "emu/count_pass.cpp, built with LLVM 14's headers)\n");
    }
    RUN(enables_nest);
    RUN(counting_off_counts_nothing);
    return harness_finish();
}
