/* The CPU backend (cpu/backend.c), for the device list (src/devices/). */
#ifndef CT_CPU_BACKEND_H
#define CT_CPU_BACKEND_H

#include "cuttle.h"
#include "graph/backend.h"

/* The CPU backend with n_threads threads (0: all cores). */
ct_status ct_cpu_backend_new(int n_threads, ct_backend **out);

/* Its op table (cpu/table.c; graph/impl.h). */
/* Runs `impl` on f32 copies of the node's f16 and bf16 tensors, rounding
 * its 16-bit outputs back (cpu/widen.c). */
ct_status ct_cpu_run_widened(ct_backend *backend, const ct_exec *exec, const ct_tensor *node,
                             const ct_impl *impl);
extern const ct_impl *const ct_cpu_impls[CT_OP_COUNT][CT_MAX_IMPLS];
/* The training step's own ops (cpu/table_step.c). */
extern const ct_impl ct_cpu_fill_impl, ct_cpu_check_finite_impl;
/* The value a fill node writes this step: its value, times the step's loss
 * scale where it seeds a scaled loss's gradient. */
float ct_cpu_fill_value(const ct_exec *exec, const ct_tensor *fill);
extern const ct_impl ct_cpu_sgd_update_impl, ct_cpu_adam_update_impl;
/* The INT8 ops (cpu/quant.c). */
extern const ct_impl ct_cpu_qconv2d, ct_cpu_qlinear;

#endif
