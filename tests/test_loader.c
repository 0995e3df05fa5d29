/*
 * The batch loader: every item once per epoch; the same bytes for any
 * number of threads and any prefetch depth; drop_last both ways; shards
 * (data parallel) that together are one loader's epoch; a resumed
 * epoch equals the tail of an uninterrupted one; crop, flip and cutout do
 * exactly what they say on small datasets written here; a worker's error
 * reaches the caller; freeing mid-epoch joins cleanly.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "data/dataset.h" /* to shrink a dataset under its loader */
#include "harness.h"
#include "tmpdir.h"

#define N_ITEMS 37 /* the IDX dataset: 2x3 images, pixel 0 = the item's index */
#define ROWS 2
#define COLS 3
#define ITEM (ROWS * COLS)
#define N_CIFAR 10 /* the CIFAR-10 dataset for augmentation */
#define SIDE 32
#define PLANE (SIDE * SIDE)
#define CIFAR_ITEM (3 * PLANE)
#define MAX_BATCHES 64

static ct_dataset *idx_data, *cifar_data;

static void put_u32(uint8_t *at, uint32_t value)
{
    at[0] = (uint8_t)(value >> 24);
    at[1] = (uint8_t)(value >> 16);
    at[2] = (uint8_t)(value >> 8);
    at[3] = (uint8_t)value;
}

static ct_dataset *make_idx(void)
{
    uint8_t images[16 + N_ITEMS * ITEM], labels[8 + N_ITEMS];
    put_u32(images, 0x803);
    put_u32(images + 4, N_ITEMS);
    put_u32(images + 8, ROWS);
    put_u32(images + 12, COLS);
    put_u32(labels, 0x801);
    put_u32(labels + 4, N_ITEMS);
    for (int i = 0; i < N_ITEMS; i++) {
        images[16 + i * ITEM] = (uint8_t)i;
        for (int p = 1; p < ITEM; p++)
            images[16 + i * ITEM + p] = (uint8_t)(i * 5 + p * 41);
        labels[8 + i] = (uint8_t)(i % 10);
    }
    const char *images_path = tmpdir_path("images-idx3-ubyte");
    tmpdir_write(images_path, images, sizeof images);
    const char *labels_path = tmpdir_path("labels-idx1-ubyte");
    tmpdir_write(labels_path, labels, sizeof labels);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load_idx(images_path, labels_path, 10, &ds));
    return ds;
}

/* Byte k of CIFAR item r: never 0, so a padded pixel is told apart. */
static uint8_t cifar_byte(int r, int k)
{
    return (uint8_t)(1 + (r * 7 + k * 13 + (k / SIDE) * 3) % 255);
}

static ct_dataset *make_cifar(void)
{
    static uint8_t bytes[N_CIFAR * (1 + CIFAR_ITEM)];
    for (int r = 0; r < N_CIFAR; r++) {
        uint8_t *record = bytes + r * (1 + CIFAR_ITEM);
        record[0] = (uint8_t)r;
        for (int k = 0; k < CIFAR_ITEM; k++)
            record[1 + k] = cifar_byte(r, k);
    }
    tmpdir_write(tmpdir_path("cifar/test_batch.bin"), bytes, sizeof bytes);
    ct_dataset *ds = NULL;
    CHECK_OK(ct_dataset_load("cifar10", tmpdir_path("cifar"), "test", &ds));
    return ds;
}

/* A whole epoch from first_batch on: images, labels and batch sizes
 * appended; returns the number of batches. */
static int collect(ct_loader *loader, int64_t epoch, int64_t first_batch, float *images,
                   int64_t *labels, int *sizes, size_t item_floats)
{
    CHECK_OK(ct_loader_start(loader, epoch, first_batch));
    int batches = 0;
    for (;;) {
        const float *batch_images;
        const int64_t *batch_labels;
        int n = -1;
        ct_status status = ct_loader_next(loader, &batch_images, &batch_labels, &n);
        CHECK(status == CT_OK, "ct_loader_next: %s", ct_last_error());
        if (status != CT_OK || n == 0 || batches == MAX_BATCHES)
            break;
        memcpy(images, batch_images, sizeof *images * item_floats * (size_t)n);
        memcpy(labels, batch_labels, sizeof *labels * (size_t)n);
        images += item_floats * (size_t)n;
        labels += n;
        sizes[batches++] = n;
    }
    return batches;
}

static ct_loader *new_loader(const ct_dataset *ds, ct_loader_args args)
{
    ct_loader *loader = NULL;
    CHECK_OK(ct_loader_new(ds, &args, &loader));
    return loader;
}

static void test_every_index_once(void)
{
    ct_loader *loader = new_loader(idx_data, (ct_loader_args){.batch = 5, .shuffle = true,
                                                              .seed = 3});
    if (!loader)
        return;
    CHECK(ct_loader_batches(loader) == 8, "batches %lld", (long long)ct_loader_batches(loader));
    static float images[N_ITEMS * ITEM];
    int64_t labels[N_ITEMS], first_order[N_ITEMS];
    int sizes[MAX_BATCHES];
    int same_order_epochs = 0;
    for (int64_t epoch = 1; epoch <= 3; epoch++) {
        int batches = collect(loader, epoch, 0, images, labels, sizes, ITEM);
        CHECK(batches == 8 && sizes[7] == 2, "epoch %lld: %d batches, the last of %d",
              (long long)epoch, batches, sizes[batches > 0 ? batches - 1 : 0]);
        int seen[N_ITEMS] = {0}, wrong = 0;
        int64_t order[N_ITEMS];
        for (int i = 0; i < N_ITEMS; i++) {
            long index = lrintf(images[i * ITEM] * 255.0f);
            order[i] = index;
            if (index >= 0 && index < N_ITEMS)
                seen[index]++;
            wrong += index < 0 || index >= N_ITEMS || labels[i] != index % 10;
        }
        for (int i = 0; i < N_ITEMS; i++)
            wrong += seen[i] != 1;
        CHECK(wrong == 0, "epoch %lld: %d items missing, repeated or mislabelled",
              (long long)epoch, wrong);
        if (epoch == 1)
            memcpy(first_order, order, sizeof order);
        else
            same_order_epochs += memcmp(first_order, order, sizeof order) == 0;
    }
    CHECK(same_order_epochs == 0, "epochs must be shuffled differently");
    ct_loader_free(loader);

    loader = new_loader(idx_data, (ct_loader_args){.batch = 4});
    collect(loader, 1, 0, images, labels, sizes, ITEM);
    int wrong = 0;
    for (int i = 0; i < N_ITEMS; i++)
        wrong += lrintf(images[i * ITEM] * 255.0f) != i;
    CHECK(wrong == 0, "without shuffle the order is 0..n-1 (%d differ)", wrong);
    ct_loader_free(loader);
}

static void test_drop_last(void)
{
    static float images[N_ITEMS * ITEM];
    int64_t labels[N_ITEMS];
    int sizes[MAX_BATCHES];
    ct_loader *loader = new_loader(idx_data, (ct_loader_args){.batch = 5, .shuffle = true,
                                                              .drop_last = true});
    int batches = loader ? collect(loader, 1, 0, images, labels, sizes, ITEM) : 0;
    CHECK(ct_loader_batches(loader) == 7 && batches == 7 && sizes[6] == 5,
          "drop_last: %lld batches promised, %d given", (long long)ct_loader_batches(loader),
          batches);
    int seen[N_ITEMS] = {0}, repeated = 0;
    for (int i = 0; i < 35; i++)
        repeated += seen[lrintf(images[i * ITEM] * 255.0f) % N_ITEMS]++ > 0;
    CHECK(repeated == 0, "%d items repeated", repeated);
    ct_loader_free(loader);

    loader = new_loader(idx_data, (ct_loader_args){.batch = 64});
    batches = loader ? collect(loader, 1, 0, images, labels, sizes, ITEM) : 0;
    CHECK(batches == 1 && sizes[0] == N_ITEMS, "a batch larger than the dataset: %d batches",
          batches);
    ct_loader_free(loader);

    ct_loader *none = (ct_loader *)&none;
    ct_loader_args args = {.batch = 64, .drop_last = true};
    CHECK(ct_loader_new(idx_data, &args, &none) == CT_ERR_ARG && !none &&
              strstr(ct_last_error(), "no batch"),
          "drop_last with batch > size: %s", ct_last_error());
}

/* Shards: two loaders of batch 3 (shards 0 and 1) hold batch j of one loader
 * of batch 6, interleaved as DistributedSampler's (position 2b + s of the big
 * batch is position b of shard s); three shards hold disjoint items. */
static void test_shards(void)
{
    static float whole[N_ITEMS * ITEM], parts[3][N_ITEMS * ITEM];
    int64_t labels[N_ITEMS];
    int sizes[MAX_BATCHES];
    ct_loader_args args = {.batch = 6, .shuffle = true, .drop_last = true, .seed = 3};
    ct_loader *loader = new_loader(idx_data, args);
    int batches = loader ? collect(loader, 2, 0, whole, labels, sizes, ITEM) : 0;
    ct_loader_free(loader);
    args.batch = 3;
    args.n_shards = 2;
    for (int shard = 0; shard < 2; shard++) {
        args.shard = shard;
        loader = new_loader(idx_data, args);
        int got = loader ? collect(loader, 2, 0, parts[shard], labels, sizes, ITEM) : 0;
        CHECK(got == batches && batches == 6 && ct_loader_batches(loader) == 6,
              "shard %d: %d batches, the whole loader %d", shard, got, batches);
        ct_loader_free(loader);
    }
    int wrong = 0;
    for (int j = 0; j < batches; j++)
        for (int k = 0; k < 6; k++)
            wrong += whole[(j * 6 + k) * ITEM] != parts[k % 2][(j * 3 + k / 2) * ITEM];
    CHECK(wrong == 0, "%d items of the two shards are not where the whole batch has them", wrong);

    args.batch = 4;
    args.n_shards = 3; /* 12 items each: one of the 37 is in no shard */
    int seen[N_ITEMS] = {0}, repeated = 0;
    for (int shard = 0; shard < 3; shard++) {
        args.shard = shard;
        loader = new_loader(idx_data, args);
        int got = loader ? collect(loader, 1, 0, parts[shard], labels, sizes, ITEM) : 0;
        CHECK(got == 3, "shard %d of 3: %d batches of 4, not 3", shard, got);
        for (int i = 0; i < got * 4; i++)
            repeated += seen[lrintf(parts[shard][i * ITEM] * 255.0f) % N_ITEMS]++ > 0;
        ct_loader_free(loader);
    }
    CHECK(repeated == 0, "%d items in two shards", repeated);
    ct_loader *none = (ct_loader *)&none;
    args.shard = 3;
    CHECK(ct_loader_new(idx_data, &args, &none) == CT_ERR_ARG && !none,
          "shard 3 of 3 accepted: %s", ct_last_error());
}

/* Epoch `epoch` of CIFAR with every augmentation, for threads/prefetch. */
static int augmented_epoch(int n_threads, int prefetch, int64_t epoch, int64_t first,
                           float *images, int64_t *labels, int *sizes)
{
    ct_loader_args args = {.batch = 3, .shuffle = true, .seed = 11, .n_threads = n_threads,
                           .prefetch = prefetch,
                           .augment = {.crop_pad = 4, .hflip = true, .cutout = 8}};
    ct_loader *loader = new_loader(cifar_data, args);
    int batches = loader ? collect(loader, epoch, first, images, labels, sizes, CIFAR_ITEM) : 0;
    ct_loader_free(loader);
    return batches;
}

static void test_threads_and_prefetch_agree(void)
{
    static float reference[N_CIFAR * CIFAR_ITEM], images[N_CIFAR * CIFAR_ITEM];
    int64_t reference_labels[N_CIFAR], labels[N_CIFAR];
    int sizes[MAX_BATCHES];
    int batches = augmented_epoch(1, 1, 2, 0, reference, reference_labels, sizes);
    CHECK(batches == 4, "%d batches", batches);
    static const int configs[][2] = {{2, 1}, {4, 1}, {1, 3}, {2, 3}, {4, 3}, {3, 0}};
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        memset(images, 0, sizeof images);
        int got = augmented_epoch(configs[i][0], configs[i][1], 2, 0, images, labels, sizes);
        CHECK(got == batches && memcmp(images, reference, sizeof images) == 0 &&
                  memcmp(labels, reference_labels, sizeof labels) == 0,
              "%d threads, prefetch %d: not the same batches as 1 thread, prefetch 1",
              configs[i][0], configs[i][1]);
    }
}

static void test_resume(void)
{
    static float full[N_CIFAR * CIFAR_ITEM], tail[N_CIFAR * CIFAR_ITEM];
    int64_t full_labels[N_CIFAR], tail_labels[N_CIFAR];
    int sizes[MAX_BATCHES];
    int batches = augmented_epoch(2, 2, 5, 0, full, full_labels, sizes);
    for (int first = 1; first <= batches; first++) {
        int got = augmented_epoch(2, 2, 5, first, tail, tail_labels, sizes);
        size_t skip = (size_t)first * 3; /* items in the batches before */
        size_t left = N_CIFAR > skip ? N_CIFAR - skip : 0;
        CHECK(got == batches - first &&
                  memcmp(tail, full + skip * CIFAR_ITEM, sizeof *tail * left * CIFAR_ITEM) == 0 &&
                  memcmp(tail_labels, full_labels + skip, sizeof *tail_labels * left) == 0,
              "resuming at batch %d: %d batches, not the tail of the epoch", first, got);
    }

    /* Restarting a loader mid-epoch, with batches prepared ahead. */
    ct_loader_args args = {.batch = 3, .shuffle = true, .seed = 11, .n_threads = 3,
                           .prefetch = 3,
                           .augment = {.crop_pad = 4, .hflip = true, .cutout = 8}};
    ct_loader *loader = new_loader(cifar_data, args);
    if (!loader)
        return;
    const float *images;
    const int64_t *labels;
    int n;
    CHECK_OK(ct_loader_start(loader, 7, 0));
    CHECK_OK(ct_loader_next(loader, &images, &labels, &n));
    int got = collect(loader, 5, 2, tail, tail_labels, sizes, CIFAR_ITEM);
    CHECK(got == batches - 2 &&
              memcmp(tail, full + 6 * CIFAR_ITEM, sizeof *tail * 4 * CIFAR_ITEM) == 0,
          "a restart mid-epoch must give the tail of the other epoch");
    CHECK(ct_loader_start(loader, 5, batches + 1) == CT_ERR_ARG &&
              strstr(ct_last_error(), "first_batch"),
          "first_batch past the end: %s", ct_last_error());
    CHECK(ct_loader_start(loader, 0, 0) == CT_ERR_ARG && strstr(ct_last_error(), "epoch"),
          "epoch 0: %s", ct_last_error());
    ct_loader_free(loader);
}

/* ---- augmentation, checked against the images' bytes ------------------------------ */

/* The normalized value of byte b in channel c of the CIFAR dataset. */
static float normalized(int c, int b)
{
    return ((float)b / 255.0f - ct_dataset_mean(cifar_data, c)) / ct_dataset_std(cifar_data, c);
}

/* Whether out is item r shifted by (dy, dx) (source = output + shift),
 * flipped first when `flip`, padded with byte 0. */
static bool is_crop(const float *out, int r, int dy, int dx, bool flip)
{
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < SIDE; y++)
            for (int x = 0; x < SIDE; x++) {
                int sy = y + dy, sx = (flip ? SIDE - 1 - x : x) + dx;
                bool inside = sy >= 0 && sy < SIDE && sx >= 0 && sx < SIDE;
                int b = inside ? cifar_byte(r, c * PLANE + sy * SIDE + sx) : 0;
                if (out[c * PLANE + y * SIDE + x] != normalized(c, b))
                    return false;
            }
    return true;
}

/* Every item of `epochs` epochs, unshuffled, with `augment`: calls check
 * for each and returns how many items it accepted. */
static int each_augmented(ct_augment augment, int epochs,
                          bool (*check)(const float *out, int r, int *tally), int *tally)
{
    ct_loader *loader = new_loader(cifar_data, (ct_loader_args){.batch = 4, .seed = 5,
                                                                .augment = augment,
                                                                .n_threads = 2});
    if (!loader)
        return 0;
    static float images[N_CIFAR * CIFAR_ITEM];
    int64_t labels[N_CIFAR];
    int sizes[MAX_BATCHES], accepted = 0;
    for (int epoch = 1; epoch <= epochs; epoch++) {
        collect(loader, epoch, 0, images, labels, sizes, CIFAR_ITEM);
        for (int r = 0; r < N_CIFAR; r++)
            accepted += check(images + r * CIFAR_ITEM, r, tally);
    }
    ct_loader_free(loader);
    return accepted;
}

#define CROP_PAD 4
#define CROP_SHIFTS (2 * CROP_PAD + 1)

static bool check_crop(const float *out, int r, int *tally)
{
    int matches = 0;
    for (int dy = -CROP_PAD; dy <= CROP_PAD; dy++)
        for (int dx = -CROP_PAD; dx <= CROP_PAD; dx++)
            if (is_crop(out, r, dy, dx, false)) {
                matches++;
                tally[(dy + CROP_PAD) * CROP_SHIFTS + dx + CROP_PAD]++;
            }
    return matches == 1;
}

static bool check_flip(const float *out, int r, int *tally)
{
    bool plain = is_crop(out, r, 0, 0, false), flipped = is_crop(out, r, 0, 0, true);
    tally[0] += flipped;
    return plain != flipped;
}

#define CUTOUT 5 /* odd: the square is exactly 5x5 away from the borders */

static bool check_cutout(const float *out, int r, int *tally)
{
    /* Exactly one centre explains the zeros, and the rest is untouched. */
    int matches = 0;
    for (int cy = 0; cy < SIDE; cy++)
        for (int cx = 0; cx < SIDE; cx++) {
            int top = cy - CUTOUT / 2, left = cx - CUTOUT / 2;
            bool ok = true;
            for (int c = 0; c < 3 && ok; c++)
                for (int y = 0; y < SIDE && ok; y++)
                    for (int x = 0; x < SIDE && ok; x++) {
                        bool cut = y >= top && y < top + CUTOUT && x >= left && x < left + CUTOUT;
                        int b = cifar_byte(r, c * PLANE + y * SIDE + x);
                        float want = cut ? 0.0f : normalized(c, b);
                        ok = out[c * PLANE + y * SIDE + x] == want;
                    }
            if (ok) {
                matches++;
                tally[0] += cy < CUTOUT / 2 || cx < CUTOUT / 2 || cy >= SIDE - CUTOUT / 2 ||
                            cx >= SIDE - CUTOUT / 2; /* clipped at a border */
            }
        }
    return matches == 1;
}

static void test_crop(void)
{
    int tally[CROP_SHIFTS * CROP_SHIFTS] = {0};
    int epochs = 8;
    int accepted = each_augmented((ct_augment){.crop_pad = CROP_PAD}, epochs, check_crop, tally);
    CHECK(accepted == epochs * N_CIFAR, "%d of %d crops are not a shift of the image padded "
          "with black", epochs * N_CIFAR - accepted, epochs * N_CIFAR);
    int distinct = 0;
    for (int i = 0; i < CROP_SHIFTS * CROP_SHIFTS; i++)
        distinct += tally[i] > 0;
    CHECK(distinct >= 30, "only %d of the 81 shifts in 80 crops", distinct);
}

static void test_flip(void)
{
    int flipped = 0, epochs = 20;
    int accepted = each_augmented((ct_augment){.hflip = true}, epochs, check_flip, &flipped);
    CHECK(accepted == epochs * N_CIFAR, "%d items neither the image nor its mirror",
          epochs * N_CIFAR - accepted);
    CHECK(flipped >= 60 && flipped <= 140, "%d of 200 flipped: p should be 1/2", flipped);
}

static void test_cutout(void)
{
    int clipped = 0, epochs = 4;
    int accepted = each_augmented((ct_augment){.cutout = CUTOUT}, epochs, check_cutout, &clipped);
    CHECK(accepted == epochs * N_CIFAR, "%d items are not the image with one %dx%d square "
          "set to 0", epochs * N_CIFAR - accepted, CUTOUT, CUTOUT);
}

/* An item's augmentation depends on (seed, epoch, item), not on where the
 * shuffle puts it; and it changes from epoch to epoch. */
static void test_augment_keyed_by_item(void)
{
    ct_augment augment = {.crop_pad = 4, .hflip = true, .cutout = 8};
    static float plain[N_CIFAR * CIFAR_ITEM], shuffled[N_CIFAR * CIFAR_ITEM],
        next_epoch[N_CIFAR * CIFAR_ITEM];
    int64_t plain_labels[N_CIFAR], shuffled_labels[N_CIFAR], labels[N_CIFAR];
    int sizes[MAX_BATCHES];
    ct_loader *a = new_loader(cifar_data, (ct_loader_args){.batch = 4, .seed = 9,
                                                           .augment = augment});
    ct_loader *b = new_loader(cifar_data, (ct_loader_args){.batch = 3, .shuffle = true,
                                                           .seed = 9, .augment = augment});
    if (a && b) {
        collect(a, 3, 0, plain, plain_labels, sizes, CIFAR_ITEM);
        collect(b, 3, 0, shuffled, shuffled_labels, sizes, CIFAR_ITEM);
        collect(a, 4, 0, next_epoch, labels, sizes, CIFAR_ITEM);
        int wrong = 0, changed = 0;
        for (int i = 0; i < N_CIFAR; i++) {
            int64_t item = shuffled_labels[i]; /* the label is the record's index */
            wrong += memcmp(shuffled + i * CIFAR_ITEM, plain + item * CIFAR_ITEM,
                            sizeof *plain * CIFAR_ITEM) != 0;
            changed += memcmp(next_epoch + i * CIFAR_ITEM, plain + i * CIFAR_ITEM,
                              sizeof *plain * CIFAR_ITEM) != 0;
        }
        CHECK(wrong == 0, "%d items augmented differently when shuffled", wrong);
        CHECK(changed >= N_CIFAR - 1, "only %d of %d items changed in the next epoch", changed,
              N_CIFAR);
    }
    ct_loader_free(a);
    ct_loader_free(b);
}

/* ---- errors and teardown ---------------------------------------------------------------- */

static void test_errors(void)
{
    ct_loader *loader = (ct_loader *)&loader;
    ct_loader_args args = {.batch = 0};
    CHECK(ct_loader_new(idx_data, &args, &loader) == CT_ERR_ARG && !loader &&
              strstr(ct_last_error(), "batch must be >= 1"),
          "batch 0: %s", ct_last_error());
    args = (ct_loader_args){.batch = 2, .augment = {.crop_pad = -1}};
    CHECK(ct_loader_new(idx_data, &args, &loader) == CT_ERR_ARG &&
              strstr(ct_last_error(), "crop_pad"),
          "crop_pad -1: %s", ct_last_error());

    loader = new_loader(idx_data, (ct_loader_args){.batch = 5, .n_threads = 2});
    if (!loader)
        return;
    const float *images;
    const int64_t *labels;
    int n;
    CHECK(ct_loader_next(loader, &images, &labels, &n) == CT_ERR_STATE &&
              strstr(ct_last_error(), "ct_loader_start"),
          "next before start: %s", ct_last_error());

    /* A worker's error comes back from ct_loader_next with its message:
     * shrink the dataset under the loader so batch 2 (items 10..14) fails. */
    idx_data->n = 10;
    CHECK_OK(ct_loader_start(loader, 1, 0));
    CHECK_OK(ct_loader_next(loader, &images, &labels, &n));
    CHECK_OK(ct_loader_next(loader, &images, &labels, &n));
    ct_status status = ct_loader_next(loader, &images, &labels, &n);
    CHECK(status == CT_ERR_STATE && n == 0 && strstr(ct_last_error(), "item 10 of batch 2"),
          "worker error: %s %s", ct_status_name(status), ct_last_error());
    CHECK_OK(ct_loader_start(loader, 1, 0)); /* no worker is still reading */
    ct_loader_free(loader);
    idx_data->n = N_ITEMS;
}

static void test_free_mid_epoch(void)
{
    const float *images;
    const int64_t *labels;
    int n;
    ct_loader_args args = {.batch = 2, .shuffle = true, .n_threads = 4, .prefetch = 3,
                           .augment = {.crop_pad = 2, .hflip = true}};
    for (int taken = 0; taken < 4; taken++) {
        ct_loader *loader = new_loader(cifar_data, args);
        if (!loader)
            return;
        if (taken > 0)
            CHECK_OK(ct_loader_start(loader, 1, 0));
        for (int i = 1; i < taken; i++)
            CHECK_OK(ct_loader_next(loader, &images, &labels, &n));
        ct_loader_free(loader); /* must join its workers; ASan and the exit check it */
    }
    ct_loader_free(NULL);
}

int main(void)
{
    tmpdir_create("test_loader");
    idx_data = make_idx();
    cifar_data = make_cifar();
    if (idx_data && cifar_data) {
        RUN(test_every_index_once);
        RUN(test_drop_last);
        RUN(test_shards);
        RUN(test_threads_and_prefetch_agree);
        RUN(test_resume);
        RUN(test_crop);
        RUN(test_flip);
        RUN(test_cutout);
        RUN(test_augment_keyed_by_item);
        RUN(test_errors);
        RUN(test_free_mid_epoch);
    } else {
        printf("FAIL making the datasets\n");
    }
    ct_dataset_free(idx_data);
    ct_dataset_free(cifar_data);
    tmpdir_remove();
    return harness_finish();
}
