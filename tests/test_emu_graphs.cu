/*
 * CUDA Graphs on the emulated device (emu/graphs.cpp): stream capture
 * records the work queued on a stream instead of running it, and every
 * launch of the instantiated graph runs it again, in capture order, with
 * the kernel parameters of the capture and the memory as it is at the
 * launch; what CUDA forbids during a capture is refused with its error and
 * invalidates the capture.  The waits between streams (an event wait node)
 * are checked in every CUDA_EMU_ORDER: in reverse order a missing
 * dependency shows.  Built only with `make CUDA=emu`, like test_emu; the
 * few checks of what a GPU leaves undefined say so.
 */
#include <string.h>

#include <thread>

#include "cublas_v2.h"

extern "C" {
#include "harness.h"
}

enum { N = 300, THREADS = 128, BLOCKS = (N + THREADS - 1) / THREADS, WARP = 32 };

/* y[i] += value, i < n */
static __global__ void add_kernel(float *y, float value, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += value;
}

/* y[i] += factor * x[i], i < n */
static __global__ void axpy_kernel(float *y, const float *x, float factor, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] += factor * x[i];
}

/* y[lane] = value, one warp */
static __global__ void fill_kernel(float *y, float value)
{
    y[threadIdx.x] = value;
}

static __global__ void trap_kernel(float *y)
{
    if (threadIdx.x == 3)
        __trap();
    y[threadIdx.x] = 0.0f;
}

/* n floats of device memory, each `value`. */
static float *device_floats(int n, float value)
{
    float *host = (float *)malloc(sizeof(float) * (size_t)n), *dev = NULL;
    for (int i = 0; i < n; i++)
        host[i] = value;
    CHECK(cudaMalloc((void **)&dev, sizeof(float) * (size_t)n) == cudaSuccess, "cudaMalloc");
    CHECK(cudaMemcpy(dev, host, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) ==
              cudaSuccess, "upload");
    free(host);
    return dev;
}

/* Whether every one of the n floats at `dev` is `value` (after the work
 * queued on the legacy and blocking streams). */
static void expect_all(const float *dev, int n, float value, const char *what, int replay)
{
    float *host = (float *)malloc(sizeof(float) * (size_t)n);
    cudaError_t error = cudaMemcpy(host, dev, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost);
    CHECK(error == cudaSuccess, "download %s: %s", what, cudaGetErrorString(error));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += host[i] != value;
    CHECK(wrong == 0, "replay %d: %d of %s's %d floats are not %g (the first is %g)", replay,
          wrong, what, n, value, host[0]);
    free(host);
}

static cudaStream_t new_stream(unsigned flags)
{
    cudaStream_t s = NULL;
    CHECK(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess, "stream");
    return s;
}

static cudaStreamCaptureStatus capture_status(cudaStream_t s)
{
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusInvalidated;
    cudaError_t error = cudaStreamIsCapturing(s, &status);
    CHECK(error == cudaSuccess, "cudaStreamIsCapturing: %s", cudaGetErrorName(error));
    return status;
}

static size_t node_count(cudaGraph_t graph)
{
    size_t count = 0;
    CHECK(cudaGraphGetNodes(graph, NULL, &count) == cudaSuccess, "cudaGraphGetNodes");
    return count;
}

/* ---- capture and replay ------------------------------------------------------------ */

/* memset, kernel, device-to-device copy, kernel: nothing runs while they
 * are captured; each launch runs them all, in order, as one piece of work
 * of its stream.  c accumulates, so a replay that did not run shows. */
static void capture_replays_the_work(void)
{
    float *a = device_floats(N, 7.0f), *b = device_floats(N, 7.0f), *c = device_floats(N, 0.0f);
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    unsigned long long kernels = cuda_emu_kernel_launches(), graphs = cuda_emu_graph_launches();
    cudaGraph_t graph = NULL;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin");
    CHECK(cudaMemsetAsync(a, 0, sizeof(float) * N, s) == cudaSuccess, "memset");
    CT_EMU_LAUNCH(add_kernel, BLOCKS, THREADS, 0, s, a, 1.5f, (int)N);
    CHECK(cudaMemcpyAsync(b, a, sizeof(float) * N, cudaMemcpyDeviceToDevice, s) == cudaSuccess,
          "copy");
    CT_EMU_LAUNCH(axpy_kernel, BLOCKS, THREADS, 0, s, c, (const float *)b, 2.0f, (int)N);
    CHECK(cudaGetLastError() == cudaSuccess, "launches");
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && graph != NULL, "end");

    /* Captured, not queued: waiting for the stream runs nothing. */
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    CHECK(cuda_emu_kernel_launches() == kernels, "%llu kernels ran during the capture",
          cuda_emu_kernel_launches() - kernels);
    expect_all(a, N, 7.0f, "a", 0);
    expect_all(c, N, 0.0f, "c", 0);
    CHECK(node_count(graph) == 4, "%zu nodes", node_count(graph));

    cudaGraphExec_t exec = NULL;
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    bool counting = cuda_emu_counters_available();
    if (counting) {
        cuda_emu_counters_reset();
        cuda_emu_counters_enable(1);
    }
    for (int replay = 1; replay <= 3; replay++) {
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch %d", replay);
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync %d", replay);
        expect_all(a, N, 1.5f, "a", replay);
        expect_all(b, N, 1.5f, "b", replay);
        expect_all(c, N, 3.0f * (float)replay, "c", replay);
    }
    CHECK(cuda_emu_kernel_launches() - kernels == 6, "%llu kernel launches for 3 replays",
          cuda_emu_kernel_launches() - kernels);
    CHECK(cuda_emu_graph_launches() - graphs == 3, "%llu graph launches",
          cuda_emu_graph_launches() - graphs);
    if (counting) {
        cuda_emu_kernel_counters k;
        CHECK(cuda_emu_counters_find("add_kernel", &k) == 0 && k.launches == 3 &&
                  k.blocks == 3 * BLOCKS,
              "the counters saw %llu launches of add_kernel", k.launches);
        cuda_emu_counters_enable(0);
    }

    /* The launch runs after the work queued before it and before the work
     * queued after it. */
    cudaMemsetAsync(c, 0, sizeof(float) * N, s);
    cudaGraphLaunch(exec, s);
    cudaMemsetAsync(b, 0, sizeof(float) * N, s);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    expect_all(c, N, 3.0f, "c", 4);
    expect_all(b, N, 0.0f, "b", 4);

    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
}

/* Two captures of one kernel with different arguments: each graph keeps
 * its own, launch after launch. */
static void kernel_parameters_are_captured(void)
{
    float *y = device_floats(WARP, 0.0f), value = 3.0f;
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t graphs[2] = {NULL, NULL};
    cudaGraphExec_t execs[2] = {NULL, NULL};
    for (int g = 0; g < 2; g++) {
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, value);
        value = 5.0f;
        CHECK(cudaStreamEndCapture(s, &graphs[g]) == cudaSuccess, "end %d", g);
        CHECK(cudaGraphInstantiate(&execs[g], graphs[g], 0) == cudaSuccess, "instantiate %d", g);
    }
    for (int round = 1; round <= 2; round++)
        for (int g = 1; g >= 0; g--) {
            cudaMemsetAsync(y, 0, sizeof(float) * WARP, s);
            cudaGraphLaunch(execs[g], s);
            cudaStreamSynchronize(s);
            expect_all(y, WARP, g ? 5.0f : 3.0f, g ? "y (graph 2)" : "y (graph 1)", round);
        }
    for (int g = 0; g < 2; g++) {
        cudaGraphExecDestroy(execs[g]);
        cudaGraphDestroy(graphs[g]);
    }
    cudaStreamDestroy(s);
    cudaFree(y);
}

/* Copies from and to pinned memory read and write it when the node runs:
 * each launch sees what the host wrote just before it. */
static void pinned_copies_run_at_each_launch(void)
{
    float *in = NULL, *out = NULL, *dev = device_floats(N, 0.0f);
    CHECK(cudaMallocHost((void **)&in, sizeof(float) * N) == cudaSuccess, "pinned");
    CHECK(cudaMallocHost((void **)&out, sizeof(float) * N) == cudaSuccess, "pinned");
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    cudaMemcpyAsync(dev, in, sizeof(float) * N, cudaMemcpyHostToDevice, s);
    CT_EMU_LAUNCH(add_kernel, BLOCKS, THREADS, 0, s, dev, 1.0f, (int)N);
    cudaMemcpyAsync(out, dev, sizeof(float) * N, cudaMemcpyDeviceToHost, s);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end: %s",
          cudaGetErrorString(cudaGetLastError()));
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int replay = 1; replay <= 3; replay++) {
        for (int i = 0; i < N; i++) {
            in[i] = (float)(replay * 1000 + i);
            out[i] = -1.0f;
        }
        CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch");
        CHECK(out[0] == -1.0f, "replay %d wrote the host buffer before the stream ran", replay);
        CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
        int wrong = 0;
        for (int i = 0; i < N; i++)
            wrong += out[i] != in[i] + 1.0f;
        CHECK(wrong == 0, "replay %d: %d wrong, out[0] = %g, expected %g", replay, wrong, out[0],
              in[0] + 1.0f);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    cudaFreeHost(in);
    cudaFreeHost(out);
    cudaFree(dev);
}

/* cuBLAS's work is queued like a kernel's, so it captures too. */
static void vendor_calls_capture(void)
{
    /* Column-major 2x2: C = A * B with B the identity times 2. */
    float a[4] = {1, 2, 3, 4}, b[4] = {2, 0, 0, 2}, alpha = 1.0f, beta = 0.0f, c[4];
    float *dev_a = device_floats(4, 0.0f), *dev_b = device_floats(4, 0.0f);
    float *dev_c = device_floats(4, 0.0f);
    cudaMemcpy(dev_b, b, sizeof b, cudaMemcpyHostToDevice);
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cublasHandle_t handle = NULL;
    CHECK(cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    cublasSetStream(handle, s);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &alpha, dev_a, 2, dev_b, 2,
                      &beta, dev_c, 2) == CUBLAS_STATUS_SUCCESS, "cublasSgemm");
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && node_count(graph) == 1, "end");
    cudaGraphInstantiate(&exec, graph, 0);
    for (int replay = 1; replay <= 2; replay++) {
        a[0] = (float)replay;
        cudaMemcpy(dev_a, a, sizeof a, cudaMemcpyHostToDevice);
        cudaGraphLaunch(exec, s);
        cudaStreamSynchronize(s);
        cudaMemcpy(c, dev_c, sizeof c, cudaMemcpyDeviceToHost);
        CHECK(c[0] == 2.0f * replay && c[1] == 4 && c[2] == 6 && c[3] == 8,
              "replay %d: C = {%g, %g, %g, %g}", replay, c[0], c[1], c[2], c[3]);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cublasDestroy(handle);
    cudaStreamDestroy(s);
    cudaFree(dev_a);
    cudaFree(dev_b);
    cudaFree(dev_c);
}

/* ---- events ----------------------------------------------------------------------------- */

/* A plain record in a capture adds no node and stands for no work; one
 * with cudaEventRecordExternal is a node that records at each launch, so
 * the host can wait for a launch and time it. */
static void event_record_nodes(void)
{
    float *y = device_floats(WARP, 0.0f);
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaEvent_t plain, start, stop;
    cudaEventCreate(&plain);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CHECK(cudaEventRecordWithFlags(start, s, cudaEventRecordExternal) == cudaSuccess, "start");
    CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, 2.0f);
    CHECK(cudaEventRecord(plain, s) == cudaSuccess, "record");
    CHECK(cudaEventRecordWithFlags(stop, s, cudaEventRecordExternal) == cudaSuccess, "stop");
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end");
    CHECK(node_count(graph) == 3, "%zu nodes: a kernel and two event records",
          node_count(graph));
    cudaGraphInstantiate(&exec, graph, 0);
    CHECK(cudaEventSynchronize(stop) == cudaErrorCapturedEvent, "before any launch");
    (void)cudaGetLastError();
    unsigned long long graphs = cuda_emu_graph_launches();
    cudaGraphLaunch(exec, s);
    CHECK(cudaEventSynchronize(stop) == cudaSuccess, "after a launch: %s",
          cudaGetErrorString(cudaGetLastError()));
    CHECK(cuda_emu_graph_launches() == graphs + 1, "waiting for the record node did not wait "
          "for the launch");
    float ms = -1.0f;
    CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess && ms >= 0.0f,
          "the launch's time: %g ms (%s)", ms, cudaGetErrorString(cudaGetLastError()));
    expect_all(y, WARP, 2.0f, "y", 1);
    CHECK(cudaEventQuery(plain) == cudaErrorCapturedEvent, "the plain record after a launch");
    (void)cudaGetLastError();
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaEventDestroy(plain);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaStreamDestroy(s);
    cudaFree(y);
}

/* Stream b's graph copies x, which stream a writes: the wait node
 * (cudaEventWaitExternal) makes each launch wait for the event's latest
 * record.  Without it, reverse order runs the newer launch first. */
static void event_wait_nodes(void)
{
    float *x = device_floats(WARP, 0.0f), *y = device_floats(WARP, 0.0f);
    cudaStream_t a = new_stream(cudaStreamNonBlocking), b = new_stream(cudaStreamNonBlocking);
    cudaEvent_t written;
    cudaEventCreate(&written);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(b, cudaStreamCaptureModeGlobal);
    CHECK(cudaStreamWaitEvent(b, written, cudaEventWaitExternal) == cudaSuccess, "wait");
    cudaMemcpyAsync(y, x, sizeof(float) * WARP, cudaMemcpyDeviceToDevice, b);
    CHECK(cudaStreamEndCapture(b, &graph) == cudaSuccess, "end: %s",
          cudaGetErrorString(cudaGetLastError()));
    CHECK(node_count(graph) == 2, "%zu nodes: the wait and the copy", node_count(graph));
    cudaGraphInstantiate(&exec, graph, 0);
    for (int round = 1; round <= 2; round++) {
        float value = 10.0f * (float)round;
        CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, a, x, value);
        cudaEventRecord(written, a);
        cudaGraphLaunch(exec, b);
        CHECK(cudaStreamSynchronize(b) == cudaSuccess, "sync");
        cudaDeviceSynchronize();
        expect_all(y, WARP, value, "y", round);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaEventDestroy(written);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFree(x);
    cudaFree(y);
}

/* ---- what a capture forbids ------------------------------------------------------------- */

enum forbidden_call {
    SYNC_STREAM,
    QUERY_STREAM,
    SYNC_DEVICE,
    MALLOC,
    FREE,
    MALLOC_HOST,
    SYNC_COPY,
    PAGEABLE_COPY,
    CAPTURED_EVENT_SYNC,
    OUTSIDE_EVENT_WAIT,
    FORK,
    LEGACY_BESIDE_BLOCKING,
};

struct forbidden_case {
    forbidden_call call;
    const char *name; /* the call, which the message must name */
    cudaStreamCaptureMode mode;
    unsigned stream_flags;
    cudaError_t expected;
};

static const forbidden_case forbidden_cases[] = {
    {SYNC_STREAM, "cudaStreamSynchronize", cudaStreamCaptureModeRelaxed, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {QUERY_STREAM, "cudaStreamQuery", cudaStreamCaptureModeRelaxed, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {SYNC_DEVICE, "cudaDeviceSynchronize", cudaStreamCaptureModeRelaxed, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {MALLOC, "cudaMalloc", cudaStreamCaptureModeGlobal, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {FREE, "cudaFree", cudaStreamCaptureModeThreadLocal, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {MALLOC_HOST, "cudaMallocHost", cudaStreamCaptureModeGlobal, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {SYNC_COPY, "cudaMemcpy", cudaStreamCaptureModeGlobal, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {PAGEABLE_COPY, "cudaMemcpyAsync", cudaStreamCaptureModeRelaxed, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {CAPTURED_EVENT_SYNC, "cudaEventSynchronize", cudaStreamCaptureModeRelaxed,
     cudaStreamNonBlocking, cudaErrorCapturedEvent},
    {OUTSIDE_EVENT_WAIT, "cudaStreamWaitEvent", cudaStreamCaptureModeRelaxed,
     cudaStreamNonBlocking, cudaErrorStreamCaptureIsolation},
    {FORK, "cudaStreamWaitEvent", cudaStreamCaptureModeRelaxed, cudaStreamNonBlocking,
     cudaErrorStreamCaptureUnsupported},
    {LEGACY_BESIDE_BLOCKING, "cudaMemset", cudaStreamCaptureModeRelaxed, cudaStreamDefault,
     cudaErrorStreamCaptureImplicit},
};

/* Make the forbidden call `c` while `s` captures; `y` is a device buffer,
 * `spare` a device allocation made before, `other` another stream. */
static cudaError_t make_forbidden_call(const forbidden_case &c, cudaStream_t s, float *y,
                                       float *spare, cudaStream_t other, cudaEvent_t event)
{
    float host[WARP];
    void *memory = NULL;
    cudaError_t error = cudaSuccess;
    switch (c.call) {
    case SYNC_STREAM:
        return cudaStreamSynchronize(s);
    case QUERY_STREAM:
        return cudaStreamQuery(s);
    case SYNC_DEVICE:
        return cudaDeviceSynchronize();
    case MALLOC: /* refused, it allocates nothing to free */
        error = cudaMalloc(&memory, 64);
        if (error == cudaSuccess)
            cudaFree(memory);
        return error;
    case FREE:
        return cudaFree(spare);
    case MALLOC_HOST:
        error = cudaMallocHost(&memory, 64);
        if (error == cudaSuccess)
            cudaFreeHost(memory);
        return error;
    case SYNC_COPY:
        return cudaMemcpy(host, y, sizeof host, cudaMemcpyDeviceToHost);
    case PAGEABLE_COPY:
        return cudaMemcpyAsync(y, host, sizeof host, cudaMemcpyHostToDevice, s);
    case CAPTURED_EVENT_SYNC:
        cudaEventRecord(event, s);
        return cudaEventSynchronize(event);
    case OUTSIDE_EVENT_WAIT:
        cudaEventRecord(event, other);
        return cudaStreamWaitEvent(s, event, 0);
    case FORK:
        cudaEventRecord(event, s);
        return cudaStreamWaitEvent(other, event, 0);
    case LEGACY_BESIDE_BLOCKING:
        return cudaMemset(y, 0, sizeof host);
    }
    return cudaSuccess;
}

/* Each call is refused with its documented error and a message naming it;
 * the capture is invalidated: the stream takes no more work, EndCapture
 * returns cudaErrorStreamCaptureInvalidated and no graph, naming the call,
 * and the stream then works again.  Nothing captured ever runs. */
static void forbidden_calls_invalidate_the_capture(void)
{
    float *y = device_floats(WARP, 1.0f), *spare = NULL;
    cudaMalloc((void **)&spare, 64); /* what the refused cudaFree leaves */
    cudaEvent_t event;
    cudaEventCreate(&event);
    cudaStream_t other = new_stream(cudaStreamNonBlocking);
    for (const forbidden_case &c : forbidden_cases) {
        cudaStream_t s = new_stream(c.stream_flags);
        CHECK(cudaStreamBeginCapture(s, c.mode) == cudaSuccess, "%s: begin", c.name);
        CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, 9.0f);
        cudaError_t error = make_forbidden_call(c, s, y, spare, other, event);
        const char *text = cudaGetErrorString(error);
        CHECK(error == c.expected, "%s: %s, expected %s (%s)", c.name, cudaGetErrorName(error),
              cudaGetErrorName(c.expected), text);
        CHECK(strstr(text, c.name) != NULL, "%s: the message does not name it: %s", c.name,
              text);
        CHECK(capture_status(s) == cudaStreamCaptureStatusInvalidated, "%s: still active",
              c.name);
        CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, 8.0f);
        CHECK(cudaGetLastError() == cudaErrorStreamCaptureInvalidated,
              "%s: a launch on the invalidated stream", c.name);
        cudaGraph_t graph = (cudaGraph_t)&error; /* not NULL: EndCapture must clear it */
        error = cudaStreamEndCapture(s, &graph);
        text = cudaGetErrorString(error);
        CHECK(error == cudaErrorStreamCaptureInvalidated && graph == NULL, "%s: EndCapture: %s",
              c.name, cudaGetErrorName(error));
        CHECK(strstr(text, c.name) != NULL, "%s: EndCapture does not say why: %s", c.name, text);
        CHECK(capture_status(s) == cudaStreamCaptureStatusNone, "%s: capturing after the end",
              c.name);
        (void)cudaGetLastError();
        CHECK(cudaStreamSynchronize(s) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
              "%s: the stream after the capture", c.name);
        expect_all(y, WARP, 1.0f, c.name, 0);
        cudaStreamDestroy(s);
    }
    cudaFree(spare);
    cudaEventDestroy(event);
    cudaStreamDestroy(other);
    cudaFree(y);
}

/* Relaxed allows the unsafe calls; ThreadLocal forbids them to its own
 * thread only; Global to every thread. */
static void capture_modes(void)
{
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t graph = NULL;
    void *memory = NULL;
    float host[4];
    cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    CHECK(cudaMalloc(&memory, 16) == cudaSuccess, "cudaMalloc in a Relaxed capture");
    CHECK(cudaMemcpy(host, memory, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess,
          "cudaMemcpy in a Relaxed capture");
    CHECK(cudaFree(memory) == cudaSuccess, "cudaFree in a Relaxed capture");
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && graph != NULL, "end (Relaxed)");
    cudaGraphDestroy(graph);

    static const cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeThreadLocal,
                                                  cudaStreamCaptureModeGlobal};
    for (cudaStreamCaptureMode mode : modes) {
        bool global = mode == cudaStreamCaptureModeGlobal;
        cudaStreamBeginCapture(s, mode);
        cudaError_t elsewhere = cudaErrorUnknown;
        std::thread other([&elsewhere] {
            void *p = NULL;
            elsewhere = cudaMalloc(&p, 16);
            cudaFree(p);
        });
        other.join();
        CHECK(elsewhere == (global ? cudaErrorStreamCaptureUnsupported : cudaSuccess),
              "mode %d: cudaMalloc on another thread: %s", (int)mode,
              cudaGetErrorName(elsewhere));
        CHECK(capture_status(s) == (global ? cudaStreamCaptureStatusInvalidated
                                           : cudaStreamCaptureStatusActive),
              "mode %d: the capture after another thread's cudaMalloc", (int)mode);
        CHECK(cudaMalloc(&memory, 16) == cudaErrorStreamCaptureUnsupported,
              "mode %d: cudaMalloc on the capturing thread", (int)mode);
        CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated,
              "mode %d: end", (int)mode);
        (void)cudaGetLastError();
    }
    cudaStreamDestroy(s);
}

/* What a capture reports, and how it begins and ends. */
static void capture_status_and_misuse(void)
{
    cudaStream_t s = new_stream(cudaStreamNonBlocking), blocking = new_stream(cudaStreamDefault);
    cudaGraph_t graph = NULL;
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone, "before");
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin");
    CHECK(capture_status(s) == cudaStreamCaptureStatusActive, "during");
    CHECK(capture_status(cudaStreamLegacy) == cudaStreamCaptureStatusNone,
          "the legacy stream beside a non-blocking capture");
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorInvalidValue,
          "a second begin");
    CHECK(capture_status(s) == cudaStreamCaptureStatusActive, "after the second begin");
    cudaError_t wrong_thread = cudaSuccess;
    std::thread other([&] { wrong_thread = cudaStreamEndCapture(s, &graph); });
    other.join();
    CHECK(wrong_thread == cudaErrorStreamCaptureWrongThread, "end on another thread: %s",
          cudaGetErrorName(wrong_thread));
    CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess && graph != NULL, "end");
    CHECK(node_count(graph) == 0, "an empty capture has %zu nodes", node_count(graph));
    CHECK(capture_status(s) == cudaStreamCaptureStatusNone, "after");
    cudaGraphDestroy(graph);
    CHECK(cudaStreamEndCapture(s, &graph) == cudaErrorInvalidValue, "end without a begin");
    CHECK(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal) ==
              cudaErrorStreamCaptureUnsupported, "capture on the legacy stream");

    /* The legacy stream cannot even be asked while a blocking stream
     * captures; asking does not invalidate the capture. */
    cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
    cudaStreamCaptureStatus status;
    CHECK(cudaStreamIsCapturing(cudaStreamLegacy, &status) == cudaErrorStreamCaptureImplicit,
          "the legacy stream beside a blocking capture");
    CHECK(cudaStreamEndCapture(blocking, &graph) == cudaSuccess, "end (blocking)");
    cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    cudaStreamDestroy(s);
    cudaStreamDestroy(blocking);
}

/* ---- graph objects ---------------------------------------------------------------------- */

/* An executable graph lives on after its graph is destroyed; the emulator
 * refuses a destroyed handle (on a GPU using one is undefined). */
static void exec_outlives_its_graph(void)
{
    float *y = device_floats(WARP, 0.0f);
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, 4.0f);
    CT_EMU_LAUNCH(add_kernel, 1, WARP, 0, s, y, 1.0f, (int)WARP);
    cudaStreamEndCapture(s, &graph);

    cudaGraphNode_t nodes[4] = {NULL, NULL, NULL, NULL};
    size_t count = 4;
    CHECK(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess && count == 2 && nodes[0] &&
              nodes[1] && nodes[0] != nodes[1] && !nodes[2] && !nodes[3],
          "4 asked of 2 nodes: %zu", count);
    count = 1;
    CHECK(cudaGraphGetNodes(graph, nodes, &count) == cudaSuccess && count == 1, "1 asked");

    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    CHECK(cudaGraphDestroy(graph) == cudaSuccess, "destroy the graph");
    CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "launch after the graph's end");
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "sync");
    expect_all(y, WARP, 5.0f, "y", 1);
    CHECK(cudaGraphExecDestroy(exec) == cudaSuccess, "destroy the exec");

    CHECK(cudaGraphGetNodes(graph, NULL, &count) == cudaErrorInvalidValue, "a destroyed graph");
    CHECK(cudaGraphInstantiate(&exec, graph, 0) == cudaErrorInvalidValue, "a destroyed graph");
    CHECK(cudaGraphLaunch(exec, s) == cudaErrorInvalidValue, "a destroyed exec");
    CHECK(strstr(cudaGetErrorString(cudaErrorInvalidValue), "cudaGraphExecDestroy") != NULL,
          "%s", cudaGetErrorString(cudaErrorInvalidValue));
    CHECK(cudaGraphExecDestroy(exec) == cudaErrorInvalidValue, "destroyed twice");
    (void)cudaGetLastError();
    cudaStreamDestroy(s);
    cudaFree(y);
}

/* A kernel that fails in a launch of a graph fails the device as it would
 * eagerly, and the message names the node. */
static void failing_node_is_named(void)
{
    float *y = device_floats(WARP, 0.0f);
    cudaStream_t s = new_stream(cudaStreamNonBlocking);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CT_EMU_LAUNCH(fill_kernel, 1, WARP, 0, s, y, 4.0f);
    CT_EMU_LAUNCH(trap_kernel, 1, WARP, 0, s, y);
    cudaStreamEndCapture(s, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphLaunch(exec, s);
    cudaError_t error = cudaStreamSynchronize(s);
    const char *text = cudaGetErrorString(error);
    CHECK(error == cudaErrorLaunchFailure, "%s", cudaGetErrorName(error));
    CHECK(strstr(text, "node 2 of 2") && strstr(text, "trap_kernel"), "%s", text);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
}

int main(void)
{
    RUN(capture_replays_the_work);
    RUN(kernel_parameters_are_captured);
    RUN(pinned_copies_run_at_each_launch);
    RUN(vendor_calls_capture);
    RUN(event_record_nodes);
    RUN(event_wait_nodes);
    RUN(forbidden_calls_invalidate_the_capture);
    RUN(capture_modes);
    RUN(capture_status_and_misuse);
    RUN(exec_outlives_its_graph);
    RUN(failing_node_is_named);
    return harness_finish();
}
