/*
 * ONNX import (onnx_import.h): the value table, the checks at load, and the
 * public API.  The ops themselves are in onnx_ops.c.
 *
 * Loading decodes the file and builds it once into a scratch graph, so that
 * everything the file holds that cuttle cannot run is refused at load, with
 * the node named, before any plan exists.
 */
#include "io/onnx_import.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- messages and attributes ------------------------------------------------------- */

ct_status im_fail(importer *im, ct_status status, const char *fmt, ...)
{
    char message[768];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    const onnx_node *n = im->node;
    im->failed_here = true;
    if (n)
        ct_graph_fail(im->graph, status, "%s: node %d '%s' (%s, opset %lld): %s",
                      im->onnx->path, im->node_index, n->name, n->op_type,
                      (long long)onnx_model_opset(im->m), message);
    else
        ct_graph_fail(im->graph, status, "%s: %s", im->onnx->path, message);
    return status;
}

ct_status im_check_attrs(importer *im, const char *const *allowed)
{
    for (int a = 0; a < im->node->n_attrs; a++) {
        bool known = false;
        for (int i = 0; allowed[i] && !known; i++)
            known = strcmp(allowed[i], im->node->attrs[a].name) == 0;
        if (!known)
            return im_fail(im, CT_ERR_UNSUPPORTED, "attribute '%s' is not supported",
                           im->node->attrs[a].name);
    }
    return CT_OK;
}

int64_t im_attr_int(const importer *im, const char *name, int64_t fallback)
{
    const onnx_attr *a = onnx_node_attr(im->node, name);
    return a && a->type == ONNX_ATTR_INT ? a->i : fallback;
}

float im_attr_float(const importer *im, const char *name, float fallback)
{
    const onnx_attr *a = onnx_node_attr(im->node, name);
    return a && a->type == ONNX_ATTR_FLOAT ? a->f : fallback;
}

bool im_attr_ints(importer *im, const char *name, int64_t *out, int count)
{
    const onnx_attr *a = onnx_node_attr(im->node, name);
    if (!a)
        return false;
    if (a->n_ints != count) {
        im_fail(im, CT_ERR_UNSUPPORTED, "attribute '%s' has %d values; cuttle expects %d (a "
                "2-D op)", name, a->n_ints, count);
        return false;
    }
    memcpy(out, a->ints, sizeof *out * (size_t)count);
    return true;
}

const char *im_attr_string(const importer *im, const char *name, const char *fallback)
{
    const onnx_attr *a = onnx_node_attr(im->node, name);
    return a && a->type == ONNX_ATTR_STRING && a->s ? a->s : fallback;
}

/* ---- values --------------------------------------------------------------------------- */

im_value *im_find_value(importer *im, const char *name)
{
    for (int i = im->n_values - 1; i >= 0; i--) /* the latest binding of a name */
        if (strcmp(im->values[i].name, name) == 0)
            return &im->values[i];
    return NULL;
}

static im_value *add_value(importer *im, const char *name)
{
    if (im->n_values == im->capacity) {
        int capacity = im->capacity ? 2 * im->capacity : 64;
        im_value *values = realloc(im->values, sizeof *values * (size_t)capacity);
        if (!values) {
            im_fail(im, CT_ERR_MEMORY, "out of host memory");
            return NULL;
        }
        im->values = values;
        im->capacity = capacity;
    }
    im_value *v = &im->values[im->n_values++];
    *v = (im_value){.name = name, .initializer = -1};
    return v;
}

const im_value *im_required(importer *im, int i)
{
    const im_value *v = im_value_of(im, i);
    if (!v && im->graph->status == CT_OK)
        im_fail(im, CT_ERR_FORMAT, "input %d is missing", i);
    return v;
}

const im_value *im_value_of(importer *im, int i)
{
    const onnx_node *n = im->node;
    if (i >= n->n_inputs || !*n->inputs[i])
        return NULL;
    const im_value *v = im_find_value(im, n->inputs[i]);
    if (!v)
        im_fail(im, CT_ERR_FORMAT, "input '%s' is not made by any earlier node, initializer or "
                "graph input (the nodes must be in topological order)", n->inputs[i]);
    return v;
}

ct_tensor *im_weight(importer *im, int i, ct_role role, bool transpose)
{
    const im_value *v = im_required(im, i);
    return v ? im_weight_of(im, v, role, transpose) : NULL;
}

ct_tensor *im_weight_of(importer *im, const im_value *v, ct_role role, bool transpose)
{
    if (v->initializer < 0) {
        im_fail(im, CT_ERR_UNSUPPORTED, "input '%s' must be an initializer (a weight stored in "
                "the file)", v->name);
        return NULL;
    }
    const onnx_tensor *init = &im->m->initializers[v->initializer];
    if (init->data_type != ONNX_FLOAT || !init->data || (transpose && init->ndim != 2)) {
        im_fail(im, CT_ERR_UNSUPPORTED, "initializer '%s' is %s [%dD]; cuttle takes float32 "
                "weights", init->name, onnx_dtype_name(init->data_type), init->ndim);
        return NULL;
    }
    /* One initializer may feed several kinds of input (torch.onnx shares
     * equal ones: a batchnorm's zero bias is also its zero running mean):
     * each kind is a tensor of its own, named by onnx_state_name. */
    char name[ONNX_STATE_NAME_CAPACITY];
    if (!onnx_state_name(init->name, role, transpose, false, name) ||
        (ct_graph_find(im->graph, name) && ct_graph_find(im->graph, name)->role != role &&
         !onnx_state_name(init->name, role, transpose, true, name))) {
        im_fail(im, CT_ERR_UNSUPPORTED, "initializer name '%s' is too long", init->name);
        return NULL;
    }
    ct_tensor *t = ct_graph_find(im->graph, name);
    if (t)
        return t;
    int64_t shape[ONNX_MAX_DIMS];
    for (int d = 0; d < init->ndim; d++)
        shape[d] = init->dims[transpose ? init->ndim - 1 - d : d];
    if (init->ndim > CT_MAX_DIMS) {
        im_fail(im, CT_ERR_UNSUPPORTED, "initializer '%s' has %d dimensions", init->name,
                init->ndim);
        return NULL;
    }
    return role == CT_ROLE_BUFFER
               ? ct_buffer(im->graph, name, CT_F32, init->ndim, shape, CT_INIT_CONST, 0)
               : ct_param(im->graph, name, init->ndim, shape, CT_INIT_CONST, 0);
}

bool onnx_state_name(const char *initializer, ct_role role, bool transpose, bool by_role,
                     char out[ONNX_STATE_NAME_CAPACITY])
{
    int n = snprintf(out, ONNX_STATE_NAME_CAPACITY, "%s%s%s", initializer,
                     by_role ? (role == CT_ROLE_BUFFER ? ONNX_AS_BUFFER : ONNX_AS_PARAM) : "",
                     transpose ? ONNX_TRANSPOSED : "");
    return n >= 0 && n < ONNX_STATE_NAME_CAPACITY;
}

/* The initializer behind a state tensor's name, and whether it is
 * transposed: the name less its suffixes (onnx_state_name). */
static int initializer_of(const onnx_model *m, const char *state_name, bool *transpose)
{
    char base[ONNX_STATE_NAME_CAPACITY];
    snprintf(base, sizeof base, "%s", state_name);
    *transpose = false;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < m->n_initializers; i++)
            if (strcmp(m->initializers[i].name, base) == 0)
                return i;
        const char *const suffixes[] = {ONNX_TRANSPOSED, ONNX_AS_BUFFER, ONNX_AS_PARAM};
        for (int k = 0; k < 3; k++) {
            size_t len = strlen(base), suffix = strlen(suffixes[k]);
            if (len > suffix && strcmp(base + len - suffix, suffixes[k]) == 0) {
                *transpose = *transpose || k == 0;
                base[len - suffix] = '\0';
            }
        }
    }
    return -1;
}

ct_tensor *im_tensor(importer *im, int i)
{
    const im_value *v = im_required(im, i);
    if (!v)
        return NULL;
    if (v->tensor)
        return v->tensor;
    if (v->initializer >= 0)
        return im_weight(im, i, CT_ROLE_PARAM, false);
    im_fail(im, CT_ERR_UNSUPPORTED, "input %d ('%s') is a shape computation, not a tensor cuttle "
            "can compute with", i, v->name);
    return NULL;
}

bool im_ints(importer *im, int i, int64_t *out, int capacity, int *count)
{
    const im_value *v = im_required(im, i);
    if (!v)
        return false;
    const onnx_tensor *init = v->initializer >= 0 ? &im->m->initializers[v->initializer] : NULL;
    bool integers = init && init->data && (init->data_type == ONNX_INT64 ||
                                           init->data_type == ONNX_INT32);
    int64_t n = v->is_const ? v->const_count : integers ? init->numel : -1;
    if (n < 0) {
        im_fail(im, CT_ERR_UNSUPPORTED, "input %d ('%s') must be integers known when the model "
                "is built (a constant or a shape)", i, v->name);
        return false;
    }
    if (n > capacity) {
        im_fail(im, CT_ERR_UNSUPPORTED, "input %d ('%s') has %lld values; at most %d", i,
                v->name, (long long)n, capacity);
        return false;
    }
    for (int64_t k = 0; k < n; k++)
        out[k] = v->is_const ? v->const_values[k] : onnx_tensor_int(init, k);
    *count = (int)n;
    return true;
}

static const char *output_name(importer *im, int i)
{
    if (i >= im->node->n_outputs || !*im->node->outputs[i]) {
        im_fail(im, CT_ERR_FORMAT, "output %d is missing", i);
        return NULL;
    }
    return im->node->outputs[i];
}

ct_status im_set_tensor(importer *im, int i, ct_tensor *t)
{
    if (!t && im->graph->status == CT_OK)
        return im_fail(im, CT_ERR_INTERNAL, "the op made no tensor");
    if (!t && im->failed_here)
        return im->graph->status;
    if (!t) /* the builder's message stands: put the node in front of it */
        return ct_set_error(im->graph->status, "%s: node %d '%s' (%s): %s", im->onnx->path,
                            im->node_index, im->node->name, im->node->op_type, ct_last_error());
    const char *name = output_name(im, i);
    im_value *v = name ? add_value(im, name) : NULL;
    if (!v)
        return im->graph->status;
    v->tensor = t;
    return CT_OK;
}

ct_status im_set_const(importer *im, int i, int ndim, const int64_t *values, int64_t count)
{
    const char *name = output_name(im, i);
    if (!name)
        return im->graph->status;
    int64_t *copy = malloc(sizeof *copy * (size_t)(count ? count : 1));
    im_value *v = copy ? add_value(im, name) : NULL;
    if (!v) {
        free(copy);
        return im_fail(im, CT_ERR_MEMORY, "out of host memory");
    }
    memcpy(copy, values, sizeof *copy * (size_t)count);
    v->is_const = true;
    v->const_ndim = ndim;
    v->const_count = count;
    v->const_values = copy;
    return CT_OK;
}

ct_status im_set_initializer(importer *im, int i, int initializer)
{
    const char *name = output_name(im, i);
    im_value *v = name ? add_value(im, name) : NULL;
    if (!v)
        return im->graph->status;
    v->initializer = initializer;
    return CT_OK;
}

int im_consumers(const importer *im, const char *name, const onnx_node **first)
{
    int count = 0;
    *first = NULL;
    for (int n = 0; n < im->m->n_nodes; n++)
        for (int i = 0; i < im->m->nodes[n].n_inputs; i++)
            if (strcmp(im->m->nodes[n].inputs[i], name) == 0) {
                count++;
                if (!*first && n > im->node_index)
                    *first = &im->m->nodes[n];
            }
    for (int o = 0; o < im->m->n_outputs; o++)
        count += strcmp(im->m->outputs[o].name, name) == 0;
    return count;
}

/* ---- the whole graph -------------------------------------------------------------------- */

static bool is_initializer(const onnx_model *m, const char *name)
{
    for (int i = 0; i < m->n_initializers; i++)
        if (strcmp(m->initializers[i].name, name) == 0)
            return true;
    return false;
}

/* The one graph input that is not an initializer (older files list those too). */
static const onnx_value *data_input(const onnx_model *m)
{
    for (int i = 0; i < m->n_inputs; i++)
        if (!is_initializer(m, m->inputs[i].name))
            return &m->inputs[i];
    return NULL;
}

static ct_status check_input(importer *im, const onnx_value *in, const ct_tensor *x)
{
    if (x->ndim != in->ndim)
        return im_fail(im, CT_ERR_SHAPE, "the input '%s' has %d dimensions; x has %d", in->name,
                       in->ndim, x->ndim);
    for (int d = 0; d < in->ndim; d++)
        if (in->dims[d] >= 0 && in->dims[d] != x->shape[d])
            return im_fail(im, CT_ERR_SHAPE, "the input '%s' has size %lld in dimension %d; x "
                           "has %lld%s", in->name, (long long)in->dims[d], d,
                           (long long)x->shape[d],
                           d == 0 ? " (the file has a fixed batch: export it with a dynamic "
                                    "one, or use its batch)" : "");
    return CT_OK;
}

static void free_values(importer *im)
{
    for (int i = 0; i < im->n_values; i++)
        free(im->values[i].const_values);
    free(im->values);
}

static ct_tensor *build(ct_graph *graph, const ct_onnx *onnx, ct_tensor *x)
{
    importer im = {.graph = graph, .onnx = onnx, .m = onnx->model};
    const onnx_model *m = onnx->model;
    const onnx_value *in = data_input(m);
    if (!in || in->ndim != 4 || in->elem_type != ONNX_FLOAT) {
        im_fail(&im, CT_ERR_UNSUPPORTED, "cuttle imports models with one float input "
                "[N, C, H, W]; this one's is %s", in ? in->name : "missing");
        return NULL;
    }
    ct_tensor *y = NULL;
    im_value *v = NULL;
    if (check_input(&im, in, x) == CT_OK && (v = add_value(&im, in->name)))
        v->tensor = x;
    for (int i = 0; v && i < m->n_initializers; i++)
        if ((v = add_value(&im, m->initializers[i].name)))
            v->initializer = i;
    for (int n = 0; v && n < m->n_nodes && graph->status == CT_OK; n++) {
        im.node = &m->nodes[n];
        im.node_index = n;
        im_find_op(im.node->op_type)(&im); /* the check at load refused unknown ops */
        if (graph->status == CT_OK &&
            (im.node->n_outputs < 1 || !im_find_value(&im, im.node->outputs[0])))
            im_fail(&im, CT_ERR_FORMAT, "the node makes no output");
    }
    im.node = NULL;
    if (graph->status == CT_OK) {
        const im_value *out = im_find_value(&im, m->outputs[0].name);
        if (!out || !out->tensor)
            im_fail(&im, CT_ERR_FORMAT, "the output '%s' is not a tensor that a node makes",
                    m->outputs[0].name);
        else
            y = out->tensor;
    }
    free_values(&im);
    return graph->status == CT_OK ? y : NULL;
}

ct_tensor *ct_onnx_build(ct_graph *graph, const ct_onnx *model, ct_tensor *x)
{
    if (!graph)
        return NULL;
    if (!model)
        return ct_graph_fail(graph, CT_ERR_ARG, "ct_onnx_build: no model");
    if (!ct_graph_check_srcs(graph, "ct_onnx_build", 1, &x))
        return NULL;
    return build(graph, model, x);
}

/* What the file holds that no build could use, refused before building. */
static ct_status check_model(const ct_onnx *onnx)
{
    const onnx_model *m = onnx->model;
    const char *path = onnx->path;
    int64_t opset = onnx_model_opset(m);
    if (opset < ONNX_MIN_OPSET || opset > ONNX_MAX_OPSET)
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s: opset %lld; cuttle imports opsets %d to %d "
                            "(torch.onnx.export(..., opset_version=13) writes one)", path,
                            (long long)opset, ONNX_MIN_OPSET, ONNX_MAX_OPSET);
    if (m->has_sparse_initializer || m->has_functions || m->has_training_info)
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s: holds %s, which cuttle does not import",
                            path, m->has_sparse_initializer ? "sparse initializers"
                                  : m->has_functions    ? "model-local functions"
                                                        : "training information");
    if (m->n_outputs != 1)
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s: has %d outputs; cuttle imports models with "
                            "one", path, m->n_outputs);
    for (int i = 0; i < m->n_initializers; i++)
        for (int j = 0; j < i; j++)
            if (strcmp(m->initializers[i].name, m->initializers[j].name) == 0)
                return ct_set_error(CT_ERR_FORMAT, "%s: two initializers are named '%s'", path,
                                    m->initializers[i].name);
    for (int n = 0; n < m->n_nodes; n++) {
        const onnx_node *node = &m->nodes[n];
        if (*node->domain && strcmp(node->domain, "ai.onnx") != 0)
            return ct_set_error(CT_ERR_UNSUPPORTED, "%s: node %d '%s' (%s) is in domain '%s'; "
                                "cuttle imports standard ONNX ops only", path, n, node->name,
                                node->op_type, node->domain);
        if (!im_find_op(node->op_type))
            return ct_set_error(CT_ERR_UNSUPPORTED, "%s: node %d '%s': op %s (opset %lld) is "
                                "not one cuttle imports (%s)", path, n, node->name,
                                node->op_type, (long long)opset, im_op_list());
    }
    return CT_OK;
}

/* Build once on a batch of the file's size (1 when dynamic): every node
 * checked, the output's size recorded. */
static ct_status check_build(ct_onnx *onnx)
{
    const onnx_value *in = data_input(onnx->model);
    if (!in || in->ndim != 4)
        return ct_set_error(CT_ERR_UNSUPPORTED, "%s: cuttle imports models with one float input "
                            "[N, C, H, W]; this one's is %s", onnx->path,
                            in ? "not 4-D" : "missing");
    int64_t shape[4];
    for (int d = 0; d < 4; d++) {
        shape[d] = in->dims[d] > 0 ? in->dims[d] : d == 0 ? 1 : -1;
        if (shape[d] < 0)
            return ct_set_error(CT_ERR_UNSUPPORTED, "%s: the input '%s' has no fixed size in "
                                "dimension %d; cuttle needs C, H and W", onnx->path, in->name, d);
        onnx->input_shape[d] = in->dims[d] > 0 ? in->dims[d] : 0;
    }
    ct_graph *graph = ct_graph_new();
    if (!graph)
        return CT_ERR_MEMORY;
    ct_tensor *x = ct_input(graph, in->name, CT_F32, 4, shape);
    ct_tensor *y = x ? build(graph, onnx, x) : NULL;
    ct_status status = ct_graph_status(graph);
    if (status == CT_OK && y->ndim != 2)
        status = ct_set_error(CT_ERR_UNSUPPORTED, "%s: the output is %dD; cuttle imports "
                              "classifiers, whose output is [N, classes]", onnx->path, y->ndim);
    if (status == CT_OK)
        onnx->classes = y->shape[1];
    ct_graph_free(graph);
    return status;
}

/* Load from a file (bytes NULL) or from bytes in memory (no external data). */
static ct_status load(const char *path, const uint8_t *bytes, size_t length, ct_onnx **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_load: out is NULL");
    *out = NULL;
    if (!path)
        return ct_set_error(CT_ERR_ARG, "ct_onnx_load: no path");
    ct_onnx *onnx = calloc(1, sizeof *onnx);
    if (!onnx || !(onnx->path_copy = strdup(path))) {
        free(onnx);
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory", path);
    }
    onnx->path = onnx->path_copy;
    ct_status status = bytes ? onnx_model_decode(bytes, length, path, &onnx->model)
                             : onnx_model_load(path, &onnx->model);
    if (status == CT_OK)
        status = check_model(onnx);
    if (status == CT_OK)
        status = check_build(onnx);
    if (status != CT_OK) {
        ct_onnx_free(onnx);
        return status;
    }
    *out = onnx;
    return CT_OK;
}

ct_status ct_onnx_load(const char *path, ct_onnx **out)
{
    return load(path, NULL, 0, out);
}

ct_status onnx_load_bytes(const uint8_t *bytes, size_t length, const char *name, ct_onnx **out)
{
    return load(name, bytes ? bytes : (const uint8_t *)"", length, out);
}

void ct_onnx_free(ct_onnx *model)
{
    if (!model)
        return;
    onnx_model_free(model->model);
    free(model->path_copy);
    free(model);
}

void ct_onnx_input_shape(const ct_onnx *model, int64_t shape[4])
{
    memcpy(shape, model->input_shape, sizeof model->input_shape);
}

int64_t ct_onnx_classes(const ct_onnx *model)
{
    return model->classes;
}

const char *ct_onnx_meta(const ct_onnx *model, const char *key)
{
    return model && key ? onnx_model_meta(model->model, key) : NULL;
}

/* An initializer's data in the layout of its parameter. */
static ct_status write_initializer(ct_plan *plan, ct_tensor *t, const onnx_tensor *init,
                                   bool transpose, const char *path)
{
    size_t bytes = (size_t)init->numel * sizeof(float);
    if (!transpose)
        return ct_plan_write(plan, t, init->data, bytes);
    float *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return ct_set_error(CT_ERR_MEMORY, "%s: out of memory for '%s'", path, init->name);
    int64_t rows = init->dims[0], cols = init->dims[1];
    const uint8_t *from = init->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy(&copy[c * rows + r], from + sizeof(float) * (size_t)(r * cols + c),
                   sizeof(float));
    ct_status status = ct_plan_write(plan, t, copy, bytes);
    free(copy);
    return status;
}

ct_status ct_plan_load_onnx(ct_plan *plan, const ct_onnx *model)
{
    if (!plan || !model)
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_onnx: plan and model are required");
    ct_graph *graph = ct_plan_graph(plan);
    const onnx_model *m = model->model;
    for (int s = 0; s < ct_graph_n_state(graph); s++) {
        ct_tensor *t = ct_graph_state(graph, s);
        if (t->role != CT_ROLE_PARAM && t->role != CT_ROLE_BUFFER)
            continue;
        bool transpose = false;
        int i = initializer_of(m, t->name, &transpose);
        if (i < 0 || !m->initializers[i].data ||
            (size_t)m->initializers[i].numel * sizeof(float) != ct_tensor_bytes(t))
            return ct_set_error(CT_ERR_FORMAT, "%s: the plan's '%s' is not an initializer of "
                                "this file: was the graph built from it?", model->path,
                                t->name);
        CT_TRY(write_initializer(plan, t, &m->initializers[i], transpose, model->path));
    }
    return CT_OK;
}
