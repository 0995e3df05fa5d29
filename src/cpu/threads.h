/* The CPU kernels' threads: OpenMP's thread controls, with single-threaded
 * stand-ins for builds without OpenMP (make OPENMP=0), and the pool of
 * threads.c for the kernels that run in every training step. */
#ifndef CT_CPU_THREADS_H
#define CT_CPU_THREADS_H

#include <stdint.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static inline int ct_cpu_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static inline void ct_cpu_set_threads(int n_threads)
{
#ifdef _OPENMP
    omp_set_num_threads(n_threads);
#else
    (void)n_threads;
#endif
}

/* Inside a parallel region (OpenMP's or ct_cpu_parallel's): this thread's
 * number and the team's size; 0 and 1 outside one (threads.c). */
int ct_cpu_thread_num(void);
int ct_cpu_team_size(void);

/* fn(ctx) on a team of `threads` threads, the caller one of them, as
 * `#pragma omp parallel num_threads(threads)` would, on the pool of
 * threads.c (no system call where its workers are awake).  Inside fn,
 * ct_cpu_thread_num and ct_cpu_team_size give the thread's part, and
 * ct_cpu_barrier waits for the whole team.  Returns when every part has.
 * threads <= 1, or a call from inside a parallel region or while another
 * thread's call runs: fn runs on the caller alone (a team of one).  fn
 * must not open an OpenMP region: on a worker, OpenMP does not know it is
 * inside one and would start a whole team. */
void ct_cpu_parallel(int threads, void (*fn)(void *ctx), void *ctx);
/* Every thread of the team waits here for the others (ct_cpu_parallel's
 * team or an OpenMP region's). */
void ct_cpu_barrier(void);
/* Called before each OpenMP region cuttle opens (and each OpenBLAS call):
 * the pool's workers stop spinning, and for a while ct_cpu_parallel runs
 * its jobs as OpenMP regions too (threads.c says why). */
void ct_cpu_openmp_region(void);
/* This thread's share [first, last) of count items split evenly over the
 * team in order, as OpenMP's schedule(static) would give it. */
void ct_cpu_split(int64_t count, int64_t *first, int64_t *last);

static inline int ct_cpu_n_procs(void)
{
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

#endif
