/*
 * The emulated NCCL's ranks in one process (emu/nccl.cpp): each rank's
 * state, the clique of a communicator's in-process ranks, and the
 * collective that gates each rank's part on its stream (the first part
 * that runs performs the whole collective).  Included by nccl.cpp only.
 */
#ifndef CUDA_EMU_NCCL_LOCAL_H
#define CUDA_EMU_NCCL_LOCAL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nccl.h"
#include "emu.h"
#include "nccl_internal.h"
#include "state.h"

namespace emu {
namespace nccl {

/* One rank's state, shared by its communicator, the other ranks of its
 * process and its queued work (which may outlive the communicator). */
struct rank_status {
    int rank = 0, device = 0;
    ncclResult_t async = ncclSuccess;
    std::string error; /* the async error's message */
    bool left = false;    /* destroyed or aborted: its missing parts never come */
    bool aborted = false; /* its queued parts do nothing */
    std::string how;      /* how it left */
    int queued = 0;       /* parts queued, not yet run */

    void fail(ncclResult_t code, const std::string &message)
    {
        if (async != ncclSuccess || aborted)
            return;
        async = code;
        error = message;
    }
};

struct collective;

/* The ranks of a communicator that all live in this process. */
struct clique {
    std::string name;
    int nranks = 0, joined = 0;
    std::vector<std::shared_ptr<rank_status>> ranks;
    std::map<uint64_t, std::shared_ptr<collective>> open; /* by number */
};

/* One rank's part of an in-process collective. */
struct part {
    bool queued = false, ran = false;
    uint64_t stream = 0, seq = 0;
    const void *send = nullptr;
    void *recv = nullptr;
    call_args args{};
};

/* A collective between the ranks of a clique: the gate of each rank's op. */
struct collective : op_gate {
    std::weak_ptr<clique> group;
    std::vector<std::shared_ptr<rank_status>> ranks;
    std::string label; /* "ncclAllReduce #3 on comm ..." */
    std::vector<part> parts;
    int queued = 0;
    enum { WAITING, DONE, FAILED } state = WAITING;
    std::string why;
    double waited_since = 0;

    int nranks() const { return (int)parts.size(); }

    void fail(ncclResult_t code, const std::string &reason)
    {
        state = FAILED;
        why = reason;
        for (auto &r : ranks)
            r->fail(code, label + ": " + reason);
        wake_waiters();
    }

    bool open() override
    {
        if (state != WAITING)
            return true;
        for (int r = 0; r < nranks(); r++) {
            const part &p = parts[(size_t)r];
            const rank_status &s = *ranks[(size_t)r];
            if (!p.ran && s.left) {
                fail(ncclRemoteError, "rank " + std::to_string(r) + " " + s.how +
                                          (p.queued ? " before its part ran" : " without calling it"));
                return true;
            }
            if (p.queued && place_of(p.stream, p.seq) == OP_GONE) {
                fail(ncclUnhandledCudaError,
                     "rank " + std::to_string(r) + "'s part was dropped from its stream before it "
                     "ran (device " + std::to_string(s.device) + " failed first, or was reset)");
                return true;
            }
        }
        if (queued < nranks())
            return false;
        for (const part &p : parts)
            if (place_of(p.stream, p.seq) != OP_FIRST)
                return false;
        return true;
    }

    double stalled(double now) override
    {
        if (waited_since == 0)
            waited_since = now;
        double gives_up = waited_since + config().nccl_timeout;
        if (now < gives_up)
            return gives_up;
        std::string missing, behind;
        for (int r = 0; r < nranks(); r++) {
            std::string who = std::to_string(r) + " (device " +
                              std::to_string(ranks[(size_t)r]->device) + ")";
            std::string &list = parts[(size_t)r].queued ? behind : missing;
            if (!parts[(size_t)r].queued ||
                place_of(parts[(size_t)r].stream, parts[(size_t)r].seq) != OP_FIRST)
                list += (list.empty() ? "" : ", ") + who;
        }
        char seconds[32];
        snprintf(seconds, sizeof seconds, "%g s", config().nccl_timeout);
        std::string reason;
        if (!missing.empty())
            reason = "rank(s) " + missing + " did not call it within " + seconds +
                     " (CUDA_EMU_NCCL_TIMEOUT)";
        if (!behind.empty())
            reason += (reason.empty() ? "" : "; ") + std::string("rank(s) ") + behind +
                      " called it, but their part waits behind work of its stream that "
                      "could not run within " + seconds;
        fail(ncclRemoteError, reason);
        return gives_up;
    }

    void perform()
    {
        runtime &r = rt();
        const call_args &a = parts[0].args;
        for (int q = 0; q < nranks(); q++) {
            const call_args &b = parts[(size_t)q].args;
            if (memcmp(&a, &b, sizeof a) != 0)
                return fail(ncclInvalidUsage, "the ranks' calls differ: rank 0 called " +
                                                  describe(a) + ", rank " + std::to_string(q) +
                                                  " " + describe(b));
            const device_state &d = r.devices[(size_t)ranks[(size_t)q]->device];
            if (d.sticky != cudaSuccess)
                return fail(ncclUnhandledCudaError,
                            "device " + std::to_string(ranks[(size_t)q]->device) + " of rank " +
                                std::to_string(q) + " has failed: " + d.sticky_message);
        }
        size_t bytes = (size_t)a.count * type_bytes((ncclDataType_t)a.type);
        if (a.kind == ALL_REDUCE) {
            std::vector<const void *> inputs;
            for (const part &p : parts)
                inputs.push_back(p.send);
            reduce((ncclDataType_t)a.type, (ncclRedOp_t)a.op, nranks(), inputs.data(),
                   parts[0].recv, (size_t)a.count);
            for (size_t q = 1; q < parts.size(); q++)
                memcpy(parts[q].recv, parts[0].recv, bytes);
        } else {
            const void *from = parts[(size_t)a.root].send;
            for (const part &p : parts)
                if (p.recv != from)
                    memcpy(p.recv, from, bytes);
        }
        state = DONE;
    }

    /* Rank `rank`'s op runs: the first performs the collective. */
    void run_part(int rank)
    {
        parts[(size_t)rank].ran = true;
        rank_status &s = *ranks[(size_t)rank];
        s.queued--;
        if (!s.aborted) {
            if (state == WAITING)
                perform();
            if (state == FAILED)
                fail_current_work(cudaErrorLaunchFailure, why.c_str());
        }
        for (const part &p : parts)
            if (p.queued && !p.ran)
                return;
        if (auto c = group.lock())
            c->open.erase(parts[(size_t)rank].args.number);
    }
};

} // namespace nccl
} // namespace emu

#endif
