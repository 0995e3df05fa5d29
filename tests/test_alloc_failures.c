/*
 * Allocation failure at every allocation: the graph builder (a model file,
 * backward, the optimizer), the plan and the data loader each run with
 * their n-th allocation failing, for every n up to the number they make.
 * Each must answer CT_ERR_MEMORY (or succeed, when what failed could be
 * done without), never crash; freeing what was made must not leak (the
 * suite runs under AddressSanitizer's leak checker too).  This binary is
 * linked with -Wl,--wrap=malloc,... so that cuttle's own allocations go
 * through the countdown below (OpenMP and OpenBLAS, shared libraries, keep
 * theirs).
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_wrap.h"
#include "cuttle.h"
#include "harness.h"
#include "tmpdir.h"


/* -1: off; else the allocations left before one fails. */
static _Atomic long countdown = -1;
static _Atomic bool failed;

static bool allocation_fails(void)
{
    long left = atomic_load(&countdown);
    while (left >= 0 && !atomic_compare_exchange_weak(&countdown, &left, left - 1)) {
    }
    if (left == 0) {
        atomic_store(&failed, true);
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t size)
{
    return allocation_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size)
{
    return allocation_fails() ? NULL : __real_calloc(count, size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
    return allocation_fails() ? NULL : __real_realloc(ptr, size);
}

void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
    return allocation_fails() ? NULL : __real_aligned_alloc(alignment, size);
}

static void arm(long n)
{
    atomic_store(&failed, false);
    atomic_store(&countdown, n);
}

/* Off; whether an allocation failed while armed. */
static bool disarm(void)
{
    atomic_store(&countdown, -1);
    return atomic_load(&failed);
}

/* Runs `attempt(n)` with the n-th allocation failing, n = 0, 1, ... until
 * one runs with no failure; attempt returns its status.  A status other
 * than CT_OK or CT_ERR_MEMORY after a failure is a defect, as is an
 * attempt that fails without an allocation failing. */
static int every_allocation(const char *what, ct_status (*attempt)(void))
{
    for (long n = 0; n < 100000; n++) {
        arm(n);
        ct_status status = attempt();
        bool hit = disarm();
        if (!hit) {
            CHECK(status == CT_OK, "%s without a failed allocation: %s: %s", what,
                  ct_status_name(status), ct_last_error());
            return (int)n;
        }
        CHECK(status == CT_OK || status == CT_ERR_MEMORY,
              "%s with allocation %ld failing: %s: %s", what, n, ct_status_name(status),
              ct_last_error());
    }
    CHECK(false, "%s: no end to its allocations", what);
    return -1;
}

static char *simplecnn_text;

/* The model from its text, backward and SGD. */
static ct_status build_graph(ct_graph **out)
{
    ct_graph *graph = ct_graph_new();
    *out = graph;
    if (!graph)
        return CT_ERR_MEMORY;
    int64_t shape[4] = {4, 1, 28, 28};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, shape);
    ct_tensor *labels = ct_input(graph, "labels", CT_I64, 1, shape);
    ct_tensor *logits = ct_model_build(graph, simplecnn_text, x, 10);
    ct_tensor *loss = ct_cross_entropy(graph, logits, labels, 0.0f);
    if (ct_graph_status(graph) != CT_OK)
        return ct_graph_status(graph);
    ct_status status = ct_graph_backward(graph, loss);
    if (status == CT_OK)
        status = ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f});
    return status;
}

static ct_status graph_attempt(void)
{
    ct_graph *graph = NULL;
    ct_status status = build_graph(&graph);
    ct_graph_free(graph);
    return status;
}

static ct_graph *planned_graph;

static ct_status plan_attempt(void)
{
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    ct_status status = ct_backend_new("cpu:1", &backend);
    if (status == CT_OK)
        status = ct_plan_new(planned_graph, backend, 1, &plan);
    if (status == CT_OK)
        status = ct_plan_run(plan, CT_TRAIN);
    ct_plan_free(plan);
    ct_backend_free(backend);
    return status;
}

static const char *images_path, *labels_path;

static ct_status loader_attempt(void)
{
    ct_dataset *dataset = NULL;
    ct_loader *loader = NULL;
    ct_status status = ct_dataset_load_idx(images_path, labels_path, 10, &dataset);
    ct_loader_args args = {.batch = 3, .shuffle = true, .n_threads = 2, .seed = 1,
                           .augment = {.crop_pad = 1, .hflip = true}};
    if (status == CT_OK)
        status = ct_loader_new(dataset, &args, &loader);
    if (status == CT_OK)
        status = ct_loader_start(loader, 1, 0);
    const float *images;
    const int64_t *labels;
    int n = 1;
    while (status == CT_OK && n > 0)
        status = ct_loader_next(loader, &images, &labels, &n);
    ct_loader_free(loader);
    ct_dataset_free(dataset);
    return status;
}

static void graph_builder_survives_every_failure(void)
{
    int total = every_allocation("building the graph", graph_attempt);
    CHECK(total > 50, "only %d allocations to build a graph: is the wrapper linked?", total);
}

static void plan_survives_every_failure(void)
{
    CHECK_OK(build_graph(&planned_graph));
    int total = every_allocation("planning and a step", plan_attempt);
    CHECK(total > 10, "only %d allocations to plan", total);
    ct_graph_free(planned_graph);
}

static void loader_survives_every_failure(void)
{
    uint8_t images[16 + 7 * 6 * 6], labels[8 + 7];
    uint8_t header[16] = {0, 0, 8, 3, 0, 0, 0, 7, 0, 0, 0, 6, 0, 0, 0, 6};
    memcpy(images, header, 16);
    for (int i = 16; i < (int)sizeof images; i++)
        images[i] = (uint8_t)(i * 37);
    uint8_t label_header[8] = {0, 0, 8, 1, 0, 0, 0, 7};
    memcpy(labels, label_header, 8);
    for (int i = 0; i < 7; i++)
        labels[8 + i] = (uint8_t)(i % 10);
    images_path = tmpdir_path("images-idx3-ubyte");
    labels_path = tmpdir_path("labels-idx1-ubyte");
    tmpdir_write(images_path, images, sizeof images);
    tmpdir_write(labels_path, labels, sizeof labels);
    int total = every_allocation("loading and iterating a dataset", loader_attempt);
    CHECK(total > 3, "only %d allocations to load", total);
}

int main(void)
{
    tmpdir_create("alloc");
    CHECK_OK(ct_model_source("simplecnn", &simplecnn_text));
    RUN(graph_builder_survives_every_failure);
    RUN(plan_survives_every_failure);
    RUN(loader_survives_every_failure);
    free(simplecnn_text);
    tmpdir_remove();
    return harness_finish();
}
