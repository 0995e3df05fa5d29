/*
 * The NCCL communicator (dist/comm.h): the gradient sums of a data-parallel
 * job whose ranks each train on one GPU, on the gradients' device memory.
 *
 * Streams.  The sums run on a stream of their own, on the backend's GPU,
 * so that on a GPU they overlap the backward kernels still queued on the
 * backend's stream: sum_start records an event on the backend's stream,
 * makes the NCCL stream wait for it and queues the all-reduce there; wait
 * makes the backend's stream wait for the event recorded after it.  The
 * host waits for neither; the step's end (the backend's synchronize) does.
 *
 * Synchronized batchnorm's sums (sum_f64_queued) go the same way, through
 * a pair of events of their own: every collective of the communicator is
 * queued on its one stream, in the order the host calls them, which is the
 * same on every rank.
 *
 * The mean.  Each gradient all-reduce is ncclAvg (NCCL 2.10 and later), so the
 * division by the number of ranks happens in the same pass, not in a
 * kernel of ours.  For a given number of ranks, size and machine NCCL
 * reduces in one order, run after run, and every rank gets the same bits.
 *
 * Joining.  NCCL's unique id comes from rank 0 over the job's host
 * communicator (MPI).  Before that, the ranks tell each other whether
 * they could load NCCL and which GPU they drive, so that a rank without
 * NCCL, or two ranks on one GPU (which NCCL refuses only once it is
 * initializing), stop every rank at once with the reason, instead of
 * leaving the others waiting in ncclCommInitRank.
 */
#if defined(CT_HAVE_CUDA) && defined(CT_HAVE_NCCL)

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/cuda.h"
#include "cuda/vendor_api.h"
#include "dist/comm.h"

#define HOST_NAME_BYTES 64

typedef struct nccl_comm {
    ct_comm comm; /* first: the vtable's functions get it */
    ncclComm_t nccl;
    int device;
    cudaStream_t work; /* the backend's, borrowed */
    cudaStream_t own;  /* the sums' */
    cudaEvent_t *ready, *done; /* per slot: the gradients are in; the sum is */
    int n_slots;
    cudaEvent_t queued_in, queued_out; /* sum_f64_queued's: the same */
} nccl_comm;

/* What each rank tells the others before NCCL starts. */
typedef struct rank_card {
    int loaded; /* NCCL could be loaded */
    int device;
    char host[HOST_NAME_BYTES];
} rank_card;

/* What rank 0 sends: whether it has an id, and the id. */
typedef struct id_message {
    int ok;
    ncclUniqueId id;
} id_message;

static ct_status nccl_fail(const nccl_comm *c, ncclResult_t result, int line, const char *call)
{
    const char *detail = c && c->nccl ? ncclGetLastError(c->nccl) : ncclGetLastError(NULL);
    return ct_set_error(result == ncclSystemError || result == ncclRemoteError ? CT_ERR_IO
                                                                              : CT_ERR_DEVICE,
                        "rank %d of %d: %s failed (dist/nccl.c:%d): %s%s%s",
                        c ? c->comm.rank : -1, c ? c->comm.size : -1, call, line,
                        ncclGetErrorString(result), detail && *detail ? ": " : "",
                        detail ? detail : "");
}

#define NCCL_CALL(c, call)                                                               \
    do {                                                                                 \
        ncclResult_t nccl_result_ = (call);                                              \
        if (nccl_result_ != ncclSuccess)                                                 \
            return nccl_fail((c), nccl_result_, __LINE__, #call);                        \
    } while (0)

static ct_status nccl_reserve(ct_comm *comm, int n_slots)
{
    nccl_comm *c = (nccl_comm *)comm;
    if (n_slots <= c->n_slots)
        return CT_OK;
    cudaEvent_t *ready = realloc(c->ready, sizeof *ready * (size_t)n_slots);
    if (ready)
        c->ready = ready;
    cudaEvent_t *done = ready ? realloc(c->done, sizeof *done * (size_t)n_slots) : NULL;
    if (done)
        c->done = done;
    if (!ready || !done)
        return ct_set_error(CT_ERR_MEMORY, "NCCL communicator: out of host memory");
    CT_CUDA_CALL(cudaSetDevice(c->device));
    for (; c->n_slots < n_slots; c->n_slots++) {
        CT_CUDA_CALL(cudaEventCreateWithFlags(&c->ready[c->n_slots], cudaEventDisableTiming));
        if (cudaEventCreateWithFlags(&c->done[c->n_slots], cudaEventDisableTiming) !=
            cudaSuccess) {
            cudaEventDestroy(c->ready[c->n_slots]);
            CT_CUDA_CALL(cudaGetLastError());
        }
    }
    return CT_OK;
}

/* An in-place all-reduce on the communicator's stream after the work
 * queued on the backend's (event `in`), `out` recorded after it. */
static ct_status queue_all_reduce(nccl_comm *c, void *data, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, cudaEvent_t in, cudaEvent_t out)
{
    CT_CUDA_CALL(cudaSetDevice(c->device));
    CT_CUDA_CALL(cudaEventRecord(in, c->work));
    CT_CUDA_CALL(cudaStreamWaitEvent(c->own, in, 0));
    NCCL_CALL(c, ncclAllReduce(data, data, count, type, op, c->nccl, c->own));
    CT_CUDA_CALL(cudaEventRecord(out, c->own));
    return CT_OK;
}

static ct_status nccl_sum_start(ct_comm *comm, int slot, float *data, int64_t count)
{
    nccl_comm *c = (nccl_comm *)comm;
    CT_ASSERT(slot >= 0 && slot < c->n_slots);
    return queue_all_reduce(c, data, (size_t)count, ncclFloat, ncclAvg, c->ready[slot],
                            c->done[slot]);
}

static ct_status nccl_sum_f64_queued(ct_comm *comm, double *data, int count)
{
    nccl_comm *c = (nccl_comm *)comm;
    CT_TRY(queue_all_reduce(c, data, (size_t)count, ncclFloat64, ncclSum, c->queued_in,
                            c->queued_out));
    CT_CUDA_CALL(cudaStreamWaitEvent(c->work, c->queued_out, 0));
    return CT_OK;
}

/* The host has nothing to drive: NCCL moves the data itself. */
static ct_status nccl_test(ct_comm *comm, int slot, bool *done)
{
    (void)comm, (void)slot;
    *done = false;
    return CT_OK;
}

static ct_status nccl_wait(ct_comm *comm, int slot)
{
    nccl_comm *c = (nccl_comm *)comm;
    CT_ASSERT(slot >= 0 && slot < c->n_slots);
    CT_CUDA_CALL(cudaSetDevice(c->device));
    CT_CUDA_CALL(cudaStreamWaitEvent(c->work, c->done[slot], 0));
    return CT_OK;
}

static ct_status host_only(const char *what)
{
    return ct_set_error(CT_ERR_INTERNAL, "NCCL communicator: %s goes through the job's host "
                                         "communicator", what);
}

static ct_status nccl_sum_f32(ct_comm *comm, float *data, int64_t count)
{
    (void)comm, (void)data, (void)count;
    return host_only("a blocking sum");
}

static ct_status nccl_sum_f64(ct_comm *comm, double *data, int count)
{
    (void)comm, (void)data, (void)count;
    return host_only("a blocking sum");
}

static ct_status nccl_broadcast(ct_comm *comm, void *data, size_t bytes, int root)
{
    (void)comm, (void)data, (void)bytes, (void)root;
    return host_only("a broadcast");
}

static ct_status nccl_allgather(ct_comm *comm, const void *mine, size_t bytes, void *all)
{
    (void)comm, (void)mine, (void)bytes, (void)all;
    return host_only("an all-gather");
}

static ct_status nccl_barrier(ct_comm *comm)
{
    (void)comm;
    return host_only("a barrier");
}

static void nccl_free(nccl_comm *c, bool abort)
{
    if (!c)
        return;
    cudaSetDevice(c->device);
    if (c->nccl)
        (abort ? ncclCommAbort : ncclCommDestroy)(c->nccl);
    if (c->own)
        cudaStreamDestroy(c->own);
    if (c->queued_in)
        cudaEventDestroy(c->queued_in);
    if (c->queued_out)
        cudaEventDestroy(c->queued_out);
    for (int i = 0; i < c->n_slots; i++) {
        cudaEventDestroy(c->ready[i]);
        cudaEventDestroy(c->done[i]);
    }
    free(c->ready);
    free(c->done);
    free(c);
}

/* The job ends through its host communicator; this only lets go of NCCL
 * without waiting for the other ranks. */
static void nccl_abort(ct_comm *comm, int status)
{
    (void)status;
    nccl_comm *c = (nccl_comm *)comm;
    ncclCommAbort(c->nccl);
    c->nccl = NULL;
}

static void nccl_destroy(ct_comm *comm)
{
    nccl_free((nccl_comm *)comm, false);
}

static const ct_comm_i nccl_iface = {
    .reserve = nccl_reserve,
    .sum_start = nccl_sum_start,
    .test = nccl_test,
    .wait = nccl_wait,
    .sum_f32 = nccl_sum_f32,
    .sum_f64 = nccl_sum_f64,
    .sum_f64_queued = nccl_sum_f64_queued,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .barrier = nccl_barrier,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

/* Every rank's card; a reason to stop (naming the rank) if any rank cannot
 * go on, the same on every rank. */
static ct_status exchange_cards(ct_comm *host, int device, const char *why_not_loaded)
{
    rank_card mine = {.loaded = why_not_loaded == NULL, .device = device};
    if (gethostname(mine.host, sizeof mine.host - 1) != 0)
        snprintf(mine.host, sizeof mine.host, "(unknown host)");
    rank_card *all = calloc((size_t)host->size, sizeof *all);
    if (!all)
        return ct_set_error(CT_ERR_MEMORY, "NCCL communicator: out of host memory");
    ct_status status = host->iface->allgather(host, &mine, sizeof mine, all);
    for (int r = 0; status == CT_OK && r < host->size; r++) {
        if (!all[r].loaded) {
            status = r == host->rank
                         ? ct_set_error(CT_ERR_UNSUPPORTED, "rank %d: %s", r, why_not_loaded)
                         : ct_set_error(CT_ERR_UNSUPPORTED,
                                        "rank %d could not load NCCL (its error says why): "
                                        "every rank needs it to train on GPUs", r);
            break;
        }
        for (int q = 0; q < r && status == CT_OK; q++)
            if (all[q].device == all[r].device && strcmp(all[q].host, all[r].host) == 0)
                status = ct_set_error(CT_ERR_ARG,
                                      "ranks %d and %d both train on cuda:%d of %s: each rank "
                                      "needs a GPU of its own (with --device cuda each rank "
                                      "takes the GPU of its local rank on its machine)",
                                      q, r, all[r].device, all[r].host);
    }
    free(all);
    return status;
}

/* A communicator of rank `rank` of `size` on the backend's GPU and stream,
 * with its own stream; NCCL's handle comes later. */
static ct_status comm_new(ct_backend *backend, int rank, int size, nccl_comm **out)
{
    int device = 0;
    void *stream = NULL;
    CT_TRY(ct_cuda_backend_stream(backend, &device, &stream));
    nccl_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ct_set_error(CT_ERR_MEMORY, "NCCL communicator: out of host memory");
    c->comm = (ct_comm){.iface = &nccl_iface, .rank = rank, .size = size, .device = true};
    c->device = device;
    c->work = (cudaStream_t)stream;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->own, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->queued_in, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->queued_out, cudaEventDisableTiming) != cudaSuccess) {
        ct_status status = ct_cuda_fail(cudaGetLastError(), __FILE__, __LINE__,
                                        "the NCCL communicator's stream and events");
        nccl_free(c, false);
        return status;
    }
    *out = c;
    return CT_OK;
}

ct_status ct_comm_nccl_new(ct_comm *host, ct_backend *backend, ct_comm **out)
{
    *out = NULL;
    int device = 0;
    void *stream = NULL;
    CT_TRY(ct_cuda_backend_stream(backend, &device, &stream));
    const char *why = ct_nccl_why();
    CT_TRY(exchange_cards(host, device, why));
    nccl_comm *c = NULL;
    ct_status status = comm_new(backend, host->rank, host->size, &c);
    id_message message = {0};
    if (status == CT_OK && host->rank == 0) {
        ncclResult_t result = ncclGetUniqueId(&message.id);
        message.ok = result == ncclSuccess;
        if (!message.ok)
            status = nccl_fail(c, result, __LINE__, "ncclGetUniqueId");
    }
    ct_status sent = host->iface->broadcast(host, &message, sizeof message, 0);
    if (status == CT_OK && sent != CT_OK)
        status = sent;
    if (status == CT_OK && !message.ok)
        status = ct_set_error(CT_ERR_DEVICE, "rank 0 could not make NCCL's unique id (its "
                                             "error says why)");
    if (status == CT_OK && cudaSetDevice(device) != cudaSuccess)
        status = ct_cuda_fail(cudaGetLastError(), __FILE__, __LINE__, "cudaSetDevice(device)");
    if (status == CT_OK) {
        ncclResult_t result = ncclCommInitRank(&c->nccl, host->size, message.id, host->rank);
        if (result != ncclSuccess) {
            c->nccl = NULL;
            status = nccl_fail(c, result, __LINE__, "ncclCommInitRank");
        }
    }
    if (status != CT_OK) {
        nccl_free(c, true);
        return status;
    }
    *out = &c->comm;
    return CT_OK;
}

ct_status ct_comm_nccl_group_new(ct_backend *const *backends, int n, ct_comm **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    CT_TRY(ct_nccl_load());
    nccl_comm **comms = calloc((size_t)n, sizeof *comms);
    ncclComm_t *handles = calloc((size_t)n, sizeof *handles);
    int *devices = calloc((size_t)n, sizeof *devices);
    ct_status status = comms && handles && devices
                           ? CT_OK
                           : ct_set_error(CT_ERR_MEMORY, "NCCL communicators: out of host memory");
    for (int i = 0; status == CT_OK && i < n; i++) {
        status = comm_new(backends[i], i, n, &comms[i]);
        if (status == CT_OK)
            devices[i] = comms[i]->device;
        for (int j = 0; status == CT_OK && j < i; j++)
            if (devices[j] == devices[i])
                status = ct_set_error(CT_ERR_ARG, "plans %d and %d are both on cuda:%d: each "
                                                  "needs a GPU of its own", j, i, devices[i]);
    }
    if (status == CT_OK) {
        ncclResult_t result = ncclCommInitAll(handles, n, devices);
        if (result != ncclSuccess)
            status = nccl_fail(comms[0], result, __LINE__, "ncclCommInitAll");
    }
    for (int i = 0; comms && i < n; i++) {
        if (status == CT_OK) {
            comms[i]->nccl = handles[i];
            out[i] = &comms[i]->comm;
        } else {
            nccl_free(comms[i], true);
        }
    }
    free(comms);
    free(handles);
    free(devices);
    return status;
}

#endif
