/*
 * Tests of checkpoints (ct_plan_save / ct_plan_load): round trips of the
 * model and the optimizer state, metadata, continuing training exactly
 * after a load, precise refusals of files that do not fit, corrupt and
 * truncated files (a bit flipped in the data: the checksum), and an atomic
 * save that survives being killed.
 */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <stdint.h>

#include "cuttle.h"
#include "harness.h"
#include "io/atomic_file.h"

#define BATCH 4
#define CLASSES 5
#define KILL_ROUNDS 6

static char temp_dir[64];

/* A small network with every kind of state: conv, batchnorm (with the i64
 * num_batches_tracked), linear, and SGD momentum buffers. */
typedef struct net {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    ct_tensor *x, *labels, *logits, *loss;
} net;

static void net_free(net *n)
{
    ct_plan_free(n->plan);
    ct_graph_free(n->graph);
    ct_backend_free(n->backend);
    memset(n, 0, sizeof *n);
}

static bool net_new(net *n, int classes, bool optimizer, uint64_t seed)
{
    memset(n, 0, sizeof *n);
    n->graph = ct_graph_new();
    int64_t shape[4] = {BATCH, 2, 8, 8};
    n->x = ct_input(n->graph, "x", CT_F32, 4, shape);
    n->labels = ct_input(n->graph, "labels", CT_I64, 1, shape);
    ct_tensor *h = ct_layer_conv2d(n->graph, "conv1", n->x, 4, 3, 3,
                                   (ct_conv_args){.pad = {1, 1}}, false);
    h = ct_relu(n->graph, ct_layer_batchnorm2d(n->graph, "bn1", h));
    h = ct_flatten(n->graph, ct_maxpool2d(n->graph, h, (ct_pool_args){.kernel = {2, 2}}));
    n->logits = ct_layer_linear(n->graph, "fc", h, classes, true);
    n->loss = ct_cross_entropy(n->graph, n->logits, n->labels, 0.0f);
    ct_tensor_keep(n->logits);
    if (ct_graph_status(n->graph) != CT_OK)
        return false;
    if (optimizer) {
        if (ct_graph_backward(n->graph, n->loss) != CT_OK ||
            ct_graph_sgd(n->graph, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f,
                                                 .weight_decay = 1e-3f, .nesterov = true}) !=
                CT_OK)
            return false;
    }
    return ct_backend_new("cpu:1", &n->backend) == CT_OK &&
           ct_plan_new(n->graph, n->backend, seed, &n->plan) == CT_OK;
}

/* One training step on data fixed by `step`. */
static bool net_step(net *n, int step)
{
    float images[BATCH * 2 * 8 * 8];
    int64_t labels[BATCH];
    harness_fill(images, BATCH * 2 * 8 * 8, 100 + (uint64_t)step, -1.0f, 1.0f);
    for (int b = 0; b < BATCH; b++)
        labels[b] = (b + step) % CLASSES;
    return ct_plan_write(n->plan, n->x, images, sizeof images) == CT_OK &&
           ct_plan_write(n->plan, n->labels, labels, sizeof labels) == CT_OK &&
           ct_plan_run(n->plan, CT_TRAIN) == CT_OK;
}

/* Every state tensor of a and b holds the same bytes. */
static bool same_state(net *a, net *b, bool optimizer_too)
{
    for (int i = 0; i < ct_graph_n_state(a->graph); i++) {
        ct_tensor *ta = ct_graph_state(a->graph, i);
        ct_tensor *tb = ct_graph_find(b->graph, ct_tensor_name(ta));
        if (!tb)
            return false;
        if (!optimizer_too && strstr(ct_tensor_name(ta), "momentum_buffer"))
            continue;
        size_t bytes = ct_tensor_bytes(ta);
        unsigned char *va = malloc(bytes), *vb = malloc(bytes);
        bool same = va && vb && ct_plan_read(a->plan, ta, va, bytes) == CT_OK &&
                    ct_plan_read(b->plan, tb, vb, bytes) == CT_OK &&
                    memcmp(va, vb, bytes) == 0;
        free(va);
        free(vb);
        if (!same)
            return false;
    }
    return true;
}

static void path_in_temp(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", temp_dir, name);
}

static void round_trip_continues_exactly(void)
{
    char model_path[128], state_path[128];
    path_in_temp(model_path, sizeof model_path, "model.safetensors");
    path_in_temp(state_path, sizeof state_path, "state.safetensors");
    net a, b;
    CHECK(net_new(&a, CLASSES, true, 1) && net_new(&b, CLASSES, true, 2), "%s",
          ct_last_error());
    for (int s = 0; s < 3; s++)
        CHECK(net_step(&a, s), "%s", ct_last_error());
    ct_meta meta[] = {{"model", "test net"}, {"epoch", "3"}};
    CHECK_OK(ct_plan_save(a.plan, model_path, CT_SAVE_MODEL, 2, meta));
    CHECK_OK(ct_plan_save(a.plan, state_path, CT_SAVE_OPTIMIZER, 0, NULL));
    CHECK(!same_state(&a, &b, false), "different seeds should differ before loading");
    CHECK_OK(ct_plan_load(b.plan, model_path, CT_SAVE_MODEL));
    CHECK_OK(ct_plan_load(b.plan, state_path, CT_SAVE_OPTIMIZER));
    ct_plan_set_step(b.plan, ct_plan_step(a.plan));
    CHECK(same_state(&a, &b, true), "state differs after loading");
    for (int s = 3; s < 5; s++)
        CHECK(net_step(&a, s) && net_step(&b, s), "%s", ct_last_error());
    CHECK(same_state(&a, &b, true), "training diverged after loading");

    ct_checkpoint *checkpoint = NULL;
    CHECK_OK(ct_checkpoint_open(model_path, &checkpoint));
    CHECK(checkpoint && strcmp(ct_checkpoint_meta(checkpoint, "model"), "test net") == 0 &&
              strcmp(ct_checkpoint_meta(checkpoint, "epoch"), "3") == 0 &&
              ct_checkpoint_meta(checkpoint, "absent") == NULL,
          "metadata did not round-trip");
    ct_checkpoint_close(checkpoint);
    net_free(&a);
    net_free(&b);
}

/* A model-only checkpoint loads into a plan without an optimizer (eval). */
static void model_checkpoint_loads_into_eval_plan(void)
{
    char path[128];
    path_in_temp(path, sizeof path, "both.safetensors");
    net a, b;
    CHECK(net_new(&a, CLASSES, true, 1) && net_new(&b, CLASSES, false, 2), "%s",
          ct_last_error());
    CHECK(net_step(&a, 0), "%s", ct_last_error());
    CHECK_OK(ct_plan_save(a.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL));
    CHECK_OK(ct_plan_load(b.plan, path, CT_SAVE_MODEL));
    CHECK(same_state(&b, &a, false), "model state differs");
    net_free(&a);
    net_free(&b);
}

static void expect_refusal(ct_plan *plan, const char *path, unsigned what, ct_status status,
                           const char *needle)
{
    ct_status got = ct_plan_load(plan, path, what);
    CHECK(got == status, "%s loading %s: got %s (%s)", ct_status_name(status), path,
          ct_status_name(got), ct_last_error());
    CHECK(strstr(ct_last_error(), needle) != NULL, "message lacks '%s': %s", needle,
          ct_last_error());
}

static void mismatches_are_listed(void)
{
    char model_path[128], other_path[128];
    path_in_temp(model_path, sizeof model_path, "five.safetensors");
    path_in_temp(other_path, sizeof other_path, "seven.safetensors");
    net five, seven, eval;
    CHECK(net_new(&five, CLASSES, true, 1) && net_new(&seven, CLASSES + 2, true, 1) &&
              net_new(&eval, CLASSES, false, 3),
          "%s", ct_last_error());
    CHECK_OK(ct_plan_save(five.plan, model_path, CT_SAVE_MODEL, 0, NULL));
    CHECK_OK(ct_plan_save(seven.plan, other_path, CT_SAVE_MODEL, 0, NULL));
    expect_refusal(five.plan, other_path, CT_SAVE_MODEL, CT_ERR_FORMAT,
                   "shape of 'fc.weight': the model has [5,64], the file [7,64]");
    expect_refusal(five.plan, other_path, CT_SAVE_MODEL, CT_ERR_FORMAT, "'fc.bias'");
    expect_refusal(five.plan, model_path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, CT_ERR_FORMAT,
                   "missing: 'conv1.weight.momentum_buffer'");
    expect_refusal(five.plan, model_path, CT_SAVE_MODEL, CT_OK, "");
    /* a refused load changes nothing */
    net copy;
    CHECK(net_new(&copy, CLASSES, true, 1), "%s", ct_last_error());
    CHECK(ct_plan_load(copy.plan, other_path, CT_SAVE_MODEL) == CT_ERR_FORMAT, "should refuse");
    CHECK(same_state(&copy, &five, true), "a refused load changed the plan");
    /* a plan without an optimizer has no optimizer state to load */
    expect_refusal(eval.plan, model_path, CT_SAVE_OPTIMIZER, CT_ERR_ARG, "no optimizer state");
    net_free(&copy);
    net_free(&five);
    net_free(&seven);
    net_free(&eval);
}

static void unexpected_tensors_are_named(void)
{
    /* a model with an extra layer saved, loaded into the plain one */
    char path[128];
    path_in_temp(path, sizeof path, "extra.safetensors");
    ct_graph *g = ct_graph_new();
    int64_t shape[1] = {3};
    ct_param(g, "fc.weight", 1, shape, CT_INIT_CONST, 1.0f);
    ct_param(g, "head.weight", 1, shape, CT_INIT_CONST, 1.0f);
    ct_backend *be = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &be));
    CHECK_OK(ct_plan_new(g, be, 1, &plan));
    CHECK_OK(ct_plan_save(plan, path, CT_SAVE_MODEL, 0, NULL));
    ct_plan_free(plan);
    ct_graph_free(g);
    g = ct_graph_new();
    ct_param(g, "fc.weight", 1, shape, CT_INIT_CONST, 2.0f);
    CHECK_OK(ct_plan_new(g, be, 1, &plan));
    CHECK(ct_plan_load(plan, path, CT_SAVE_MODEL) == CT_ERR_FORMAT, "extra tensor accepted");
    CHECK(strstr(ct_last_error(), "unexpected: 'head.weight'"), "%s", ct_last_error());
    ct_plan_free(plan);
    ct_graph_free(g);
    ct_backend_free(be);
}

static void corrupt_files_are_refused(void)
{
    char path[128], bad[128];
    path_in_temp(path, sizeof path, "good.safetensors");
    path_in_temp(bad, sizeof bad, "bad.safetensors");
    net n;
    CHECK(net_new(&n, CLASSES, true, 1), "%s", ct_last_error());
    CHECK_OK(ct_plan_save(n.plan, path, CT_SAVE_MODEL, 0, NULL));
    struct stat st;
    CHECK(stat(path, &st) == 0, "saved file missing");
    FILE *in = fopen(path, "rb");
    unsigned char *bytes = malloc((size_t)st.st_size);
    CHECK(in && bytes && fread(bytes, 1, (size_t)st.st_size, in) == (size_t)st.st_size,
          "read back");
    if (in)
        fclose(in);
    /* truncations at several points, each refused with a message */
    long cuts[] = {0, 4, 8, 20, st.st_size / 2, st.st_size - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        FILE *out = fopen(bad, "wb");
        fwrite(bytes, 1, (size_t)cuts[c], out);
        fclose(out);
        expect_refusal(n.plan, bad, CT_SAVE_MODEL, CT_ERR_FORMAT, "bad.safetensors");
    }
    expect_refusal(n.plan, "/nonexistent/dir/model.safetensors", CT_SAVE_MODEL, CT_ERR_IO,
                   "/nonexistent/dir/model.safetensors");
    CHECK(ct_plan_save(n.plan, "/nonexistent/dir/model.safetensors", CT_SAVE_MODEL, 0, NULL) ==
              CT_ERR_IO,
          "save into a missing directory: %s", ct_last_error());
    free(bytes);
    net_free(&n);
}

/* The whole file at path in a malloc'd buffer; NULL if it cannot be read. */
static unsigned char *read_file(const char *path, size_t *size)
{
    struct stat st;
    FILE *in = fopen(path, "rb");
    unsigned char *bytes = in && stat(path, &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    bool ok = bytes && fread(bytes, 1, (size_t)st.st_size, in) == (size_t)st.st_size;
    if (in)
        fclose(in);
    if (!ok) {
        free(bytes);
        return NULL;
    }
    *size = (size_t)st.st_size;
    return bytes;
}

static bool write_file(const char *path, const unsigned char *bytes, size_t size)
{
    FILE *out = fopen(path, "wb");
    bool ok = out && fwrite(bytes, 1, size, out) == size;
    return out && fclose(out) == 0 && ok;
}

/* Where a safetensors file's data section starts. */
static size_t data_start(const unsigned char *bytes)
{
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | bytes[i];
    return 8 + (size_t)header;
}

/* One bit flipped anywhere in the data section (a disk or a copy gone
 * bad): the load is refused by the checksum and the plan keeps its state. */
static void flipped_data_bits_are_refused(void)
{
    char path[128], bad[128];
    path_in_temp(path, sizeof path, "sound.safetensors");
    path_in_temp(bad, sizeof bad, "flipped.safetensors");
    net n, other;
    CHECK(net_new(&n, CLASSES, true, 1) && net_new(&other, CLASSES, true, 2), "%s",
          ct_last_error());
    CHECK(net_step(&n, 0), "%s", ct_last_error());
    unsigned what = CT_SAVE_MODEL | CT_SAVE_OPTIMIZER;
    CHECK_OK(ct_plan_save(n.plan, path, what, 0, NULL));
    size_t size = 0;
    unsigned char *bytes = read_file(path, &size);
    CHECK(bytes != NULL, "cannot read back %s", path);
    if (!bytes)
        return;
    size_t start = data_start(bytes), data = size - start;
    size_t offsets[] = {start, start + 1, start + data / 3, start + data / 2, size - 4, size - 1};
    int bits[] = {0, 3, 7, 6, 1, 7};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        bytes[offsets[i]] ^= (unsigned char)(1u << bits[i]);
        CHECK(write_file(bad, bytes, size), "write %s", bad);
        bytes[offsets[i]] ^= (unsigned char)(1u << bits[i]);
        expect_refusal(other.plan, bad, what, CT_ERR_FORMAT, "does not match its checksum");
        CHECK(strstr(ct_last_error(), bad) && strstr(ct_last_error(), "corrupt or was modified") &&
                  strstr(ct_last_error(), "earlier checkpoint"),
              "byte %zu: the message should name the file, say what happened and what to do: %s",
              offsets[i], ct_last_error());
    }
    CHECK(!same_state(&other, &n, false), "a refused load changed the plan");
    CHECK_OK(ct_plan_load(other.plan, path, what)); /* the sound file still loads */
    CHECK(same_state(&other, &n, true), "the sound file loaded other values");
    free(bytes);
    net_free(&n);
    net_free(&other);
}

/* Every single-bit flip in the header: refused, or (a flip that leaves the
 * JSON valid and every tensor where it was: inside a metadata value) loads
 * exactly the saved weights; never other weights. */
static void flipped_header_bits_never_load_other_weights(void)
{
    char path[128], bad[128];
    path_in_temp(path, sizeof path, "sound-header.safetensors");
    path_in_temp(bad, sizeof bad, "flipped-header.safetensors");
    net n, other;
    CHECK(net_new(&n, CLASSES, false, 1) && net_new(&other, CLASSES, false, 2), "%s",
          ct_last_error());
    ct_meta meta[] = {{"model", "test net"}};
    CHECK_OK(ct_plan_save(n.plan, path, CT_SAVE_MODEL, 1, meta));
    size_t size = 0;
    unsigned char *bytes = read_file(path, &size);
    CHECK(bytes != NULL, "cannot read back %s", path);
    if (!bytes)
        return;
    int loaded = 0, refused = 0;
    for (size_t at = 0; at < data_start(bytes); at++) {
        for (int bit = 0; bit < 8; bit++) {
            bytes[at] ^= (unsigned char)(1u << bit);
            CHECK(write_file(bad, bytes, size), "write %s", bad);
            bytes[at] ^= (unsigned char)(1u << bit);
            if (ct_plan_load(other.plan, bad, CT_SAVE_MODEL) != CT_OK) {
                refused++;
                continue;
            }
            loaded++;
            CHECK(same_state(&other, &n, false), "byte %zu bit %d flipped: other weights loaded",
                  at, bit);
            CHECK_OK(ct_plan_load(other.plan, path, CT_SAVE_MODEL)); /* n's, for the next */
        }
    }
    fprintf(stderr, "  header bit flips: %d refused, %d loaded the saved weights\n", refused,
            loaded);
    CHECK(refused > 0, "no flipped header was refused");
    free(bytes);
    net_free(&n);
    net_free(&other);
}

/* A file without the checksum (PyTorch's, an older cuttle's) loads as
 * before: unchecked. */
static void file_without_checksum_loads(void)
{
    char path[128], plain[128];
    path_in_temp(path, sizeof path, "with-sum.safetensors");
    path_in_temp(plain, sizeof plain, "without-sum.safetensors");
    net n, other;
    CHECK(net_new(&n, CLASSES, false, 1) && net_new(&other, CLASSES, false, 2), "%s",
          ct_last_error());
    CHECK_OK(ct_plan_save(n.plan, path, CT_SAVE_MODEL, 0, NULL));
    size_t size = 0;
    unsigned char *bytes = read_file(path, &size);
    CHECK(bytes != NULL, "cannot read back %s", path);
    if (!bytes)
        return;
    bytes[size] = '\0';
    /* the checksum's pair blanked with spaces, which JSON allows */
    char *pair = strstr((char *)bytes + 8, "\"cuttle_checksum\":\"xxh64:");
    CHECK(pair != NULL && (size_t)((unsigned char *)pair - bytes) < data_start(bytes),
          "no checksum in the header");
    if (pair) {
        memset(pair, ' ', strlen("\"cuttle_checksum\":\"xxh64:0123456789abcdef\""));
        CHECK(write_file(plain, bytes, size), "write %s", plain);
        CHECK_OK(ct_plan_load(other.plan, plain, CT_SAVE_MODEL));
        CHECK(same_state(&other, &n, false), "the file without a checksum loaded other values");
    }
    free(bytes);
    net_free(&n);
    net_free(&other);
}

/* A child saves over and over; killing it at any moment must leave a
 * complete checkpoint (the old or the new) at the path. */
/* Temporary files of a checkpoint name in the temp folder ("<name>.tmp.<pid>"). */
static int temp_files(const char *name)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s.tmp.", name);
    int count = 0;
    DIR *dir = opendir(temp_dir);
    for (struct dirent *entry; dir && (entry = readdir(dir));)
        count += strncmp(entry->d_name, prefix, strlen(prefix)) == 0;
    if (dir)
        closedir(dir);
    return count;
}

static void killed_save_leaves_a_valid_file(void)
{
    char path[128];
    path_in_temp(path, sizeof path, "atomic.safetensors");
    net n;
    CHECK(net_new(&n, CLASSES, true, 1), "%s", ct_last_error());
    CHECK_OK(ct_plan_save(n.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL));
    for (int round = 0; round < KILL_ROUNDS; round++) {
        fflush(NULL);
        pid_t child = fork();
        if (child == 0) {
            for (;;) {
                if (ct_plan_save(n.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL) !=
                    CT_OK)
                    _exit(1);
            }
        }
        struct timespec pause = {0, 2000000L * (round + 1)};
        nanosleep(&pause, NULL);
        kill(child, SIGKILL);
        int wstatus = 0;
        waitpid(child, &wstatus, 0);
        CHECK(WIFSIGNALED(wstatus), "the saving child stopped by itself");
        ct_status status = ct_plan_load(n.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER);
        CHECK(status == CT_OK, "round %d: the checkpoint is broken after a kill: %s", round,
              ct_last_error());
    }
    /* the killed children's temporaries go with the next save; a live
     * process's (here: a sleeping child pretending to save) stays */
    pid_t sleeper = fork();
    if (sleeper == 0) {
        pause();
        _exit(0);
    }
    char live[160];
    snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)sleeper);
    FILE *file = fopen(live, "wb");
    if (file)
        fclose(file);
    CHECK_OK(ct_plan_save(n.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL));
    CHECK(temp_files("atomic.safetensors") == 1 && access(live, F_OK) == 0,
          "%d temporary files after a save (the live one only should stay)",
          temp_files("atomic.safetensors"));
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
    remove(live);
    net_free(&n);
}

/* A disk that fills up at any byte of a save: the save says so, the
 * previous checkpoint is intact and loads, no temporary file is left. */
static void full_disk_keeps_the_previous_checkpoint(void)
{
    char path[128];
    path_in_temp(path, sizeof path, "full.safetensors");
    net a, b;
    CHECK(net_new(&a, CLASSES, true, 1) && net_new(&b, CLASSES, true, 2), "%s",
          ct_last_error());
    CHECK_OK(ct_plan_save(a.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL));
    struct stat info;
    CHECK(stat(path, &info) == 0, "no checkpoint");
    size_t total = (size_t)info.st_size;
    size_t cuts[] = {0, 1, 8, 100, total / 2, total - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        ct_io_fail_writes_after(cuts[c]);
        ct_status status = ct_plan_save(b.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, 0, NULL);
        ct_io_fail_writes_after(SIZE_MAX);
        CHECK(status == CT_ERR_IO && strstr(ct_last_error(), "No space left") &&
                  strstr(ct_last_error(), "unchanged"),
              "full after %zu bytes: %s: %s", cuts[c], ct_status_name(status), ct_last_error());
        CHECK(temp_files("full.safetensors") == 0, "full after %zu bytes: %d temporary files left",
              cuts[c], temp_files("full.safetensors"));
        CHECK_OK(ct_plan_load(b.plan, path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER));
        CHECK(same_state(&a, &b, true), "full after %zu bytes: the previous checkpoint changed",
              cuts[c]);
    }
    net_free(&a);
    net_free(&b);
}

int main(void)
{
    snprintf(temp_dir, sizeof temp_dir, "/tmp/cuttle-ckpt-XXXXXX");
    if (!mkdtemp(temp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(round_trip_continues_exactly);
    RUN(model_checkpoint_loads_into_eval_plan);
    RUN(mismatches_are_listed);
    RUN(unexpected_tensors_are_named);
    RUN(corrupt_files_are_refused);
    RUN(flipped_data_bits_are_refused);
    RUN(flipped_header_bits_never_load_other_weights);
    RUN(file_without_checksum_loads);
    RUN(killed_save_leaves_a_valid_file);
    RUN(full_disk_keeps_the_previous_checkpoint);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", temp_dir);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", temp_dir);
    return harness_finish();
}
