/*
 * Model texts -> model descriptions (docs/model-format.md).  The parser
 * checks everything that does not depend on the input, so a typo in a
 * branch that one input does not take is still reported; it knows nothing
 * of graphs or of the builder.
 */
#ifndef CT_NN_MODEL_PARSE_H
#define CT_NN_MODEL_PARSE_H

#include "cuttle.h"
#include "nn/model_desc.h"

/* Parse text into *out (free it with ct_mtext_free).  On error returns
 * CT_ERR_FORMAT (CT_ERR_MEMORY when memory runs out), records
 * "<model>:<line>: ..." for ct_last_error() and leaves *out empty;
 * <model> is the name from the text's "model" line, or "model". */
ct_status ct_mtext_parse(const char *text, ct_mtext *out);

#endif
