/*
 * NVTX ranges on the emulated device: no profiler attaches to it, so a
 * range costs nothing and records nothing (the real header is NVIDIA's).
 */
#ifndef CT_EMU_NVTOOLSEXT_H
#define CT_EMU_NVTOOLSEXT_H

static inline int nvtxRangePushA(const char *message)
{
    (void)message;
    return 0;
}

static inline int nvtxRangePop(void)
{
    return 0;
}

#endif
