/*
 * Forward and gradient checks of ops on the CPU backend: the fixture that
 * the tests/test_gradcheck_*.c files share.
 *
 * Each case builds a small cuttle graph (input x that requires a gradient,
 * explicit parameters, the op, an upstream gradient dy), runs one training
 * step and compares
 *   - cuttle's f32 forward with the double reference of tests/ref.c, and
 *   - cuttle's f32 gradients with central finite differences of
 *     L = sum(ref_forward(...) * dy), taken in double precision.
 * The reference sees exactly the f32 values that cuttle sees.
 */
#ifndef CT_TESTS_GRADCHECK_H
#define CT_TESTS_GRADCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"
#include "harness.h"

#define FORWARD_TOL 1e-5     /* rel err of the f32 forward vs the f64 reference */
#define PLAN_SEED 20240601u
#define RELU_MIN_ABS 1e-3f   /* keep relu inputs away from the kink */
#define MAX_VALUES 8
#define MAX_WRITES 4

/* A float tensor the test writes: x, a parameter or a buffer. */
typedef struct gc_value {
    ct_tensor *tensor;
    int64_t numel;
    float *f32;          /* written to the plan */
    double *f64;         /* the same values for the reference; perturbed by FD */
    bool differentiable; /* its gradient is checked */
} gc_value;

/* Any other tensor the test writes (labels). */
typedef struct gc_write {
    ct_tensor *tensor;
    const void *host;
    size_t bytes;
} gc_write;

typedef struct gc_case gc_case;
/* The reference forward of a case, from the f64 values of its gc_values. */
typedef void (*gc_forward_fn)(const gc_case *c, double *y);

typedef enum gc_mode {
    GC_VJP,  /* backward from y with an upstream gradient dy */
    GC_LOSS, /* y is a scalar loss: backward from it (dy = 1) */
    GC_EVAL  /* no backward; one CT_EVAL run */
} gc_mode;

/* One graph, its host values and one plan.  gc_end frees what it owns. */
struct gc_case {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    gc_value values[MAX_VALUES];
    int n_values;
    gc_write writes[MAX_WRITES];
    int n_writes;
    ct_tensor *y;
    ct_tensor *dy;
    int64_t ny;
    float *y_f32;  /* cuttle's forward, read back */
    float *dy_f32;
    double *dy_f64;
    gc_forward_fn forward;
    const void *args; /* the case's parameters, for `forward` */
    double work;      /* flops of one reference forward: sizes the FD subset */
    uint64_t seed;
};

/* Starts a case: an empty graph. */
bool gc_begin(gc_case *c, gc_forward_fn forward, const void *args, uint64_t seed);

void gc_end(gc_case *c);

/* calloc that exits the test when out of memory. */
void *gc_calloc(int64_t count, size_t size);

/* Copies the f32 values into the f64 ones (after a test changed them). */
void gc_sync(gc_value *v);

/* Each registers a tensor with random values in [lo, hi) and returns it.
 * x requires a gradient; a parameter's gradient is checked too, a buffer's
 * (it has none) is not. */
ct_tensor *gc_input(gc_case *c, const char *name, int ndim, const int64_t *shape,
                    float lo, float hi);
ct_tensor *gc_param(gc_case *c, const char *name, int ndim, const int64_t *shape,
                    float lo, float hi);
ct_tensor *gc_buffer(gc_case *c, const char *name, int ndim, const int64_t *shape,
                     float lo, float hi);

/* Moves every value of v with |value| < min_abs to +-(min_abs + |value|). */
void gc_away_from_zero(gc_value *v, float min_abs);

/* Finishes the graph around y (expected shape `shape`), plans it, writes
 * every value and runs one step.  False (with a failed CHECK) on error. */
bool gc_plan(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape, gc_mode mode);

void gc_check_forward(const gc_case *c);
/* Central differences of every differentiable value against cuttle's
 * gradient of it, on a subset sized by c->work. */
void gc_check_grads(gc_case *c);

/* The usual end of a case: plan, run, check the forward and the gradients. */
void gc_finish(gc_case *c, ct_tensor *y, int ndim, const int64_t *shape);

#endif
