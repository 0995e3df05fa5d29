/*
 * Checkpoints: a plan's state to and from safetensors files.
 *
 * The model part of a checkpoint is a PyTorch state_dict (parameters and
 * buffers by name, creation order); the optimizer part holds the optimizer
 * state tensors.  Loading is all or nothing: every tensor is checked against
 * the plan before the first one is copied, and every problem found is listed
 * in one message, so a user sees the whole mismatch at once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/shapes.h"
#include "graph/graph.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

/* Longest problem list in one message; the rest are counted. */

static const char *const optimizer_suffixes[] = {".momentum_buffer", ".exp_avg", ".exp_avg_sq"};

struct ct_checkpoint {
    ct_st_file *file;
    char *path;
};

static bool selected(const ct_tensor *t, unsigned what)
{
    if (t->role == CT_ROLE_OPTIM)
        return (what & CT_SAVE_OPTIMIZER) != 0;
    return (what & CT_SAVE_MODEL) != 0;
}

static ct_status check_what(const char *fn, unsigned what)
{
    if (what == 0 || (what & ~(unsigned)(CT_SAVE_MODEL | CT_SAVE_OPTIMIZER)) != 0)
        return ct_set_error(CT_ERR_ARG,
                            "%s: what is %#x; use CT_SAVE_MODEL, CT_SAVE_OPTIMIZER or both", fn,
                            what);
    return CT_OK;
}

ct_status ct_plan_save(ct_plan *plan, const char *path, unsigned what, int n_meta,
                       const ct_meta *meta)
{
    if (!plan || !path || (n_meta > 0 && !meta) || n_meta < 0)
        return ct_set_error(CT_ERR_ARG, "ct_plan_save: plan, path and meta are required");
    CT_TRY(check_what("ct_plan_save", what));
    const ct_graph *graph = ct_plan_graph(plan);
    int n = 0;
    size_t total = 0;
    for (int i = 0; i < graph->n_state; i++) {
        if (selected(graph->state[i], what)) {
            n++;
            total += ct_tensor_bytes(graph->state[i]);
        }
    }
    ct_st_tensor *tensors = calloc((size_t)(n > 0 ? n : 1), sizeof *tensors);
    uint8_t *data = malloc(total > 0 ? total : 1);
    const char **keys = calloc((size_t)(n_meta > 0 ? n_meta : 1), sizeof *keys);
    const char **values = calloc((size_t)(n_meta > 0 ? n_meta : 1), sizeof *values);
    ct_status status = CT_OK;
    if (!tensors || !data || !keys || !values)
        status = ct_set_error(CT_ERR_MEMORY, "ct_plan_save: out of host memory for %zu bytes",
                              total);
    size_t offset = 0;
    for (int i = 0, k = 0; status == CT_OK && i < graph->n_state; i++) {
        const ct_tensor *t = graph->state[i];
        if (!selected(t, what))
            continue;
        size_t bytes = ct_tensor_bytes(t);
        status = ct_plan_read(plan, t, data + offset, bytes);
        tensors[k] = (ct_st_tensor){.name = t->name, .dtype = t->dtype, .ndim = t->ndim,
                                    .data = data + offset, .bytes = bytes};
        memcpy(tensors[k].shape, t->shape, sizeof t->shape);
        offset += bytes;
        k++;
    }
    for (int i = 0; status == CT_OK && i < n_meta; i++) {
        keys[i] = meta[i].key;
        values[i] = meta[i].value;
    }
    if (status == CT_OK)
        status = ct_st_save(path, n, tensors, n_meta, keys, values);
    free(tensors);
    free(data);
    free(keys);
    free(values);
    return status;
}

ct_status ct_checkpoint_open(const char *path, ct_checkpoint **out)
{
    if (!out)
        return ct_set_error(CT_ERR_ARG, "ct_checkpoint_open: out is NULL");
    *out = NULL;
    if (!path)
        return ct_set_error(CT_ERR_ARG, "ct_checkpoint_open: path is NULL");
    ct_checkpoint *checkpoint = calloc(1, sizeof *checkpoint);
    if (!checkpoint || !(checkpoint->path = strdup(path))) {
        free(checkpoint);
        return ct_set_error(CT_ERR_MEMORY, "ct_checkpoint_open: out of host memory");
    }
    ct_status status = ct_st_load(path, &checkpoint->file);
    if (status != CT_OK) {
        ct_checkpoint_close(checkpoint);
        return status;
    }
    *out = checkpoint;
    return CT_OK;
}

void ct_checkpoint_close(ct_checkpoint *checkpoint)
{
    if (!checkpoint)
        return;
    ct_st_free(checkpoint->file);
    free(checkpoint->path);
    free(checkpoint);
}

const char *ct_checkpoint_meta(const ct_checkpoint *checkpoint, const char *key)
{
    if (!checkpoint || !key)
        return NULL;
    return ct_st_metadata(checkpoint->file, key);
}

const ct_st_file *ct_checkpoint_file(const ct_checkpoint *checkpoint)
{
    return checkpoint->file;
}

const char *ct_checkpoint_path(const ct_checkpoint *checkpoint)
{
    return checkpoint->path;
}

void ct_load_report_add(ct_load_report *r, const char *fmt, ...)
{
    r->count++;
    if (r->count > CT_LOAD_REPORT_SHOWN || r->len + 1 >= sizeof r->text)
        return;
    va_list args;
    va_start(args, fmt);
    int written = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, args);
    va_end(args);
    if (written > 0)
        r->len += (size_t)written < sizeof r->text - r->len ? (size_t)written
                                                             : sizeof r->text - r->len - 1;
}

void ct_load_report_finish(ct_load_report *r)
{
    int hidden = r->count - CT_LOAD_REPORT_SHOWN;
    if (hidden > 0)
        snprintf(r->text + r->len, sizeof r->text - r->len, "\n  ... and %d more", hidden);
}

static bool has_optimizer_suffix(const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < sizeof optimizer_suffixes / sizeof optimizer_suffixes[0]; i++) {
        size_t suffix = strlen(optimizer_suffixes[i]);
        if (len > suffix && strcmp(name + len - suffix, optimizer_suffixes[i]) == 0)
            return true;
    }
    return false;
}

/* Check one selected state tensor against the file. */
static void check_tensor(const ct_tensor *t, const ct_st_tensor *found, ct_load_report *r)
{
    char want[96], got[96];
    if (!found) {
        ct_load_report_add(r, "\n  missing: '%s'", t->name);
        return;
    }
    bool same_shape = found->ndim == t->ndim;
    for (int d = 0; same_shape && d < t->ndim; d++)
        same_shape = found->shape[d] == t->shape[d];
    if (!same_shape) {
        ct_shape_text(t->ndim, t->shape, want, sizeof want);
        ct_shape_text(found->ndim, found->shape, got, sizeof got);
        ct_load_report_add(r, "\n  shape of '%s': the model has %s, the file %s", t->name, want, got);
    } else if (found->dtype != t->dtype) {
        ct_load_report_add(r, "\n  dtype of '%s': the model has %s, the file %s", t->name,
                   ct_dtype_name(t->dtype), ct_dtype_name(found->dtype));
    }
}

/* File tensors that nothing selected will take. */
static void check_unexpected(const ct_graph *graph, const ct_st_file *file, unsigned what,
                             ct_load_report *r)
{
    for (int i = 0; i < ct_st_count(file); i++) {
        const ct_st_tensor *st = ct_st_get(file, i);
        const ct_tensor *t = ct_graph_find(graph, st->name);
        if (t && t->state_index >= 0)
            continue; /* checked above, or state of a kind not being loaded */
        bool optimizer_kind = has_optimizer_suffix(st->name);
        if (optimizer_kind && !(what & CT_SAVE_OPTIMIZER))
            continue;
        ct_load_report_add(r, "\n  unexpected: '%s' is not %s of this model", st->name,
                   optimizer_kind ? "optimizer state" : "a parameter or buffer");
    }
}

ct_status ct_plan_load_checkpoint(ct_plan *plan, const ct_checkpoint *checkpoint,
                                  unsigned what)
{
    if (!plan || !checkpoint)
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_checkpoint: plan and checkpoint are "
                                        "required");
    CT_TRY(check_what("ct_plan_load_checkpoint", what));
    if (ct_checkpoint_is_int8(checkpoint))
        return ct_set_error(CT_ERR_FORMAT, "%s is an int8 model (cuttle quantize -o), not fp32 "
                                           "weights: ct_plan_load_quantized builds its int8 "
                                           "plan (cuttle eval, predict, bench --weights and "
                                           "export take it)", checkpoint->path);
    const ct_graph *graph = ct_plan_graph(plan);
    ct_load_report problems = {.len = 0};
    int n_selected = 0;
    for (int i = 0; i < graph->n_state; i++) {
        const ct_tensor *t = graph->state[i];
        if (!selected(t, what))
            continue;
        n_selected++;
        check_tensor(t, ct_st_find(checkpoint->file, t->name), &problems);
    }
    if (n_selected == 0)
        return ct_set_error(CT_ERR_ARG, "ct_plan_load_checkpoint: the plan has no %s to load",
                            what == CT_SAVE_OPTIMIZER ? "optimizer state" : "state");
    check_unexpected(graph, checkpoint->file, what, &problems);
    if (problems.count > 0) {
        ct_load_report_finish(&problems);
        return ct_set_error(CT_ERR_FORMAT,
                            "%s does not fit this model (%d problem%s; the model has %d "
                            "tensors to load):%s\n  Was it saved from a different model, input "
                            "size or number of classes?",
                            checkpoint->path, problems.count, problems.count == 1 ? "" : "s",
                            n_selected, problems.text);
    }
    for (int i = 0; i < graph->n_state; i++) {
        ct_tensor *t = graph->state[i];
        if (!selected(t, what))
            continue;
        const ct_st_tensor *st = ct_st_find(checkpoint->file, t->name);
        CT_TRY(ct_plan_write(plan, t, st->data, st->bytes));
    }
    return CT_OK;
}

ct_status ct_plan_load(ct_plan *plan, const char *path, unsigned what)
{
    ct_checkpoint *checkpoint = NULL;
    CT_TRY(ct_checkpoint_open(path, &checkpoint));
    ct_status status = ct_plan_load_checkpoint(plan, checkpoint, what);
    ct_checkpoint_close(checkpoint);
    return status;
}
