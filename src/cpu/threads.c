/*
 * The CPU kernels' thread pool (threads.h): ct_cpu_parallel runs a function
 * on a team of threads the way `#pragma omp parallel` does, without
 * libgomp's system calls.
 *
 * Why not OpenMP here: libgomp wakes its threads and ends every region with
 * futex system calls, one even for a region that its `if` clause keeps on
 * one thread.  On the 2-core AVX-512 VM this project is measured on a
 * system call costs 1.15 us (`/tmp` driver: getppid and futex_wake alike),
 * a two-thread region's fork and join 3.1-3.5 us, an `if (false)` region
 * 1.29 us and a barrier 1.67 us, where one cache line's round trip between
 * the two cores is 0.43 us and a spinning barrier 0.21 us.  SimpleCNN's
 * training step opened 17 regions (docs/perf.md, 2026-12-07).
 *
 * How: the caller is part 0 and the pool's workers the others.  A worker
 * that has finished a job spins on the job counter for SPIN_NS, then sleeps
 * on a condition variable; the caller publishes a job with one atomic store
 * and broadcasts only when a worker sleeps.  The caller waits for the
 * workers by spinning on a counter.  Every worker takes every job (those
 * past the job's team only acknowledge it), so no worker can be reading a
 * job while the next one is written.  One caller at a time: a call made
 * while the pool runs a job (from inside it, or from another application
 * thread), or from inside an OpenMP region, runs on its caller alone, as a
 * nested OpenMP region would.
 *
 * Beside OpenMP: the kernels not moved here, and OpenBLAS, still run
 * OpenMP regions, whose idle threads spin for milliseconds (libgomp's
 * default).  A pool worker and a libgomp thread spinning on one core keep
 * each other from it until the scheduler's time slice ends: VGG-11's
 * training step, which mixes both, took 3-20 % longer.  So each of those
 * regions first calls ct_cpu_openmp_region, which sends the pool's spinning
 * workers to sleep, and for OPENMP_WINDOW_NS after one ct_cpu_parallel runs
 * its jobs as OpenMP regions itself: one runtime at a time.  A step with no
 * OpenMP region (SimpleCNN's) runs on the pool alone.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "cpu/threads.h"

/* A worker spins this long after a job before it sleeps: longer than the
 * serial work between two kernels of a step (a few us), short enough that
 * an idle pool gives its cores back at once. */
#define SPIN_NS 200000
/* While the caller waits on workers that are not all running (more threads
 * than cores), it yields the core every this many spins. */
#define YIELD_EVERY 256
/* After an OpenMP region, jobs run as OpenMP regions this long: longer than
 * libgomp's threads spin before they sleep. */
#define OPENMP_WINDOW_NS 50000000

/* A team's barrier: the pool's, or an OpenMP-run job's own. */
typedef struct team_barrier {
    _Atomic int arrived;
    _Atomic uint64_t generation;
    _Atomic bool oversubscribed; /* more threads than cores: yield while waiting */
} team_barrier;

typedef struct pool {
    pthread_mutex_t lock; /* guards creating workers and sleeping */
    pthread_cond_t wake;
    atomic_flag busy;             /* a caller owns the pool */
    _Atomic uint64_t job;         /* the number of the latest job */
    _Atomic int pending;          /* workers yet to finish the latest job */
    _Atomic int sleepers;         /* workers waiting on `wake` */
    _Atomic int workers;          /* workers created */
    /* the job: written before `job` is stored, read after it is loaded */
    void (*fn)(void *ctx);
    void *ctx;
    int team;
    team_barrier barrier;
} pool;

static pool the_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                        .wake = PTHREAD_COND_INITIALIZER,
                        .busy = ATOMIC_FLAG_INIT};

/* This thread's part of the job it runs and its team's barrier; parts == 0
 * outside a job. */
static _Thread_local int my_part, my_parts;
static _Thread_local team_barrier *my_barrier;

/* When cuttle last started an OpenMP region (CLOCK_MONOTONIC ns). */
static _Atomic int64_t openmp_at = INT64_MIN / 2;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static bool in_openmp_region(void)
{
#ifdef _OPENMP
    return omp_in_parallel();
#else
    return false;
#endif
}

int ct_cpu_thread_num(void)
{
    if (my_parts)
        return my_part;
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int ct_cpu_team_size(void)
{
    if (my_parts)
        return my_parts;
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* fn as part `part` of `parts`, this thread's previous part restored after. */
static void run_part(void (*fn)(void *), void *ctx, int part, int parts, team_barrier *barrier)
{
    int saved_part = my_part, saved_parts = my_parts;
    team_barrier *saved_barrier = my_barrier;
    my_part = part;
    my_parts = parts;
    my_barrier = barrier;
    fn(ctx);
    my_part = saved_part;
    my_parts = saved_parts;
    my_barrier = saved_barrier;
}

void ct_cpu_openmp_region(void)
{
    atomic_store_explicit(&openmp_at, now_ns(), memory_order_relaxed);
}

/* Waits until the pool's job number is past `seen`: spinning first, then
 * asleep.  Returns the new number. */
static uint64_t wait_for_job(pool *p, uint64_t seen)
{
    uint64_t job;
    if (!atomic_load_explicit(&p->barrier.oversubscribed, memory_order_relaxed)) {
        int64_t start = now_ns();
        for (int spins = 0;; spins++) {
            job = atomic_load_explicit(&p->job, memory_order_acquire);
            if (job != seen)
                return job;
            cpu_relax();
            if (atomic_load_explicit(&openmp_at, memory_order_relaxed) > start)
                break; /* OpenMP's threads need the cores */
            if ((spins & 1023) == 1023 && now_ns() - start > SPIN_NS)
                break;
        }
    }
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add(&p->sleepers, 1);
    while ((job = atomic_load(&p->job)) == seen)
        pthread_cond_wait(&p->wake, &p->lock);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->lock);
    return job;
}

/* A worker's part, and the job counter when it was created: the jobs it
 * must run are the later ones. */
typedef struct worker_start {
    int part;
    uint64_t seen;
} worker_start;

static void *worker_main(void *arg)
{
    pool *p = &the_pool;
    worker_start start = *(worker_start *)arg;
    free(arg);
    uint64_t seen = start.seen;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (start.part < p->team)
            run_part(p->fn, p->ctx, start.part, p->team, &p->barrier);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
    return NULL;
}

/* Workers for parts 1..team-1, created as needed; returns the team the
 * job gets: fewer threads where a worker could not be created. */
static int ensure_workers(pool *p, int team)
{
    int have = atomic_load(&p->workers);
    while (have < team - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* the caller holds the pool: no job is published until this returns */
        worker_start *start = malloc(sizeof *start);
        int failed = !start;
        if (start) {
            *start = (worker_start){have + 1, atomic_load(&p->job)};
            failed = pthread_create(&thread, &attr, worker_main, start);
            if (failed)
                free(start);
        }
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        atomic_store(&p->workers, ++have);
    }
    return have + 1 < team ? have + 1 : team;
}

/* In a child of fork() only the forking thread exists: a pool there starts
 * empty. */
static void forget_workers_after_fork(void)
{
    pool *p = &the_pool;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_flag_clear(&p->busy);
    atomic_store(&p->workers, 0);
    atomic_store(&p->sleepers, 0);
    atomic_store(&p->pending, 0);
    atomic_store(&p->barrier.arrived, 0);
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static int n_cores;

/* Once a process: the cores it may run on (omp_get_num_procs asks the
 * kernel each call, a system call) and the fork handler. */
static void setup(void)
{
    n_cores = ct_cpu_n_procs();
    pthread_atfork(NULL, NULL, forget_workers_after_fork);
}

static int cores(void)
{
    pthread_once(&setup_once, setup);
    return n_cores;
}

/* The job as an OpenMP region (within OPENMP_WINDOW_NS of another). */
static void run_as_openmp(int threads, void (*fn)(void *ctx), void *ctx)
{
    team_barrier barrier = {.oversubscribed = threads > cores()};
    ct_cpu_openmp_region();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    run_part(fn, ctx, omp_get_thread_num(), omp_get_num_threads(), &barrier);
#else
    (void)threads;
    run_part(fn, ctx, 0, 1, &barrier);
#endif
}

void ct_cpu_parallel(int threads, void (*fn)(void *ctx), void *ctx)
{
    pool *p = &the_pool;
    if (threads <= 1 || in_openmp_region()) {
        run_part(fn, ctx, 0, 1, NULL);
        return;
    }
    if (now_ns() - atomic_load_explicit(&openmp_at, memory_order_relaxed) < OPENMP_WINDOW_NS) {
        run_as_openmp(threads, fn, ctx);
        return;
    }
    if (atomic_flag_test_and_set(&p->busy)) {
        run_part(fn, ctx, 0, 1, NULL);
        return;
    }
    int team = ensure_workers(p, threads);
    int workers = atomic_load(&p->workers);
    p->fn = fn;
    p->ctx = ctx;
    p->team = team;
    bool oversubscribed = team > cores();
    atomic_store_explicit(&p->barrier.oversubscribed, oversubscribed, memory_order_relaxed);
    atomic_store_explicit(&p->pending, workers, memory_order_relaxed);
    /* seq_cst with the sleepers' count: either a worker about to sleep sees
     * the new job, or this sees it asleep and wakes it */
    atomic_fetch_add(&p->job, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    run_part(fn, ctx, 0, team, &p->barrier);
    for (int spins = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        cpu_relax();
        if (oversubscribed && spins % YIELD_EVERY == 0)
            sched_yield();
    }
    atomic_flag_clear(&p->busy);
}

void ct_cpu_barrier(void)
{
    if (!my_parts) {
#ifdef _OPENMP
#pragma omp barrier
#endif
        return;
    }
    team_barrier *b = my_barrier;
    if (my_parts == 1 || !b)
        return;
    uint64_t gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) == my_parts - 1) {
        atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
        return;
    }
    for (int spins = 1; atomic_load_explicit(&b->generation, memory_order_acquire) == gen;
         spins++) {
        cpu_relax();
        if (spins % YIELD_EVERY == 0 &&
            atomic_load_explicit(&b->oversubscribed, memory_order_relaxed))
            sched_yield();
    }
}

void ct_cpu_split(int64_t count, int64_t *first, int64_t *last)
{
    int part = ct_cpu_thread_num(), parts = ct_cpu_team_size();
    *first = count * part / parts;
    *last = count * (part + 1) / parts;
}
