/*
 * The emulator's kernel counters (emu/counters.cpp), as the scheduler
 * (emu/block.cpp) and the runtime (emu/runtime.cpp) drive them.  The
 * public side is cuda_emu_counters_* in cuda_runtime_api.h.
 */
#ifndef CT_EMU_COUNTERS_H
#define CT_EMU_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "cuda_runtime_api.h"

namespace emu {

/* Whether counting is on (a relaxed read: tested at every access). */
bool counting();

/* A launch starts running (launches, blocks and threads counted). */
void counters_launch(const char *kernel, uint64_t blocks, uint64_t threads);
/* The launch that counters_launch began has run all its blocks of
 * `block_threads` threads and `shared_bytes` of dynamic shared memory: its
 * latency chain (the longest block's, times its waves) is added. */
void counters_launch_end(uint64_t blocks, int block_threads, size_t shared_bytes);
/* A block of `n_threads` starts on this host thread, or has ended (its
 * counts go to the kernel's totals). */
void counters_block_begin(const char *kernel, int n_threads);
void counters_block_end();
/* Every thread of the block passed a barrier; the lanes of `mask` of warp
 * `warp` met at a warp collective.  Requests open before it are complete. */
void counters_barrier();
void counters_warp_sync(int warp, unsigned mask);
/* Every kernel's counters summed so far (for an event's record). */
void counters_snapshot(cuda_emu_kernel_counters *out);

/* Per source line (emu/lines.cpp): whether it is on; a closed request of
 * the instruction at `pc` (global: bytes moved and used; shared:
 * wavefronts and the conflict-free count); a block's end (its lines go to
 * the totals); the totals per kernel and line, costliest first; on or off;
 * cleared. */
bool counting_lines();
void lines_request(uintptr_t pc, bool shared, unsigned long long moved, unsigned long long used,
                   unsigned wavefronts, unsigned ideal);
void lines_fp(uintptr_t pc, unsigned flops, unsigned instructions); /* one lane's block */
void lines_branch(uintptr_t pc, bool divergent);    /* one warp-level branch */
void lines_block_end(const char *kernel);
std::vector<cuda_emu_line_counters> lines_summed();
void lines_set(bool on);
void lines_reset();
/* The `top` costliest lines as a table on stderr (CUDA_EMU_COUNTERS=lines). */
void lines_print(int top);

} // namespace emu

#endif
