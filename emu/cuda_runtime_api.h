/*
 * The emulated CUDA device: the runtime API subset that cuttle calls, in C.
 *
 * This header stands in for the toolkit's cuda_runtime_api.h when cuttle is
 * built with `make CUDA=emu`: the same names, types and (where it matters
 * for messages) the same numeric codes, implemented by emu/runtime.cpp on
 * the CPU.  Device memory is host heap memory, so AddressSanitizer sees
 * out-of-bounds device accesses; streams are queues that run when the host
 * waits for them (docs/emulator.md says exactly what that models).
 *
 * Nothing here is NVIDIA's code: it is written from the CUDA Runtime API
 * documentation, for the functions cuttle uses.
 */
#ifndef CT_EMU_CUDA_RUNTIME_API_H
#define CT_EMU_CUDA_RUNTIME_API_H

#include <stddef.h>

#define CUDA_EMU 1             /* this is the emulator, not NVIDIA's runtime */
#define CUDART_VERSION 13000   /* the API level it models */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorAssert = 710,
    cudaErrorLaunchFailure = 719,
    cudaErrorNotSupported = 801,
    /* Stream capture (cudaStreamBeginCapture): what the rules refuse. */
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorStreamCaptureWrongThread = 908,
    cudaErrorUnknown = 999
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
} cudaMemcpyKind;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;

#define cudaStreamDefault 0x0u
#define cudaStreamNonBlocking 0x1u
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

#define cudaEventDefault 0x0u
#define cudaEventBlockingSync 0x1u
#define cudaEventDisableTiming 0x2u

/* During stream capture, cudaEventRecordWithFlags and cudaStreamWaitEvent
 * with these flags add an event record or wait node to the graph; without
 * them a record only marks a point of the capture, and a wait for an event
 * recorded outside it is refused. */
#define cudaEventRecordDefault 0x0u
#define cudaEventRecordExternal 0x1u
#define cudaEventWaitDefault 0x0u
#define cudaEventWaitExternal 0x1u

#define cudaHostAllocDefault 0x0u

/* The fields cuttle and the occupancy rules read (a subset of NVIDIA's). */
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;        /* without opting in: 48 KiB */
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    size_t totalConstMem;
    int major, minor;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    size_t sharedMemPerBlockOptin;
    int maxBlocksPerMultiProcessor;
    int memoryBusWidth;
    int pciBusID, pciDeviceID;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceSynchronize(void);
/* Frees everything of the current device and clears its sticky error. */
cudaError_t cudaDeviceReset(void);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);

cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorName(cudaError_t error);
/* For a failed kernel, the emulator's description of what went wrong
 * (kernel, block, thread, source line) follows the generic text. */
const char *cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocHost(void **ptr, size_t bytes);
cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void *ptr);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                         size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                              size_t width, size_t height, enum cudaMemcpyKind kind,
                              cudaStream_t stream);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);

cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned flags);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

/* CUDA Graphs by stream capture (docs/emulator.md, "CUDA Graphs"): between
 * cudaStreamBeginCapture and cudaStreamEndCapture the work queued on a
 * stream is recorded into a graph, not run; cudaGraphLaunch runs the
 * instantiated graph on a stream as one piece of work.  As in NVIDIA's
 * headers the enums have no typedef: C code writes `enum ...`. */
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2 /* a refused call: EndCapture fails */
};

/* Which other calls a capture forbids: Global, those of every thread;
 * ThreadLocal, those of the thread that began it; Relaxed, none (the calls
 * that contradict capture itself are refused in every mode). */
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status);
/* flags: 0 only (the instantiation flags concern nodes not emulated). */
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec, cudaGraph_t graph,
                                 unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
/* nodes NULL: *count = how many; else fills up to *count of them (NULL
 * past the last) and sets *count to how many it filled. */
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);

/* Per kernel: the most dynamic shared memory a launch may ask for (default
 * sharedMemPerBlock, 48 KiB; at most sharedMemPerBlockOptin, 227 KiB).
 * Process-wide here; a context property (so per device) on a GPU. */
typedef enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8
} cudaFuncAttribute;
cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attribute, int value);

/* Resident blocks per SM for a kernel of `block_size` threads, from the
 * device's limits on threads, blocks and shared memory per SM (the emulator
 * cannot know a kernel's registers and static shared memory: it assumes
 * 32 registers per thread and none, which docs/emulator.md notes). */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *kernel,
                                                          int block_size,
                                                          size_t dynamic_shared_bytes);

/* Emulator only (not CUDA): make the named vendor-library calls fail, as
 * CUDA_EMU_FAIL="cudnnConvolutionForward,cublasSgemm" does, to test the
 * paths that handle their failure ("" or NULL: none); how many calls of
 * `call` failed so; and how many were made (did the vendor path run?). */
void cuda_emu_fail(const char *calls);
int cuda_emu_failures(const char *call);
int cuda_emu_calls(const char *call);

/* Emulator only: the kernel launches that have run so far (a graph's
 * kernel nodes count at every replay), and the graph launches that have. */
unsigned long long cuda_emu_kernel_launches(void);
unsigned long long cuda_emu_graph_launches(void);

/* Emulator only: dlopen, dlsym and dlerror for the vendor libraries, whose
 * shims are linked in (src/cuda/vendor_api.c loads through these).  Only
 * the sonames cuttle asks for open ("libcublas.so.13", "libcudnn.so.9");
 * only the functions it calls resolve. */
void *cuda_emu_dlopen(const char *path);
void *cuda_emu_dlsym(void *library, const char *name);
const char *cuda_emu_dlerror(void);

/* Emulator only: what kernels did, counted as a profiler would count it
 * (emu/counters.cpp, docs/emulator.md), per kernel name over the launches
 * made while counting was on.  Memory: each warp-level access (the lanes'
 * n-th execution of one load or store since the warp last synchronized) is
 * one request; a global request moves the 32-byte sectors its lanes touch
 * (its efficiency: distinct bytes used / bytes moved), a shared one takes as
 * many wavefronts as the most distinct 4-byte words any of the 32 banks
 * must serve. */
typedef struct cuda_emu_kernel_counters {
    char name[96];
    unsigned long long launches, blocks, threads;
    unsigned long long global_load_requests, global_store_requests;
    unsigned long long global_load_bytes, global_store_bytes;     /* the lanes asked for */
    unsigned long long global_load_unique_bytes, global_store_unique_bytes; /* distinct */
    unsigned long long global_load_sectors, global_store_sectors; /* 32-byte sectors moved */
    unsigned long long distinct_sectors; /* per launch, summed: each sector once per direction,
                                          * loaded and stored (DRAM) */
    unsigned long long shared_load_requests, shared_store_requests;
    unsigned long long shared_wavefronts, shared_ideal_wavefronts; /* conflicts: the excess */
    unsigned long long accesses_by_width[5]; /* lane accesses of 1, 2, 4, 8, 16 bytes */
    unsigned long long barriers;             /* __syncthreads() completed, per block */
    unsigned long long atomics;              /* atomic operations, per lane */
    /* Floating-point operations the threads executed (emu/count_pass.cpp
     * counts them in the compiled code): one per element of a vector
     * operation; an FMA is one operation and two FLOPs.  fp32_other:
     * divide, remainder, sqrt, a math library call (expf: one).  fp16_ops:
     * __half and __nv_bfloat16 arithmetic (emu/cuda_fp16.h counts it).
     * mma_ops: tensor-core multiply-adds, M x N x K per warp-level
     * wmma::mma_sync (emu/mma.h), counted once per warp. */
    unsigned long long fp32_adds, fp32_muls, fp32_fmas, fp32_other;
    unsigned long long fp64_ops, fp16_ops, mma_ops;
    unsigned long long flops; /* adds + muls + 2 x FMAs + others + 2 x mma_ops, every precision */
    /* Warp-level executions of conditional branches and switches (a
     * branch's n-th execution by the lanes of a warp, paired as requests
     * are), and those whose lanes went different ways. */
    unsigned long long branches, divergent_branches;
    /* Instructions, roughly as a GPU issues them (emu/count_pass.cpp):
     * each warp's count is its busiest lane's, summed over the warps.  And
     * the latency chain (docs/roofline.md): per launch, the most that one
     * warp of any block ran of each kind, in series: instructions, rounds
     * of global loads (a load that repeats or precedes the lane's last
     * one, or follows a barrier, waits for a new round trip), warp
     * collectives and barriers; times the launch's waves (its blocks over
     * the SMs' resident blocks), summed over launches.  sm_instructions:
     * per launch, the busiest SM's warp instructions (its share of the
     * blocks: the launch's largest block and the rest at its mean).
     * latency_clocks: per launch, the larger of its chain and its busiest
     * SM's issue in clocks, by the weights of
     * cuda_emu_counters_latency_weights (0 until they are set). */
    unsigned long long warp_instructions;
    unsigned long long chain_instructions, chain_load_rounds, chain_collectives, chain_barriers;
    unsigned long long sm_instructions;
    unsigned long long latency_clocks;
} cuda_emu_kernel_counters;

/* Whether this build counts (the kernels were compiled with the load and
 * store hooks, `make CUDA=emu` with clang); 0 where it cannot. */
int cuda_emu_counters_available(void);
/* Counters per kernel and source line ("file:line" from the kernels' line
 * tables through addr2line; "?" where none is known): where the sectors and
 * the bank conflicts come from. */
typedef struct cuda_emu_line_counters {
    char kernel[96];
    char where[160];
    unsigned long long requests;                 /* warp requests, global and shared */
    unsigned long long bytes_moved, bytes_used;  /* global: 32 x sectors; distinct bytes */
    unsigned long long shared_wavefronts, shared_ideal_wavefronts;
    /* floating-point work, counted per basic block and given to the line of
     * the block's branch (a loop body's FLOPs go to its loop test); warp
     * branches at the line and those whose lanes split */
    unsigned long long flops, branches, divergent_branches;
    /* the instructions the LLVM pass counts for a block (issued()), summed
     * over the threads that ran it, given to the line of the block's branch
     * as the FLOPs are; / 32 is warp instructions where no lane diverged */
    unsigned long long thread_instructions;
} cuda_emu_line_counters;
/* Keep counters per line while counting (1), or stop (0); off by default
 * (a map update per request); CUDA_EMU_COUNTERS=lines turns it on and
 * prints the costliest lines at exit.  cuda_emu_counters_reset clears them. */
void cuda_emu_counters_lines(int on);
/* The lines counted so far, costliest first (bytes moved, plus 128 bytes per
 * wavefront above the conflict-free count): copies up to `capacity` into
 * out, returns how many there are. */
int cuda_emu_counters_lines_get(cuda_emu_line_counters *out, int capacity);
/* Whether the counters include floating-point work and branches (the
 * kernels were also compiled with emu/count_pass.cpp, which needs LLVM 14's
 * headers); 0 where they are left at 0. */
int cuda_emu_counters_fp_and_branches(void);
/* Counting on (1) or off (0).  Calls nest: counting stays on while more
 * have turned it on than off, or while CUDA_EMU_COUNTERS=1 (which turns it
 * on at start and prints the table to stderr at exit) asks for it. */
void cuda_emu_counters_enable(int on);
void cuda_emu_counters_reset(void);
/* The clocks of a dependent instruction, a round of global loads, a warp
 * collective and a barrier in a warp's chain, and the warp instructions an
 * SM issues a clock: with them each launch adds the larger of its chain
 * and its busiest SM's issue to latency_clocks (a GPU model's constants,
 * set by whoever predicts from the counts: src/cuda/backend.c). */
void cuda_emu_counters_latency_weights(double instruction, double load_round, double collective,
                                       double barrier, double sm_issue_per_clock);
/* The kernels counted so far, in the order they first ran; copies kernel
 * `index` into *out (0 on success, -1 past the last). */
int cuda_emu_counters_count(void);
int cuda_emu_counters_get(int index, cuda_emu_kernel_counters *out);
/* The counters of the kernel called `name`, all launches summed; -1 if it
 * has not run while counting. */
int cuda_emu_counters_find(const char *name, cuda_emu_kernel_counters *out);
/* Every kernel's counters summed (name "all") as they stood when `event`'s
 * latest record ran in its stream: the difference of two events is what
 * the kernels between them did.  -1 if that record has not run. */
int cuda_emu_event_counters(cudaEvent_t event, cuda_emu_kernel_counters *out);

#ifdef __cplusplus
}
#endif

#endif
