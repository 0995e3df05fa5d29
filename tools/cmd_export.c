/*
 * cuttle export: saved weights and their model as an ONNX file (the
 * inference graph, docs/onnx.md).  The checkpoint's metadata (model,
 * input, normalization, class names) goes into the file's metadata_props,
 * so that predict and eval run the .onnx file alone.  An int8 model (cuttle
 * quantize -o) is written in QDQ form: QuantizeLinear and DequantizeLinear
 * around its int8 layers (docs/quantization.md).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_info.h"

#define EXPORT_MIN_OPSET 13
#define EXPORT_MAX_OPSET 17

typedef struct export_options {
    const char *weights, *model, *data, *data_dir, *onnx, *batch, *input;
    long opset, classes;
    bool softmax;
} export_options;

static int open_model(const export_options *o, ct_checkpoint **checkpoint, run_info *info)
{
    if (o->model && cli_model_is_onnx(o->model)) {
        fprintf(stderr, "cuttle export: %s is an ONNX file already\n", o->model);
        return CLI_EXIT_USAGE;
    }
    return run_info_open("export", &(run_source){o->weights, o->model, o->data, o->data_dir,
                                                 o->input, o->classes},
                         checkpoint, info);
}

/* --batch: "dynamic" (0) or a whole number. */
static int parse_batch(const char *text, long *batch)
{
    char *end = NULL;
    *batch = strcmp(text, "dynamic") == 0 ? 0 : strtol(text, &end, 10);
    if (*batch == 0 && strcmp(text, "dynamic") == 0)
        return CLI_EXIT_OK;
    if (end == text || *end || *batch < 1 || *batch > 65536) {
        fprintf(stderr, "cuttle export: --batch expects 'dynamic' or a whole number from 1 to "
                "65536, got '%s'\n", text);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

static int export_model(const export_options *o)
{
    ct_checkpoint *checkpoint = NULL;
    run_info info;
    ct_graph *graph = NULL;
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    run_meta meta = {.n = 0};
    ct_quantized quantized = {0};
    long batch = 0;
    int exit_status = parse_batch(o->batch, &batch);
    if (exit_status == CLI_EXIT_OK)
        exit_status = open_model(o, &checkpoint, &info);
    if (exit_status == CLI_EXIT_OK && !(graph = ct_graph_new()))
        exit_status = cli_fail("export");
    if (exit_status == CLI_EXIT_OK) {
        int64_t shape[4] = {batch ? batch : 1, info.input[0], info.input[1], info.input[2]};
        ct_tensor *x = ct_input(graph, "x", CT_F32, 4, shape);
        ct_tensor *y = ct_model_build(graph, info.text, x, info.classes);
        ct_onnx_export_args args = {.opset = (int)o->opset, .fixed_batch = batch > 0,
                                    .softmax = o->softmax, .model_name = info.name};
        bool int8 = ct_checkpoint_is_int8(checkpoint);
        if (ct_graph_status(graph) != CT_OK || ct_backend_new("cpu", &backend) != CT_OK ||
            ct_plan_new(graph, backend, 1, &plan) != CT_OK ||
            (int8 ? ct_plan_load_quantized(plan, x, y, checkpoint, &quantized)
                  : ct_plan_load_checkpoint(plan, checkpoint, CT_SAVE_MODEL)) != CT_OK) {
            exit_status = cli_fail("export");
        } else if (!run_meta_add_info(&meta, &info) ||
                   (int8 && (!run_meta_add(&meta, "quantization", "int8") ||
                             !run_meta_add(&meta, "calibration",
                                           ct_calib_method_name(quantized.args.method))))) {
            fprintf(stderr, "cuttle export: out of host memory for the metadata\n");
            exit_status = CLI_EXIT_FAILED;
        } else {
            args.n_meta = meta.n;
            args.meta = meta.items;
            if ((int8 ? ct_onnx_export(quantized.plan, quantized.x, quantized.y, &args, o->onnx)
                      : ct_onnx_export(plan, x, y, &args, o->onnx)) != CT_OK)
                exit_status = cli_fail("export");
        }
    }
    if (exit_status == CLI_EXIT_OK)
        printf("exported %s%s (%dx%dx%d -> %d classes%s) to %s: opset %ld, %s batch\n",
               quantized.plan ? "the int8 model of " : "", info.name, info.input[0],
               info.input[1], info.input[2], info.classes, o->softmax ? ", softmax" : "",
               o->onnx, o->opset, batch ? "a fixed" : "a dynamic");
    run_meta_free(&meta);
    ct_quantized_free(&quantized);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    run_info_free(&info);
    ct_checkpoint_close(checkpoint);
    return exit_status;
}

int cmd_export(int argc, char **argv)
{
    export_options o = {.batch = "dynamic", .opset = EXPORT_MIN_OPSET};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train, or a state_dict; an int8 model "
         "from cuttle quantize -o is written in QDQ form) (required)"},
        {"--onnx", "FILE", CLI_TEXT, &o.onnx, 0, 0, NULL, "the ONNX file to write (required)"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint)"},
        {"--opset", "N", CLI_INT, &o.opset, EXPORT_MIN_OPSET, EXPORT_MAX_OPSET, NULL,
         "the ONNX opset, 13 to 17 (default 13)"},
        {"--batch", "N|dynamic", CLI_TEXT, &o.batch, 0, 0, NULL,
         "a fixed batch size, or a dynamic batch axis (default dynamic)"},
        {"--softmax", NULL, CLI_FLAG, &o.softmax, 0, 0, NULL,
         "end the graph with a Softmax: probabilities instead of logits"},
        RUN_SOURCE_OPTIONS(o),
    };
    cli_parsed parsed = cli_parse("export", "--weights FILE --onnx OUT.onnx [options]", argc,
                                  argv, options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!o.weights || !o.onnx) {
        fprintf(stderr, "cuttle export: --weights FILE and --onnx FILE are required (see cuttle "
                        "export --help)\n");
        return CLI_EXIT_USAGE;
    }
    return cli_parse_only ? CLI_EXIT_OK : export_model(&o);
}
