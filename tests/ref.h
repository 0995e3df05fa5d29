/*
 * An independent double-precision reference of the forward pass of every op.
 *
 * Naive loops, one function per op, written from the math and PyTorch's
 * documented semantics rather than from cuttle's kernels, so that the tests
 * compare two implementations and not one with itself.  Tensors are
 * contiguous NCHW arrays of doubles; outputs are written with =.
 */
#ifndef CT_TESTS_REF_H
#define CT_TESTS_REF_H

#include <stdbool.h>
#include <stdint.h>

/* x: [n_batch, in_channels, in_h, in_w]
 * w: [out_channels, in_channels/groups, kernel_h, kernel_w] */
typedef struct ref_conv2d_shape {
    int n_batch, in_channels, in_h, in_w;
    int out_channels, kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dilation_h, dilation_w;
    int groups;
} ref_conv2d_shape;

/* (in + 2*pad - dilation*(kernel-1) - 1) / stride + 1 */
int ref_conv2d_out_size(int in, int kernel, int stride, int pad, int dilation);

/* y[n,o,h,w] = b[o] + sum_{c,i,j} x[n, g*C/G+c, h*s-p+i*d, w*s-p+j*d] * w[o,c,i,j],
 * g = o / (O/G).  bias may be NULL.  y: [N, O, OH, OW] */
void ref_conv2d(const ref_conv2d_shape *s, const double *x, const double *w,
                const double *bias, double *y);

/* y[n,o] = b[o] + sum_i x[n,i] w[o,i].  x: [n,in]  w: [out,in]  bias: [out] or NULL */
void ref_linear(int n, int in, int out, const double *x, const double *w, const double *bias,
                double *y);

/* x: [n_batch, channels, in_h, in_w] */
typedef struct ref_pool2d_shape {
    int n_batch, channels, in_h, in_w;
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    int pad_h, pad_w;
    bool exclude_pad; /* avgpool: count_include_pad=False */
} ref_pool2d_shape;

/* (in + 2*pad - kernel) / stride + 1  (floor mode, as PyTorch's default) */
int ref_pool2d_out_size(int in, int kernel, int stride, int pad);

/* y = max of the window's elements inside the image (padding never wins). */
void ref_maxpool2d(const ref_pool2d_shape *s, const double *x, double *y);
/* y = sum of the window's elements inside the image / divisor, where the
 * divisor is kernel_h*kernel_w, or the count of those elements if exclude_pad. */
void ref_avgpool2d(const ref_pool2d_shape *s, const double *x, double *y);
/* y[n,c] = mean_i x[n,c,i].  x: [n, c, inner] */
void ref_global_avgpool(int n, int c, int inner, const double *x, double *y);

void ref_relu(int64_t count, const double *x, double *y);    /* max(x, 0) */
void ref_sigmoid(int64_t count, const double *x, double *y); /* 1 / (1 + e^-x) */
void ref_tanh(int64_t count, const double *x, double *y);

/* Training mode, x: [n, c, inner], statistics over (n, inner), M = n*inner:
 *   y = (x - mean) / sqrt(var_biased + eps) * gamma + beta
 * and, when running_mean and running_var are not NULL, they become
 *   running = (1-momentum)*running + momentum*batch   (var unbiased: * M/(M-1)). */
void ref_batchnorm2d_train(int n, int c, int inner, const double *x, const double *gamma,
                           const double *beta, double eps, double momentum,
                           double *running_mean, double *running_var, double *y);
/* Evaluation mode: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta */
void ref_batchnorm2d_eval(int n, int c, int inner, const double *x, const double *gamma,
                          const double *beta, const double *running_mean,
                          const double *running_var, double eps, double *y);

/* y = keep[i] ? x[i] / (1-p) : 0 */
void ref_dropout(int64_t count, const double *x, const uint8_t *keep, double p, double *y);

/* y = a + b */
void ref_add(int64_t count, const double *a, const double *b, double *y);
/* Along dim 1 of [n, channels[k], inner] tensors: y: [n, sum channels, inner]. */
void ref_concat(int n, int inner, int n_inputs, const int *channels, const double *const *xs,
                double *y);

/* Over the rows of x: [n, c]: y[n,j] = e^x[n,j] / sum_k e^x[n,k] */
void ref_softmax(int n, int c, const double *x, double *y);
/* mean_n [ -(1-s) log p[n,label_n] - (s/c) sum_j log p[n,j] ],  p = softmax(logits),
 * s = label_smoothing (PyTorch's CrossEntropyLoss, reduction='mean'). */
double ref_cross_entropy(int n, int c, const double *logits, const int64_t *labels,
                         double label_smoothing);

#endif
