/*
 * libFuzzer target: the model text format (docs/model-format.md) on any
 * text: parsed and built on an input [2, 3, 32, 32] into 10 classes.  A
 * text may be refused; none may crash, hang or leak.  Nothing is planned
 * (a fuzzed model's parameters may be any size: the graph holds shapes,
 * not data).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuttle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    ct_graph *graph = ct_graph_new();
    int64_t shape[4] = {2, 3, 32, 32};
    ct_tensor *x = graph ? ct_input(graph, "x", CT_F32, 4, shape) : NULL;
    if (x)
        ct_model_build(graph, text, x, 10);
    ct_graph_free(graph);
    free(text);
    return 0;
}
