/*
 * The emulated runtime's state (emu/runtime.cpp, emu/streams.cpp,
 * emu/events.cpp, emu/graphs.cpp): devices, allocations, streams with
 * their queued work or their capture, events, graphs, and the errors the
 * API reports.  One lock guards all of it; queued work runs under it.
 */
#ifndef CT_EMU_STATE_H
#define CT_EMU_STATE_H

#include <stdint.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "internal.h"
#include "cuda_runtime_api.h"

struct CUevent_st {
    int device;
    unsigned flags;
    uint64_t stream, seq; /* the latest record: 0 when never recorded */
    bool done;            /* that record has run */
    double ms;            /* when it ran */
    cuda_emu_kernel_counters counters; /* ... and the kernel counters then */
    uint64_t capture;     /* the capture its latest record was made in; 0: none */
};

namespace emu {

/* The runtime's lock (runtime::lock): recursive, as the std::recursive_mutex
 * it wraps, and a host thread that must wait for another host thread
 * (run_until, for an NCCL collective whose other ranks' threads have not
 * queued their parts yet) can let go of it whole meanwhile, however deeply
 * it holds it. */
class runtime_lock {
public:
    void lock()
    {
        mutex.lock();
        depth++;
    }
    bool try_lock()
    {
        if (!mutex.try_lock())
            return false;
        depth++;
        return true;
    }
    void unlock()
    {
        depth--;
        mutex.unlock();
    }
    /* Let go of it whole; the depth, for take_back. */
    int release_all()
    {
        int held = depth;
        depth = 0;
        for (int i = 0; i < held; i++)
            mutex.unlock();
        return held;
    }
    void take_back(int held)
    {
        for (int i = 0; i < held; i++)
            mutex.lock();
        depth = held;
    }

private:
    std::recursive_mutex mutex;
    int depth = 0; /* how deeply the owner holds it; only the owner touches it */
};

/* What an op waits for besides its stream's earlier work and its
 * dependencies: the other ranks' parts of an NCCL collective between
 * devices of this process (emu/nccl.cpp).  Called with the lock held. */
struct op_gate {
    virtual ~op_gate() = default;
    /* Whether the op may run now. */
    virtual bool open() = 0;
    /* A host thread is waiting for it at `now` (steady seconds) with
     * nothing else to run: when it gives up.  A time not after `now` means
     * it has given up (failed), and open() holds from then on. */
    virtual double stalled(double now) = 0;
};

/* OP_GRAPH: a graph's launch, its nodes run one after another as one op.
 * OP_WAIT: a graph's event wait node (cudaEventWaitExternal), which waits
 * before the graph starts (see cudaGraphLaunch) and does nothing itself. */
enum op_kind { OP_WORK, OP_KERNEL, OP_RECORD, OP_GRAPH, OP_WAIT };

/* "Every op that stream `stream` had queued before `seq` has run." */
struct dependency {
    uint64_t stream;
    uint64_t seq;
};

struct graph_body;

struct op {
    uint64_t seq;
    op_kind kind;
    std::string what;
    std::function<void()> work;             /* OP_WORK */
    kernel_launch launch;                   /* OP_KERNEL */
    CUevent_st *event;                      /* OP_RECORD, OP_WAIT */
    std::shared_ptr<const graph_body> graph; /* OP_GRAPH */
    std::vector<dependency> after;
    std::shared_ptr<op_gate> gate; /* null for all but NCCL collectives */
};

/* A captured graph: its nodes in capture order (one stream, so each depends
 * on the one before).  Nothing edits a graph once captured, so an
 * executable graph shares its graph's body and outlives cudaGraphDestroy. */
struct graph_body {
    int device;
    std::vector<op> nodes;
};

/* A stream's capture (cudaStreamBeginCapture to cudaStreamEndCapture):
 * work queued on the stream meanwhile goes to `nodes` instead of running. */
struct capture_state {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
    std::thread::id thread; /* that began it */
    uint64_t id = 0;        /* unique over the process (events name it) */
    std::vector<op> nodes;
    std::string invalidated_by; /* the refused call, when status is Invalidated */
};

struct stream_state {
    uint64_t id;
    int device;
    bool blocking; /* synchronizes with the legacy stream */
    bool legacy;
    std::deque<op> pending;
    capture_state capture;
};

struct device_state {
    stream_state *legacy;
    size_t in_use;
    cudaError_t sticky; /* a failed kernel: every later call fails */
    std::string sticky_message;
};

struct allocation {
    size_t bytes;
    int device; /* -1: pinned host memory */
};

struct runtime {
    runtime_lock lock;
    std::vector<device_state> devices;
    std::map<uintptr_t, allocation> allocations;
    std::map<uint64_t, stream_state *> streams; /* by id, the legacy streams included */
    uint64_t next_seq = 1, next_stream_id = 1, launches = 0, random = 0;
    std::string config_error; /* a bad CUDA_EMU_* setting */
    std::map<const void *, int> max_dynamic_shared; /* cudaFuncSetAttribute, by kernel */
    std::set<const CUevent_st *> events;            /* the live ones */
    /* Graphs and executable graphs by handle: a handle is a number never
     * used twice, so a destroyed one is refused, never mistaken for another. */
    std::map<uintptr_t, std::shared_ptr<const graph_body>> graphs, graph_execs;
    uint64_t next_graph_handle = 1, next_capture_id = 1, graph_launches = 0;
};

/* The runtime, created (and the settings read) at the first call. */
runtime &rt();
/* The current device of the calling host thread. */
int current_device();

/* Record `error` as the calling thread's last error, with a description
 * that cudaGetErrorString adds to the generic text; returns `error`. */
cudaError_t set_error(cudaError_t error, const std::string &detail);
/* The sticky error of `device` (a failed kernel), recorded as the last error. */
cudaError_t sticky(int device);

/* The allocation that holds [ptr, ptr + bytes) whole, or null. */
const allocation *find_range(const void *ptr, size_t bytes);

/* Streams: handle to state (0 and cudaStreamLegacy: the current device's
 * legacy stream); null for a handle that is not a live stream. */
stream_state *stream_of(cudaStream_t stream);
/* "stream 0x...", or "the legacy stream of device N": for messages. */
std::string stream_name(const stream_state *s);
/* Queue `o` on `s` and return its sequence number; while `s` captures, the
 * op becomes a node of the capture instead, and 0 is returned. */
uint64_t queue(stream_state *s, op &&o);
/* The common start of a call that queues work on `stream` (USE_QUEUE) or
 * waits for it (USE_WAIT): the settings, the handle, the device's sticky
 * error and the rules of stream capture (check_stream_use).  `call` names
 * the caller in messages. */
enum stream_use { USE_QUEUE, USE_WAIT };
cudaError_t open_stream(cudaStream_t stream, const std::string &call, stream_use use,
                        stream_state **out);
/* Run queued work until `done` holds (or nothing is left to run).  When
 * nothing can run because a collective waits for parts that other host
 * threads have not queued yet, let go of the lock and wait for them. */
void run_until(const std::function<bool()> &done);
/* Run all the work that can run (cudaFree, cudaFreeHost); wait only for
 * collectives of the current device as run_until does. */
void run_all();
void run_stream(stream_state *s);
void run_device(int device);
/* Whether the op `seq` of stream `s` has run. */
bool has_run(const stream_state *s, uint64_t seq);
/* Where op `seq` of the stream numbered `stream` is: behind earlier work of
 * its stream or unmet dependencies; first and free to run but for its
 * gate; or no longer queued (it ran, or was dropped: its device failed
 * first, or cudaDeviceReset). */
enum op_place { OP_BEHIND, OP_FIRST, OP_GONE };
op_place place_of(uint64_t stream, uint64_t seq);
/* Wake the host threads that wait in run_until for other threads (queued
 * work and finished work wake them too). */
void wake_waiters();
/* Whether `event` is a live event (cudaEventCreate, not yet destroyed). */
bool is_event(const CUevent_st *event);

/* ---- the rules of stream capture (emu/graphs.cpp) ---- */

/* Whether `call` may use `s` now, given the captures under way: a
 * capturing stream cannot be waited for; an invalidated one takes nothing
 * until its capture ends; the legacy stream cannot be used while a
 * blocking stream of its device captures (cudaErrorStreamCaptureImplicit),
 * nor while a capture forbids unsafe calls.  A refusal invalidates the
 * captures it concerns and records the error with its reason. */
cudaError_t check_stream_use(stream_state *s, const std::string &call, stream_use use);
/* Whether the calling thread may make `call`, one that CUDA calls
 * potentially unsafe during capture (it allocates, frees or synchronizes
 * outside any stream): not while a capture in Global mode, or one this
 * thread began in ThreadLocal mode, is under way.  Refused:
 * cudaErrorStreamCaptureUnsupported, those captures invalidated. */
cudaError_t check_unsafe_call(const std::string &call);
/* cudaDeviceSynchronize: also refused (in every mode) while a stream of
 * `device` captures, since it would wait for the capture's work. */
cudaError_t check_device_wait(int device, const std::string &call);
/* Whether `call` may wait for or query `event`: not when its latest record
 * was made in a capture (cudaErrorCapturedEvent; the capture, if under way,
 * is invalidated). */
cudaError_t check_event_wait(const CUevent_st *event, const std::string &call);
/* cudaStreamWaitEvent where `s` captures or `event` was recorded in a
 * capture: in the capture's own stream nothing to add; for an event
 * recorded outside, a wait node with cudaEventWaitExternal, else refused
 * (cudaErrorStreamCaptureIsolation); a wait that would join another
 * stream to a capture is refused (one stream captures here). */
cudaError_t capture_wait_event(stream_state *s, CUevent_st *event, unsigned flags);
/* Mark `s`'s capture, if active, invalidated by `why` (its nodes dropped):
 * cudaStreamEndCapture will return cudaErrorStreamCaptureInvalidated. */
void invalidate(stream_state *s, const std::string &why);

} // namespace emu

#endif
