/*
 * The emulated runtime, part four: events.  A record is an op of its
 * stream that notes the time and the kernel counters when its turn comes
 * (emu/streams.cpp runs it); waiting for an event runs the work until then.
 * During a capture a record marks the capture instead (emu/graphs.cpp).
 */
#include <string>

#include "state.h"

namespace emu {

bool is_event(const CUevent_st *event)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    return rt().events.count(event) != 0;
}

} // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    *event = new CUevent_st{current_device(), flags, 0, 0, false, 0.0, {}, 0};
    rt().events.insert(*event);
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!is_event(event))
        return set_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy: not a live event");
    run_until([event] { return event->seq == 0 || event->done; });
    rt().events.erase(event);
    delete event;
    return cudaSuccess;
}

/* While `stream` captures, a record marks the capture's point (a later
 * cudaStreamWaitEvent in the capture needs nothing more) and runs nothing,
 * unless cudaEventRecordExternal makes it a node that records the event
 * when a launch of the graph reaches it. */
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned flags)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    stream_state *s = nullptr;
    if (!is_event(event))
        return set_error(cudaErrorInvalidResourceHandle, "cudaEventRecord: not a live event");
    if (flags & ~cudaEventRecordExternal)
        return set_error(cudaErrorInvalidValue,
                         "cudaEventRecordWithFlags: flags " + std::to_string(flags));
    if (open_stream(stream, "cudaEventRecord", USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    op o{};
    o.kind = OP_RECORD;
    o.what = "cudaEventRecord";
    o.event = event;
    event->stream = s->id;
    event->done = false;
    if (s->capture.status == cudaStreamCaptureStatusActive) {
        event->capture = s->capture.id;
        event->seq = 0;
        if (flags & cudaEventRecordExternal)
            queue(s, std::move(o));
        return cudaSuccess;
    }
    event->capture = 0;
    event->seq = queue(s, std::move(o));
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    return cudaEventRecordWithFlags(event, stream, cudaEventRecordDefault);
}

static cudaError_t wait_event(cudaEvent_t event, const char *call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!is_event(event))
        return set_error(cudaErrorInvalidResourceHandle, std::string(call) + ": not a live event");
    if (check_event_wait(event, call) != cudaSuccess)
        return cudaPeekAtLastError();
    run_until([event] { return event->seq == 0 || event->done; });
    return sticky(event->device);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return wait_event(event, "cudaEventSynchronize");
}

/* Like cudaStreamQuery, it finishes the work it asks about. */
cudaError_t cudaEventQuery(cudaEvent_t event)
{
    return wait_event(event, "cudaEventQuery");
}

int cuda_emu_event_counters(cudaEvent_t event, cuda_emu_kernel_counters *out)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!is_event(event) || !event->done)
        return -1;
    *out = event->counters;
    return 0;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!is_event(start) || !is_event(end))
        return set_error(cudaErrorInvalidResourceHandle,
                         "cudaEventElapsedTime: not a live event");
    if (check_event_wait(start, "cudaEventElapsedTime") != cudaSuccess ||
        check_event_wait(end, "cudaEventElapsedTime") != cudaSuccess)
        return cudaPeekAtLastError();
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return set_error(cudaErrorInvalidResourceHandle,
                         "cudaEventElapsedTime: an event made with cudaEventDisableTiming");
    if (!start->done || !end->done)
        return set_error(cudaErrorNotReady, "cudaEventElapsedTime: an event has not run yet");
    *ms = (float)(end->ms - start->ms);
    return sticky(start->device);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    stream_state *s = nullptr;
    if (!is_event(event))
        return set_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: not a live event");
    if (flags & ~cudaEventWaitExternal)
        return set_error(cudaErrorInvalidValue,
                         "cudaStreamWaitEvent: flags " + std::to_string(flags));
    if (open_stream(stream, "cudaStreamWaitEvent", USE_QUEUE, &s) != cudaSuccess)
        return cudaPeekAtLastError();
    if (s->capture.status == cudaStreamCaptureStatusActive || event->capture != 0)
        return capture_wait_event(s, event, flags);
    if (event->seq == 0 || event->done)
        return cudaSuccess; /* nothing recorded, or it ran: nothing to wait for */
    op o{};
    o.kind = OP_WORK;
    o.what = "cudaStreamWaitEvent";
    o.work = [] {};
    o.after.push_back(dependency{event->stream, event->seq + 1});
    queue(s, std::move(o));
    return cudaSuccess;
}

} /* extern "C" */
