/*
 * The first byte of a group's __shared__ section (emu/device.h).  The build
 * links this object first and shared_end.cpp last around a group of kernel
 * objects (`ld -r`), then makes both markers local to the group, so
 * [cuda_emu_shared_begin, cuda_emu_shared_end) spans every __shared__
 * variable of the group; the group registers that range, and emu/block.cpp
 * poisons every registered range when a block starts.  A program may hold
 * several groups (the library's kernels, a test's own).
 */
#include "internal.h"

extern "C" {
thread_local __attribute__((section(".tbss.cuda_emu_shared"))) char cuda_emu_shared_begin[1];
extern thread_local char cuda_emu_shared_end[1];
}

/* The range in the calling host thread (thread-local: each has its own). */
static void this_group(char **begin, char **end)
{
    *begin = cuda_emu_shared_begin;
    *end = cuda_emu_shared_end;
}

__attribute__((constructor)) static void register_group()
{
    emu::register_shared_group(this_group);
}
