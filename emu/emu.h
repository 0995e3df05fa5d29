/*
 * The emulated device's internal interface for the vendor-library shims
 * (emu/cublas.cpp, emu/cudnn.cpp): how they queue work on a stream and
 * check the pointers they are given.  C++ only; not part of cuttle's API.
 */
#ifndef CT_EMU_EMU_H
#define CT_EMU_EMU_H

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

/* Whether the vendor call `call` (its C name) must fail now: CUDA_EMU_FAIL
 * or cuda_emu_fail() named it.  Counts the failures it causes. */
bool injected_failure(const char *call);

} // namespace emu

#endif
