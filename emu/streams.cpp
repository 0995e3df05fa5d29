/*
 * The emulated runtime, part two: streams, copies and launches, and the
 * running of queued work: kernels, copies, event records (emu/events.cpp
 * queues them) and graph launches (emu/graphs.cpp), each one op.
 *
 * A stream is a queue.  Work runs when the host waits for it (a
 * synchronize, a synchronous copy, an event wait, cudaFree), not when it is
 * queued, so a host that reads results without waiting sees stale data, as
 * it may on a GPU.  Work on different streams is ordered only by what CUDA
 * orders it by: the legacy default stream against blocking streams, and
 * cudaStreamWaitEvent.  Among the work that may run, CUDA_EMU_ORDER picks:
 * forward (the order it was queued, what a GPU mostly does), reverse
 * (newest first) or shuffle, so a missing dependency between streams shows.
 *
 * Copies follow the runtime's documented rules: from pageable host memory
 * the data is taken when the call is made; to pageable host memory the
 * call waits until the copy is done; pinned host memory is read and
 * written when the copy runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chrono>
#include <cmath>
#include <condition_variable>

#include "emu.h"
#include "counters.h"
#include "state.h"

namespace emu {

static double now_ms()
{
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

/* ---- queues -------------------------------------------------------------------------- */

stream_state *stream_of(cudaStream_t stream)
{
    runtime &r = rt();
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return r.devices[(size_t)current_device()].legacy;
    for (auto &entry : r.streams)
        if ((cudaStream_t)entry.second == stream)
            return entry.second;
    return nullptr;
}

std::string stream_name(const stream_state *s)
{
    if (s->legacy)
        return "the legacy stream of device " + std::to_string(s->device);
    char text[48];
    snprintf(text, sizeof text, "stream %p", (void *)s);
    return text;
}

static bool ran_before(const runtime &r, const dependency &d)
{
    auto found = r.streams.find(d.stream);
    if (found == r.streams.end())
        return true;
    const std::deque<op> &pending = found->second->pending;
    return pending.empty() || pending.front().seq >= d.seq;
}

bool has_run(const stream_state *s, uint64_t seq)
{
    return s->pending.empty() || s->pending.front().seq > seq;
}

static bool dependencies_met(const runtime &r, const op &o)
{
    for (const dependency &d : o.after)
        if (!ran_before(r, d))
            return false;
    return true;
}

op_place place_of(uint64_t stream, uint64_t seq)
{
    runtime &r = rt();
    auto found = r.streams.find(stream);
    if (found == r.streams.end() || has_run(found->second, seq))
        return OP_GONE;
    const op &front = found->second->pending.front();
    return front.seq == seq && dependencies_met(r, front) ? OP_FIRST : OP_BEHIND;
}

/* Host threads waiting in run_until for work that other host threads must
 * queue (the parts of a collective) wait here. */
static std::condition_variable_any work_changed;

void wake_waiters()
{
    work_changed.notify_all();
}

/* The legacy stream waits for the blocking streams of its device, and they
 * for it (cudaStreamNonBlocking streams for neither).  A capture records
 * the op alone: the legacy stream cannot be used while a blocking stream
 * captures (check_stream_use), and beginning a capture severs the order
 * with the work queued before it. */
uint64_t queue(stream_state *s, op &&o)
{
    runtime &r = rt();
    if (s->capture.status == cudaStreamCaptureStatusActive) {
        s->capture.nodes.push_back(std::move(o));
        return 0;
    }
    o.seq = r.next_seq++;
    for (auto &entry : r.streams) {
        stream_state *other = entry.second;
        if (other == s || other->device != s->device || other->pending.empty())
            continue;
        if ((s->legacy && other->blocking) || (s->blocking && other->legacy))
            o.after.push_back(dependency{other->id, o.seq});
    }
    s->pending.push_back(std::move(o));
    wake_waiters();
    return s->pending.back().seq;
}

static thread_local std::string work_failure;
static thread_local cudaError_t work_error = cudaSuccess;

void fail_current_work(cudaError_t error, const char *message)
{
    work_error = error;
    work_failure = message;
}

/* Run the work of op `o`, which is (or belongs to the graph launched as)
 * op `seq` of stream `s`; a failure is left in work_error and work_failure. */
static void perform(stream_state *s, const op &o, uint64_t seq)
{
    runtime &r = rt();
    switch (o.kind) {
    case OP_WORK:
        o.work();
        break;
    case OP_KERNEL: {
        const kernel_launch &l = o.launch;
        uint64_t blocks = (uint64_t)l.grid.x * l.grid.y * l.grid.z;
        counters_launch(l.name, blocks, blocks * l.block.x * l.block.y * l.block.z);
        std::string failure = run_grid(l, ++r.launches);
        counters_launch_end(blocks, (int)(l.block.x * l.block.y * l.block.z), l.shared_bytes);
        if (!failure.empty()) {
            work_error = cudaErrorLaunchFailure;
            work_failure = failure;
        }
        break;
    }
    case OP_RECORD: /* unless the event is gone, or a later record replaced this one */
        if (is_event(o.event) && o.event->stream == s->id && o.event->seq == seq) {
            o.event->done = true;
            o.event->ms = now_ms();
            counters_snapshot(&o.event->counters);
        }
        break;
    case OP_GRAPH: {
        r.graph_launches++;
        const std::vector<op> &nodes = o.graph->nodes;
        for (size_t i = 0; i < nodes.size() && work_error == cudaSuccess; i++) {
            perform(s, nodes[i], seq);
            if (work_error != cudaSuccess)
                work_failure = "node " + std::to_string(i + 1) + " of " +
                               std::to_string(nodes.size()) + ", " + nodes[i].what + ": " +
                               work_failure;
        }
        break;
    }
    case OP_WAIT:
        break;
    }
}

/* Run one queued op; a failure makes its device's error sticky. */
static void execute(stream_state *s, op &o)
{
    runtime &r = rt();
    device_state &d = r.devices[(size_t)s->device];
    if (d.sticky != cudaSuccess)
        return; /* a failed device runs nothing more */
    work_error = cudaSuccess;
    perform(s, o, o.seq);
    if (work_error == cudaSuccess)
        return;
    d.sticky = work_error;
    d.sticky_message = o.what + ": " + work_failure;
    fprintf(stderr, "cuda-emu: %s\n", d.sticky_message.c_str());
    if (config().abort_on_error)
        abort();
}

/* The streams whose first op may run now. */
static void runnable(runtime &r, std::vector<stream_state *> *ready)
{
    ready->clear();
    for (auto &entry : r.streams) {
        stream_state *s = entry.second;
        if (s->pending.empty())
            continue;
        const op &front = s->pending.front();
        if (dependencies_met(r, front) && (!front.gate || front.gate->open()))
            ready->push_back(s);
    }
}

static double now_seconds()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/* Nothing can run: wait for the host threads that must queue the missing
 * parts of the collectives first on their streams (on `device`; -1: any
 * device), letting go of the lock meanwhile, until one queues or runs work
 * or a collective gives up.  False when no collective is waiting. */
static bool wait_for_collectives(runtime &r, int device)
{
    double now = now_seconds(), until = INFINITY;
    bool waiting = false, gave_up = false;
    for (auto &entry : r.streams) {
        stream_state *s = entry.second;
        if (s->pending.empty() || (device >= 0 && s->device != device))
            continue;
        const op &front = s->pending.front();
        if (!front.gate || !dependencies_met(r, front) || front.gate->open())
            continue;
        waiting = true;
        double gives_up = front.gate->stalled(now);
        if (gives_up <= now)
            gave_up = true;
        until = std::min(until, gives_up);
    }
    if (!waiting || gave_up)
        return waiting;
    struct whole_lock { /* the lock, let go of whole while waiting */
        runtime_lock &runtime;
        int held;
        void unlock() { held = runtime.release_all(); }
        void lock() { runtime.take_back(held); }
    } whole{r.lock, 0};
    using namespace std::chrono;
    auto deadline = steady_clock::time_point(
        duration_cast<steady_clock::duration>(duration<double>(until)));
    work_changed.wait_until(whole, deadline);
    return true;
}

static void run(const std::function<bool()> &done, int wait_device)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    std::vector<stream_state *> ready;
    while (!done()) {
        runnable(r, &ready);
        if (ready.empty()) {
            if (wait_for_collectives(r, wait_device))
                continue;
            return;
        }
        stream_state *pick = ready[0];
        for (stream_state *s : ready) {
            uint64_t seq = s->pending.front().seq, best = pick->pending.front().seq;
            if ((config().order == ORDER_FORWARD && seq < best) ||
                (config().order == ORDER_REVERSE && seq > best))
                pick = s;
        }
        if (config().order == ORDER_SHUFFLE)
            pick = ready[next_random(&r.random) % ready.size()];
        op o = std::move(pick->pending.front());
        pick->pending.pop_front();
        execute(pick, o);
        if (o.gate)
            wake_waiters();
    }
}

void run_until(const std::function<bool()> &done)
{
    run(done, -1);
}

void run_all()
{
    run([] { return false; }, current_device());
}

void run_stream(stream_state *s)
{
    run_until([s] { return s->pending.empty(); });
}

void run_device(int device)
{
    runtime &r = rt();
    run_until([&r, device] {
        for (auto &entry : r.streams)
            if (entry.second->device == device && !entry.second->pending.empty())
                return false;
        return true;
    });
}

cudaError_t open_stream(cudaStream_t stream, const std::string &call, stream_use use,
                        stream_state **out)
{
    runtime &r = rt();
    if (!r.config_error.empty())
        return set_error(cudaErrorInitializationError, r.config_error);
    *out = stream_of(stream);
    if (!*out)
        return set_error(cudaErrorInvalidResourceHandle, call + ": not a live stream");
    if (sticky((*out)->device) != cudaSuccess)
        return cudaPeekAtLastError();
    return check_stream_use(*out, call, use);
}

cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> work)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    stream_state *s = nullptr;
    if (open_stream(stream, what, USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    op o{};
    o.kind = OP_WORK;
    o.what = what;
    o.work = std::move(work);
    queue(s, std::move(o));
    return cudaSuccess;
}

/* ---- launches --------------------------------------------------------------------------- */

static std::string dims(dim3 d)
{
    return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

cudaError_t launch_kernel(kernel_launch &&l, cudaStream_t stream)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    std::string where = std::string("kernel ") + l.name + " (launched at " + base_name(l.file) +
                        ":" + std::to_string(l.line) + ")";
    stream_state *s = nullptr;
    if (open_stream(stream, where, USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    uint64_t threads = (uint64_t)l.block.x * l.block.y * l.block.z;
    if (threads == 0 || threads > 1024 || l.block.x > 1024 || l.block.y > 1024 ||
        l.block.z > 64 || l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0 ||
        l.grid.x > 0x7fffffffu || l.grid.y > 65535 || l.grid.z > 65535)
        return set_error(cudaErrorInvalidConfiguration,
                         where + ": grid " + dims(l.grid) + ", block " + dims(l.block) +
                             " is outside the device's limits");
    size_t most_shared = 48 << 10; /* sharedMemPerBlock, unless the kernel opted in */
    auto opted = rt().max_dynamic_shared.find(l.kernel);
    if (opted != rt().max_dynamic_shared.end())
        most_shared = (size_t)opted->second;
    if (l.shared_bytes > most_shared)
        return set_error(cudaErrorInvalidValue,
                         where + ": " + std::to_string(l.shared_bytes) +
                             " bytes of dynamic shared memory, the kernel may ask for " +
                             std::to_string(most_shared) +
                             " (cudaFuncSetAttribute(kernel, "
                             "cudaFuncAttributeMaxDynamicSharedMemorySize, n) raises it)");
    if (s->device != current_device())
        return set_error(cudaErrorInvalidResourceHandle,
                         where + ": the stream belongs to device " + std::to_string(s->device) +
                             ", the current device is " + std::to_string(current_device()));
    op o{};
    o.kind = OP_KERNEL;
    o.what = where;
    o.launch = std::move(l);
    queue(s, std::move(o));
    return cudaSuccess;
}

/* ---- copies -------------------------------------------------------------------------------- */

enum memory_kind { HOST_PAGEABLE, HOST_PINNED, DEVICE };

static memory_kind kind_of(const void *ptr, size_t bytes)
{
    const allocation *a = find_range(ptr, bytes);
    return !a ? HOST_PAGEABLE : a->device < 0 ? HOST_PINNED : DEVICE;
}

/* Whether a range that starts in a device allocation runs past its end. */
static bool overruns(const void *ptr, size_t bytes, std::string *why)
{
    if (find_range(ptr, bytes) || !find_range(ptr, 1) || bytes == 0)
        return false;
    char text[160];
    snprintf(text, sizeof text, "%zu bytes at %p run past the end of their allocation", bytes,
             ptr);
    *why = text;
    return true;
}

static cudaError_t check_copy(const char *call, void *dst, const void *src, size_t span_dst,
                              size_t span_src, cudaMemcpyKind kind)
{
    std::string why;
    if (overruns(dst, span_dst, &why) || overruns(src, span_src, &why))
        return set_error(cudaErrorInvalidValue, std::string(call) + ": " + why);
    bool dst_device = kind_of(dst, span_dst) == DEVICE;
    bool src_device = kind_of(src, span_src) == DEVICE;
    bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault)
        return cudaSuccess;
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return set_error(cudaErrorInvalidMemcpyDirection, std::string(call) + ": kind " +
                                                              std::to_string((int)kind));
    if (dst_device != want_dst || src_device != want_src)
        return set_error(cudaErrorInvalidValue,
                         std::string(call) + ": the direction says " +
                             (want_src ? "device" : "host") + " to " +
                             (want_dst ? "device" : "host") + ", the pointers are " +
                             (src_device ? "device" : "host") + " to " +
                             (dst_device ? "device" : "host") + " memory");
    return cudaSuccess;
}

/* Queue a 2-D copy (a plain copy is one row) on `stream`; `wait` makes the
 * call return after it ran (synchronous calls, pageable destinations). */
static cudaError_t copy_2d(const char *call, void *dst, size_t dpitch, const void *src,
                           size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
                           cudaStream_t stream, bool wait)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    stream_state *s = nullptr;
    if (open_stream(stream, call, USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    if (width == 0 || height == 0)
        return cudaSuccess;
    if (dpitch < width || spitch < width)
        return set_error(cudaErrorInvalidValue, std::string(call) + ": a pitch below the width");
    size_t span_dst = dpitch * (height - 1) + width, span_src = spitch * (height - 1) + width;
    if (check_copy(call, dst, src, span_dst, span_src, kind) != cudaSuccess)
        return cudaPeekAtLastError();
    bool pageable_src = kind_of(src, span_src) == HOST_PAGEABLE;
    bool pageable_dst = kind_of(dst, span_dst) == HOST_PAGEABLE;
    if (s->capture.status == cudaStreamCaptureStatusActive && (pageable_src || pageable_dst)) {
        std::string why = std::string(call) + " on " + stream_name(s) + ", which is capturing, " +
                          (pageable_src ? "from" : "to") +
                          " pageable host memory: such a copy is made at the call, which a "
                          "launch of the graph cannot repeat; use pinned memory (cudaMallocHost)";
        invalidate(s, why);
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    }
    op o{};
    o.kind = OP_WORK;
    o.what = call;
    if (pageable_src) {
        /* Staged now: the caller may reuse its buffer when the call returns. */
        std::vector<char> staged(span_src);
        memcpy(staged.data(), src, span_src);
        o.work = [dst, dpitch, spitch, width, height, staged = std::move(staged)]() {
            for (size_t row = 0; row < height; row++)
                memcpy((char *)dst + row * dpitch, staged.data() + row * spitch, width);
        };
    } else {
        o.work = [dst, dpitch, src, spitch, width, height]() {
            for (size_t row = 0; row < height; row++)
                memmove((char *)dst + row * dpitch, (const char *)src + row * spitch, width);
        };
    }
    uint64_t seq = queue(s, std::move(o));
    if (wait || pageable_dst) {
        run_until([s, seq] { return has_run(s, seq); });
        return sticky(s->device);
    }
    return cudaSuccess;
}

static cudaError_t fill(const char *call, void *ptr, int value, size_t bytes,
                        cudaStream_t stream)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    stream_state *s = nullptr;
    if (open_stream(stream, call, USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    if (bytes == 0)
        return cudaSuccess;
    if (kind_of(ptr, bytes) != DEVICE) {
        std::string why = "the range is not device memory";
        overruns(ptr, bytes, &why);
        return set_error(cudaErrorInvalidValue, std::string(call) + ": " + why);
    }
    op o{};
    o.kind = OP_WORK;
    o.what = call;
    o.work = [ptr, value, bytes]() { memset(ptr, value, bytes); };
    queue(s, std::move(o));
    return cudaSuccess;
}

} // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    return copy_2d("cudaMemcpy", dst, bytes, src, bytes, bytes, 1, kind, nullptr, true);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    return copy_2d("cudaMemcpyAsync", dst, bytes, src, bytes, bytes, 1, kind, stream, false);
}

cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind)
{
    return copy_2d("cudaMemcpy2D", dst, dpitch, src, spitch, width, height, kind, nullptr, true);
}

cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream)
{
    return copy_2d("cudaMemcpy2DAsync", dst, dpitch, src, spitch, width, height, kind, stream,
                   false);
}

/* Asynchronous with respect to the host, on the legacy stream (the runtime
 * API's documented behaviour for device memory). */
cudaError_t cudaMemset(void *ptr, int value, size_t bytes)
{
    return fill("cudaMemset", ptr, value, bytes, nullptr);
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    return fill("cudaMemsetAsync", ptr, value, bytes, stream);
}

/* ---- streams ---------------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags)
{
    *stream = nullptr;
    runtime &r = rt();
    if (!r.config_error.empty())
        return set_error(cudaErrorInitializationError, r.config_error);
    std::lock_guard<runtime_lock> lock(r.lock);
    stream_state *s = new stream_state{r.next_stream_id++, current_device(),
                                       !(flags & cudaStreamNonBlocking), false, {}, {}};
    r.streams[s->id] = s;
    *stream = (cudaStream_t)s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    stream_state *s = stream ? stream_of(stream) : nullptr;
    if (!s || s->legacy)
        return set_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a live stream");
    if (s->capture.status != cudaStreamCaptureStatusNone) {
        std::string why = "cudaStreamDestroy of " + stream_name(s) +
                          ", which is capturing: end the capture (cudaStreamEndCapture) first";
        invalidate(s, why);
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    }
    run_stream(s); /* its work still runs, as the documentation promises */
    r.streams.erase(s->id);
    delete s;
    return cudaSuccess;
}

static cudaError_t wait_stream(cudaStream_t stream, const char *call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    stream_state *s = nullptr;
    if (open_stream(stream, call, USE_WAIT, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    run_stream(s);
    return sticky(s->device);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return wait_stream(stream, "cudaStreamSynchronize");
}

/* Nothing runs by itself here, so a query finishes the stream's work:
 * a polling loop ends, as it would on a GPU. */
cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return wait_stream(stream, "cudaStreamQuery");
}

cudaError_t cudaDeviceSynchronize(void)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (sticky(current_device()) != cudaSuccess ||
        check_device_wait(current_device(), "cudaDeviceSynchronize") != cudaSuccess)
        return cudaPeekAtLastError();
    run_device(current_device());
    return sticky(current_device());
}

} /* extern "C" */
