/*
 * safetensors files: read and write.
 *
 * The format (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header length N, N bytes of UTF-8 JSON, then the data
 * section.  The JSON object maps each tensor name to
 *   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data section, little-endian
 * row-major data, plus an optional "__metadata__" map of strings to strings.
 *
 * cuttle reads F32, F16, BF16, I8, U8, I32 and I64 tensors; files with other
 * dtypes are refused with a message that says which tensor and what to do.
 */
#ifndef CT_IO_SAFETENSORS_H
#define CT_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"

typedef struct ct_st_tensor {
    const char *name;
    ct_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[CT_MAX_DIMS];
    const void *data; /* aligned to the dtype's size; NULL-free even when bytes is 0 */
    size_t bytes;     /* numel * dtype size */
} ct_st_tensor;

typedef struct ct_st_file ct_st_file;

/* Read and check the whole file.  On success *out owns everything that the
 * accessors below return; otherwise *out is NULL and ct_last_error() names
 * the file, what is wrong and what to do.  CT_ERR_IO: cannot open or read;
 * CT_ERR_FORMAT: corrupt or not safetensors, or the data does not match the
 * checksum in its metadata (CT_ST_CHECKSUM_KEY); CT_ERR_UNSUPPORTED: a dtype
 * that cuttle does not handle (F64, BOOL, ...); CT_ERR_MEMORY. */
ct_status ct_st_load(const char *path, ct_st_file **out);
void ct_st_free(ct_st_file *file); /* NULL is fine */

/* Tensors in the order of their data offsets (the order they were saved). */
int ct_st_count(const ct_st_file *file);
/* Borrowed, valid until ct_st_free; NULL if i is out of range. */
const ct_st_tensor *ct_st_get(const ct_st_file *file, int i);
/* Borrowed; NULL if no tensor has that name. */
const ct_st_tensor *ct_st_find(const ct_st_file *file, const char *name);
/* The "__metadata__" value for key.  Borrowed; NULL if missing. */
const char *ct_st_metadata(const ct_st_file *file, const char *key);

/* Write tensors (in the given order, data back to back after a header padded
 * with spaces to a multiple of 8 bytes) and n_meta metadata pairs to path,
 * atomically: the data goes to "<path>.tmp.<pid>", is flushed and fsynced,
 * renamed over path, and the directory is fsynced.  On failure the temporary
 * file is removed and an existing file at path is left as it was.
 * The metadata gets one more pair, CT_ST_CHECKSUM_KEY: the data section's
 * checksum, which ct_st_load verifies.
 * Names must be unique, valid UTF-8 and not "__metadata__"; metadata keys
 * not CT_ST_CHECKSUM_KEY; bytes must equal numel * dtype size. */
ct_status ct_st_save(const char *path, int n, const ct_st_tensor *tensors, int n_meta,
                     const char *const *meta_keys, const char *const *meta_values);

/* ---- shared by safetensors.c and safetensors_save.c ---- */

#define CT_ST_LENGTH_PREFIX_BYTES 8
#define CT_ST_METADATA_KEY "__metadata__"
/* The checksum of the data section that ct_st_save writes into the
 * metadata, as "xxh64:" and 16 lowercase hex digits (io/checksum.h); a file
 * that has it loads only if its data still hashes to it.  Files without it
 * (PyTorch's, older cuttle's) load unchecked. */
#define CT_ST_CHECKSUM_KEY "cuttle_checksum"
#define CT_ST_CHECKSUM_ALGO "xxh64"

/* The format's name of a dtype ("F32") and its size; NULL and 0 if invalid. */
const char *ct_st_dtype_name(ct_dtype dtype);
size_t ct_st_dtype_size(ct_dtype dtype);
/* numel * element_size without overflow; false if it does not fit. */
bool ct_st_shape_bytes(int ndim, const int64_t *shape, size_t element_size, uint64_t *out);

#endif
