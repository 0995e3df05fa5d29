/*
 * Float <-> int8/uint8: the formats of int8.h.  Activations quantize on the
 * active path (vectors where the CPU has them, the same bits as the scalar
 * rule ct_int8_requantize); weights quantize once, at load, in plain C.
 * All outputs are written with =.
 */
#include <math.h>

#include "core/error.h"
#include "cpu/threads.h"
#include "quant/int8_paths.h"

enum {
    UINT8_LEVELS = 255, /* the steps of [0, 255] */
    INT8_LIMIT = 127,   /* weights use [-127, 127]: symmetric, no -128 */
    QUANTIZE_CHUNK = 1 << 16, /* elements per thread's piece of a quantize */
};

ct_status ct_quant_act_from_range(float lo, float hi, ct_quant_act *out)
{
    if (!isfinite(lo) || !isfinite(hi))
        return ct_set_error(CT_ERR_ARG, "quantization range [%g, %g]: bounds must be finite",
                            (double)lo, (double)hi);
    lo = lo < 0.0f ? lo : 0.0f;
    hi = hi > 0.0f ? hi : 0.0f;
    float scale = (hi - lo) / UINT8_LEVELS;
    /* empty, or so narrow that 1/scale would overflow: every value is ~0 */
    if (!(scale >= 1e-30f))
        scale = 1.0f;
    float zero = rintf(-lo / scale);
    out->scale = scale;
    out->zero_point = zero < 0.0f ? 0 : zero > UINT8_LEVELS ? UINT8_LEVELS : (int32_t)zero;
    return CT_OK;
}

static void quantize_scalar(int64_t count, const float *x, float inv_scale, int32_t zero_point,
                            uint8_t *q)
{
    for (int64_t i = 0; i < count; i++)
        q[i] = ct_int8_requantize(x[i], inv_scale, zero_point);
}

void ct_int8_quantize(int64_t count, const float *x, ct_quant_act p, uint8_t *q)
{
    const ct_int8_path_i *path = ct_int8_path(ct_int8_kernel_active());
    float inv_scale = 1.0f / p.scale;
    int64_t chunks = (count + QUANTIZE_CHUNK - 1) / QUANTIZE_CHUNK;
    ct_cpu_openmp_region();
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t chunk = 0; chunk < chunks; chunk++) {
        int64_t start = chunk * QUANTIZE_CHUNK;
        int64_t length = count - start < QUANTIZE_CHUNK ? count - start : QUANTIZE_CHUNK;
        if (path)
            path->quantize(length, x + start, inv_scale, p.zero_point, q + start);
        else
            quantize_scalar(length, x + start, inv_scale, p.zero_point, q + start);
    }
}

void ct_int8_dequantize(int64_t count, const uint8_t *q, ct_quant_act p, float *x)
{
    for (int64_t i = 0; i < count; i++)
        x[i] = (float)(q[i] - p.zero_point) * p.scale;
}

ct_status ct_int8_weights_quantize(int rows, int depth, const float *w, int8_t *q, float *scales)
{
    for (int m = 0; m < rows; m++) {
        const float *row = w + (size_t)m * depth;
        float max_abs = 0.0f;
        for (int k = 0; k < depth; k++) {
            if (!isfinite(row[k]))
                return ct_set_error(CT_ERR_ARG,
                                    "int8 weights: row %d holds %g at %d: only finite "
                                    "weights can be quantized",
                                    m, (double)row[k], k);
            max_abs = fabsf(row[k]) > max_abs ? fabsf(row[k]) : max_abs;
        }
        float scale = max_abs / INT8_LIMIT;
        /* an all-zero row (or one so small that its scale underflows) */
        scales[m] = scale > 0.0f ? scale : 1.0f;
        for (int k = 0; k < depth; k++) {
            float v = rintf(row[k] / scales[m]);
            v = v < -INT8_LIMIT ? -INT8_LIMIT : v > INT8_LIMIT ? INT8_LIMIT : v;
            q[(size_t)m * depth + k] = (int8_t)v;
        }
    }
    return CT_OK;
}

void ct_int8_weights_dequantize(int rows, int depth, const int8_t *q, const float *scales,
                                float *w)
{
    for (int m = 0; m < rows; m++)
        for (int k = 0; k < depth; k++)
            w[(size_t)m * depth + k] = (float)q[(size_t)m * depth + k] * scales[m];
}
