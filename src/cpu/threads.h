/* OpenMP's thread controls, with single-threaded stand-ins for builds
 * without OpenMP (make OPENMP=0). */
#ifndef CT_CPU_THREADS_H
#define CT_CPU_THREADS_H

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

/* Inside a parallel region: this thread's number and the team's size. */
static inline int ct_cpu_thread_num(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int ct_cpu_team_size(void)
{
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static inline int ct_cpu_n_procs(void)
{
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

#endif
