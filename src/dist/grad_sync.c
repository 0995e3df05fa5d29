/*
 * Data-parallel training steps (ct_plan_set_dist): a gradient hook
 * (graph/grad_hook.h) that averages the gradients over the job's ranks.
 *
 * Buckets.  The parameters that have gradients, in reverse order (backward
 * finishes the last layer's first), are cut into buckets of about
 * bucket_bytes: a bucket takes parameters until the next would take it
 * past that size (a larger parameter gets a bucket of its own).  Each
 * bucket is one host buffer, allocated when the hook is made.
 *
 * A step.  As backward finishes a gradient (grad_ready), it is copied into
 * its bucket; when a bucket's last gradient is in, its sum over the ranks
 * starts, and every later grad_ready lets the sums in flight progress, so
 * communication overlaps the rest of backward.  Before the optimizer
 * (grads_done) each sum is waited for in the order they started, divided
 * by the number of ranks and copied back over the gradients.  Every rank
 * runs the same graph, so the buckets start in the same order everywhere,
 * as collectives must.
 *
 * Two transports.  On the CPU the buckets are host memory and the job's
 * communicator sums them (MPI_Iallreduce).  On a GPU (dist/nccl.c) the
 * buckets are device memory, the copies and the sums are queued on the
 * GPU's streams without the host waiting for them, and NCCL leaves the
 * mean itself.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "dist/dist.h"
#include "graph/plan.h"

typedef struct grad_slot {
    int bucket;
    int64_t offset; /* floats into its bucket */
    int64_t count;
    void *grad; /* the gradient's memory in this step */
} grad_slot;

typedef struct bucket {
    float *data;
    int64_t count;
    int first_slot, n_slots; /* its parameters: slots[first_slot ...] */
    int n_ready;             /* gradients copied in, this step */
    bool done;               /* its sum is finished, this step */
} bucket;

typedef struct grad_sync {
    ct_grad_hook hook; /* first: the plan calls through it */
    ct_dist_stats *stats;
    ct_comm *host;     /* the job's (synchronized batchnorm's sums); NULL: none */
    ct_comm *comm;     /* the gradients': the job's, or a device communicator */
    bool owns_comm;    /* made for this plan: destroyed with the hook */
    ct_backend *backend;
    grad_slot *slots; /* by bucket */
    int n_slots;
    int *slot_of; /* by state index */
    bucket *buckets;
    int n_buckets;
    int *started; /* bucket indices in the order their sums started, this step */
    int n_started;
    int *order;   /* ... in the last whole step (before one: index order) */
    ct_rank_sum rank_sum; /* for synchronized batchnorm, when it is on */
} grad_sync;

static double now_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static void destroy(ct_grad_hook *hook);

/* Lets the sums in flight progress, noting those that finished. */
static ct_status progress(grad_sync *g)
{
    ct_comm *comm = g->comm;
    for (int k = 0; k < g->n_started; k++) {
        bucket *b = &g->buckets[g->started[k]];
        if (!b->done)
            CT_TRY(comm->iface->test(comm, g->started[k], &b->done));
    }
    return CT_OK;
}

static ct_status grad_ready(ct_grad_hook *hook, const ct_tensor *param, void *grad)
{
    grad_sync *g = (grad_sync *)hook;
    grad_slot *slot = &g->slots[g->slot_of[param->state_index]];
    bucket *b = &g->buckets[slot->bucket];
    slot->grad = grad;
    ct_comm *comm = g->comm;
    size_t bytes = sizeof(float) * (size_t)slot->count;
    if (comm->device)
        CT_TRY(g->backend->iface->copy(g->backend, b->data + slot->offset, grad, bytes));
    else
        CT_TRY(g->backend->iface->read(g->backend, b->data + slot->offset, grad, bytes));
    double start = now_seconds();
    if (++b->n_ready == b->n_slots) {
        CT_TRY(comm->iface->sum_start(comm, slot->bucket, b->data, b->count));
        g->started[g->n_started++] = slot->bucket;
    }
    ct_status status = progress(g);
    g->stats->comm_seconds += now_seconds() - start;
    return status;
}

static ct_status grads_done(ct_grad_hook *hook)
{
    grad_sync *g = (grad_sync *)hook;
    ct_comm *comm = g->comm;
    if (g->n_started != g->n_buckets)
        return ct_set_error(CT_ERR_INTERNAL,
                            "data parallel: %d of %d gradient buckets were started before the "
                            "optimizer",
                            g->n_started, g->n_buckets);
    double start = now_seconds();
    for (int k = 0; k < g->n_started; k++)
        CT_TRY(comm->iface->wait(comm, g->started[k]));
    double waited = now_seconds() - start;
    g->stats->wait_seconds += waited;
    g->stats->comm_seconds += waited;
    float ranks = (float)comm->size;
    for (int i = 0; i < g->n_buckets; i++) {
        bucket *b = &g->buckets[i];
        for (int64_t j = 0; !comm->device && j < b->count; j++)
            b->data[j] /= ranks;
        for (int s = b->first_slot; s < b->first_slot + b->n_slots; s++) {
            const float *mean = b->data + g->slots[s].offset;
            size_t bytes = sizeof(float) * (size_t)g->slots[s].count;
            CT_TRY(comm->device ? g->backend->iface->copy(g->backend, g->slots[s].grad, mean, bytes)
                                : g->backend->iface->write(g->backend, g->slots[s].grad, mean,
                                                           bytes));
        }
        b->n_ready = 0;
        b->done = false;
    }
    memcpy(g->order, g->started, sizeof *g->order * (size_t)g->n_buckets);
    g->n_started = 0;
    g->stats->steps++;
    return CT_OK;
}

ct_status ct_grad_sync_drain(ct_plan *plan)
{
    ct_grad_hook *hook = ct_plan_grad_hook(plan);
    if (!hook || hook->destroy != destroy)
        return CT_OK;
    grad_sync *g = (grad_sync *)hook;
    ct_status status = CT_OK;
    for (int k = 0; k < g->n_buckets; k++) {
        bucket *b = &g->buckets[g->order[k]];
        if (b->n_ready == b->n_slots)
            continue; /* started in the step */
        ct_status started = g->comm->iface->sum_start(g->comm, g->order[k], b->data, b->count);
        if (started == CT_OK)
            g->started[g->n_started++] = g->order[k];
        status = status == CT_OK ? started : status;
    }
    for (int k = 0; k < g->n_started; k++) {
        ct_status waited = g->comm->iface->wait(g->comm, g->started[k]);
        status = status == CT_OK ? waited : status;
    }
    for (int i = 0; i < g->n_buckets; i++) {
        g->buckets[i].n_ready = 0;
        g->buckets[i].done = false;
    }
    g->n_started = 0;
    return status;
}

static void grad_sync_free(grad_sync *g)
{
    for (int i = 0; g->buckets && i < g->n_buckets; i++) {
        if (g->comm && g->comm->device && g->buckets[i].data)
            g->backend->iface->release(g->backend, g->buckets[i].data);
        else
            free(g->buckets[i].data);
    }
    if (g->comm && g->owns_comm)
        g->comm->iface->destroy(g->comm);
    free(g->buckets);
    free(g->slots);
    free(g->slot_of);
    free(g->started);
    free(g->order);
    free(g);
}

static void destroy(ct_grad_hook *hook)
{
    grad_sync_free((grad_sync *)hook);
}

/* The slots (parameters in reverse order) and their buckets. */
static ct_status plan_buckets(grad_sync *g, const ct_graph *graph, size_t bucket_bytes)
{
    for (int i = graph->n_state - 1; i >= 0; i--) {
        const ct_tensor *param = graph->state[i];
        if (param->role != CT_ROLE_PARAM || !param->grad)
            continue;
        if (param->grad->dtype != CT_F32)
            return ct_set_error(CT_ERR_UNSUPPORTED,
                                "ct_plan_set_dist: the gradient of '%s' is %s; data-parallel "
                                "steps average f32 gradients only",
                                ct_tensor_name(param), ct_dtype_name(param->grad->dtype));
        int64_t count = ct_tensor_numel(param);
        bucket *last = g->n_buckets > 0 ? &g->buckets[g->n_buckets - 1] : NULL;
        if (!last || (size_t)(last->count + count) * sizeof(float) > bucket_bytes) {
            last = &g->buckets[g->n_buckets++];
            last->first_slot = g->n_slots;
        }
        g->slot_of[param->state_index] = g->n_slots;
        g->slots[g->n_slots++] = (grad_slot){.bucket = g->n_buckets - 1,
                                             .offset = last->count, .count = count};
        last->count += count;
        last->n_slots++;
    }
    for (int i = 0; i < g->n_buckets; i++) {
        size_t bytes = sizeof(float) * (size_t)g->buckets[i].count;
        if (g->comm->device)
            CT_TRY(g->backend->iface->alloc(g->backend, bytes, (void **)&g->buckets[i].data));
        else if (!(g->buckets[i].data = malloc(bytes)))
            return ct_set_error(CT_ERR_MEMORY,
                                "ct_plan_set_dist: out of host memory for a bucket of %lld "
                                "floats",
                                (long long)g->buckets[i].count);
    }
    return CT_OK;
}

/* The gradients' communicator: on a GPU, NCCL between the ranks' GPUs;
 * otherwise the job's own. */
static ct_status gradient_comm(ct_comm *host, ct_backend *backend, ct_comm **out)
{
    *out = host;
    if (host->size == 1 || strncmp(ct_backend_name(backend), "cuda", 4) != 0)
        return CT_OK;
#if defined(CT_HAVE_CUDA) && defined(CT_HAVE_NCCL)
    return ct_comm_nccl_new(host, backend, out);
#else
    return ct_set_error(CT_ERR_UNSUPPORTED,
                        "ct_plan_set_dist: this plan is on %s, and this build has no NCCL to "
                        "average gradients between GPUs (nccl.h was not found with the CUDA "
                        "toolkit); train on the CPU, or rebuild with NCCL",
                        ct_backend_name(backend));
#endif
}

ct_status ct_grad_sync_attach(ct_plan *plan, ct_dist_stats *stats, ct_comm *host,
                              ct_comm *grads, bool owns_grads, size_t bucket_bytes)
{
    const ct_graph *graph = ct_plan_graph(plan);
    grad_sync *g = calloc(1, sizeof *g);
    if (!g) {
        if (owns_grads)
            grads->iface->destroy(grads);
        return ct_set_error(CT_ERR_MEMORY, "data-parallel steps: out of host memory");
    }
    g->comm = grads;
    g->owns_comm = owns_grads;
    g->backend = ct_plan_backend(plan);
    int n_state = graph->n_state > 0 ? graph->n_state : 1;
    if (!(g->slots = calloc((size_t)n_state, sizeof *g->slots)) ||
        !(g->slot_of = calloc((size_t)n_state, sizeof *g->slot_of)) ||
        !(g->buckets = calloc((size_t)n_state, sizeof *g->buckets)) ||
        !(g->started = calloc((size_t)n_state, sizeof *g->started)) ||
        !(g->order = calloc((size_t)n_state, sizeof *g->order))) {
        grad_sync_free(g);
        return ct_set_error(CT_ERR_MEMORY, "data-parallel steps: out of host memory");
    }
    g->hook = (ct_grad_hook){grad_ready, grads_done, destroy, NULL};
    g->stats = stats;
    g->host = host;
    ct_status status =
        plan_buckets(g, graph, bucket_bytes ? bucket_bytes : CT_DIST_DEFAULT_BUCKET_BYTES);
    for (int i = 0; i < g->n_buckets; i++)
        g->order[i] = i;
    if (status == CT_OK)
        status = g->comm->iface->reserve(g->comm, g->n_buckets);
    if (status != CT_OK) {
        grad_sync_free(g);
        return status;
    }
    stats->buckets = g->n_buckets;
    stats->bytes = 0;
    for (int i = 0; i < g->n_buckets; i++)
        stats->bytes += sizeof(float) * (size_t)g->buckets[i].count;
    return ct_plan_set_grad_hook(plan, &g->hook);
}

ct_status ct_plan_set_dist(ct_plan *plan, ct_dist *dist, size_t bucket_bytes)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_set_dist: plan is NULL");
    if (!dist)
        return ct_plan_set_grad_hook(plan, NULL);
    if (!ct_plan_graph(plan)->has_backward)
        return ct_set_error(CT_ERR_STATE,
                            "ct_plan_set_dist: the plan's graph has no gradients (call "
                            "ct_graph_backward before ct_plan_new)");
    ct_comm *grads = NULL;
    CT_TRY(gradient_comm(dist->comm, ct_plan_backend(plan), &grads));
    return ct_grad_sync_attach(plan, &dist->stats, dist->comm, grads, grads != dist->comm,
                               bucket_bytes);
}

/* Synchronized batchnorm's sums, at the same point of every rank's step
 * (the same graph): on the CPU blocking, over the job's communicator,
 * between the bucket sums in flight; on GPUs queued on the GPU's stream
 * through the gradients' NCCL communicator, in the same order as the
 * bucket sums on every rank. */
static int sum_over_ranks(void *ctx, double *values, int count)
{
    grad_sync *g = ctx;
    double start = now_seconds();
    ct_status status = g->rank_sum.device
                           ? g->comm->iface->sum_f64_queued(g->comm, values, count)
                           : g->host->iface->sum_f64(g->host, values, count);
    g->stats->comm_seconds += now_seconds() - start;
    return (int)status;
}

ct_status ct_plan_set_sync_bn(ct_plan *plan, bool on)
{
    if (!plan)
        return ct_set_error(CT_ERR_ARG, "ct_plan_set_sync_bn: plan is NULL");
    ct_grad_hook *hook = ct_plan_grad_hook(plan);
    if (!hook || hook->destroy != destroy)
        return ct_set_error(CT_ERR_STATE, "ct_plan_set_sync_bn: the plan has no data-parallel "
                                          "steps: call ct_plan_set_dist first");
    grad_sync *g = (grad_sync *)hook;
    bool on_gpus = g->comm->device;
    if (on && on_gpus && !g->comm->iface->sum_f64_queued)
        return ct_set_error(CT_ERR_UNSUPPORTED, "ct_plan_set_sync_bn: the communicator between "
                                                "these GPUs cannot sum statistics");
    if (on && !on_gpus && (!g->host || strncmp(ct_backend_name(g->backend), "cpu", 3) != 0))
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "ct_plan_set_sync_bn: these data-parallel steps on %s have no "
                            "communicator to sum statistics over",
                            ct_backend_name(g->backend));
    g->rank_sum = (ct_rank_sum){.sum = sum_over_ranks, .ctx = g, .device = on_gpus};
    hook->sync_bn = on ? &g->rank_sum : NULL;
    return CT_OK;
}

ct_status ct_dist_broadcast_plan(ct_dist *dist, ct_plan *plan, int root)
{
    if (!dist || !plan)
        return ct_set_error(CT_ERR_ARG, "ct_dist_broadcast_plan: dist and plan are required");
    const ct_graph *graph = ct_plan_graph(plan);
    size_t total = 0;
    for (int i = 0; i < graph->n_state; i++)
        total += ct_tensor_bytes(graph->state[i]);
    uint8_t *host = malloc(total > 0 ? total : 1);
    if (!host)
        return ct_set_error(CT_ERR_MEMORY,
                            "ct_dist_broadcast_plan: out of host memory for %zu bytes", total);
    ct_status status = CT_OK;
    size_t offset = 0;
    for (int i = 0; status == CT_OK && i < graph->n_state; i++) {
        size_t bytes = ct_tensor_bytes(graph->state[i]);
        status = ct_plan_read(plan, graph->state[i], host + offset, bytes);
        offset += bytes;
    }
    if (status == CT_OK)
        status = ct_dist_broadcast(dist, host, total, root);
    offset = 0;
    for (int i = 0; status == CT_OK && i < graph->n_state; i++) {
        size_t bytes = ct_tensor_bytes(graph->state[i]);
        status = ct_plan_write(plan, graph->state[i], host + offset, bytes);
        offset += bytes;
    }
    free(host);
    return status;
}
