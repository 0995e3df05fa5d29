/*
 * The CPU's reduced-precision reference: every CPU kernel is f32, so a node
 * that reads or writes f16 or bf16 tensors (a bf16 or fp16 graph,
 * ct_graph_set_precision) runs on f32 copies of them: its 16-bit inputs
 * widened exactly, the f32 kernel, its 16-bit outputs rounded to nearest
 * even (core/half.h).  The rounding points are a GPU's: wherever it stores a
 * 16-bit value, the CPU rounds the same f32 result once, so a GPU's 16-bit
 * kernel and this reference differ only by the order of their f32 sums
 * (a few units in the last place of the 16-bit output).
 *
 * Slow on purpose: the copies are made per node and per step.  The storage
 * stays 16 bits, so a plan's memory, ct_plan_read and the copies of a GPU
 * plan's CPU fallback see the same bytes as on the GPU.
 */
#include <stdlib.h>

#include "core/error.h"
#include "core/half.h"
#include "cpu/backend.h"
#include "graph/impl.h"

enum { MAX_WIDENED = CT_MAX_SRC + 2 }; /* the inputs, the output, a fused pool's output */

typedef struct widened {
    const ct_tensor *root[MAX_WIDENED];
    float *data[MAX_WIDENED];
    bool written[MAX_WIDENED];
    int n;
} widened;

static void narrow(const ct_tensor *root, const float *in, void *bits)
{
    int64_t n = ct_tensor_numel(root);
    uint16_t *h = bits;
    if (root->dtype == CT_BF16)
        for (int64_t i = 0; i < n; i++)
            h[i] = ct_bf16_from_f32(in[i]);
    else
        for (int64_t i = 0; i < n; i++)
            h[i] = ct_f16_from_f32(in[i]);
}

/* Adds t's storage root to w (once) if it is 16-bit: its f32 copy, filled
 * from the 16 bits.  `written`: the node writes it. */
static ct_status add(widened *w, const ct_exec *exec, const ct_tensor *t, bool written)
{
    if (!t || !ct_dtype_is_half(t->dtype))
        return CT_OK;
    const ct_tensor *root = ct_storage_root(t);
    if (t->view_offset != 0)
        return ct_set_error(CT_ERR_UNSUPPORTED,
                            "%s: a %s view at an offset; the CPU reference widens whole "
                            "tensors only",
                            ct_tensor_name(t), ct_dtype_name(t->dtype));
    for (int i = 0; i < w->n; i++) {
        if (w->root[i] == root) {
            w->written[i] = w->written[i] || written;
            return CT_OK;
        }
    }
    CT_ASSERT(w->n < MAX_WIDENED);
    float *data = malloc((size_t)ct_tensor_numel(root) * sizeof *data);
    if (!data)
        return ct_set_error(CT_ERR_MEMORY, "out of host memory widening %s to f32",
                            ct_tensor_name(root));
    ct_widen_16(root->dtype == CT_BF16, ct_exec_data(exec, root), data, ct_tensor_numel(root));
    w->root[w->n] = root;
    w->data[w->n] = data;
    w->written[w->n++] = written;
    return CT_OK;
}

ct_status ct_cpu_run_widened(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                             const ct_impl *impl)
{
    widened w = {.n = 0};
    void **direct = calloc((size_t)node->graph->n_nodes, sizeof *direct);
    ct_status status = direct ? CT_OK
                              : ct_set_error(CT_ERR_MEMORY, "out of host memory running %s",
                                             node->label);
    const ct_tensor *pool = exec->pool_into ? exec->pool_into[node->id] : NULL;
    for (int s = 0; status == CT_OK && s < node->n_src; s++)
        status = add(&w, exec, node->src[s], false);
    if (status == CT_OK)
        status = add(&w, exec, node, true);
    if (status == CT_OK)
        status = add(&w, exec, pool, true);
    if (status == CT_OK) {
        for (int i = 0; i < w.n; i++)
            direct[w.root[i]->id] = w.data[i];
        ct_exec wide = *exec;
        wide.direct = direct;
        status = impl->run(backend, &wide, node);
    }
    for (int i = 0; i < w.n; i++) {
        if (status == CT_OK && w.written[i])
            narrow(w.root[i], w.data[i], ct_exec_data(exec, w.root[i]));
        free(w.data[i]);
    }
    free(direct);
    return status;
}
