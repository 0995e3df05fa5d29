/*
 * What nvcc includes into every .cu file, for the emulated device: the
 * runtime API and, in C++, the device-side language (emu/device.h).
 */
#ifndef CT_EMU_CUDA_RUNTIME_H
#define CT_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"
#ifdef __cplusplus
#include "device.h"
#endif

#endif
