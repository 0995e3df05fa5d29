/*
 * The MPI communicator (dist/comm.h), for tensors in host memory.
 *
 * A duplicate of MPI_COMM_WORLD, so that cuttle's collectives never match
 * a caller's own, with MPI_ERRORS_RETURN, so that a failure comes back as
 * a ct_status naming the call instead of ending the process inside MPI.
 * Only the thread that made the communicator calls MPI (the loader's and
 * OpenMP's threads never do): MPI_THREAD_FUNNELED.
 *
 * The order of a sum: Open MPI picks an all-reduce algorithm from the
 * number of ranks and the message's size alone, and every algorithm it
 * has gives all ranks the same bits, so a job of N ranks with buckets of
 * one layout sums in one order, run after run.
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dist/comm.h"

/* MPI counts are ints: larger transfers go in pieces of this many bytes. */
#define MPI_PIECE_BYTES (1 << 30)

typedef struct mpi_comm {
    ct_comm comm; /* first: the vtable's functions get it */
    MPI_Comm world;
    MPI_Request *requests;
    int n_requests;
    bool finalize; /* MPI was initialized here, so it is finalized here */
} mpi_comm;

static ct_status check(const ct_comm *comm, int code, const char *call)
{
    if (code == MPI_SUCCESS)
        return CT_OK;
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    return ct_set_error(CT_ERR_IO, "rank %d of %d: %s failed: %s", comm ? comm->rank : -1,
                        comm ? comm->size : -1, call, text);
}

static ct_status check_count(const ct_comm *comm, int64_t count, const char *what)
{
    if (count < 0 || count > INT_MAX)
        return ct_set_error(CT_ERR_ARG, "rank %d: %s of %lld values: at most %d at once",
                            comm->rank, what, (long long)count, INT_MAX);
    return CT_OK;
}

static ct_status mpi_reserve(ct_comm *comm, int n_slots)
{
    mpi_comm *c = (mpi_comm *)comm;
    if (n_slots <= c->n_requests)
        return CT_OK;
    MPI_Request *grown = realloc(c->requests, sizeof *grown * (size_t)n_slots);
    if (!grown)
        return ct_set_error(CT_ERR_MEMORY, "MPI communicator: out of host memory");
    for (int i = c->n_requests; i < n_slots; i++)
        grown[i] = MPI_REQUEST_NULL;
    c->requests = grown;
    c->n_requests = n_slots;
    return CT_OK;
}

static ct_status mpi_sum_start(ct_comm *comm, int slot, float *data, int64_t count)
{
    mpi_comm *c = (mpi_comm *)comm;
    CT_ASSERT(slot >= 0 && slot < c->n_requests);
    CT_TRY(check_count(comm, count, "an all-reduce"));
    return check(comm,
                 MPI_Iallreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, c->world,
                                &c->requests[slot]),
                 "MPI_Iallreduce");
}

static ct_status mpi_test(ct_comm *comm, int slot, bool *done)
{
    mpi_comm *c = (mpi_comm *)comm;
    int flag = 0;
    CT_TRY(check(comm, MPI_Test(&c->requests[slot], &flag, MPI_STATUS_IGNORE), "MPI_Test"));
    *done = flag != 0;
    return CT_OK;
}

static ct_status mpi_wait(ct_comm *comm, int slot)
{
    mpi_comm *c = (mpi_comm *)comm;
    return check(comm, MPI_Wait(&c->requests[slot], MPI_STATUS_IGNORE), "MPI_Wait");
}

static ct_status mpi_sum_f32(ct_comm *comm, float *data, int64_t count)
{
    CT_TRY(check_count(comm, count, "an all-reduce"));
    return check(comm,
                 MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM,
                               ((mpi_comm *)comm)->world),
                 "MPI_Allreduce");
}

static ct_status mpi_sum_f64(ct_comm *comm, double *data, int count)
{
    return check(comm,
                 MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_DOUBLE, MPI_SUM,
                               ((mpi_comm *)comm)->world),
                 "MPI_Allreduce");
}

static ct_status mpi_broadcast(ct_comm *comm, void *data, size_t bytes, int root)
{
    for (size_t done = 0; done < bytes; done += MPI_PIECE_BYTES) {
        size_t piece = bytes - done < MPI_PIECE_BYTES ? bytes - done : MPI_PIECE_BYTES;
        CT_TRY(check(comm,
                     MPI_Bcast((char *)data + done, (int)piece, MPI_BYTE, root,
                               ((mpi_comm *)comm)->world),
                     "MPI_Bcast"));
    }
    return CT_OK;
}

static ct_status mpi_allgather(ct_comm *comm, const void *mine, size_t bytes, void *all)
{
    CT_TRY(check_count(comm, (int64_t)bytes, "an all-gather"));
    return check(comm,
                 MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                               ((mpi_comm *)comm)->world),
                 "MPI_Allgather");
}

static ct_status mpi_barrier(ct_comm *comm)
{
    return check(comm, MPI_Barrier(((mpi_comm *)comm)->world), "MPI_Barrier");
}

static void mpi_abort(ct_comm *comm, int status)
{
    MPI_Abort(((mpi_comm *)comm)->world, status);
}

static void mpi_destroy(ct_comm *comm)
{
    mpi_comm *c = (mpi_comm *)comm;
    MPI_Comm_free(&c->world);
    if (c->finalize)
        MPI_Finalize();
    free(c->requests);
    free(c);
}

static const ct_comm_i mpi_iface = {
    .reserve = mpi_reserve,
    .sum_start = mpi_sum_start,
    .test = mpi_test,
    .wait = mpi_wait,
    .sum_f32 = mpi_sum_f32,
    .sum_f64 = mpi_sum_f64,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .barrier = mpi_barrier,
    .abort = mpi_abort,
    .destroy = mpi_destroy,
};

ct_status ct_comm_mpi_new(ct_comm **out)
{
    *out = NULL;
    mpi_comm *c = calloc(1, sizeof *c);
    if (!c)
        return ct_set_error(CT_ERR_MEMORY, "MPI communicator: out of host memory");
    c->comm.iface = &mpi_iface;
    int initialized = 0, provided = 0;
    MPI_Initialized(&initialized);
    ct_status status = CT_OK;
    if (!initialized) {
        status = check(NULL, MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided),
                       "MPI_Init_thread");
        c->finalize = status == CT_OK;
    }
    if (status == CT_OK)
        status = check(NULL, MPI_Comm_dup(MPI_COMM_WORLD, &c->world), "MPI_Comm_dup");
    if (status != CT_OK) {
        if (c->finalize)
            MPI_Finalize();
        free(c);
        return status;
    }
    MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->world, &c->comm.rank);
    MPI_Comm_size(c->world, &c->comm.size);
    /* the ranks that share this machine's memory: its GPUs are theirs */
    MPI_Comm node;
    if (MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, c->comm.rank, MPI_INFO_NULL,
                            &node) == MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->comm.local_rank);
        MPI_Comm_free(&node);
    }
    *out = &c->comm;
    return CT_OK;
}

const char *ct_comm_mpi_library(void)
{
    static char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (!text[0] && MPI_Get_library_version(text, &length) == MPI_SUCCESS)
        text[strcspn(text, "\n")] = '\0';
    return text;
}
