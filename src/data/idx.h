/*
 * The IDX datasets (idx.c) as formats for ct_dataset_load; formats.c lists
 * them.
 */
#ifndef CT_DATA_IDX_H
#define CT_DATA_IDX_H

#include "data/dataset.h"

extern const ct_dataset_format ct_idx_fashion_mnist_format; /* "fashion-mnist" */
extern const ct_dataset_format ct_idx_mnist_format;         /* "mnist" */

#endif
