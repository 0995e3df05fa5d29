/*
 * libFuzzer target: the ONNX loader on any bytes (tests/fuzz/run.sh).
 *
 * The bytes are a file: the loader decodes them, checks the graph and
 * builds it once (so the importer's ops see whatever the decoder let
 * through), and a model that loads is planned and its weights copied in,
 * which reads every initializer.  Anything may be refused; nothing may
 * crash, leak or read out of bounds (AddressSanitizer, UndefinedBehavior-
 * Sanitizer).  From memory there is no external data: such tensors stay
 * empty and are refused when used.
 */
#include <stdint.h>

#include "cuttle.h"
#include "io/onnx_import.h"

/* Plans of models that ask for more stay unmade (a fuzzer's 10^6 x 10^6
 * weight is a valid file, not a bug). */
#define FUZZ_MAX_STATE_BYTES ((size_t)64 << 20)

static void run_model(const ct_onnx *model)
{
    int64_t shape[4];
    ct_onnx_input_shape(model, shape);
    shape[0] = shape[0] ? shape[0] : 1;
    if (shape[0] * shape[1] * shape[2] * shape[3] > (int64_t)1 << 22)
        return;
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = graph ? ct_input(graph, "x", CT_F32, 4, shape) : NULL;
    ct_tensor *y = x ? ct_onnx_build(graph, model, x) : NULL;
    size_t state = 0;
    for (int i = 0; y && i < ct_graph_n_state(graph); i++)
        state += ct_tensor_bytes(ct_graph_state(graph, i));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    if (y && state <= FUZZ_MAX_STATE_BYTES && ct_backend_new("cpu:1", &backend) == CT_OK &&
        ct_plan_new(graph, backend, 1, &plan) == CT_OK)
        ct_plan_load_onnx(plan, model);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ct_onnx *model = NULL;
    if (onnx_load_bytes(data, size, "fuzz.onnx", &model) == CT_OK)
        run_model(model);
    ct_onnx_free(model);
    return 0;
}
