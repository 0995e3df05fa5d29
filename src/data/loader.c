/*
 * The batch loader: worker threads cut an epoch into batches ahead of the
 * caller.
 *
 * Batch j of an epoch holds the items order[j*batch ...] of the epoch's
 * order (a permutation keyed by (seed, epoch) alone, or 0..n-1; of a
 * shard, every n_shards-th item of it from the shard's index), each
 * augmented with draws keyed by (seed, epoch, item).  So a batch's bytes
 * are a pure function of (seed, epoch, j): the same for any number of
 * threads and any prefetch depth, and a run restarted at batch j sees what
 * an uninterrupted one would have.
 *
 * Memory: prefetch + 1 slots, all allocated by ct_loader_new.  Batch j
 * lives in slot j % n_slots.  The caller holds the slot of the batch it
 * was last given; the workers may fill batches j < released + n_slots,
 * where `released` is the first batch the caller has not let go of.
 *
 * Threads: one mutex guards the counters and the slots' flags.  A worker
 * claims the next batch under the lock, fills its slot without it (nobody
 * else touches that slot until it is marked ready), and marks it ready.
 * ct_loader_start waits until no worker is filling before it changes the
 * order, so a fill never sees two epochs.  ct_loader_free tells the
 * workers to quit and joins them, also mid-epoch.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/dataset.h"

#define LOADER_DEFAULT_PREFETCH 2
#define LOADER_MAX_THREADS 256
#define LOADER_MAX_PREFETCH 256
#define LOADER_MESSAGE_MAX 1024

typedef struct loader_slot {
    float *images;   /* [batch, C, H, W] */
    int64_t *labels; /* [batch] */
    int n;           /* items in it */
    int64_t batch;   /* which batch of the epoch it holds, when ready */
    bool ready;
    ct_status status; /* a worker's error, with its message (errors are per thread) */
    char message[LOADER_MESSAGE_MAX];
} loader_slot;

struct ct_loader {
    const ct_dataset *ds;
    ct_loader_args args;
    int64_t n_dataset; /* the dataset's size when the loader was made */
    int64_t n_shards;
    int64_t n_items; /* of an epoch: n_dataset, or its shard's n_dataset / n_shards */
    int64_t n_batches;
    int64_t *order; /* this epoch's items: [n_items] of the dataset's [n] */
    loader_slot *slots;
    int n_slots;
    pthread_t *threads;
    int n_threads; /* started */

    pthread_mutex_t lock;
    pthread_cond_t work;    /* workers wait here for a batch to claim */
    pthread_cond_t changed; /* the caller waits here for a slot or for idle workers */
    bool started, quitting;
    int64_t epoch;
    int64_t next_claim;  /* the next batch a worker takes */
    int64_t next_return; /* the next batch ct_loader_next returns */
    int64_t released;    /* batches below this have left the caller's hands */
    int busy;            /* workers filling a slot now */
};

/* Fill `slot` with batch j (called without the lock).  The items come
 * from the order, which ct_loader_start built for this dataset's size; one
 * out of range means the dataset changed under the loader. */
static void fill_slot(ct_loader *loader, int64_t j, loader_slot *slot)
{
    const ct_dataset *ds = loader->ds;
    int64_t first = j * loader->args.batch;
    int64_t n = loader->n_items - first < loader->args.batch ? loader->n_items - first
                                                               : loader->args.batch;
    size_t item_floats = ct_dataset_item_bytes(ds);
    slot->status = CT_OK;
    slot->n = (int)n;
    for (int64_t b = 0; b < n; b++) {
        int64_t item = loader->order[first + b];
        if (item >= ds->n) {
            slot->status = ct_set_error(CT_ERR_STATE,
                                        "loader: item %lld of batch %lld is past the end of a "
                                        "dataset of %lld items: was the dataset changed or "
                                        "freed while its loader ran?",
                                        (long long)item, (long long)j, (long long)ds->n);
            snprintf(slot->message, sizeof slot->message, "%s", ct_last_error());
            return;
        }
        ct_augment_item(ds, &loader->args.augment, loader->args.seed, loader->epoch, item,
                        slot->images + (size_t)b * item_floats);
        slot->labels[b] = ds->labels[item];
    }
}

static bool can_claim(const ct_loader *loader)
{
    return loader->started && loader->next_claim < loader->n_batches &&
           loader->next_claim < loader->released + loader->n_slots;
}

static void *worker_main(void *arg)
{
    ct_loader *loader = arg;
    pthread_mutex_lock(&loader->lock);
    for (;;) {
        while (!loader->quitting && !can_claim(loader))
            pthread_cond_wait(&loader->work, &loader->lock);
        if (loader->quitting)
            break;
        int64_t j = loader->next_claim++;
        loader_slot *slot = &loader->slots[j % loader->n_slots];
        slot->ready = false;
        loader->busy++;
        pthread_mutex_unlock(&loader->lock);
        fill_slot(loader, j, slot);
        pthread_mutex_lock(&loader->lock);
        loader->busy--;
        slot->batch = j;
        slot->ready = true;
        pthread_cond_broadcast(&loader->changed);
    }
    pthread_mutex_unlock(&loader->lock);
    return NULL;
}

/* Stop the workers and join them; safe on a half-built loader. */
static void stop_workers(ct_loader *loader)
{
    pthread_mutex_lock(&loader->lock);
    loader->quitting = true;
    pthread_cond_broadcast(&loader->work);
    pthread_mutex_unlock(&loader->lock);
    for (int t = 0; t < loader->n_threads; t++)
        pthread_join(loader->threads[t], NULL);
    loader->n_threads = 0;
}

static ct_status check_args(const ct_dataset *ds, const ct_loader_args *args)
{
    if (!ds || !args)
        return ct_set_error(CT_ERR_ARG, "ct_loader_new: dataset and args are required");
    const ct_augment *a = &args->augment;
    if (args->batch < 1 || args->n_threads < 0 || args->n_threads > LOADER_MAX_THREADS ||
        args->prefetch < 0 || args->prefetch > LOADER_MAX_PREFETCH || a->crop_pad < 0 ||
        a->crop_pad > ds->height || a->crop_pad > ds->width || a->cutout < 0)
        return ct_set_error(CT_ERR_ARG,
                            "ct_loader_new: batch must be >= 1 (got %d), n_threads from 0 to %d "
                            "(got %d), prefetch from 0 to %d (got %d), crop_pad from 0 to the "
                            "image's side %d (got %d), cutout >= 0 (got %d)",
                            args->batch, LOADER_MAX_THREADS, args->n_threads,
                            LOADER_MAX_PREFETCH, args->prefetch,
                            ds->height < ds->width ? ds->height : ds->width, a->crop_pad,
                            a->cutout);
    int n_shards = args->n_shards > 1 ? args->n_shards : 1;
    if (args->n_shards < 0 || args->shard < 0 || args->shard >= n_shards)
        return ct_set_error(CT_ERR_ARG,
                            "ct_loader_new: shard %d of %d: the shard must be from 0 to "
                            "n_shards - 1",
                            args->shard, args->n_shards);
    if (args->drop_last && args->batch > ds->n / n_shards)
        return ct_set_error(CT_ERR_ARG,
                            "ct_loader_new: a batch of %d with drop_last leaves no batch of a "
                            "dataset of %lld items%s: use a smaller batch",
                            args->batch, (long long)(ds->n / n_shards),
                            n_shards > 1 ? " (a shard's)" : "");
    return CT_OK;
}

ct_status ct_loader_new(const ct_dataset *dataset, const ct_loader_args *args, ct_loader **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_loader_new: out is NULL");
    *out = NULL;
    CT_TRY(check_args(dataset, args));
    ct_loader *loader = calloc(1, sizeof *loader);
    if (!loader)
        return ct_set_error(CT_ERR_MEMORY, "ct_loader_new: out of host memory");
    loader->ds = dataset;
    loader->args = *args;
    if (loader->args.n_threads == 0)
        loader->args.n_threads = 1;
    if (loader->args.prefetch == 0)
        loader->args.prefetch = LOADER_DEFAULT_PREFETCH;
    int64_t batch = args->batch;
    loader->n_shards = args->n_shards > 1 ? args->n_shards : 1;
    loader->n_dataset = dataset->n;
    loader->n_items = dataset->n / loader->n_shards;
    loader->n_batches = args->drop_last ? loader->n_items / batch
                                        : (loader->n_items + batch - 1) / batch;
    loader->n_slots = loader->args.prefetch + 1;
    pthread_mutex_init(&loader->lock, NULL);
    pthread_cond_init(&loader->work, NULL);
    pthread_cond_init(&loader->changed, NULL);

    size_t image_floats = (size_t)batch * ct_dataset_item_bytes(dataset);
    loader->order = malloc(sizeof *loader->order * (size_t)dataset->n);
    loader->slots = calloc((size_t)loader->n_slots, sizeof *loader->slots);
    loader->threads = malloc(sizeof *loader->threads * (size_t)loader->args.n_threads);
    bool ok = loader->order && loader->slots && loader->threads;
    for (int s = 0; ok && s < loader->n_slots; s++) {
        loader->slots[s].images = malloc(sizeof(float) * image_floats);
        loader->slots[s].labels = malloc(sizeof(int64_t) * (size_t)batch);
        ok = loader->slots[s].images && loader->slots[s].labels;
    }
    if (!ok) {
        int n_slots = loader->n_slots; /* for the message, after the loader is gone */
        ct_loader_free(loader);
        return ct_set_error(CT_ERR_MEMORY,
                            "ct_loader_new: out of host memory for %d batch slots of %zu bytes",
                            n_slots, sizeof(float) * image_floats);
    }
    for (int t = 0; t < loader->args.n_threads; t++) {
        int error = pthread_create(&loader->threads[t], NULL, worker_main, loader);
        if (error != 0) {
            ct_loader_free(loader);
            return ct_set_error(CT_ERR_MEMORY, "ct_loader_new: cannot start worker thread %d: %s",
                                t, strerror(error));
        }
        loader->n_threads++;
    }
    *out = loader;
    return CT_OK;
}

void ct_loader_free(ct_loader *loader)
{
    if (!loader)
        return;
    stop_workers(loader);
    pthread_mutex_destroy(&loader->lock);
    pthread_cond_destroy(&loader->work);
    pthread_cond_destroy(&loader->changed);
    for (int s = 0; loader->slots && s < loader->n_slots; s++) {
        free(loader->slots[s].images);
        free(loader->slots[s].labels);
    }
    free(loader->slots);
    free(loader->order);
    free(loader->threads);
    free(loader);
}

int64_t ct_loader_batches(const ct_loader *loader)
{
    return loader ? loader->n_batches : 0;
}

ct_status ct_loader_start(ct_loader *loader, int64_t epoch, int64_t first_batch)
{
    if (!loader)
        return ct_set_error(CT_ERR_ARG, "ct_loader_start: loader is NULL");
    if (epoch < 1 || epoch > UINT32_MAX || first_batch < 0 || first_batch > loader->n_batches)
        return ct_set_error(CT_ERR_ARG,
                            "ct_loader_start: epoch %lld must be from 1 to %u and first_batch "
                            "%lld from 0 to the %lld batches of an epoch",
                            (long long)epoch, UINT32_MAX, (long long)first_batch,
                            (long long)loader->n_batches);
    pthread_mutex_lock(&loader->lock);
    loader->started = false; /* no new claims */
    while (loader->busy > 0)
        pthread_cond_wait(&loader->changed, &loader->lock);
    loader->epoch = epoch;
    int64_t n = loader->n_dataset;
    if (loader->args.shuffle)
        ct_data_permutation(loader->args.seed, CT_RNG_STREAM_SHUFFLE, (uint32_t)epoch, n,
                            loader->order);
    else
        for (int64_t i = 0; i < n; i++)
            loader->order[i] = i;
    for (int64_t i = 0; loader->n_shards > 1 && i < loader->n_items; i++)
        loader->order[i] = loader->order[i * loader->n_shards + loader->args.shard];
    for (int s = 0; s < loader->n_slots; s++)
        loader->slots[s].ready = false;
    loader->next_claim = loader->next_return = loader->released = first_batch;
    loader->started = true;
    pthread_cond_broadcast(&loader->work);
    pthread_mutex_unlock(&loader->lock);
    return CT_OK;
}

ct_status ct_loader_next(ct_loader *loader, const float **images, const int64_t **labels,
                         int *n)
{
    if (!loader || !images || !labels || !n)
        return ct_set_error(CT_ERR_ARG, "ct_loader_next: loader, images, labels and n are "
                            "required");
    *images = NULL;
    *labels = NULL;
    *n = 0;
    pthread_mutex_lock(&loader->lock);
    if (!loader->started) {
        pthread_mutex_unlock(&loader->lock);
        return ct_set_error(CT_ERR_STATE, "ct_loader_next: call ct_loader_start first");
    }
    int64_t j = loader->next_return;
    loader->released = j; /* the caller lets go of batch j - 1 */
    pthread_cond_broadcast(&loader->work);
    if (j >= loader->n_batches) {
        pthread_mutex_unlock(&loader->lock);
        return CT_OK;
    }
    loader_slot *slot = &loader->slots[j % loader->n_slots];
    while (!(slot->ready && slot->batch == j))
        pthread_cond_wait(&loader->changed, &loader->lock);
    if (slot->status == CT_OK)
        loader->next_return = j + 1;
    pthread_mutex_unlock(&loader->lock);
    if (slot->status != CT_OK)
        return ct_set_error(slot->status, "%s", slot->message);
    *images = slot->images;
    *labels = slot->labels;
    *n = slot->n;
    return CT_OK;
}
