/*
 * Kernel counters: what a profiler such as Nsight Compute counts, measured
 * on the emulated device.
 *
 * The kernels are compiled with clang's load and store hooks
 * (-fsanitize-coverage=trace-loads,trace-stores, see the Makefile): every
 * load and store a GPU thread makes calls __sanitizer_cov_loadN/storeN with
 * its address.  Accesses to device allocations are global memory, accesses
 * to the block's __shared__ variables and dynamic shared memory are shared
 * memory; the rest (kernel parameters, the thread's own stack) is not
 * counted.
 *
 * A warp issues one request for the lanes' n-th execution of the same load
 * instruction (the hook's return address) since the warp last
 * synchronized; lanes run one after another here, so each lane counts its
 * executions of each instruction, and the request is complete when every
 * lane of the warp has made it, or at the next barrier, warp collective or
 * block end.  With divergent control flow (a lane that skips a load inside
 * a loop) lanes pair up with another iteration's addresses until the next
 * synchronization, which makes the sector count an upper bound there.
 *
 * For a complete request:
 *   global: the bytes the lanes asked for, the distinct bytes among them
 *           (lanes reading one word share it) and the distinct 32-byte
 *           sectors they touch (efficiency = distinct bytes / (32 x
 *           sectors), 100% when every byte moved is used);
 *   shared: the wavefronts = the most distinct 4-byte words that one of the
 *           32 banks (word index mod 32) must serve; the ideal is the
 *           distinct words / 32 rounded up, and the excess is bank
 *           conflicts (a column of a 32x32 float tile: 32 and 1).
 *
 * Floating-point work and branches come from calls that an LLVM pass
 * (emu/count_pass.cpp) puts into the kernels: a block's fp operations,
 * added per thread; and before each conditional branch the way the lane
 * goes.  A branch pairs its lanes as a request does (its return address,
 * the lanes' n-th execution since the warp last synchronized): one
 * warp-level branch, divergent when the lanes did not all go one way.
 */
#include "counters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "count_hooks.h"
#include "state.h"

namespace emu {

enum {
    WARP = 32,
    SECTOR_SHIFT = 5, /* 32-byte sectors */
    BANKS = 32,
    WORD_SHIFT = 2,   /* 4-byte bank words */
    MAX_PENDING = 1 << 14, /* open requests (branches) per warp before they are closed anyway */
};

enum space { SPACE_NONE, SPACE_GLOBAL, SPACE_SHARED };

/* Counting is on while CUDA_EMU_COUNTERS asks for it or some user (the
 * profiler, the autotuner, a test) holds it on: enables nest, so one user's
 * end does not stop another's counts. */
static std::atomic<bool> from_env{false};
static std::atomic<int> holders{0};
static std::atomic<bool> enabled{false};

bool counting()
{
    return enabled.load(std::memory_order_relaxed);
}

static void hold(int change)
{
    int now = holders.load();
    while (!holders.compare_exchange_weak(now, now + change < 0 ? 0 : now + change)) {
    }
    enabled.store(from_env.load() || holders.load() > 0);
}

/* ---- the kernels' totals ----------------------------------------------------------- */

struct totals {
    std::mutex lock;
    std::vector<std::string> order; /* names, in the order they first ran */
    std::map<std::string, cuda_emu_kernel_counters> by_name;
    cuda_emu_kernel_counters sum;   /* every kernel */
};

static totals &all()
{
    static totals t;
    return t;
}

static cuda_emu_kernel_counters &entry(totals &t, const char *kernel)
{
    auto found = t.by_name.find(kernel);
    if (found != t.by_name.end())
        return found->second;
    cuda_emu_kernel_counters c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", kernel);
    t.order.push_back(kernel);
    return t.by_name.emplace(kernel, c).first->second;
}

/* Device allocations as [start, end), sorted: a snapshot taken when a launch
 * starts (the runtime's lock is held by the launching thread, and the
 * threads that run blocks must not take it); and per allocation two bits
 * per 32-byte sector, set when the launch first loads from it and first
 * stores to it (the sectors that come from DRAM once and go back once, if
 * the launch's data fits in L2: an update in place moves a sector twice). */
static std::vector<std::pair<uintptr_t, uintptr_t>> device_ranges;
static std::vector<std::vector<uint64_t>> touched;

/* The chain's four kinds, each the most one warp ran (counters.h). */
struct chain_counts {
    unsigned long long instructions, load_rounds, collectives, barriers;
    unsigned long long block_instructions; /* a whole block's: what its SM issues for it */
};

static void chain_max(chain_counts *into, const chain_counts &c)
{
    into->instructions = std::max(into->instructions, c.instructions);
    into->load_rounds = std::max(into->load_rounds, c.load_rounds);
    into->collectives = std::max(into->collectives, c.collectives);
    into->barriers = std::max(into->barriers, c.barriers);
    into->block_instructions = std::max(into->block_instructions, c.block_instructions);
}

/* The running launch's chain so far: the most of each kind that one warp of
 * any of its finished blocks ran (under the totals' lock). */
static chain_counts launch_chain;
/* ... and its finished blocks' warp instructions, summed, and how many */
static unsigned long long launch_block_sum, launch_blocks_ended;
/* cuda_emu_counters_latency_weights' (under the totals' lock) */
static struct {
    double instruction, load_round, collective, barrier, sm_issue_per_clock;
} latency_weights;
static const char *running_kernel;
/* CUDA_EMU_COUNTERS=launches: one line per launch on stderr */
static std::atomic<bool> print_launches{false};

void counters_launch(const char *kernel, uint64_t blocks, uint64_t threads)
{
    if (!counting())
        return;
    device_ranges.clear();
    for (const auto &a : rt().allocations)
        if (a.second.device >= 0)
            device_ranges.emplace_back(a.first, a.first + a.second.bytes);
    touched.resize(device_ranges.size());
    for (size_t i = 0; i < device_ranges.size(); i++) {
        size_t sectors = (device_ranges[i].second - device_ranges[i].first + 31) / 32;
        touched[i].assign((2 * sectors + 63) / 64, 0);
    }
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    launch_chain = chain_counts{0, 0, 0, 0, 0};
    launch_block_sum = launch_blocks_ended = 0;
    running_kernel = entry(t, kernel).name;
    for (cuda_emu_kernel_counters *c : {&entry(t, kernel), &t.sum}) {
        c->launches++;
        c->blocks += blocks;
        c->threads += threads;
    }
}

/* The allocation that holds `address`, or -1. */
static int global_range(uintptr_t address)
{
    auto next = std::upper_bound(device_ranges.begin(), device_ranges.end(),
                                 std::make_pair(address, UINTPTR_MAX));
    if (next == device_ranges.begin() || address >= (next - 1)->second)
        return -1;
    return (int)(next - device_ranges.begin()) - 1;
}

/* Marks the sectors of [address, address + size) in allocation `range`
 * loaded (or stored); how many were new to this launch in that direction.
 * Blocks run on several host threads: the bits are set atomically. */
static unsigned touch(int range, uintptr_t address, unsigned size, bool store)
{
    unsigned fresh = 0;
    uintptr_t base = device_ranges[(size_t)range].first;
    for (uintptr_t s = (address - base) >> SECTOR_SHIFT;
         s <= (address + size - 1 - base) >> SECTOR_SHIFT; s++) {
        uintptr_t index = 2 * s + store;
        uint64_t bit = 1ull << (index % 64);
        uint64_t before = __atomic_fetch_or(&touched[(size_t)range][index / 64], bit,
                                            __ATOMIC_RELAXED);
        fresh += !(before & bit);
    }
    return fresh;
}

/* ---- one block on one host thread ---------------------------------------------------- */

struct request {
    uintptr_t pc; /* the instruction (the hook's return address) */
    uintptr_t address[WARP];
    uint8_t size;
    bool store;
    uint8_t space;
    unsigned lanes; /* the lanes that have made it */
};

struct request_key {
    uintptr_t pc;
    uint32_t occurrence;
    bool operator==(const request_key &o) const { return pc == o.pc && occurrence == o.occurrence; }
};

struct request_hash {
    size_t operator()(const request_key &k) const
    {
        return (size_t)(k.pc * 0x9e3779b97f4a7c15ull) ^ k.occurrence;
    }
};

/* A warp-level branch, keyed as a request is (its place, the occurrence). */
struct branch {
    unsigned lanes;     /* the lanes that have taken it */
    uint32_t successor; /* the way the first of them went */
    bool divergent;     /* another lane went another way */
};

struct lane_counts {
    std::vector<std::pair<uintptr_t, uint32_t>> executed; /* per instruction */
};

/* One lane's part of the latency chain: its instructions, and its rounds
 * of global loads (a load whose instruction is at or before the lane's
 * last load's, a loop's next trip, or the first after a barrier, waits for
 * a new round trip; loads in straight-line code share one). */
struct lane_chain {
    uint64_t instructions;
    uint32_t load_rounds;
    uintptr_t last_load_pc;
    bool after_barrier;
    bool dependent; /* the next load's address came from a loaded value */
};

struct block_state {
    const char *kernel = nullptr;
    int n_threads = 0;
    std::vector<lane_counts> lanes;
    std::vector<lane_chain> chain;     /* per lane */
    std::vector<uint32_t> collectives; /* per warp */
    std::vector<std::unordered_map<request_key, request, request_hash>> open; /* per warp */
    std::vector<std::unordered_map<request_key, branch, request_hash>> branches; /* per warp */
    cuda_emu_kernel_counters counts;
};
static thread_local block_state block;

static unsigned warp_mask(int warp)
{
    int lanes = block.n_threads - warp * WARP;
    return lanes >= WARP ? 0xffffffffu : (1u << lanes) - 1u;
}

static int width_index(unsigned size)
{
    return size >= 16 ? 4 : size >= 8 ? 3 : size >= 4 ? 2 : size >= 2 ? 1 : 0;
}

/* The distinct 32-byte sectors that the lanes' bytes fall in. */
static unsigned sectors_of(const request &r, int n_lanes)
{
    uintptr_t sectors[2 * WARP];
    int n = 0;
    for (int l = 0; l < n_lanes; l++) {
        sectors[n++] = r.address[l] >> SECTOR_SHIFT;
        if ((r.address[l] + r.size - 1) >> SECTOR_SHIFT != r.address[l] >> SECTOR_SHIFT)
            sectors[n++] = (r.address[l] + r.size - 1) >> SECTOR_SHIFT;
    }
    std::sort(sectors, sectors + n);
    return (unsigned)(std::unique(sectors, sectors + n) - sectors);
}

/* The distinct bytes the lanes touch (lanes reading the same word share it). */
static unsigned unique_bytes_of(const request &r, int n_lanes)
{
    uintptr_t starts[WARP];
    memcpy(starts, r.address, sizeof(uintptr_t) * (size_t)n_lanes);
    std::sort(starts, starts + n_lanes);
    unsigned bytes = 0;
    uintptr_t covered = 0; /* the end of the bytes counted so far */
    for (int l = 0; l < n_lanes; l++) {
        uintptr_t begin = std::max(starts[l], covered), end = starts[l] + r.size;
        if (end > begin)
            bytes += (unsigned)(end - begin);
        covered = std::max(covered, end);
    }
    return bytes;
}

/* Wavefronts: the most distinct words one bank serves; and the ideal. */
static void wavefronts_of(const request &r, int n_lanes, unsigned *wavefronts, unsigned *ideal)
{
    uintptr_t words[4 * WARP];
    int n = 0;
    for (int l = 0; l < n_lanes; l++)
        for (uintptr_t w = r.address[l] >> WORD_SHIFT;
             w <= (r.address[l] + r.size - 1) >> WORD_SHIFT && n < 4 * WARP; w++)
            words[n++] = w;
    std::sort(words, words + n);
    n = (int)(std::unique(words, words + n) - words);
    unsigned per_bank[BANKS] = {0}, most = 0;
    for (int i = 0; i < n; i++)
        most = std::max(most, ++per_bank[words[i] % BANKS]);
    *wavefronts = most;
    *ideal = (unsigned)(n + BANKS - 1) / BANKS;
}

static void close_request(const request &r)
{
    int n_lanes = __builtin_popcount(r.lanes);
    cuda_emu_kernel_counters &c = block.counts;
    /* the lanes' addresses were stored in arrival order: [0, n_lanes) */
    if (r.space == SPACE_GLOBAL) {
        unsigned sectors = sectors_of(r, n_lanes), unique = unique_bytes_of(r, n_lanes);
        unsigned long long bytes = (unsigned long long)n_lanes * r.size;
        if (counting_lines())
            lines_request(r.pc, false, 32ull * sectors, unique, 0, 0);
        if (r.store) {
            c.global_store_requests++;
            c.global_store_bytes += bytes;
            c.global_store_unique_bytes += unique;
            c.global_store_sectors += sectors;
        } else {
            c.global_load_requests++;
            c.global_load_bytes += bytes;
            c.global_load_unique_bytes += unique;
            c.global_load_sectors += sectors;
        }
    } else {
        unsigned wavefronts = 0, ideal = 0;
        wavefronts_of(r, n_lanes, &wavefronts, &ideal);
        if (counting_lines())
            lines_request(r.pc, true, 0, 0, wavefronts, ideal);
        (r.store ? c.shared_store_requests : c.shared_load_requests)++;
        c.shared_wavefronts += wavefronts;
        c.shared_ideal_wavefronts += ideal;
    }
}

static void close_branch(const branch &b, uintptr_t pc)
{
    block.counts.branches++;
    block.counts.divergent_branches += b.divergent;
    if (counting_lines())
        lines_branch(pc, b.divergent);
}

static void close_requests(int warp)
{
    for (auto &item : block.open[(size_t)warp])
        close_request(item.second);
    block.open[(size_t)warp].clear();
}

static void close_branches(int warp)
{
    for (auto &item : block.branches[(size_t)warp])
        close_branch(item.second, item.first.pc);
    block.branches[(size_t)warp].clear();
}

static void close_warp(int warp, unsigned mask)
{
    if ((size_t)warp >= block.open.size())
        return;
    close_requests(warp);
    close_branches(warp);
    for (int l = 0; l < WARP; l++)
        if ((mask >> l & 1u) && (size_t)(warp * WARP + l) < block.lanes.size())
            block.lanes[(size_t)(warp * WARP + l)].executed.clear();
}

void counters_block_begin(const char *kernel, int n_threads)
{
    block.kernel = kernel;
    block.n_threads = n_threads;
    if ((int)block.lanes.size() < n_threads)
        block.lanes.resize((size_t)n_threads);
    for (int i = 0; i < n_threads; i++)
        block.lanes[(size_t)i].executed.clear();
    block.open.resize((size_t)(n_threads + WARP - 1) / WARP);
    block.branches.resize(block.open.size());
    block.chain.assign((size_t)n_threads, lane_chain{0, 0, 0, true, false});
    block.collectives.assign(block.open.size(), 0);
    memset(&block.counts, 0, sizeof block.counts);
}

void counters_barrier()
{
    for (int warp = 0; warp < (int)block.open.size(); warp++)
        close_warp(warp, warp_mask(warp));
    for (lane_chain &lane : block.chain)
        lane.after_barrier = true;
    block.counts.barriers++;
}

void counters_warp_sync(int warp, unsigned mask)
{
    close_warp(warp, mask);
    if ((size_t)warp < block.collectives.size())
        block.collectives[(size_t)warp]++;
}

void count_atomic()
{
    if (counting() && running_thread() >= 0)
        block.counts.atomics++;
}

/* c += b, for what blocks count (launches, blocks and threads are counted
 * at the launch). */
static void add_counts(cuda_emu_kernel_counters *c, const cuda_emu_kernel_counters &b)
{
    c->global_load_requests += b.global_load_requests;
    c->global_store_requests += b.global_store_requests;
    c->global_load_bytes += b.global_load_bytes;
    c->global_store_bytes += b.global_store_bytes;
    c->global_load_unique_bytes += b.global_load_unique_bytes;
    c->global_store_unique_bytes += b.global_store_unique_bytes;
    c->global_load_sectors += b.global_load_sectors;
    c->global_store_sectors += b.global_store_sectors;
    c->distinct_sectors += b.distinct_sectors;
    c->shared_load_requests += b.shared_load_requests;
    c->shared_store_requests += b.shared_store_requests;
    c->shared_wavefronts += b.shared_wavefronts;
    c->shared_ideal_wavefronts += b.shared_ideal_wavefronts;
    for (int i = 0; i < 5; i++)
        c->accesses_by_width[i] += b.accesses_by_width[i];
    c->barriers += b.barriers;
    c->atomics += b.atomics;
    c->fp32_adds += b.fp32_adds;
    c->fp32_muls += b.fp32_muls;
    c->fp32_fmas += b.fp32_fmas;
    c->fp32_other += b.fp32_other;
    c->fp64_ops += b.fp64_ops;
    c->fp16_ops += b.fp16_ops;
    c->mma_ops += b.mma_ops;
    c->flops += b.flops;
    c->branches += b.branches;
    c->divergent_branches += b.divergent_branches;
    c->warp_instructions += b.warp_instructions;
    c->chain_instructions += b.chain_instructions;
    c->chain_load_rounds += b.chain_load_rounds;
    c->chain_collectives += b.chain_collectives;
    c->chain_barriers += b.chain_barriers;
    c->sm_instructions += b.sm_instructions;
    c->latency_clocks += b.latency_clocks;
}

/* This block's warps: their instructions summed (each warp its busiest
 * lane's) into the block's counts, and the chain's maxima into the launch's. */
static void end_block_chain()
{
    chain_counts longest{0, 0, 0, block.counts.barriers, 0};
    for (size_t warp = 0; warp < block.collectives.size(); warp++) {
        chain_counts w{0, 0, block.collectives[warp], block.counts.barriers, 0};
        for (size_t l = warp * WARP; l < block.chain.size() && l < (warp + 1) * WARP; l++) {
            w.instructions = std::max(w.instructions, (unsigned long long)block.chain[l].instructions);
            w.load_rounds = std::max(w.load_rounds, (unsigned long long)block.chain[l].load_rounds);
        }
        block.counts.warp_instructions += w.instructions;
        longest.block_instructions += w.instructions;
        chain_max(&longest, w);
    }
    chain_max(&launch_chain, longest);
    launch_block_sum += longest.block_instructions;
    launch_blocks_ended++;
}

void counters_launch_end(uint64_t blocks, int block_threads, size_t shared_bytes)
{
    if (!counting())
        return;
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    if (!running_kernel)
        return;
    /* resident blocks per SM by threads, dynamic shared memory and the
     * hardware's limit (registers are not known here: docs/roofline.md) */
    int threads = (block_threads + WARP - 1) / WARP * WARP;
    uint64_t resident = (uint64_t)std::max(1, std::min(32, 2048 / std::max(threads, (int)WARP)));
    if (shared_bytes)
        resident = std::max<uint64_t>(1, std::min<uint64_t>(resident, (228u << 10) / shared_bytes));
    uint64_t per_wave = resident * (uint64_t)std::max(1, config().sm_count);
    unsigned long long waves = (blocks + per_wave - 1) / per_wave;
    uint64_t sms = (uint64_t)std::max(1, config().sm_count);
    unsigned long long per_sm = (blocks + sms - 1) / sms; /* blocks on the busiest SM */
    /* its issue: per_sm blocks of the launch's mean, one of them its
     * largest (a grid of equal blocks: per_sm x the block; a grid whose
     * few blocks do more, such as the last block of a tile adding the
     * split parts, is not charged their excess on every block) */
    unsigned long long mean = launch_blocks_ended ? launch_block_sum / launch_blocks_ended : 0;
    unsigned long long busiest =
        per_sm ? (per_sm - 1) * mean + launch_chain.block_instructions : 0;
    /* the launch's latency: its chain or its busiest SM, whichever is longer */
    unsigned long long latency = 0;
    if (latency_weights.sm_issue_per_clock > 0) {
        double chain = (double)waves * ((double)launch_chain.instructions *
                                            latency_weights.instruction +
                                        (double)launch_chain.load_rounds *
                                            latency_weights.load_round +
                                        (double)launch_chain.collectives *
                                            latency_weights.collective +
                                        (double)launch_chain.barriers * latency_weights.barrier);
        double issue = (double)busiest / latency_weights.sm_issue_per_clock;
        latency = (unsigned long long)std::llround(std::max(chain, issue));
    }
    for (cuda_emu_kernel_counters *c : {&entry(t, running_kernel), &t.sum}) {
        c->latency_clocks += latency;
        c->chain_instructions += waves * launch_chain.instructions;
        c->chain_load_rounds += waves * launch_chain.load_rounds;
        c->chain_collectives += waves * launch_chain.collectives;
        c->chain_barriers += waves * launch_chain.barriers;
        c->sm_instructions += busiest;
    }
    if (print_launches.load())
        fprintf(stderr,
                "cuda-emu launch %-40s blocks %8llu per SM %4llu waves %3llu | chain: "
                "instructions %8llu load rounds %5llu barriers %5llu | block instructions "
                "%10llu mean %10llu\n",
                running_kernel, (unsigned long long)blocks, per_sm, waves,
                launch_chain.instructions, launch_chain.load_rounds, launch_chain.barriers,
                launch_chain.block_instructions, mean);
    launch_chain = chain_counts{0, 0, 0, 0, 0};
    launch_block_sum = launch_blocks_ended = 0;
    running_kernel = nullptr;
}

void counters_snapshot(cuda_emu_kernel_counters *out)
{
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    *out = t.sum;
    snprintf(out->name, sizeof out->name, "all");
}

void counters_block_end()
{
    if (!block.kernel)
        return; /* counting was turned on while the block ran */
    for (int warp = 0; warp < (int)block.open.size(); warp++)
        close_warp(warp, warp_mask(warp));
    lines_block_end(block.kernel);
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    end_block_chain();
    add_counts(&entry(t, block.kernel), block.counts);
    add_counts(&t.sum, block.counts);
    block.kernel = nullptr;
}

/* ---- the hooks ------------------------------------------------------------------------ */

static uint32_t next_occurrence(lane_counts &lane, uintptr_t pc)
{
    for (auto &executed : lane.executed)
        if (executed.first == pc)
            return executed.second++;
    lane.executed.emplace_back(pc, 1);
    return 0;
}

/* The running GPU thread's index in its block, or -1 for host code of a .cu
 * file and for a block that began before counting did. */
static int counted_thread()
{
    int linear = running_thread();
    return linear < block.n_threads && block.kernel ? linear : -1;
}

static void access(const void *pointer, unsigned size, bool store, uintptr_t pc)
{
    int linear = counted_thread();
    if (linear < 0)
        return;
    bool dependent = block.chain[(size_t)linear].dependent; /* this access is the marked one */
    block.chain[(size_t)linear].dependent = false;
    uintptr_t address = (uintptr_t)pointer;
    bool shared = shared_address(pointer);
    int range = shared ? -1 : global_range(address);
    uint8_t where = shared ? SPACE_SHARED : range >= 0 ? SPACE_GLOBAL : SPACE_NONE;
    if (where == SPACE_NONE)
        return;
    if (where == SPACE_GLOBAL)
        block.counts.distinct_sectors += touch(range, address, size, store);
    if (where == SPACE_GLOBAL && !store) {
        lane_chain &lane = block.chain[(size_t)linear];
        if (lane.after_barrier || dependent || pc <= lane.last_load_pc)
            lane.load_rounds++;
        lane.after_barrier = false;
        lane.last_load_pc = pc;
    }
    block.counts.accesses_by_width[width_index(size)]++;
    int warp = linear / WARP;
    request_key key{pc, next_occurrence(block.lanes[(size_t)linear], pc)};
    auto &open = block.open[(size_t)warp];
    if (open.size() >= MAX_PENDING)
        close_requests(warp);
    request &r = open[key];
    if (r.lanes == 0) {
        r.pc = pc;
        r.size = (uint8_t)size;
        r.store = store;
        r.space = where;
    }
    r.address[__builtin_popcount(r.lanes)] = address;
    r.lanes |= 1u << (linear % WARP);
    if (r.lanes == warp_mask(warp)) {
        close_request(r);
        open.erase(key);
    }
}

static void count_fp(const uint32_t *counts, uintptr_t pc)
{
    int linear = counted_thread();
    if (linear < 0)
        return;
    block.chain[(size_t)linear].instructions += counts[CUDA_EMU_INSTRUCTIONS];
    if (counting_lines())
        lines_fp(pc, counts[CUDA_EMU_FLOPS], counts[CUDA_EMU_INSTRUCTIONS]);
    cuda_emu_kernel_counters &c = block.counts;
    c.fp32_adds += counts[CUDA_EMU_FP32_ADDS];
    c.fp32_muls += counts[CUDA_EMU_FP32_MULS];
    c.fp32_fmas += counts[CUDA_EMU_FP32_FMAS];
    c.fp32_other += counts[CUDA_EMU_FP32_OTHER];
    c.fp64_ops += counts[CUDA_EMU_FP64_OPS];
    c.fp16_ops += counts[CUDA_EMU_FP16_OPS];
    c.mma_ops += counts[CUDA_EMU_MMA_OPS];
    c.flops += counts[CUDA_EMU_FLOPS];
}

static void mark_dependent_load()
{
    int linear = counted_thread();
    if (linear >= 0)
        block.chain[(size_t)linear].dependent = true;
}

static void take_branch(uint32_t successor, uintptr_t pc)
{
    int linear = counted_thread();
    if (linear < 0)
        return;
    int warp = linear / WARP;
    request_key key{pc, next_occurrence(block.lanes[(size_t)linear], pc)};
    auto &open = block.branches[(size_t)warp];
    if (open.size() >= MAX_PENDING)
        close_branches(warp);
    branch &b = open[key];
    if (b.lanes == 0)
        b.successor = successor;
    else if (successor != b.successor)
        b.divergent = true;
    b.lanes |= 1u << (linear % WARP);
    if (b.lanes == warp_mask(warp)) {
        close_branch(b, pc);
        open.erase(key);
    }
}

} // namespace emu

/* The hooks clang calls (the kernels' object files only; see the top).
 * __builtin_return_address(0) is the access's own place in the kernel. */
#define CT_EMU_HOOK(kind, bytes, type, store)                                               \
    extern "C" __attribute__((visibility("default"))) void __sanitizer_cov_##kind##bytes(   \
        type *pointer)                                                                      \
    {                                                                                       \
        if (emu::counting())                                                                \
            emu::access(pointer, bytes, store, (uintptr_t)__builtin_return_address(0));     \
    }
CT_EMU_HOOK(load, 1, uint8_t, false)
CT_EMU_HOOK(load, 2, uint16_t, false)
CT_EMU_HOOK(load, 4, uint32_t, false)
CT_EMU_HOOK(load, 8, uint64_t, false)
CT_EMU_HOOK(load, 16, __int128, false)
CT_EMU_HOOK(store, 1, uint8_t, true)
CT_EMU_HOOK(store, 2, uint16_t, true)
CT_EMU_HOOK(store, 4, uint32_t, true)
CT_EMU_HOOK(store, 8, uint64_t, true)
CT_EMU_HOOK(store, 16, __int128, true)

/* The calls emu/count_pass.cpp inserts (emu/count_hooks.h). */
extern "C" __attribute__((visibility("default"))) void __cuda_emu_count_fp(const uint32_t *counts)
{
    if (emu::counting())
        emu::count_fp(counts, (uintptr_t)__builtin_return_address(0));
}

extern "C" __attribute__((visibility("default"))) void __cuda_emu_dependent_load(void)
{
    if (emu::counting())
        emu::mark_dependent_load();
}

extern "C" __attribute__((visibility("default"))) void __cuda_emu_branch(uint32_t successor)
{
    if (emu::counting())
        emu::take_branch(successor, (uintptr_t)__builtin_return_address(0));
}

/* ---- CUDA_EMU_COUNTERS=1: on from the start, a table on stderr at exit ------------------ */

namespace emu {

static double percent(unsigned long long part, unsigned long long whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 100.0;
}

static void print_table()
{
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    fprintf(stderr, "cuda-emu counters (emulated: counts, not times)\n%-40s %8s %10s %9s %9s "
                    "%7s %7s %7s %7s %10s %9s %8s %9s %9s\n",
            "kernel", "launches", "requests", "load MB", "store MB", "ld eff", "st eff",
            "64-bit", "128-bit", "shared req", "conflict", "atomics", "GFLOP", "divergent");
    for (const std::string &name : t.order) {
        const cuda_emu_kernel_counters &c = t.by_name[name];
        unsigned long long accesses = 0;
        for (int w = 0; w < 5; w++)
            accesses += c.accesses_by_width[w];
        char gflop[32] = "-", divergent[32] = "-"; /* "-": a build that does not count them */
        if (cuda_emu_counters_fp_and_branches()) {
            snprintf(gflop, sizeof gflop, "%.4f", (double)c.flops / 1e9);
            snprintf(divergent, sizeof divergent, "%.1f%%",
                     c.branches ? percent(c.divergent_branches, c.branches) : 0.0);
        }
        fprintf(stderr,
                "%-40.40s %8llu %10llu %9.3f %9.3f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %10llu %8.1f%% "
                "%8llu %9s %9s\n",
                c.name, c.launches, c.global_load_requests + c.global_store_requests,
                32.0 * (double)c.global_load_sectors / 1e6,
                32.0 * (double)c.global_store_sectors / 1e6,
                percent(c.global_load_unique_bytes, 32 * c.global_load_sectors),
                percent(c.global_store_unique_bytes, 32 * c.global_store_sectors),
                accesses ? percent(c.accesses_by_width[3], accesses) : 0.0,
                accesses ? percent(c.accesses_by_width[4], accesses) : 0.0,
                c.shared_load_requests + c.shared_store_requests,
                c.shared_wavefronts ? percent(c.shared_wavefronts - c.shared_ideal_wavefronts,
                                              c.shared_wavefronts)
                                    : 0.0,
                c.atomics, gflop, divergent);
    }
}

enum { PRINTED_LINES = 25 };

/* CUDA_EMU_LINES_TOP=N prints N lines a table instead of 25. */
static void print_lines()
{
    const char *top = getenv("CUDA_EMU_LINES_TOP");
    int n = top ? atoi(top) : 0;
    lines_print(n > 0 ? n : PRINTED_LINES);
}

/* Read once at start-up; the totals are made first, so that they outlive
 * the table printed at exit. */
static struct from_environment {
    from_environment()
    {
        const char *value = getenv("CUDA_EMU_COUNTERS");
        if (!value || !*value || strcmp(value, "0") == 0)
            return;
        all();
        from_env.store(true);
        enabled.store(true);
        if (strcmp(value, "launches") == 0)
            print_launches.store(true);
        if (strcmp(value, "lines") == 0) {
            lines_set(true);
            atexit(print_lines);
        }
        atexit(print_table); /* runs first: handlers run in reverse */
    }
} environment;

} // namespace emu

/* ---- the public side (cuda_runtime_api.h) ---------------------------------------------- */

extern "C" {

int cuda_emu_counters_available(void)
{
#ifdef CT_EMU_COUNTERS
    return 1;
#else
    return 0;
#endif
}

int cuda_emu_counters_fp_and_branches(void)
{
#ifdef CT_EMU_COUNT_PASS
    return 1;
#else
    return 0;
#endif
}

void cuda_emu_counters_enable(int on)
{
    emu::hold(on ? 1 : -1);
}

void cuda_emu_counters_reset(void)
{
    emu::totals &t = emu::all();
    std::lock_guard<std::mutex> lock(t.lock);
    t.order.clear();
    t.by_name.clear();
    memset(&t.sum, 0, sizeof t.sum);
    emu::lines_reset();
}

void cuda_emu_counters_latency_weights(double instruction, double load_round, double collective,
                                       double barrier, double sm_issue_per_clock)
{
    emu::totals &t = emu::all();
    std::lock_guard<std::mutex> lock(t.lock);
    emu::latency_weights = {instruction, load_round, collective, barrier, sm_issue_per_clock};
}

int cuda_emu_counters_count(void)
{
    emu::totals &t = emu::all();
    std::lock_guard<std::mutex> lock(t.lock);
    return (int)t.order.size();
}

int cuda_emu_counters_get(int index, cuda_emu_kernel_counters *out)
{
    emu::totals &t = emu::all();
    std::lock_guard<std::mutex> lock(t.lock);
    if (index < 0 || (size_t)index >= t.order.size())
        return -1;
    *out = t.by_name[t.order[(size_t)index]];
    return 0;
}

int cuda_emu_counters_find(const char *name, cuda_emu_kernel_counters *out)
{
    emu::totals &t = emu::all();
    std::lock_guard<std::mutex> lock(t.lock);
    auto found = t.by_name.find(name);
    if (found == t.by_name.end())
        return -1;
    *out = found->second;
    return 0;
}

} // extern "C"
