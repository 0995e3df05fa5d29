/*
 * Model descriptions -> graph nodes.  The builder evaluates a parsed
 * description's expressions and conditions for one input and appends its
 * layers; it knows nothing of the text or the parser.
 */
#ifndef CT_NN_MODEL_BUILD_H
#define CT_NN_MODEL_BUILD_H

#include "cuttle.h"
#include "nn/model_desc.h"

/* Append the layers of text to graph on input x, which the caller has
 * checked: a tensor of graph, [N,C,H,W], with n_classes >= 1 (the public
 * ct_model_build does).  Returns the logits [N, n_classes], or NULL with a
 * graph error that starts "<model>:<line>: ".  text is only read. */
ct_tensor *ct_mtext_build(ct_graph *graph, const ct_mtext *text, ct_tensor *x, int n_classes);

#endif
