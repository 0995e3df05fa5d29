/*
 * What the checkpoint checksum costs: a model's checkpoint (default
 * ResNet-18 for CIFAR-10, 44.7 MB) saved and loaded, medians of N rounds,
 * beside the checksum (XXH64, io/checksum.h) of its data section alone.
 * One JSON line (medians, and the fastest round: on a shared machine, the
 * one least disturbed); docs/reliability.md keeps the figures.
 *   checkpoint_io [--model NAME] [--rounds N] [--path FILE]
 * The save includes its fsyncs; the load reads the file from the page cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "io/checksum.h"
#include "timing.h"

#define MAX_ROUNDS 101

static void die(const char *what)
{
    fprintf(stderr, "checkpoint_io: %s: %s\n", what, ct_last_error());
    exit(1);
}

static double median(double *times, int n)
{
    qsort(times, (size_t)n, sizeof *times, compare_doubles);
    return times[n / 2];
}

/* The data section of the safetensors file at path (malloc'd), its size in *bytes. */
static unsigned char *read_data_section(const char *path, size_t *bytes)
{
    FILE *file = fopen(path, "rb");
    unsigned char prefix[8];
    if (!file || fread(prefix, 1, 8, file) != 8)
        die("reading the saved file");
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | prefix[i];
    fseek(file, 0, SEEK_END);
    *bytes = (size_t)ftell(file) - 8 - (size_t)header;
    fseek(file, (long)(8 + header), SEEK_SET);
    unsigned char *data = malloc(*bytes);
    if (!data || fread(data, 1, *bytes, file) != *bytes)
        die("reading the data section");
    fclose(file);
    return data;
}

int main(int argc, char **argv)
{
    const char *model = "resnet18", *path = "/tmp/checkpoint_io.safetensors";
    int rounds = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--model") == 0) model = argv[i + 1];
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--path") == 0) path = argv[i + 1];
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || !ct_model_builtin(model)) {
        fprintf(stderr, "checkpoint_io: --model is a built-in model, --rounds 1 to %d\n",
                MAX_ROUNDS);
        return 2;
    }
    ct_graph *graph = ct_graph_new();
    int64_t shape[4] = {1, 3, 32, 32};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, shape);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    if (!ct_model_build(graph, ct_model_builtin(model), x, 10) ||
        ct_backend_new("cpu:1", &backend) != CT_OK || ct_plan_new(graph, backend, 1, &plan) != CT_OK)
        die("building the model");
    double save[MAX_ROUNDS], load[MAX_ROUNDS], hash[MAX_ROUNDS];
    size_t bytes = 0;
    for (int r = 0; r < rounds; r++) {
        double start = now_seconds();
        if (ct_plan_save(plan, path, CT_SAVE_MODEL, 0, NULL) != CT_OK)
            die("saving");
        save[r] = now_seconds() - start;
        start = now_seconds();
        if (ct_plan_load(plan, path, CT_SAVE_MODEL) != CT_OK)
            die("loading");
        load[r] = now_seconds() - start;
        unsigned char *data = read_data_section(path, &bytes);
        start = now_seconds();
        volatile uint64_t sum = ct_xxh64(data, bytes, 0);
        hash[r] = now_seconds() - start;
        (void)sum;
        free(data);
    }
    double hash_s = median(hash, rounds), save_s = median(save, rounds),
           load_s = median(load, rounds); /* sorted by median() */
    printf("{\"model\": \"%s\", \"data_bytes\": %zu, \"rounds\": %d, \"save_ms\": %.2f, "
           "\"load_ms\": %.2f, \"xxh64_ms\": %.2f, \"xxh64_gb_per_s\": %.2f, "
           "\"fastest_save_ms\": %.2f, \"fastest_load_ms\": %.2f, \"fastest_xxh64_ms\": %.2f}\n",
           model, bytes, rounds, 1e3 * save_s, 1e3 * load_s, 1e3 * hash_s,
           (double)bytes / hash_s / 1e9, 1e3 * save[0], 1e3 * load[0], 1e3 * hash[0]);
    remove(path);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    return 0;
}
