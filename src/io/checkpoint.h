/*
 * What the library's other parts see of an opened checkpoint (the int8
 * model's loader in quant/model_io.c).  Private.
 */
#ifndef CT_IO_CHECKPOINT_H
#define CT_IO_CHECKPOINT_H

#include "io/safetensors.h"

/* The file's tensors and metadata; borrowed until ct_checkpoint_close. */
const ct_st_file *ct_checkpoint_file(const ct_checkpoint *checkpoint);
/* The path it was opened from, for messages; borrowed likewise. */
const char *ct_checkpoint_path(const ct_checkpoint *checkpoint);

#endif
