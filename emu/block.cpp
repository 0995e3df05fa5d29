/*
 * Running a grid on the emulated device: blocks go to a pool of host
 * threads; within a block every GPU thread is a fiber, and a cooperative
 * scheduler runs the ready ones, in passes, in the order CUDA_EMU_ORDER
 * asks for.  A thread runs until it exits or waits:
 *   - at __syncthreads(), until every thread of the block is there (all at
 *     the same call: file and line);
 *   - at a warp collective, until every lane its mask names is at a
 *     collective with the same mask, which must be the same call (kind,
 *     width, file and line).  Only those lanes wait.
 * When no thread can go on and some have not exited, the block is stuck:
 * the kernel fails with a description of who waits where and who is
 * missing.  A thread that exits while others wait for it fails at once.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "counters.h"
#include "fiber.h"
#include "internal.h"

namespace emu {

enum { WARP = 32, POISON_BYTE = 0xff };

/* Made on first use: groups register from static constructors. */
static std::vector<shared_group_fn> &shared_groups()
{
    static std::vector<shared_group_fn> groups;
    return groups;
}

void register_shared_group(shared_group_fn group)
{
    shared_groups().push_back(group);
}

/* Every __shared__ variable to 0xff bytes (NaN floats) for a new block;
 * `sections` gets where they are. */
static void poison_shared(std::vector<std::pair<char *, char *>> *sections)
{
    sections->clear();
    for (shared_group_fn group : shared_groups()) {
        char *begin = nullptr, *end = nullptr;
        group(&begin, &end);
        memset(begin, POISON_BYTE, (size_t)(end - begin));
        sections->emplace_back(begin, end);
    }
}

thread_local thread_view *current_view;
static const uint64_t POISON_BITS = ~(uint64_t)0; /* a shuffle from a lane not taking part */

enum thread_state { READY, AT_BARRIER, AT_COLLECTIVE, EXITED, FAILED };

struct gpu_thread {
    thread_view view;
    fiber f;
    int linear;
    thread_state state;
    const char *file; /* where it waits */
    int line;
    uint64_t value, result; /* its part of a warp collective, and what it gets */
    int arg;
};

struct collective {
    collective_kind kind;
    unsigned mask, arrived;
    int width;
    const char *file;
    int line;
};

struct block_run {
    const kernel_launch *launch;
    int n_threads, n_exited, at_barrier;
    const char *barrier_file;
    int barrier_line;
    std::vector<std::vector<collective>> warps; /* the collectives each warp has open */
    std::string error;
};

/* One per host thread that runs blocks: its fibers and where it returns to. */
struct worker {
    fiber_context context;
    std::vector<gpu_thread> threads;
    block_run *block;
    gpu_thread *running;
    uint64_t random;
    char *dynamic_shared; /* this launch's, exactly its size; null for none */
    size_t dynamic_shared_bytes;
    std::vector<std::pair<char *, char *>> shared_sections; /* __shared__, as this thread sees them */
};
static thread_local worker *this_worker;

int running_thread()
{
    worker *w = this_worker;
    return w && w->running ? w->running->linear : -1;
}

bool shared_address(const void *address)
{
    const char *p = (const char *)address;
    worker *w = this_worker;
    if (w->dynamic_shared && p >= w->dynamic_shared &&
        p < w->dynamic_shared + w->dynamic_shared_bytes)
        return true;
    for (const auto &section : w->shared_sections)
        if (p >= section.first && p < section.second)
            return true;
    return false;
}

void *dynamic_shared()
{
    return this_worker->dynamic_shared;
}

static const char *const collective_names[] = {
    "__shfl_sync",   "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
    "__ballot_sync", "__any_sync",     "__all_sync",       "__syncwarp",
    "wmma::fill_fragment", "wmma::load_matrix_sync", "wmma::store_matrix_sync",
    "wmma::mma_sync",
};

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static std::string format(const char *fmt, ...)
{
    char text[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    return text;
}

static std::string thread_name(const gpu_thread &t)
{
    const thread_view &v = t.view;
    return format("thread (%u,%u,%u)", v.thread_idx.x, v.thread_idx.y, v.thread_idx.z);
}

/* ---- inside a GPU thread -------------------------------------------------------- */

static gpu_thread &self()
{
    return *this_worker->running;
}

/* Record the failure (the first one counts) and never run this thread
 * again.  printf-style: this frame never returns, so nothing here may own
 * memory (a std::string argument would never be destroyed). */
[[noreturn]] static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] static void fail(const char *fmt, ...)
{
    worker *w = this_worker;
    if (w->block->error.empty()) {
        char what[1024];
        va_list args;
        va_start(args, fmt);
        vsnprintf(what, sizeof what, fmt, args);
        va_end(args);
        w->block->error = thread_name(self()) + ": " + what;
    }
    self().state = FAILED;
    fiber_exit(&self().f, &w->context);
}

static void wait_here(thread_state state, const char *file, int line)
{
    gpu_thread &t = self();
    t.state = state;
    t.file = file;
    t.line = line;
    fiber_suspend(&t.f, &this_worker->context);
}

void syncthreads(const char *file, int line)
{
    block_run *b = this_worker->block;
    if (b->at_barrier > 0 && (b->barrier_line != line || strcmp(b->barrier_file, file) != 0))
        fail("reaches __syncthreads() at %s:%d while %d thread(s) wait at the one at "
             "%s:%d: threads of a block must meet at the same barrier",
             base_name(file), line, b->at_barrier, base_name(b->barrier_file),
             b->barrier_line);
    if (b->n_exited > 0)
        fail("reaches __syncthreads() at %s:%d after %d thread(s) of its block exited: "
             "they can never arrive (a barrier in code that not every thread reaches)",
             base_name(file), line, b->n_exited);
    b->barrier_file = file;
    b->barrier_line = line;
    if (++b->at_barrier < b->n_threads) {
        wait_here(AT_BARRIER, file, line);
        return;
    }
    b->at_barrier = 0;
    for (gpu_thread &t : this_worker->threads)
        if (t.state == AT_BARRIER)
            t.state = READY;
    if (counting())
        counters_barrier();
}

static unsigned warp_lanes(const block_run *b, int warp)
{
    int lanes = b->n_threads - warp * WARP;
    return lanes >= WARP ? 0xffffffffu : (1u << lanes) - 1u;
}

/* Lane `lane`'s result once every lane of `c` has arrived (CUDA's rules
 * for each kind, including width and lanes outside the mask). */
static uint64_t collective_result(const collective &c, const gpu_thread *warp_threads,
                                  int lane)
{
    unsigned ballot = 0;
    for (int l = 0; l < WARP; l++)
        if ((c.mask >> l & 1u) && warp_threads[l].value != 0)
            ballot |= 1u << l;
    int width = c.width, arg = warp_threads[lane].arg;
    int segment = lane & ~(width - 1), position = lane & (width - 1);
    int source = lane;
    switch (c.kind) {
    case COLLECTIVE_SHFL:
        source = segment + (arg & (width - 1));
        break;
    case COLLECTIVE_SHFL_UP:
        source = position >= arg ? lane - arg : lane;
        break;
    case COLLECTIVE_SHFL_DOWN:
        source = position + arg < width ? lane + arg : lane;
        break;
    case COLLECTIVE_SHFL_XOR:
        source = lane ^ arg;
        if (source >= segment + width || source >= WARP)
            source = lane;
        break;
    case COLLECTIVE_BALLOT:
        return ballot;
    case COLLECTIVE_ANY:
        return ballot != 0;
    case COLLECTIVE_ALL:
        return ballot == c.mask;
    default: /* __syncwarp and the wmma API: no value */
        return 0;
    }
    if (source < 0 || !(c.mask >> source & 1u))
        return POISON_BITS; /* undefined in CUDA: a value no test would accept */
    return warp_threads[source].value;
}

uint64_t warp_collective(const char *file, int line, collective_kind kind, unsigned mask,
                         uint64_t value, int arg, int width)
{
    worker *w = this_worker;
    block_run *b = w->block;
    gpu_thread &t = self();
    int warp = t.linear / WARP, lane = t.linear % WARP;
    const char *name = collective_names[kind];
    if (!(mask >> lane & 1u))
        fail("calls %s at %s:%d with mask 0x%08x, which does not name its own lane %d",
             name, base_name(file), line, mask, lane);
    if (mask & ~warp_lanes(b, warp))
        fail("calls %s at %s:%d with mask 0x%08x, but warp %d has only lanes 0x%08x",
             name, base_name(file), line, mask, warp, warp_lanes(b, warp));
    if (width < 1 || width > WARP || (width & (width - 1)))
        fail("calls %s at %s:%d with width %d: it must be a power of 2 up to 32", name,
             base_name(file), line, width);
    /* Lanes with the same mask meet at one call; collectives of other
     * masks may be open beside it (a lane may finish one and then join
     * another).  Lanes that can never meet show up as a stuck block. */
    std::vector<collective> &open = b->warps[warp];
    collective *c = nullptr;
    for (collective &other : open) {
        if (other.mask != mask)
            continue;
        if (other.kind != kind || other.width != width || other.line != line ||
            strcmp(other.file, file) != 0)
            fail("calls %s at %s:%d with mask 0x%08x while lanes 0x%08x of warp %d wait "
                 "at %s at %s:%d with the same mask: the lanes of a mask must make the "
                 "same call",
                 name, base_name(file), line, mask, other.arrived, warp,
                 collective_names[other.kind], base_name(other.file), other.line);
        c = &other;
    }
    if (!c) {
        open.push_back(collective{kind, mask, 0, width, file, line});
        c = &open.back();
    }
    c->arrived |= 1u << lane;
    t.value = value;
    t.arg = arg;
    if (c->arrived != mask) {
        wait_here(AT_COLLECTIVE, file, line);
        return t.result;
    }
    gpu_thread *warp_threads = &w->threads[(size_t)warp * WARP];
    if (kind == COLLECTIVE_WMMA_MMA) { /* the mask is the whole warp (emu/mma.h) */
        warp_work *lanes[WARP];
        for (int l = 0; l < WARP; l++)
            lanes[l] = (warp_work *)(uintptr_t)warp_threads[l].value;
        lanes[lane]->complete(lanes);
    }
    for (int l = 0; l < WARP; l++) {
        if (!(mask >> l & 1u))
            continue;
        warp_threads[l].result = collective_result(*c, warp_threads, l);
        if (l != lane)
            warp_threads[l].state = READY;
    }
    open.erase(open.begin() + (c - open.data()));
    if (counting())
        counters_warp_sync(warp, mask);
    return t.result;
}

unsigned active_mask()
{
    worker *w = this_worker;
    int warp = self().linear / WARP;
    unsigned mask = 0;
    for (int l = 0; l < WARP && warp * WARP + l < w->block->n_threads; l++)
        if (w->threads[(size_t)warp * WARP + l].state != EXITED)
            mask |= 1u << l;
    return mask;
}

void kernel_trap(const char *file, int line, const char *what)
{
    fail("%s at %s:%d", what, base_name(file), line);
}

/* A lane that leaves while lanes of its warp wait for it at a collective. */
static void check_exit(gpu_thread &t)
{
    block_run *b = this_worker->block;
    int warp = t.linear / WARP, lane = t.linear % WARP;
    for (const collective &c : b->warps[warp])
        if (c.mask >> lane & 1u)
            fail("exits while lanes 0x%08x of warp %d wait for it at %s at %s:%d (mask "
                 "0x%08x)",
                 c.arrived, warp, collective_names[c.kind], base_name(c.file), c.line,
                 c.mask);
    if (b->at_barrier > 0)
        fail("exits while %d thread(s) of its block wait at __syncthreads() at %s:%d",
             b->at_barrier, base_name(b->barrier_file), b->barrier_line);
}

static void thread_main(void *arg)
{
    gpu_thread &t = *(gpu_thread *)arg;
    fiber_started(&this_worker->context);
    this_worker->block->launch->thread_body();
    check_exit(t);
    t.state = EXITED;
    this_worker->block->n_exited++;
    fiber_exit(&t.f, &this_worker->context);
}

/* ---- the scheduler --------------------------------------------------------------- */

/* Why no thread of the block can go on. */
static std::string describe_stuck(const block_run &b, const std::vector<gpu_thread> &threads)
{
    std::string text = "no thread can go on:";
    if (b.at_barrier > 0) {
        text += format(" %d of %d threads wait at __syncthreads() at %s:%d;", b.at_barrier,
                       b.n_threads, base_name(b.barrier_file), b.barrier_line);
        for (int i = 0; i < b.n_threads; i++) {
            const gpu_thread &t = threads[(size_t)i];
            if (t.state == EXITED) {
                text += " " + thread_name(t) + " has exited (" + std::to_string(b.n_exited) +
                        " have)";
                break;
            }
            if (t.state == AT_COLLECTIVE) {
                text += format(" %s waits at a warp collective at %s:%d",
                               thread_name(t).c_str(), base_name(t.file), t.line);
                break;
            }
        }
    }
    for (size_t warp = 0; warp < b.warps.size(); warp++) {
        for (const collective &c : b.warps[warp]) {
            int missing = __builtin_ctz(c.mask & ~c.arrived);
            const gpu_thread &m = threads[warp * WARP + (size_t)missing];
            text += format(" lanes 0x%08x of warp %zu wait at %s at %s:%d (mask 0x%08x) for "
                           "lane %d, which %s;",
                           c.arrived, warp, collective_names[c.kind], base_name(c.file),
                           c.line, c.mask, missing,
                           m.state == EXITED       ? "has exited"
                           : m.state == AT_BARRIER ? "waits at __syncthreads()"
                                                   : "waits at another warp collective");
        }
    }
    return text;
}

static void pass_order(worker *w, int n, std::vector<int> *order)
{
    order->resize((size_t)n);
    for (int i = 0; i < n; i++)
        (*order)[(size_t)i] = config().order == ORDER_REVERSE ? n - 1 - i : i;
    if (config().order == ORDER_SHUFFLE)
        for (int i = n - 1; i > 0; i--)
            std::swap((*order)[(size_t)i], (*order)[next_random(&w->random) % (uint64_t)(i + 1)]);
}

static bool grow_threads(worker *w, int n)
{
    while ((int)w->threads.size() < n) {
        w->threads.emplace_back();
        if (!fiber_init(&w->threads.back().f, config().stack_bytes)) {
            w->threads.pop_back();
            return false;
        }
    }
    return true;
}

static std::string run_block(worker *w, const kernel_launch &l, uint3 block_idx)
{
    int n = (int)(l.block.x * l.block.y * l.block.z);
    if (!grow_threads(w, n))
        return "out of host memory for the stacks of the block's threads";
    poison_shared(&w->shared_sections);
    if (counting())
        counters_block_begin(l.name, n);
    if (w->dynamic_shared)
        memset(w->dynamic_shared, POISON_BYTE, l.shared_bytes);
    block_run b;
    b.launch = &l;
    b.n_threads = n;
    b.n_exited = b.at_barrier = 0;
    b.barrier_file = nullptr;
    b.barrier_line = 0;
    b.warps.resize((size_t)(n + WARP - 1) / WARP);
    w->block = &b;
    for (int i = 0; i < n; i++) {
        gpu_thread &t = w->threads[(size_t)i];
        unsigned x = (unsigned)i % l.block.x, y = (unsigned)i / l.block.x % l.block.y;
        unsigned z = (unsigned)i / (l.block.x * l.block.y);
        t.view = thread_view{{x, y, z}, block_idx, l.block, l.grid};
        t.linear = i;
        t.state = READY;
        fiber_prepare(&t.f, thread_main, &t);
    }
    std::vector<int> order;
    while (b.n_exited < n && b.error.empty()) {
        bool progressed = false;
        pass_order(w, n, &order);
        for (int i : order) {
            gpu_thread &t = w->threads[(size_t)i];
            if (t.state != READY)
                continue;
            w->running = &t;
            current_view = &t.view;
            fiber_resume(&w->context, &t.f);
            progressed = true;
            if (!b.error.empty())
                break;
        }
        if (!progressed && b.error.empty())
            b.error = describe_stuck(b, w->threads);
    }
    for (int i = 0; i < n; i++)
        if (w->threads[(size_t)i].state != EXITED)
            fiber_abandoned(&w->threads[(size_t)i].f);
    if (counting())
        counters_block_end();
    w->block = nullptr;
    w->running = nullptr;
    current_view = nullptr;
    return b.error;
}

/* ---- the grid, on a pool of host threads ------------------------------------------ */

struct grid_job {
    const kernel_launch *launch;
    std::vector<uint32_t> order; /* block numbers in the order they are handed out */
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::string error;
};

static void run_blocks(grid_job *job, uint64_t seed)
{
    static thread_local worker w;
    this_worker = &w;
    w.random = seed;
    const kernel_launch &l = *job->launch;
    /* operator new[] aligns to 16 bytes, as CUDA aligns dynamic shared memory */
    std::unique_ptr<char[]> shared(l.shared_bytes ? new char[l.shared_bytes] : nullptr);
    w.dynamic_shared = shared.get();
    w.dynamic_shared_bytes = l.shared_bytes;
    size_t i;
    while (!job->failed.load() && (i = job->next.fetch_add(1)) < job->order.size()) {
        uint32_t block = job->order[i];
        uint3 idx = {block % l.grid.x, block / l.grid.x % l.grid.y,
                     block / (l.grid.x * l.grid.y)};
        std::string error = run_block(&w, l, idx);
        if (error.empty())
            continue;
        std::lock_guard<std::mutex> lock(job->mutex);
        if (!job->failed.exchange(true))
            job->error = format("block (%u,%u,%u), ", idx.x, idx.y, idx.z) + error;
    }
    w.dynamic_shared = nullptr;
}

/* Host threads that help the calling thread run blocks, made once per
 * process (and again in a forked child, which inherits none of them). */
struct helper_pool {
    pid_t pid;
    std::mutex mutex;
    std::condition_variable wake, done;
    grid_job *job = nullptr;
    uint64_t generation = 0, seed = 0;
    int busy = 0;
};

static void helper_main(helper_pool *pool)
{
    uint64_t seen = 0;
    for (;;) {
        std::unique_lock<std::mutex> lock(pool->mutex);
        pool->wake.wait(lock, [&] { return pool->generation != seen; });
        seen = pool->generation;
        grid_job *job = pool->job;
        uint64_t seed = pool->seed + seen;
        lock.unlock();
        if (job)
            run_blocks(job, seed);
        lock.lock();
        if (--pool->busy == 0)
            pool->done.notify_all();
    }
}

static helper_pool *helpers(int count)
{
    static helper_pool *pool;
    if (pool && pool->pid == getpid())
        return pool;
    pool = new helper_pool; /* lives as long as the process, like its threads */
    pool->pid = getpid();
    for (int i = 0; i < count; i++)
        std::thread(helper_main, pool).detach();
    return pool;
}

std::string run_grid(const kernel_launch &l, uint64_t launch_number)
{
    grid_job job;
    job.launch = &l;
    uint32_t n_blocks = l.grid.x * l.grid.y * l.grid.z;
    job.order.resize(n_blocks);
    uint64_t random = config().seed ^ (launch_number * 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < n_blocks; i++)
        job.order[i] = config().order == ORDER_REVERSE ? n_blocks - 1 - i : i;
    if (config().order == ORDER_SHUFFLE)
        for (uint32_t i = n_blocks; i > 1; i--)
            std::swap(job.order[i - 1], job.order[next_random(&random) % i]);
    int n_helpers = config().workers - 1;
    if (n_blocks > 1 && n_helpers > 0) {
        helper_pool *pool = helpers(n_helpers);
        std::unique_lock<std::mutex> lock(pool->mutex);
        pool->job = &job;
        pool->seed = next_random(&random);
        pool->busy = n_helpers;
        pool->generation++;
        pool->wake.notify_all();
        lock.unlock();
        run_blocks(&job, next_random(&random));
        lock.lock();
        pool->done.wait(lock, [&] { return pool->busy == 0; });
        pool->job = nullptr;
    } else {
        run_blocks(&job, next_random(&random));
    }
    return job.error;
}

} // namespace emu
