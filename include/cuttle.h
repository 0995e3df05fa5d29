/*
 * cuttle.h — the public C API of cuttle, a small deep learning framework for
 * convolutional networks.
 *
 * The model is built once into a static graph of op nodes.  Every node is a
 * tensor (`ct_tensor`): inputs, parameters, buffers (batchnorm running
 * statistics) and the results of ops.  `ct_graph_backward` appends the
 * gradient nodes, `ct_graph_sgd`/`ct_graph_adam` append the optimizer update
 * nodes, and `ct_plan_new` lays the whole step out in memory on a backend.
 * `ct_plan_run` then runs a training step (or an evaluation pass) without
 * allocating anything.
 *
 * Errors are values.  Functions that can fail return `ct_status` and leave a
 * message in the thread-local `ct_last_error()`.  The op builders return a
 * tensor, or NULL on error; a builder given a NULL input returns NULL without
 * overwriting the first message, so a whole model can be built and checked
 * once with `ct_graph_status()` (see docs/design.md).
 *
 * Ownership: a graph owns its tensors; `ct_graph_free` frees them all.  A
 * plan owns its memory on the backend.  Every `_new` has a `_free` that
 * accepts NULL.  Free plans before the graph and the backend they use.
 */
#ifndef CUTTLE_H
#define CUTTLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports: exactly the functions marked CT_API
 * (the library is built with -fvisibility=hidden; docs/architecture.md). */
#define CT_API __attribute__((visibility("default")))

#define CT_VERSION_MAJOR 0
#define CT_VERSION_MINOR 1
#define CT_VERSION_PATCH 0
#define CT_VERSION_STRING "0.1.0"

/* ---- status and errors ------------------------------------------------ */

typedef enum ct_status {
    CT_OK = 0,
    CT_ERR_ARG,         /* a bad argument: NULL, out of range, wrong kind of tensor */
    CT_ERR_SHAPE,       /* shapes that do not fit together */
    CT_ERR_DTYPE,       /* dtypes that do not fit together */
    CT_ERR_MEMORY,      /* host or device memory ran out */
    CT_ERR_IO,          /* a file could not be opened, read or written */
    CT_ERR_FORMAT,      /* a file is corrupt, truncated or not what it claims */
    CT_ERR_UNSUPPORTED, /* valid, but not implemented on this backend or build */
    CT_ERR_DEVICE,      /* the device is missing or failed */
    CT_ERR_STATE,       /* called at the wrong time (e.g. backward twice) */
    CT_ERR_INTERNAL,    /* a bug in cuttle: please report it */
    CT_ERR_NUMERIC      /* an op made an inf or NaN (ct_plan_set_check_numerics) */
} ct_status;

/* The message of the last error on this thread ("" if none).  Borrowed:
 * valid until the next failing call on this thread. */
CT_API const char *ct_last_error(void);
/* "CT_ERR_SHAPE", ... */
CT_API const char *ct_status_name(ct_status status);
CT_API const char *ct_version(void);

/* What this build of the library carries and what it uses on this machine
 * (cuttle doctor prints it, like PyTorch's collect_env).  Static strings. */
typedef struct ct_build_info {
    const char *version;     /* ct_version() */
    const char *compiler;    /* the C compiler that built the library */
    const char *cuda;        /* "none", "cuda" (NVIDIA GPUs) or "emulated" (make CUDA=emu) */
    const char *cuda_archs;  /* the sm_XY list compiled in; "" without CUDA */
    bool cublas, cudnn;      /* built with the vendor paths (loaded at first use) */
    bool nccl_header;        /* built with nccl.h (cuttle_cuda.h probes libnccl) */
    const char *blas;        /* "OpenBLAS 0.3.21 ... (openmp)" or "built-in GEMM" */
    bool openmp, zlib, png, jpeg, mpi;
    const char *cpu_simd;    /* the widest vector path the CPU kernels take here:
                                "avx512", "avx2" or "scalar" */
    const char *int8_kernel; /* the INT8 path: "vnni", "avx2" or "ref" */
} ct_build_info;
CT_API void ct_build_info_get(ct_build_info *out);

/* ---- dtypes ------------------------------------------------------------ */

typedef enum ct_dtype {
    CT_F32 = 0,
    CT_F16,
    CT_BF16,
    CT_I8,
    CT_U8,
    CT_I32,
    CT_I64,
    CT_DTYPE_COUNT
} ct_dtype;

CT_API size_t ct_dtype_size(ct_dtype dtype);
CT_API const char *ct_dtype_name(ct_dtype dtype); /* "f32", ... */

#define CT_MAX_DIMS 6
/* The largest tensor a graph takes: 2^48 bytes (256 TiB), far beyond any
 * device, and small enough that no size computed from a shape overflows. */
#define CT_MAX_TENSOR_BYTES ((int64_t)1 << 48)

/* ---- graphs and tensors ------------------------------------------------ */

typedef struct ct_graph ct_graph;
typedef struct ct_tensor ct_tensor;

/* NULL when memory runs out (ct_last_error says so). */
CT_API ct_graph *ct_graph_new(void);
CT_API void ct_graph_free(ct_graph *graph);
/* CT_OK, or the status of the first error met while building the graph. */
CT_API ct_status ct_graph_status(const ct_graph *graph);

/* How the ops compute (PyTorch's autocast, decided as the graph is built).
 *   fp32  every tensor f32 (the default);
 *   tf32  f32 tensors; on a GPU the vendor GEMMs and convolutions round
 *         their inputs to TF32 (10-bit mantissa) on tensor cores (set on
 *         the backend by ct_plan_new; the CPU has no TF32 and refuses it);
 *   bf16, fp16  convolutions and linear layers take 16-bit copies of their
 *         input and weight and store a 16-bit output, accumulating in f32;
 *         the ops after them keep 16-bit activations (relu, pooling,
 *         dropout, add), batchnorm keeps f32 statistics, softmax and the
 *         loss compute in f32.  Parameters, their gradients and the
 *         optimizer state stay f32, so checkpoints are unchanged.
 * On the CPU, 16-bit values are computed in f32 and rounded to nearest
 * even wherever a GPU stores them: the reduced-precision reference. */
typedef enum ct_precision {
    CT_PRECISION_FP32 = 0,
    CT_PRECISION_TF32,
    CT_PRECISION_BF16,
    CT_PRECISION_FP16,
    CT_PRECISION_COUNT
} ct_precision;

/* "fp32", "tf32", "bf16" or "fp16" into *out; anything else is CT_ERR_ARG
 * with a message that lists them. */
CT_API ct_status ct_precision_parse(const char *name, ct_precision *out);
CT_API const char *ct_precision_name(ct_precision precision);
/* The precision of the ops built from now on (the model: set it first). */
CT_API ct_status ct_graph_set_precision(ct_graph *graph, ct_precision precision);
CT_API ct_precision ct_graph_precision(const ct_graph *graph);

/* How a parameter or buffer is filled when a plan is created. */
typedef enum ct_init {
    CT_INIT_CONST = 0, /* every element = scale */
    CT_INIT_UNIFORM,   /* U(-scale, scale) */
    CT_INIT_NORMAL     /* N(0, scale^2) */
} ct_init;

/* A value the caller writes before each run (images, labels). */
CT_API ct_tensor *ct_input(ct_graph *graph, const char *name, ct_dtype dtype, int ndim,
                           const int64_t *shape);
/* A trainable f32 parameter.  Names follow PyTorch's state_dict
 * ("conv1.weight", "layer1.0.bn1.bias"); they must be unique. */
CT_API ct_tensor *ct_param(ct_graph *graph, const char *name, int ndim, const int64_t *shape,
                           ct_init init, float scale);
/* Persistent state that is not trained (running mean/var); f32 or i64. */
CT_API ct_tensor *ct_buffer(ct_graph *graph, const char *name, ct_dtype dtype, int ndim,
                            const int64_t *shape, ct_init init, float scale);

CT_API const char *ct_tensor_name(const ct_tensor *t); /* borrowed; "%12 (relu)" if unnamed */
CT_API ct_dtype ct_tensor_dtype(const ct_tensor *t);
CT_API int ct_tensor_ndim(const ct_tensor *t);
CT_API int64_t ct_tensor_dim(const ct_tensor *t, int axis); /* negative axes count from the end */
CT_API int64_t ct_tensor_numel(const ct_tensor *t);
CT_API size_t ct_tensor_bytes(const ct_tensor *t);
CT_API bool ct_tensor_is_param(const ct_tensor *t);
/* The gradient of a parameter (or of an input that requires it) after
 * ct_graph_backward, else NULL.  Borrowed. */
CT_API ct_tensor *ct_tensor_grad(const ct_tensor *t);
/* Keep a tensor readable after a run (its memory is not reused). */
CT_API void ct_tensor_keep(ct_tensor *t);
/* Ask backward for the gradient of an input too (tests, saliency). */
CT_API void ct_tensor_requires_grad(ct_tensor *input);

/* Parameters and buffers in creation order: the "state_dict". */
CT_API int ct_graph_n_state(const ct_graph *graph);
CT_API ct_tensor *ct_graph_state(const ct_graph *graph, int index); /* borrowed */
CT_API ct_tensor *ct_graph_find(const ct_graph *graph, const char *name); /* NULL if none */

/* ---- ops --------------------------------------------------------------- */
/* Each returns the new tensor, or NULL with ct_last_error() naming the op,
 * the tensors and their shapes.  Layout is NCHW; weights are PyTorch's. */

/* Zero fields mean PyTorch's defaults: stride 1, padding 0, dilation 1,
 * groups 1.  Index 0 is height, 1 is width. */
typedef struct ct_conv_args {
    int stride[2];
    int pad[2];
    int dilation[2];
    int groups;
} ct_conv_args;

/* y[n,o,h,w] = b[o] + sum_{c,i,j} x[n,g*C/G+c, h*s-p+i*d, w*s-p+j*d] * w[o,c,i,j]
 * x: [N,C,H,W]  w: [O,C/groups,KH,KW]  bias: [O] or NULL  y: [N,O,OH,OW] */
CT_API ct_tensor *ct_conv2d(ct_graph *graph, ct_tensor *x, ct_tensor *weight, ct_tensor *bias,
                            ct_conv_args args);

/* y = x w^T + b.  x: [N,IN]  w: [OUT,IN]  bias: [OUT] or NULL  y: [N,OUT] */
CT_API ct_tensor *ct_linear(ct_graph *graph, ct_tensor *x, ct_tensor *weight, ct_tensor *bias);

/* kernel is required; stride 0 means stride = kernel (PyTorch's default). */
typedef struct ct_pool_args {
    int kernel[2];
    int stride[2];
    int pad[2];
    bool exclude_pad; /* avgpool: count_include_pad=False */
} ct_pool_args;

CT_API ct_tensor *ct_maxpool2d(ct_graph *graph, ct_tensor *x, ct_pool_args args);
CT_API ct_tensor *ct_avgpool2d(ct_graph *graph, ct_tensor *x, ct_pool_args args);
/* [N,C,H,W] -> [N,C,1,1], like nn.AdaptiveAvgPool2d(1). */
CT_API ct_tensor *ct_global_avgpool(ct_graph *graph, ct_tensor *x);

CT_API ct_tensor *ct_relu(ct_graph *graph, ct_tensor *x);
CT_API ct_tensor *ct_sigmoid(ct_graph *graph, ct_tensor *x);
CT_API ct_tensor *ct_tanh(ct_graph *graph, ct_tensor *x);

/* Training: normalize with batch statistics and update the running ones
 * (running = (1-momentum)*running + momentum*batch, unbiased variance).
 * Evaluation: normalize with the running statistics.
 * x: [N,C,H,W] (or [N,C])  gamma, beta, running_mean, running_var: [C] */
CT_API ct_tensor *ct_batchnorm2d(ct_graph *graph, ct_tensor *x, ct_tensor *gamma, ct_tensor *beta,
                                 ct_tensor *running_mean, ct_tensor *running_var, float eps,
                                 float momentum);

/* Training: zero each element with probability p and scale the rest by
 * 1/(1-p), from the plan's seed and step.  Evaluation: identity. */
CT_API ct_tensor *ct_dropout(ct_graph *graph, ct_tensor *x, float p);

/* x converted to `dtype` (f32, f16 or bf16; to 16 bits: round to nearest
 * even); x itself when it has that dtype already.  Its gradient converts
 * back. */
CT_API ct_tensor *ct_cast(ct_graph *graph, ct_tensor *x, ct_dtype dtype);
/* Same shapes, elementwise (residual connections). */
CT_API ct_tensor *ct_add(ct_graph *graph, ct_tensor *a, ct_tensor *b);
/* [N,...] -> [N, prod(...)], a view. */
CT_API ct_tensor *ct_flatten(ct_graph *graph, ct_tensor *x);
/* A view with a new shape; one dimension may be -1. */
CT_API ct_tensor *ct_reshape(ct_graph *graph, ct_tensor *x, int ndim, const int64_t *shape);
/* Concatenate along dim 1 (channels).  All other dims equal. */
CT_API ct_tensor *ct_concat(ct_graph *graph, int n, ct_tensor *const *xs);
/* Softmax over dim 1 of a [N,C] tensor. */
CT_API ct_tensor *ct_softmax(ct_graph *graph, ct_tensor *x);
/* Mean cross-entropy of logits [N,C] against class indices [N] (i32 or
 * i64), with PyTorch's label smoothing.  Returns a scalar (0-dim). */
CT_API ct_tensor *ct_cross_entropy(ct_graph *graph, ct_tensor *logits, ct_tensor *labels,
                                   float label_smoothing);

/* ---- layers: ops plus parameters with PyTorch's names and default init -- */

/* Creates "<name>.weight" ([O,C/groups,KH,KW], kaiming-uniform like
 * nn.Conv2d) and "<name>.bias" when bias is true. */
CT_API ct_tensor *ct_layer_conv2d(ct_graph *graph, const char *name, ct_tensor *x, int out_channels,
                                  int kernel_h, int kernel_w, ct_conv_args args, bool bias);
CT_API ct_tensor *ct_layer_linear(ct_graph *graph, const char *name, ct_tensor *x, int out_features,
                                  bool bias);
/* "<name>.weight", ".bias", ".running_mean", ".running_var",
 * ".num_batches_tracked"; eps 1e-5, momentum 0.1. */
CT_API ct_tensor *ct_layer_batchnorm2d(ct_graph *graph, const char *name, ct_tensor *x);

/* ---- built-in models ------------------------------------------------------ */

/* SimpleCNN: conv1 (6, 5x5) relu maxpool2, conv2 (16, 5x5) relu maxpool2,
 * flatten, fc1 (120) relu, fc2 (84) relu, fc3 (n_classes).  x: [N,C,H,W];
 * returns the logits [N, n_classes]. */
CT_API ct_tensor *ct_model_simplecnn(ct_graph *graph, ct_tensor *x, int n_classes);

/* ---- training ----------------------------------------------------------- */

/* Append the backward graph of a scalar loss.  Every parameter that the
 * loss depends on gets a gradient (ct_tensor_grad), kept after a run. */
CT_API ct_status ct_graph_backward(ct_graph *graph, ct_tensor *loss);
/* The same from any tensor y, given the gradient dy of some scalar with
 * respect to y (an input of y's shape that the caller writes): the
 * vector-Jacobian product.  Either backward may be called once per graph. */
CT_API ct_status ct_graph_backward_vjp(ct_graph *graph, ct_tensor *y, ct_tensor *dy);

typedef struct ct_sgd_args {
    float lr;
    float momentum;
    float dampening;
    float weight_decay;
    bool nesterov;
} ct_sgd_args;

typedef struct ct_adam_args {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;
    bool decoupled; /* true: AdamW (decoupled weight decay) */
} ct_adam_args;

/* PyTorch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no decay. */
CT_API ct_adam_args ct_adam_defaults(void);

/* Append one update node per parameter (after ct_graph_backward).  The
 * optimizer's state ("<param>.momentum_buffer", "<param>.exp_avg",
 * "<param>.exp_avg_sq") lives in buffers that checkpoints can save. */
CT_API ct_status ct_graph_sgd(ct_graph *graph, ct_sgd_args args);
CT_API ct_status ct_graph_adam(ct_graph *graph, ct_adam_args args);

/* ---- backends and plans -------------------------------------------------- */

typedef struct ct_backend ct_backend;
typedef struct ct_plan ct_plan;

/* "cpu" (all cores), "cpu:N" (N threads), "cuda" (GPU 0), "cuda:N" (GPU N).
 * CUDA: CT_ERR_UNSUPPORTED in a build without it, CT_ERR_DEVICE when there
 * is no such GPU or no usable driver (the message says which). */
CT_API ct_status ct_backend_new(const char *device, ct_backend **out);
CT_API void ct_backend_free(ct_backend *backend);
CT_API const char *ct_backend_name(const ct_backend *backend); /* borrowed */
/* Whether the backend runs on an emulated device (a CUDA backend built with
 * `make CUDA=emu`): its results are real, its timings are the CPU time of
 * the emulation and say nothing about GPU speed. */
CT_API bool ct_backend_emulated(const ct_backend *backend);
/* Wait until the backend has finished the work queued so far (a CUDA run
 * returns once its kernels are queued and a read waits for them; timings
 * need this).  Returns the status of any failure it met. */
CT_API ct_status ct_backend_synchronize(ct_backend *backend);
/* A node that a GPU backend cannot run (an op without a GPU kernel) runs on
 * the CPU, with copies between the two and one line on stderr when the plan
 * is made.  Strict: ct_plan_new refuses such a graph instead
 * (CT_ERR_UNSUPPORTED naming the node).  Off by default. */
CT_API ct_status ct_backend_set_strict(ct_backend *backend, bool strict);

/* Device memory of a backend's caching allocator (CUDA).  Freed blocks stay
 * cached for reuse; "cached" counts them. */
typedef struct ct_memory_stats {
    size_t in_use;             /* bytes in blocks handed out */
    size_t peak_in_use;        /* the most in_use has been */
    size_t cached;             /* bytes in free blocks kept for reuse */
    size_t limit;              /* cap on in_use + cached; 0: none */
    int64_t n_device_allocs;   /* cudaMalloc calls so far */
    int64_t n_allocs;          /* blocks handed out so far */
} ct_memory_stats;

/* CT_ERR_UNSUPPORTED on the CPU backend, which uses plain host memory. */
CT_API ct_status ct_backend_memory_stats(const ct_backend *backend, ct_memory_stats *out);
/* Give the cached free blocks back to the device. */
CT_API ct_status ct_backend_release_cache(ct_backend *backend);
/* Refuse allocations that would take in_use + cached past `bytes` (0: no
 * cap) with CT_ERR_MEMORY, as if the device were that small. */
CT_API ct_status ct_backend_set_memory_limit(ct_backend *backend, size_t bytes);
/* Which implementation runs the ops that have several (convolution, linear,
 * pooling forward): "native" (cuttle's own kernels, in the backend's order
 * of preference: the CPU's default), "vendor" (cuDNN and cuBLAS where the
 * build has them), "auto" (the CUDA default: the first run of each node
 * shape times each and keeps the fastest), or the name of one
 * implementation ("im2col", "winograd", "direct", "implicit_gemm", "cudnn",
 * "cublas", ...), used wherever it can run the node.  A profile names what
 * ran each node (ct_prof_record.kernel).  Set before ct_plan_new. */
CT_API ct_status ct_backend_set_kernels(ct_backend *backend, const char *kernels);
/* Let vendor kernels use TF32 tensor cores for f32 (faster, ~1e-3 relative
 * error).  Off by default, so that f32 results match the CPU's. */
CT_API ct_status ct_backend_set_tf32(ct_backend *backend, bool enabled);
/* CUDA Graphs: a plan on a CUDA backend records each mode's whole step once,
 * after two steps of that mode have run node by node, and from then on
 * replays it: one launch per step, no host work per node, the same bits as
 * node by node.  On by default; off runs every step node by node (plans
 * drop their recordings at their next step).  The profiler's steps always
 * run node by node.  No effect on the CPU. */
CT_API ct_status ct_backend_set_cuda_graph(ct_backend *backend, bool enabled);

typedef enum ct_mode {
    CT_TRAIN = 0, /* forward, backward and update; batch statistics, dropout on */
    CT_EVAL       /* forward only; running statistics, dropout off */
} ct_mode;

/* Plan the graph on a backend: order the nodes, lay out every transient
 * tensor in one arena by liveness, allocate the state (parameters, buffers,
 * inputs) and fill parameters from `seed`.  The graph must stay alive and
 * unchanged while the plan exists. */
CT_API ct_status ct_plan_new(ct_graph *graph, ct_backend *backend, uint64_t seed, ct_plan **out);
CT_API void ct_plan_free(ct_plan *plan);

/* One step.  Nothing is allocated. */
CT_API ct_status ct_plan_run(ct_plan *plan, ct_mode mode);

/* Copy between host memory and a tensor of the plan.  `bytes` must equal
 * ct_tensor_bytes(t).  Readable: state, inputs, kept tensors. */
CT_API ct_status ct_plan_write(ct_plan *plan, ct_tensor *t, const void *host, size_t bytes);
CT_API ct_status ct_plan_read(ct_plan *plan, const ct_tensor *t, void *host, size_t bytes);
/* Queues `host`'s bytes as input t's value for a later run: every
 * ct_plan_run begins by giving each input with values queued its oldest
 * one (ct_plan_write writes at once; a queued value still comes after it).
 * At most 2 values wait per input.  `host` may be reused on return.  On a
 * GPU the copy goes through pinned memory on a stream of its own, so a
 * training loop that stages batch j+1 before it runs step j has the copy
 * of j+1 run beside step j instead of before step j+1.  Only inputs
 * (ct_input).  ct_plan_find_nonfinite's run takes nothing: it runs the
 * last step again on the inputs that step had. */
CT_API ct_status ct_plan_stage(ct_plan *plan, ct_tensor *t, const void *host, size_t bytes);
/* Reads a float tensor (f32, f16 or bf16) as `count` floats, converting;
 * count must equal ct_tensor_numel(t).  (Model outputs under bf16 or fp16
 * precision are 16-bit.) */
CT_API ct_status ct_plan_read_f32(ct_plan *plan, const ct_tensor *t, float *host,
                                  int64_t count);

/* fp16 training scales its loss (dynamic loss scaling, as PyTorch's
 * GradScaler): the loss's gradient starts at 2^16 times its value, so the
 * gradients (ct_tensor_grad) are scaled by ct_plan_loss_scale and the
 * optimizer divides by it.  A step whose gradients hold an inf or NaN
 * updates no parameter and no optimizer state (batchnorm's running
 * statistics still move, the step count still advances) and halves the
 * scale; 2,000 clean steps in a row double it.  Scale 1, nothing skipped,
 * in every other precision. */
CT_API float ct_plan_loss_scale(const ct_plan *plan);
CT_API int64_t ct_plan_skipped_steps(const ct_plan *plan);
/* Whether the last training step updated nothing: fp16's overflow, or (any
 * precision) a loss that was not finite. */
CT_API bool ct_plan_step_skipped(const ct_plan *plan);
/* The scale from now on and the clean steps before it doubles (resume, tests). */
CT_API ct_status ct_plan_set_loss_scale(ct_plan *plan, float scale, int growth_interval);
/* The loss scaler's whole state, to save with a run and restore when it
 * resumes (cuttle train keeps it in state.safetensors, so that a resumed
 * fp16 run goes on exactly as an uninterrupted one). */
typedef struct ct_loss_scale_state {
    float scale;
    int growth_interval;   /* clean steps in a row that double the scale */
    int clean_steps;       /* clean steps in a row so far (0 .. growth_interval - 1) */
    int64_t skipped_steps; /* steps skipped so far */
} ct_loss_scale_state;
/* CT_ERR_STATE for a plan that does not scale its loss (all but fp16
 * training); set: CT_ERR_ARG for a scale that is not finite and > 0 or
 * counts out of range. */
CT_API ct_status ct_plan_loss_scale_state(const ct_plan *plan, ct_loss_scale_state *out);
CT_API ct_status ct_plan_set_loss_scale_state(ct_plan *plan, const ct_loss_scale_state *state);

/* Runs one step of `mode` again node by node, checking every node's output,
 * and describes the first that holds an inf or NaN in `what` ("%14
 * (conv2d) [64,6,24,24] (f32), reading 'conv1.weight'"), "" when none
 * does.  For the step whose loss was not finite (such a step updates
 * nothing, so it can run again: set its step back with ct_plan_set_step
 * for the same dropout masks); slow, a copy per node. */
CT_API ct_status ct_plan_find_nonfinite(ct_plan *plan, ct_mode mode, char *what,
                                        size_t capacity);

/* Checks every node's output for an inf or NaN right after it runs, in
 * every step from now on (on) or no more (off; the default), as a
 * debugging mode: like PyTorch's anomaly detection it is slow (each
 * output is copied to the host, a synchronization per node; steps run node
 * by node, never from a CUDA Graph), and off it costs nothing.  The first
 * node whose output is not finite stops the step with CT_ERR_NUMERIC and a
 * message that names the step, the node (its op, shape and dtype), the
 * first bad value and the layer (the parameter the node reads, or the
 * nearest one upstream).  A stopped step does not count (ct_plan_step
 * stays); stopped before the optimizer, it changed no parameter or
 * optimizer state (batchnorm's running statistics may have moved).  Under
 * fp16's loss scaling the gradients are not checked: their overflows are
 * the scaler's to handle (the step is skipped).  Float tensors only. */
CT_API ct_status ct_plan_set_check_numerics(ct_plan *plan, bool on);

/* Learning rate for the next runs (schedules change it between steps). */
CT_API void ct_plan_set_lr(ct_plan *plan, float lr);
CT_API float ct_plan_lr(const ct_plan *plan);
/* Training steps run so far (it drives dropout masks and Adam's bias
 * correction); settable so that a resumed run continues exactly. */
CT_API int64_t ct_plan_step(const ct_plan *plan);
CT_API void ct_plan_set_step(ct_plan *plan, int64_t step);

/* For `mode`: 1 when the plan's steps are replayed from a CUDA Graph
 * (ct_backend_set_cuda_graph; *nodes: the device operations one replay
 * runs), 0 when not (yet, off, or not a CUDA backend), -1 when recording
 * failed and its steps run node by node for good (*why: the reason, valid
 * while the plan lives).  nodes and why may be NULL. */
CT_API int ct_plan_cuda_graph(const ct_plan *plan, ct_mode mode, int *nodes, const char **why);

/* ---- inference optimization (docs/optimize.md) ------------------------------ */

typedef struct ct_optimize_report {
    int folded;                         /* batchnorms folded into the conv or linear before */
    int removed;                        /* dropouts removed */
    int kernels_before, kernels_after;  /* kernels one CT_EVAL step runs */
    size_t arena_before, arena_after;   /* activation arena bytes (ct_plan_arena_bytes) */
    int64_t values_before, values_after; /* parameter and buffer values y needs */
} ct_optimize_report;

typedef struct ct_optimized {
    ct_graph *graph; /* the new graph, owned */
    ct_plan *plan;   /* on the same backend, owned: run it with CT_EVAL */
    ct_tensor *x, *y; /* the new graph's x (write it) and y (kept: read it) */
    ct_optimize_report report;
} ct_optimized;

/* A new graph and plan that compute y from x as `plan` does in CT_EVAL, for
 * inference alone: each batchnorm that follows a conv or linear layer read
 * by nothing else is folded into its weight and bias, dropout is removed,
 * and with no backward the arena holds each activation only while the
 * forward pass reads it.  The plan's current parameter and buffer values
 * are used (load the weights first); parameters keep their names (a folded
 * layer without a bias gets "<name>.bias").  Outputs equal the original's
 * within float rounding.  `plan` is not changed.  On error *out is zeroed. */
CT_API ct_status ct_plan_optimize(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                  ct_optimized *out);
/* Frees the plan, then the graph; zeroes *optimized. */
CT_API void ct_optimized_free(ct_optimized *optimized);

/* Post-training INT8 quantization (docs/quantization.md). */
typedef enum ct_calib_method {
    CT_CALIB_MINMAX = 0, /* each input's range: its min and max over the batches */
    CT_CALIB_PERCENTILE, /* the range that holds `percentile` % of the values */
    CT_CALIB_ENTROPY     /* the top of the range with the least KL divergence between the
                            values and their u8 quantization (TensorRT's method) */
} ct_calib_method;

typedef struct ct_quantize_args {
    ct_calib_method method;
    double percentile;   /* CT_CALIB_PERCENTILE: 0 means 99.99 */
    bool quantize_last;  /* also the last conv or linear layer (the classifier): false keeps
                            it f32 */
    bool quantize_shallow; /* also layers whose dot products are shorter than 32 (a first
                              convolution on 1 or 3 channels): false keeps them f32, where
                              the f32 kernels are faster */
    bool f32_activations;  /* pass f32 between consecutive int8 layers, each quantizing its
                              own input (slower; the same results): false keeps them u8 */
} ct_quantize_args;

/* One conv2d or linear layer of the optimized graph, in graph order. */
typedef struct ct_quantize_layer {
    char name[64];        /* its weight's name without ".weight" */
    const char *weight;   /* its weight's name ("conv2.weight"), owned by the ct_quantized */
    bool quantized;       /* false: kept f32 (why: `reason`) */
    const char *reason;   /* static text, NULL when quantized */
    float in_lo, in_hi;   /* the calibrated range of its input */
    float in_scale;       /* u8 input: x ~ (q - in_zero_point) * in_scale */
    int in_zero_point;
    bool out_u8;          /* writes u8 for the int8 layers that read it (requantized in its
                             epilogue: the activations between them stay u8) */
    double sqnr_db;       /* its output, int8 graph against f32, on the first calibration
                             batch: 10 log10(sum f^2 / sum (f - q)^2) (inf: equal; NaN:
                             not measured, a model loaded from a file) */
} ct_quantize_layer;

typedef struct ct_quantized {
    ct_graph *graph;     /* the int8 graph, owned */
    ct_plan *plan;       /* on the CPU, owned: run it with CT_EVAL */
    ct_tensor *x, *y;    /* the new graph's x (write it) and y (kept: read it) */
    int n_layers;
    ct_quantize_layer *layers; /* owned */
    ct_optimize_report optimize; /* what ct_plan_optimize did first */
    int n_packed;
    struct ct_int8_weights **packed; /* owned: the int8 nodes read them */
    ct_quantize_args args;  /* how it was calibrated (a loaded model: as its file says) */
    int calib_batches, calib_batch; /* calibration batches and images per batch */
} ct_quantized;

/* An INT8 inference graph and plan from `plan` (on the CPU backend): the
 * plan is optimized (ct_plan_optimize), run in CT_EVAL on `n_batches`
 * calibration batches (host f32, each of x's shape) to find the range of
 * every conv2d and linear layer's input, and each such layer (groups 1,
 * not the last unless args->quantize_last, depth >= 32 unless
 * args->quantize_shallow) becomes an int8 op: per-channel
 * symmetric int8 weights, its input quantized to u8 with the calibrated
 * scale and zero point, int32 sums, the bias, a fused relu and the f32
 * output in the epilogue, or u8 where only int8 layers read it (through max
 * pools and flattens; args->f32_activations: f32 everywhere).  Other
 * backends: CT_ERR_UNSUPPORTED.  On error *out is zeroed. */
CT_API ct_status ct_plan_quantize(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                  const ct_quantize_args *args, const float *const *batches,
                                  int n_batches, ct_quantized *out);
/* Frees the plan, the graph, the layers and the weights; zeroes *quantized. */
CT_API void ct_quantized_free(ct_quantized *quantized);
/* "minmax", "percentile", "entropy"; ct_calib_method_parse: CT_ERR_ARG for others. */
CT_API const char *ct_calib_method_name(ct_calib_method method);
CT_API ct_status ct_calib_method_parse(const char *name, ct_calib_method *out);

/* Pruning (docs/pruning.md). */
typedef enum ct_prune_rank {
    CT_PRUNE_RANK_L1 = 0, /* a channel's worth: the L1 norm of its filter */
    CT_PRUNE_RANK_BN      /* |gamma| of the batchnorm right after the convolution */
} ct_prune_rank;

typedef struct ct_prune_args {
    double ratio;       /* the share of each prunable convolution's output channels removed,
                           in (0, 1): floor(C * ratio) of C, at least one channel kept */
    ct_prune_rank rank;
    const char *name;   /* the new model's name in its text (NULL: "pruned") */
} ct_prune_args;

/* One convolution of the graph, in graph order. */
typedef struct ct_prune_layer {
    char name[64];        /* its weight's name without ".weight" */
    int channels_before, channels_after;
    int tie;              /* 0: ranked alone; k > 0: one of the convolutions whose outputs
                             residual additions tie together (set k), ranked and pruned
                             together with one ranking */
    const char *reason;   /* static text when it cannot be pruned, else NULL */
} ct_prune_layer;

typedef struct ct_pruned {
    char *text;           /* the smaller model's definition (ct_model_build), owned */
    ct_graph *graph;      /* the smaller model, built from text for inference, owned */
    ct_plan *plan;        /* on the same backend, with the kept channels' values, owned */
    ct_tensor *x, *y;     /* the new graph's input (write it) and logits (kept) */
    int n_layers;
    ct_prune_layer *layers; /* owned */
} ct_pruned;

/* Structured pruning: a smaller network that computes y from x as `plan`
 * does, without the lowest-ranked output channels of each convolution.
 * A channel is removed with everything that reads it: the next
 * convolutions' input channels, the batchnorm's parameters and statistics,
 * the first linear layer's input features after a flatten (a block of H*W
 * per channel).  Channels that residual additions tie together are ranked
 * as one set (the sum of each convolution's scores over its mean score)
 * and the same channels leave every convolution of the set.  A channel is
 * kept whole where anything else reads it (the model's output, a concat, a
 * custom op, grouped convolutions: ct_prune_layer.reason).  The new model
 * is written as a model text with the same parameter names and built from
 * it; the plan's current values are used.  CT_ERR_ARG: a ratio outside
 * (0, 1), CT_PRUNE_RANK_BN where a convolution to prune has no batchnorm
 * after it, a model where no convolution can be pruned (the message says
 * why).  `plan` is not changed.  On error *out is zeroed. */
CT_API ct_status ct_plan_prune_channels(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                        const ct_prune_args *args, ct_pruned *out);
/* Frees the plan, the graph, the text and the layers; zeroes *pruned. */
CT_API void ct_pruned_free(ct_pruned *pruned);

/* Unstructured pruning: the weights of every convolution and linear layer
 * that y depends on, with a mask of the ones kept. */
typedef struct ct_weight_mask {
    char name[64];        /* the weight's name */
    int64_t count, zeros; /* values; values pruned */
    uint8_t *keep;        /* count flags: 1 kept, 0 pruned; owned */
} ct_weight_mask;

typedef struct ct_sparsity {
    int n_layers;
    ct_weight_mask *layers; /* owned, in graph order */
    float threshold;      /* |w| at or below it was pruned */
    float *scratch;       /* for ct_plan_apply_masks, owned */
} ct_sparsity;

/* Global magnitude pruning: the floor(ratio * N) weights of smallest |w|
 * among all N of y's convolutions and linear layers are set to 0 in the
 * plan (ties at the threshold go too), and their masks returned.  ratio in
 * (0, 1), else CT_ERR_ARG; CT_ERR_ARG also when y reads no such weight. */
CT_API ct_status ct_plan_prune_weights(ct_plan *plan, const ct_tensor *y, double ratio,
                                       ct_sparsity *out);
/* Zeroes the pruned weights again in `plan`, whose graph holds weights of
 * the masks' names and sizes (a training plan, after each step: pruned
 * weights stay 0 while the rest are fine-tuned).  Allocates nothing. */
CT_API ct_status ct_plan_apply_masks(ct_plan *plan, ct_sparsity *masks);
CT_API void ct_sparsity_free(ct_sparsity *sparsity);

/* The graph a plan runs.  Borrowed. */
CT_API ct_graph *ct_plan_graph(const ct_plan *plan);

/* Bytes of the activation arena (its planned peak) and of the state. */
CT_API size_t ct_plan_arena_bytes(const ct_plan *plan);
CT_API size_t ct_plan_state_bytes(const ct_plan *plan);
/* Bytes kernels keep between inference runs, made at the first CT_EVAL run
 * and again after the weights change: the CPU's Winograd convolutions keep
 * their transformed weights (4x the weights of those 3x3 layers). */
CT_API size_t ct_plan_kept_bytes(const ct_plan *plan);
/* Nodes of one step in a mode: all it schedules, views and the nodes whose
 * work another node's kernel does (fusions) included, so at least the
 * number of kernels the step runs. */
CT_API int ct_plan_n_nodes(const ct_plan *plan, ct_mode mode);
/* The arithmetic of one step in a mode, from each op's formula (a
 * multiply-add counted as 2; what the math needs, not what a kernel does;
 * the same whichever nodes the plan fused): a step's FLOPs for achieved
 * GFLOP/s against a peak. */
CT_API double ct_plan_flops(const ct_plan *plan, ct_mode mode);

/* ---- checkpoints ----------------------------------------------------------- */

/* Checkpoints are safetensors files.  The model part is exactly a PyTorch
 * state_dict (parameters and buffers under their names, num_batches_tracked
 * as i64), so torch's load_state_dict takes it unchanged; the optimizer part
 * holds "<param>.momentum_buffer", "<param>.exp_avg", ... */
typedef enum ct_save_what {
    CT_SAVE_MODEL = 1u,     /* parameters and buffers */
    CT_SAVE_OPTIMIZER = 2u  /* optimizer state */
} ct_save_what;

/* A string pair stored in the file's "__metadata__". */
typedef struct ct_meta {
    const char *key, *value;
} ct_meta;

/* Write the state selected by `what` (a mask of ct_save_what) and n_meta
 * metadata pairs to path, atomically: a temporary file beside it is
 * written, flushed to disk and renamed over it, so a crash or a failure
 * leaves the previous file intact. */
CT_API ct_status ct_plan_save(ct_plan *plan, const char *path, unsigned what, int n_meta,
                              const ct_meta *meta);

/* An opened checkpoint file, fully read and checked. */
typedef struct ct_checkpoint ct_checkpoint;

/* CT_ERR_IO: missing or unreadable; CT_ERR_FORMAT: truncated, corrupt or
 * not safetensors.  On error *out is NULL. */
CT_API ct_status ct_checkpoint_open(const char *path, ct_checkpoint **out);
CT_API void ct_checkpoint_close(ct_checkpoint *checkpoint);
/* A metadata value, borrowed until close; NULL if the key is absent. */
CT_API const char *ct_checkpoint_meta(const ct_checkpoint *checkpoint, const char *key);

/* Copy the checkpoint's tensors into the plan's state selected by `what`.
 * Every selected state tensor must be in the file with the same shape and
 * dtype, and (for CT_SAVE_MODEL) the file must hold nothing else of the
 * model's kind; otherwise nothing is changed and CT_ERR_FORMAT lists what is
 * missing, unexpected or mismatched. */
CT_API ct_status ct_plan_load_checkpoint(ct_plan *plan, const ct_checkpoint *checkpoint,
                                         unsigned what);
/* ct_checkpoint_open + ct_plan_load_checkpoint + close. */
CT_API ct_status ct_plan_load(ct_plan *plan, const char *path, unsigned what);

/* The int8 model as a safetensors file (docs/quantization.md, "The int8
 * file"), atomically like ct_plan_save: each int8 layer's weight as I8
 * under the f32 weight's name ("conv2.weight", [out, in, kh, kw] or [out,
 * in]) with "<weight>_scale" (F32 [out]), its input's "<layer>.input_scale"
 * (F32 scalar) and "<layer>.input_zero_point" (U8 scalar); every other
 * parameter and buffer of the int8 graph (the biases, batchnorms folded,
 * and the layers kept f32) as F32 under its name.  The metadata holds
 * "quantization" = "int8" (what marks the file), "calibration" (the
 * method), "calibration_percentile" (percentile only),
 * "calibration_batches" and "calibration_batch", then n_meta pairs of the
 * caller's (none of those keys).  quantized->plan and ->graph must be there. */
CT_API ct_status ct_quantized_save(const ct_quantized *quantized, const char *path, int n_meta,
                                   const ct_meta *meta);
/* Whether a checkpoint holds an int8 model (metadata "quantization" is "int8"). */
CT_API bool ct_checkpoint_is_int8(const ct_checkpoint *checkpoint);
/* The int8 model of a file that ct_quantized_save wrote, without
 * calibrating: `plan` computes y from x for the same model definition (f32,
 * on the CPU, any weights: they are not read), and the result is the plan
 * ct_plan_quantize made before saving, bit for bit, at x's batch.  Each
 * layer whose weight is I8 in the file is int8; the others are f32.
 * CT_ERR_UNSUPPORTED on a backend without the int8 ops (naming it);
 * CT_ERR_FORMAT, listing every problem, when a tensor is missing,
 * unexpected or of another shape or dtype, or a scale is not finite and
 * positive.  On error *out is zeroed.  ct_quantized_free frees it. */
CT_API ct_status ct_plan_load_quantized(ct_plan *plan, const ct_tensor *x, const ct_tensor *y,
                                        const ct_checkpoint *checkpoint, ct_quantized *out);
/* Host threads that a backend's kernels use (the CPU's thread count). */
CT_API int ct_backend_threads(const ct_backend *backend);

/* ---- profiling ---------------------------------------------------------------- */

/* With profiling on, ct_plan_run times every node it runs and keeps the
 * records of the last step; `cuttle profile` turns them into a per-op table
 * and a Chrome trace (docs/profiling.md).  Off, it costs one branch per
 * step; on, a step still allocates nothing (the records are made when
 * profiling is turned on). */

typedef enum ct_prof_phase {
    CT_PROF_FORWARD = 0,
    CT_PROF_BACKWARD,
    CT_PROF_OPTIMIZER,
    CT_PROF_PHASE_COUNT
} ct_prof_phase;

CT_API const char *ct_prof_phase_name(ct_prof_phase phase); /* "forward", ... */

/* What a node's kernels did on an emulated GPU (ct_backend_emulated),
 * counted by the emulator as a profiler counts on a GPU (docs/emulator.md),
 * and the GPU time a roofline model of an H100 SXM predicts from that
 * (docs/roofline.md).  A prediction, never a measurement; `counted` is
 * false (and the rest 0) on any other backend. */
typedef struct ct_kernel_counts {
    bool counted;
    int64_t launches;
    double bytes_used;        /* global memory: distinct bytes the threads asked for */
    double bytes_moved;       /* 32-byte sectors moved to and from L2, in bytes */
    double dram_bytes;        /* each launch's distinct sectors, in bytes (its DRAM traffic
                               * if its data fits in L2) */
    double shared_wavefronts; /* shared-memory cycles; the ideal, conflict-free count: */
    double shared_ideal_wavefronts;
    double flops_executed;    /* floating-point work the kernels did (an FMA is 2), padding
                               * and recomputation included; 0: not counted by this build */
    double tensor_flops;      /* of flops_executed: on tensor cores (2 x the MMAs' M N K) */
    double branches, divergent_branches; /* warp-level branches; those whose lanes split */
    /* Instructions the warps issued (roughly), and the latency chain: the
     * longest warp's instructions, rounds of global loads, warp collectives
     * and barriers, times each launch's waves (docs/roofline.md) */
    double warp_instructions;
    double chain_instructions, chain_load_rounds, chain_collectives, chain_barriers;
    double sm_instructions;   /* the busiest SM's warp instructions, per launch, summed */
    /* per launch, the larger of its chain and its busiest SM's issue, in
     * clocks, summed (0: not known per launch; the model then takes the
     * larger of the node's sums) */
    double latency_clocks;
    double latency_ns;        /* the model's time for that chain (in predicted_ns) */
    double predicted_ns;      /* the model's time for the node's kernels, launched one by one */
    double predicted_graph_ns; /* ... replayed from a CUDA Graph: no host cost per launch */
    double roofline_ns;       /* the op's floor: its FLOPs at peak or its least bytes at
                               * DRAM bandwidth, whichever is longer */
} ct_kernel_counts;

/* One node of one step.  Times are on the host's monotonic clock
 * (CLOCK_MONOTONIC), in nanoseconds. */
typedef struct ct_prof_record {
    const char *op;     /* "conv2d", "relu_bwd", ...: static */
    const char *kernel; /* the implementation that ran it: "native", "winograd",
                         * "cudnn", ... (ct_backend_set_kernels): static */
    const char *label;  /* the node: its name, or "%12 (relu)" */
    const char *shapes; /* "[64,1,28,28] [6,1,5,5] [6] -> [64,6,24,24]" */
    ct_prof_phase phase;
    int64_t start_ns, end_ns;
    /* When the backend has a device clock (a GPU): the node's time on the
     * device, mapped onto the host clock at the step's start; else -1. */
    int64_t device_start_ns, device_end_ns;
    double flops; /* estimated arithmetic, a multiply-add counted as 2 */
    double bytes; /* estimated least memory traffic */
    /* 1; or n when this node's kernels did the work of the n - 1 records
     * after it too (the optimizer's updates in one launch: their time,
     * counts and prediction are all here), and 0 for those n - 1 */
    int group;
    ct_kernel_counts counts; /* an emulated GPU's counters and prediction */
} ct_prof_record;

/* The last step that ran with profiling on.  The strings and records are
 * borrowed from the plan: valid until the next profiled run, until
 * profiling is turned off, or until the plan is freed. */
typedef struct ct_profile {
    ct_mode mode;
    int64_t step;             /* ct_plan_step() before the step */
    int64_t start_ns, end_ns; /* the whole ct_plan_run, synchronization included */
    int n_records;            /* nodes run, in order (views run nothing and have none) */
    const ct_prof_record *records;
    const char *predicted_for; /* the GPU the records' predictions model ("H100 SXM"), or
                                * NULL when nothing was counted (ct_kernel_counts) */
    double graph_launch_ns;    /* the model's cost of launching a step replayed from a CUDA
                                * Graph, once per step (beside the records'
                                * predicted_graph_ns) */
} ct_profile;

/* Turn per-node timing on (allocating the records once: CT_ERR_MEMORY) or
 * off (freeing them). */
CT_API ct_status ct_plan_set_profiling(ct_plan *plan, bool on);
/* CT_ERR_STATE when profiling is off or no step has run since it was on. */
CT_API ct_status ct_plan_profile(const ct_plan *plan, ct_profile *out);

/* A Chrome trace file (the JSON Object Format with "X" events, which
 * Perfetto and chrome://tracing open): a track of host times and, when the
 * records have device times, a device track. */
typedef struct ct_trace ct_trace;
/* Create or truncate the file (CT_ERR_IO). */
CT_API ct_status ct_trace_open(const char *path, ct_trace **out);
/* Append the events of one profiled step: the step, its phases and nodes,
 * with shapes, FLOPs and bytes as arguments. */
CT_API ct_status ct_trace_add(ct_trace *trace, const ct_profile *profile);
/* Finish the JSON, close the file and free the trace (NULL is fine);
 * CT_ERR_IO if anything failed to be written. */
CT_API ct_status ct_trace_close(ct_trace *trace);

/* ---- data parallel ------------------------------------------------------------- */

/* A job of processes that train one model together, each on its own shard
 * of the data, averaging their gradients every step (docs/distributed.md):
 * `mpirun -np N` starts the processes, MPI carries the data.  Collectives
 * (the calls below that take a ct_dist, except rank and size) must be made
 * by every rank, in the same order. */
typedef struct ct_dist ct_dist;

/* Joins the job this process belongs to.  Started by an MPI launcher
 * (mpirun; its environment says so): MPI is initialized (unless the caller
 * did) and this process is one of its ranks.  Otherwise a job of one (rank
 * 0 of 1) with nothing initialized.  CT_ERR_UNSUPPORTED when a launcher
 * started several processes but this build has no MPI (they would train
 * copies that never talk). */
CT_API ct_status ct_dist_init(ct_dist **out);
/* Leaves the job (MPI_Finalize, if ct_dist_init initialized MPI). */
CT_API void ct_dist_free(ct_dist *dist);
CT_API int ct_dist_rank(const ct_dist *dist);
CT_API int ct_dist_size(const ct_dist *dist);
/* This rank's place among the job's ranks on its machine (0 on each
 * machine's first): the GPU it trains on, one GPU per rank. */
CT_API int ct_dist_local_rank(const ct_dist *dist);
/* The MPI library this build links ("Open MPI v4.1.4, package: ..."), or
 * NULL in a build without MPI.  Static; callable at any time. */
CT_API const char *ct_dist_library(void);

/* The sum over the ranks of data[0..count), in place in every rank;
 * average: divided by the number of ranks. */
CT_API ct_status ct_dist_allreduce(ct_dist *dist, float *data, int64_t count, bool average);
CT_API ct_status ct_dist_allreduce_f64(ct_dist *dist, double *data, int count);
/* Rank root's bytes into every rank's data. */
CT_API ct_status ct_dist_broadcast(ct_dist *dist, void *data, size_t bytes, int root);
/* Every rank's `bytes` bytes of mine, in rank order, into all (size * bytes). */
CT_API ct_status ct_dist_allgather(ct_dist *dist, const void *mine, size_t bytes, void *all);
CT_API ct_status ct_dist_barrier(ct_dist *dist);
/* Ends every process of the job with `status` (MPI_Abort): for a rank that
 * failed, so that the others, perhaps waiting for it in a collective, do
 * not hang.  Returns only in a job of one (then it does nothing). */
CT_API void ct_dist_abort(ct_dist *dist, int status);

/* Rank root's parameters, buffers and optimizer state into every rank's
 * plan (the plans of one graph, built the same way). */
CT_API ct_status ct_dist_broadcast_plan(ct_dist *dist, ct_plan *plan, int root);
/* Data-parallel training steps: from now on every CT_TRAIN step of the plan
 * averages the parameters' gradients over the ranks before the optimizer
 * reads them.  The gradients are grouped into buckets of about
 * bucket_bytes (0: 25 MB) in reverse order of the parameters, the order
 * backward finishes them, and each bucket's sum starts as soon as its last
 * gradient is written, so that it overlaps the rest of backward.  Fixed
 * for a given number of ranks and bucket size, the sums come out the same
 * every run.  dist NULL: back to plain steps.  Nothing in a step allocates. */
#define CT_DIST_DEFAULT_BUCKET_BYTES (25u << 20)
CT_API ct_status ct_plan_set_dist(ct_plan *plan, ct_dist *dist, size_t bucket_bytes);
/* Synchronized batchnorm (PyTorch's SyncBatchNorm), after ct_plan_set_dist:
 * in training steps every batchnorm normalizes with the mean and variance
 * of all ranks' batches together, updates its running statistics with
 * them, and its gradient flows as over that whole batch, so N ranks at
 * batch B train as one process at batch N*B.  Costs three small
 * all-reduces per batchnorm and step: MPI on the CPU, NCCL between GPUs
 * (also the GPUs of ct_replicas, after ct_replicas_new), queued on the
 * GPU's stream.  CT_ERR_STATE without data-parallel steps. */
CT_API ct_status ct_plan_set_sync_bn(ct_plan *plan, bool on);

/* What the data-parallel steps of a job cost this rank, summed over its
 * steps so far. */
typedef struct ct_dist_stats {
    int64_t steps;
    int buckets;           /* per step */
    size_t bytes;          /* of gradients per step */
    double wait_seconds;   /* blocked before the optimizer until the sums were done: the
                              communication that backward did not hide */
    double comm_seconds;   /* inside the transport's calls (start, progress, wait) */
} ct_dist_stats;
CT_API ct_status ct_dist_stats_get(const ct_dist *dist, ct_dist_stats *out);

/* Data parallel inside one process: plans of one model (the same graph
 * built once per plan), each on a GPU of its own (a CUDA backend per GPU),
 * trained as one.  ct_replicas_new copies plan 0's parameters, buffers and
 * optimizer state into the others and joins their GPUs with NCCL; from
 * then on ct_replicas_run runs every plan's step at once, a host thread
 * each, and in CT_TRAIN steps the gradients are averaged over the plans
 * (in buckets of about bucket_bytes, 0: 25 MB, as ct_plan_set_dist) before
 * any optimizer reads them: write each plan its own part of the batch
 * first, and the plans stay equal.  A step that fails on one GPU fails the
 * run, and the replicas refuse to run again (the plans may differ).  The
 * plans stay the caller's; free the replicas first.  A single plan runs
 * alone, on any backend. */
typedef struct ct_replicas ct_replicas;
CT_API ct_status ct_replicas_new(ct_plan *const *plans, int n_plans, size_t bucket_bytes,
                                 ct_replicas **out);
CT_API ct_status ct_replicas_run(ct_replicas *replicas, ct_mode mode);
/* What plan 0's data-parallel steps have cost so far. */
CT_API ct_status ct_replicas_stats(const ct_replicas *replicas, ct_dist_stats *out);
CT_API void ct_replicas_free(ct_replicas *replicas);

/* ---- datasets ------------------------------------------------------------ */

/* A labelled image dataset held in host memory as bytes: one split of
 * MNIST or Fashion-MNIST (IDX files, raw or .gz), CIFAR-10 or CIFAR-100
 * (binary version), or an image folder (docs/data.md). */
typedef struct ct_dataset ct_dataset;

/* Load an IDX image file (magic 0x00000803: u8 [N, rows, cols]) and its
 * label file (0x00000801: u8 [N], each < n_classes), raw or gzipped (.gz
 * needs a build with zlib).  Pixels are scaled to x/255 (no mean/std shift);
 * class names are the label numbers.  CT_ERR_IO: a file is missing or
 * unreadable; CT_ERR_FORMAT: corrupt, truncated, wrong magic, counts that
 * differ, a label out of range; CT_ERR_MEMORY.  On error *out is NULL. */
CT_API ct_status ct_dataset_load_idx(const char *images_path, const char *labels_path,
                                     int n_classes, ct_dataset **out);
/* Load a split ("train" | "test") of a known dataset from dir:
 *   "fashion-mnist", "mnist": the four IDX files under their usual names
 *     (train-images-idx3-ubyte, t10k-labels-idx1-ubyte, ... each raw or
 *     .gz).  dir NULL: Debian's location (/usr/share/datasets/fashion-mnist,
 *     from the package dataset-fashion-mnist; MNIST has none).
 *   "cifar10": data_batch_1..5.bin and test_batch.bin; "cifar100":
 *     train.bin and test.bin (fine labels), each in dir or in the folder the
 *     archive unpacks to below it.  dir is required.
 *   "folder": ct_dataset_load_folder(dir, split, defaults).
 * Pixels are normalized with the dataset's per-channel mean and std:
 * (x/255 - mean[c]) / std[c].  An unknown name: CT_ERR_ARG listing these. */
CT_API ct_status ct_dataset_load(const char *name, const char *dir, const char *split,
                                 ct_dataset **out);
CT_API void ct_dataset_free(ct_dataset *dataset);

CT_API int64_t ct_dataset_size(const ct_dataset *dataset); /* items */
CT_API int ct_dataset_channels(const ct_dataset *dataset);
CT_API int ct_dataset_height(const ct_dataset *dataset);
CT_API int ct_dataset_width(const ct_dataset *dataset);
CT_API int ct_dataset_classes(const ct_dataset *dataset);
/* "T-shirt/top", ... or "0", "1", ...  Borrowed, valid until the dataset is
 * freed; NULL if label is out of range. */
CT_API const char *ct_dataset_class_name(const ct_dataset *dataset, int label);

/* Gather items indices[0..n) into images [n, C, H, W] (normalized f32) and
 * labels [n] (may be NULL).  CT_ERR_ARG if an index is out of range. */
CT_API ct_status ct_dataset_batch(const ct_dataset *dataset, const int64_t *indices, int n,
                                  float *images, int64_t *labels);

/* Per-channel normalization of a dataset (x/255 - mean[c]) / std[c]:
 * channel c's mean and std (0 and 1 for a raw IDX load); NaN for a channel
 * out of range. */
CT_API float ct_dataset_mean(const ct_dataset *dataset, int channel);
CT_API float ct_dataset_std(const ct_dataset *dataset, int channel);

/* An image folder: dir/<class>/<image>.png|.jpg|.jpeg, one subfolder per
 * class (sorted by name: label 0 is the first).  If dir has "train" and
 * "test" subfolders, they are the splits; otherwise `test_fraction` of each
 * class (chosen by `seed`) is the test split and the rest the training one.
 * Every image is converted to `channels` (1 gray or 3 RGB) and resized to
 * height x width; zero fields take the first image's (of the training
 * split).  The normalization is the training split's per-channel mean and
 * std, for both splits.  args NULL: all defaults. */
typedef struct ct_folder_args {
    int channels, height, width;
    double test_fraction; /* 0: 0.2 */
    uint64_t seed;
} ct_folder_args;
CT_API ct_status ct_dataset_load_folder(const char *dir, const char *split,
                                        const ct_folder_args *args, ct_dataset **out);

/* Training augmentation, applied per item with randomness keyed by (seed,
 * epoch, item), so a run is the same for any number of loader threads. */
typedef struct ct_augment {
    int crop_pad; /* random crop of the original size from the image padded by this with
                     black, raw byte 0, as torchvision (0: off) */
    bool hflip;   /* random horizontal flip with probability 1/2 */
    int cutout;   /* a random square of this side set to 0 after normalization (0: off) */
} ct_augment;

/* A loader cuts a dataset into batches of an epoch, in background threads
 * that prepare the next batches while the caller trains on the current. */
typedef struct ct_loader ct_loader;
typedef struct ct_loader_args {
    int batch;
    bool shuffle;     /* each epoch a permutation that depends only on (seed, epoch) */
    bool drop_last;   /* drop the last partial batch */
    ct_augment augment;
    uint64_t seed;
    int n_threads;    /* worker threads (0: 1) */
    int prefetch;     /* batches prepared ahead (0: 2) */
    /* Data parallel (as PyTorch's DistributedSampler): with n_shards > 1,
     * each epoch holds shard `shard` (0 .. n_shards-1) of the epoch's order,
     * its items shard, shard + n_shards, shard + 2 n_shards, ...: n /
     * n_shards of them (the order's last n mod n_shards items are in no
     * shard).  The n_shards loaders of one seed together hold one epoch
     * of a single loader, and their batch j together its items of batch j
     * at n_shards times the batch size.  0 or 1: the whole dataset. */
    int shard, n_shards;
} ct_loader_args;
CT_API ct_status ct_loader_new(const ct_dataset *dataset, const ct_loader_args *args,
                              ct_loader **out);
CT_API void ct_loader_free(ct_loader *loader);
/* Batches in one epoch. */
CT_API int64_t ct_loader_batches(const ct_loader *loader);
/* Begin epoch `epoch` (numbered from 1) at batch `first_batch` (0, or
 * where a resumed run left off). */
CT_API ct_status ct_loader_start(ct_loader *loader, int64_t epoch, int64_t first_batch);
/* The next batch of the epoch: images [n,C,H,W] and labels [n], borrowed
 * until the next ct_loader_next or ct_loader_start; *n is 0 after the last
 * batch.  A worker's error comes back here with its message (and again on
 * each call until the next ct_loader_start).  Nothing is allocated. */
CT_API ct_status ct_loader_next(ct_loader *loader, const float **images, const int64_t **labels,
                                int *n);

/* Decode a PNG or JPEG file, convert it to `channels` (1 or 3), resize it to
 * height x width (bilinear) and normalize it like a dataset:
 * out[c,h,w] = (x/255 - mean[c]) / std[c] (mean, std NULL: 0 and 1), the
 * same bytes as an image folder dataset stores.  Files are told by their
 * content, not their name.  CT_ERR_IO, CT_ERR_FORMAT (not a PNG/JPEG,
 * corrupt), CT_ERR_UNSUPPORTED (built without libpng/libjpeg). */
CT_API ct_status ct_image_load(const char *path, int channels, int height, int width,
                               const float *mean, const float *std, float *out);

/* ---- custom ops ---------------------------------------------------------------- */

/* An op defined outside the library: registered once by name, then used
 * like any other with ct_custom() and in model files (`custom NAME`).  Its
 * inputs and output are f32.  It may have CUDA kernels; where it has none,
 * a GPU backend runs it on the CPU (see ct_backend_set_strict).
 * examples/custom_op/ adds Mish this way. */
#define CT_CUSTOM_MAX_INPUTS 4
#define CT_CUSTOM_MAX_ATTRS 8

/* What a kernel of a custom op gets.  Pointers are host memory for the CPU
 * kernels and device memory for the CUDA ones; tensors are contiguous,
 * row-major. */
typedef struct ct_custom_call {
    int n_inputs;
    const float *inputs[CT_CUSTOM_MAX_INPUTS];
    const int64_t *input_shapes[CT_CUSTOM_MAX_INPUTS];
    int input_ndims[CT_CUSTOM_MAX_INPUTS];
    int64_t input_numels[CT_CUSTOM_MAX_INPUTS];
    float *out;          /* forward: y; backward: the gradient of input `wrt` */
    int64_t out_numel;
    const float *y, *dy; /* backward: the forward output and its gradient */
    int wrt;             /* backward: which input */
    const float *attrs;
    int n_attrs;
    void *stream;        /* CUDA kernels: the backend's cudaStream_t; NULL on the CPU */
    void *user;          /* ct_custom_op.user */
} ct_custom_call;

typedef ct_status (*ct_custom_kernel)(const ct_custom_call *call);

typedef struct ct_custom_op {
    const char *name;    /* copied; [a-z0-9_], unique */
    int n_inputs;        /* 1 .. CT_CUSTOM_MAX_INPUTS */
    /* The output shape from the inputs' shapes and the attributes (the
     * call's pointers are NULL); NULL: the shape of input 0.  An error is
     * the graph's error. */
    ct_status (*shape)(const ct_custom_call *call, int *ndim, int64_t shape[CT_MAX_DIMS]);
    ct_custom_kernel forward;       /* CPU, required */
    ct_custom_kernel backward;      /* CPU; NULL: no gradient flows through the op */
    ct_custom_kernel cuda_forward;  /* optional */
    ct_custom_kernel cuda_backward; /* optional */
    void *user;
} ct_custom_op;

/* CT_ERR_ARG for a bad description or a name already taken (the message
 * says which); at most 64 ops per process.  Thread-safe. */
CT_API ct_status ct_custom_op_register(const ct_custom_op *op);
/* A node of the registered op `name` on inputs[0..n_inputs) with
 * attrs[0..n_attrs); NULL with a graph error for an unknown name, a wrong
 * input count or a shape its rule refuses. */
CT_API ct_tensor *ct_custom(ct_graph *graph, const char *name, int n_inputs,
                            ct_tensor *const *inputs, const float *attrs, int n_attrs);

/* ---- model definitions ------------------------------------------------------ */

/* Models are written in a small text format (docs/model-format.md); the
 * built-in ones are the same texts as the files in models/. */

/* The text of a built-in model (one of ct_model_builtin_names(): each file
 * of models/ is compiled in under its name, so the list cannot go stale
 * here), or NULL.  Static: never freed. */
CT_API const char *ct_model_builtin(const char *name);
/* The built-in names, NULL-terminated.  Static. */
CT_API const char *const *ct_model_builtin_names(void);
/* The text of a built-in name, or else of the file at that path, in
 * *text (malloc'ed: free() it). */
CT_API ct_status ct_model_source(const char *name_or_path, char **text);
/* Build a model from its text on input x [N,C,H,W]; returns the logits
 * [N, n_classes], or NULL with a graph error that gives the line. */
CT_API ct_tensor *ct_model_build(ct_graph *graph, const char *text, ct_tensor *x, int n_classes);

/* ---- ONNX ------------------------------------------------------------------ */

/* An ONNX model file (docs/onnx.md): the inference graph of a CNN, opsets 13
 * to 17, with its weights inline or in external data files beside it. */
typedef struct ct_onnx ct_onnx;

/* Read, decode and check the file: every node is an op cuttle imports with
 * attributes it handles, the graph has one 4-D float input and one output.
 * CT_ERR_IO: missing or unreadable (the file or its external data);
 * CT_ERR_FORMAT: not a valid ONNX file (truncated, lying lengths, ...);
 * CT_ERR_UNSUPPORTED: an op, attribute or opset outside what cuttle
 * imports, named with its node.  On error *out is NULL. */
CT_API ct_status ct_onnx_load(const char *path, ct_onnx **out);
CT_API void ct_onnx_free(ct_onnx *model);
/* The input's shape [N, C, H, W]; shape[0] is 0 when the batch is dynamic. */
CT_API void ct_onnx_input_shape(const ct_onnx *model, int64_t shape[4]);
/* Classes: the size of the output's last dimension. */
CT_API int64_t ct_onnx_classes(const ct_onnx *model);
/* A metadata_props value ("model_name", "mean", ...), borrowed until
 * ct_onnx_free; NULL if absent. */
CT_API const char *ct_onnx_meta(const ct_onnx *model, const char *key);
/* Build the model on x [N, C, H, W] (C, H, W as the file says; N as it
 * says unless dynamic).  Its initializers become parameters (batchnorm
 * statistics buffers) under their ONNX names.  Returns the output, or NULL
 * with a graph error. */
CT_API ct_tensor *ct_onnx_build(ct_graph *graph, const ct_onnx *model, ct_tensor *x);
/* Copy the file's initializers into the parameters and buffers that
 * ct_onnx_build made in the plan's graph. */
CT_API ct_status ct_plan_load_onnx(ct_plan *plan, const ct_onnx *model);

typedef struct ct_onnx_export_args {
    int opset;        /* 13 to 17; 0: 13 */
    bool fixed_batch; /* the batch of x; false: a dynamic batch axis "N" */
    bool softmax;     /* end with Softmax over the classes */
    const char *model_name;
    int n_meta;       /* more metadata_props */
    const ct_meta *meta;
} ct_onnx_export_args;

/* Write the inference graph from x to y of a plan (built for CT_EVAL: batchnorm
 * with its running statistics, dropout left out) with the plan's parameters
 * and buffers as initializers under their names, atomically like
 * ct_plan_save.  CT_ERR_UNSUPPORTED names a node that has no ONNX form (a
 * custom op).  args NULL: the defaults. */
CT_API ct_status ct_onnx_export(ct_plan *plan, ct_tensor *x, ct_tensor *y,
                                const ct_onnx_export_args *args, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* CUTTLE_H */
