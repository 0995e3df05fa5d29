/*
 * Data parallel inside one process (ct_replicas, include/cuttle.h): plans of
 * one model on several GPUs of this machine, each fed its own part of the
 * batch, their gradients averaged between them over NCCL (dist/nccl.c,
 * ncclCommInitAll) by the same hook as a job's ranks (dist/grad_sync.c),
 * their steps run at once, a host thread each.
 *
 * Why threads: a step's collectives are queued on each GPU's streams as
 * backward reaches them, and every GPU's part must be queued before any
 * can finish.  One host thread queuing plan after plan would wait at the
 * end of the first plan's step for a sum the second plan has not queued
 * yet; NCCL asks that a thread driving several communicators group its
 * calls, which a plan's run loop cannot.  A thread per plan is what
 * PyTorch's DataParallel did too.  The threads live for one run: starting
 * them costs tens of microseconds against a step of milliseconds.
 *
 * A step that fails on one GPU would leave the others waiting for its
 * sums: the failing plan starts the sums it had not reached yet, over
 * whatever its buckets hold (ct_grad_sync_drain), so the others' steps
 * end; their updates are then not to be trusted, the run returns the
 * failure and the replicas refuse to run again.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "dist/dist.h"
#include "graph/plan.h"

#define MESSAGE_BYTES 1024

struct ct_replicas {
    int n;
    ct_plan **plans;
    ct_comm **comms;        /* owned by the plans' hooks */
    ct_dist_stats *stats;   /* per plan: each thread adds to its own */
    bool broken;            /* a step failed: the plans may differ now */
};

typedef struct replica_run {
    ct_replicas *replicas;
    int index;
    ct_mode mode;
    ct_status status;
    char message[MESSAGE_BYTES]; /* ct_last_error is per thread */
} replica_run;

static void *run_one(void *arg)
{
    replica_run *run = arg;
    ct_plan *plan = run->replicas->plans[run->index];
    run->status = ct_plan_run(plan, run->mode);
    if (run->status != CT_OK) {
        snprintf(run->message, sizeof run->message, "%s", ct_last_error());
        if (run->mode == CT_TRAIN && run->replicas->n > 1)
            ct_grad_sync_drain(plan);
    }
    return NULL;
}

/* Plan 0's parameters, buffers, optimizer state, step and loss scaler
 * into every other plan. */
static ct_status copy_state(ct_replicas *r)
{
    const ct_graph *graph = ct_plan_graph(r->plans[0]);
    size_t largest = 1;
    for (int i = 0; i < graph->n_state; i++)
        largest = ct_tensor_bytes(graph->state[i]) > largest ? ct_tensor_bytes(graph->state[i])
                                                             : largest;
    void *host = malloc(largest);
    if (!host)
        return ct_set_error(CT_ERR_MEMORY, "ct_replicas_new: out of host memory");
    ct_status status = CT_OK;
    for (int i = 0; status == CT_OK && i < graph->n_state; i++) {
        size_t bytes = ct_tensor_bytes(graph->state[i]);
        status = ct_plan_read(r->plans[0], graph->state[i], host, bytes);
        for (int k = 1; status == CT_OK && k < r->n; k++)
            status = ct_plan_write(r->plans[k], ct_plan_graph(r->plans[k])->state[i], host,
                                   bytes);
    }
    free(host);
    /* where they are: the step (the schedule's, the optimizers') and fp16's scaler */
    ct_loss_scale_state scaler;
    bool scaling = status == CT_OK && ct_plan_loss_scale_state(r->plans[0], &scaler) == CT_OK;
    for (int k = 1; status == CT_OK && k < r->n; k++) {
        ct_plan_set_step(r->plans[k], ct_plan_step(r->plans[0]));
        if (scaling)
            status = ct_plan_set_loss_scale_state(r->plans[k], &scaler);
    }
    return status;
}

/* The plans are of one model: the same state, tensor by tensor. */
static ct_status check_alike(const ct_replicas *r)
{
    const ct_graph *first = ct_plan_graph(r->plans[0]);
    for (int k = 0; k < r->n; k++) {
        const ct_graph *graph = ct_plan_graph(r->plans[k]);
        if (!graph->has_backward)
            return ct_set_error(CT_ERR_STATE, "ct_replicas_new: plan %d's graph has no "
                                              "gradients (call ct_graph_backward first)", k);
        bool alike = graph->n_state == first->n_state;
        for (int i = 0; alike && i < graph->n_state; i++)
            alike = ct_tensor_bytes(graph->state[i]) == ct_tensor_bytes(first->state[i]);
        if (!alike)
            return ct_set_error(CT_ERR_ARG, "ct_replicas_new: plans 0 and %d are not of one "
                                            "model (their parameters and state differ)", k);
    }
    return CT_OK;
}

/* NCCL between the plans' GPUs, and each plan's hook over its rank. */
static ct_status join_gpus(ct_replicas *r, size_t bucket_bytes)
{
#if defined(CT_HAVE_CUDA) && defined(CT_HAVE_NCCL)
    ct_backend **backends = calloc((size_t)r->n, sizeof *backends);
    if (!backends)
        return ct_set_error(CT_ERR_MEMORY, "ct_replicas_new: out of host memory");
    for (int k = 0; k < r->n; k++)
        backends[k] = ct_plan_backend(r->plans[k]);
    ct_status status = ct_comm_nccl_group_new(backends, r->n, r->comms);
    free(backends);
    for (int k = 0; k < r->n; k++) {
        ct_comm *comm = r->comms[k];
        r->comms[k] = NULL; /* the hook's from here, freed with it even if this fails */
        if (status == CT_OK)
            status = ct_grad_sync_attach(r->plans[k], &r->stats[k], NULL, comm, true,
                                         bucket_bytes);
        else if (comm)
            comm->iface->destroy(comm);
        r->comms[k] = status == CT_OK ? comm : NULL;
    }
    return status;
#else
    (void)r, (void)bucket_bytes;
    return ct_set_error(CT_ERR_UNSUPPORTED,
                        "ct_replicas_new: this build has no NCCL to average gradients between "
                        "GPUs (nccl.h was not found with the CUDA toolkit)");
#endif
}

ct_status ct_replicas_new(ct_plan *const *plans, int n_plans, size_t bucket_bytes,
                          ct_replicas **out)
{
    if (!out || !plans || n_plans < 1)
        return ct_set_error(CT_ERR_ARG, "ct_replicas_new: plans (at least one) and out are "
                                        "required");
    *out = NULL;
    for (int k = 0; k < n_plans; k++)
        if (!plans[k])
            return ct_set_error(CT_ERR_ARG, "ct_replicas_new: plan %d is NULL", k);
    ct_replicas *r = calloc(1, sizeof *r);
    if (!r || !(r->plans = calloc((size_t)n_plans, sizeof *r->plans)) ||
        !(r->comms = calloc((size_t)n_plans, sizeof *r->comms)) ||
        !(r->stats = calloc((size_t)n_plans, sizeof *r->stats))) {
        if (r) {
            free(r->plans);
            free(r->comms);
        }
        free(r);
        return ct_set_error(CT_ERR_MEMORY, "ct_replicas_new: out of host memory");
    }
    r->n = n_plans;
    memcpy(r->plans, plans, sizeof *plans * (size_t)n_plans);
    ct_status status = check_alike(r);
    if (status == CT_OK && n_plans > 1)
        status = copy_state(r);
    if (status == CT_OK && n_plans > 1)
        status = join_gpus(r, bucket_bytes);
    if (status != CT_OK) {
        ct_replicas_free(r);
        return status;
    }
    *out = r;
    return CT_OK;
}

ct_status ct_replicas_run(ct_replicas *r, ct_mode mode)
{
    if (!r)
        return ct_set_error(CT_ERR_ARG, "ct_replicas_run: replicas is NULL");
    if (r->broken)
        return ct_set_error(CT_ERR_STATE, "ct_replicas_run: a step failed on one GPU, so the "
                                          "plans may no longer agree; make new replicas");
    replica_run *runs = calloc((size_t)r->n, sizeof *runs);
    pthread_t *threads = calloc((size_t)r->n, sizeof *threads);
    bool *started = calloc((size_t)r->n, sizeof *started);
    if (!runs || !threads || !started) {
        free(runs);
        free(threads);
        free(started);
        return ct_set_error(CT_ERR_MEMORY, "ct_replicas_run: out of host memory");
    }
    for (int k = 0; k < r->n; k++)
        runs[k] = (replica_run){.replicas = r, .index = k, .mode = mode};
    for (int k = 1; k < r->n; k++) {
        started[k] = pthread_create(&threads[k], NULL, run_one, &runs[k]) == 0;
        if (started[k])
            continue;
        /* no thread: its sums, over whatever its buckets hold, let the others end */
        runs[k].status = ct_set_error(CT_ERR_MEMORY, "no thread could be started for it");
        snprintf(runs[k].message, sizeof runs[k].message, "%s", ct_last_error());
        if (mode == CT_TRAIN)
            ct_grad_sync_drain(r->plans[k]);
    }
    run_one(&runs[0]);
    for (int k = 1; k < r->n; k++)
        if (started[k])
            pthread_join(threads[k], NULL);
    ct_status status = CT_OK;
    for (int k = 0; status == CT_OK && k < r->n; k++)
        if (runs[k].status != CT_OK)
            status = ct_set_error(runs[k].status, "plan %d (of %d replicas): %s", k, r->n,
                                  runs[k].message);
    r->broken = status != CT_OK && mode == CT_TRAIN && r->n > 1;
    free(runs);
    free(threads);
    free(started);
    return status;
}

ct_status ct_replicas_stats(const ct_replicas *r, ct_dist_stats *out)
{
    if (!r || !out)
        return ct_set_error(CT_ERR_ARG, "ct_replicas_stats: replicas and out are required");
    *out = r->stats[0];
    return CT_OK;
}

void ct_replicas_free(ct_replicas *r)
{
    if (!r)
        return;
    for (int k = 0; k < r->n; k++)
        if (r->comms[k]) /* attached: the hook frees its communicator */
            ct_plan_set_grad_hook(r->plans[k], NULL);
    free(r->plans);
    free(r->comms);
    free(r->stats);
    free(r);
}
