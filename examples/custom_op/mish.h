/* Mish, y = x * tanh(softplus(x)), as a cuttle custom op (README.md). */
#ifndef MISH_H
#define MISH_H

#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers "mish" with its CPU kernels and, when built with its CUDA
 * kernels (MISH_CUDA, mish_cuda.cu), those too. */
ct_status mish_register(void);

#ifdef MISH_CUDA
ct_status mish_cuda_forward(const ct_custom_call *call);
ct_status mish_cuda_backward(const ct_custom_call *call);
#endif

#ifdef __cplusplus
}
#endif

#endif
