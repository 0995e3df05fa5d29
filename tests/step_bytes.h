/*
 * Everything a training step leaves behind, as bytes: the loss, every state
 * tensor (inputs, parameters, optimizer buffers) and every gradient, for
 * tests that compare two plans of one graph bit for bit (test_cuda_graph,
 * test_stage).  Include after harness.h.
 */
#ifndef CT_TESTS_STEP_BYTES_H
#define CT_TESTS_STEP_BYTES_H

#include <stdlib.h>

#include "cuttle.h"

enum { STEP_BYTES_MAX_PARTS = 64 };

/* malloc'd; *bytes its size. */
static inline void *step_bytes(ct_plan *plan, ct_graph *graph, const ct_tensor *loss,
                               size_t *bytes)
{
    const ct_tensor *parts[STEP_BYTES_MAX_PARTS];
    int n = 0;
    parts[n++] = loss;
    for (int i = 0; i < ct_graph_n_state(graph) && n + 2 <= STEP_BYTES_MAX_PARTS; i++) {
        parts[n++] = ct_graph_state(graph, i);
        if (ct_tensor_grad(ct_graph_state(graph, i)))
            parts[n++] = ct_tensor_grad(ct_graph_state(graph, i));
    }
    size_t total = 0, offset = 0;
    for (int i = 0; i < n; i++)
        total += ct_tensor_bytes(parts[i]);
    char *data = malloc(total);
    for (int i = 0; i < n; i++) {
        CHECK_OK(ct_plan_read(plan, parts[i], data + offset, ct_tensor_bytes(parts[i])));
        offset += ct_tensor_bytes(parts[i]);
    }
    *bytes = total;
    return data;
}

#endif
