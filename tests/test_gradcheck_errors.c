/*
 * Build-time errors of the ops the gradient checks cover: a builder given
 * mismatched shapes or dtypes returns NULL, sets the graph's status and
 * leaves a message that names the op and the shapes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"
#include "harness.h"

#define MAX_MESSAGE_NUMBERS 128

/* Whether the dims of `shape` appear, adjacent and in order, among the
 * integers written in msg, whatever the brackets and separators. */
static bool message_has_shape(const char *msg, int ndim, const int64_t *shape)
{
    int64_t numbers[MAX_MESSAGE_NUMBERS];
    int count = 0;
    for (const char *p = msg; *p && count < MAX_MESSAGE_NUMBERS;) {
        if (*p >= '0' && *p <= '9') {
            char *end;
            numbers[count++] = strtoll(p, &end, 10);
            p = end;
        } else {
            p++;
        }
    }
    for (int start = 0; start + ndim <= count; start++) {
        int i = 0;
        while (i < ndim && numbers[start + i] == shape[i])
            i++;
        if (i == ndim)
            return true;
    }
    return false;
}

static void check_build_error(ct_graph *graph, const ct_tensor *result, ct_status expected,
                              const char *op)
{
    CHECK(result == NULL, "%s returned a tensor", op);
    CHECK(ct_graph_status(graph) == expected, "graph status %s, expected %s",
          ct_status_name(ct_graph_status(graph)), ct_status_name(expected));
    CHECK(strstr(ct_last_error(), op) != NULL, "message does not name %s: \"%s\"", op,
          ct_last_error());
}

static void test_error_conv2d_channels(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t x_shape[4] = {2, 3, 8, 8}, w_shape[4] = {4, 5, 3, 3};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, x_shape);
    ct_tensor *w = ct_param(graph, "conv.weight", 4, w_shape, CT_INIT_UNIFORM, 0.1f);
    ct_conv_args args = {{1, 1}, {1, 1}, {1, 1}, 1};
    ct_tensor *y = ct_conv2d(graph, x, w, NULL, args);
    check_build_error(graph, y, CT_ERR_SHAPE, "conv2d");
    const char *msg = ct_last_error();
    CHECK(message_has_shape(msg, 4, x_shape), "message lacks x's shape: \"%s\"", msg);
    CHECK(message_has_shape(msg, 4, w_shape), "message lacks w's shape: \"%s\"", msg);
    /* A builder given NULL keeps the first message and status. */
    CHECK(ct_relu(graph, y) == NULL, "relu of NULL returned a tensor");
    CHECK(strstr(ct_last_error(), "conv2d") != NULL, "first message overwritten: \"%s\"",
          ct_last_error());
    CHECK(ct_graph_status(graph) == CT_ERR_SHAPE, "graph status became %s",
          ct_status_name(ct_graph_status(graph)));
    ct_graph_free(graph);
}

static void test_error_linear_in_features(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t x_shape[2] = {4, 10}, w_shape[2] = {5, 11};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 2, x_shape);
    ct_tensor *w = ct_param(graph, "fc.weight", 2, w_shape, CT_INIT_UNIFORM, 0.1f);
    check_build_error(graph, ct_linear(graph, x, w, NULL), CT_ERR_SHAPE, "linear");
    CHECK(message_has_shape(ct_last_error(), 2, x_shape), "message lacks x's shape: \"%s\"",
          ct_last_error());
    CHECK(message_has_shape(ct_last_error(), 2, w_shape), "message lacks w's shape: \"%s\"",
          ct_last_error());
    ct_graph_free(graph);
}

static void test_error_add_shapes(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t a_shape[4] = {2, 3, 4, 4}, b_shape[4] = {2, 3, 4, 5};
    ct_tensor *a = ct_input(graph, "a", CT_F32, 4, a_shape);
    ct_tensor *b = ct_input(graph, "b", CT_F32, 4, b_shape);
    check_build_error(graph, ct_add(graph, a, b), CT_ERR_SHAPE, "add");
    ct_graph_free(graph);
}

static void test_error_cross_entropy_float_labels(void)
{
    ct_graph *graph = ct_graph_new();
    CHECK(graph != NULL, "ct_graph_new: %s", ct_last_error());
    if (!graph)
        return;
    int64_t logits_shape[2] = {4, 5}, labels_shape[1] = {4};
    ct_tensor *logits = ct_input(graph, "logits", CT_F32, 2, logits_shape);
    ct_tensor *labels = ct_input(graph, "labels", CT_F32, 1, labels_shape);
    check_build_error(graph, ct_cross_entropy(graph, logits, labels, 0.0f), CT_ERR_DTYPE,
                      "cross_entropy");
    ct_graph_free(graph);
}

int main(void)
{
    RUN(test_error_conv2d_channels);
    RUN(test_error_linear_in_features);
    RUN(test_error_add_shapes);
    RUN(test_error_cross_entropy_float_labels);
    return harness_finish();
}
