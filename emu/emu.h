/*
 * The emulated device's internal interface for the vendor-library shims
 * (emu/cublas.cpp, emu/cudnn.cpp): how they queue work on a stream and
 * check the pointers they are given.  C++ only; not part of cuttle's API.
 */
#ifndef CT_EMU_EMU_H
#define CT_EMU_EMU_H

#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include <functional>

#include "cuda_runtime_api.h"

namespace emu {

/* Queue host work on `stream` (0: the current device's legacy stream).  It
 * runs in stream order, when the host waits for the stream, like a kernel.
 * `what` names it in error messages.  Fails (invalid handle, sticky error)
 * as cudaLaunchKernel would. */
cudaError_t enqueue(cudaStream_t stream, const char *what, std::function<void()> work);

/* Whether [ptr, ptr + bytes) lies inside one live device allocation. */
bool is_device_range(const void *ptr, size_t bytes);

/* Mark the work now running (inside an enqueue'd function) as failed: the
 * stream's later work is skipped, and the error is sticky as a failed
 * kernel's would be.  `message` says what went wrong. */
void fail_current_work(cudaError_t error, const char *message);

/* Every vendor-library entry point calls this first: it counts the call
 * (cuda_emu_calls) and says whether it must fail now, because CUDA_EMU_FAIL
 * or cuda_emu_fail() named it (cuda_emu_failures counts those). */
bool injected_failure(const char *call);

/* A vendor call refused: one line "cuda-emu: <function>: <why>" on stderr. */
void report_rejection(const char *function, const char *format, va_list args);

/* TF32 keeps float's 8-bit exponent and the top 10 of its 23 mantissa bits:
 * round to nearest even on the bit pattern; NaN and infinity stay as they
 * are.  (What tensor cores do to each factor under TF32 math.) */
inline float tf32_round(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & 0x7f800000u) == 0x7f800000u)
        return value;
    bits += 0xfffu + ((bits >> 13) & 1u);
    bits &= ~0x1fffu;
    memcpy(&value, &bits, sizeof bits);
    return value;
}

} // namespace emu

#endif
