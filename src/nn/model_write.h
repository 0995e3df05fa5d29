/*
 * A built graph written back as a model text (docs/model-format.md): one
 * statement per layer, every layer with parameters named explicitly by its
 * parameters' names, branches by `save`/`use`/`add`, all for the input the
 * graph was built on (the file's `if`s, `repeat`s and blocks come out
 * resolved).  ct_model_build on the text makes the same parameters and the
 * same outputs.  Pruning (nn/prune.c) writes its smaller networks this
 * way, with new channel counts.
 */
#ifndef CT_NN_MODEL_WRITE_H
#define CT_NN_MODEL_WRITE_H

#include "graph/graph.h"

/* The text of the forward graph from x (an input) to y, into *text
 * (malloc'ed).  out_channels, by node id, may give a convolution another
 * number of output channels (0: as built); NULL: none.  `header` (may be
 * NULL) is written first as comment lines.  CT_ERR_UNSUPPORTED names a
 * node that the format cannot state (a custom op, a reshape that is not a
 * flatten, ...). */
ct_status ct_model_write(const ct_graph *graph, const ct_tensor *x, const ct_tensor *y,
                         const int *out_channels, const char *model_name, const char *header,
                         char **text);

#endif
