/*
 * The emulated NCCL between processes (nccl_internal.h): each process has
 * its own emulated runtime (one emulated GPU each under mpirun), and the
 * ranks meet in a POSIX shared-memory segment that the unique id names.
 *
 * The id is a magic string and the segment's name (/cuttle-nccl-<pid of
 * ncclGetUniqueId's caller>-<count>-<random>); nothing is created until a
 * rank initializes.  The first rank to come creates the segment (O_EXCL),
 * sizes and fills it, and publishes its magic number last; the others open
 * it and wait for the magic.  Each rank claims its slot (its pid and
 * device) and counts itself in; when all have, every rank unlinks the name
 * (the first succeeds), so nothing stays in /dev/shm while the mappings
 * live on.  A rank whose joining fails unlinks it too.
 *
 * The segment: a header, a slot per rank, and a staging area of
 * CHUNK_BYTES per rank.  A collective runs in steps of one chunk: each
 * rank waits until every rank has read the previous step, copies its chunk
 * in (and its arguments, checked against the others'), posts the step,
 * waits until every rank has posted it, computes its output chunk from
 * the staging areas (all ranks the same arithmetic, in rank order:
 * emu/nccl_reduce.cpp), and says it has read it.  25 MB of floats is 25
 * steps; the segment is 1 MiB per rank whatever the buffers.
 *
 * Waiting is on a futex over one counter that every change bumps (polling
 * with sleeps elsewhere than Linux), waking at least every 50 ms to check
 * that the ranks waited for are alive: a pid that kill(pid, 0) no longer
 * finds, or a zombie, fails the wait naming the rank and pid.  A rank that
 * leaves (destroy, abort, failure) says so in its slot, and a rank whose
 * joining fails marks the header broken: the others stop at once.
 * CUDA_EMU_NCCL_TIMEOUT bounds each wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include <algorithm>
#include <chrono>
#include <functional>

#include "nccl_internal.h" /* the standard headers before device.h's __noinline__ */
#include "internal.h"

namespace emu {
namespace nccl {

namespace {

const char ID_MAGIC[16] = "cuttle-emu-nccl";
const uint64_t SEGMENT_MAGIC = 0x6c63636e2d756d65ull; /* "emu-nccl" */
enum : size_t {
    CHUNK_BYTES = 1 << 20, /* staging per rank: a step of a collective */
    REASON_BYTES = 256,
    ALIGN = 4096,
};
const double LIVENESS_SECONDS = 0.05; /* how often a wait checks that its peers live */

/* Plain integers in the shared segment, used only through these (lock-free
 * and address-free, so they work between processes). */
uint32_t load(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
int32_t load(const int32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
uint64_t load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
void store(int32_t *p, int32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
void store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

struct rank_slot {
    int32_t pid;  /* 0 until the rank attaches */
    int32_t device;
    uint32_t posted;   /* the steps whose chunk this rank has staged */
    uint32_t consumed; /* the steps whose chunks it has read */
    uint32_t gone;     /* it left: `how` says how */
    uint32_t unused;
    call_args args;    /* of its latest posted step */
    char how[REASON_BYTES];
};

struct header {
    uint64_t magic; /* published last by the creator */
    int32_t nranks;
    uint32_t attached;
    uint32_t generation; /* bumped at every change: the futex word */
    uint32_t broken;     /* 0; 1 while a rank writes `reason`; 2 once it is there */
    uint64_t total_bytes;
    char reason[REASON_BYTES]; /* why joining failed, for the others */
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }
size_t slots_offset() { return round_up(sizeof(header), 64); }
size_t staging_offset(int nranks)
{
    return round_up(slots_offset() + sizeof(rank_slot) * (size_t)nranks, ALIGN);
}
size_t segment_bytes(int nranks) { return staging_offset(nranks) + CHUNK_BYTES * (size_t)nranks; }

double now_seconds()
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void bump(header *h)
{
    __atomic_fetch_add(&h->generation, 1u, __ATOMIC_ACQ_REL);
#ifdef __linux__
    syscall(SYS_futex, &h->generation, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
#endif
}

/* Sleep until h->generation differs from `seen`, or `seconds` pass. */
void sleep_on(header *h, uint32_t seen, double seconds)
{
    seconds = std::max(seconds, 1e-4);
    struct timespec ts;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
#ifdef __linux__
    syscall(SYS_futex, &h->generation, FUTEX_WAIT, seen, &ts, nullptr, 0);
#else
    (void)h, (void)seen;
    ts.tv_sec = 0;
    ts.tv_nsec = std::min(ts.tv_nsec, 1000000L);
    nanosleep(&ts, nullptr);
#endif
}

std::string seconds_text(double seconds)
{
    char text[32];
    snprintf(text, sizeof text, "%g s", seconds);
    return text;
}

std::string rank_list(const std::vector<int> &ranks)
{
    std::string text;
    for (size_t i = 0; i < ranks.size(); i++)
        text += (i ? ", " : "") + std::to_string(ranks[i]);
    return text;
}

bool set_failure(failure *error, ncclResult_t code, const std::string &message)
{
    error->code = code;
    error->message = message;
    return false;
}

} // namespace

struct link {
    std::string name;
    int nranks = 0, rank = 0;
    header *h = nullptr;
    size_t bytes = 0;
    uint32_t steps = 0; /* the steps this rank has posted */
    bool unlinked = false;

    rank_slot &slot(int r) { return ((rank_slot *)((char *)h + slots_offset()))[r]; }
    char *staging(int r) { return (char *)h + staging_offset(nranks) + CHUNK_BYTES * (size_t)r; }
    void unlink_name()
    {
        if (!unlinked)
            shm_unlink(name.c_str()); /* ENOENT: another rank was first */
        unlinked = true;
    }
    ~link()
    {
        if (h)
            munmap(h, bytes);
    }
};

bool process_gone(pid_t pid)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
#ifdef __linux__
    /* a zombie (dead, not yet reaped by its parent) still answers kill() */
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = 0;
    const char *paren = strrchr(text, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
#else
    return false;
#endif
}

bool make_id(ncclUniqueId *id, std::string *why)
{
    static uint32_t made = 0;
    uint32_t count = __atomic_add_fetch(&made, 1u, __ATOMIC_RELAXED);
    uint64_t random = (uint64_t)std::chrono::system_clock::now().time_since_epoch().count() ^
                      ((uint64_t)getpid() << 32) ^ ((uint64_t)count << 16) ^ (uint64_t)(uintptr_t)id;
    random = next_random(&random);
    memset(id, 0, sizeof *id);
    memcpy(id->internal, ID_MAGIC, sizeof ID_MAGIC);
    int length = snprintf(id->internal + sizeof ID_MAGIC, NCCL_UNIQUE_ID_BYTES - sizeof ID_MAGIC,
                          "/cuttle-nccl-%d-%u-%08x", (int)getpid(), count,
                          (unsigned)(random & 0xffffffffu));
    if (length <= 0 || (size_t)length >= NCCL_UNIQUE_ID_BYTES - sizeof ID_MAGIC) {
        *why = "ncclGetUniqueId: the segment's name does not fit the id";
        return false;
    }
    return true;
}

const std::string &link_name(const link &l)
{
    return l.name;
}

/* The name in `id`, or false when the id is not one ncclGetUniqueId made. */
static bool id_name(const ncclUniqueId &id, std::string *name)
{
    const char *text = id.internal + sizeof ID_MAGIC;
    size_t room = NCCL_UNIQUE_ID_BYTES - sizeof ID_MAGIC;
    if (memcmp(id.internal, ID_MAGIC, sizeof ID_MAGIC) != 0 || text[0] != '/' ||
        memchr(text, 0, room) == nullptr)
        return false;
    *name = text;
    return true;
}

/* Mark the segment broken, for the other ranks: `reason` says why. */
static void break_segment(header *h, const std::string &reason)
{
    uint32_t clear = 0;
    if (!__atomic_compare_exchange_n(&h->broken, &clear, 1u, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return; /* another rank's reason is there (or on its way) */
    snprintf(h->reason, sizeof h->reason, "%s", reason.c_str());
    store(&h->broken, 2u);
    bump(h);
}

/* Map the segment `fd` holds for `nranks`, as its creator (fills it) or a
 * joiner (waits for the creator's magic, checks nranks). */
static bool map_segment(link &l, int fd, bool creator, double deadline, failure *error)
{
    size_t bytes = segment_bytes(l.nranks);
    if (creator) {
        int err = ftruncate(fd, (off_t)bytes) != 0 ? errno : posix_fallocate(fd, 0, (off_t)bytes);
        if (err != 0)
            return set_failure(error, ncclSystemError,
                               "cannot make the shared-memory segment " + l.name + " of " +
                                   std::to_string(bytes) + " bytes: " + strerror(err) +
                                   (err == ENOSPC ? " (/dev/shm is full)" : ""));
    } else {
        /* the creator may not have sized it yet, nor published it */
        for (;;) {
            struct stat st;
            if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(header)) {
                void *peek = mmap(nullptr, sizeof(header), PROT_READ | PROT_WRITE, MAP_SHARED,
                                  fd, 0);
                if (peek == MAP_FAILED)
                    return set_failure(error, ncclSystemError,
                                       "cannot map " + l.name + ": " + strerror(errno));
                header *h = (header *)peek;
                bool published = load(&h->magic) == SEGMENT_MAGIC;
                int theirs = h->nranks;
                if (published && theirs != l.nranks) {
                    set_failure(error, ncclInvalidArgument,
                                "nranks " + std::to_string(l.nranks) + " for rank " +
                                    std::to_string(l.rank) + ", but the rank that came first "
                                    "to this id said " + std::to_string(theirs) +
                                    ": every rank must pass the same nranks");
                    break_segment(h, error->message); /* the others stop waiting */
                }
                munmap(peek, sizeof(header));
                if (published && theirs != l.nranks)
                    return false;
                if (published)
                    break;
            }
            if (now_seconds() > deadline)
                return set_failure(error, ncclRemoteError,
                                   "the rank that created " + l.name + " never finished it "
                                   "(it may have died)");
            usleep(1000);
        }
    }
    void *memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (memory == MAP_FAILED)
        return set_failure(error, ncclSystemError, "cannot map " + l.name + ": " + strerror(errno));
    l.h = (header *)memory;
    l.bytes = bytes;
    if (creator) { /* fresh pages are zero: slots free, counters 0 */
        l.h->nranks = l.nranks;
        l.h->total_bytes = bytes;
        store(&l.h->magic, SEGMENT_MAGIC);
    }
    return true;
}

std::shared_ptr<link> attach(const ncclUniqueId &id, int nranks, int rank, int device,
                             failure *error)
{
    auto l = std::make_shared<link>();
    l->nranks = nranks;
    l->rank = rank;
    if (!id_name(id, &l->name)) {
        set_failure(error, ncclInvalidArgument,
                    "the unique id was not made by ncclGetUniqueId (no emulated id's magic)");
        return nullptr;
    }
    double deadline = now_seconds() + config().nccl_timeout;
    bool ok = false;
    for (;;) {
        int fd = shm_open(l->name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
        bool creator = fd >= 0;
        if (!creator && errno == EEXIST)
            fd = shm_open(l->name.c_str(), O_RDWR, 0600);
        if (fd < 0 && errno == ENOENT && now_seconds() < deadline)
            continue; /* unlinked between the two opens: come first again */
        if (fd < 0) {
            set_failure(error, ncclSystemError,
                        "cannot open the shared-memory segment " + l->name + ": " +
                            strerror(errno));
            break;
        }
        ok = map_segment(*l, fd, creator, deadline, error);
        close(fd);
        break;
    }
    if (!ok) {
        l->unlink_name();
        return nullptr;
    }
    rank_slot &mine = l->slot(rank);
    int32_t free_slot = 0;
    if (!__atomic_compare_exchange_n(&mine.pid, &free_slot, (int32_t)getpid(), false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        std::string why = "rank " + std::to_string(rank) + " joined twice (pid " +
                          std::to_string(free_slot) + " holds it, pid " +
                          std::to_string(getpid()) + " asked again)";
        break_segment(l->h, why);
        l->unlink_name();
        set_failure(error, ncclInvalidArgument, why);
        return nullptr;
    }
    store(&mine.device, device);
    __atomic_fetch_add(&l->h->attached, 1u, __ATOMIC_ACQ_REL);
    bump(l->h);
    return l;
}

/* Wait until arrived(r) holds for every rank.  Fails when the segment is
 * broken, or a rank waited for (any attached rank, with `every_rank`) has
 * left or is gone, or the timeout passes; `what` starts the messages. */
static bool wait_for(link &l, const std::string &what, const std::function<bool(int)> &arrived,
                     bool every_rank, failure *error)
{
    double start = now_seconds(), deadline = start + config().nccl_timeout, checked = 0;
    for (;;) {
        uint32_t seen = load(&l.h->generation);
        std::vector<int> missing;
        for (int r = 0; r < l.nranks; r++)
            if (!arrived(r))
                missing.push_back(r);
        if (missing.empty())
            return true;
        if (load(&l.h->broken) == 2)
            return set_failure(error, ncclRemoteError, what + l.h->reason);
        double now = now_seconds();
        bool check_pids = now - checked >= LIVENESS_SECONDS;
        if (check_pids)
            checked = now;
        for (int r = 0; r < l.nranks; r++) {
            if (r == l.rank || (!every_rank && !std::count(missing.begin(), missing.end(), r)))
                continue;
            rank_slot &s = l.slot(r);
            int32_t pid = load(&s.pid);
            bool left = load(&s.gone) != 0, exited = !left && check_pids && process_gone(pid);
            /* a rank waited for may have done its part after `missing` was
             * taken, then left: what it stored before leaving shows now */
            if ((!left && !exited) || (!every_rank && arrived(r)))
                continue;
            std::string who = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ")";
            const char *how = left ? s.how : "has exited (killed or crashed)";
            return set_failure(error, ncclRemoteError, what + who + " " + how);
        }
        if (now >= deadline)
            return set_failure(error, ncclRemoteError,
                               what + "rank" + (missing.size() > 1 ? "s " : " ") +
                                   rank_list(missing) + " did not come within " +
                                   seconds_text(config().nccl_timeout) +
                                   " (CUDA_EMU_NCCL_TIMEOUT)");
        sleep_on(l.h, seen, std::min(LIVENESS_SECONDS, deadline - now));
    }
}

bool wait_for_ranks(link &l, bool *same_process, failure *error)
{
    std::string what = "joining " + l.name + " as rank " + std::to_string(l.rank) + " of " +
                       std::to_string(l.nranks) + ": ";
    bool ok = wait_for(l, what, [&l](int r) { return load(&l.slot(r).pid) != 0; }, true, error);
    l.unlink_name(); /* everyone is in, or this rank gives up: no one else may come */
    if (!ok) {
        leave(l, "failed to join: " + error->message);
        return false;
    }
    /* all ranks in this process, or each in its own; devices distinct in one */
    pid_t me = getpid();
    int mine = 0;
    std::vector<int32_t> pids;
    for (int r = 0; r < l.nranks; r++) {
        pids.push_back(load(&l.slot(r).pid));
        mine += pids.back() == me;
    }
    std::vector<int32_t> sorted = pids;
    std::sort(sorted.begin(), sorted.end());
    bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    *same_process = mine == l.nranks;
    if (!*same_process && !distinct)
        return set_failure(error, ncclInvalidUsage,
                           what + "some ranks share a process and some do not; the emulator "
                                  "runs a communicator's ranks all in one process, or each in "
                                  "its own");
    for (int r = 0; *same_process && r < l.nranks; r++)
        for (int q = 0; q < r; q++)
            if (load(&l.slot(q).device) == load(&l.slot(r).device))
                return set_failure(error, ncclInvalidUsage,
                                   what + "ranks " + std::to_string(q) + " and " +
                                       std::to_string(r) + " are both on device " +
                                       std::to_string(load(&l.slot(r).device)) +
                                       " of this process (NCCL refuses a GPU twice)");
    return true;
}

void leave(link &l, const std::string &how)
{
    rank_slot &mine = l.slot(l.rank);
    if (load(&mine.gone))
        return;
    snprintf(mine.how, sizeof mine.how, "%s", how.c_str());
    store(&mine.gone, 1u);
    bump(l.h);
}

/* The first rank whose arguments differ from rank 0's: every rank finds
 * the same, and fails the same way. */
static bool arguments_agree(link &l, failure *error)
{
    const call_args &first = l.slot(0).args;
    for (int r = 0; r < l.nranks; r++) {
        const call_args &a = l.slot(r).args;
        if (memcmp(&a, &first, sizeof a) != 0)
            return set_failure(error, ncclInvalidUsage,
                               "the ranks' calls differ: rank 0 called " +
                                   describe(first) + " as its collective #" +
                                   std::to_string(first.number) + ", rank " +
                                   std::to_string(r) + " " + describe(a) + " as its #" +
                                   std::to_string(a.number));
    }
    return true;
}

bool run_collective(link &l, const call_args &args, const void *send, void *recv,
                    failure *error)
{
    size_t element = type_bytes((ncclDataType_t)args.type);
    size_t per_chunk = CHUNK_BYTES / element;
    std::vector<const void *> inputs((size_t)l.nranks);
    for (size_t start = 0; start < args.count; start += per_chunk) {
        size_t len = std::min(per_chunk, (size_t)args.count - start), bytes = len * element;
        uint32_t step = ++l.steps;
        rank_slot &mine = l.slot(l.rank);
        /* my staging area is free once every rank has read the last step */
        if (!wait_for(l, "", [&l, step](int r) { return load(&l.slot(r).consumed) >= step - 1; },
                      false, error))
            return false;
        if (args.kind == ALL_REDUCE || l.rank == args.root)
            memcpy(l.staging(l.rank), (const char *)send + start * element, bytes);
        mine.args = args;
        store(&mine.posted, step);
        bump(l.h);
        if (!wait_for(l, "", [&l, step](int r) { return load(&l.slot(r).posted) >= step; },
                      false, error) ||
            !arguments_agree(l, error))
            return false;
        char *out = (char *)recv + start * element;
        if (args.kind == ALL_REDUCE) {
            for (int r = 0; r < l.nranks; r++)
                inputs[(size_t)r] = l.staging(r);
            reduce((ncclDataType_t)args.type, (ncclRedOp_t)args.op, l.nranks, inputs.data(), out,
                   len);
        } else {
            memcpy(out, l.staging(args.root), bytes);
        }
        store(&mine.consumed, step);
        bump(l.h);
    }
    return true;
}

} // namespace nccl
} // namespace emu
