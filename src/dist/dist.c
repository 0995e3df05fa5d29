/*
 * Joining a data-parallel job (ct_dist_init), and the public collectives
 * over the job's communicator (dist/comm.h).  A process that no launcher
 * started is a job of one, whose communicator does nothing: `cuttle train`
 * without mpirun never touches MPI.
 */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dist/dist.h"

/* ---- a job of one ---------------------------------------------------------------- */

static ct_status local_reserve(ct_comm *comm, int n_slots)
{
    (void)comm, (void)n_slots;
    return CT_OK;
}

static ct_status local_sum_start(ct_comm *comm, int slot, float *data, int64_t count)
{
    (void)comm, (void)slot, (void)data, (void)count;
    return CT_OK;
}

static ct_status local_test(ct_comm *comm, int slot, bool *done)
{
    (void)comm, (void)slot;
    *done = true;
    return CT_OK;
}

static ct_status local_wait(ct_comm *comm, int slot)
{
    (void)comm, (void)slot;
    return CT_OK;
}

static ct_status local_sum_f32(ct_comm *comm, float *data, int64_t count)
{
    (void)comm, (void)data, (void)count;
    return CT_OK;
}

static ct_status local_sum_f64(ct_comm *comm, double *data, int count)
{
    (void)comm, (void)data, (void)count;
    return CT_OK;
}

static ct_status local_broadcast(ct_comm *comm, void *data, size_t bytes, int root)
{
    (void)comm, (void)data, (void)bytes, (void)root;
    return CT_OK;
}

static ct_status local_allgather(ct_comm *comm, const void *mine, size_t bytes, void *all)
{
    (void)comm;
    memmove(all, mine, bytes);
    return CT_OK;
}

static ct_status local_barrier(ct_comm *comm)
{
    (void)comm;
    return CT_OK;
}

static void local_abort(ct_comm *comm, int status)
{
    (void)comm, (void)status;
}

static void local_destroy(ct_comm *comm)
{
    (void)comm; /* static */
}

static const ct_comm_i local_iface = {
    .reserve = local_reserve,
    .sum_start = local_sum_start,
    .test = local_test,
    .wait = local_wait,
    .sum_f32 = local_sum_f32,
    .sum_f64 = local_sum_f64,
    .broadcast = local_broadcast,
    .allgather = local_allgather,
    .barrier = local_barrier,
    .abort = local_abort,
    .destroy = local_destroy,
};

static ct_comm local_comm = {.iface = &local_iface, .rank = 0, .size = 1};

/* ---- joining --------------------------------------------------------------------- */

/* What launchers put in their processes' environment: the job's size
 * (Open MPI's mpirun; PMI, as MPICH's hydra and Slurm's srun set it), or
 * just a rank (PMIx). */
static const char *const launcher_size_names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
static const char *const launcher_rank_names[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                                  "PMIX_RANK"};

/* The job's size as the environment says (0: not said); *launched: a
 * launcher started this process. */
static long launcher_size(bool *launched)
{
    long size = 0;
    *launched = false;
    for (size_t i = 0; i < sizeof launcher_rank_names / sizeof *launcher_rank_names; i++)
        *launched = *launched || getenv(launcher_rank_names[i]);
    for (size_t i = 0; i < sizeof launcher_size_names / sizeof *launcher_size_names; i++) {
        const char *text = getenv(launcher_size_names[i]);
        long n = text ? strtol(text, NULL, 10) : 0;
        *launched = *launched || text;
        size = n > size ? n : size;
    }
    return size;
}

ct_status ct_dist_init(ct_dist **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_dist_init: out is NULL");
    *out = NULL;
    bool launched = false;
    long size = launcher_size(&launched);
    ct_dist *dist = calloc(1, sizeof *dist);
    if (!dist)
        return ct_set_error(CT_ERR_MEMORY, "ct_dist_init: out of host memory");
    dist->comm = &local_comm;
#ifdef CT_HAVE_MPI
    if (launched) {
        ct_status status = ct_comm_mpi_new(&dist->comm);
        if (status == CT_OK && size > 1 && dist->comm->size != size) {
            dist->comm->iface->destroy(dist->comm);
            status = ct_set_error(CT_ERR_UNSUPPORTED,
                                  "a launcher started %ld processes, but MPI counts %d here: "
                                  "was it the mpirun of another MPI than this build's (%s)?",
                                  size, dist->comm->size, ct_comm_mpi_library());
        }
        if (status != CT_OK) {
            free(dist);
            return status;
        }
    }
#else
    (void)launched;
    if (size > 1) {
        free(dist);
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "this process is one of %ld that a launcher (mpirun) started, but "
                            "this build of cuttle has no MPI: each would train alone, on all "
                            "the data.  Install MPI (apt-get install libopenmpi-dev "
                            "openmpi-bin) and rebuild (make says \"MPI: found\"), or run one "
                            "process",
                            size);
    }
#endif
    *out = dist;
    return CT_OK;
}

void ct_dist_free(ct_dist *dist)
{
    if (!dist)
        return;
    dist->comm->iface->destroy(dist->comm);
    free(dist);
}

int ct_dist_rank(const ct_dist *dist)
{
    return dist ? dist->comm->rank : 0;
}

int ct_dist_size(const ct_dist *dist)
{
    return dist ? dist->comm->size : 1;
}

int ct_dist_local_rank(const ct_dist *dist)
{
    return dist ? dist->comm->local_rank : 0;
}

const char *ct_dist_library(void)
{
#ifdef CT_HAVE_MPI
    return ct_comm_mpi_library();
#else
    return NULL;
#endif
}

/* ---- collectives ----------------------------------------------------------------- */

#define CHECK_DIST(dist, what)                                                 \
    do {                                                                       \
        if (!(dist))                                                           \
            return ct_set_error(CT_ERR_ARG, "%s: dist is NULL", (what));       \
    } while (0)

ct_status ct_dist_allreduce(ct_dist *dist, float *data, int64_t count, bool average)
{
    CHECK_DIST(dist, "ct_dist_allreduce");
    if (count < 0 || (count > 0 && !data))
        return ct_set_error(CT_ERR_ARG, "ct_dist_allreduce: %lld values at %p",
                            (long long)count, (void *)data);
    CT_TRY(dist->comm->iface->sum_f32(dist->comm, data, count));
    for (int64_t i = 0; average && i < count; i++)
        data[i] /= (float)dist->comm->size;
    return CT_OK;
}

ct_status ct_dist_allreduce_f64(ct_dist *dist, double *data, int count)
{
    CHECK_DIST(dist, "ct_dist_allreduce_f64");
    if (count < 0 || (count > 0 && !data))
        return ct_set_error(CT_ERR_ARG, "ct_dist_allreduce_f64: %d values at %p", count,
                            (void *)data);
    return dist->comm->iface->sum_f64(dist->comm, data, count);
}

ct_status ct_dist_broadcast(ct_dist *dist, void *data, size_t bytes, int root)
{
    CHECK_DIST(dist, "ct_dist_broadcast");
    if ((bytes > 0 && !data) || root < 0 || root >= dist->comm->size)
        return ct_set_error(CT_ERR_ARG, "ct_dist_broadcast: %zu bytes at %p from rank %d of %d",
                            bytes, data, root, dist->comm->size);
    return dist->comm->iface->broadcast(dist->comm, data, bytes, root);
}

ct_status ct_dist_allgather(ct_dist *dist, const void *mine, size_t bytes, void *all)
{
    CHECK_DIST(dist, "ct_dist_allgather");
    if (bytes > 0 && (!mine || !all))
        return ct_set_error(CT_ERR_ARG, "ct_dist_allgather: mine and all are required");
    return dist->comm->iface->allgather(dist->comm, mine, bytes, all);
}

ct_status ct_dist_barrier(ct_dist *dist)
{
    CHECK_DIST(dist, "ct_dist_barrier");
    return dist->comm->iface->barrier(dist->comm);
}

void ct_dist_abort(ct_dist *dist, int status)
{
    if (dist)
        dist->comm->iface->abort(dist->comm, status);
}

ct_status ct_dist_stats_get(const ct_dist *dist, ct_dist_stats *out)
{
    if (!dist || !out)
        return ct_set_error(CT_ERR_ARG, "ct_dist_stats_get: dist and out are required");
    *out = dist->stats;
    return CT_OK;
}
