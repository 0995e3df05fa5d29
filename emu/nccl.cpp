/*
 * The emulated device's NCCL (nccl.h): communicators, all-reduce and
 * broadcast with reference semantics, queued on streams like kernels.
 *
 * Written from NVIDIA's public NCCL documentation to test cuttle's glue
 * (src/dist/nccl.c): arguments are checked at the call (device memory of
 * the communicator's device, datatype, op, root, stream), and the data
 * moves when the stream's work runs, never at the call.  The reduction is
 * in rank order, the same for every rank (emu/nccl_reduce.cpp).
 *
 * Ranks in one process (ncclCommInitAll; or ncclCommInitRank from one
 * thread per rank, or from one thread in a group, which then meet through
 * the id's segment and find that they share a process; emu/nccl_local.h):
 * a collective's part on each rank's stream is an op with a gate (state.h).  It may run
 * once every rank has queued its part and every part is first on its
 * stream; the first part that runs performs the whole collective, writing
 * every rank's output, and the others do nothing.  A host thread that
 * waits for a part another thread has not queued lets go of the runtime's
 * lock meanwhile (run_until); after CUDA_EMU_NCCL_TIMEOUT the collective
 * fails, naming the ranks that never came.
 *
 * Ranks in different processes (mpirun: each process its own emulated
 * runtime): emu/nccl_shm.cpp; the collective's op exchanges the data
 * through shared memory when it runs, blocking until the other processes
 * run theirs.
 *
 * A collective that fails leaves a sticky error on the device, as a failed
 * kernel does, and the communicator's async error (ncclCommGetAsyncError)
 * with the message (ncclGetLastError); later calls on it return that error.
 */
#include "nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <map>
#include <set>

#include "emu.h"
#include "nccl_internal.h"
#include "nccl_local.h"
#include "state.h"

namespace emu {
namespace nccl {

enum { MAX_RANKS = 256 };

} // namespace nccl
} // namespace emu

using namespace emu;
using namespace emu::nccl;

struct ncclComm {
    int nranks, rank, device;
    std::string label;   /* "comm NAME (rank r of n)" */
    bool joining;        /* ncclCommInitRank in a group: ncclGroupEnd finishes it */
    uint64_t collectives; /* called so far: the next one's number - 1 */
    std::shared_ptr<rank_status> status;
    std::shared_ptr<clique> local; /* ranks in this process */
    std::shared_ptr<link> remote;  /* ranks in other processes (or still joining) */
};

namespace {

/* The process's communicators and the cliques being formed; guarded by
 * the runtime's lock, and never freed (reachable to the leak checker). */
struct registry {
    std::set<ncclComm *> live;
    std::map<std::string, std::shared_ptr<clique>> meeting; /* by segment name */
    unsigned init_alls = 0;
};
registry &reg()
{
    static registry *r = new registry;
    return *r;
}

thread_local std::string last_error;
thread_local int group_depth;
thread_local std::vector<ncclComm *> group_joins;

ncclResult_t reject(ncclResult_t code, const std::string &call, const std::string &why)
{
    last_error = call + ": " + why;
    fprintf(stderr, "cuda-emu: %s\n", last_error.c_str());
    return code;
}

std::string pointer_text(const void *ptr)
{
    char text[32];
    snprintf(text, sizeof text, "%p", ptr);
    return text;
}

/* Whether `c` may take a call now (the lock held). */
ncclResult_t usable(ncclComm *c, const char *call)
{
    if (!c)
        return reject(ncclInvalidArgument, call, "comm is NULL");
    if (!reg().live.count(c))
        return reject(ncclInvalidArgument, call,
                      "comm " + pointer_text(c) + " is not a live communicator (destroyed, or "
                                                  "never made)");
    if (c->joining)
        return reject(ncclInvalidUsage, call,
                      c->label + " is still joining (ncclCommInitRank in a group): call "
                                 "ncclGroupEnd first");
    if (c->status->async != ncclSuccess)
        return reject(c->status->async, call,
                      c->label + " has failed (ncclCommAbort it): " + c->status->error);
    return ncclSuccess;
}

std::string device_memory_problem(const char *name, const void *ptr, size_t bytes, int device)
{
    std::string what = std::string(name) + " " + pointer_text(ptr) + " (" +
                       std::to_string(bytes) + " bytes)";
    const allocation *a = find_range(ptr, bytes);
    if (a && a->device == device)
        return "";
    if (!ptr)
        return std::string(name) + " is NULL";
    if (a && a->device < 0)
        return what + " is pinned host memory (cudaMallocHost), not device memory";
    if (a)
        return what + " is memory of device " + std::to_string(a->device) +
               "; the communicator's device is " + std::to_string(device);
    if (find_range(ptr, 1))
        return what + " runs past the end of its allocation";
    return what + " is not device memory (host memory, or not from cudaMalloc)";
}

/* The stream `stream` names for communicator `c` (0: its device's legacy
 * stream), or a refusal. */
ncclResult_t stream_for(ncclComm *c, cudaStream_t stream, const std::string &where,
                        stream_state **out)
{
    runtime &r = rt();
    bool legacy = stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
    stream_state *s = legacy ? r.devices[(size_t)c->device].legacy : stream_of(stream);
    if (!s)
        return reject(ncclUnhandledCudaError, where,
                      "stream " + pointer_text(stream) + " is not a live stream "
                                                         "(cudaErrorInvalidResourceHandle)");
    if (s->device != c->device)
        return reject(ncclInvalidArgument, where,
                      stream_name(s) + " belongs to device " + std::to_string(s->device) +
                          "; the communicator's device is " + std::to_string(c->device));
    if (r.devices[(size_t)c->device].sticky != cudaSuccess)
        return reject(ncclUnhandledCudaError, where,
                      "device " + std::to_string(c->device) + " has failed: " +
                          r.devices[(size_t)c->device].sticky_message);
    if (s->capture.status != cudaStreamCaptureStatusNone) {
        std::string why = "on " + stream_name(s) +
                          ", which is capturing: the emulated NCCL cannot be captured in a "
                          "graph (cuttle does not capture data-parallel steps)";
        invalidate(s, where + " " + why);
        return reject(ncclInvalidUsage, where, why);
    }
    if (check_stream_use(s, where, USE_QUEUE) != cudaSuccess)
        return reject(ncclInvalidUsage, where, cudaGetErrorString(cudaPeekAtLastError()));
    *out = s;
    return ncclSuccess;
}

/* Queue rank c->rank's part of the in-process collective `args` on `s`. */
void queue_local(ncclComm *c, stream_state *s, op &&o, const call_args &args, const void *send,
                 void *recv)
{
    std::shared_ptr<collective> &slot = c->local->open[args.number];
    if (!slot) {
        slot = std::make_shared<collective>();
        slot->group = c->local;
        slot->ranks = c->local->ranks;
        slot->parts.resize((size_t)c->nranks);
        slot->label = std::string(kind_name(args.kind)) + " #" + std::to_string(args.number) +
                      " on comm " + c->local->name;
    }
    std::shared_ptr<collective> coll = slot;
    int rank = c->rank;
    o.gate = coll;
    o.work = [coll, rank]() { coll->run_part(rank); };
    part &p = coll->parts[(size_t)rank];
    p.send = send;
    p.recv = recv;
    p.args = args;
    p.stream = s->id;
    p.seq = queue(s, std::move(o));
    p.queued = true;
    coll->queued++;
}

/* Queue the cross-process collective `args` on `s`. */
void queue_remote(ncclComm *c, stream_state *s, op &&o, const call_args &args, const void *send,
                  void *recv)
{
    std::shared_ptr<link> l = c->remote;
    std::shared_ptr<rank_status> status = c->status;
    std::string what = o.what;
    o.work = [l, status, what, args, send, recv]() {
        status->queued--;
        if (status->aborted)
            return;
        failure error;
        if (status->async != ncclSuccess)
            error = failure{status->async, "the communicator failed earlier: " + status->error};
        else if (!run_collective(*l, args, send, recv, &error))
            leave(*l, "failed: " + error.message);
        if (error.code == ncclSuccess)
            return;
        status->fail(error.code, what + ": " + error.message);
        fail_current_work(cudaErrorLaunchFailure, error.message.c_str());
    };
    queue(s, std::move(o));
}

ncclResult_t collective_call(int32_t kind, const void *send, void *recv, size_t count,
                             ncclDataType_t type, ncclRedOp_t op, int root, ncclComm *c,
                             cudaStream_t stream)
{
    const char *call = kind_name(kind);
    if (injected_failure(call))
        return reject(ncclSystemError, call, "failure injected (CUDA_EMU_FAIL)");
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (ncclResult_t refused = usable(c, call))
        return refused;
    std::string where = std::string(call) + " on " + c->label;
    size_t element = type_bytes(type);
    if (element == 0)
        return reject(ncclInvalidArgument, where,
                      std::string(type_name(type)) + " is not a datatype the emulator has "
                                                     "(integers, float16, bfloat16, float32, "
                                                     "float64)");
    if (kind == ALL_REDUCE && !valid_op(op))
        return reject(ncclInvalidArgument, where,
                      std::string(op_name(op)) + " is not ncclSum, ncclProd, ncclMax, ncclMin "
                                                 "or ncclAvg (the ops of "
                                                 "ncclRedOpCreatePreMulSum are not emulated)");
    if (kind == BROADCAST && (root < 0 || root >= c->nranks))
        return reject(ncclInvalidArgument, where,
                      "root " + std::to_string(root) + " is not a rank of the communicator (0 "
                      "to " + std::to_string(c->nranks - 1) + ")");
    if (count > SIZE_MAX / element)
        return reject(ncclInvalidArgument, where,
                      "count " + std::to_string(count) + " of " + type_name(type) +
                          " is more bytes than memory has");
    if (!r.config_error.empty())
        return reject(ncclUnhandledCudaError, where, r.config_error);
    stream_state *s = nullptr;
    if (ncclResult_t refused = stream_for(c, stream, where, &s))
        return refused;
    if (count == 0)
        return ncclSuccess; /* an empty collective does nothing, as in NCCL */
    size_t bytes = count * element;
    std::string problem;
    if (kind == ALL_REDUCE || c->rank == root)
        problem = device_memory_problem("sendbuff", send, bytes, c->device);
    if (problem.empty())
        problem = device_memory_problem("recvbuff", recv, bytes, c->device);
    const char *sb = (const char *)send, *rb = (const char *)recv;
    if (problem.empty() && (kind == ALL_REDUCE || c->rank == root) && sb != rb &&
        sb < rb + bytes && rb < sb + bytes)
        problem = "sendbuff " + pointer_text(send) + " and recvbuff " + pointer_text(recv) +
                  " overlap without being the same buffer (" + std::to_string(bytes) + " bytes)";
    if (!problem.empty())
        return reject(ncclInvalidArgument, where, problem);
    call_args args{kind, (int32_t)type, kind == ALL_REDUCE ? (int32_t)op : 0,
                   kind == BROADCAST ? root : 0, (uint64_t)count, ++c->collectives};
    emu::op o{};
    o.kind = OP_WORK;
    o.what = std::string(call) + " #" + std::to_string(args.number) + " on " + c->label;
    c->status->queued++;
    if (c->local)
        queue_local(c, s, std::move(o), args, send, recv);
    else
        queue_remote(c, s, std::move(o), args, send, recv);
    return ncclSuccess;
}

ncclComm *new_comm(int nranks, int rank, int device)
{
    ncclComm *c = new ncclComm{nranks, rank, device, "", true, 0, nullptr, nullptr, nullptr};
    c->status = std::make_shared<rank_status>();
    c->status->rank = rank;
    c->status->device = device;
    return c;
}

void name_comm(ncclComm *c, const std::string &name)
{
    c->label = "comm " + name + " (rank " + std::to_string(c->rank) + " of " +
               std::to_string(c->nranks) + ")";
}

std::shared_ptr<clique> new_clique(const std::string &name, int nranks)
{
    auto made = std::make_shared<clique>();
    made->name = name;
    made->nranks = nranks;
    for (int r = 0; r < nranks; r++) {
        made->ranks.push_back(std::make_shared<rank_status>());
        made->ranks.back()->rank = r;
    }
    return made;
}

/* ncclCommInitRank's second half: wait for every rank, then join the
 * ranks of this process, or keep the link to the others. */
ncclResult_t finish_join(ncclComm *c)
{
    static const char call[] = "ncclCommInitRank";
    failure error;
    bool same_process = false;
    bool joined = wait_for_ranks(*c->remote, &same_process, &error);
    std::lock_guard<runtime_lock> lock(rt().lock);
    c->joining = false;
    std::string name = link_name(*c->remote);
    name_comm(c, name);
    if (!joined) {
        c->status->fail(error.code, error.message);
        return reject(error.code, call, error.message);
    }
    if (same_process) {
        std::shared_ptr<clique> &meeting = reg().meeting[name];
        if (!meeting)
            meeting = new_clique(name, c->nranks);
        c->local = meeting;
        c->status = meeting->ranks[(size_t)c->rank];
        c->status->device = c->device;
        if (++meeting->joined == c->nranks)
            reg().meeting.erase(name);
        c->remote.reset(); /* the segment is no longer needed */
    }
    return ncclSuccess;
}

/* Forget `c`: the lock held. */
void forget(ncclComm *c)
{
    reg().live.erase(c);
    for (auto it = group_joins.begin(); it != group_joins.end();)
        it = *it == c ? group_joins.erase(it) : it + 1;
    delete c;
}

ncclResult_t leave_comm(ncclComm *c, bool abort)
{
    const char *call = abort ? "ncclCommAbort" : "ncclCommDestroy";
    if (!c)
        return ncclSuccess;
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!reg().live.count(c))
        return reject(ncclInvalidArgument, call,
                      "comm " + pointer_text(c) + " is not a live communicator (destroyed, or "
                                                  "never made)");
    std::shared_ptr<rank_status> status = c->status;
    if (!abort)
        run_until([status] { return status->queued == 0; }); /* its collectives finish first */
    status->left = true;
    status->aborted = abort;
    status->how = abort ? "aborted its communicator (ncclCommAbort)"
                        : "destroyed its communicator (ncclCommDestroy)";
    if (c->remote)
        leave(*c->remote, status->how);
    forget(c);
    wake_waiters(); /* collectives that wait for it fail now */
    return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return reject(ncclInvalidArgument, "ncclGetVersion", "version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static const char call[] = "ncclGetUniqueId";
    if (injected_failure(call))
        return reject(ncclSystemError, call, "failure injected (CUDA_EMU_FAIL)");
    if (!id)
        return reject(ncclInvalidArgument, call, "uniqueId is NULL");
    std::string why;
    if (!make_id(id, &why))
        return reject(ncclInternalError, call, why);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    static const char call[] = "ncclCommInitRank";
    if (injected_failure(call))
        return reject(ncclSystemError, call, "failure injected (CUDA_EMU_FAIL)");
    if (!comm)
        return reject(ncclInvalidArgument, call, "comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || nranks > MAX_RANKS)
        return reject(ncclInvalidArgument, call,
                      "nranks " + std::to_string(nranks) + " (the emulator takes 1 to " +
                          std::to_string(MAX_RANKS) + ")");
    if (rank < 0 || rank >= nranks)
        return reject(ncclInvalidArgument, call,
                      "rank " + std::to_string(rank) + " is not in 0 to " +
                          std::to_string(nranks - 1));
    if (!rt().config_error.empty())
        return reject(ncclUnhandledCudaError, call, rt().config_error);
    int device = current_device();
    failure error;
    std::shared_ptr<link> l = attach(commId, nranks, rank, device, &error);
    if (!l)
        return reject(error.code, call, error.message);
    ncclComm *c = new_comm(nranks, rank, device);
    c->remote = l;
    name_comm(c, link_name(*l));
    {
        std::lock_guard<runtime_lock> lock(rt().lock);
        reg().live.insert(c);
        if (group_depth > 0) { /* ncclGroupEnd waits for the ranks */
            group_joins.push_back(c);
            *comm = c;
            return ncclSuccess;
        }
    }
    ncclResult_t result = finish_join(c);
    if (result != ncclSuccess) {
        std::lock_guard<runtime_lock> lock(rt().lock);
        forget(c);
        return result;
    }
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
    static const char call[] = "ncclCommInitAll";
    if (injected_failure(call))
        return reject(ncclSystemError, call, "failure injected (CUDA_EMU_FAIL)");
    if (!comms)
        return reject(ncclInvalidArgument, call, "comms is NULL");
    runtime &r = rt();
    if (!r.config_error.empty())
        return reject(ncclUnhandledCudaError, call, r.config_error);
    int devices = (int)r.devices.size();
    if (ndev < 1 || ndev > devices)
        return reject(ncclInvalidArgument, call,
                      "ndev " + std::to_string(ndev) + ": this process has " +
                          std::to_string(devices) + " emulated device(s) (CUDA_EMU_DEVICES)");
    for (int i = 0; i < ndev; i++) {
        int d = devlist ? devlist[i] : i;
        if (d < 0 || d >= devices)
            return reject(ncclInvalidArgument, call,
                          "devlist[" + std::to_string(i) + "] = " + std::to_string(d) +
                              " is not a device (0 to " + std::to_string(devices - 1) + ")");
        for (int j = 0; j < i; j++)
            if ((devlist ? devlist[j] : j) == d)
                return reject(ncclInvalidUsage, call,
                              "devlist[" + std::to_string(j) + "] and devlist[" +
                                  std::to_string(i) + "] are both device " +
                                  std::to_string(d) + " (NCCL refuses a GPU twice)");
    }
    std::lock_guard<runtime_lock> lock(r.lock);
    std::string name = "ncclCommInitAll-" + std::to_string(++reg().init_alls);
    std::shared_ptr<clique> group = new_clique(name, ndev);
    group->joined = ndev;
    for (int i = 0; i < ndev; i++) {
        ncclComm *c = new_comm(ndev, i, devlist ? devlist[i] : i);
        c->joining = false;
        c->local = group;
        c->status = group->ranks[(size_t)i];
        c->status->device = c->device;
        name_comm(c, name);
        reg().live.insert(c);
        comms[i] = c;
    }
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return leave_comm(comm, false);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return leave_comm(comm, true);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    static const char call[] = "ncclCommGetAsyncError";
    if (!asyncError)
        return reject(ncclInvalidArgument, call, "asyncError is NULL");
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!comm || !reg().live.count(comm))
        return reject(ncclInvalidArgument, call,
                      "comm " + pointer_text(comm) + " is not a live communicator");
    *asyncError = comm->status->async;
    if (comm->status->async != ncclSuccess)
        last_error = comm->status->error;
    return ncclSuccess;
}

/* ncclCommCount, ncclCommCuDevice, ncclCommUserRank. */
static ncclResult_t comm_answer(const char *call, const ncclComm *comm, int *out, int ncclComm::*field)
{
    if (!out)
        return reject(ncclInvalidArgument, call, "the result pointer is NULL");
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!comm || !reg().live.count((ncclComm *)comm))
        return reject(ncclInvalidArgument, call,
                      "comm " + pointer_text(comm) + " is not a live communicator");
    *out = comm->*field;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    return comm_answer("ncclCommCount", comm, count, &ncclComm::nranks);
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    return comm_answer("ncclCommCuDevice", comm, device, &ncclComm::device);
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    return comm_answer("ncclCommUserRank", comm, rank, &ncclComm::rank);
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return collective_call(ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return collective_call(BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                           stream);
}

ncclResult_t ncclGroupStart(void)
{
    group_depth++;
    return ncclSuccess;
}

/* Collectives in a group are queued at their calls (nothing runs before
 * the host waits, so that is the same); the joins wait here. */
ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return reject(ncclInvalidUsage, "ncclGroupEnd", "no ncclGroupStart to end");
    if (--group_depth > 0)
        return ncclSuccess;
    std::vector<ncclComm *> joins;
    {
        std::lock_guard<runtime_lock> lock(rt().lock);
        joins.swap(group_joins);
    }
    ncclResult_t first = ncclSuccess;
    std::string first_error;
    for (ncclComm *c : joins) {
        ncclResult_t result = finish_join(c); /* a failed one keeps its async error */
        if (result != ncclSuccess && first == ncclSuccess) {
            first = result;
            first_error = last_error;
        }
    }
    if (first != ncclSuccess)
        last_error = first_error;
    return first;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* as in NCCL: the calling thread's last error, whatever the comm */
    return last_error.c_str();
}

} // extern "C"
