/*
 * cuttle against PyTorch: every op, forward and backward, and two whole
 * models (SimpleCNN and a small ResNet with batchnorm) through a forward,
 * a backward, 3 SGD steps and 3 AdamW steps, from the fixtures that
 * tests/gen_fixtures.py wrote with PyTorch (see tests/fixtures/README.md).
 * Tolerances (relative to the reference's largest magnitude): 1e-5 for
 * outputs and losses, 1e-4 for gradients and parameters.
 */
#include <string.h>

#include "cuttle.h"
#include "harness.h"
#include "io/json.h"
#include "io/safetensors.h"

#define FIXTURES "tests/fixtures/"
#define TOL_FORWARD 1e-5
#define TOL_GRAD 1e-4
#define MAX_INPUTS 8

/* ---- fixture access ---------------------------------------------------------- */

static const ct_st_tensor *fixture(const ct_st_file *file, const char *prefix, const char *item)
{
    char name[256];
    snprintf(name, sizeof name, "%s%s%s", prefix, *prefix ? "." : "", item);
    const ct_st_tensor *t = ct_st_find(file, name);
    CHECK(t != NULL, "fixture tensor '%s' missing", name);
    return t;
}

static const ct_json_value *json_member(const ct_json_value *object, const char *key)
{
    const ct_json_value *k = ct_json_first(object);
    for (int i = 0; k && i < object->count; i++, k = ct_json_next_member(k)) {
        if (strcmp(k->string, key) == 0)
            return ct_json_member_value(k);
    }
    return NULL;
}

static int json_int(const ct_json_value *object, const char *key, int fallback)
{
    const ct_json_value *v = json_member(object, key);
    return v && v->type == CT_JSON_NUMBER ? (int)v->number : fallback;
}

static double json_number(const ct_json_value *object, const char *key)
{
    const ct_json_value *v = json_member(object, key);
    return v && v->type == CT_JSON_NUMBER ? v->number : 0.0;
}

static bool json_bool(const ct_json_value *object, const char *key)
{
    const ct_json_value *v = json_member(object, key);
    return v && v->type == CT_JSON_TRUE;
}

static void json_pair(const ct_json_value *object, const char *key, int out[2])
{
    const ct_json_value *v = json_member(object, key);
    out[0] = out[1] = 0;
    if (v && v->type == CT_JSON_ARRAY && v->count == 2) {
        out[0] = (int)ct_json_first(v)->number;
        out[1] = (int)ct_json_next(ct_json_first(v))->number;
    }
}

/* Compare a tensor of the plan with a fixture tensor. */
static void expect_close(ct_plan *plan, const ct_tensor *t, const ct_st_tensor *ref,
                         double tolerance, const char *what)
{
    if (!t || !ref)
        return;
    CHECK(ref->bytes == ct_tensor_bytes(t), "%s: %zu bytes in the fixture, %zu in cuttle",
          what, ref->bytes, ct_tensor_bytes(t));
    if (ref->bytes != ct_tensor_bytes(t))
        return;
    float *ours = malloc(ref->bytes);
    CHECK_OK(ct_plan_read(plan, t, ours, ref->bytes));
    int64_t count = (int64_t)(ref->bytes / sizeof(float));
    double err = harness_rel_err_f32(ours, ref->data, count);
    CHECK(err <= tolerance, "%s: relative error %.3g > %.0e", what, err, tolerance);
    if (getenv("CT_TEST_VERBOSE"))
        fprintf(stderr, "  %-50s rel err %.2e\n", what, err);
    free(ours);
}

static ct_tensor *input_like(ct_graph *graph, const char *name, const ct_st_tensor *ref)
{
    return ct_input(graph, name, ref->dtype, ref->ndim, ref->shape);
}

/* ---- single ops ------------------------------------------------------------------ */

typedef struct op_case {
    const char *name;
    const ct_json_value *meta;
    ct_graph *graph;
    ct_tensor *inputs[MAX_INPUTS];
    const char *input_names[MAX_INPUTS];
    int n_inputs;
    ct_tensor *running_mean, *running_var, *labels;
} op_case;

static ct_tensor *case_input(op_case *c, const char *name)
{
    for (int i = 0; i < c->n_inputs; i++) {
        if (strcmp(c->input_names[i], name) == 0)
            return c->inputs[i];
    }
    return NULL;
}

static ct_tensor *build_op(op_case *c)
{
    const char *op = json_member(c->meta, "op")->string;
    ct_graph *g = c->graph;
    ct_tensor *x = case_input(c, "x");
    if (strcmp(op, "conv2d") == 0) {
        ct_conv_args args = {.groups = json_int(c->meta, "groups", 1)};
        json_pair(c->meta, "stride", args.stride);
        json_pair(c->meta, "pad", args.pad);
        json_pair(c->meta, "dilation", args.dilation);
        return ct_conv2d(g, x, case_input(c, "weight"), case_input(c, "bias"), args);
    }
    if (strcmp(op, "linear") == 0)
        return ct_linear(g, x, case_input(c, "weight"), case_input(c, "bias"));
    if (strcmp(op, "maxpool2d") == 0 || strcmp(op, "avgpool2d") == 0) {
        ct_pool_args args = {0};
        json_pair(c->meta, "kernel", args.kernel);
        json_pair(c->meta, "stride", args.stride);
        json_pair(c->meta, "pad", args.pad);
        args.exclude_pad = json_member(c->meta, "count_include_pad") &&
                           !json_bool(c->meta, "count_include_pad");
        return op[0] == 'm' ? ct_maxpool2d(g, x, args) : ct_avgpool2d(g, x, args);
    }
    if (strcmp(op, "adaptive_avgpool2d") == 0)
        return ct_global_avgpool(g, x);
    if (strcmp(op, "relu") == 0)
        return ct_relu(g, x);
    if (strcmp(op, "sigmoid") == 0)
        return ct_sigmoid(g, x);
    if (strcmp(op, "tanh") == 0)
        return ct_tanh(g, x);
    if (strcmp(op, "batchnorm2d") == 0)
        return ct_batchnorm2d(g, x, case_input(c, "weight"), case_input(c, "bias"),
                              c->running_mean, c->running_var,
                              (float)json_number(c->meta, "eps"),
                              (float)json_number(c->meta, "momentum"));
    if (strcmp(op, "add") == 0)
        return ct_add(g, case_input(c, "a"), case_input(c, "b"));
    if (strcmp(op, "flatten") == 0)
        return ct_flatten(g, x);
    if (strcmp(op, "concat") == 0)
        return ct_concat(g, c->n_inputs, c->inputs);
    if (strcmp(op, "softmax") == 0)
        return ct_softmax(g, x);
    if (strcmp(op, "cross_entropy") == 0)
        return ct_cross_entropy(g, x, c->labels, (float)json_number(c->meta, "label_smoothing"));
    CHECK(false, "case %s: unknown op '%s' in the fixture", c->name, op);
    return NULL;
}

static void declare_inputs(op_case *c, const ct_st_file *file)
{
    const ct_json_value *names = json_member(c->meta, "inputs");
    const ct_json_value *v = ct_json_first(names);
    for (int i = 0; v && i < names->count && c->n_inputs < MAX_INPUTS; i++, v = ct_json_next(v)) {
        const ct_st_tensor *ref = fixture(file, c->name, v->string);
        if (!ref)
            continue;
        c->input_names[c->n_inputs] = v->string;
        c->inputs[c->n_inputs] = input_like(c->graph, v->string, ref);
        ct_tensor_requires_grad(c->inputs[c->n_inputs]);
        c->n_inputs++;
    }
    const ct_json_value *extra = json_member(c->meta, "extra");
    v = ct_json_first(extra);
    for (int i = 0; v && i < extra->count; i++, v = ct_json_next(v)) {
        const ct_st_tensor *ref = fixture(file, c->name, v->string);
        if (!ref)
            continue;
        if (strcmp(v->string, "labels") == 0) {
            c->labels = input_like(c->graph, "labels", ref);
            continue;
        }
        ct_tensor *buffer = ct_buffer(c->graph, v->string, CT_F32, ref->ndim, ref->shape,
                                      CT_INIT_CONST, 0);
        if (strcmp(v->string, "running_mean") == 0)
            c->running_mean = buffer;
        else
            c->running_var = buffer;
    }
}

static void write_fixture(ct_plan *plan, ct_graph *graph, const ct_st_file *file,
                          const char *prefix, const char *name)
{
    ct_tensor *t = ct_graph_find(graph, name);
    const ct_st_tensor *ref = fixture(file, prefix, name);
    if (t && ref)
        CHECK_OK(ct_plan_write(plan, t, ref->data, ref->bytes));
}

static void run_op_case(const ct_st_file *file, const char *name, const ct_json_value *meta)
{
    op_case c = {.name = name, .meta = meta, .graph = ct_graph_new()};
    declare_inputs(&c, file);
    ct_tensor *y = build_op(&c);
    const ct_st_tensor *dy_ref = fixture(file, name, "dy");
    bool eval = json_member(meta, "training") && !json_bool(meta, "training");
    CHECK(y != NULL, "case %s: building failed: %s", name, ct_last_error());
    if (!y || !dy_ref) {
        ct_graph_free(c.graph);
        return;
    }
    ct_tensor_keep(y);
    ct_tensor *dy = input_like(c.graph, "dy", dy_ref);
    if (!eval)
        CHECK_OK(ct_graph_backward_vjp(c.graph, y, dy));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    CHECK_OK(ct_backend_new("cpu", &backend));
    CHECK_OK(ct_plan_new(c.graph, backend, 1, &plan));
    if (plan) {
        for (int i = 0; i < c.n_inputs; i++)
            write_fixture(plan, c.graph, file, name, c.input_names[i]);
        const char *extras[3] = {"labels", "running_mean", "running_var"};
        for (int i = 0; i < 3; i++) {
            if (ct_graph_find(c.graph, extras[i]))
                write_fixture(plan, c.graph, file, name, extras[i]);
        }
        write_fixture(plan, c.graph, file, name, "dy");
        CHECK_OK(ct_plan_run(plan, eval ? CT_EVAL : CT_TRAIN));
        char what[128];
        snprintf(what, sizeof what, "%s y", name);
        expect_close(plan, y, fixture(file, name, "y"), TOL_FORWARD, what);
        for (int i = 0; !eval && i < c.n_inputs; i++) {
            char item[64];
            snprintf(item, sizeof item, "d%s", c.input_names[i]);
            snprintf(what, sizeof what, "%s %s", name, item);
            expect_close(plan, ct_tensor_grad(c.inputs[i]), fixture(file, name, item),
                         TOL_GRAD, what);
        }
        if (c.running_mean) {
            snprintf(what, sizeof what, "%s running stats", name);
            expect_close(plan, c.running_mean, fixture(file, name, "running_mean_out"),
                         TOL_FORWARD, what);
            expect_close(plan, c.running_var, fixture(file, name, "running_var_out"),
                         TOL_FORWARD, what);
        }
    }
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(c.graph);
}

static void test_every_op_matches_pytorch(void)
{
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(FIXTURES "ops.safetensors", &file));
    if (!file)
        return;
    const char *cases_text = ct_st_metadata(file, "cases");
    ct_json_doc cases = {0};
    ct_json_error error;
    CHECK(cases_text && ct_json_parse(cases_text, strlen(cases_text), 8, &cases, &error) ==
                            CT_OK,
          "metadata 'cases' unreadable");
    int n_run = 0;
    const ct_json_value *list = cases.values;
    const ct_json_value *v = list ? ct_json_first(list) : NULL;
    for (int i = 0; v && i < list->count; i++, v = ct_json_next(v)) {
        const char *meta_text = ct_st_metadata(file, v->string);
        ct_json_doc meta = {0};
        if (!meta_text || ct_json_parse(meta_text, strlen(meta_text), 8, &meta, &error)) {
            CHECK(false, "metadata of case %s unreadable", v->string);
            continue;
        }
        int failures_before = harness_case_failures;
        run_op_case(file, v->string, ct_json_root(&meta));
        if (harness_case_failures != failures_before)
            fprintf(stderr, "  (case %s failed)\n", v->string);
        n_run++;
        ct_json_free(&meta);
    }
    CHECK(list && n_run == list->count && n_run >= 29, "only %d op cases ran", n_run);
    ct_json_free(&cases);
    ct_st_free(file);
}

/* ---- whole models -------------------------------------------------------------------- */

typedef enum optimizer { NO_OPTIMIZER, SGD_MOMENTUM, ADAMW } optimizer;

typedef struct model_spec {
    const char *file;
    int batch, channels, size;
    ct_tensor *(*build)(ct_graph *graph, ct_tensor *x);
    ct_sgd_args sgd;
} model_spec;

static ct_tensor *build_simplecnn(ct_graph *graph, ct_tensor *x)
{
    return ct_model_simplecnn(graph, x, 10);
}

static ct_tensor *conv_bn(ct_graph *graph, const char *conv, const char *bn, ct_tensor *x,
                          int out_channels, int kernel, int stride)
{
    ct_conv_args args = {.stride = {stride, stride}, .pad = {kernel / 2, kernel / 2}};
    return ct_layer_batchnorm2d(graph, bn,
                                ct_layer_conv2d(graph, conv, x, out_channels, kernel, kernel,
                                                args, false));
}

/* torchvision-style BasicBlock names under `prefix`. */
static ct_tensor *basic_block(ct_graph *graph, const char *prefix, ct_tensor *x,
                              int out_channels, int stride)
{
    char a[64], b[64];
    snprintf(a, sizeof a, "%s.conv1", prefix);
    snprintf(b, sizeof b, "%s.bn1", prefix);
    ct_tensor *h = ct_relu(graph, conv_bn(graph, a, b, x, out_channels, 3, stride));
    snprintf(a, sizeof a, "%s.conv2", prefix);
    snprintf(b, sizeof b, "%s.bn2", prefix);
    h = conv_bn(graph, a, b, h, out_channels, 3, 1);
    ct_tensor *shortcut = x;
    if (stride != 1 || ct_tensor_dim(x, 1) != out_channels) {
        snprintf(a, sizeof a, "%s.downsample.0", prefix);
        snprintf(b, sizeof b, "%s.downsample.1", prefix);
        shortcut = conv_bn(graph, a, b, x, out_channels, 1, stride);
    }
    return ct_relu(graph, ct_add(graph, h, shortcut));
}

static ct_tensor *build_resblock(ct_graph *graph, ct_tensor *x)
{
    ct_tensor *h = ct_relu(graph, conv_bn(graph, "conv1", "bn1", x, 8, 3, 1));
    h = basic_block(graph, "layer1.0", h, 8, 1);
    h = basic_block(graph, "layer2.0", h, 16, 2);
    h = ct_flatten(graph, ct_global_avgpool(graph, h));
    return ct_layer_linear(graph, "fc", h, 10, true);
}

typedef struct model_run {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    ct_tensor *logits, *loss;
} model_run;

static model_run start_model(const model_spec *spec, const ct_st_file *file, optimizer opt)
{
    model_run run = {.graph = ct_graph_new()};
    int64_t shape[4] = {spec->batch, spec->channels, spec->size, spec->size};
    ct_tensor *x = ct_input(run.graph, "input", CT_F32, 4, shape);
    ct_tensor *labels = ct_input(run.graph, "labels", CT_I64, 1, shape);
    run.logits = spec->build(run.graph, x);
    run.loss = ct_cross_entropy(run.graph, run.logits, labels, 0);
    ct_tensor_keep(run.logits);
    CHECK_OK(ct_graph_status(run.graph));
    CHECK_OK(ct_graph_backward(run.graph, run.loss));
    if (opt == SGD_MOMENTUM)
        CHECK_OK(ct_graph_sgd(run.graph, spec->sgd));
    if (opt == ADAMW) {
        ct_adam_args adamw = ct_adam_defaults();
        adamw.weight_decay = 1e-2f;
        adamw.eps = 1e-6f; /* why not 1e-8: see ADAMW_ARGS in tests/gen_fixtures.py */
        adamw.decoupled = true;
        CHECK_OK(ct_graph_adam(run.graph, adamw));
    }
    CHECK_OK(ct_backend_new("cpu", &run.backend));
    CHECK_OK(ct_plan_new(run.graph, run.backend, 1, &run.plan));
    if (!run.plan)
        return run;
    write_fixture(run.plan, run.graph, file, "", "input");
    write_fixture(run.plan, run.graph, file, "", "labels");
    /* Every model tensor gets PyTorch's initial value; none is left out. */
    int n_written = 0;
    for (int i = 0; i < ct_st_count(file); i++) {
        const ct_st_tensor *ref = ct_st_get(file, i);
        if (strncmp(ref->name, "init.", 5) != 0)
            continue;
        ct_tensor *t = ct_graph_find(run.graph, ref->name + 5);
        CHECK(t != NULL, "cuttle's model has no '%s'", ref->name + 5);
        if (t) {
            CHECK_OK(ct_plan_write(run.plan, t, ref->data, ref->bytes));
            n_written++;
        }
    }
    int n_model_state = 0;
    for (int i = 0; i < ct_graph_n_state(run.graph); i++) {
        const char *name = ct_tensor_name(ct_graph_state(run.graph, i));
        n_model_state += !strstr(name, ".momentum_buffer") && !strstr(name, ".exp_avg");
    }
    CHECK(n_written == n_model_state, "%d of cuttle's %d state tensors have fixtures",
          n_written, n_model_state);
    return run;
}

static void finish_model(model_run *run)
{
    ct_plan_free(run->plan);
    ct_backend_free(run->backend);
    ct_graph_free(run->graph);
}

static void check_forward_backward(const model_spec *spec, const ct_st_file *file)
{
    model_run run = start_model(spec, file, NO_OPTIMIZER);
    if (run.plan) {
        CHECK_OK(ct_plan_run(run.plan, CT_TRAIN));
        expect_close(run.plan, run.logits, fixture(file, "", "logits"), TOL_FORWARD, "logits");
        expect_close(run.plan, run.loss, fixture(file, "", "loss"), TOL_FORWARD, "loss");
        for (int i = 0; i < ct_graph_n_state(run.graph); i++) {
            ct_tensor *t = ct_graph_state(run.graph, i);
            char what[160];
            snprintf(what, sizeof what, "%s of %s", ct_tensor_is_param(t) ? "grad" : "buffer",
                     ct_tensor_name(t));
            if (ct_tensor_is_param(t)) {
                expect_close(run.plan, ct_tensor_grad(t),
                             fixture(file, "grad", ct_tensor_name(t)), TOL_GRAD, what);
            } else if (ct_tensor_dtype(t) == CT_F32 &&
                       ct_st_find(file, "forward.bn1.running_mean")) {
                expect_close(run.plan, t, fixture(file, "forward", ct_tensor_name(t)),
                             TOL_FORWARD, what);
            }
        }
    }
    finish_model(&run);
}

static void check_training(const model_spec *spec, const ct_st_file *file, optimizer opt)
{
    const char *prefix = opt == SGD_MOMENTUM ? "sgd" : "adamw";
    model_run run = start_model(spec, file, opt);
    if (!run.plan) {
        finish_model(&run);
        return;
    }
    for (int step = 0; step < 3; step++) {
        CHECK_OK(ct_plan_run(run.plan, CT_TRAIN));
        char item[32], what[64];
        snprintf(item, sizeof item, "loss.%d", step);
        snprintf(what, sizeof what, "%s loss before step %d", prefix, step);
        expect_close(run.plan, run.loss, fixture(file, prefix, item), TOL_FORWARD, what);
    }
    for (int i = 0; i < ct_graph_n_state(run.graph); i++) {
        ct_tensor *t = ct_graph_state(run.graph, i);
        const char *name = ct_tensor_name(t);
        if (ct_tensor_dtype(t) != CT_F32 || strstr(name, ".momentum_buffer") ||
            strstr(name, ".exp_avg"))
            continue;
        char what[160];
        snprintf(what, sizeof what, "%s: %s after 3 steps", prefix, name);
        expect_close(run.plan, t, fixture(file, prefix, name), TOL_GRAD, what);
    }
    finish_model(&run);
}

static void check_model(const model_spec *spec)
{
    char path[128];
    snprintf(path, sizeof path, FIXTURES "%s", spec->file);
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    if (!file)
        return;
    check_forward_backward(spec, file);
    check_training(spec, file, SGD_MOMENTUM);
    check_training(spec, file, ADAMW);
    if (ct_st_find(file, "eval.logits")) {
        model_run run = start_model(spec, file, NO_OPTIMIZER);
        if (run.plan) {
            CHECK_OK(ct_plan_run(run.plan, CT_EVAL));
            expect_close(run.plan, run.logits, fixture(file, "eval", "logits"), TOL_FORWARD,
                         "eval-mode logits");
        }
        finish_model(&run);
    }
    ct_st_free(file);
}

static void test_simplecnn_matches_pytorch(void)
{
    model_spec spec = {"simplecnn.safetensors", 8, 3, 32, build_simplecnn,
                       {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f}};
    check_model(&spec);
}

static void test_resnet_block_matches_pytorch(void)
{
    model_spec spec = {"resblock.safetensors", 4, 3, 16, build_resblock,
                       {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = true}};
    check_model(&spec);
}

int main(void)
{
    RUN(test_every_op_matches_pytorch);
    RUN(test_simplecnn_matches_pytorch);
    RUN(test_resnet_block_matches_pytorch);
    return harness_finish();
}
