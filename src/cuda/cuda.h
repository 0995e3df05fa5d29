/*
 * What the CUDA backend offers the tests besides the vtable (tests/test_gpu.c,
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

/* Fill every block the backend's allocator hands out with 0xff bytes (NaN
 * floats), so a kernel that leaves an output element unwritten shows up. */
ct_status ct_cuda_backend_poison(ct_backend *backend, bool enabled);

/* Test hook: the backend claims not to run `op`, so that plans run it on
 * the CPU fallback (graph/plan.c). */
ct_status ct_cuda_backend_refuse(ct_backend *backend, ct_op op);

/* How many vendor-library calls (cuBLAS/cuDNN) failed, for any reason
 * (including "no algorithm for this shape"), so that the native kernel ran
 * in their place; 0 for a backend that is not CUDA.  Tests use it to tell
 * "the vendor path is right" from "the vendor path failed quietly". */
int ct_cuda_vendor_fallbacks(const ct_backend *backend);

#endif
