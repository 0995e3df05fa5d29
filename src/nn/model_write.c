/*
 * A built graph written back as a model text (model_write.h).
 *
 * Statements run on the current tensor, so the graph's nodes are written in
 * their order (a topological one) and each reads the node written just
 * before it; a node read in any other way is saved under "t<id>" after it
 * is written, and `use`, `add` and `concat` name it where it is read.  The
 * model's input is `input`.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/model_write.h"

typedef struct text_buf {
    char *data;
    size_t len, cap;
    bool failed;
} text_buf;

static void put(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0, fmt,
                          args);
        va_end(args);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if (b->data && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *data = realloc(b->data, cap);
        if (!data) {
            b->failed = true;
            return;
        }
        b->data = data;
        b->cap = cap;
    }
}

/* "5" for a square pair, "(1, 7)" otherwise. */
static void put_pair(text_buf *b, const char *key, int h, int w)
{
    if (key)
        put(b, " %s=", key);
    else
        put(b, " ");
    if (h == w)
        put(b, "%d", h);
    else
        put(b, "(%d, %d)", h, w);
}

/* The layer's name: its parameter's without ".weight". */
static ct_status layer_name(const ct_tensor *node, const ct_tensor *weight, char *out,
                            size_t capacity)
{
    const char *name = weight->name;
    size_t len = name ? strlen(name) : 0, suffix = strlen(".weight");
    if (!name || len <= suffix || strcmp(name + len - suffix, ".weight") != 0 ||
        len - suffix >= capacity)
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "model text: %s reads a parameter not named NAME.weight (%s); a "
                            "model file cannot state it",
                            ct_tensor_name(node), name ? name : "unnamed");
    memcpy(out, name, len - suffix);
    out[len - suffix] = '\0';
    return CT_OK;
}

static bool written(const ct_tensor *t)
{
    return t->op != CT_OP_LEAF && t->op != CT_OP_BN_STATS;
}

/* The tensors a written node reads as tensors of the model (a batchnorm its
 * input, not its statistics). */
static int data_srcs(const ct_tensor *t)
{
    if (t->op == CT_OP_ADD || t->op == CT_OP_CONCAT)
        return t->n_src;
    return 1;
}

static ct_status unsupported(const ct_tensor *t)
{
    return ct_set_error(CT_ERR_UNSUPPORTED,
                        "model text: %s (%s) has no statement in the model format",
                        ct_tensor_name(t), ct_op_name(t->op));
}

static ct_status write_node(text_buf *b, const ct_tensor *t, const int *out_channels)
{
    char name[256];
    switch (t->op) {
    case CT_OP_CONV2D: {
        const ct_conv2d_shape *c = &t->attr.conv;
        CT_TRY(layer_name(t, t->src[1], name, sizeof name));
        int out = out_channels && out_channels[t->id] ? out_channels[t->id] : c->out_channels;
        put(b, "%s: conv %d", name, out);
        put_pair(b, NULL, c->kernel_h, c->kernel_w);
        if (c->stride_h != 1 || c->stride_w != 1)
            put_pair(b, "stride", c->stride_h, c->stride_w);
        if (c->pad_h || c->pad_w)
            put_pair(b, "pad", c->pad_h, c->pad_w);
        if (c->dilation_h != 1 || c->dilation_w != 1)
            put_pair(b, "dilation", c->dilation_h, c->dilation_w);
        if (c->groups != 1)
            put(b, " groups=%d", c->groups);
        put(b, "%s\n", t->n_src == 3 ? "" : " bias=false");
        return CT_OK;
    }
    case CT_OP_LINEAR:
        CT_TRY(layer_name(t, t->src[1], name, sizeof name));
        put(b, "%s: linear %lld%s\n", name, (long long)t->shape[1],
            t->n_src == 3 ? "" : " bias=false");
        return CT_OK;
    case CT_OP_BN_APPLY:
        CT_TRY(layer_name(t, t->src[2], name, sizeof name));
        put(b, "%s: bn\n", name);
        return CT_OK;
    case CT_OP_RELU:
        put(b, "relu\n");
        return CT_OK;
    case CT_OP_SIGMOID:
        put(b, "sigmoid\n");
        return CT_OK;
    case CT_OP_TANH:
        put(b, "tanh\n");
        return CT_OK;
    case CT_OP_MAXPOOL2D:
    case CT_OP_AVGPOOL2D: {
        const ct_pool2d_shape *p = &t->attr.pool;
        put(b, "%s", t->op == CT_OP_MAXPOOL2D ? "maxpool" : "avgpool");
        put_pair(b, NULL, p->kernel_h, p->kernel_w);
        if (p->stride_h != p->kernel_h || p->stride_w != p->kernel_w)
            put_pair(b, "stride", p->stride_h, p->stride_w);
        if (p->pad_h || p->pad_w)
            put_pair(b, "pad", p->pad_h, p->pad_w);
        put(b, "%s\n", t->op == CT_OP_AVGPOOL2D && p->exclude_pad ? " count_include_pad=false"
                                                                   : "");
        return CT_OK;
    }
    case CT_OP_GLOBAL_AVGPOOL:
        put(b, "global_avgpool\n");
        return CT_OK;
    case CT_OP_DROPOUT:
        put(b, "dropout %.6g\n", (double)t->attr.dropout.p);
        return CT_OK;
    case CT_OP_SOFTMAX:
        put(b, "softmax\n");
        return CT_OK;
    case CT_OP_VIEW: {
        const ct_tensor *x = t->src[0];
        if (t->ndim == 2 && t->view_offset == x->view_offset && x->ndim >= 1 &&
            t->shape[0] == x->shape[0]) {
            put(b, "flatten\n");
            return CT_OK;
        }
        return unsupported(t);
    }
    default:
        return unsupported(t);
    }
}

static void put_tensor_name(text_buf *b, const ct_tensor *t, const ct_tensor *x)
{
    if (t == x)
        put(b, "input");
    else
        put(b, "t%d", t->id);
}

static ct_status write_all(text_buf *b, const ct_graph *graph, const ct_tensor *x,
                           const ct_tensor *y, const bool *needed, const int *out_channels)
{
    size_t n = (size_t)graph->n_nodes;
    bool *saved = calloc(n, sizeof *saved);
    if (!saved)
        return ct_set_error(CT_ERR_MEMORY, "model text: out of host memory");
    /* which nodes are read other than by the node written right after them */
    const ct_tensor *previous = x;
    for (int i = 0; i <= y->id; i++) {
        const ct_tensor *t = graph->nodes[i];
        if (!needed[i] || !written(t))
            continue;
        for (int s = 0; s < data_srcs(t); s++)
            if (s > 0 || t->src[s] != previous)
                saved[t->src[s]->id] = true;
        previous = t;
    }
    ct_status status = CT_OK;
    const ct_tensor *current = x;
    for (int i = 0; i <= y->id && status == CT_OK; i++) {
        const ct_tensor *t = graph->nodes[i];
        if (!needed[i] || !written(t))
            continue;
        for (int s = 0; s < t->n_src && status == CT_OK; s++)
            if (t->src[s]->op == CT_OP_LEAF && t->src[s]->role == CT_ROLE_INPUT && t->src[s] != x)
                status = ct_set_error(CT_ERR_UNSUPPORTED, "model text: %s reads the input %s, "
                                      "not the model's", ct_tensor_name(t),
                                      ct_tensor_name(t->src[s]));
        if (status != CT_OK)
            break;
        if (t->src[0] != current) {
            put(b, "use ");
            put_tensor_name(b, t->src[0], x);
            put(b, "\n");
        }
        if (t->op == CT_OP_ADD || t->op == CT_OP_CONCAT) {
            put(b, "%s", t->op == CT_OP_ADD ? "add" : "concat");
            for (int s = 1; s < t->n_src; s++) {
                put(b, " ");
                put_tensor_name(b, t->src[s], x);
            }
            put(b, "\n");
        } else {
            status = write_node(b, t, out_channels);
        }
        if (saved[i])
            put(b, "save t%d\n", t->id);
        current = t;
    }
    free(saved);
    return status;
}

ct_status ct_model_write(const ct_graph *graph, const ct_tensor *x, const ct_tensor *y,
                         const int *out_channels, const char *model_name, const char *header,
                         char **text)
{
    *text = NULL;
    if (!graph || !x || !y || x->graph != graph || y->graph != graph || x->role != CT_ROLE_INPUT)
        return ct_set_error(CT_ERR_ARG, "model text: x (an input) and y of the graph are needed");
    bool *needed = calloc((size_t)graph->n_nodes, sizeof *needed);
    if (!needed)
        return ct_set_error(CT_ERR_MEMORY, "model text: out of host memory");
    needed[y->id] = true;
    for (int i = y->id; i >= 0; i--)
        for (int s = 0; needed[i] && s < graph->nodes[i]->n_src; s++)
            needed[graph->nodes[i]->src[s]->id] = true;
    text_buf b = {0};
    for (const char *line = header; line && *line;) {
        size_t len = strcspn(line, "\n");
        put(&b, "# %.*s\n", (int)len, line);
        line += len + (line[len] == '\n');
    }
    put(&b, "model %s\n\n", model_name && *model_name ? model_name : "model");
    ct_status status = needed[x->id]
                           ? write_all(&b, graph, x, y, needed, out_channels)
                           : ct_set_error(CT_ERR_ARG, "model text: y does not depend on x");
    free(needed);
    if (status == CT_OK && b.failed)
        status = ct_set_error(CT_ERR_MEMORY, "model text: out of host memory");
    if (status != CT_OK) {
        free(b.data);
        return status;
    }
    *text = b.data;
    return CT_OK;
}
