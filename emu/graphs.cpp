/*
 * The emulated runtime, part three: CUDA Graphs by stream capture.
 *
 * Between cudaStreamBeginCapture and cudaStreamEndCapture the work queued
 * on the stream becomes the nodes of a graph (emu/streams.cpp's queue
 * hands it to the capture) instead of running.  cudaGraphLaunch queues the
 * instantiated graph on a stream as one op, which runs the nodes in
 * capture order when the stream's turn comes (emu/streams.cpp, perform).
 * One stream captures: joining another stream to a capture (a fork) is
 * refused.
 *
 * The rules are the CUDA Programming Guide's for stream capture.  What
 * would wait for captured work (which never runs) or make a dependency
 * across the capture's boundary is refused in every mode; the calls CUDA
 * deems potentially unsafe (allocating, freeing, the legacy stream,
 * synchronizing the device) are refused unless the capture is Relaxed.  A
 * refusal invalidates the capture: cudaStreamEndCapture then returns
 * cudaErrorStreamCaptureInvalidated and no graph, and says what was refused.
 */
#include <stdio.h>

#include "state.h"

namespace emu {

static const char *mode_name(cudaStreamCaptureMode mode)
{
    switch (mode) {
    case cudaStreamCaptureModeGlobal:
        return "cudaStreamCaptureModeGlobal";
    case cudaStreamCaptureModeThreadLocal:
        return "cudaStreamCaptureModeThreadLocal";
    case cudaStreamCaptureModeRelaxed:
        return "cudaStreamCaptureModeRelaxed";
    }
    return "an unknown mode";
}

void invalidate(stream_state *s, const std::string &why)
{
    capture_state &c = s->capture;
    if (c.status != cudaStreamCaptureStatusActive)
        return; /* the first refusal is the one EndCapture reports */
    c.status = cudaStreamCaptureStatusInvalidated;
    c.invalidated_by = why;
    c.nodes.clear();
}

/* The stream whose capture `capture_id` is under way (active or
 * invalidated, not yet ended), or null. */
static stream_state *capturing_stream(uint64_t capture_id)
{
    for (auto &entry : rt().streams) {
        const capture_state &c = entry.second->capture;
        if (c.status != cudaStreamCaptureStatusNone && c.id == capture_id)
            return entry.second;
    }
    return nullptr;
}

/* Whether capture `c` forbids the calling thread's unsafe calls.  The
 * calling thread's own interaction mode is always Global, CUDA's default
 * (cudaThreadExchangeStreamCaptureMode is not emulated). */
static bool forbids_unsafe_calls(const capture_state &c)
{
    if (c.status == cudaStreamCaptureStatusNone)
        return false;
    return c.mode == cudaStreamCaptureModeGlobal ||
           (c.mode == cudaStreamCaptureModeThreadLocal && c.thread == std::this_thread::get_id());
}

cudaError_t check_unsafe_call(const std::string &call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    std::string why;
    for (auto &entry : rt().streams) {
        stream_state *s = entry.second;
        if (!forbids_unsafe_calls(s->capture))
            continue;
        if (why.empty())
            why = call + " while " + stream_name(s) + " captures in " +
                  mode_name(s->capture.mode) +
                  ": CUDA forbids it during such a capture (a launch of the graph would not "
                  "repeat it); make the call before cudaStreamBeginCapture or after "
                  "cudaStreamEndCapture, or capture in cudaStreamCaptureModeRelaxed";
        invalidate(s, why);
    }
    return why.empty() ? cudaSuccess : set_error(cudaErrorStreamCaptureUnsupported, why);
}

cudaError_t check_stream_use(stream_state *s, const std::string &call, stream_use use)
{
    capture_state &c = s->capture;
    if (c.status == cudaStreamCaptureStatusInvalidated)
        return set_error(cudaErrorStreamCaptureInvalidated,
                         call + " on " + stream_name(s) + ": its capture was invalidated by " +
                             c.invalidated_by + "; cudaStreamEndCapture ends it");
    if (c.status == cudaStreamCaptureStatusActive && use == USE_WAIT) {
        std::string why = call + " on " + stream_name(s) +
                          ", which is capturing: its work is recorded, not run, so there is "
                          "nothing to wait for; wait after cudaStreamEndCapture, or for a "
                          "launch of the graph";
        invalidate(s, why);
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    }
    if (!s->legacy)
        return cudaSuccess;
    for (auto &entry : rt().streams) {
        stream_state *other = entry.second;
        if (other->device != s->device || !other->blocking || other->legacy ||
            other->capture.status == cudaStreamCaptureStatusNone)
            continue;
        std::string why = call + " on " + stream_name(s) + " while " + stream_name(other) +
                          " (a blocking stream) captures: the legacy stream would " +
                          (use == USE_WAIT ? "wait for" : "depend on") +
                          " the capture's work; capture on a stream made with "
                          "cudaStreamNonBlocking, or use another stream";
        invalidate(other, why);
        return set_error(cudaErrorStreamCaptureImplicit, why);
    }
    return check_unsafe_call(call + " on " + stream_name(s));
}

cudaError_t check_device_wait(int device, const std::string &call)
{
    std::string why;
    for (auto &entry : rt().streams) {
        stream_state *s = entry.second;
        if (s->device != device || s->capture.status == cudaStreamCaptureStatusNone)
            continue;
        if (why.empty())
            why = call + " while " + stream_name(s) +
                  " captures: it would wait for the capture's work, which is recorded, not "
                  "run; synchronize after cudaStreamEndCapture";
        invalidate(s, why);
    }
    if (!why.empty())
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    return check_unsafe_call(call);
}

cudaError_t check_event_wait(const CUevent_st *event, const std::string &call)
{
    if (event->capture == 0)
        return cudaSuccess;
    stream_state *s = capturing_stream(event->capture);
    std::string why = call + ": the event's latest record was made in a capture (" +
                      (s ? "under way on " + stream_name(s) : std::string("since ended")) +
                      "), so it stands for no work that runs; record it outside the capture, or "
                      "with cudaEventRecordWithFlags(event, stream, cudaEventRecordExternal) "
                      "for a node that records it at each launch of the graph";
    if (s)
        invalidate(s, why);
    return set_error(cudaErrorCapturedEvent, why);
}

cudaError_t capture_wait_event(stream_state *s, CUevent_st *event, unsigned flags)
{
    stream_state *recorder = capturing_stream(event->capture);
    if (s->capture.status != cudaStreamCaptureStatusActive) {
        if (!recorder)
            return check_event_wait(event, "cudaStreamWaitEvent");
        std::string why = "cudaStreamWaitEvent: " + stream_name(s) +
                          " waits for an event recorded in the capture on " +
                          stream_name(recorder) +
                          ", which would join it to that capture (a fork): the emulator "
                          "captures one stream only";
        invalidate(recorder, why);
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    }
    if (event->capture == s->capture.id)
        return cudaSuccess; /* recorded earlier in this stream's capture: already in order */
    if (recorder) {
        std::string why = "cudaStreamWaitEvent: " + stream_name(s) +
                          " waits for an event recorded in the capture on " +
                          stream_name(recorder) + ": two captures cannot merge";
        invalidate(s, why);
        invalidate(recorder, why);
        return set_error(cudaErrorStreamCaptureMerge, why);
    }
    if (event->capture != 0) {
        std::string why = "cudaStreamWaitEvent: " + stream_name(s) +
                          " waits for an event last recorded in a capture that has ended: it "
                          "stands for no work that runs";
        invalidate(s, why);
        return set_error(cudaErrorCapturedEvent, why);
    }
    if (!(flags & cudaEventWaitExternal)) {
        std::string why = "cudaStreamWaitEvent: " + stream_name(s) +
                          ", which is capturing, waits for an event recorded outside the "
                          "capture: a graph cannot depend on work outside it; record the event "
                          "in the capture, or wait with cudaEventWaitExternal for a wait node "
                          "(each launch of the graph then waits for the event's latest record)";
        invalidate(s, why);
        return set_error(cudaErrorStreamCaptureIsolation, why);
    }
    op o{};
    o.kind = OP_WAIT;
    o.what = "cudaStreamWaitEvent (cudaEventWaitExternal)";
    o.event = event;
    queue(s, std::move(o));
    return cudaSuccess;
}

/* Handles are numbers never used twice (runtime::graphs). */
template <class Handle>
static Handle to_handle(uintptr_t number)
{
    return reinterpret_cast<Handle>(number);
}

} // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (!r.config_error.empty())
        return set_error(cudaErrorInitializationError, r.config_error);
    stream_state *s = stream_of(stream);
    if (!s)
        return set_error(cudaErrorInvalidResourceHandle,
                         "cudaStreamBeginCapture: not a live stream");
    if (s->legacy)
        return set_error(cudaErrorStreamCaptureUnsupported,
                         "cudaStreamBeginCapture on " + stream_name(s) +
                             (stream == cudaStreamPerThread
                                  ? " (cudaStreamPerThread is the legacy stream here)"
                                  : std::string()) +
                             ": the legacy stream cannot capture; capture on a stream of "
                             "cudaStreamCreateWithFlags");
    if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
        mode != cudaStreamCaptureModeRelaxed)
        return set_error(cudaErrorInvalidValue,
                         "cudaStreamBeginCapture: mode " + std::to_string((int)mode));
    if (s->capture.status != cudaStreamCaptureStatusNone)
        return set_error(cudaErrorInvalidValue, "cudaStreamBeginCapture: " + stream_name(s) +
                                                    " is capturing already");
    if (sticky(s->device) != cudaSuccess)
        return cudaPeekAtLastError();
    s->capture = capture_state{};
    s->capture.status = cudaStreamCaptureStatusActive;
    s->capture.mode = mode;
    s->capture.thread = std::this_thread::get_id();
    s->capture.id = r.next_capture_id++;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (graph)
        *graph = nullptr;
    stream_state *s = stream_of(stream);
    if (!s)
        return set_error(cudaErrorInvalidResourceHandle, "cudaStreamEndCapture: not a live stream");
    if (!graph)
        return set_error(cudaErrorInvalidValue, "cudaStreamEndCapture: graph is NULL");
    capture_state &c = s->capture;
    if (c.status == cudaStreamCaptureStatusNone)
        return set_error(cudaErrorInvalidValue,
                         "cudaStreamEndCapture: " + stream_name(s) + " is not capturing");
    if (c.mode != cudaStreamCaptureModeRelaxed && c.thread != std::this_thread::get_id())
        return set_error(cudaErrorStreamCaptureWrongThread,
                         "cudaStreamEndCapture on " + stream_name(s) + ": the capture began in " +
                             mode_name(c.mode) +
                             " on another thread, which must end it (only a Relaxed capture "
                             "may end elsewhere)");
    capture_state ended = std::move(c);
    c = capture_state{};
    if (ended.status == cudaStreamCaptureStatusInvalidated)
        return set_error(cudaErrorStreamCaptureInvalidated,
                         "cudaStreamEndCapture on " + stream_name(s) +
                             ": no graph, the capture was invalidated by " + ended.invalidated_by);
    auto body = std::make_shared<graph_body>();
    body->device = s->device;
    body->nodes = std::move(ended.nodes);
    uintptr_t handle = r.next_graph_handle++;
    r.graphs[handle] = std::move(body);
    *graph = to_handle<cudaGraph_t>(handle);
    return cudaSuccess;
}

/* Asked of the legacy stream while a blocking stream of its device
 * captures: cudaErrorStreamCaptureImplicit, the capture left as it is. */
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *status)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (!r.config_error.empty())
        return set_error(cudaErrorInitializationError, r.config_error);
    stream_state *s = stream_of(stream);
    if (!s)
        return set_error(cudaErrorInvalidResourceHandle,
                         "cudaStreamIsCapturing: not a live stream");
    if (!status)
        return set_error(cudaErrorInvalidValue, "cudaStreamIsCapturing: status is NULL");
    if (s->legacy)
        for (auto &entry : r.streams) {
            const stream_state *other = entry.second;
            if (other->device == s->device && other->blocking && !other->legacy &&
                other->capture.status != cudaStreamCaptureStatusNone)
                return set_error(cudaErrorStreamCaptureImplicit,
                                 "cudaStreamIsCapturing on " + stream_name(s) + " while " +
                                     stream_name(other) + " (a blocking stream) captures");
        }
    *status = s->capture.status;
    return cudaSuccess;
}

/* The graph's body is shared, not copied: nothing edits a graph. */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (!exec)
        return set_error(cudaErrorInvalidValue, "cudaGraphInstantiate: exec is NULL");
    *exec = nullptr;
    auto found = r.graphs.find((uintptr_t)graph);
    if (found == r.graphs.end())
        return set_error(cudaErrorInvalidValue,
                         "cudaGraphInstantiate: not a live graph (destroyed, or never one)");
    if (flags != 0)
        return set_error(cudaErrorInvalidValue,
                         "cudaGraphInstantiate: flags " + std::to_string(flags) +
                             " (the emulator knows no instantiation flag: pass 0)");
    uintptr_t handle = r.next_graph_handle++;
    r.graph_execs[handle] = found->second;
    *exec = to_handle<cudaGraphExec_t>(handle);
    return cudaSuccess;
}

/* An event wait node waits for its event's latest record as of the launch,
 * which the whole launch waits for (an earlier start than the node's, which
 * only adds order); an event record node's event stands for the launch. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    auto found = r.graph_execs.find((uintptr_t)exec);
    if (found == r.graph_execs.end())
        return set_error(cudaErrorInvalidValue,
                         "cudaGraphLaunch: not a live executable graph (destroyed by "
                         "cudaGraphExecDestroy, or never one)");
    std::shared_ptr<const graph_body> body = found->second;
    stream_state *s = nullptr;
    if (open_stream(stream, "cudaGraphLaunch", USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    if (s->capture.status == cudaStreamCaptureStatusActive) {
        std::string why = "cudaGraphLaunch on " + stream_name(s) +
                          ", which is capturing: a graph within a graph is not emulated; "
                          "launch it outside the capture";
        invalidate(s, why);
        return set_error(cudaErrorStreamCaptureUnsupported, why);
    }
    if (body->device != s->device)
        return set_error(cudaErrorInvalidValue,
                         "cudaGraphLaunch: the graph was captured on device " +
                             std::to_string(body->device) + ", " + stream_name(s) +
                             " belongs to device " + std::to_string(s->device));
    op o{};
    o.kind = OP_GRAPH;
    o.what = "cudaGraphLaunch (a graph of " + std::to_string(body->nodes.size()) + " nodes)";
    o.graph = body;
    for (const op &node : body->nodes) {
        if (node.kind != OP_RECORD && node.kind != OP_WAIT)
            continue;
        if (!is_event(node.event))
            return set_error(cudaErrorInvalidValue,
                             "cudaGraphLaunch: the event of the graph's " + node.what +
                                 " node was destroyed after the capture");
        const CUevent_st *e = node.event;
        if (node.kind == OP_WAIT && e->capture == 0 && e->seq != 0 && !e->done)
            o.after.push_back(dependency{e->stream, e->seq + 1});
    }
    uint64_t seq = queue(s, std::move(o));
    for (const op &node : body->nodes)
        if (node.kind == OP_RECORD) {
            node.event->stream = s->id;
            node.event->seq = seq;
            node.event->done = false;
            node.event->capture = 0;
        }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (rt().graph_execs.erase((uintptr_t)exec) == 0)
        return set_error(cudaErrorInvalidValue,
                         "cudaGraphExecDestroy: not a live executable graph");
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (rt().graphs.erase((uintptr_t)graph) == 0)
        return set_error(cudaErrorInvalidValue, "cudaGraphDestroy: not a live graph");
    return cudaSuccess;
}

/* A node's handle is the address of its op in the graph; nothing reads
 * it back (no call takes a node). */
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    auto found = rt().graphs.find((uintptr_t)graph);
    if (found == rt().graphs.end())
        return set_error(cudaErrorInvalidValue, "cudaGraphGetNodes: not a live graph");
    if (!count)
        return set_error(cudaErrorInvalidValue, "cudaGraphGetNodes: count is NULL");
    const std::vector<op> &all = found->second->nodes;
    if (!nodes) {
        *count = all.size();
        return cudaSuccess;
    }
    for (size_t i = 0; i < *count; i++)
        nodes[i] = i < all.size() ? reinterpret_cast<cudaGraphNode_t>(const_cast<op *>(&all[i]))
                                  : nullptr;
    *count = std::min(*count, all.size());
    return cudaSuccess;
}

unsigned long long cuda_emu_graph_launches(void)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    return rt().graph_launches;
}

} /* extern "C" */
