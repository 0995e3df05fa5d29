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

/* The problems a loader found in a file, grown into one message: the first
 * CT_LOAD_REPORT_SHOWN in full (each a "\n  ..." line), then a count of
 * the rest. */
#define CT_LOAD_REPORT_CAPACITY 2048
#define CT_LOAD_REPORT_SHOWN 12
typedef struct ct_load_report {
    char text[CT_LOAD_REPORT_CAPACITY];
    size_t len;
    int count;
} ct_load_report;
void ct_load_report_add(ct_load_report *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends "\n  ... and N more" when problems were left out. */
void ct_load_report_finish(ct_load_report *r);

#endif
