/*
 * Image folders (folder.c) as a format for ct_dataset_load; formats.c lists
 * it.
 */
#ifndef CT_DATA_FOLDER_H
#define CT_DATA_FOLDER_H

#include "data/dataset.h"

extern const ct_dataset_format ct_folder_format; /* "folder": ct_dataset_load_folder, defaults */

#endif
