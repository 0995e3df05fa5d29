/*
 * A synthetic workload for `cuttle bench` and `cuttle profile`: a model on
 * seeded random images and labels, planned on a device, ready to run steps
 * in train mode (forward, cross-entropy, backward and SGD with Nesterov
 * momentum 0.9, weight decay 5e-4: the same step as bench/peers/
 * torch_bench.py) or infer mode (forward in evaluation mode).  The batch
 * is written once; a step is one ct_plan_run, as the peer keeps its batch
 * where the model runs.
 */
#ifndef CUTTLE_TOOLS_WORKLOAD_H
#define CUTTLE_TOOLS_WORKLOAD_H

#include "cli.h"
#include "json_writer.h"

#define WORKLOAD_LR 0.01f
#define WORKLOAD_MOMENTUM 0.9f
#define WORKLOAD_WEIGHT_DECAY 5e-4f

extern const char *const workload_modes[]; /* "train", "infer", NULL */

typedef struct workload_options {
    const char *model, *input, *device, *mode;
    const char *weights;    /* NULL, or a checkpoint: its weights (an int8 file: its int8
                               model), and with cuttle metadata its model, input, classes */
    long batch, classes, threads, seed;
    bool strict_device;
    bool no_optimize;       /* infer mode: run the model as built (ct_plan_optimize) */
    const char *kernels;    /* NULL: the backend's default */
    const char *cuda_graph; /* NULL or "on", or "off" */
    const char *precision;  /* NULL (fp32) or one of cli_precisions */
} workload_options;

/* simplecnn, 1x28x28 (input NULL), cpu, train, batch 64, 10 classes, seed 1. */
extern const workload_options workload_defaults;

/* The options bench and profile share (--model, --weights, --batch, --input,
 * --classes, --device, --threads, --strict-device, --kernels, --cuda-graph, --precision,
 * --mode, --seed, --no-optimize), bound to opts, written to out[0..WORKLOAD_N_OPTIONS). */
#define WORKLOAD_N_OPTIONS 14
void workload_option_table(workload_options *opts, cli_option *out);

typedef struct workload {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    ct_tensor *x, *labels, *logits;
    ct_mode mode;
    int channels, height, width;
    char device[64]; /* what was passed to ct_backend_new */
    ct_onnx *onnx;   /* --model FILE.onnx: the model and its weights */
    ct_checkpoint *checkpoint; /* --weights */
    char *model_text;          /* --weights with cuttle metadata: the model it records */
    char model_name[128];      /* ... and its name (opts->model points here then) */
    ct_quantized *quantized;   /* --weights of an int8 model: the plan and graph are its */
    bool cuda_graph; /* --cuda-graph on (the default) */
    int64_t params;  /* trainable parameters of the model as built */
    ct_optimize_report optimized; /* infer mode, unless --no-optimize */
} workload;

/* Each returns an exit status, after printing what went wrong. */

/* Check --input, --device and --threads before any work, and read an ONNX
 * model (its input and classes) or --weights (a cuttle checkpoint's model,
 * input and classes, which --model, --input and --classes may leave out;
 * an int8 model runs in infer mode only, in fp32 precision, optimized):
 * CLI_EXIT_USAGE. */
int workload_check(const char *command, workload_options *opts, workload *w);
/* Build, plan and fill the workload (call workload_check first); in infer
 * mode the plan is optimized for inference unless opts->no_optimize. */
int workload_init(const char *command, const workload_options *opts, workload *w);
void workload_free(workload *w);

/* Trainable parameters (elements) of the model as built. */
int64_t workload_params(const workload *w);

/* `--param-shapes`: the model's state_dict names and shapes as one JSON
 * object on stdout, {"conv1.weight": [6, 1, 5, 5], ...}. */
int workload_print_param_shapes(const char *command, const workload_options *opts,
                                const workload *w);

/* The fields bench and profile --json open with: framework, model, batch,
 * input ("CxHxW"), device (as given, like the peer's), emulated. */
void workload_json_fields(json_writer *out, const workload_options *opts, const workload *w);
/* On an emulated device, the line that says its timings are not GPU speed
 * (text output); nothing otherwise. */
void workload_print_emulation_note(const workload *w);

/* The q-quantile (0..1) of sorted[0..n) with linear interpolation between
 * order statistics (numpy's default; the peer computes the same). */
double workload_quantile(const double *sorted, int n, double q);
void workload_sort(double *values, int n);

/* Peak resident host memory of this process (getrusage), in bytes. */
int64_t workload_peak_host_bytes(void);

#endif
