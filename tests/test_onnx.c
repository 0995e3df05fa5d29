/*
 * ONNX export and import (docs/onnx.md): models round-trip through a file
 * with the same outputs, hand-written files exercise the importer's ops
 * (MatMul + Add as a linear layer, the shape computation torch.onnx writes
 * for x.view(x.size(0), -1), external data), and broken files (every
 * truncation, every flipped byte, lying lengths, absurd sizes, a nesting
 * bomb) are refused with an error, never a crash.  The checks against the
 * real tools (the ONNX checker, ONNX Runtime, torch.onnx) are in
 * tests/test_onnx_*.sh.
 */
#include <dirent.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "io/protobuf.h"
#include "tmpdir.h"

#define ROUNDTRIP_RTOL 1e-5

/* ---- hand-written ONNX files ------------------------------------------------------- */

typedef struct hand {
    pb_writer w;
    size_t graph;
} hand;

static void hand_begin(hand *h, int opset)
{
    *h = (hand){0};
    pb_put_varint(&h->w, 1, 7); /* ir_version */
    size_t mark = pb_begin(&h->w, 8);
    pb_put_varint(&h->w, 2, (uint64_t)opset);
    pb_end(&h->w, mark);
    h->graph = pb_begin(&h->w, 7);
}

/* Begin a node (attributes may follow; pb_end ends it). */
static size_t hand_node_begin(hand *h, const char *op, int n_in, const char *const *in,
                              const char *out)
{
    size_t mark = pb_begin(&h->w, 1);
    for (int i = 0; i < n_in; i++)
        pb_put_string(&h->w, 1, in[i]);
    pb_put_string(&h->w, 2, out);
    pb_put_string(&h->w, 3, out); /* the node's name: its output's */
    pb_put_string(&h->w, 4, op);
    return mark;
}

static void hand_node(hand *h, const char *op, int n_in, const char *const *in, const char *out)
{
    pb_end(&h->w, hand_node_begin(h, op, n_in, in, out));
}

static void hand_attr_ints(hand *h, const char *name, int n, const int64_t *values)
{
    size_t mark = pb_begin(&h->w, 5);
    pb_put_string(&h->w, 1, name);
    pb_put_packed_varints(&h->w, 8, values, n);
    pb_put_varint(&h->w, 20, 7);
    pb_end(&h->w, mark);
}

static void hand_attr_int(hand *h, const char *name, int64_t value)
{
    size_t mark = pb_begin(&h->w, 5);
    pb_put_string(&h->w, 1, name);
    pb_put_varint(&h->w, 3, (uint64_t)value);
    pb_put_varint(&h->w, 20, 2);
    pb_end(&h->w, mark);
}

static void hand_attr_string(hand *h, const char *name, const char *value)
{
    size_t mark = pb_begin(&h->w, 5);
    pb_put_string(&h->w, 1, name);
    pb_put_string(&h->w, 4, value);
    pb_put_varint(&h->w, 20, 3);
    pb_end(&h->w, mark);
}

/* An initializer of float32 (data_type 1) or int64 (7) values. */
static void hand_init(hand *h, const char *name, int data_type, int ndim, const int64_t *dims,
                      const void *data, size_t bytes)
{
    size_t mark = pb_begin(&h->w, 5);
    pb_put_packed_varints(&h->w, 1, dims, ndim);
    pb_put_varint(&h->w, 2, (uint64_t)data_type);
    pb_put_string(&h->w, 8, name);
    pb_put_bytes(&h->w, 9, data, bytes);
    pb_end(&h->w, mark);
}

/* A float graph input (field 11) or output (12); a dim of -1 is "N". */
static void hand_value(hand *h, uint32_t field, const char *name, int ndim, const int64_t *dims)
{
    size_t value = pb_begin(&h->w, field);
    pb_put_string(&h->w, 1, name);
    size_t type = pb_begin(&h->w, 2), tensor = pb_begin(&h->w, 1);
    pb_put_varint(&h->w, 1, 1);
    size_t shape = pb_begin(&h->w, 2);
    for (int d = 0; d < ndim; d++) {
        size_t dim = pb_begin(&h->w, 1);
        if (dims[d] < 0)
            pb_put_string(&h->w, 2, "N");
        else
            pb_put_varint(&h->w, 1, (uint64_t)dims[d]);
        pb_end(&h->w, dim);
    }
    pb_end(&h->w, shape);
    pb_end(&h->w, tensor);
    pb_end(&h->w, type);
    pb_end(&h->w, value);
}

static const char *hand_save(hand *h, const char *name)
{
    pb_end(&h->w, h->graph);
    CHECK(!h->w.failed, "the writer failed");
    const char *path = tmpdir_path("%s", name);
    tmpdir_write(path, h->w.data, h->w.length);
    pb_writer_free(&h->w);
    return path;
}

/* ---- running models ---------------------------------------------------------------- */

/* Outputs of an ONNX model on n images x (C*H*W floats each). */
static ct_status run_onnx(const char *path, int n, const float *x, float *out)
{
    ct_onnx *model = NULL;
    ct_status status = ct_onnx_load(path, &model);
    if (status != CT_OK)
        return status;
    int64_t shape[4];
    ct_onnx_input_shape(model, shape);
    shape[0] = n;
    ct_graph *graph = ct_graph_new();
    ct_tensor *input = ct_input(graph, "x", CT_F32, 4, shape);
    ct_tensor *y = ct_onnx_build(graph, model, input);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    status = ct_graph_status(graph);
    if (status == CT_OK) {
        ct_tensor_keep(y);
        status = ct_backend_new("cpu:1", &backend);
    }
    if (status == CT_OK)
        status = ct_plan_new(graph, backend, 1, &plan);
    if (status == CT_OK)
        status = ct_plan_load_onnx(plan, model);
    if (status == CT_OK)
        status = ct_plan_write(plan, input, x, ct_tensor_bytes(input));
    if (status == CT_OK)
        status = ct_plan_run(plan, CT_EVAL);
    if (status == CT_OK)
        status = ct_plan_read(plan, y, out, ct_tensor_bytes(y));
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    ct_onnx_free(model);
    return status;
}

static float fill_value(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*state >> 40) * 0x1p-24 * 2.0 - 1.0);
}

static void fill(float *data, int64_t n, uint64_t seed)
{
    for (int64_t i = 0; i < n; i++)
        data[i] = fill_value(&seed);
}

static double max_relative_error(const float *a, const float *b, int64_t n)
{
    double worst = 0, scale = 1;
    for (int64_t i = 0; i < n; i++)
        scale = fabs(b[i]) > scale ? fabs(b[i]) : scale;
    for (int64_t i = 0; i < n; i++)
        worst = fabs(a[i] - b[i]) / scale > worst ? fabs(a[i] - b[i]) / scale : worst;
    return worst;
}

/* ---- round trips of the built-in models -------------------------------------------------- */

typedef struct built {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    ct_tensor *x, *y;
} built;

static void built_free(built *b)
{
    ct_plan_free(b->plan);
    ct_backend_free(b->backend);
    ct_graph_free(b->graph);
}

/* A built-in model on a batch of n, with seeded weights and, for its
 * batchnorm layers, running statistics that are not the identity. */
static bool build_builtin(const char *name, const int64_t shape[4], built *b)
{
    char *text = NULL;
    CHECK_OK(ct_model_source(name, &text));
    b->graph = ct_graph_new();
    b->x = ct_input(b->graph, "x", CT_F32, 4, shape);
    b->y = ct_model_build(b->graph, text, b->x, 10);
    free(text);
    CHECK_OK(ct_graph_status(b->graph));
    if (ct_graph_status(b->graph) != CT_OK)
        return false;
    ct_tensor_keep(b->y);
    CHECK_OK(ct_backend_new("cpu:1", &b->backend));
    CHECK_OK(ct_plan_new(b->graph, b->backend, 7, &b->plan));
    for (int i = 0; i < ct_graph_n_state(b->graph); i++) {
        ct_tensor *t = ct_graph_state(b->graph, i);
        const char *tname = ct_tensor_name(t);
        bool mean = strstr(tname, "running_mean") != NULL;
        if (!mean && !strstr(tname, "running_var"))
            continue;
        int64_t n = ct_tensor_numel(t);
        float *values = malloc(sizeof *values * (size_t)n);
        fill(values, n, (uint64_t)i + 11);
        for (int64_t k = 0; !mean && k < n; k++)
            values[k] = 1.0f + 0.5f * values[k]; /* variances in [0.5, 1.5] */
        CHECK_OK(ct_plan_write(b->plan, t, values, ct_tensor_bytes(t)));
        free(values);
    }
    return true;
}

/* Export each model with a dynamic batch at 2, import it at a batch of 3
 * whose first two images are the same: the same outputs. */
static void roundtrip_builtin_models(void)
{
    static const struct {
        const char *name;
        int64_t c, h, w;
    } models[] = {{"simplecnn", 1, 28, 28}, {"lenet5", 1, 28, 28}, {"vgg8_bn", 3, 32, 32},
                  {"resnet18", 3, 32, 32}};
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        int64_t shape[4] = {2, models[m].c, models[m].h, models[m].w};
        built b = {0};
        if (!build_builtin(models[m].name, shape, &b)) {
            built_free(&b);
            continue;
        }
        int64_t image = shape[1] * shape[2] * shape[3];
        float *x = malloc(sizeof *x * (size_t)(3 * image)), expected[20], got[30];
        fill(x, 3 * image, 5);
        CHECK_OK(ct_plan_write(b.plan, b.x, x, ct_tensor_bytes(b.x)));
        CHECK_OK(ct_plan_run(b.plan, CT_EVAL));
        CHECK_OK(ct_plan_read(b.plan, b.y, expected, sizeof expected));
        const char *path = tmpdir_path("%s.onnx", models[m].name);
        ct_onnx_export_args args = {.opset = 13 + (int)m, .model_name = models[m].name};
        CHECK_OK(ct_onnx_export(b.plan, b.x, b.y, &args, path));
        CHECK_OK(run_onnx(path, 3, x, got));
        double error = max_relative_error(got, expected, 20);
        CHECK(error <= ROUNDTRIP_RTOL, "%s: relative error %g", models[m].name, error);
        /* a fixed batch refuses another */
        args.fixed_batch = true;
        CHECK_OK(ct_onnx_export(b.plan, b.x, b.y, &args, path));
        ct_status status = run_onnx(path, 3, x, got);
        CHECK(status == CT_ERR_SHAPE && strstr(ct_last_error(), "fixed batch"), "%s: %s",
              ct_status_name(status), ct_last_error());
        CHECK_OK(run_onnx(path, 2, x, got));
        free(x);
        built_free(&b);
    }
}

/* The metadata a caller gives is in the file; the input shape is the
 * file's with the batch 0 when dynamic; softmax ends the graph. */
static void export_metadata_and_softmax(void)
{
    int64_t shape[4] = {2, 1, 28, 28};
    built b = {0};
    if (!build_builtin("simplecnn", shape, &b))
        return;
    const char *path = tmpdir_path("meta.onnx");
    ct_meta meta[1] = {{"mean", "[0.286]"}};
    ct_onnx_export_args args = {.softmax = true, .model_name = "simplecnn", .n_meta = 1,
                                .meta = meta};
    CHECK_OK(ct_onnx_export(b.plan, b.x, b.y, &args, path));
    ct_onnx *model = NULL;
    CHECK_OK(ct_onnx_load(path, &model));
    if (model) {
        int64_t input[4];
        ct_onnx_input_shape(model, input);
        CHECK(input[0] == 0 && input[1] == 1 && input[2] == 28 && input[3] == 28,
              "input [%lld, %lld, %lld, %lld]", (long long)input[0], (long long)input[1],
              (long long)input[2], (long long)input[3]);
        CHECK(ct_onnx_classes(model) == 10, "classes %lld", (long long)ct_onnx_classes(model));
        CHECK(ct_onnx_meta(model, "mean") && strcmp(ct_onnx_meta(model, "mean"), "[0.286]") == 0,
              "mean metadata");
        CHECK(ct_onnx_meta(model, "model_name") &&
                  strcmp(ct_onnx_meta(model, "model_name"), "simplecnn") == 0, "model_name");
        CHECK(ct_onnx_meta(model, "absent") == NULL, "absent key");
    }
    ct_onnx_free(model);
    float x[2 * 784], probabilities[20];
    fill(x, 2 * 784, 3);
    CHECK_OK(run_onnx(path, 2, x, probabilities));
    for (int row = 0; row < 2; row++) {
        double sum = 0;
        for (int c = 0; c < 10; c++)
            sum += probabilities[row * 10 + c];
        CHECK(fabs(sum - 1.0) < 1e-5, "row %d sums to %g", row, sum);
    }
    built_free(&b);
}

/* ---- hand-written graphs ------------------------------------------------------------------ */

/* y = x W + b as MatMul(x, W[4,3]) and Add(b[3]): one linear layer with W
 * transposed on load. */
static void matmul_add_is_a_linear_layer(void)
{
    float w[12], bias[3], x[8], y[6];
    fill(w, 12, 1);
    fill(bias, 3, 2);
    fill(x, 8, 3);
    hand h;
    hand_begin(&h, 13);
    int64_t w_dims[2] = {4, 3}, b_dims[1] = {3}, in_dims[4] = {-1, 1, 2, 2}, out_dims[2] = {-1, 3};
    hand_init(&h, "W", 1, 2, w_dims, w, sizeof w);
    hand_init(&h, "b", 1, 1, b_dims, bias, sizeof bias);
    hand_node(&h, "Flatten", 1, (const char *[]){"x"}, "flat");
    hand_node(&h, "MatMul", 2, (const char *[]){"flat", "W"}, "xw");
    hand_node(&h, "Add", 2, (const char *[]){"b", "xw"}, "y");
    hand_value(&h, 11, "x", 4, in_dims);
    hand_value(&h, 12, "y", 2, out_dims);
    const char *path = hand_save(&h, "matmul.onnx");
    CHECK_OK(run_onnx(path, 2, x, y));
    for (int n = 0; n < 2; n++)
        for (int o = 0; o < 3; o++) {
            double expected = bias[o];
            for (int i = 0; i < 4; i++)
                expected += (double)x[n * 4 + i] * w[i * 3 + o];
            CHECK(fabs(y[n * 3 + o] - expected) < 1e-5, "y[%d,%d] = %g, expected %g", n, o,
                  (double)y[n * 3 + o], expected);
        }
}

/* Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0), [0]), [-1])): the
 * shape torch.onnx computes for x.view(x.size(0), -1), folded at build. */
static void shape_computation_is_folded(void)
{
    float x[12], w[6] = {1, 2, 3, 4, 5, 6}, y[2];
    fill(x, 12, 4);
    hand h;
    hand_begin(&h, 14);
    int64_t zero = 0, minus_one = -1, one = 1, w_dims[2] = {6, 1}, in_dims[4] = {-1, 1, 2, 3};
    int64_t out_dims[2] = {-1, 1};
    hand_init(&h, "w", 1, 2, w_dims, w, sizeof w); /* Gemm's B without transB: [in, out] */
    hand_init(&h, "zero", 7, 0, NULL, &zero, sizeof zero);
    hand_init(&h, "axes", 7, 1, &one, &zero, sizeof zero);
    hand_init(&h, "rest", 7, 1, &one, &minus_one, sizeof minus_one);
    hand_node(&h, "Shape", 1, (const char *[]){"x"}, "shape");
    hand_node(&h, "Gather", 2, (const char *[]){"shape", "zero"}, "batch");
    hand_node(&h, "Unsqueeze", 2, (const char *[]){"batch", "axes"}, "batch1");
    hand_node(&h, "Concat", 2, (const char *[]){"batch1", "rest"}, "to");
    hand_node(&h, "Reshape", 2, (const char *[]){"x", "to"}, "flat");
    hand_node(&h, "Gemm", 2, (const char *[]){"flat", "w"}, "y");
    hand_value(&h, 11, "x", 4, in_dims);
    hand_value(&h, 12, "y", 2, out_dims);
    const char *path = hand_save(&h, "shape.onnx");
    CHECK_OK(run_onnx(path, 2, x, y));
    for (int n = 0; n < 2; n++) {
        double expected = 0;
        for (int i = 0; i < 6; i++)
            expected += (double)x[n * 6 + i] * w[i];
        CHECK(fabs(y[n] - expected) < 1e-5, "y[%d] = %g, expected %g", n, (double)y[n], expected);
    }
}

/* torch.onnx shares equal initializers: a default batchnorm's zero bias is
 * its zero running mean too, one initializer fed to a parameter input and
 * a buffer input.  Each gets a tensor of its own, both loaded. */
static void one_initializer_as_parameter_and_buffer(void)
{
    float scale[2] = {1.5f, 0.5f}, zeros[2] = {0, 0}, var[2] = {4.0f, 0.25f}, x[16], y[16];
    fill(x, 16, 6);
    hand h;
    hand_begin(&h, 14);
    int64_t two = 2, in_dims[4] = {-1, 2, 2, 2}, out_dims[2] = {-1, 8};
    hand_init(&h, "scale", 1, 1, &two, scale, sizeof scale);
    hand_init(&h, "zeros", 1, 1, &two, zeros, sizeof zeros);
    hand_init(&h, "var", 1, 1, &two, var, sizeof var);
    hand_node(&h, "BatchNormalization", 5,
              (const char *[]){"x", "scale", "zeros", "zeros", "var"}, "bn");
    hand_node(&h, "Flatten", 1, (const char *[]){"bn"}, "y");
    hand_value(&h, 11, "x", 4, in_dims);
    hand_value(&h, 12, "y", 2, out_dims);
    CHECK_OK(run_onnx(hand_save(&h, "shared.onnx"), 2, x, y));
    for (int i = 0; i < 16; i++) {
        int c = i / 4 % 2;
        double expected = scale[c] * x[i] / sqrt(var[c] + 1e-5);
        CHECK(fabs(y[i] - expected) < 1e-5, "y[%d] = %g, expected %g", i, (double)y[i], expected);
    }
}

/* ---- what is refused, and how ------------------------------------------------------------- */

/* x [N,1,2,2] -> op -> y; the op's attributes added by `attrs`. */
static const char *one_op_model(const char *name, int opset, const char *op,
                                void (*attrs)(hand *))
{
    hand h;
    hand_begin(&h, opset);
    int64_t dims[4] = {-1, 1, 2, 2};
    size_t node = hand_node_begin(&h, op, 1, (const char *[]){"x"}, "y");
    if (attrs)
        attrs(&h);
    pb_end(&h.w, node);
    hand_value(&h, 11, "x", 4, dims);
    hand_value(&h, 12, "y", 4, dims);
    return hand_save(&h, name);
}

static void same_upper(hand *h)
{
    int64_t kernel[2] = {2, 2};
    hand_attr_ints(h, "kernel_shape", 2, kernel);
    hand_attr_string(h, "auto_pad", "SAME_UPPER");
}

static void expect_refusal(const char *path, ct_status expected, const char *const *words)
{
    ct_onnx *model = NULL;
    ct_status status = ct_onnx_load(path, &model);
    CHECK(status == expected, "%s: %s, expected %s: %s", path, ct_status_name(status),
          ct_status_name(expected), ct_last_error());
    CHECK(model == NULL, "a refused model was handed out");
    for (int i = 0; words[i]; i++)
        CHECK(strstr(ct_last_error(), words[i]), "'%s' is not in: %s", words[i], ct_last_error());
    ct_onnx_free(model);
}

/* An op, an attribute, an opset outside what cuttle imports: refused at
 * load with the op, the node and the opset named. */
static void unsupported_ops_are_named(void)
{
    expect_refusal(one_op_model("elu.onnx", 13, "Elu", NULL), CT_ERR_UNSUPPORTED,
                   (const char *[]){"Elu", "opset 13", "node 0 'y'", NULL});
    expect_refusal(one_op_model("same.onnx", 14, "MaxPool", same_upper), CT_ERR_UNSUPPORTED,
                   (const char *[]){"MaxPool", "opset 14", "auto_pad SAME_UPPER", NULL});
    expect_refusal(one_op_model("old.onnx", 11, "Relu", NULL), CT_ERR_UNSUPPORTED,
                   (const char *[]){"opset 11", "13 to 17", NULL});
    expect_refusal(tmpdir_path("missing.onnx"), CT_ERR_IO,
                   (const char *[]){"missing.onnx", "cannot open", NULL});
    tmpdir_write(tmpdir_path("text.onnx"), "not a protobuf\n", 15);
    expect_refusal(tmpdir_path("text.onnx"), CT_ERR_FORMAT,
                   (const char *[]){"text.onnx", "not a valid ONNX file", NULL});
}

/* Every truncation and every flipped byte of a small model loads or fails
 * with a status, never crashes (run under AddressSanitizer in CI). */
static void truncated_and_corrupt_files_fail_cleanly(void)
{
    int64_t shape[4] = {1, 1, 8, 8};
    char *text = NULL;
    CHECK_OK(ct_model_source("simplecnn", &text));
    free(text);
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, shape);
    ct_conv_args conv = {0};
    ct_tensor *y = ct_layer_conv2d(graph, "conv", x, 2, 3, 3, conv, true);
    y = ct_relu(graph, y);
    y = ct_layer_batchnorm2d(graph, "bn", y);
    y = ct_layer_linear(graph, "fc", ct_flatten(graph, y), 3, true);
    CHECK_OK(ct_graph_status(graph));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu:1", &backend));
    CHECK_OK(ct_plan_new(graph, backend, 1, &plan));
    const char *path = tmpdir_path("small.onnx");
    CHECK_OK(ct_onnx_export(plan, x, y, NULL, path));
    FILE *file = fopen(path, "rb");
    static uint8_t bytes[8192];
    size_t length = file ? fread(bytes, 1, sizeof bytes, file) : 0;
    if (file)
        fclose(file);
    CHECK(length > 100 && length < sizeof bytes, "the small model has %zu bytes", length);
    const char *cut = tmpdir_path("cut.onnx");
    int loaded = 0, refused = 0;
    for (size_t n = 0; n < length; n++) {
        tmpdir_write(cut, bytes, n);
        ct_onnx *model = NULL;
        ct_status status = ct_onnx_load(cut, &model);
        CHECK(status != CT_ERR_INTERNAL && status != CT_ERR_MEMORY, "cut at %zu: %s", n,
              ct_last_error());
        loaded += status == CT_OK;
        refused += status != CT_OK;
        ct_onnx_free(model);
    }
    for (size_t i = 0; i < length; i++) {
        bytes[i] ^= 0xff;
        tmpdir_write(cut, bytes, length);
        ct_onnx *model = NULL;
        ct_status status = ct_onnx_load(cut, &model);
        CHECK(status != CT_ERR_INTERNAL, "byte %zu flipped: %s", i, ct_last_error());
        ct_onnx_free(model);
        bytes[i] ^= 0xff;
    }
    CHECK(refused > (int)length / 2, "only %d of %zu truncations refused", refused, length);
    (void)loaded;
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
}

/* A length past the end, a varint of 11 bytes, a tensor of 2^80 elements:
 * each refused with what is wrong, nothing allocated by the field's word. */
static void lying_lengths_and_absurd_sizes(void)
{
    const char *path = tmpdir_path("lie.onnx");
    uint8_t lying[] = {0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x0a}; /* graph: 2^42 bytes */
    tmpdir_write(path, lying, sizeof lying);
    expect_refusal(path, CT_ERR_FORMAT, (const char *[]){"claims more bytes", NULL});
    uint8_t long_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                             0x01};
    tmpdir_write(path, long_varint, sizeof long_varint);
    expect_refusal(path, CT_ERR_FORMAT, (const char *[]){"varint", NULL});
    uint8_t group[] = {0x0b}; /* field 1, wire type 3 */
    tmpdir_write(path, group, sizeof group);
    expect_refusal(path, CT_ERR_FORMAT, (const char *[]){"group", NULL});
    hand h;
    hand_begin(&h, 13);
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    float four[4] = {0};
    hand_init(&h, "w", 1, 2, huge, four, sizeof four);
    expect_refusal(hand_save(&h, "huge.onnx"), CT_ERR_FORMAT,
                   (const char *[]){"'w'", "absurd", NULL});
    hand_begin(&h, 13);
    int64_t dims[2] = {2, 3};
    hand_init(&h, "w", 1, 2, dims, four, sizeof four);
    expect_refusal(hand_save(&h, "short.onnx"), CT_ERR_FORMAT,
                   (const char *[]){"'w'", "16 bytes", "needs 24", NULL});
}

/* If-nodes nested 20000 deep: the decoder never descends into a subgraph,
 * so the depth cannot exhaust the stack; the If is refused by name. */
static void nesting_bomb_is_refused(void)
{
    pb_writer inner = {0};
    pb_put_string(&inner, 4, "If");
    for (int depth = 0; depth < 20000 && !inner.failed; depth++) {
        pb_writer outer = {0};
        size_t attr = pb_begin(&outer, 5);
        pb_put_string(&outer, 1, "then_branch");
        size_t graph = pb_begin(&outer, 6);
        pb_put_bytes(&outer, 1, inner.data, inner.length); /* a node of the subgraph */
        pb_end(&outer, graph);
        pb_end(&outer, attr);
        pb_put_string(&outer, 4, "If");
        pb_writer_free(&inner);
        inner = outer;
    }
    hand h;
    hand_begin(&h, 13);
    pb_put_bytes(&h.w, 1, inner.data, inner.length);
    pb_writer_free(&inner);
    int64_t dims[4] = {-1, 1, 2, 2};
    hand_value(&h, 11, "x", 4, dims);
    hand_value(&h, 12, "y", 4, dims);
    expect_refusal(hand_save(&h, "bomb.onnx"), CT_ERR_UNSUPPORTED,
                   (const char *[]){"op If", NULL});
}

/* An initializer in an external file beside the model; names that leave
 * the model's folder, missing files and short data are refused. */
static const char *external_model(const char *name, const char *location, int64_t length)
{
    hand h;
    hand_begin(&h, 13);
    size_t init = pb_begin(&h.w, 5);
    int64_t dims[2] = {3, 4};
    pb_put_packed_varints(&h.w, 1, dims, 2);
    pb_put_varint(&h.w, 2, 1);
    pb_put_string(&h.w, 8, "w");
    const char *keys[3] = {"location", "offset", "length"};
    char length_text[32];
    snprintf(length_text, sizeof length_text, "%lld", (long long)length);
    const char *values[3] = {location, "8", length_text};
    for (int i = 0; i < 3; i++) {
        size_t entry = pb_begin(&h.w, 13);
        pb_put_string(&h.w, 1, keys[i]);
        pb_put_string(&h.w, 2, values[i]);
        pb_end(&h.w, entry);
    }
    pb_put_varint(&h.w, 14, 1); /* EXTERNAL */
    pb_end(&h.w, init);
    int64_t in_dims[4] = {-1, 1, 2, 2}, out_dims[2] = {-1, 3};
    hand_node(&h, "Flatten", 1, (const char *[]){"x"}, "flat");
    size_t gemm = hand_node_begin(&h, "Gemm", 2, (const char *[]){"flat", "w"}, "y");
    hand_attr_int(&h, "transB", 1); /* w is [out, in] */
    pb_end(&h.w, gemm);
    hand_value(&h, 11, "x", 4, in_dims);
    hand_value(&h, 12, "y", 2, out_dims);
    return hand_save(&h, name);
}

static void external_data(void)
{
    float data[2 + 12]; /* 8 bytes of something else, then w [3, 4] */
    fill(data, 14, 9);
    tmpdir_write(tmpdir_path("weights.bin"), data, sizeof data);
    float x[4] = {1, 2, 3, 4}, y[3];
    CHECK_OK(run_onnx(external_model("ext.onnx", "weights.bin", 48), 1, x, y));
    for (int o = 0; o < 3; o++) {
        double expected = 0;
        for (int i = 0; i < 4; i++)
            expected += (double)data[2 + o * 4 + i] * x[i];
        CHECK(fabs(y[o] - expected) < 1e-5, "y[%d] = %g, expected %g", o, (double)y[o],
              expected);
    }
    expect_refusal(external_model("ext_up.onnx", "../weights.bin", 48), CT_ERR_FORMAT,
                   (const char *[]){"'../weights.bin'", "relative", NULL});
    expect_refusal(external_model("ext_abs.onnx", "/etc/passwd", 48), CT_ERR_FORMAT,
                   (const char *[]){"relative", NULL});
    expect_refusal(external_model("ext_missing.onnx", "nothing.bin", 48), CT_ERR_IO,
                   (const char *[]){"nothing.bin", NULL});
    expect_refusal(external_model("ext_short.onnx", "weights.bin", 40), CT_ERR_FORMAT,
                   (const char *[]){"needs 48 bytes", NULL});
}

/* The fuzz corpus (tests/fuzz/corpus/onnx): the seeds load, and every
 * input a fuzzer once crashed on (regress-*) is refused or loads, cleanly. */
static void fuzz_corpus_loads_or_refuses(void)
{
    const char *folder = "tests/fuzz/corpus/onnx";
    DIR *dir = opendir(folder);
    CHECK(dir != NULL, "cannot open %s (run from the repository root)", folder);
    int files = 0;
    for (struct dirent *entry; dir && (entry = readdir(dir));) {
        if (entry->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", folder, entry->d_name);
        ct_onnx *model = NULL;
        ct_status status = ct_onnx_load(path, &model);
        bool seed = strncmp(entry->d_name, "regress-", 8) != 0;
        CHECK(seed ? status == CT_OK : status != CT_ERR_INTERNAL, "%s: %s: %s", path,
              ct_status_name(status), ct_last_error());
        ct_onnx_free(model);
        files++;
    }
    if (dir)
        closedir(dir);
    CHECK(files >= 5, "only %d files in %s", files, folder);
}

int main(void)
{
    tmpdir_create("onnx");
    RUN(roundtrip_builtin_models);
    RUN(export_metadata_and_softmax);
    RUN(matmul_add_is_a_linear_layer);
    RUN(shape_computation_is_folded);
    RUN(one_initializer_as_parameter_and_buffer);
    RUN(unsupported_ops_are_named);
    RUN(truncated_and_corrupt_files_fail_cleanly);
    RUN(lying_lengths_and_absurd_sizes);
    RUN(nesting_bomb_is_refused);
    RUN(external_data);
    RUN(fuzz_corpus_loads_or_refuses);
    tmpdir_remove();
    return harness_finish();
}
