/*
 * The emulated NCCL (emu/nccl.cpp, nccl_shm.cpp, nccl_reduce.cpp): known
 * answers, bit for bit, against the host computing the same reduction in
 * rank order (each step rounded to the type; ncclAvg multiplies each
 * floating input by 1/n first); ranks in one process (ncclCommInitAll, one
 * host thread per rank, ncclCommInitRank in a group) and in separate
 * processes (this binary run again with --child: each its own emulated
 * runtime, meeting through shared memory); the failures: a rank that never
 * calls (CUDA_EMU_NCCL_TIMEOUT), a process killed before its collective,
 * an aborted rank, mismatched calls, bad arguments, capture.  Nothing may
 * be left in /dev/shm.  Built only with `make CUDA=emu`.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

#define CT_VENDOR_API_TABLES /* the loader's table, not its call macros */
#include "cuda/vendor_api.h"

extern "C" {
#include "harness.h"
}

enum { MAX_RANKS = 4, COUNT = 3000 /* crosses the shim's blocks of 1024 */ };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool contains(const char *text, const char *part)
{
    return text && strstr(text, part) != NULL;
}

/* A value for element i of rank r, the same in every process: a float
 * with 24 random bits in [-1, 1). */
static float value_at(int rank, size_t i)
{
    uint64_t z = (uint64_t)(rank + 1) * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
    z ^= z >> 29;
    return (float)((double)(z >> 40) / (double)(1 << 23) - 1.0);
}

static uint64_t random_bits(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 17;
}

/* ---- the reference: rank order, each step rounded to the type ---- */

template <class T>
static double as_double(T x)
{
    return (double)(float)x;
}
template <>
double as_double<double>(double x)
{
    return x;
}

template <class T>
static T combine(ncclRedOp_t op, T a, T b)
{
    if constexpr (std::is_integral<T>::value) {
        typedef typename std::make_unsigned<T>::type U;
        if (op == ncclSum || op == ncclAvg)
            return (T)(U)((U)a + (U)b);
        if (op == ncclProd)
            return (T)(U)((U)a * (U)b);
        if (op == ncclMax)
            return a > b ? a : b;
        return a < b ? a : b;
    } else {
        if (op == ncclSum || op == ncclAvg)
            return a + b;
        if (op == ncclProd)
            return a * b;
        if (op == ncclMax)
            return as_double(a) > as_double(b) ? a : b;
        return as_double(a) < as_double(b) ? a : b;
    }
}

template <class T>
static void reference(ncclRedOp_t op, int n, T *const *in, T *out, size_t count)
{
    T scale = T(1);
    if constexpr (std::is_same<T, double>::value)
        scale = 1.0 / n;
    else if constexpr (!std::is_integral<T>::value)
        scale = T((float)(1.0 / n)); /* 1/n rounded to float, then to the type */
    bool premultiply = op == ncclAvg && !std::is_integral<T>::value;
    for (size_t i = 0; i < count; i++) {
        T acc = in[0][i];
        if (premultiply)
            acc = acc * scale;
        for (int r = 1; r < n; r++) {
            T term = in[r][i];
            if (premultiply)
                term = term * scale; /* its own statement: no contraction into an FMA */
            acc = combine(op, acc, term);
        }
        if constexpr (std::is_integral<T>::value)
            if (op == ncclAvg)
                acc = (T)(acc / (T)n);
        out[i] = acc;
    }
}

/* Random inputs that suit the type: floats in [-2, 2), integers over their
 * whole range (sums and products wrap), small ones for the average. */
template <class T>
static void fill(T *x, size_t count, uint64_t seed, ncclRedOp_t op)
{
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < count; i++) {
        uint64_t bits = random_bits(&state);
        if constexpr (std::is_integral<T>::value)
            x[i] = op == ncclAvg ? (T)((int)(bits % 2001) - 1000) : (T)bits;
        else
            x[i] = T((float)((double)(bits & 0xffffff) / (double)(1 << 22) - 2.0));
    }
}

/* ---- communicators of one process ---- */

struct world {
    int n;
    ncclComm_t comms[MAX_RANKS];
    cudaStream_t streams[MAX_RANKS];
};

static void world_open(world *w, int n)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    ncclResult_t result = ncclCommInitAll(w->comms, n, NULL);
    CHECK(result == ncclSuccess, "ncclCommInitAll(%d): %s", n, ncclGetLastError(NULL));
    for (int r = 0; r < n; r++) {
        cudaSetDevice(r);
        CHECK(cudaStreamCreate(&w->streams[r]) == cudaSuccess, "stream");
    }
}

static void world_close(world *w)
{
    for (int r = 0; r < w->n; r++) {
        cudaSetDevice(r);
        cudaStreamDestroy(w->streams[r]);
        CHECK(ncclCommDestroy(w->comms[r]) == ncclSuccess, "destroy: %s", ncclGetLastError(NULL));
    }
    cudaSetDevice(0);
}

static void *device_copy(int device, const void *host, size_t bytes)
{
    void *dev = NULL;
    cudaSetDevice(device);
    CHECK(cudaMalloc(&dev, bytes) == cudaSuccess, "cudaMalloc");
    if (host)
        CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
    return dev;
}

static void host_copy(int device, void *host, const void *dev, size_t bytes)
{
    cudaSetDevice(device);
    cudaError_t error = cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost);
    CHECK(error == cudaSuccess, "download: %s", cudaGetErrorString(error));
}

/* All-reduce `op` of T over the world's ranks from one thread in a group,
 * the streams synchronized last to first; every rank's output must be the
 * reference's bits. */
template <class T>
static void check_all_reduce(world *w, ncclDataType_t type, ncclRedOp_t op, bool in_place,
                             const char *what)
{
    size_t bytes = sizeof(T) * COUNT;
    T *in[MAX_RANKS], *want = (T *)malloc(bytes), *got = (T *)malloc(bytes);
    void *send[MAX_RANKS], *recv[MAX_RANKS];
    for (int r = 0; r < w->n; r++) {
        in[r] = (T *)malloc(bytes);
        fill(in[r], COUNT, (uint64_t)(r + 1) * 31 + (uint64_t)type * 7 + (uint64_t)op, op);
        send[r] = device_copy(r, in[r], bytes);
        recv[r] = in_place ? send[r] : device_copy(r, NULL, bytes);
    }
    reference(op, w->n, in, want, COUNT);
    CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int r = 0; r < w->n; r++) {
        ncclResult_t result =
            ncclAllReduce(send[r], recv[r], COUNT, type, op, w->comms[r], w->streams[r]);
        CHECK(result == ncclSuccess, "%s rank %d: %s", what, r, ncclGetLastError(NULL));
    }
    CHECK(ncclGroupEnd() == ncclSuccess, "group end");
    for (int r = w->n - 1; r >= 0; r--)
        CHECK(cudaStreamSynchronize(w->streams[r]) == cudaSuccess, "%s: sync %d: %s", what, r,
              cudaGetErrorString(cudaGetLastError()));
    for (int r = 0; r < w->n; r++) {
        host_copy(r, got, recv[r], bytes);
        size_t first = COUNT;
        for (size_t i = 0; i < COUNT && first == COUNT; i++)
            if (memcmp(&got[i], &want[i], sizeof(T)) != 0)
                first = i;
        CHECK(first == COUNT, "%s, %d ranks, %s: rank %d element %zu is %.9g, want %.9g", what,
              w->n, in_place ? "in place" : "out of place", r, first,
              as_double(got[first % COUNT]), as_double(want[first % COUNT]));
        cudaSetDevice(r);
        cudaFree(send[r]);
        if (!in_place)
            cudaFree(recv[r]);
        free(in[r]);
    }
    free(want);
    free(got);
}

static void loader_and_version(void)
{
    int version = 0;
    CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE &&
              version == 22809, "version %d", version);
    CHECK(ct_nccl_load() == CT_OK, "ct_nccl_load: %s", ct_last_error());
    CHECK(ct_nccl.ncclAllReduce == &ncclAllReduce && ct_nccl.ncclGetLastError == &ncclGetLastError,
          "vendor_api.c did not resolve the shim");
    CHECK(cuda_emu_dlopen("libnope.so.1") == NULL &&
              contains(cuda_emu_dlerror(), "libcublas.so.13, libcudnn.so.9 and libnccl.so.2"),
          "%s", cuda_emu_dlerror());
    CHECK(contains(ncclGetErrorString(ncclRemoteError), "remote process exited"), "strings");
    world w;
    world_open(&w, 3);
    int count = 0, device = -1, rank = -1;
    CHECK(ncclCommCount(w.comms[2], &count) == ncclSuccess && count == 3, "count %d", count);
    CHECK(ncclCommCuDevice(w.comms[2], &device) == ncclSuccess && device == 2, "device %d", device);
    CHECK(ncclCommUserRank(w.comms[2], &rank) == ncclSuccess && rank == 2, "rank %d", rank);
    world_close(&w);
}

static void float_sum_avg_max_over_2_3_4_ranks(void)
{
    for (int n = 2; n <= 4; n++) {
        world w;
        world_open(&w, n);
        check_all_reduce<float>(&w, ncclFloat32, ncclSum, false, "float sum");
        check_all_reduce<float>(&w, ncclFloat32, ncclAvg, true, "float avg");
        check_all_reduce<float>(&w, ncclFloat32, ncclMax, false, "float max");
        world_close(&w);
    }
}

static void every_type(void)
{
    world w;
    world_open(&w, 3);
    check_all_reduce<double>(&w, ncclFloat64, ncclSum, false, "double sum");
    check_all_reduce<double>(&w, ncclFloat64, ncclAvg, true, "double avg");
    check_all_reduce<__half>(&w, ncclFloat16, ncclSum, true, "half sum");
    check_all_reduce<__half>(&w, ncclFloat16, ncclAvg, false, "half avg");
    check_all_reduce<__half>(&w, ncclFloat16, ncclMax, false, "half max");
    check_all_reduce<__nv_bfloat16>(&w, ncclBfloat16, ncclSum, false, "bf16 sum");
    check_all_reduce<__nv_bfloat16>(&w, ncclBfloat16, ncclProd, true, "bf16 prod");
    check_all_reduce<int32_t>(&w, ncclInt32, ncclSum, true, "int32 sum (wrapping)");
    check_all_reduce<int32_t>(&w, ncclInt32, ncclAvg, false, "int32 avg");
    check_all_reduce<int32_t>(&w, ncclInt32, ncclMin, false, "int32 min");
    check_all_reduce<int64_t>(&w, ncclInt64, ncclSum, false, "int64 sum");
    check_all_reduce<int8_t>(&w, ncclInt8, ncclProd, false, "int8 prod");
    check_all_reduce<uint8_t>(&w, ncclUint8, ncclMax, true, "uint8 max");
    world_close(&w);
}

/* Root 1's buffer reaches every rank; on the legacy streams (stream 0). */
static void broadcast_from_root_1(void)
{
    world w;
    world_open(&w, 3);
    float host[COUNT], got[COUNT];
    void *buffers[3], *outs[3];
    for (size_t i = 0; i < COUNT; i++)
        host[i] = value_at(1, i);
    for (int r = 0; r < 3; r++) {
        buffers[r] = device_copy(r, r == 1 ? host : NULL, sizeof host);
        outs[r] = r == 1 ? buffers[r] : device_copy(r, NULL, sizeof host); /* root in place */
    }
    ncclGroupStart();
    for (int r = 0; r < 3; r++)
        CHECK(ncclBroadcast(r == 1 ? buffers[r] : NULL, outs[r], COUNT, ncclFloat, 1, w.comms[r],
                            0) == ncclSuccess,
              "broadcast %d: %s", r, ncclGetLastError(NULL));
    ncclGroupEnd();
    for (int r = 0; r < 3; r++) {
        cudaSetDevice(r);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "sync %d", r);
        host_copy(r, got, outs[r], sizeof got);
        CHECK(memcmp(got, host, sizeof got) == 0, "rank %d did not get root 1's data", r);
        cudaFree(buffers[r]);
        if (r != 1)
            cudaFree(outs[r]);
    }
    world_close(&w);
}

/* The collective runs in stream order: after a copy queued before it, and
 * not at the call (the output is still the allocator's 0xff bytes then). */
static void runs_in_stream_order(void)
{
    world w;
    world_open(&w, 2);
    float *pinned[2], *send[2], *recv[2], got[COUNT], want[COUNT];
    for (int r = 0; r < 2; r++) {
        send[r] = (float *)device_copy(r, NULL, sizeof got);
        recv[r] = (float *)device_copy(r, NULL, sizeof got);
        cudaMemset(send[r], 0, sizeof got);
        cudaMallocHost((void **)&pinned[r], sizeof got);
        for (size_t i = 0; i < COUNT; i++)
            pinned[r][i] = value_at(r, i);
        cudaMemcpyAsync(send[r], pinned[r], sizeof got, cudaMemcpyHostToDevice, w.streams[r]);
    }
    ncclGroupStart();
    for (int r = 0; r < 2; r++)
        ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, w.comms[r], w.streams[r]);
    ncclGroupEnd();
    unsigned char untouched[16];
    memcpy(untouched, recv[1], sizeof untouched); /* device memory is host memory here */
    for (size_t i = 0; i < sizeof untouched; i++)
        CHECK(untouched[i] == 0xff, "the all-reduce ran at the call");
    cudaStreamSynchronize(w.streams[1]);
    cudaStreamSynchronize(w.streams[0]);
    for (size_t i = 0; i < COUNT; i++)
        want[i] = pinned[0][i] + pinned[1][i];
    for (int r = 0; r < 2; r++) {
        host_copy(r, got, recv[r], sizeof got);
        CHECK(memcmp(got, want, sizeof got) == 0, "rank %d: not the sum of the copied inputs", r);
        cudaFree(send[r]);
        cudaFree(recv[r]);
        cudaFreeHost(pinned[r]);
    }
    world_close(&w);
}

/* ---- ranks that meet through an id in one process ---- */

static void id_hex(const ncclUniqueId *id, char *hex)
{
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static void id_from_hex(const char *hex, ncclUniqueId *id)
{
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned byte = 0;
        sscanf(hex + 2 * i, "%2x", &byte);
        id->internal[i] = (char)byte;
    }
}

/* Segments this process's ids named that are still in /dev/shm. */
static int segments_left(void)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "cuttle-nccl-%d-", (int)getpid());
    DIR *dir = opendir("/dev/shm");
    int left = 0;
    for (struct dirent *e = dir ? readdir(dir) : NULL; e; e = readdir(dir))
        left += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (dir)
        closedir(dir);
    return left;
}

/* One host thread per rank: init, all-reduce on its own stream, wait for
 * its own stream, check. */
struct rank_thread {
    int rank, n;
    ncclUniqueId id;
    int failures;
    char why[512];
};

static void *run_rank_thread(void *arg)
{
    rank_thread *t = (rank_thread *)arg;
    size_t bytes = sizeof(float) * COUNT;
    float *in = (float *)malloc(bytes), *got = (float *)malloc(bytes), *want = (float *)malloc(bytes);
    cudaSetDevice(t->rank);
    ncclComm_t comm = NULL;
    cudaStream_t stream = NULL;
    ncclResult_t result = ncclCommInitRank(&comm, t->n, t->id, t->rank);
    if (result != ncclSuccess) {
        snprintf(t->why, sizeof t->why, "init: %s", ncclGetLastError(NULL));
        t->failures++;
        return NULL;
    }
    for (size_t i = 0; i < COUNT; i++) {
        in[i] = value_at(t->rank, i);
        want[i] = value_at(0, i);
        for (int r = 1; r < t->n; r++)
            want[i] = want[i] + value_at(r, i);
    }
    void *dev = NULL;
    cudaStreamCreate(&stream);
    cudaMalloc(&dev, bytes);
    cudaMemcpy(dev, in, bytes, cudaMemcpyHostToDevice);
    result = ncclAllReduce(dev, dev, COUNT, ncclFloat, ncclSum, comm, stream);
    cudaError_t error = cudaStreamSynchronize(stream);
    cudaMemcpy(got, dev, bytes, cudaMemcpyDeviceToHost);
    if (result != ncclSuccess || error != cudaSuccess || memcmp(got, want, bytes) != 0) {
        snprintf(t->why, sizeof t->why, "all-reduce: %s / %s / first %g want %g",
                 ncclGetLastError(NULL), cudaGetErrorString(error), got[0], want[0]);
        t->failures++;
    }
    cudaFree(dev);
    cudaStreamDestroy(stream);
    ncclCommDestroy(comm);
    free(in), free(got), free(want);
    return NULL;
}

static void one_host_thread_per_rank(void)
{
    enum { N = 4 };
    ncclUniqueId id;
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "id");
    rank_thread threads[N];
    pthread_t handles[N];
    for (int r = 0; r < N; r++) {
        threads[r] = rank_thread{r, N, id, 0, ""};
        pthread_create(&handles[r], NULL, run_rank_thread, &threads[r]);
    }
    for (int r = 0; r < N; r++) {
        pthread_join(handles[r], NULL);
        CHECK(threads[r].failures == 0, "rank %d: %s", r, threads[r].why);
    }
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
}

/* ncclCommInitRank for every rank from one thread, in a group. */
static void init_rank_in_a_group(void)
{
    ncclUniqueId id;
    ncclComm_t comms[2] = {NULL, NULL};
    ncclGetUniqueId(&id);
    CHECK(ncclGroupStart() == ncclSuccess, "start");
    for (int r = 0; r < 2; r++) {
        cudaSetDevice(r);
        CHECK(ncclCommInitRank(&comms[r], 2, id, r) == ncclSuccess, "%s", ncclGetLastError(NULL));
    }
    int x = 0;
    CHECK(ncclAllReduce(&x, &x, 1, ncclInt, ncclSum, comms[0], 0) == ncclInvalidUsage &&
              contains(ncclGetLastError(NULL), "ncclGroupEnd first"),
          "a collective before ncclGroupEnd: %s", ncclGetLastError(NULL));
    CHECK(ncclGroupEnd() == ncclSuccess, "end: %s", ncclGetLastError(NULL));
    int *dev[2];
    for (int r = 0; r < 2; r++) {
        int value = 40 + r;
        dev[r] = (int *)device_copy(r, &value, sizeof value);
    }
    ncclGroupStart();
    for (int r = 0; r < 2; r++)
        CHECK(ncclAllReduce(dev[r], dev[r], 1, ncclInt, ncclSum, comms[r], 0) == ncclSuccess,
              "%s", ncclGetLastError(NULL));
    ncclGroupEnd();
    for (int r = 0; r < 2; r++) {
        host_copy(r, &x, dev[r], sizeof x);
        CHECK(x == 81, "rank %d: %d", r, x);
        cudaFree(dev[r]);
        ncclCommDestroy(comms[r]);
    }
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
    cudaSetDevice(0);
}

/* ---- failures ---- */

/* Whether `call` returned `want` with a message containing `part`. */
#define EXPECT_REFUSED(call, want, part)                                                     \
    do {                                                                                     \
        ncclResult_t got_ = (call);                                                          \
        CHECK(got_ == (want) && contains(ncclGetLastError(NULL), part),                      \
              "%s: %d (%s), want %d with '%s'", #call, (int)got_, ncclGetLastError(NULL),    \
              (int)(want), part);                                                            \
    } while (0)

static void bad_arguments(void)
{
    world w;
    world_open(&w, 2);
    ncclComm_t c0 = w.comms[0];
    cudaStream_t s0 = w.streams[0];
    float *d0 = (float *)device_copy(0, NULL, 64 * sizeof(float));
    float *d1 = (float *)device_copy(1, NULL, 64 * sizeof(float));
    float host[64], *pinned = NULL;
    cudaMallocHost((void **)&pinned, sizeof host);
    EXPECT_REFUSED(ncclAllReduce(host, d0, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "sendbuff");
    EXPECT_REFUSED(ncclAllReduce(host, d0, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "is not device memory");
    EXPECT_REFUSED(ncclAllReduce(d0, pinned, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "recvbuff");
    EXPECT_REFUSED(ncclAllReduce(d0, pinned, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "pinned host memory");
    EXPECT_REFUSED(ncclAllReduce(d1, d0, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "is memory of device 1; the communicator's device is 0");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 65, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "runs past the end of its allocation");
    EXPECT_REFUSED(ncclAllReduce(d0, d0 + 1, 16, ncclFloat, ncclSum, c0, s0), ncclInvalidArgument,
                   "overlap");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, SIZE_MAX / 2, ncclFloat, ncclSum, c0, s0),
                   ncclInvalidArgument, "more bytes than memory has");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat8e4m3, ncclSum, c0, s0),
                   ncclInvalidArgument, "ncclFloat8e4m3 is not a datatype the emulator has");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, (ncclDataType_t)99, ncclSum, c0, s0),
                   ncclInvalidArgument, "datatype 99");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat, ncclNumOps, c0, s0), ncclInvalidArgument,
                   "op 5 is not");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat, (ncclRedOp_t)-1, c0, s0),
                   ncclInvalidArgument, "op -1");
    EXPECT_REFUSED(ncclBroadcast(d0, d0, 64, ncclFloat, 2, c0, s0), ncclInvalidArgument,
                   "root 2 is not a rank");
    EXPECT_REFUSED(ncclBroadcast(d0, d0, 64, ncclFloat, -1, c0, s0), ncclInvalidArgument,
                   "root -1");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat, ncclSum, NULL, s0), ncclInvalidArgument,
                   "comm is NULL");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat, ncclSum, c0, w.streams[1]),
                   ncclInvalidArgument, "belongs to device 1");
    int devices[2] = {1, 1};
    ncclComm_t twice[2];
    EXPECT_REFUSED(ncclCommInitAll(twice, 2, devices), ncclInvalidUsage, "both device 1");
    EXPECT_REFUSED(ncclCommInitAll(twice, 5, NULL), ncclInvalidArgument, "4 emulated device");
    EXPECT_REFUSED(ncclGroupEnd(), ncclInvalidUsage, "no ncclGroupStart");
    ncclUniqueId garbage;
    memset(&garbage, 7, sizeof garbage);
    ncclComm_t lone = NULL;
    EXPECT_REFUSED(ncclCommInitRank(&lone, 2, garbage, 0), ncclInvalidArgument,
                   "not made by ncclGetUniqueId");
    EXPECT_REFUSED(ncclCommInitRank(&lone, 2, garbage, 2), ncclInvalidArgument, "rank 2 is not");
    /* nranks differ: the second rank is refused, and the first stops at once */
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclComm_t mixed[2] = {NULL, NULL};
    ncclGroupStart();
    cudaSetDevice(0);
    CHECK(ncclCommInitRank(&mixed[0], 2, id, 0) == ncclSuccess, "rank 0 attaches");
    cudaSetDevice(1);
    EXPECT_REFUSED(ncclCommInitRank(&mixed[1], 3, id, 1), ncclInvalidArgument,
                   "nranks 3 for rank 1, but the rank that came first to this id said 2");
    double start = now_seconds();
    EXPECT_REFUSED(ncclGroupEnd(), ncclRemoteError, "every rank must pass the same nranks");
    CHECK(now_seconds() - start < 5, "rank 0 waited %.1f s for a rank that was refused",
          now_seconds() - start);
    ncclResult_t async = ncclSuccess;
    CHECK(ncclCommGetAsyncError(mixed[0], &async) == ncclSuccess && async == ncclRemoteError,
          "async %d", (int)async);
    CHECK(ncclCommAbort(mixed[0]) == ncclSuccess && ncclCommDestroy(NULL) == ncclSuccess, "abort");
    EXPECT_REFUSED(ncclCommCount(mixed[0], &devices[0]), ncclInvalidArgument,
                   "not a live communicator");
    cudaSetDevice(0);
    /* capture: refused, and the capture is invalidated */
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin");
    EXPECT_REFUSED(ncclAllReduce(d0, d0, 64, ncclFloat, ncclSum, c0, s0), ncclInvalidUsage,
                   "which is capturing: the emulated NCCL cannot be captured");
    CHECK(cudaStreamEndCapture(s0, &graph) == cudaErrorStreamCaptureInvalidated && !graph,
          "the capture goes on");
    cudaGetLastError();
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
    cudaFreeHost(pinned);
    cudaFree(d0);
    cudaSetDevice(1);
    cudaFree(d1);
    world_close(&w);
}

/* Reset the devices a failed collective left sticky. */
static void reset_devices(int n)
{
    for (int r = 0; r < n; r++) {
        cudaSetDevice(r);
        cudaDeviceReset();
    }
    cudaSetDevice(0);
}

/* Different counts on two ranks: both fail, naming both calls; an aborted
 * rank fails the others' part at once. */
static void mismatched_and_aborted(void)
{
    world w;
    world_open(&w, 2);
    float *dev[2];
    for (int r = 0; r < 2; r++)
        dev[r] = (float *)device_copy(r, NULL, 64 * sizeof(float));
    ncclGroupStart();
    ncclAllReduce(dev[0], dev[0], 10, ncclFloat, ncclSum, w.comms[0], w.streams[0]);
    ncclAllReduce(dev[1], dev[1], 20, ncclFloat, ncclSum, w.comms[1], w.streams[1]);
    ncclGroupEnd();
    for (int r = 0; r < 2; r++) {
        cudaError_t error = cudaStreamSynchronize(w.streams[r]);
        CHECK(error == cudaErrorLaunchFailure &&
                  contains(cudaGetErrorString(error), "rank 0 called ncclAllReduce(count 10, "
                                                      "ncclFloat32, ncclSum), rank 1 "
                                                      "ncclAllReduce(count 20"),
              "rank %d: %s", r, cudaGetErrorString(error));
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(w.comms[r], &async);
        CHECK(async == ncclInvalidUsage, "async %d", (int)async);
    }
    EXPECT_REFUSED(ncclAllReduce(dev[0], dev[0], 10, ncclFloat, ncclSum, w.comms[0], w.streams[0]),
                   ncclInvalidUsage, "has failed (ncclCommAbort it)");
    reset_devices(2);
    for (int r = 0; r < 2; r++)
        ncclCommAbort(w.comms[r]);

    world_open(&w, 2);
    for (int r = 0; r < 2; r++)
        dev[r] = (float *)device_copy(r, NULL, 64 * sizeof(float));
    ncclAllReduce(dev[0], dev[0], 64, ncclFloat, ncclSum, w.comms[0], w.streams[0]);
    ncclCommAbort(w.comms[1]);
    double start = now_seconds();
    cudaError_t error = cudaStreamSynchronize(w.streams[0]);
    CHECK(error == cudaErrorLaunchFailure &&
              contains(cudaGetErrorString(error), "rank 1 aborted its communicator "
                                                  "(ncclCommAbort) without calling it"),
          "%s", cudaGetErrorString(error));
    CHECK(now_seconds() - start < 5, "waited %.1f s", now_seconds() - start);
    reset_devices(2);
    ncclCommDestroy(w.comms[0]);
    for (int r = 0; r < 2; r++) {
        cudaSetDevice(r);
        cudaStreamDestroy(w.streams[r]);
    }
    cudaSetDevice(0);
}

/* ---- child processes: this binary again, its own emulated runtime ---- */

extern char **environ;

/* Run this binary as `--child MODE HEX NRANKS RANK` with CUDA_EMU_DEVICES
 * and CUDA_EMU_NCCL_TIMEOUT set. */
static pid_t spawn(const char *mode, const char *hex, int nranks, int rank, int devices,
                   const char *timeout)
{
    char n_text[16], rank_text[16], devices_env[48], timeout_env[64];
    snprintf(n_text, sizeof n_text, "%d", nranks);
    snprintf(rank_text, sizeof rank_text, "%d", rank);
    snprintf(devices_env, sizeof devices_env, "CUDA_EMU_DEVICES=%d", devices);
    snprintf(timeout_env, sizeof timeout_env, "CUDA_EMU_NCCL_TIMEOUT=%s", timeout);
    int count = 0;
    while (environ[count])
        count++;
    char **env = (char **)calloc((size_t)count + 3, sizeof *env);
    int kept = 0;
    for (int i = 0; i < count; i++)
        if (strncmp(environ[i], "CUDA_EMU_DEVICES=", 17) != 0 &&
            strncmp(environ[i], "CUDA_EMU_NCCL_TIMEOUT=", 22) != 0)
            env[kept++] = environ[i];
    env[kept++] = devices_env;
    env[kept++] = timeout_env;
    char exe[] = "/proc/self/exe", flag[] = "--child";
    char *argv[] = {exe, flag, (char *)mode, (char *)hex, n_text, rank_text, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execve(exe, argv, env);
        _exit(127);
    }
    free(env);
    return pid;
}

/* Wait for the children (at most `seconds`, then kill them): their exit
 * statuses; false when one had to be killed. */
static bool reap(const pid_t *pids, int n, int *statuses, double seconds)
{
    double deadline = now_seconds() + seconds;
    int left = n;
    bool in_time = true;
    for (int i = 0; i < n; i++)
        statuses[i] = -1;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (statuses[i] != -1)
                continue;
            int status = 0;
            if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
                statuses[i] = status;
                left--;
            }
        }
        if (left > 0 && now_seconds() > deadline) {
            for (int i = 0; i < n; i++)
                if (statuses[i] == -1)
                    kill(pids[i], SIGKILL);
            in_time = false;
            deadline = now_seconds() + 60;
        }
        usleep(5000);
    }
    return in_time;
}

static bool exited_ok(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* 3 processes: 25 MB of floats (25 chunks of the staging area) and small
 * buffers of other types, bit for bit. */
static void across_processes(void)
{
    enum { N = 3 };
    ncclUniqueId id;
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    CHECK(ncclGetUniqueId(&id) == ncclSuccess, "id");
    id_hex(&id, hex);
    pid_t pids[N];
    int statuses[N];
    for (int r = 0; r < N; r++)
        pids[r] = spawn("work", hex, N, r, 1, "30");
    CHECK(reap(pids, N, statuses, 60), "the ranks did not finish in 60 s");
    for (int r = 0; r < N; r++)
        CHECK(exited_ok(statuses[r]), "rank %d: status 0x%x", r, statuses[r]);
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
}

/* 3 processes, 300 communicators in turn: each rank destroys its
 * communicator as soon as its one broadcast is done, while the others may
 * still be waiting in it; they must finish it all the same. */
enum { CHURN = 300 };

static void leaving_right_after_the_last_collective(void)
{
    enum { N = 3 };
    static char hexes[CHURN * (2 * NCCL_UNIQUE_ID_BYTES) + 1];
    for (int k = 0; k < CHURN; k++) {
        ncclUniqueId id;
        CHECK(ncclGetUniqueId(&id) == ncclSuccess, "id");
        id_hex(&id, hexes + k * 2 * NCCL_UNIQUE_ID_BYTES);
    }
    pid_t pids[N];
    int statuses[N];
    for (int r = 0; r < N; r++)
        pids[r] = spawn("churn", hexes, N, r, 1, "30");
    CHECK(reap(pids, N, statuses, 60), "the ranks did not finish in 60 s");
    for (int r = 0; r < N; r++)
        CHECK(exited_ok(statuses[r]), "rank %d: status 0x%x", r, statuses[r]);
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
}

/* Rank 2 is killed after joining; ranks 0 and 1 fail their all-reduce
 * within seconds, naming it. */
static void killed_peer(void)
{
    enum { N = 3 };
    ncclUniqueId id;
    char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
    ncclGetUniqueId(&id);
    id_hex(&id, hex);
    pid_t pids[N];
    int statuses[N];
    for (int r = 0; r < N; r++)
        pids[r] = spawn(r == 2 ? "die" : "survive", hex, N, r, 1, "30");
    CHECK(reap(pids, N, statuses, 60), "the ranks did not finish in 60 s");
    for (int r = 0; r < 2; r++)
        CHECK(exited_ok(statuses[r]), "rank %d: status 0x%x", r, statuses[r]);
    CHECK(WIFSIGNALED(statuses[2]) && WTERMSIG(statuses[2]) == SIGKILL, "rank 2: status 0x%x",
          statuses[2]);
    CHECK(segments_left() == 0, "a segment is left in /dev/shm");
}

/* In a process of its own, with a timeout of 0.5 s: rank 1 never calls. */
static void missing_rank_times_out(void)
{
    pid_t pid = spawn("missing", "-", 2, 0, 2, "0.5");
    int status = 0;
    CHECK(reap(&pid, 1, &status, 60), "it did not finish in 60 s");
    CHECK(exited_ok(status), "status 0x%x", status);
}

/* --child work: rank `rank` of `n` from `hex`. */
static void child_work(ncclComm_t comm, int n, int rank)
{
    const size_t big = 6600000; /* 26.4 MB of floats */
    size_t bytes = big * sizeof(float);
    float *in = (float *)malloc(bytes), *got = (float *)malloc(bytes);
    for (size_t i = 0; i < big; i++)
        in[i] = value_at(rank, i);
    void *send = device_copy(0, in, bytes), *recv = device_copy(0, NULL, bytes);
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    CHECK(ncclAllReduce(send, recv, big, ncclFloat, ncclSum, comm, stream) == ncclSuccess, "%s",
          ncclGetLastError(NULL));
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "%s",
          cudaGetErrorString(cudaGetLastError()));
    host_copy(0, got, recv, bytes);
    size_t wrong = 0;
    for (size_t i = 0; i < big; i++) {
        float want = value_at(0, i);
        for (int r = 1; r < n; r++)
            want = want + value_at(r, i);
        wrong += memcmp(&want, &got[i], sizeof want) != 0;
    }
    CHECK(wrong == 0, "rank %d: %zu of %zu sums differ", rank, wrong, big);
    /* small ones: int32 sum, half avg in place, broadcast from rank 1 */
    int32_t ints[5], int_sums[5];
    __half halves[MAX_RANKS][100], *half_in[MAX_RANKS], half_want[100];
    for (int i = 0; i < 5; i++) {
        ints[i] = (rank + 1) * 1000 + i;
        int_sums[i] = 0;
        for (int r = 0; r < n; r++)
            int_sums[i] += (r + 1) * 1000 + i;
    }
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < 100; i++)
            halves[r][i] = __float2half_rn(4 * value_at(r, (size_t)i));
        half_in[r] = halves[r];
    }
    reference(ncclAvg, n, half_in, half_want, 100);
    void *dev_ints = device_copy(0, ints, sizeof ints), *dev_halves =
                                                                device_copy(0, halves[rank], 200);
    void *dev_cast = device_copy(0, rank == 1 ? in : NULL, 400);
    ncclGroupStart();
    ncclAllReduce(dev_ints, dev_ints, 5, ncclInt32, ncclSum, comm, stream);
    ncclAllReduce(dev_halves, dev_halves, 100, ncclHalf, ncclAvg, comm, stream);
    ncclBroadcast(dev_cast, dev_cast, 100, ncclFloat, 1, comm, stream);
    ncclGroupEnd();
    CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "small ones");
    int32_t got_ints[5];
    __half got_halves[100];
    host_copy(0, got_ints, dev_ints, sizeof got_ints);
    host_copy(0, got_halves, dev_halves, sizeof got_halves);
    host_copy(0, got, dev_cast, 400);
    CHECK(memcmp(got_ints, int_sums, sizeof int_sums) == 0, "int32 sum: %d want %d", got_ints[0],
          int_sums[0]);
    CHECK(memcmp(got_halves, half_want, sizeof half_want) == 0, "half avg differs");
    for (int i = 0; i < 100; i++)
        CHECK(got[i] == value_at(1, (size_t)i), "broadcast element %d", i);
    cudaFree(send), cudaFree(recv), cudaFree(dev_ints), cudaFree(dev_halves), cudaFree(dev_cast);
    cudaStreamDestroy(stream);
    free(in);
    free(got);
}

/* --child churn: a broadcast on each of CHURN communicators, destroyed
 * at once. */
static void child_churn(const char *hexes, int n, int rank)
{
    for (int k = 0; k < CHURN && harness_case_failures == 0; k++) {
        ncclUniqueId id;
        id_from_hex(hexes + k * 2 * NCCL_UNIQUE_ID_BYTES, &id);
        ncclComm_t comm = NULL;
        CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "communicator %d: %s", k,
              ncclGetLastError(NULL));
        float value = rank == k % n ? (float)k : -1.0f, got = 0;
        void *dev = device_copy(0, &value, sizeof value);
        CHECK(ncclBroadcast(dev, dev, 1, ncclFloat, k % n, comm, 0) == ncclSuccess, "queued");
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "communicator %d: %s", k,
              cudaGetErrorString(cudaGetLastError()));
        CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy %d", k);
        host_copy(0, &got, dev, sizeof got);
        CHECK(got == (float)k, "communicator %d: got %g", k, got);
        cudaFree(dev);
    }
}

/* --child survive: the all-reduce fails within seconds, naming rank 2. */
static void child_survive(ncclComm_t comm)
{
    float value = 1;
    void *dev = device_copy(0, &value, sizeof value);
    double start = now_seconds();
    CHECK(ncclAllReduce(dev, dev, 1, ncclFloat, ncclSum, comm, 0) == ncclSuccess, "queued");
    cudaError_t error = cudaDeviceSynchronize();
    double waited = now_seconds() - start;
    CHECK(error == cudaErrorLaunchFailure && contains(cudaGetErrorString(error), "rank 2 (pid ") &&
              contains(cudaGetErrorString(error), "has exited"),
          "%s", cudaGetErrorString(error));
    CHECK(waited < 5, "noticed after %.1f s", waited);
    ncclResult_t async = ncclSuccess;
    CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclRemoteError &&
              contains(ncclGetLastError(comm), "has exited"),
          "async %d: %s", (int)async, ncclGetLastError(comm));
    cudaDeviceReset();
}

/* --child missing: two ranks in this process, rank 1 never calls. */
static void child_missing(void)
{
    world w;
    world_open(&w, 2);
    float *dev = (float *)device_copy(0, NULL, 16 * sizeof(float));
    CHECK(ncclAllReduce(dev, dev, 16, ncclFloat, ncclSum, w.comms[0], w.streams[0]) ==
              ncclSuccess, "queued");
    double start = now_seconds();
    cudaError_t error = cudaStreamSynchronize(w.streams[0]);
    double waited = now_seconds() - start;
    const char *text = cudaGetErrorString(error);
    CHECK(error == cudaErrorLaunchFailure &&
              contains(text, "rank(s) 1 (device 1) did not call it within 0.5 s "
                             "(CUDA_EMU_NCCL_TIMEOUT)"),
          "%s", text);
    CHECK(waited > 0.4 && waited < 10, "gave up after %.2f s", waited);
    for (int r = 0; r < 2; r++) {
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(w.comms[r], &async);
        CHECK(async == ncclRemoteError && contains(ncclGetLastError(NULL), "did not call it"),
              "rank %d: async %d", r, (int)async);
    }
    reset_devices(1);
    world_close(&w);
}

static int child_main(int argc, char **argv)
{
    if (argc != 6)
        return 2;
    const char *mode = argv[2];
    int n = atoi(argv[4]), rank = atoi(argv[5]);
    harness_case_failures = 0;
    if (strcmp(mode, "missing") == 0) {
        child_missing();
        return harness_case_failures != 0;
    }
    if (strcmp(mode, "churn") == 0) {
        child_churn(argv[3], n, rank);
        return harness_case_failures != 0;
    }
    ncclUniqueId id;
    id_from_hex(argv[3], &id);
    ncclComm_t comm = NULL;
    ncclResult_t result = ncclCommInitRank(&comm, n, id, rank);
    CHECK(result == ncclSuccess, "rank %d: init: %s", rank, ncclGetLastError(NULL));
    if (result != ncclSuccess)
        return 1;
    if (strcmp(mode, "die") == 0) {
        usleep(300000);
        raise(SIGKILL);
    }
    if (strcmp(mode, "work") == 0)
        child_work(comm, n, rank);
    else
        child_survive(comm);
    CHECK((strcmp(mode, "work") == 0 ? ncclCommDestroy : ncclCommAbort)(comm) == ncclSuccess,
          "leave");
    return harness_case_failures != 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    setenv("CUDA_EMU_DEVICES", "4", 1); /* before the first CUDA call */
    RUN(loader_and_version);
    RUN(float_sum_avg_max_over_2_3_4_ranks);
    RUN(every_type);
    RUN(broadcast_from_root_1);
    RUN(runs_in_stream_order);
    RUN(one_host_thread_per_rank);
    RUN(init_rank_in_a_group);
    RUN(bad_arguments);
    RUN(mismatched_and_aborted);
    RUN(missing_rank_times_out);
    RUN(across_processes);
    RUN(leaving_right_after_the_last_collective);
    RUN(killed_peer);
    return harness_finish();
}
