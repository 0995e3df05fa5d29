/*
 * The emulated runtime's state (emu/runtime.cpp, emu/streams.cpp): devices,
 * allocations, streams with their queued work, events, and the errors the
 * API reports.  One lock guards all of it; queued work runs under it.
 */
#ifndef CT_EMU_STATE_H
#define CT_EMU_STATE_H

#include <stdint.h>

#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"

struct CUevent_st;

namespace emu {

enum op_kind { OP_WORK, OP_KERNEL, OP_RECORD };

/* "Every op that stream `stream` had queued before `seq` has run." */
struct dependency {
    uint64_t stream;
    uint64_t seq;
};

struct op {
    uint64_t seq;
    op_kind kind;
    std::string what;
    std::function<void()> work; /* OP_WORK */
    kernel_launch launch;       /* OP_KERNEL */
    CUevent_st *event;          /* OP_RECORD */
    std::vector<dependency> after;
};

struct stream_state {
    uint64_t id;
    int device;
    bool blocking; /* synchronizes with the legacy stream */
    bool legacy;
    std::deque<op> pending;
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
    std::recursive_mutex lock;
    std::vector<device_state> devices;
    std::map<uintptr_t, allocation> allocations;
    std::map<uint64_t, stream_state *> streams; /* by id, the legacy streams included */
    uint64_t next_seq = 1, next_stream_id = 1, launches = 0, random = 0;
    std::string config_error; /* a bad CUDA_EMU_* setting */
    std::map<const void *, int> max_dynamic_shared; /* cudaFuncSetAttribute, by kernel */
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
uint64_t queue(stream_state *s, op &&o);
/* Run queued work until `done` holds (or nothing is left to run). */
void run_until(const std::function<bool()> &done);
void run_stream(stream_state *s);
void run_device(int device);
/* Whether the op `seq` of stream `s` has run. */
bool has_run(const stream_state *s, uint64_t seq);

} // namespace emu

#endif
