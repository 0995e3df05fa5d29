/* The weight gradient of a convolution whose output a relu and a 2x2/2 max
 * pool read, computed from the pool's gradient (src/cpu/conv_pooled.c). */
#ifndef CT_CPU_CONV_POOLED_H
#define CT_CPU_CONV_POOLED_H

#include <stdbool.h>
#include <stdint.h>

#include "core/shapes.h"

/* Beyond these the windows' list (two ints a window, per thread) or the
 * rows of sums grow past what one thread keeps on its stack. */
enum { CT_CONV_POOLED_MAX_WINDOWS = 4096, CT_CONV_POOLED_MAX_KERNEL_W = 8 };

/* Whether ct_cpu_conv2d_pooled_backward_weight computes this convolution's
 * weight gradient through this pool: stride 1, no padding or dilation, one
 * group, kernels at most 8 wide; the pool 2x2, stride 2, unpadded, over the
 * convolution's output. */
bool ct_cpu_conv2d_pooled_weight_fits(const ct_conv2d_shape *s, const ct_pool2d_shape *p);

/* dw = the weight gradient of the convolution s of x (and db, or NULL, its
 * bias gradient) where its output's gradient is the max pool p's backward
 * of dy (the pool's output gradient) over y (the pool's input, a relu's
 * output when relu: its backward too, ct_relu_grad of each window's max).
 * Only each window's argmax has a gradient, so each window adds
 *   dw[o,c,i,j] += g * x[n,c,a+i,b+j]   (a, b: the argmax's row, column)
 * a quarter of the dense weight gradient's work, and the pool's backward
 * never writes its N*O*H*W floats.  The batch is summed in up to 8 fixed
 * chunks (where their sums fit the stack; else whole), each chunk's sums
 * in the order of its images and windows, then the chunks' in order: the
 * same bits for any number of threads, with or without the AVX2 kernels.
 * codes: NULL, or
 * each window's argmax code (ct_cpu_maxpool2x2_planes_codes of y) stored
 * in y's place, and y is not read: the same argmaxes and gradients, the
 * same bits. */
void ct_cpu_conv2d_pooled_backward_weight(const ct_conv2d_shape *s, const ct_pool2d_shape *p,
                                          const float *x, const float *y,
                                          const uint8_t *codes, const float *dy, bool relu,
                                          float *dw, float *db);

#endif
