/*
 * What the CUDA backend offers the rest of the library (src/devices/, dist/nccl.c)
 * and the tests besides the vtable (tests/test_gpu.c,
 * tests/test_backend_ops.c); the public part is include/cuttle_cuda.h.
 * These exist only in builds with CT_HAVE_CUDA.
 */
#ifndef CT_CUDA_CUDA_H
#define CT_CUDA_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "core/op_kinds.h"
#include "cuttle.h"
#include "cuttle_cuda.h"

/* The CUDA backend on GPU `device` (cuda/backend.c), for the device list
 * (src/devices/). */
ct_status ct_cuda_backend_new(int device, ct_backend **out);

/* The GPU a CUDA backend runs on and the stream (a cudaStream_t) its nodes'
 * work is queued on, borrowed (dist/nccl.c orders its collectives after
 * that work).  CT_ERR_ARG for any other backend. */
ct_status ct_cuda_backend_stream(const ct_backend *backend, int *device, void **stream);

/* Fill every block the backend's allocator hands out with 0xff bytes (NaN
 * floats), so a kernel that leaves an output element unwritten shows up. */
ct_status ct_cuda_backend_poison(ct_backend *backend, bool enabled);


#endif
