/*
 * ct_plan_optimize: the folded, dropout-free inference plan computes what
 * the plan it came from computes in CT_EVAL (within 1e-5 of the largest
 * output), with fewer kernels; batchnorms fold only where that is exact;
 * bad arguments are refused.  On the CPU, and on the CUDA backend where
 * the build has one (the emulated device in build-emu/).
 */
#include <string.h>

#include "cuttle.h"
#include "graph/graph.h"
#include "graph/plan.h"
#include "harness.h"

static uint32_t rng_state = 12345;

static float uniform(float lo, float hi)
{
    rng_state = rng_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(rng_state >> 8) / 16777216.0f;
}

static void write_random(ct_plan *plan, ct_tensor *t, float lo, float hi)
{
    int64_t n = ct_tensor_numel(t);
    float *values = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        values[i] = uniform(lo, hi);
    CHECK_OK(ct_plan_write(plan, t, values, sizeof(float) * (size_t)n));
    free(values);
}

/* Batchnorm statistics and affine parameters far from their initial 0/1,
 * so that folding them wrong shows. */
static int randomize_batchnorms(ct_plan *plan)
{
    ct_graph *graph = ct_plan_graph(plan);
    int count = 0;
    for (int i = 0; i < graph->n_nodes; i++) {
        ct_tensor *apply = graph->nodes[i];
        if (apply->op != CT_OP_BN_APPLY)
            continue;
        ct_tensor *stats = apply->src[1];
        write_random(plan, apply->src[2], 0.5f, 1.5f);   /* gamma */
        write_random(plan, apply->src[3], -0.3f, 0.3f);  /* beta */
        write_random(plan, stats->src[1], -0.2f, 0.2f);  /* running mean */
        write_random(plan, stats->src[2], 0.3f, 2.0f);   /* running var */
        count++;
    }
    return count;
}

static int count_ops(const ct_graph *graph, ct_op op)
{
    int count = 0;
    for (int i = 0; i < graph->n_nodes; i++)
        count += graph->nodes[i]->op == op;
    return count;
}

static ct_backend *backend_or_null(const char *device)
{
    ct_backend *backend = NULL;
    if (ct_backend_new(device, &backend) != CT_OK)
        return NULL;
    return backend;
}

/* Runs both plans on one random x; returns max |a - b| / max |a|. */
static double compare_outputs(ct_plan *plan, ct_tensor *x, ct_tensor *y, ct_optimized *opt)
{
    int64_t nx = ct_tensor_numel(x), ny = ct_tensor_numel(y);
    float *input = malloc(sizeof(float) * (size_t)nx);
    float *a = malloc(sizeof(float) * (size_t)ny), *b = malloc(sizeof(float) * (size_t)ny);
    for (int64_t i = 0; i < nx; i++)
        input[i] = uniform(-1.0f, 1.0f);
    CHECK_OK(ct_plan_write(plan, x, input, sizeof(float) * (size_t)nx));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, y, a, sizeof(float) * (size_t)ny));
    CHECK_OK(ct_plan_write(opt->plan, opt->x, input, sizeof(float) * (size_t)nx));
    CHECK_OK(ct_plan_run(opt->plan, CT_EVAL));
    CHECK_OK(ct_plan_read(opt->plan, opt->y, b, sizeof(float) * (size_t)ny));
    double largest = 0, worst = 0;
    for (int64_t i = 0; i < ny; i++) {
        largest = fmax(largest, fabs(a[i]));
        worst = fmax(worst, fabs((double)a[i] - b[i]));
    }
    free(input);
    free(a);
    free(b);
    return largest > 0 ? worst / largest : worst;
}

typedef struct model_case {
    const char *model;
    int64_t shape[4];
    int classes;
    int folds, dropouts;
} model_case;

static void check_model(const model_case *c, const char *device)
{
    ct_backend *backend = backend_or_null(device);
    if (!backend) {
        printf("  (%s: no %s backend in this build)\n", c->model, device);
        return;
    }
    char *text = NULL;
    CHECK_OK(ct_model_source(c->model, &text));
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, c->shape);
    ct_tensor *y = ct_model_build(graph, text, x, c->classes);
    ct_tensor_keep(y);
    free(text);
    CHECK_OK(ct_graph_status(graph));
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(graph, backend, 3, &plan));
    ct_optimized opt;
    if (plan) {
        CHECK(randomize_batchnorms(plan) == c->folds, "%s: batchnorms", c->model);
        CHECK_OK(ct_plan_optimize(plan, x, y, &opt));
    }
    if (plan && opt.plan) {
        double error = compare_outputs(plan, x, y, &opt);
        CHECK(error <= 1e-5, "%s on %s: optimized outputs differ by %.3g of the largest",
              c->model, device, error);
        const ct_optimize_report *r = &opt.report;
        CHECK(r->folded == c->folds, "%s: %d batchnorms folded, not %d", c->model, r->folded,
              c->folds);
        CHECK(r->removed == c->dropouts, "%s: %d dropouts removed, not %d", c->model, r->removed,
              c->dropouts);
        CHECK(count_ops(opt.graph, CT_OP_BN_APPLY) + count_ops(opt.graph, CT_OP_BN_STATS) == 0 &&
                  count_ops(opt.graph, CT_OP_DROPOUT) == 0,
              "%s: batchnorm or dropout left in the optimized graph", c->model);
        /* at least the folded batchnorms' kernels and the dropouts go (a
         * relu or pool may now fuse into the conv too): two a batchnorm,
         * one where a residual add computed its apply (graph/fuse.c) */
        int bn_kernels = ct_plan_count_runs(plan, CT_EVAL, CT_OP_BN_STATS) +
                         ct_plan_count_runs(plan, CT_EVAL, CT_OP_BN_APPLY);
        CHECK(bn_kernels >= c->folds && bn_kernels <= 2 * c->folds &&
                  r->kernels_after <= r->kernels_before - bn_kernels - c->dropouts,
              "%s: %d kernels -> %d (%d of batchnorm)", c->model, r->kernels_before,
              r->kernels_after, bn_kernels);
        CHECK(r->values_after < r->values_before || c->folds == 0,
              "%s: %lld values -> %lld", c->model, (long long)r->values_before,
              (long long)r->values_after);
        printf("  %s on %s: %d folded, %d kernels -> %d, arena %zu -> %zu bytes, error %.2g\n",
               c->model, device, r->folded, r->kernels_before, r->kernels_after, r->arena_before,
               r->arena_after, error);
    }
    ct_optimized_free(&opt);
    ct_plan_free(plan);
    ct_graph_free(graph);
    ct_backend_free(backend);
}

static const model_case cases[] = {
    {"simplecnn", {4, 1, 28, 28}, 10, 0, 0},
    {"vgg8_bn", {2, 1, 28, 28}, 10, 6, 2},
    {"resnet18", {1, 3, 32, 32}, 10, 20, 0},
};

static void models_fold_and_equal_cpu(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_model(&cases[i], "cpu");
}

/* Smaller, and no ResNet-18: the emulated device runs the kernels a GPU
 * thread at a time (and 40 times slower again under ASan). */
static void models_fold_and_equal_cuda(void)
{
    static const model_case small[] = {
        {"simplecnn", {1, 1, 28, 28}, 10, 0, 0},
        {"vgg8_bn", {1, 1, 16, 16}, 10, 6, 2},
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        check_model(&small[i], "cuda");
}

/* A graph built by hand: linear + batchnorm (folds, into a new bias); a
 * batchnorm on the input and one after an add (no layer before them: they
 * stay); a conv whose output is also read by the add (does not fold). */
static void only_exact_folds(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){2, 3, 8, 8});
    ct_tensor *h = ct_layer_batchnorm2d(graph, "bn_in", x);
    ct_conv_args same = {.pad = {1, 1}};
    ct_tensor *c1 = ct_layer_conv2d(graph, "c1", h, 4, 3, 3, same, false);
    ct_tensor *b1 = ct_layer_batchnorm2d(graph, "bn1", c1);
    ct_tensor *sum = ct_add(graph, b1, c1); /* c1 has another reader: bn1 stays */
    h = ct_relu(graph, ct_layer_batchnorm2d(graph, "bn_sum", sum));
    h = ct_dropout(graph, ct_flatten(graph, h), 0.5f);
    ct_tensor *fc = ct_layer_linear(graph, "fc", h, 6, false);
    ct_tensor *y = ct_layer_batchnorm2d(graph, "bn_fc", fc);
    ct_tensor_keep(y);
    CHECK_OK(ct_graph_status(graph));
    ct_backend *backend = backend_or_null("cpu");
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(graph, backend, 9, &plan));
    ct_optimized opt;
    if (plan) {
        randomize_batchnorms(plan);
        CHECK_OK(ct_plan_optimize(plan, x, y, &opt));
    }
    if (opt.plan) {
        double error = compare_outputs(plan, x, y, &opt);
        CHECK(error <= 1e-5, "optimized outputs differ by %.3g of the largest", error);
        CHECK(opt.report.folded == 1, "%d folded, not 1 (bn_fc)", opt.report.folded);
        CHECK(opt.report.removed == 1, "%d removed", opt.report.removed);
        CHECK(count_ops(opt.graph, CT_OP_BN_APPLY) == 3, "%d batchnorms left, not 3",
              count_ops(opt.graph, CT_OP_BN_APPLY));
        ct_tensor *bias = ct_graph_find(opt.graph, "fc.bias");
        CHECK(bias && ct_tensor_is_param(bias) && ct_tensor_dim(bias, 0) == 6,
              "the folded linear has no fc.bias [6]");
        CHECK(!ct_graph_find(opt.graph, "bn_fc.running_mean") &&
                  ct_graph_find(opt.graph, "bn1.running_mean"),
              "the folded batchnorm's buffers should go, the others stay");
    }
    ct_optimized_free(&opt);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
}

/* A training graph's arena holds activations until backward reads them;
 * the optimized plan's holds each only while the forward pass needs it. */
static void training_graph_infers_in_less_memory(void)
{
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, (int64_t[]){8, 1, 28, 28});
    ct_tensor *labels = ct_input(graph, "labels", CT_I64, 1, (int64_t[]){8});
    ct_tensor *y = ct_model_build(graph, ct_model_builtin("vgg8_bn"), x, 10);
    ct_tensor_keep(y);
    CHECK_OK(ct_graph_backward(graph, ct_cross_entropy(graph, y, labels, 0.0f)));
    CHECK_OK(ct_graph_sgd(graph, (ct_sgd_args){.lr = 0.1f}));
    ct_backend *backend = backend_or_null("cpu");
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(graph, backend, 2, &plan));
    ct_optimized opt;
    if (plan)
        CHECK_OK(ct_plan_optimize(plan, x, y, &opt));
    if (opt.plan) {
        CHECK(compare_outputs(plan, x, y, &opt) <= 1e-5, "outputs differ");
        CHECK(opt.report.arena_after * 3 < opt.report.arena_before,
              "arena %zu -> %zu bytes: a third or less expected", opt.report.arena_before,
              opt.report.arena_after);
        CHECK(!ct_graph_find(opt.graph, "labels"), "the labels are not needed to infer");
        printf("  vgg8_bn B8: training arena %zu bytes, inference arena %zu bytes\n",
               opt.report.arena_before, opt.report.arena_after);
    }
    ct_optimized_free(&opt);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
}

static void bad_arguments_refused(void)
{
    ct_graph *graph = ct_graph_new(), *other = ct_graph_new();
    ct_tensor *x = ct_input(graph, "x", CT_F32, 2, (int64_t[]){2, 4});
    ct_tensor *y = ct_layer_linear(graph, "fc", x, 3, true);
    ct_tensor *w = ct_graph_find(graph, "fc.weight");
    ct_tensor *z = ct_relu(graph, w);
    ct_tensor *stranger = ct_input(other, "x", CT_F32, 2, (int64_t[]){2, 4});
    ct_tensor_keep(y);
    ct_tensor_keep(z);
    ct_backend *backend = backend_or_null("cpu");
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(graph, backend, 1, &plan));
    ct_optimized opt = {.graph = (ct_graph *)1};
    CHECK(ct_plan_optimize(NULL, x, y, &opt) == CT_ERR_ARG && !opt.graph, "no plan");
    CHECK(ct_plan_optimize(plan, x, y, NULL) == CT_ERR_ARG, "no out");
    CHECK(ct_plan_optimize(plan, stranger, y, &opt) == CT_ERR_ARG &&
              strstr(ct_last_error(), "plan's graph"),
          "x of another graph: %s", ct_last_error());
    CHECK(ct_plan_optimize(plan, w, y, &opt) == CT_ERR_ARG && strstr(ct_last_error(), "input"),
          "a parameter as x: %s", ct_last_error());
    CHECK(ct_plan_optimize(plan, x, z, &opt) == CT_ERR_ARG &&
              strstr(ct_last_error(), "does not depend"),
          "y without x: %s", ct_last_error());
    CHECK(!opt.graph && !opt.plan, "a failed call leaves *out zeroed");
    ct_optimized_free(&opt);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    ct_graph_free(other);
}

int main(void)
{
    RUN(models_fold_and_equal_cpu);
    RUN(models_fold_and_equal_cuda);
    RUN(only_exact_folds);
    RUN(training_graph_infers_in_less_memory);
    RUN(bad_arguments_refused);
    return harness_finish();
}
