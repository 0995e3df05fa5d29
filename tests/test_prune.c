/*
 * Pruning (src/nn/prune.c, prune_weights.c, nn/model_write.c).
 *
 * The structured cases zero, in every prunable convolution, the channels
 * that the ratio removes (chosen at random; the same ones across a set
 * that residual additions tie): their filters, biases and the batchnorm's
 * gamma and beta.  Those channels are then exactly 0 after the
 * convolution, so they are the ones both rankings drop, and the smaller
 * network must give the same logits as the full one: a consumer sliced
 * wrong (the next conv's inputs, a batchnorm vector, a linear layer's
 * blocks) shows.  Also: a model written back as text builds the same
 * network; bad arguments are refused; global magnitude pruning zeroes the
 * share asked for and its masks put the zeros back.
 */
#include <string.h>

#include "cuttle.h"
#include "graph/graph.h"
#include "harness.h"
#include "nn/model_write.h"

#define BATCH 2
#define TOLERANCE 1e-5

typedef struct model {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *y;
} model;

static ct_backend *backend;

static void write_random(ct_plan *plan, ct_tensor *t, uint64_t seed, float lo, float hi)
{
    int64_t n = ct_tensor_numel(t);
    float *values = malloc(sizeof(float) * (size_t)n);
    harness_fill(values, n, seed, lo, hi);
    CHECK_OK(ct_plan_write(plan, t, values, sizeof(float) * (size_t)n));
    free(values);
}

static bool model_new(model *m, const char *text, int c, int h, int w)
{
    int64_t shape[4] = {BATCH, c, h, w};
    m->graph = ct_graph_new();
    m->x = ct_input(m->graph, "x", CT_F32, 4, shape);
    m->y = ct_model_build(m->graph, text, m->x, 10);
    CHECK_OK(ct_graph_status(m->graph));
    if (ct_graph_status(m->graph) != CT_OK)
        return false;
    ct_tensor_keep(m->y);
    CHECK_OK(ct_plan_new(m->graph, backend, 7, &m->plan));
    /* batchnorm far from its initial 0/1 */
    for (int i = 0; i < m->graph->n_nodes; i++) {
        ct_tensor *apply = m->graph->nodes[i];
        if (apply->op != CT_OP_BN_APPLY)
            continue;
        write_random(m->plan, apply->src[2], 10u + (uint64_t)i, 0.5f, 1.5f);
        write_random(m->plan, apply->src[3], 20u + (uint64_t)i, -0.3f, 0.3f);
        write_random(m->plan, apply->src[1]->src[1], 30u + (uint64_t)i, -0.2f, 0.2f);
        write_random(m->plan, apply->src[1]->src[2], 40u + (uint64_t)i, 0.3f, 2.0f);
    }
    return true;
}

static void model_free(model *m)
{
    ct_plan_free(m->plan);
    ct_graph_free(m->graph);
}

static float *logits(ct_plan *plan, ct_tensor *x, ct_tensor *y)
{
    int64_t nx = ct_tensor_numel(x), ny = ct_tensor_numel(y);
    float *input = malloc(sizeof *input * (size_t)nx), *out = malloc(sizeof *out * (size_t)ny);
    harness_fill(input, nx, 99, -1.0f, 1.0f);
    CHECK_OK(ct_plan_write(plan, x, input, sizeof *input * (size_t)nx));
    CHECK_OK(ct_plan_run(plan, CT_EVAL));
    CHECK_OK(ct_plan_read(plan, y, out, sizeof *out * (size_t)ny));
    free(input);
    return out;
}

static void zero_rows(ct_plan *plan, ct_tensor *t, const bool *drop)
{
    int64_t n = ct_tensor_numel(t), per = n / t->shape[0];
    float *v = malloc(sizeof *v * (size_t)n);
    CHECK_OK(ct_plan_read(plan, t, v, sizeof *v * (size_t)n));
    for (int64_t c = 0; c < t->shape[0]; c++)
        if (drop[c])
            memset(v + c * per, 0, sizeof *v * (size_t)per);
    CHECK_OK(ct_plan_write(plan, t, v, sizeof *v * (size_t)n));
    free(v);
}

/* Zero floor(C * ratio) random output channels of each prunable conv
 * (the same ones in a tied set): filter, bias, batchnorm gamma and beta. */
static void zero_doomed(model *m, const ct_pruned *layout, double ratio)
{
    int at = 0;
    for (int i = 0; i < m->graph->n_nodes; i++) {
        ct_tensor *conv = m->graph->nodes[i];
        if (conv->op != CT_OP_CONV2D)
            continue;
        const ct_prune_layer *l = &layout->layers[at++];
        if (l->reason)
            continue;
        int channels = l->channels_before, doomed = (int)(channels * ratio);
        bool *drop = calloc((size_t)channels, sizeof *drop);
        uint64_t state = l->tie ? 1000u + (uint64_t)l->tie : (uint64_t)at;
        for (int k = 0; k < doomed;) {
            int c = (int)(harness_uniform(&state, 0, 1) * (float)channels) % channels;
            k += !drop[c];
            drop[c] = true;
        }
        for (int s = 1; s < conv->n_src; s++)
            zero_rows(m->plan, conv->src[s], drop);
        for (int j = i + 1; j < m->graph->n_nodes; j++) {
            ct_tensor *apply = m->graph->nodes[j];
            if (apply->op == CT_OP_BN_APPLY && apply->src[0] == conv) {
                zero_rows(m->plan, apply->src[2], drop);
                zero_rows(m->plan, apply->src[3], drop);
            }
        }
        free(drop);
    }
}

static int64_t values(const ct_graph *g)
{
    int64_t n = 0;
    for (int i = 0; i < ct_graph_n_state(g); i++)
        n += ct_tensor_numel(ct_graph_state(g, i));
    return n;
}

static void check_pruned(const char *name, int c, int h, int w, double ratio, ct_prune_rank rank,
                         int expect_ties)
{
    model m;
    if (!model_new(&m, ct_model_builtin(name), c, h, w))
        return;
    ct_prune_args args = {.ratio = ratio, .rank = rank, .name = name};
    ct_pruned layout, pruned;
    CHECK_OK(ct_plan_prune_channels(m.plan, m.x, m.y, &args, &layout));
    if (!layout.layers)
        return;
    zero_doomed(&m, &layout, ratio);
    CHECK_OK(ct_plan_prune_channels(m.plan, m.x, m.y, &args, &pruned));
    if (pruned.plan) {
        float *a = logits(m.plan, m.x, m.y), *b = logits(pruned.plan, pruned.x, pruned.y);
        double err = harness_rel_err_f32(b, a, ct_tensor_numel(m.y));
        CHECK(err <= TOLERANCE, "%s: pruned logits differ from the model's by %g", name, err);
        CHECK(values(pruned.graph) < values(m.graph), "%s: no smaller", name);
        int ties = 0;
        for (int k = 0; k < pruned.n_layers; k++) {
            const ct_prune_layer *l = &pruned.layers[k];
            int expect = l->reason ? l->channels_before
                                   : l->channels_before - (int)(l->channels_before * ratio);
            CHECK(l->channels_after == expect, "%s %s: %d channels kept, not %d", name, l->name,
                  l->channels_after, expect);
            CHECK(!l->reason, "%s %s: not pruned: %s", name, l->name, l->reason);
            ties = l->tie > ties ? l->tie : ties;
        }
        CHECK(ties == expect_ties, "%s: %d tied sets, not %d", name, ties, expect_ties);
        free(a);
        free(b);
    }
    ct_pruned_free(&layout);
    ct_pruned_free(&pruned);
    model_free(&m);
}

static void prune_simplecnn_l1(void) { check_pruned("simplecnn", 1, 28, 28, 0.5, CT_PRUNE_RANK_L1, 0); }
static void prune_vgg8_bn_l1(void) { check_pruned("vgg8_bn", 1, 28, 28, 0.5, CT_PRUNE_RANK_L1, 0); }
static void prune_vgg8_bn_bn(void) { check_pruned("vgg8_bn", 3, 16, 16, 0.3, CT_PRUNE_RANK_BN, 0); }
/* the stem and each stage's stream: 4 tied sets */
static void prune_resnet18_ties(void) { check_pruned("resnet18", 1, 12, 12, 0.5, CT_PRUNE_RANK_L1, 4); }

/* A model written back as text builds the same network. */
static void text_round_trip(void)
{
    const char *names[] = {"simplecnn", "lenet5", "vgg8_bn", "resnet18"};
    for (int k = 0; k < 4; k++) {
        model m, again;
        if (!model_new(&m, ct_model_builtin(names[k]), 1, 28, 28))
            return;
        char *text = NULL;
        CHECK_OK(ct_model_write(m.graph, m.x, m.y, NULL, names[k], "written back", &text));
        if (text && model_new(&again, text, 1, 28, 28)) {
            CHECK(ct_graph_n_state(again.graph) == ct_graph_n_state(m.graph), "%s", names[k]);
            for (int i = 0; i < ct_graph_n_state(m.graph); i++) {
                ct_tensor *t = ct_graph_state(m.graph, i);
                ct_tensor *u = ct_graph_find(again.graph, ct_tensor_name(t));
                CHECK(u && ct_tensor_bytes(u) == ct_tensor_bytes(t), "%s: %s", names[k],
                      ct_tensor_name(t));
                void *buf = malloc(ct_tensor_bytes(t));
                CHECK_OK(ct_plan_read(m.plan, t, buf, ct_tensor_bytes(t)));
                if (u)
                    CHECK_OK(ct_plan_write(again.plan, u, buf, ct_tensor_bytes(t)));
                free(buf);
            }
            float *a = logits(m.plan, m.x, m.y), *b = logits(again.plan, again.x, again.y);
            CHECK(harness_rel_err_f32(b, a, ct_tensor_numel(m.y)) == 0, "%s", names[k]);
            free(a);
            free(b);
            model_free(&again);
        }
        free(text);
        model_free(&m);
    }
}

static void refuses(const char *text, int c, double ratio, ct_prune_rank rank, const char *says)
{
    model m;
    if (!model_new(&m, text, c, 28, 28))
        return;
    ct_pruned out;
    ct_prune_args args = {.ratio = ratio, .rank = rank};
    ct_status status = ct_plan_prune_channels(m.plan, m.x, m.y, &args, &out);
    CHECK(status == CT_ERR_ARG, "%s", ct_status_name(status));
    CHECK(strstr(ct_last_error(), says), "'%s' does not say '%s'", ct_last_error(), says);
    CHECK(!out.plan && !out.text && !out.layers, "something left");
    model_free(&m);
}

static void bad_arguments(void)
{
    const char *simple = ct_model_builtin("simplecnn");
    refuses(simple, 1, 0.0, CT_PRUNE_RANK_L1, "not in (0, 1)");
    refuses(simple, 1, 1.0, CT_PRUNE_RANK_L1, "not in (0, 1)");
    refuses(simple, 1, 0.5, CT_PRUNE_RANK_BN, "has none");
    refuses("model m\nc: conv classes 28\nflatten\n", 1, 0.5, CT_PRUNE_RANK_L1,
            "no convolution can be pruned");
    ct_sparsity s;
    model m;
    if (model_new(&m, simple, 1, 28, 28)) {
        CHECK(ct_plan_prune_weights(m.plan, m.y, 1.5, &s) == CT_ERR_ARG, "ratio 1.5");
        model_free(&m);
    }
}

static void unstructured_masks(void)
{
    model m;
    if (!model_new(&m, ct_model_builtin("vgg8_bn"), 1, 28, 28))
        return;
    ct_sparsity s;
    CHECK_OK(ct_plan_prune_weights(m.plan, m.y, 0.7, &s));
    int64_t count = 0, zeros = 0;
    for (int k = 0; k < s.n_layers; k++) {
        count += s.layers[k].count;
        zeros += s.layers[k].zeros;
    }
    CHECK(s.n_layers == 8, "%d weights", s.n_layers); /* six convs, two linear */
    CHECK(zeros == (int64_t)(0.7 * (double)count), "%lld of %lld", (long long)zeros,
          (long long)count);
    /* new values everywhere, then the masks: zeros exactly where pruned */
    for (int k = 0; k < s.n_layers; k++)
        write_random(m.plan, ct_graph_find(m.graph, s.layers[k].name), 5u + (uint64_t)k, 0.1f,
                     1.0f);
    CHECK_OK(ct_plan_apply_masks(m.plan, &s));
    for (int k = 0; k < s.n_layers; k++) {
        ct_tensor *w = ct_graph_find(m.graph, s.layers[k].name);
        float *v = malloc(ct_tensor_bytes(w));
        CHECK_OK(ct_plan_read(m.plan, w, v, ct_tensor_bytes(w)));
        int64_t wrong = 0;
        for (int64_t i = 0; i < s.layers[k].count; i++)
            wrong += (v[i] == 0.0f) != !s.layers[k].keep[i];
        CHECK(wrong == 0, "%s: %lld values disagree with the mask", s.layers[k].name,
              (long long)wrong);
        free(v);
    }
    ct_sparsity_free(&s);
    model_free(&m);
}

int main(void)
{
    if (ct_backend_new("cpu:1", &backend) != CT_OK) {
        fprintf(stderr, "%s\n", ct_last_error());
        return 1;
    }
    RUN(text_round_trip);
    RUN(prune_simplecnn_l1);
    RUN(prune_vgg8_bn_l1);
    RUN(prune_vgg8_bn_bn);
    RUN(prune_resnet18_ties);
    RUN(bad_arguments);
    RUN(unstructured_masks);
    ct_backend_free(backend);
    return harness_finish();
}
