/*
 * The calls that emu/count_pass.cpp (an LLVM pass, run by clang on the
 * kernels' objects) puts into the kernels' code, and emu/counters.cpp
 * answers: what both sides must agree on.
 *
 *   void __cuda_emu_count_fp(const uint32_t *counts);
 *       once per basic block of the kernel's own code, before its end:
 *       `counts` is a constant table of the block's static counts, indexed
 *       by enum cuda_emu_fp_field (emu/half_common.h makes the same call
 *       for the half-precision operators and the wmma API);
 *   void __cuda_emu_dependent_load(void);
 *       just before a load whose address was computed from the value of
 *       another load of the thread's (following a linked list, indexing
 *       by a loaded label): it waits for that load's round trip;
 *   void __cuda_emu_branch(uint32_t successor);
 *       before each conditional branch and switch: the successor the lane
 *       takes (0 for a true condition or a switch's default).
 */
#ifndef CT_EMU_COUNT_HOOKS_H
#define CT_EMU_COUNT_HOOKS_H

#define CUDA_EMU_COUNT_FP_HOOK "__cuda_emu_count_fp"
#define CUDA_EMU_BRANCH_HOOK "__cuda_emu_branch"
#define CUDA_EMU_DEPENDENT_LOAD_HOOK "__cuda_emu_dependent_load"

/* One basic block's floating-point work, per thread that runs it, each
 * operation on a vector counted once per element; and its instructions
 * (emu/count_pass.cpp says which count), for the latency term of the
 * roofline model (docs/roofline.md). */
enum cuda_emu_fp_field {
    CUDA_EMU_FP32_ADDS,  /* fp32 add and subtract */
    CUDA_EMU_FP32_MULS,  /* fp32 multiply */
    CUDA_EMU_FP32_FMAS,  /* fp32 fused multiply-add (llvm.fma, llvm.fmuladd) */
    CUDA_EMU_FP32_OTHER, /* fp32 divide, remainder, sqrt, a libm call: one each */
    CUDA_EMU_FP64_OPS,   /* fp64, every kind above, an FMA once */
    CUDA_EMU_FP16_OPS,   /* half and bfloat, every kind, an FMA once */
    CUDA_EMU_MMA_OPS,    /* tensor-core multiply-adds: M x N x K per warp-level mma */
    CUDA_EMU_FLOPS,      /* adds + muls + 2 x FMAs + others + 2 x mma, every precision */
    CUDA_EMU_INSTRUCTIONS, /* the block's instructions, roughly as a GPU issues them */
    CUDA_EMU_FP_FIELDS
};

#endif
