/* See gradcheck.h. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"

#define GRAD_TOL 1e-4        /* rel err of the f32 gradients vs finite differences */
#define FD_REL_STEP 1e-6     /* finite-difference step, relative to the tensor's scale */
#define FD_BUDGET_FLOPS 5e6  /* reference work per checked tensor, to bound the run time */
#define FD_MIN_CHECKS 8      /* elements checked per tensor, at least (if it has them) */
#define FD_MAX_CHECKS 2000   /* ... and at most */

bool gc_begin(gc_case *c, gc_forward_fn forward, const void *args, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->forward = forward;
    c->args = args;
    c->seed = seed;
    c->graph = ct_graph_new();
    CHECK(c->graph != NULL, "ct_graph_new: %s", ct_last_error());
    return c->graph != NULL;
}

void gc_end(gc_case *c)
{
    ct_plan_free(c->plan);
    ct_backend_free(c->backend);
    ct_graph_free(c->graph);
    for (int i = 0; i < c->n_values; i++) {
        free(c->values[i].f32);
        free(c->values[i].f64);
    }
    free(c->y_f32);
    free(c->dy_f32);
    free(c->dy_f64);
}

void *gc_calloc(int64_t count, size_t size)
{
    void *p = calloc((size_t)(count > 0 ? count : 1), size);
    if (!p) {
        fprintf(stderr, "gradcheck: out of memory\n");
        exit(2);
    }
    return p;
}

void gc_sync(gc_value *v)
{
    for (int64_t i = 0; i < v->numel; i++)
        v->f64[i] = v->f32[i];
}

/* Registers t with random values in [lo, hi); returns t. */
static ct_tensor *gc_add(gc_case *c, ct_tensor *t, const char *what, float lo, float hi,
                         bool differentiable)
{
    CHECK(t != NULL, "creating %s: %s", what, ct_last_error());
    CHECK(c->n_values < MAX_VALUES, "more than %d values: raise MAX_VALUES", MAX_VALUES);
    if (!t || c->n_values == MAX_VALUES)
        return t;
    gc_value *v = &c->values[c->n_values++];
    v->tensor = t;
    v->numel = ct_tensor_numel(t);
    v->f32 = gc_calloc(v->numel, sizeof(float));
    v->f64 = gc_calloc(v->numel, sizeof(double));
    v->differentiable = differentiable;
    harness_fill(v->f32, v->numel, c->seed * 131 + (uint64_t)c->n_values, lo, hi);
    gc_sync(v);
    return t;
}

ct_tensor *gc_input(gc_case *c, const char *name, int ndim, const int64_t *shape,
                    float lo, float hi)
{
    ct_tensor *t = ct_input(c->graph, name, CT_F32, ndim, shape);
    if (t)
        ct_tensor_requires_grad(t);
    return gc_add(c, t, name, lo, hi, true);
}

ct_tensor *gc_param(gc_case *c, const char *name, int ndim, const int64_t *shape,
                    float lo, float hi)
{
    ct_tensor *t = ct_param(c->graph, name, ndim, shape, CT_INIT_UNIFORM, 0.5f);
    return gc_add(c, t, name, lo, hi, true);
}

ct_tensor *gc_buffer(gc_case *c, const char *name, int ndim, const int64_t *shape,
                     float lo, float hi)
{
    ct_tensor *t = ct_buffer(c->graph, name, CT_F32, ndim, shape, CT_INIT_CONST, 1.0f);
    return gc_add(c, t, name, lo, hi, false);
}

void gc_away_from_zero(gc_value *v, float min_abs)
{
    for (int64_t i = 0; i < v->numel; i++)
        if (fabsf(v->f32[i]) < min_abs)
            v->f32[i] = v->f32[i] < 0 ? v->f32[i] - min_abs : v->f32[i] + min_abs;
    gc_sync(v);
}

/* "[2,3,8,8]" into text (at least 96 bytes). */
static void format_shape(char *text, int ndim, const int64_t *shape)
{
    int at = sprintf(text, "[");
    for (int i = 0; i < ndim && i < CT_MAX_DIMS; i++)
        at += sprintf(text + at, i ? ",%lld" : "%lld", (long long)shape[i]);
    sprintf(text + at, "]");
}

static bool gc_check_shape(const ct_tensor *y, int ndim, const int64_t *shape)
{
    int64_t got[CT_MAX_DIMS];
    int got_ndim = ct_tensor_ndim(y);
    bool same = got_ndim == ndim;
    for (int i = 0; i < got_ndim && i < CT_MAX_DIMS; i++) {
        got[i] = ct_tensor_dim(y, i);
        same = same && got[i] == shape[i];
    }
    char got_text[160], expected_text[160];
    format_shape(got_text, got_ndim, got);
    format_shape(expected_text, ndim, shape);
    CHECK(same, "output %s has shape %s, expected %s", ct_tensor_name(y), got_text,
          expected_text);
    return same;
}

bool gc_plan(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape, gc_mode mode)
{
    CHECK(y != NULL, "building the op: %s", ct_last_error());
    CHECK(ct_graph_status(c->graph) == CT_OK, "graph status %s: %s",
          ct_status_name(ct_graph_status(c->graph)), ct_last_error());
    if (!y || ct_graph_status(c->graph) != CT_OK || !gc_check_shape(y, ndim, shape))
        return false;
    c->y = y;
    c->ny = ct_tensor_numel(y);
    ct_tensor_keep(y);
    c->dy_f64 = gc_calloc(c->ny, sizeof(double));
    if (mode == GC_VJP) {
        c->dy = ct_input(c->graph, "dy", CT_F32, ndim, shape);
        CHECK(c->dy != NULL, "ct_input(dy): %s", ct_last_error());
        if (!c->dy)
            return false;
        c->dy_f32 = gc_calloc(c->ny, sizeof(float));
        harness_fill(c->dy_f32, c->ny, c->seed * 7 + 3, -1.0f, 1.0f);
        for (int64_t i = 0; i < c->ny; i++)
            c->dy_f64[i] = c->dy_f32[i];
        ct_status status = ct_graph_backward_vjp(c->graph, y, c->dy);
        CHECK(status == CT_OK, "ct_graph_backward_vjp: %s: %s", ct_status_name(status),
              ct_last_error());
        if (status != CT_OK)
            return false;
    } else if (mode == GC_LOSS) {
        c->dy_f64[0] = 1.0;
        ct_status status = ct_graph_backward(c->graph, y);
        CHECK(status == CT_OK, "ct_graph_backward: %s: %s", ct_status_name(status),
              ct_last_error());
        if (status != CT_OK)
            return false;
    }
    /* Input gradients are not state: ask for them to be kept. */
    for (int i = 0; mode != GC_EVAL && i < c->n_values; i++) {
        ct_tensor *grad = ct_tensor_grad(c->values[i].tensor);
        if (grad && !ct_tensor_is_param(c->values[i].tensor))
            ct_tensor_keep(grad);
    }
    ct_status status = ct_backend_new("cpu", &c->backend);
    CHECK(status == CT_OK, "ct_backend_new: %s", ct_last_error());
    if (status != CT_OK)
        return false;
    status = ct_plan_new(c->graph, c->backend, PLAN_SEED, &c->plan);
    CHECK(status == CT_OK, "ct_plan_new: %s: %s", ct_status_name(status), ct_last_error());
    if (status != CT_OK)
        return false;
    bool ok = true;
    for (int i = 0; i < c->n_values; i++) {
        gc_value *v = &c->values[i];
        status = ct_plan_write(c->plan, v->tensor, v->f32, (size_t)v->numel * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_write(%s): %s", ct_tensor_name(v->tensor),
              ct_last_error());
        ok = ok && status == CT_OK;
    }
    for (int i = 0; i < c->n_writes; i++) {
        status = ct_plan_write(c->plan, c->writes[i].tensor, c->writes[i].host,
                               c->writes[i].bytes);
        CHECK(status == CT_OK, "ct_plan_write(%s): %s", ct_tensor_name(c->writes[i].tensor),
              ct_last_error());
        ok = ok && status == CT_OK;
    }
    if (c->dy) {
        status = ct_plan_write(c->plan, c->dy, c->dy_f32, (size_t)c->ny * sizeof(float));
        CHECK(status == CT_OK, "ct_plan_write(dy): %s", ct_last_error());
        ok = ok && status == CT_OK;
    }
    if (!ok)
        return false;
    status = ct_plan_run(c->plan, mode == GC_EVAL ? CT_EVAL : CT_TRAIN);
    CHECK(status == CT_OK, "ct_plan_run: %s: %s", ct_status_name(status), ct_last_error());
    if (status != CT_OK)
        return false;
    c->y_f32 = gc_calloc(c->ny, sizeof(float));
    status = ct_plan_read(c->plan, y, c->y_f32, (size_t)c->ny * sizeof(float));
    CHECK(status == CT_OK, "ct_plan_read(y): %s", ct_last_error());
    return status == CT_OK;
}

void gc_check_forward(const gc_case *c)
{
    double *y_ref = gc_calloc(c->ny, sizeof(double));
    c->forward(c, y_ref);
    double err = harness_rel_err_f64(c->y_f32, y_ref, c->ny);
    CHECK(err <= FORWARD_TOL, "forward rel err %.3g > %.1g (y[0] = %.8g, expected %.8g)", err,
          FORWARD_TOL, c->y_f32[0], y_ref[0]);
    free(y_ref);
}

/* L = sum(ref_forward * dy) */
static double gc_loss(const gc_case *c, double *y_scratch)
{
    c->forward(c, y_scratch);
    double loss = 0.0;
    for (int64_t i = 0; i < c->ny; i++)
        loss += y_scratch[i] * c->dy_f64[i];
    return loss;
}

/* Element k of a deterministic, evenly spread subset of n_checks of numel. */
static int64_t gc_pick(int64_t k, int64_t n_checks, int64_t numel)
{
    if (n_checks >= numel)
        return k;
    int64_t stride = numel / n_checks;
    return k * stride + (k * 7919) % stride;
}

/* Central differences for value v against cuttle's gradient of it. */
static void gc_check_value_grad(gc_case *c, gc_value *v)
{
    ct_tensor *grad = ct_tensor_grad(v->tensor);
    CHECK(grad != NULL, "no gradient for %s", ct_tensor_name(v->tensor));
    if (!grad)
        return;
    CHECK(ct_tensor_numel(grad) == v->numel, "gradient of %s has %lld elements, expected %lld",
          ct_tensor_name(v->tensor), (long long)ct_tensor_numel(grad), (long long)v->numel);
    if (ct_tensor_numel(grad) != v->numel)
        return;
    float *analytic = gc_calloc(v->numel, sizeof(float));
    ct_status status = ct_plan_read(c->plan, grad, analytic, (size_t)v->numel * sizeof(float));
    CHECK(status == CT_OK, "ct_plan_read(grad of %s): %s", ct_tensor_name(v->tensor),
          ct_last_error());

    double work = c->work > 0 ? c->work : (double)c->ny;
    int64_t n_checks = (int64_t)(FD_BUDGET_FLOPS / (2.0 * work));
    if (n_checks < FD_MIN_CHECKS)
        n_checks = FD_MIN_CHECKS;
    if (n_checks > FD_MAX_CHECKS)
        n_checks = FD_MAX_CHECKS;
    if (n_checks > v->numel)
        n_checks = v->numel;

    double scale = 0.0;
    for (int64_t i = 0; i < v->numel; i++)
        scale = fmax(scale, fabs(v->f64[i]));
    double step = FD_REL_STEP * fmax(scale, 1e-3);

    double *y_scratch = gc_calloc(c->ny, sizeof(double));
    double *numeric = gc_calloc(n_checks, sizeof(double));
    float *picked = gc_calloc(n_checks, sizeof(float));
    for (int64_t k = 0; k < n_checks; k++) {
        int64_t i = gc_pick(k, n_checks, v->numel);
        double saved = v->f64[i];
        v->f64[i] = saved + step;
        double loss_plus = gc_loss(c, y_scratch);
        v->f64[i] = saved - step;
        double loss_minus = gc_loss(c, y_scratch);
        v->f64[i] = saved;
        numeric[k] = (loss_plus - loss_minus) / (2.0 * step);
        picked[k] = analytic[i];
    }
    double err = harness_rel_err_f64(picked, numeric, n_checks);
    CHECK(err <= GRAD_TOL, "gradient of %s: rel err %.3g > %.1g over %lld of %lld elements "
          "(first: got %.8g, finite differences %.8g)", ct_tensor_name(v->tensor), err, GRAD_TOL,
          (long long)n_checks, (long long)v->numel, picked[0], numeric[0]);
    free(y_scratch);
    free(numeric);
    free(picked);
    free(analytic);
}

void gc_check_grads(gc_case *c)
{
    for (int i = 0; i < c->n_values; i++)
        if (c->values[i].differentiable)
            gc_check_value_grad(c, &c->values[i]);
}

void gc_finish(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape)
{
    if (gc_plan(c, y, ndim, shape, GC_VJP)) {
        gc_check_forward(c);
        gc_check_grads(c);
    }
    gc_end(c);
}
