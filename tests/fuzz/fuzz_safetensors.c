/*
 * libFuzzer target: safetensors checkpoints.  The bytes are a file: opened
 * (header, metadata, every tensor's place checked), its metadata read, and
 * loaded into a small model's plan, which matches names, shapes and dtypes
 * and copies what matches; a file marked as an int8 model is loaded as one
 * too (ct_plan_load_quantized: its int8 weights, scales and zero points
 * checked, the int8 plan built; seed corpus/safetensors/int8.safetensors).
 * May be refused; may not crash or leak.
 */
#include <stdint.h>

#include "cuttle.h"
#include "fuzz_file.h"

/* A model with a parameter of each kind checkpoints hold: conv, batchnorm
 * (buffers, num_batches_tracked as i64) and linear. */
static const char *const MODEL = "c: conv 2 3; b: bn; relu; flatten; fc: linear classes";

static ct_plan *plan;
static ct_tensor *x, *y;

static void make_plan(void)
{
    ct_graph *graph = ct_graph_new();
    int64_t shape[4] = {1, 1, 4, 4};
    x = ct_input(graph, "x", CT_F32, 4, shape);
    ct_backend *backend = NULL;
    if ((y = ct_model_build(graph, MODEL, x, 3)) && ct_backend_new("cpu:1", &backend) == CT_OK) {
        ct_tensor_keep(y);
        ct_plan_new(graph, backend, 1, &plan); /* kept for the whole run */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!plan)
        make_plan();
    const char *path = fuzz_file("checkpoint.safetensors", data, size);
    ct_checkpoint *checkpoint = NULL;
    if (path && ct_checkpoint_open(path, &checkpoint) == CT_OK) {
        ct_checkpoint_meta(checkpoint, "model");
        if (plan)
            ct_plan_load_checkpoint(plan, checkpoint, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER);
        ct_quantized int8;
        if (plan && ct_checkpoint_is_int8(checkpoint) &&
            ct_plan_load_quantized(plan, x, y, checkpoint, &int8) == CT_OK) {
            ct_plan_run(int8.plan, CT_EVAL);
            ct_quantized_free(&int8);
        }
    }
    ct_checkpoint_close(checkpoint);
    return 0;
}
