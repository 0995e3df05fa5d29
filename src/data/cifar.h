/*
 * The CIFAR datasets (cifar.c) as formats for ct_dataset_load; formats.c
 * lists them.
 */
#ifndef CT_DATA_CIFAR_H
#define CT_DATA_CIFAR_H

#include "data/dataset.h"

extern const ct_dataset_format ct_cifar10_format;  /* "cifar10" */
extern const ct_dataset_format ct_cifar100_format; /* "cifar100" */

#endif
