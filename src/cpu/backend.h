/* The CPU backend (cpu/backend.c), for the device list (src/devices/). */
#ifndef CT_CPU_BACKEND_H
#define CT_CPU_BACKEND_H

#include "cuttle.h"
#include "graph/backend.h"

/* The CPU backend with n_threads threads (0: all cores). */
ct_status ct_cpu_backend_new(int n_threads, ct_backend **out);

/* Its op table (cpu/table.c; graph/impl.h). */
extern const ct_impl *const ct_cpu_impls[CT_OP_COUNT][CT_MAX_IMPLS];

#endif
