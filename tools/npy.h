/*
 * NumPy's .npy files (format versions 1 to 3), as far as predict needs
 * them: a little-endian float32 array in C order ('<f4', fortran_order
 * False), written by numpy.save.
 */
#ifndef CUTTLE_TOOLS_NPY_H
#define CUTTLE_TOOLS_NPY_H

#include <stdint.h>

#define NPY_MAX_DIMS 4

typedef struct npy_array {
    int ndim;
    int64_t shape[NPY_MAX_DIMS];
    int64_t numel;
    float *data; /* malloc'ed */
} npy_array;

/* Read the file; on failure print why (prefixed "cuttle <command>:") and
 * return an exit status. */
int npy_read_f32(const char *command, const char *path, npy_array *out);

#endif
