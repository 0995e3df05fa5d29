/*
 * INT8 kernels for post-training quantization (docs/quantization.md).
 *
 * Formats:
 *   weights      int8 in [-127, 127], symmetric, one scale per output channel:
 *                w[m, k] ~ q[m, k] * w_scale[m],  w_scale[m] = max_k |w[m, k]| / 127
 *                (an all-zero channel gets scale 1: its q are all 0).
 *   activations  uint8 in [0, 255], asymmetric, one scale and zero point per tensor:
 *                x ~ (q - zero_point) * scale.  u8 is what vpdpbusd and vpmaddubsw
 *                take as their unsigned operand; a zero point lets a ReLU output
 *                use all 256 levels.
 *
 * The GEMM computes, for m in [0, rows), n in [0, n):
 *   acc[m, n] = sum_k w[m, k] * (b[k, n] - b_zp)            (int32, exact)
 *   v         = (float)acc[m, n] * (b_scale * w_scale[m]) + bias[m]
 *   v         = relu ? (v < 0 ? 0 : v) : v                   (NaN kept)
 *   out[m, n] = v  (float32), or ct_int8_requantize(v, out_q) (uint8)
 * with every float operation in that order, one rounding each (no fused
 * multiply-add), so that every path gives the same bits.  The int32 sum is
 * exact for depth <= CT_INT8_MAX_DEPTH.
 *
 * Paths: a portable C reference, AVX2 (operands widened to int16, vpmaddwd:
 * exact, where vpmaddubsw would saturate) and AVX-512 VNNI (vpdpbusd).  The
 * path is chosen when the weights are packed; results are the same bits in
 * every path and for every thread count.
 */
#ifndef CT_QUANT_INT8_H
#define CT_QUANT_INT8_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "core/shapes.h"
#include "cuttle.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The longest dot product whose int32 sum cannot overflow:
 * 255 * 127 * 65536 < 2^31. */
enum { CT_INT8_MAX_DEPTH = 65536 };

/* Where the clamp before rounding sits: beyond it every value saturates to
 * 0 or 255 whatever the zero point, and the float -> int conversion stays
 * defined (NaN clamps to the low end: it quantizes to 0). */
#define CT_INT8_QUANT_CLAMP 512.0f

/* ---- paths ------------------------------------------------------------------ */

typedef enum ct_int8_kernel {
    CT_INT8_AUTO = -1, /* the best the CPU has */
    CT_INT8_REF = 0,   /* portable C */
    CT_INT8_AVX2,      /* AVX2: int16 operands, vpmaddwd */
    CT_INT8_VNNI,      /* AVX-512 VNNI: vpdpbusd */
    CT_INT8_KERNEL_COUNT
} ct_int8_kernel;

/* "ref", "avx2", "vnni" ("auto" for CT_INT8_AUTO). */
const char *ct_int8_kernel_name(ct_int8_kernel kernel);
/* True when this build and this CPU can run the path. */
bool ct_int8_kernel_supported(ct_int8_kernel kernel);
/* The path new weights are packed for (and ct_int8_quantize uses): the one
 * set by ct_int8_kernel_set, else CT_INT8_KERNEL=ref|avx2|vnni from the
 * environment, else the best supported.  An environment value that names an
 * unknown or unsupported path is ignored (ct_int8_kernel_name of the result
 * says what runs). */
ct_int8_kernel ct_int8_kernel_active(void);
/* Force a path (CT_INT8_AUTO: back to the environment and CPUID), for tests
 * and measurements.  CT_ERR_UNSUPPORTED when the CPU or build lacks it. */
ct_status ct_int8_kernel_set(ct_int8_kernel kernel);

/* ---- quantization --------------------------------------------------------- */

/* A uint8 tensor's parameters: x ~ (q - zero_point) * scale. */
typedef struct ct_quant_act {
    float scale;        /* > 0, finite */
    int32_t zero_point; /* [0, 255] */
} ct_quant_act;

/* The parameters that cover [min(lo, 0), max(hi, 0)] (0 is exact): scale =
 * (hi - lo) / 255, zero_point = round(-lo / scale).  An empty range gets scale
 * 1.  CT_ERR_ARG for NaN or infinite bounds. */
ct_status ct_quant_act_from_range(float lo, float hi, ct_quant_act *out);

/* a * b, rounded once and never fused with an add that follows: nvcc fuses
 * across statements unless told (__fmul_rn); C compilers here do not fuse
 * (GCC in ISO mode; clang only within one expression). */
static inline CT_HD float ct_int8_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/* q = clamp(rint(clamp(v * inv_scale, -512, 512)) + zero_point, 0, 255), with
 * inv_scale = 1.0f / scale rounded to float, and rint to nearest, ties to
 * even.  The one rule of every path (activations and requantized outputs,
 * CPU and GPU). */
static inline CT_HD uint8_t ct_int8_requantize(float v, float inv_scale, int32_t zero_point)
{
    float t = ct_int8_mul(v, inv_scale);
    t = t > -CT_INT8_QUANT_CLAMP ? t : -CT_INT8_QUANT_CLAMP; /* NaN -> low end */
    t = t < CT_INT8_QUANT_CLAMP ? t : CT_INT8_QUANT_CLAMP;
    int32_t q = (int32_t)rintf(t) + zero_point;
    return (uint8_t)(q < 0 ? 0 : q > 255 ? 255 : q);
}

/* The float epilogue of one exact sum, sum = sum_k w[m,k] * (b[k,n] - b_zp):
 * v = (float)sum * scale + bias (scale = b_scale * w_scale[m]), then relu
 * (v < 0 ? 0 : v, NaN kept).  Two roundings after the conversion, no fused
 * multiply-add: the rule of every path. */
static inline CT_HD float ct_int8_dequantize_sum(int32_t sum, float scale, float bias, bool relu)
{
    float v = ct_int8_mul((float)sum, scale) + bias;
    return relu && v < 0.0f ? 0.0f : v;
}

/* q[i] = ct_int8_requantize(x[i], 1 / p.scale, p.zero_point), vectorized
 * on the active path (the same bits on every path). */
void ct_int8_quantize(int64_t count, const float *x, ct_quant_act p, uint8_t *q);
/* x[i] = (q[i] - zero_point) * scale */
void ct_int8_dequantize(int64_t count, const uint8_t *q, ct_quant_act p, float *x);

/* Symmetric per-row quantization of w: [rows, depth]:
 * scales[m] = max_k |w[m, k]| / 127 (1 for an all-zero row),
 * q[m, k] = clamp(rint(w[m, k] / scales[m]), -127, 127).
 * CT_ERR_ARG (naming the row) for a NaN or infinite weight; q and scales
 * are then unspecified. */
ct_status ct_int8_weights_quantize(int rows, int depth, const float *w, int8_t *q, float *scales);
/* w[m, k] = q[m, k] * scales[m] */
void ct_int8_weights_dequantize(int rows, int depth, const int8_t *q, const float *scales,
                                float *w);

/* ---- packed weights --------------------------------------------------------- */

/* Quantized weights in the layout of one path, packed once at load. */
typedef struct ct_int8_weights {
    ct_int8_kernel kernel; /* the path whose layout `packed` is */
    int rows, depth;       /* [rows = output channels, depth = K] */
    float *scales;         /* [rows] w_scale */
    int32_t *row_sums;     /* [rows] sum_k q[m, k]: the zero-point correction */
    void *packed;          /* the path's panels (docs/quantization.md) */
    int8_t *values;        /* [rows, depth] q as given, row-major: what a saved model and
                              an ONNX export hold */
} ct_int8_weights;

/* Packs q: [rows, depth] with scales: [rows] for the active path (and
 * keeps a copy of q as given).
 * CT_ERR_ARG for a bad size (depth above CT_INT8_MAX_DEPTH), CT_ERR_MEMORY. */
ct_status ct_int8_weights_pack(int rows, int depth, const int8_t *q, const float *scales,
                               ct_int8_weights **out);
/* Accepts NULL. */
void ct_int8_weights_free(ct_int8_weights *w);

/* ---- GEMM, convolution, linear --------------------------------------------- */

/* What follows the int32 sum (see the top of the file). */
typedef struct ct_int8_epilogue {
    const float *bias; /* [rows] or NULL */
    bool relu;
    bool out_u8;       /* false: float32 out; true: uint8 quantized with out_q */
    ct_quant_act out_q;
} ct_int8_epilogue;

/* A matrix in memory: element (i, j) at data[i * row_stride + j * col_stride]
 * (in elements of its type). */
typedef struct ct_int8_matrix {
    void *data;
    ptrdiff_t row_stride, col_stride;
} ct_int8_matrix;

/* out[m, n] = epilogue(sum_k w[m, k] * (b[k, n] - b_q.zero_point)) for
 * b: uint8 [depth, n] and out: [rows, n] (float or uint8 by e->out_u8),
 * on the path w was packed for.  workspace: ct_int8_gemm_workspace bytes. */
size_t ct_int8_gemm_workspace(const ct_int8_weights *w, int n);
void ct_int8_gemm(const ct_int8_weights *w, int n, ct_int8_matrix b, ct_quant_act b_q,
                  const ct_int8_epilogue *e, ct_int8_matrix out, void *workspace);

/* y[n,o,h,w] = epilogue(sum_{c,i,j} w[o,c,i,j] * (x[n, c, h*sh-ph+i*dh, w*sw-pw+j*dw] - x_zp))
 * x: uint8 [N, C, H, W], padding reads as x_q.zero_point (the real 0);
 * w packed from [O, C*KH*KW]; y: [N, O, out_h, out_w] (float or uint8).
 * groups must be 1.  threads: the most OpenMP threads it may use (the
 * workspace holds one slot per thread where threads take whole images);
 * forward takes the same count its workspace was sized for. */
size_t ct_int8_conv2d_workspace(const ct_conv2d_shape *s, const ct_int8_weights *w, int threads);
void ct_int8_conv2d_forward(const ct_conv2d_shape *s, const uint8_t *x, ct_quant_act x_q,
                            const ct_int8_weights *w, const ct_int8_epilogue *e, void *y,
                            void *workspace, int threads);

/* y[n, o] = epilogue(sum_i w[o, i] * (x[n, i] - x_zp));  x: uint8 [n, in],
 * w packed from [out, in], y: [n, out].  workspace: ct_int8_linear_workspace. */
size_t ct_int8_linear_workspace(int n, const ct_int8_weights *w);
void ct_int8_linear_forward(int n, const uint8_t *x, ct_quant_act x_q, const ct_int8_weights *w,
                            const ct_int8_epilogue *e, void *y, void *workspace);

#ifdef __cplusplus
}
#endif

#endif
