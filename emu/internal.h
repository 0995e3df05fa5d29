/*
 * What the emulator's own files share: its settings (from the environment)
 * and the grid runner (emu/block.cpp) that the runtime (emu/runtime.cpp)
 * calls when a kernel's turn on its stream comes.
 */
#ifndef CT_EMU_INTERNAL_H
#define CT_EMU_INTERNAL_H

#include <stdint.h>

#include <string>

#include "device.h"

namespace emu {

/* CUDA_EMU_ORDER: the order in which ready threads, blocks and stream work
 * run between synchronization points.  Hardware promises none of them. */
enum run_order { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };

struct settings {
    run_order order;
    uint64_t seed;        /* CUDA_EMU_SEED, for ORDER_SHUFFLE */
    int workers;          /* CUDA_EMU_THREADS: host threads that run blocks */
    size_t stack_bytes;   /* CUDA_EMU_STACK: per GPU thread */
    int devices;          /* CUDA_EMU_DEVICES */
    size_t memory_bytes;  /* CUDA_EMU_MEMORY: per device */
    int sm_count;         /* CUDA_EMU_SMS */
    int compute_capability; /* CUDA_EMU_CC, major * 10 + minor */
    bool abort_on_error;  /* CUDA_EMU_ABORT=1: abort() at a kernel error (for a debugger) */
    double nccl_timeout;  /* CUDA_EMU_NCCL_TIMEOUT: seconds a collective waits for its ranks */
};
const settings &config();

/* A splitmix64 step: the shuffles' random numbers. */
uint64_t next_random(uint64_t *state);

/* A group of kernel objects' __shared__ section, as the calling host thread
 * sees it (emu/shared_begin.cpp registers each group at start-up). */
typedef void (*shared_group_fn)(char **begin, char **end);
void register_shared_group(shared_group_fn group);

/* The linear index of the GPU thread running on the calling host thread,
 * or -1 outside a kernel; and whether `address` is in the running block's
 * shared memory (its __shared__ variables or dynamic shared memory). */
int running_thread();
bool shared_address(const void *address);

/* Run every block of `launch`; "" or the first failure, described. */
std::string run_grid(const kernel_launch &launch, uint64_t launch_number);

} // namespace emu

#endif
