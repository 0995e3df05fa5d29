/*
 * The int8 model as a file (ct_quantized_save, ct_plan_load_quantized):
 * SimpleCNN and vgg8_bn (random weights, batchnorms folded) quantized,
 * saved and loaded into a plan of the same definition with other weights
 * give the logits of the in-memory int8 plan bit for bit, with the same
 * layers int8 and the same input scales; the file holds what
 * docs/quantization.md says.  Bad files are refused with a message naming
 * the problem: a truncated or corrupt file, a missing, unexpected or
 * misshapen tensor, a scale that is zero, negative, NaN or infinite, a file
 * that is not an int8 model or of another model, and (where the build has
 * one) a CUDA plan.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "io/safetensors.h"
#include "tmpdir.h"

enum { CALIB_BATCHES = 3, TEST_BATCHES = 3, BATCH = 8 };

static uint32_t rng_state = 77;

static float uniform(float lo, float hi)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(rng_state >> 8) / 16777216.0f;
}

static float *random_batch(int64_t n)
{
    float *batch = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        batch[i] = uniform(-1.0f, 1.0f);
    return batch;
}

/* The backends the plans run on: they outlive every int8 plan. */
static ct_backend *cpu, *cuda;

/* The f32 model of a built-in definition; `seed` picks its weights. */
typedef struct model {
    ct_graph *graph;
    ct_tensor *x, *y;
    ct_plan *plan;
} model;

static void model_open(model *m, const char *name, ct_backend *backend, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    char *text = NULL;
    CHECK_OK(ct_model_source(name, &text));
    m->graph = ct_graph_new();
    m->x = ct_input(m->graph, "x", CT_F32, 4, (int64_t[]){BATCH, 1, 28, 28});
    m->y = ct_model_build(m->graph, text, m->x, 10);
    ct_tensor_keep(m->y);
    free(text);
    CHECK_OK(ct_graph_status(m->graph));
    CHECK_OK(ct_plan_new(m->graph, backend, seed, &m->plan));
}

static void model_close(model *m)
{
    ct_plan_free(m->plan);
    ct_graph_free(m->graph);
}

/* `name` quantized with `method` and saved to `path`; *q keeps the int8 plan. */
static void quantize_and_save(const char *name, ct_calib_method method, bool shallow,
                              const char *path, ct_quantized *q)
{
    model m;
    model_open(&m, name, cpu, 7);
    float *calib[CALIB_BATCHES];
    for (int b = 0; b < CALIB_BATCHES; b++)
        calib[b] = random_batch(ct_tensor_numel(m.x));
    ct_quantize_args args = {.method = method, .quantize_shallow = shallow};
    CHECK_OK(ct_plan_quantize(m.plan, m.x, m.y, &args, (const float *const *)calib,
                              CALIB_BATCHES, q));
    ct_meta meta[1] = {{"model_name", name}};
    CHECK_OK(ct_quantized_save(q, path, 1, meta));
    for (int b = 0; b < CALIB_BATCHES; b++)
        free(calib[b]);
    model_close(&m);
}

/* The int8 model of `path` on a fresh f32 plan of `name` with other weights. */
static ct_status load(const char *name, ct_backend *backend, const char *path, ct_quantized *q)
{
    model m;
    model_open(&m, name, backend, 12345);
    ct_checkpoint *checkpoint = NULL;
    ct_status status = ct_checkpoint_open(path, &checkpoint);
    if (status == CT_OK)
        status = ct_plan_load_quantized(m.plan, m.x, m.y, checkpoint, q);
    ct_checkpoint_close(checkpoint);
    model_close(&m); /* the int8 plan owns what it needs */
    return status;
}

static void logits_of(ct_quantized *q, const float *batch, float *out)
{
    CHECK_OK(ct_plan_write(q->plan, q->x, batch, ct_tensor_bytes(q->x)));
    CHECK_OK(ct_plan_run(q->plan, CT_EVAL));
    CHECK_OK(ct_plan_read(q->plan, q->y, out, ct_tensor_bytes(q->y)));
}

/* shallow: the first convolution int8 too, whose input (x) has a zero point
 * other than 0 */
static void round_trip(const char *name, ct_calib_method method, bool shallow)
{
    const char *path = tmpdir_path("%s-%s.safetensors", name, ct_calib_method_name(method));
    ct_quantized saved, loaded;
    quantize_and_save(name, method, shallow, path, &saved);
    CHECK_OK(load(name, cpu, path, &loaded));
    if (!saved.plan || !loaded.plan)
        return;
    CHECK(loaded.n_layers == saved.n_layers, "%d layers loaded, %d saved", loaded.n_layers,
          saved.n_layers);
    int n_int8 = 0;
    for (int k = 0; k < saved.n_layers && k < loaded.n_layers; k++) {
        const ct_quantize_layer *a = &saved.layers[k], *b = &loaded.layers[k];
        n_int8 += a->quantized;
        CHECK(a->quantized == b->quantized && strcmp(a->weight, b->weight) == 0 &&
                  a->in_scale == b->in_scale && a->in_zero_point == b->in_zero_point,
              "layer %s: int8 %d/%d, scale %g/%g, zero point %d/%d", a->name, a->quantized,
              b->quantized, (double)a->in_scale, (double)b->in_scale, a->in_zero_point,
              b->in_zero_point);
    }
    CHECK(n_int8 >= 2, "%s: only %d int8 layers", name, n_int8);
    CHECK(!shallow || (saved.layers[0].quantized && saved.layers[0].in_zero_point > 0),
          "%s: the first layer int8 with a zero point above 0", name);
    CHECK(loaded.args.method == method && loaded.calib_batches == CALIB_BATCHES &&
              loaded.calib_batch == BATCH,
          "calibration read back: %s, %d batches of %d", ct_calib_method_name(loaded.args.method),
          loaded.calib_batches, loaded.calib_batch);
    int64_t n = ct_tensor_numel(saved.y);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    for (int t = 0; t < TEST_BATCHES; t++) {
        float *batch = random_batch(ct_tensor_numel(saved.x));
        logits_of(&saved, batch, a);
        logits_of(&loaded, batch, b);
        int64_t first = -1;
        for (int64_t i = 0; i < n && first < 0; i++)
            if (memcmp(&a[i], &b[i], sizeof(float)) != 0)
                first = i;
        CHECK(first < 0, "%s batch %d: logit %lld is %.9g in memory, %.9g loaded", name, t,
              (long long)first, (double)a[first < 0 ? 0 : first], (double)b[first < 0 ? 0 : first]);
        free(batch);
    }
    free(a);
    free(b);
    ct_quantized_free(&saved);
    ct_quantized_free(&loaded);
}

static void simplecnn_round_trip(void)
{
    round_trip("simplecnn", CT_CALIB_PERCENTILE, false);
    round_trip("simplecnn", CT_CALIB_MINMAX, true);
}

static void vgg8_bn_round_trip(void)
{
    round_trip("vgg8_bn", CT_CALIB_ENTROPY, false);
}

/* What the file holds: names, dtypes, shapes, metadata (docs/quantization.md). */
static void file_holds_the_format(void)
{
    const char *path = tmpdir_path("format.safetensors");
    ct_quantized q;
    quantize_and_save("simplecnn", CT_CALIB_PERCENTILE, false, path, &q);
    ct_quantized_free(&q);
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    if (!file)
        return;
    struct {
        const char *name;
        ct_dtype dtype;
        int ndim;
        int64_t shape[4];
    } want[] = {
        {"conv1.weight", CT_F32, 4, {6, 1, 5, 5}},  /* shallow: f32 */
        {"conv2.weight", CT_I8, 4, {16, 6, 5, 5}},
        {"conv2.weight_scale", CT_F32, 1, {16}},
        {"conv2.input_scale", CT_F32, 0, {0}},
        {"conv2.input_zero_point", CT_U8, 0, {0}},
        {"conv2.bias", CT_F32, 1, {16}},
        {"fc1.weight", CT_I8, 2, {120, 256}},
        {"fc3.weight", CT_F32, 2, {10, 84}},        /* the classifier: f32 */
        {"fc3.bias", CT_F32, 1, {10}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ct_st_tensor *t = ct_st_find(file, want[i].name);
        CHECK(t && t->dtype == want[i].dtype && t->ndim == want[i].ndim &&
                  memcmp(t->shape, want[i].shape, sizeof(int64_t) * (size_t)t->ndim) == 0,
              "%s: %s", want[i].name, t ? ct_dtype_name(t->dtype) : "missing");
    }
    CHECK(ct_st_count(file) == 19, "%d tensors", ct_st_count(file));
    const char *meta[][2] = {{"quantization", "int8"}, {"calibration", "percentile"},
                             {"calibration_percentile", "99.99"},
                             {"calibration_batches", "3"}, {"calibration_batch", "8"},
                             {"model_name", "simplecnn"}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        const char *value = ct_st_metadata(file, meta[i][0]);
        CHECK(value && strcmp(value, meta[i][1]) == 0, "metadata %s: %s", meta[i][0],
              value ? value : "missing");
    }
    const ct_st_tensor *scales = ct_st_find(file, "conv2.weight_scale");
    for (int64_t o = 0; scales && o < 16; o++)
        CHECK(((const float *)scales->data)[o] > 0, "conv2 scale %lld", (long long)o);
    ct_st_free(file);
}

/* ---- bad files ------------------------------------------------------------------------ */

typedef enum edit {
    EDIT_NAN_SCALE, EDIT_NEGATIVE_SCALE, EDIT_ZERO_INPUT_SCALE, EDIT_INF_INPUT_SCALE,
    EDIT_DROP_ZERO_POINT, EDIT_DROP_BIAS, EDIT_EXTRA, EDIT_SCALE_SHAPE, EDIT_ZERO_POINT_DTYPE,
    EDIT_NO_CALIBRATION, EDIT_COUNT
} edit;

/* A copy of the int8 file `from` at `to` with one thing broken. */
static void rewrite(const char *from, const char *to, edit e)
{
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(from, &file));
    if (!file)
        return;
    int n = ct_st_count(file), kept = 0;
    ct_st_tensor *tensors = calloc((size_t)n + 1, sizeof *tensors);
    void **copies = calloc((size_t)n + 1, sizeof *copies);
    for (int i = 0; i < n; i++) {
        ct_st_tensor t = *ct_st_get(file, i);
        if ((e == EDIT_DROP_ZERO_POINT && strcmp(t.name, "fc1.input_zero_point") == 0) ||
            (e == EDIT_DROP_BIAS && strcmp(t.name, "conv2.bias") == 0))
            continue;
        copies[i] = malloc(t.bytes + 1);
        memcpy(copies[i], t.data, t.bytes);
        t.data = copies[i];
        if (strcmp(t.name, "conv2.weight_scale") == 0) {
            if (e == EDIT_NAN_SCALE)
                ((float *)copies[i])[3] = NAN;
            if (e == EDIT_NEGATIVE_SCALE)
                ((float *)copies[i])[0] = -0.5f;
            if (e == EDIT_SCALE_SHAPE)
                t.shape[0] = 8, t.bytes = 8 * sizeof(float);
        }
        if (strcmp(t.name, "fc2.input_scale") == 0 && e == EDIT_ZERO_INPUT_SCALE)
            ((float *)copies[i])[0] = 0.0f;
        if (strcmp(t.name, "fc2.input_scale") == 0 && e == EDIT_INF_INPUT_SCALE)
            ((float *)copies[i])[0] = INFINITY;
        if (strcmp(t.name, "conv2.input_zero_point") == 0 && e == EDIT_ZERO_POINT_DTYPE)
            t.dtype = CT_I8;
        tensors[kept++] = t;
    }
    static const float extra = 1.0f;
    if (e == EDIT_EXTRA)
        tensors[kept++] = (ct_st_tensor){.name = "fc9.input_scale", .dtype = CT_F32, .ndim = 0,
                                         .data = &extra, .bytes = sizeof extra};
    const char *keys[] = {"quantization", "calibration", "calibration_batches"};
    const char *values[3];
    for (int k = 0; k < 3; k++)
        values[k] = ct_st_metadata(file, keys[k]);
    CHECK_OK(ct_st_save(to, kept, tensors, e == EDIT_NO_CALIBRATION ? 1 : 3, keys, values));
    for (int i = 0; i < n; i++)
        free(copies[i]);
    free(copies);
    free(tensors);
    ct_st_free(file);
}

static void expect_refused(const char *path, const char *name, ct_status want,
                           const char *needle, const char *what)
{
    ct_quantized q = {.graph = (ct_graph *)1};
    ct_status got = load(name, cpu, path, &q);
    CHECK(got == want && strstr(ct_last_error(), needle), "%s: %s, message '%s'", what,
          ct_status_name(got), ct_last_error());
    CHECK(!q.graph && !q.plan && !q.layers, "%s: *out zeroed", what);
}

static void bad_files_refused(void)
{
    const char *good = tmpdir_path("good.safetensors");
    ct_quantized q;
    quantize_and_save("simplecnn", CT_CALIB_MINMAX, false, good, &q);
    ct_quantized_free(&q);
    static const struct {
        edit e;
        const char *needle;
    } cases[EDIT_COUNT] = {
        {EDIT_NAN_SCALE, "'conv2.weight_scale' holds nan at 3: a scale must be finite and positive"},
        {EDIT_NEGATIVE_SCALE, "'conv2.weight_scale' holds -0.5 at 0"},
        {EDIT_ZERO_INPUT_SCALE, "'fc2.input_scale' holds 0 at 0"},
        {EDIT_INF_INPUT_SCALE, "'fc2.input_scale' holds inf at 0"},
        {EDIT_DROP_ZERO_POINT, "missing: 'fc1.input_zero_point' (u8)"},
        {EDIT_DROP_BIAS, "missing: 'conv2.bias' (f32)"},
        {EDIT_EXTRA, "unexpected: 'fc9.input_scale'"},
        {EDIT_SCALE_SHAPE, "shape of 'conv2.weight_scale': the model needs [16], the file has [8]"},
        {EDIT_ZERO_POINT_DTYPE, "dtype of 'conv2.input_zero_point': the model needs u8, the file has i8"},
        {EDIT_NO_CALIBRATION, "metadata 'calibration' is missing"},
    };
    for (int c = 0; c < EDIT_COUNT; c++) {
        const char *path = tmpdir_path("bad-%d.safetensors", c);
        rewrite(good, path, cases[c].e);
        expect_refused(path, "simplecnn", CT_ERR_FORMAT, cases[c].needle, cases[c].needle);
    }
    /* another model's int8 file */
    expect_refused(good, "vgg8_bn", CT_ERR_FORMAT, "does not fit this model as an int8 model",
                   "simplecnn's file into vgg8_bn");
    /* an fp32 checkpoint */
    model m;
    model_open(&m, "simplecnn", cpu, 3);
    const char *fp32 = tmpdir_path("fp32.safetensors");
    CHECK_OK(ct_plan_save(m.plan, fp32, CT_SAVE_MODEL, 0, NULL));
    model_close(&m);
    expect_refused(fp32, "simplecnn", CT_ERR_ARG, "is not an int8 model", "an fp32 file");
    /* truncated: every cut is refused when opened, nothing crashes */
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *bytes = malloc((size_t)size);
    CHECK(fread(bytes, 1, (size_t)size, f) == (size_t)size, "read %s", good);
    fclose(f);
    const char *cut = tmpdir_path("cut.safetensors");
    int refused = 0, cuts = 0;
    for (long length = 0; length < size; length += 1 + length / 7, cuts++) {
        tmpdir_write(cut, bytes, (size_t)length);
        ct_checkpoint *checkpoint = NULL;
        ct_status status = ct_checkpoint_open(cut, &checkpoint);
        refused += status == CT_ERR_FORMAT || status == CT_ERR_IO;
        ct_checkpoint_close(checkpoint);
    }
    CHECK(refused == cuts, "%d of %d truncations refused", refused, cuts);
    /* flipped bytes in the header and the data: refused or loaded, never a crash */
    int loaded = 0;
    for (long at = 0; at < size; at += 1 + at / 3) {
        bytes[at] ^= 0x5a;
        tmpdir_write(cut, bytes, (size_t)size);
        bytes[at] ^= 0x5a;
        ct_quantized flipped;
        if (load("simplecnn", cpu, cut, &flipped) == CT_OK) {
            loaded++;
            ct_quantized_free(&flipped);
        }
    }
    printf("  (%d of the flipped files still load: a flip in a weight or bias is a valid file)\n",
           loaded);
    free(bytes);
}

static void bad_calls_refused(void)
{
    ct_quantized q;
    const char *path = tmpdir_path("calls.safetensors");
    quantize_and_save("simplecnn", CT_CALIB_MINMAX, false, path, &q);
    CHECK(ct_plan_load(q.plan, path, CT_SAVE_MODEL) == CT_ERR_FORMAT &&
              strstr(ct_last_error(), "is an int8 model (cuttle quantize -o), not fp32 weights"),
          "an int8 file as fp32 weights: %s", ct_last_error());
    ct_meta clash[1] = {{"quantization", "fp32"}};
    CHECK(ct_quantized_save(&q, tmpdir_path("clash.safetensors"), 1, clash) == CT_ERR_ARG &&
              strstr(ct_last_error(), "quantization"),
          "a caller's 'quantization' key: %s", ct_last_error());
    CHECK(ct_quantized_save(NULL, path, 0, NULL) == CT_ERR_ARG, "no model");
    CHECK(ct_quantized_save(&q, NULL, 0, NULL) == CT_ERR_ARG, "no path");
    ct_quantized_free(&q);
    CHECK(ct_quantized_save(&q, path, 0, NULL) == CT_ERR_ARG, "a freed model");
    CHECK(ct_plan_load_quantized(NULL, NULL, NULL, NULL, &q) == CT_ERR_ARG, "no plan");
    CHECK(ct_plan_load_quantized(NULL, NULL, NULL, NULL, NULL) == CT_ERR_ARG, "no out");
    if (!cuda) {
        printf("  (no cuda device here: the other-backend refusal is not run)\n");
        return;
    }
    ct_status status = load("simplecnn", cuda, path, &q);
    CHECK(status == CT_ERR_UNSUPPORTED && strstr(ct_last_error(), "cpu backend only") &&
              strstr(ct_last_error(), "cuda"),
          "a cuda plan: %s", ct_last_error());
}

int main(void)
{
    tmpdir_create("quantize-save");
    CHECK_OK(ct_backend_new("cpu", &cpu));
    if (ct_backend_new("cuda", &cuda) != CT_OK)
        cuda = NULL;
    RUN(simplecnn_round_trip);
    RUN(vgg8_bn_round_trip);
    RUN(file_holds_the_format);
    RUN(bad_files_refused);
    RUN(bad_calls_refused);
    tmpdir_remove();
    ct_backend_free(cuda);
    ct_backend_free(cpu);
    return harness_finish();
}
