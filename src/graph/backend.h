/*
 * The backend vtable.  A backend allocates buffers (host or device memory),
 * copies between them and the host, says which ops it supports, and runs
 * one node at a time.  The plan decides where every tensor lives; a backend
 * gets resolved pointers through ct_exec_data().
 */
#ifndef CT_GRAPH_BACKEND_H
#define CT_GRAPH_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"
#include "core/bn_input.h"
#include "core/rank_sum.h"
#include "core/step_values.h"
#include "graph/graph.h"

/* Where a tensor's bytes live in a plan. */
typedef enum ct_storage {
    CT_STORAGE_NONE = 0, /* not run by this plan */
    CT_STORAGE_ARENA,    /* transient: reused by liveness */
    CT_STORAGE_STATE     /* persistent: inputs, parameters, buffers */
} ct_storage;

/* What a kernel does to its output before storing it, decided by the plan
 * (src/graph/fuse.c): CT_EPILOGUE_RELU stores max(y, 0) (NaN kept);
 * CT_EPILOGUE_RELU_BWD, on a max pool's backward, a linear or
 * convolution backward data, an add (of dy's parts) or a global average
 * pool's backward, stores the backward of the relu whose output
 * is ct_exec.epilogue_src (for the pool, its own input): 0 where that
 * output is <= 0 (ct_relu_grad). */
typedef enum ct_epilogue {
    CT_EPILOGUE_NONE = 0,
    CT_EPILOGUE_RELU,
    CT_EPILOGUE_RELU_BWD
} ct_epilogue;

typedef struct ct_prepared ct_prepared; /* graph/prepared.h */

/* What a node needs to run: the resolved memory and the step's settings. */
typedef struct ct_exec {
    uint8_t *arena;
    uint8_t *state;
    const size_t *offsets;      /* by node id, for storage roots */
    const uint8_t *storage;     /* ct_storage by node id */
    void *workspace;
    const uint8_t *epilogue;    /* ct_epilogue by node id */
    /* by node id: the relu output a CT_EPILOGUE_RELU_BWD masks with (for a
     * max pool's backward, the pool's own input) */
    const ct_tensor *const *epilogue_src;
    /* by node id, or NULL: the max pool a conv+relu also computes (its
     * kernel writes the pool node's output, and in training its own; see
     * ct_fuse_maxpool) */
    const ct_tensor *const *pool_into;
    /* by node id, or NULL: the bias gradient (channel_sum node) a weight
     * gradient also computes (its kernel writes that node's output; see
     * ct_fuse_bias_grad) */
    const ct_tensor *const *bias_into;
    /* by node id, or NULL: the cross-entropy backward a loss also computes
     * (its kernel writes that node's output, seeded by the node's fill:
     * ct_exec_loss_grad; see ct_fuse_loss_grad) */
    const ct_tensor *const *grad_into;
    /* by node id, or NULL: the next node of the run that this one may run
     * with as a pair (ct_impl.run_pair; the plan gave the partner's outputs
     * lifetimes from this node on and the workspace room for both) */
    const ct_tensor *const *pair_next;
    /* by node id, or NULL: the node that computes this one as it reads it,
     * which then has no bytes of its own: the add of a batchnorm apply
     * (ct_fuse_bn_add), the weight gradient of a max pool's backward and of
     * the relu backward fused in it (ct_fuse_pool_bwd) */
    const ct_tensor *const *computed_in;
    /* by node id, or NULL: in training, the node's bytes (a convolution's,
     * and the relu's aliased to it) hold its 2x2 max pool's argmax codes,
     * one byte a window, instead of its values (ct_fuse_pool_codes) */
    const bool *pool_codes;
    /* by node id, or NULL: in training, the batchnorm parameter gradients
     * (bn_bwd_params nodes, [1] NULL where one) that an add or a max pool's
     * backward computes from the dy it stores (ct_fuse_bn_params;
     * ct_exec_bn_params) */
    const ct_tensor *const (*bn_params_into)[2];
    bool training;
    int64_t step;               /* training steps completed before this one */
    int64_t updates;            /* of them, those that updated (core/step_values.h) */
    float lr;
    uint64_t seed;
    /* lr and step again, in the backend's memory (NULL in eval): what the
     * kernels of a backend that replays steps read instead of the two above */
    const ct_step_values *step_values;
    /* by node id, or NULL: storage roots held elsewhere for this node (the
     * CPU's f32 copies of 16-bit tensors, cpu/widen.c) */
    void *const *direct;
    /* training steps with synchronized batchnorm (ct_plan_set_sync_bn):
     * batchnorm's statistics and gradients over every rank's batch; NULL:
     * this process's batch alone */
    const ct_rank_sum *sync_bn;
    /* memory kernels keep between inference runs (graph/prepared.h), NULL
     * in training steps */
    ct_prepared *prepared;
} ct_exec;

static inline void *ct_exec_data(const ct_exec *exec, const ct_tensor *t)
{
    const ct_tensor *root = t->view_of ? t->view_of : t;
    if (exec->direct && exec->direct[root->id])
        return (uint8_t *)exec->direct[root->id] + t->view_offset;
    uint8_t *base = exec->storage[root->id] == CT_STORAGE_STATE ? exec->state : exec->arena;
    return base + exec->offsets[root->id] + t->view_offset;
}

/* The output of the bias gradient (a channel_sum node) that this weight
 * gradient's kernel computes too (ct_exec.bias_into, graph/fuse.c), or
 * NULL. */
static inline float *ct_exec_bias_grad(const ct_exec *exec, const ct_tensor *node)
{
    const ct_tensor *bias = exec->bias_into ? exec->bias_into[node->id] : NULL;
    return bias ? (float *)ct_exec_data(exec, bias) : NULL;
}

/* The cross-entropy backward (dlogits <- fill seed, logits, labels) that
 * this cross-entropy's kernel computes too (ct_exec.grad_into,
 * graph/fuse.c), or NULL.  Its seed is src[0]'s attr.fill: the value,
 * times the step's loss scale where scaled. */
static inline const ct_tensor *ct_exec_loss_grad(const ct_exec *exec, const ct_tensor *node)
{
    return exec->grad_into ? exec->grad_into[node->id] : NULL;
}

/* The relu output that a relu_bwd fused into this node masks its result
 * with (CT_EPILOGUE_RELU_BWD: a backward data, a max pool's or a global
 * average pool's backward, an add; ct_relu_grad), or NULL. */
static inline const void *ct_exec_relu_mask(const ct_exec *exec, const ct_tensor *node)
{
    return exec->epilogue && exec->epilogue[node->id] == CT_EPILOGUE_RELU_BWD
               ? ct_exec_data(exec, exec->epilogue_src[node->id])
               : NULL;
}

/* Input s of an add as its kernel reads it: the tensor's values, or, where
 * the add computes that input's batchnorm (ct_exec.computed_in,
 * graph/fuse.c), the batchnorm's x, statistics, gamma and beta. */
static inline ct_bn_input ct_exec_add_input(const ct_exec *exec, const ct_tensor *add, int s)
{
    const ct_tensor *src = add->src[s];
    ct_bn_input in = {NULL, NULL, NULL, NULL};
    if (exec->computed_in && exec->computed_in[src->id] == add) {
        in.x = ct_exec_data(exec, src->src[0]);
        in.stats = (const float *)ct_exec_data(exec, src->src[1]);
        in.gamma = (const float *)ct_exec_data(exec, src->src[2]);
        in.beta = (const float *)ct_exec_data(exec, src->src[3]);
    } else {
        in.x = ct_exec_data(exec, src);
    }
    return in;
}

/* Whether the add computes a batchnorm of its inputs; then *a is one it
 * computes and *b the other (a batchnorm too, or plain values): the sum
 * is the same either way round, so the kernels take the batchnorm first. */
static inline bool ct_exec_bn_add_inputs(const ct_exec *exec, const ct_tensor *add,
                                         ct_bn_input *a, ct_bn_input *b)
{
    ct_bn_input first = ct_exec_add_input(exec, add, 0), second = ct_exec_add_input(exec, add, 1);
    *a = first.stats ? first : second;
    *b = first.stats ? second : first;
    return a->stats != NULL;
}

/* The i-th (0 or 1) batchnorm parameter gradient that this node (an add,
 * a max pool's backward) computes from its output, its dy
 * (ct_exec.bn_params_into, graph/fuse.c), or NULL. */
static inline const ct_tensor *ct_exec_bn_params(const ct_exec *exec, const ct_tensor *node,
                                                 int i)
{
    return exec->bn_params_into ? exec->bn_params_into[node->id][i] : NULL;
}

/* The max pool's backward that a convolution's weight gradient computes
 * its dy from (ct_exec.computed_in, graph/fuse.c ct_fuse_pool_bwd), or
 * NULL: dy itself, or the relu's backward fused into that pool's backward
 * (then the pool's epilogue is CT_EPILOGUE_RELU_BWD, ct_exec_relu_mask). */
static inline const ct_tensor *ct_exec_pool_bwd_of(const ct_exec *exec,
                                                   const ct_tensor *weight_grad)
{
    const ct_tensor *dy = weight_grad->src[1];
    const ct_tensor *pool = dy->op == CT_OP_RELU_BWD ? dy->src[1] : dy;
    return exec->computed_in && pool->op == CT_OP_MAXPOOL2D_BWD &&
                   exec->computed_in[pool->id] == weight_grad
               ? pool
               : NULL;
}

/* t's bytes as its max pool's argmax codes (ct_exec.pool_codes,
 * graph/fuse.c ct_fuse_pool_codes), or NULL where they hold its values. */
static inline uint8_t *ct_exec_pool_codes(const ct_exec *exec, const ct_tensor *t)
{
    return exec->training && exec->pool_codes && exec->pool_codes[t->id]
               ? (uint8_t *)ct_exec_data(exec, t)
               : NULL;
}

typedef struct ct_impl ct_impl; /* graph/impl.h */
enum { CT_MAX_IMPLS = 5 };

typedef struct ct_backend_i {
    ct_status (*alloc)(ct_backend *backend, size_t bytes, void **out);
    void (*release)(ct_backend *backend, void *ptr);
    ct_status (*write)(ct_backend *backend, void *dst, const void *host, size_t bytes);
    ct_status (*read)(ct_backend *backend, void *host, const void *src, size_t bytes);
    /* Backend memory to backend memory, ordered after the work queued so
     * far and before the work queued next (on a GPU: on its stream, without
     * waiting for it). */
    ct_status (*copy)(ct_backend *backend, void *dst, const void *src, size_t bytes);
    /* Called once before the nodes of a step (thread settings, streams). */
    void (*begin_step)(ct_backend *backend);
    /* Optional: runs `impl` (chosen by graph/impl.c from the backend's
     * table) on the node, with what the backend does around every node (a
     * GPU: its device made current, a profiler range).  NULL: impl->run. */
    ct_status (*run_node)(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                          const ct_impl *impl);
    ct_status (*synchronize)(ct_backend *backend);
    void (*destroy)(ct_backend *backend);
    /* Optional device clock for the profiler (src/prof/profiler.c) and the
     * autotuner (graph/impl.c); NULL where a node's time is the host clock
     * around it, as on the CPU, whose kernels are synchronous.  A GPU
     * backend makes n_marks markers (CUDA: cudaEventCreate), records mark i
     * on its stream after the work queued so far (cudaEventRecord; the
     * profiler puts mark 0 before the first node of a step, mark i+1 after
     * node i), and after synchronize gives the device time from mark 0 to
     * mark i (cudaEventElapsedTime).  `counts`: timer_counts will be asked
     * (an emulated GPU counts only while such a timer lives, several times
     * slower; the autotuner, which needs only the times, passes false). */
    ct_status (*timer_new)(ct_backend *backend, int n_marks, bool counts, void **timer);
    void (*timer_mark)(ct_backend *backend, void *timer, int mark);
    ct_status (*timer_elapsed_ns)(ct_backend *backend, void *timer, int mark, int64_t *ns);
    void (*timer_free)(ct_backend *backend, void *timer);
    /* Optional: the kernel counters of an emulated GPU at mark i, summed
     * since the process began (the profiler subtracts neighbours); only
     * `counted` and the counts, no prediction.  CT_ERR_UNSUPPORTED where
     * the device counts nothing. */
    ct_status (*timer_counts)(ct_backend *backend, void *timer, int mark,
                              ct_kernel_counts *out);
    /* Optional (NULL: CT_ERR_UNSUPPORTED): memory and math settings. */
    ct_status (*memory_stats)(const ct_backend *backend, ct_memory_stats *out);
    ct_status (*release_cache)(ct_backend *backend);
    ct_status (*set_memory_limit)(ct_backend *backend, size_t bytes);
    ct_status (*set_tf32)(ct_backend *backend, bool enabled);
    /* Optional (NULL: every precision): whether the device can compute in
     * `precision` (ct_precision), an error naming it and the choices if not. */
    ct_status (*check_precision)(const ct_backend *backend, int precision);
    /* Optional: rewrites backend->name after the kernels setting changed. */
    void (*rename)(ct_backend *backend);
    /* Optional (NULL: steps always run node by node): recording a step once
     * and replaying it (CUDA Graphs).  Between capture_begin and
     * capture_end the nodes' work is recorded, not run; capture_end gives
     * the replayable step (or an error, having recorded nothing usable);
     * replay queues it like the nodes it recorded; replay_free frees it.
     * replay_nodes: the device operations it holds. */
    ct_status (*capture_begin)(ct_backend *backend);
    ct_status (*capture_end)(ct_backend *backend, void **replay);
    ct_status (*replay)(ct_backend *backend, void *replay);
    void (*replay_free)(ct_backend *backend, void *replay);
    int (*replay_nodes)(const ct_backend *backend, const void *replay);
    /* Optional (NULL: the plan keeps staged inputs in host memory and
     * writes them when a run takes them; graph/staging.h): a buffer of
     * `bytes` for ct_plan_stage.  stage_put copies host data into it and
     * starts moving it to the device without waiting for the work queued
     * so far (a GPU: pinned memory, a copy stream); `host` may be reused
     * on return.  stage_take copies the buffer's data to dst, after that
     * move and before the work queued next.  stage_free waits for both. */
    ct_status (*stage_new)(ct_backend *backend, size_t bytes, void **stage);
    ct_status (*stage_put)(ct_backend *backend, void *stage, const void *host, size_t bytes);
    ct_status (*stage_take)(ct_backend *backend, void *stage, void *dst, size_t bytes);
    void (*stage_free)(ct_backend *backend, void *stage);
} ct_backend_i;

#define CT_BACKEND_NAME_CAPACITY 96
#define CT_KERNELS_CAPACITY 24

struct ct_backend {
    const ct_backend_i *iface;
    char name[CT_BACKEND_NAME_CAPACITY];
    int n_threads;
    /* Training plans whose tensors take at most this many bytes in all
     * give each its own (graph/plan.c); 0: every plan reuses the arena's
     * bytes, as inference plans always do. */
    size_t apart_arena_max;
    bool emulated; /* see ct_backend_emulated */
    /* Runs f32 kernels on 16-bit tensors: converts a node's f16 and bf16
     * inputs to f32 before it and rounds its 16-bit outputs after it (the
     * CPU's reduced-precision reference, cpu/backend.c). */
    bool widens_half;
    void *impl;
    /* Runs the ops this backend does not (a CPU backend, owned; NULL for
     * none), unless strict (ct_backend_set_strict).  See graph/plan.c. */
    ct_backend *fallback;
    bool strict;
    /* The implementations of each op and the choice among them (graph/impl.h). */
    const ct_impl *const (*impls)[CT_MAX_IMPLS]; /* [CT_OP_COUNT][CT_MAX_IMPLS] */
    char kernels[CT_KERNELS_CAPACITY];           /* "native", "vendor", "auto" or a name */
    struct ct_impl_memo *memo;                   /* per node shape: timed, failed */
    uint64_t refused_ops;                        /* test hook: bit per op (ct_backend_refuse) */
    /* test hook: plans fuse nothing (ct_impl_fuses and ct_impl_pairs say
     * no), every node runs its own kernel: the unfused reference of
     * tests/test_backend_ops.c */
    bool unfused;
    uint8_t impl_ran[CT_OP_COUNT];               /* bit i: implementation i of the op ran */
    /* vendor calls that failed, for any reason ("no algorithm for this
     * shape" too), so that another implementation ran: tests tell "the
     * vendor path is right" from "it failed quietly" by it */
    int vendor_failures;
    /* a step is being recorded (capture_begin): nothing may synchronize, so
     * the autotuner does not time and a failed vendor call is not
     * remembered (graph/impl.c); the plan then runs the step node by node */
    bool capturing;
    /* changes whenever the kernel choices may have (ct_impl_forget,
     * ct_impl_set_choice): a recorded step made before is stale */
    unsigned choices;
    bool replay_off; /* ct_backend_set_cuda_graph(backend, false) */
};

#endif
