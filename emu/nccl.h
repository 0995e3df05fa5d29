/*
 * The emulated device's NCCL: the subset that cuttle's data-parallel
 * training calls (src/dist/nccl.c, the CT_NCCL_FUNCTIONS of
 * src/cuda/vendor_api.h), in C.
 *
 * This header stands in for the toolkit's nccl.h when cuttle is built with
 * `make CUDA=emu`: the same names, types, numeric codes and version,
 * implemented by emu/nccl.cpp on the CPU (docs/emulator.md, NCCL, says
 * what is modelled).  It is written from NVIDIA's public NCCL
 * documentation and exists to test cuttle's glue, not NVIDIA's library.
 */
#ifndef CT_EMU_NCCL_H
#define CT_EMU_NCCL_H

#include "cuda_runtime_api.h"

/* The release whose API this models; NCCL_VERSION_CODE is
 * major * 10000 + minor * 100 + patch since 2.9, as NVIDIA's is. */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z)                                                              \
    (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;

/* Opaque bytes that name a rendezvous; rank 0 makes one and sends it to the
 * others (over MPI, say). */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

/* The built-in operations; values from ncclNumOps up are the user-defined
 * ones of ncclRedOpCreatePreMulSum, which the emulator does not have. */
typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10, /* declared, refused: not emulated */
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

/* NCCL_VERSION_CODE. */
ncclResult_t ncclGetVersion(int *version);
/* A new id naming a rendezvous that no other id names. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
/* Rank `rank` of `nranks` on the current device; returns once every rank
 * has joined (inside ncclGroupStart/ncclGroupEnd: at ncclGroupEnd). */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
/* ndev ranks of one process, rank i on devlist[i] (NULL: device i). */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
/* Waits for the communicator's queued collectives, then frees it. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
/* Frees it without waiting: its collectives not yet run are dropped, and
 * the other ranks' parts of them fail. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

/* recvbuff = the element-wise reduction of every rank's sendbuff (count
 * elements of datatype), queued on `stream` like a kernel. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
/* recvbuff = root's sendbuff, on every rank (sendbuff is read on root only). */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

/* A description of `result`; a static string. */
const char *ncclGetErrorString(ncclResult_t result);
/* What the calling thread's last failed NCCL call (or the last async error
 * that ncclCommGetAsyncError reported to it) was about; "" when none. */
const char *ncclGetLastError(ncclComm_t comm);

#ifdef __cplusplus
}
#endif

#endif
