/*
 * What the emulated NCCL's files share (emu/nccl.cpp: the API and the ranks
 * of one process; emu/nccl_shm.cpp: ranks in different processes;
 * emu/nccl_reduce.cpp: the arithmetic).  C++ only.
 */
#ifndef CT_EMU_NCCL_INTERNAL_H
#define CT_EMU_NCCL_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "nccl.h"

namespace emu {
namespace nccl {

/* ---- the arithmetic (emu/nccl_reduce.cpp) ---- */

/* The bytes of one element, or 0 for a type that is not emulated (the fp8
 * types, or not a type). */
size_t type_bytes(ncclDataType_t type);
/* "ncclFloat32", or "datatype 12" for what is not a type; a static or
 * thread-local string. */
const char *type_name(ncclDataType_t type);
/* "ncclSum"..., or "op 5". */
const char *op_name(ncclRedOp_t op);
bool valid_op(ncclRedOp_t op);

/* out[i] = ((in[0][i] op in[1][i]) op in[2][i]) ... op in[n-1][i] for
 * i < count: the ranks' inputs in rank order, the same computation for
 * every rank, so all get the same bits.  Each step is rounded to the type.
 * ncclAvg: floating types multiply each input by 1/n (rounded to the type)
 * and add the products, as NCCL does; integer types add (wrapping) and
 * divide the sum by n, truncating.  Integer sums and products wrap; max
 * and min of floating values prefer a number to a NaN.  `out` may be one
 * of the inputs. */
void reduce(ncclDataType_t type, ncclRedOp_t op, int n, const void *const *in, void *out,
            size_t count);

/* ---- what a collective is ---- */

enum collective_kind { ALL_REDUCE = 1, BROADCAST = 2 };

/* One rank's arguments of a collective; every rank's must agree. */
struct call_args {
    int32_t kind;  /* collective_kind */
    int32_t type;  /* ncclDataType_t */
    int32_t op;    /* ncclRedOp_t; all-reduce only */
    int32_t root;  /* broadcast only */
    uint64_t count;
    uint64_t number; /* the communicator's collectives, counted from 1 */
};

/* "ncclAllReduce" or "ncclBroadcast". */
const char *kind_name(int32_t kind);
/* "ncclAllReduce(count 1024, ncclFloat32, ncclSum)" */
std::string describe(const call_args &a);

/* The failures that the ranks' async errors and messages carry. */
struct failure {
    ncclResult_t code = ncclSuccess;
    std::string message;
};

/* ---- ranks in different processes (emu/nccl_shm.cpp) ---- */

/* The id's contents: the name of a POSIX shared-memory segment. */
bool make_id(ncclUniqueId *id, std::string *why);

/* A rank's link to the segment that an id names. */
struct link;

/* Attach rank `rank` of `nranks` on `device` to the segment `id` names,
 * creating it if this rank comes first: returns at once. */
std::shared_ptr<link> attach(const ncclUniqueId &id, int nranks, int rank, int device,
                             failure *error);
/* Wait until every rank has attached (or one failed, died, or the timeout
 * passed); then the segment's name is unlinked.  *same_process: every rank
 * is in this process (the in-process path takes over: detach then). */
bool wait_for_ranks(link &l, bool *same_process, failure *error);
/* The segment's name, unique to the id: the in-process ranks meet by it. */
const std::string &link_name(const link &l);
/* Say to the other ranks that this one is gone (`how`: "aborted its
 * communicator", "failed: ..."), so that they stop waiting for it. */
void leave(link &l, const std::string &how);

/* Run one collective over the processes: blocks until every rank has done
 * its part.  `send` and `recv` are this rank's buffers. */
bool run_collective(link &l, const call_args &args, const void *send, void *recv,
                    failure *error);

/* Whether process `pid` is gone (exited, or a zombie no one has reaped). */
bool process_gone(pid_t pid);

} // namespace nccl
} // namespace emu

#endif
