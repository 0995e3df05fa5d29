/*
 * ct_model_build: a model text -> graph nodes, in two steps that do not know
 * each other: parse (model_parse.h) into a description (model_desc.h), then
 * build (model_build.h) that description on the input.  This is the only
 * file that sees both.
 */
#include "nn/model_build.h"
#include "nn/model_parse.h"
#include "ops/common.h"

ct_tensor *ct_model_build(ct_graph *graph, const char *text, ct_tensor *x, int n_classes)
{
    if (!graph || !ct_graph_check_srcs(graph, "model", 1, &x))
        return NULL;
    if (!text)
        return ct_graph_fail(graph, CT_ERR_ARG, "model: the text is NULL");
    if (x->ndim != 4 || n_classes < 1) {
        CT_DESCRIBE(x);
        return ct_graph_fail(graph, CT_ERR_SHAPE,
                             "model: the input %s must be [N,C,H,W] and "
                             "the classes (%d) at least 1",
                             x_desc, n_classes);
    }
    ct_mtext parsed;
    ct_status status = ct_mtext_parse(text, &parsed);
    if (status != CT_OK) /* the parser's message, now the graph's error */
        return ct_graph_fail(graph, status, "%s", ct_last_error());
    ct_tensor *y = ct_mtext_build(graph, &parsed, x, n_classes);
    ct_mtext_free(&parsed);
    return y;
}
