/*
 * The CPU kernels' thread pool (src/cpu/threads.c): every part of a job runs
 * once, on its own thread, with its number and the team's size; the barrier
 * holds every thread until all have arrived; a call from inside a job, from
 * inside an OpenMP region or from a second application thread while the
 * pool is busy runs on its caller alone; workers that went to sleep wake
 * for the next job; a forked child gets a working pool; ct_cpu_split covers
 * its items once, in order; after ct_cpu_openmp_region the jobs run as
 * OpenMP regions (the same parts and barrier), and on the pool again once
 * the window has passed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu/threads.h"
#include "harness.h"

enum { MAX_TEAM = 8 };

typedef struct parts_seen {
    _Atomic int runs[MAX_TEAM];
    int team[MAX_TEAM];
    pthread_t thread[MAX_TEAM];
    _Atomic int bad_part;
} parts_seen;

static void record_part(void *arg)
{
    parts_seen *seen = arg;
    int part = ct_cpu_thread_num();
    if (part < 0 || part >= MAX_TEAM) {
        atomic_store(&seen->bad_part, 1);
        return;
    }
    atomic_fetch_add(&seen->runs[part], 1);
    seen->team[part] = ct_cpu_team_size();
    seen->thread[part] = pthread_self();
}

static void every_part_runs_once_on_its_own_thread(void)
{
    for (int team = 1; team <= 5; team++) {
        for (int rep = 0; rep < 200; rep++) {
            parts_seen seen;
            memset(&seen, 0, sizeof seen);
            ct_cpu_parallel(team, record_part, &seen);
            CHECK(!atomic_load(&seen.bad_part), "team %d: a part number out of range", team);
            for (int part = 0; part < team; part++) {
                CHECK(atomic_load(&seen.runs[part]) == 1, "team %d: part %d ran %d times", team,
                      part, atomic_load(&seen.runs[part]));
                CHECK(seen.team[part] == team, "team %d: part %d saw a team of %d", team, part,
                      seen.team[part]);
                for (int other = 0; other < part; other++)
                    CHECK(!pthread_equal(seen.thread[part], seen.thread[other]),
                          "team %d: parts %d and %d on one thread", team, other, part);
            }
            for (int part = team; part < MAX_TEAM; part++)
                CHECK(atomic_load(&seen.runs[part]) == 0, "team %d: part %d ran", team, part);
            if (harness_case_failures)
                return;
        }
    }
    CHECK(ct_cpu_thread_num() == 0 && ct_cpu_team_size() == 1,
          "outside a job: thread %d of %d", ct_cpu_thread_num(), ct_cpu_team_size());
}

typedef struct barrier_rounds {
    int rounds;
    int slots[MAX_TEAM];
    _Atomic int wrong;
} barrier_rounds;

/* Each round every part writes its slot, waits, checks every slot, waits. */
static void barrier_part(void *arg)
{
    barrier_rounds *b = arg;
    int part = ct_cpu_thread_num(), team = ct_cpu_team_size();
    for (int round = 1; round <= b->rounds; round++) {
        b->slots[part] = round;
        ct_cpu_barrier();
        for (int other = 0; other < team; other++)
            if (b->slots[other] != round)
                atomic_store(&b->wrong, 1);
        ct_cpu_barrier();
    }
}

static void barrier_holds_every_thread(void)
{
    for (int team = 2; team <= 4; team++) {
        barrier_rounds b = {.rounds = 2000};
        ct_cpu_parallel(team, barrier_part, &b);
        CHECK(!atomic_load(&b.wrong), "team %d: a part passed the barrier early", team);
    }
}

typedef struct nested {
    _Atomic int inner_runs;
    _Atomic int wrong;
} nested;

static void inner_part(void *arg)
{
    nested *n = arg;
    atomic_fetch_add(&n->inner_runs, 1);
    if (ct_cpu_thread_num() != 0 || ct_cpu_team_size() != 1)
        atomic_store(&n->wrong, 1);
}

static void outer_part(void *arg)
{
    nested *n = arg;
    int part = ct_cpu_thread_num(), team = ct_cpu_team_size();
    ct_cpu_parallel(4, inner_part, n);
    if (ct_cpu_thread_num() != part || ct_cpu_team_size() != team)
        atomic_store(&n->wrong, 2);
}

static void nested_call_runs_alone(void)
{
    nested n = {0};
    ct_cpu_parallel(3, outer_part, &n);
    CHECK(atomic_load(&n.inner_runs) == 3, "inner jobs ran %d times, not once per part",
          atomic_load(&n.inner_runs));
    CHECK(atomic_load(&n.wrong) != 1, "an inner job was not a team of one");
    CHECK(atomic_load(&n.wrong) != 2, "a part's number was not restored after the inner job");
}

static void inside_openmp_region_runs_alone(void)
{
#ifdef _OPENMP
    _Atomic int runs = 0, wrong = 0;
#pragma omp parallel num_threads(2)
    {
        nested n = {0};
        ct_cpu_parallel(4, inner_part, &n);
        atomic_fetch_add(&runs, atomic_load(&n.inner_runs));
        if (atomic_load(&n.wrong))
            atomic_store(&wrong, 1);
    }
    CHECK(atomic_load(&runs) == 2, "%d runs inside a two-thread OpenMP region",
          atomic_load(&runs));
    CHECK(!atomic_load(&wrong), "a call inside an OpenMP region got a team");
#else
    fprintf(stderr, "  note: built without OpenMP: nothing to check\n");
#endif
}

typedef struct counter_job {
    int64_t count;
    _Atomic int64_t sum;
} counter_job;

/* Sums its share of 0..count-1. */
static void sum_part(void *arg)
{
    counter_job *c = arg;
    int64_t first, last, sum = 0;
    ct_cpu_split(c->count, &first, &last);
    for (int64_t i = first; i < last; i++)
        sum += i;
    atomic_fetch_add(&c->sum, sum);
}

static void *application_thread(void *arg)
{
    _Atomic int *wrong = arg;
    for (int rep = 0; rep < 2000; rep++) {
        counter_job c = {.count = 1000 + rep};
        ct_cpu_parallel(2, sum_part, &c);
        if (atomic_load(&c.sum) != c.count * (c.count - 1) / 2)
            atomic_store(wrong, 1);
    }
    return NULL;
}

static void two_application_threads_share_the_pool(void)
{
    _Atomic int wrong = 0;
    pthread_t threads[2];
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&threads[t], NULL, application_thread, &wrong) == 0,
              "pthread_create");
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    CHECK(!atomic_load(&wrong), "a job's sum was wrong with two callers");
}

static void sleeping_workers_wake(void)
{
    struct timespec pause = {0, 2 * 1000 * 1000}; /* past the workers' spin */
    for (int rep = 0; rep < 20; rep++) {
        nanosleep(&pause, NULL);
        parts_seen seen;
        memset(&seen, 0, sizeof seen);
        ct_cpu_parallel(3, record_part, &seen);
        for (int part = 0; part < 3; part++)
            CHECK(atomic_load(&seen.runs[part]) == 1, "after a pause: part %d ran %d times",
                  part, atomic_load(&seen.runs[part]));
    }
}

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(UNDER_TSAN)
#define UNDER_TSAN 1
#endif

static void forked_child_has_a_pool(void)
{
#ifdef UNDER_TSAN
    /* ThreadSanitizer cannot start threads in the child of a threaded fork */
    fprintf(stderr, "  note: under ThreadSanitizer: nothing to check\n");
    return;
#endif
    counter_job warm = {.count = 10};
    ct_cpu_parallel(2, sum_part, &warm); /* the parent's workers exist */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        counter_job c = {.count = 100000};
        ct_cpu_parallel(2, sum_part, &c);
        _exit(atomic_load(&c.sum) == c.count * (c.count - 1) / 2 ? 0 : 1);
    }
    CHECK(child > 0, "fork failed");
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's job failed (status %d)",
          status);
}

typedef struct split_check {
    int64_t count;
    int64_t first[MAX_TEAM], last[MAX_TEAM];
} split_check;

static void split_part(void *arg)
{
    split_check *s = arg;
    int part = ct_cpu_thread_num();
    ct_cpu_split(s->count, &s->first[part], &s->last[part]);
}

static void split_covers_every_item_once_in_order(void)
{
    for (int team = 1; team <= 7; team++)
        for (int64_t count = 0; count <= 40; count++) {
            split_check s = {.count = count};
            ct_cpu_parallel(team, split_part, &s);
            int64_t next = 0;
            for (int part = 0; part < team; part++) {
                CHECK(s.first[part] == next && s.last[part] >= s.first[part],
                      "team %d, %lld items: part %d got [%lld, %lld) after %lld", team,
                      (long long)count, part, (long long)s.first[part], (long long)s.last[part],
                      (long long)next);
                CHECK(s.last[part] - s.first[part] <= count / team + 1,
                      "team %d, %lld items: part %d got %lld", team, (long long)count, part,
                      (long long)(s.last[part] - s.first[part]));
                next = s.last[part];
            }
            CHECK(next == count, "team %d: %lld of %lld items", team, (long long)next,
                  (long long)count);
            if (harness_case_failures)
                return;
        }
}

typedef struct where_run {
    _Atomic int in_openmp, parts;
} where_run;

static void note_runtime(void *arg)
{
    where_run *w = arg;
#ifdef _OPENMP
    if (omp_in_parallel())
        atomic_fetch_add(&w->in_openmp, 1);
#endif
    atomic_fetch_add(&w->parts, 1);
}

static void jobs_near_openmp_regions_run_as_openmp(void)
{
#ifdef _OPENMP
    where_run w = {0};
    ct_cpu_parallel(2, note_runtime, &w);
    CHECK(atomic_load(&w.in_openmp) == 0 && atomic_load(&w.parts) == 2,
          "before any OpenMP region: %d of %d parts in OpenMP", atomic_load(&w.in_openmp),
          atomic_load(&w.parts));
    ct_cpu_openmp_region();
    where_run near = {0};
    ct_cpu_parallel(2, note_runtime, &near);
    CHECK(atomic_load(&near.in_openmp) == 2 && atomic_load(&near.parts) == 2,
          "right after an OpenMP region: %d of %d parts in OpenMP", atomic_load(&near.in_openmp),
          atomic_load(&near.parts));
    /* the same parts, numbers and barrier as on the pool */
    every_part_runs_once_on_its_own_thread();
    barrier_holds_every_thread();
    struct timespec pause = {0, 80 * 1000 * 1000}; /* past the window */
    nanosleep(&pause, NULL);
    where_run later = {0};
    ct_cpu_parallel(2, note_runtime, &later);
    CHECK(atomic_load(&later.in_openmp) == 0 && atomic_load(&later.parts) == 2,
          "long after the OpenMP region: %d of %d parts in OpenMP", atomic_load(&later.in_openmp),
          atomic_load(&later.parts));
#else
    fprintf(stderr, "  note: built without OpenMP: nothing to check\n");
#endif
}

int main(void)
{
    RUN(every_part_runs_once_on_its_own_thread);
    RUN(barrier_holds_every_thread);
    RUN(nested_call_runs_alone);
    RUN(inside_openmp_region_runs_alone);
    RUN(two_application_threads_share_the_pool);
    RUN(sleeping_workers_wake);
    RUN(forked_child_has_a_pool);
    RUN(split_covers_every_item_once_in_order);
    RUN(jobs_near_openmp_regions_run_as_openmp);
    return harness_finish();
}
