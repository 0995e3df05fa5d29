/*
 * Model descriptions: building (ct_mtext + an input -> graph nodes).
 *
 * Statements run on a "current" tensor, which each layer replaces with its
 * result.  A scope holds the named tensors and values: the model has one,
 * each block call gets a fresh one (its arguments are its values, its input
 * the current tensor).  A seq shares its scope and adds a name prefix and a
 * counter that numbers its modules like nn.Sequential.
 */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model_build.h"
#include "ops/common.h"

#define CT_M_MAX_LOCALS 64
#define CT_M_MAX_REPEAT 1000    /* a repeat's count */
#define CT_M_BUDGET 100000      /* statements run per build */
#define CT_M_MAX_SIZE (1 << 24) /* channels, kernels, ... */

typedef struct scope {
    const char *value_names[CT_M_MAX_LOCALS];
    double values[CT_M_MAX_LOCALS];
    int n_values;
    const char *tensor_names[CT_M_MAX_LOCALS];
    ct_tensor *tensors[CT_M_MAX_LOCALS];
    int n_tensors;
    ct_tensor *current;
} scope;

typedef struct builder {
    ct_graph *graph;
    const ct_mtext *text;
    ct_tensor *input;
    int n_classes;
    int line;      /* of the statement being run */
    int budget;    /* statements left */
    bool reported; /* the graph's error already has the line */
    int depth;     /* block calls */
} builder;

/* Where a statement's layers get their names. */
typedef struct place {
    scope *scope;
    const char *prefix; /* "" or "layer1.0" */
    int *seq_index;     /* inside a seq: its next module number */
} place;

static bool fail(builder *b, ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail(builder *b, ct_status status, const char *fmt, ...)
{
    char message[768];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    ct_graph_fail(b->graph, status, "%s:%d: %s", b->text->model_name, b->line, message);
    b->reported = true;
    return false;
}

static bool ok(const builder *b)
{
    return ct_graph_status(b->graph) == CT_OK;
}

/* An error that an op or layer recorded gets the line in front. */
static void add_line_to_error(builder *b)
{
    ct_set_error(ct_graph_status(b->graph), "%s:%d: %s", b->text->model_name, b->line,
                 ct_last_error());
    b->reported = true;
}

/* ---- names ---- */

static bool join(builder *b, char *out, const char *prefix, const char *name)
{
    int n = snprintf(out, CT_M_NAME_CAPACITY, "%s%s%s", prefix, *prefix ? "." : "", name);
    if (n < CT_M_NAME_CAPACITY)
        return true;
    return fail(b, CT_ERR_ARG, "the name '%s.%s' is longer than %d characters", prefix, name,
                CT_M_NAME_CAPACITY - 1);
}

static ct_tensor *find_tensor(builder *b, const scope *sc, const char *name)
{
    if (strcmp(name, "x") == 0)
        return sc->current;
    if (strcmp(name, "input") == 0)
        return b->input;
    for (int i = sc->n_tensors - 1; i >= 0; i--)
        if (strcmp(sc->tensor_names[i], name) == 0)
            return sc->tensors[i];
    fail(b, CT_ERR_ARG,
         "no tensor named '%s' here (save it first: 'save %s'; blocks see only "
         "their own names, x and input)",
         name, name);
    return NULL;
}

static bool set_tensor(builder *b, scope *sc, const char *name, ct_tensor *t)
{
    for (int i = 0; i < sc->n_tensors; i++)
        if (strcmp(sc->tensor_names[i], name) == 0) {
            sc->tensors[i] = t;
            return true;
        }
    if (sc->n_tensors == CT_M_MAX_LOCALS)
        return fail(b, CT_ERR_ARG, "more than %d tensor names in one scope", CT_M_MAX_LOCALS);
    sc->tensor_names[sc->n_tensors] = name;
    sc->tensors[sc->n_tensors++] = t;
    return true;
}

/* ---- values ---- */

static bool builtin_value(const builder *b, const char *name, double *out)
{
    static const char *const names[] = {"channels", "height", "width", "classes"};
    double values[] = {(double)b->input->shape[1], (double)b->input->shape[2],
                       (double)b->input->shape[3], (double)b->n_classes};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) {
            *out = values[i];
            return true;
        }
    return false;
}

static bool set_value(builder *b, scope *sc, const char *name, double value)
{
    double ignored;
    if (builtin_value(b, name, &ignored) || strchr(name, '.'))
        return fail(b, CT_ERR_ARG, "'%s' cannot be set: %s", name,
                    strchr(name, '.') ? "a value's name has no '.'"
                                      : "channels, height, width and classes are the input's");
    for (int i = 0; i < sc->n_values; i++)
        if (strcmp(sc->value_names[i], name) == 0) {
            sc->values[i] = value;
            return true;
        }
    if (sc->n_values == CT_M_MAX_LOCALS)
        return fail(b, CT_ERR_ARG, "more than %d values in one scope", CT_M_MAX_LOCALS);
    sc->value_names[sc->n_values] = name;
    sc->values[sc->n_values++] = value;
    return true;
}

/* "shortcut.channels", "x.height": an attribute of a tensor. */
static bool tensor_attribute(builder *b, const scope *sc, const char *name, double *out)
{
    const char *dot = strrchr(name, '.');
    char tensor_name[CT_M_NAME_CAPACITY];
    snprintf(tensor_name, sizeof tensor_name, "%.*s", (int)(dot - name), name);
    int axis = strcmp(dot, ".channels") == 0 ? 1
               : strcmp(dot, ".height") == 0 ? 2
               : strcmp(dot, ".width") == 0  ? 3
                                             : 0;
    if (!axis)
        return fail(b, CT_ERR_ARG, "'%s': a tensor has .channels, .height and .width", name);
    ct_tensor *t = find_tensor(b, sc, tensor_name);
    if (!t)
        return false;
    *out = axis < t->ndim ? (double)t->shape[axis] : 1.0;
    return true;
}

static bool eval(builder *b, const scope *sc, const ct_mexpr *e, double *out)
{
    double x, y;
    b->line = e->line;
    switch (e->kind) {
    case CT_ME_NUMBER: *out = e->number; return true;
    case CT_ME_NAME:
        for (int i = sc->n_values - 1; i >= 0; i--)
            if (strcmp(sc->value_names[i], e->name) == 0) {
                *out = sc->values[i];
                return true;
            }
        if (builtin_value(b, e->name, out))
            return true;
        if (strchr(e->name, '.'))
            return tensor_attribute(b, sc, e->name, out);
        return fail(b, CT_ERR_ARG,
                    "unknown value '%s' (known: channels, height, width, classes, "
                    "the block's parameters, names set with let, <tensor>.channels|height|width)",
                    e->name);
    case CT_ME_NEG:
    case CT_ME_NOT:
        if (!eval(b, sc, e->a, &x))
            return false;
        *out = e->kind == CT_ME_NEG ? -x : (double)(x == 0);
        return true;
    case CT_ME_BINARY: break;
    }
    if (!eval(b, sc, e->a, &x))
        return false;
    if (e->op == CT_MB_AND || e->op == CT_MB_OR) { /* short-circuit, like Python */
        if ((e->op == CT_MB_AND) == (x == 0)) {
            *out = e->op == CT_MB_OR;
            return true;
        }
        if (!eval(b, sc, e->b, &y))
            return false;
        *out = y != 0;
        return true;
    }
    if (!eval(b, sc, e->b, &y))
        return false;
    b->line = e->line;
    switch (e->op) {
    case CT_MB_ADD: *out = x + y; break;
    case CT_MB_SUB: *out = x - y; break;
    case CT_MB_MUL: *out = x * y; break;
    case CT_MB_DIV:
        if (y == 0)
            return fail(b, CT_ERR_ARG, "division by zero");
        *out = x / y;
        break;
    case CT_MB_LT: *out = x < y; break;
    case CT_MB_LE: *out = x <= y; break;
    case CT_MB_GT: *out = x > y; break;
    case CT_MB_GE: *out = x >= y; break;
    case CT_MB_EQ: *out = x == y; break;
    case CT_MB_NE: *out = x != y; break;
    case CT_MB_AND:
    case CT_MB_OR: break;
    }
    return true;
}

/* A whole number in [min, CT_M_MAX_SIZE]. */
static bool eval_int(builder *b, const scope *sc, const ct_mexpr *e, const char *what, int min,
                     int *out)
{
    double value;
    if (!eval(b, sc, e, &value))
        return false;
    if (!(value >= min && value <= CT_M_MAX_SIZE) || value != floor(value))
        return fail(b, CT_ERR_ARG, "%s must be a whole number from %d to %d, got %g", what, min,
                    CT_M_MAX_SIZE, value);
    *out = (int)value;
    return true;
}

/* A layer argument (a pair or one value used twice), or its default. */
static bool eval_pair(builder *b, const scope *sc, const ct_marg *arg, const char *what, int min,
                      const int *fallback, int out[2])
{
    if (!arg->value[0]) {
        out[0] = fallback[0];
        out[1] = fallback[1];
        return true;
    }
    return eval_int(b, sc, arg->value[0], what, min, &out[0]) &&
           eval_int(b, sc, arg->pair ? arg->value[1] : arg->value[0], what, min, &out[1]);
}

/* ---- statements ---- */

static bool run_body(builder *b, place at, const ct_mbody *body);

/* custom NAME a0 a1 ...: the given numbers, in order, are the attributes. */
static ct_tensor *apply_custom(builder *b, const scope *sc, const ct_mstmt *s, ct_tensor *x)
{
    float attrs[CT_M_MAX_ARGS];
    int n_attrs = 0;
    while (n_attrs < CT_M_MAX_ARGS && s->args[n_attrs].value[0]) {
        double value = 0;
        if (!eval(b, sc, s->args[n_attrs].value[0], &value))
            return NULL;
        attrs[n_attrs++] = (float)value;
    }
    return ct_custom(b->graph, s->op, 1, &x, attrs, n_attrs);
}

static ct_tensor *apply_layer(builder *b, const place *at, const ct_mstmt *s, const char *name,
                              ct_tensor *x)
{
    const ct_marg *a = s->args;
    const scope *sc = at->scope;
    static const int zero[2] = {0, 0}, one[2] = {1, 1};
    int v1 = 1, v2 = 1, bias = 1, kernel[2], stride[2], pad[2], dilation[2];
    double p = 0.5;
    switch (s->layer) {
    case CT_ML_CONV: {
        if (!eval_int(b, sc, a[0].value[0], "conv out", 1, &v1) ||
            !eval_pair(b, sc, &a[1], "conv kernel", 1, one, kernel) ||
            !eval_pair(b, sc, &a[2], "conv stride", 1, one, stride) ||
            !eval_pair(b, sc, &a[3], "conv pad", 0, zero, pad) ||
            !eval_pair(b, sc, &a[4], "conv dilation", 1, one, dilation) ||
            (a[5].value[0] && !eval_int(b, sc, a[5].value[0], "conv groups", 1, &v2)) ||
            (a[6].value[0] && !eval_int(b, sc, a[6].value[0], "conv bias", 0, &bias)))
            return NULL;
        ct_conv_args args = {
            {stride[0], stride[1]}, {pad[0], pad[1]}, {dilation[0], dilation[1]}, v2};
        return ct_layer_conv2d(b->graph, name, x, v1, kernel[0], kernel[1], args, bias != 0);
    }
    case CT_ML_LINEAR:
        if (!eval_int(b, sc, a[0].value[0], "linear out", 1, &v1) ||
            (a[1].value[0] && !eval_int(b, sc, a[1].value[0], "linear bias", 0, &bias)))
            return NULL;
        return ct_layer_linear(b->graph, name, x, v1, bias != 0);
    case CT_ML_BN: return ct_layer_batchnorm2d(b->graph, name, x);
    case CT_ML_RELU: return ct_relu(b->graph, x);
    case CT_ML_SIGMOID: return ct_sigmoid(b->graph, x);
    case CT_ML_TANH: return ct_tanh(b->graph, x);
    case CT_ML_MAXPOOL:
    case CT_ML_AVGPOOL: {
        const char *pool = s->layer == CT_ML_MAXPOOL ? "maxpool" : "avgpool";
        if (!eval_pair(b, sc, &a[0], pool, 1, one, kernel) ||
            !eval_pair(b, sc, &a[1], pool, 1, kernel, stride) ||
            !eval_pair(b, sc, &a[2], pool, 0, zero, pad) ||
            (a[3].value[0] && !eval_int(b, sc, a[3].value[0], "count_include_pad", 0, &v2)))
            return NULL;
        ct_pool_args args = {
            {kernel[0], kernel[1]}, {stride[0], stride[1]}, {pad[0], pad[1]}, v2 == 0};
        return s->layer == CT_ML_MAXPOOL ? ct_maxpool2d(b->graph, x, args)
                                         : ct_avgpool2d(b->graph, x, args);
    }
    case CT_ML_GLOBAL_AVGPOOL: return ct_global_avgpool(b->graph, x);
    case CT_ML_DROPOUT:
        if (a[0].value[0] && !eval(b, sc, a[0].value[0], &p))
            return NULL;
        if (!(p >= 0 && p < 1)) {
            fail(b, CT_ERR_ARG, "dropout p must be in [0, 1), got %g", p);
            return NULL;
        }
        return ct_dropout(b->graph, x, (float)p);
    case CT_ML_FLATTEN: return ct_flatten(b->graph, x);
    case CT_ML_SOFTMAX: return ct_softmax(b->graph, x);
    case CT_ML_CUSTOM: return apply_custom(b, sc, s, x);
    case CT_ML_COUNT: break;
    }
    CT_ASSERT(!"unknown layer");
    return NULL;
}

static ct_tensor *call_block(builder *b, const place *at, const ct_mstmt *s, const char *prefix,
                             ct_tensor *x)
{
    const ct_mblock *block = &b->text->blocks[s->block];
    if (++b->depth > CT_M_MAX_DEPTH) {
        fail(b, CT_ERR_ARG, "block calls nested more than %d deep", CT_M_MAX_DEPTH);
        return NULL;
    }
    scope *inner = calloc(1, sizeof *inner);
    if (!inner) {
        fail(b, CT_ERR_MEMORY, "out of memory calling block %s", block->name);
        return NULL;
    }
    inner->current = x;
    bool good = true;
    for (int i = 0; good && i < block->n_params; i++) {
        double value;
        good = eval(b, s->args[i].value[0] ? at->scope : inner,
                    s->args[i].value[0] ? s->args[i].value[0] : block->defaults[i], &value) &&
               set_value(b, inner, block->params[i], value);
    }
    good = good && run_body(b, (place){inner, prefix, NULL}, &block->body);
    ct_tensor *result = good ? inner->current : NULL;
    free(inner);
    b->depth--;
    return result;
}

/* A layer, block call, seq, add or concat: input, output, names. */
static bool run_module(builder *b, place at, const ct_mstmt *s)
{
    char name[CT_M_NAME_CAPACITY] = "", number[16];
    if (s->name && !join(b, name, at.prefix, s->name))
        return false;
    if (!s->name && at.seq_index) {
        snprintf(number, sizeof number, "%d", (*at.seq_index)++);
        if (!join(b, name, at.prefix, number))
            return false;
    }
    if (!s->name && !at.seq_index)
        snprintf(name, sizeof name, "%s", at.prefix); /* unnamed block call: inline */
    ct_tensor *x = s->from ? find_tensor(b, at.scope, s->from) : at.scope->current;
    if (!x)
        return false;
    ct_tensor *y = NULL;
    if (s->kind == CT_MS_LAYER) {
        y = apply_layer(b, &at, s, name, x);
    } else if (s->kind == CT_MS_CALL) {
        y = call_block(b, &at, s, name, x);
    } else if (s->kind == CT_MS_SEQ) {
        int index = 0;
        ct_tensor *saved = at.scope->current;
        at.scope->current = x;
        if (run_body(b, (place){at.scope, name, &index}, &s->body))
            y = at.scope->current;
        at.scope->current = saved;
    } else {
        ct_tensor *xs[CT_M_MAX_NAMES + 1] = {x};
        for (int i = 0; i < s->n_names; i++)
            if (!(xs[i + 1] = find_tensor(b, at.scope, s->names[i])))
                return false;
        if (s->kind == CT_MS_CONCAT)
            y = ct_concat(b->graph, s->n_names + 1, xs);
        for (int i = 0; s->kind == CT_MS_ADD && i < s->n_names; i++)
            y = ct_add(b->graph, i ? y : x, xs[i + 1]);
    }
    b->line = s->line;
    if (!y) {
        if (!b->reported)
            add_line_to_error(b);
        return false;
    }
    if (s->to)
        return set_tensor(b, at.scope, s->to, y);
    at.scope->current = y;
    return true;
}

static bool run_statement(builder *b, place at, const ct_mstmt *s)
{
    b->line = s->line;
    if (--b->budget < 0)
        return fail(b, CT_ERR_ARG,
                    "more than %d statements run: do repeats or blocks multiply "
                    "too much?",
                    CT_M_BUDGET);
    double value;
    switch (s->kind) {
    case CT_MS_LAYER:
    case CT_MS_CALL:
    case CT_MS_SEQ:
    case CT_MS_ADD:
    case CT_MS_CONCAT: return run_module(b, at, s);
    case CT_MS_IF:
        if (!eval(b, at.scope, s->expr, &value))
            return false;
        return run_body(b, at, value != 0 ? &s->body : &s->else_body);
    case CT_MS_REPEAT: {
        int count = 0;
        if (!eval_int(b, at.scope, s->expr, "repeat count", 0, &count))
            return false;
        if (count > CT_M_MAX_REPEAT)
            return fail(b, CT_ERR_ARG, "repeat %d: at most %d", count, CT_M_MAX_REPEAT);
        for (int i = 0; i < count; i++)
            if (!run_body(b, at, &s->body))
                return false;
        return true;
    }
    case CT_MS_SAVE: return set_tensor(b, at.scope, s->name, at.scope->current);
    case CT_MS_USE: return (at.scope->current = find_tensor(b, at.scope, s->name)) != NULL;
    case CT_MS_LET:
        return eval(b, at.scope, s->expr, &value) && set_value(b, at.scope, s->name, value);
    case CT_MS_FAIL: {
        char shape[CT_DESCRIBE_CAPACITY];
        ct_tensor_describe(at.scope->current, shape, sizeof shape);
        return fail(b, CT_ERR_SHAPE, "%s (input %lldx%lldx%lld, current tensor %s)", s->message,
                    (long long)b->input->shape[1], (long long)b->input->shape[2],
                    (long long)b->input->shape[3], shape);
    }
    }
    CT_ASSERT(!"unknown statement");
    return false;
}

static bool run_body(builder *b, place at, const ct_mbody *body)
{
    for (int i = 0; i < body->count && ok(b); i++)
        if (!run_statement(b, at, body->items[i]))
            return false;
    return ok(b);
}

ct_tensor *ct_mtext_build(ct_graph *graph, const ct_mtext *text, ct_tensor *x, int n_classes)
{
    CT_ASSERT(x && x->graph == graph && x->ndim == 4 && n_classes >= 1);
    builder b = {.graph = graph,
                 .text = text,
                 .input = x,
                 .n_classes = n_classes,
                 .line = 1,
                 .budget = CT_M_BUDGET};
    scope *top = calloc(1, sizeof *top);
    ct_tensor *y = NULL;
    if (!top) {
        fail(&b, CT_ERR_MEMORY, "out of memory");
    } else {
        top->current = x;
        if (run_body(&b, (place){top, "", NULL}, &text->body))
            y = top->current;
    }
    if (y && (y->ndim != 2 || y->shape[1] != n_classes)) {
        CT_DESCRIBE(y);
        b.line = text->body.count ? text->body.items[text->body.count - 1]->line : 1;
        fail(&b, CT_ERR_SHAPE,
             "the model ends with %s, but logits are [N, %d] (end with "
             "'fc: linear classes')",
             y_desc, n_classes);
        y = NULL;
    }
    free(top);
    return y;
}
