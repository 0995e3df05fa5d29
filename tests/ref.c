/*
 * The double-precision reference forward of every op (see ref.h).  Clarity
 * over speed: each output element is computed on its own from the formula.
 */
#include "ref.h"

#include <math.h>

int ref_conv2d_out_size(int in, int kernel, int stride, int pad, int dilation)
{
    return (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1;
}

void ref_conv2d(const ref_conv2d_shape *s, const double *x, const double *w,
                const double *bias, double *y)
{
    int out_h = ref_conv2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h, s->dilation_h);
    int out_w = ref_conv2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w, s->dilation_w);
    int group_in = s->in_channels / s->groups;
    int group_out = s->out_channels / s->groups;
    for (int n = 0; n < s->n_batch; n++)
        for (int o = 0; o < s->out_channels; o++) {
            int group = o / group_out;
            for (int oh = 0; oh < out_h; oh++)
                for (int ow = 0; ow < out_w; ow++) {
                    double sum = bias ? bias[o] : 0.0;
                    for (int c = 0; c < group_in; c++)
                        for (int i = 0; i < s->kernel_h; i++) {
                            int ih = oh * s->stride_h - s->pad_h + i * s->dilation_h;
                            if (ih < 0 || ih >= s->in_h)
                                continue;
                            int in_c = group * group_in + c;
                            const double *x_row =
                                x + (((int64_t)n * s->in_channels + in_c) * s->in_h + ih) * s->in_w;
                            const double *w_row =
                                w + (((int64_t)o * group_in + c) * s->kernel_h + i) * s->kernel_w;
                            for (int j = 0; j < s->kernel_w; j++) {
                                int iw = ow * s->stride_w - s->pad_w + j * s->dilation_w;
                                if (iw >= 0 && iw < s->in_w)
                                    sum += x_row[iw] * w_row[j];
                            }
                        }
                    y[(((int64_t)n * s->out_channels + o) * out_h + oh) * out_w + ow] = sum;
                }
        }
}

void ref_linear(int n, int in, int out, const double *x, const double *w, const double *bias,
                double *y)
{
    for (int b = 0; b < n; b++)
        for (int o = 0; o < out; o++) {
            double sum = bias ? bias[o] : 0.0;
            for (int i = 0; i < in; i++)
                sum += x[(int64_t)b * in + i] * w[(int64_t)o * in + i];
            y[(int64_t)b * out + o] = sum;
        }
}

int ref_pool2d_out_size(int in, int kernel, int stride, int pad)
{
    return (in + 2 * pad - kernel) / stride + 1;
}

/* Visits the window of output (oh, ow) of plane x: [in_h, in_w]: the max (or
 * sum) of its elements inside the image and how many there are. */
static void pool_window(const ref_pool2d_shape *s, const double *plane, int oh, int ow,
                        double *max, double *sum, int *count)
{
    *max = -INFINITY;
    *sum = 0.0;
    *count = 0;
    for (int i = 0; i < s->kernel_h; i++)
        for (int j = 0; j < s->kernel_w; j++) {
            int ih = oh * s->stride_h - s->pad_h + i;
            int iw = ow * s->stride_w - s->pad_w + j;
            if (ih < 0 || ih >= s->in_h || iw < 0 || iw >= s->in_w)
                continue;
            double v = plane[(int64_t)ih * s->in_w + iw];
            if (v > *max)
                *max = v;
            *sum += v;
            (*count)++;
        }
}

void ref_maxpool2d(const ref_pool2d_shape *s, const double *x, double *y)
{
    int out_h = ref_pool2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h);
    int out_w = ref_pool2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w);
    for (int64_t plane = 0; plane < (int64_t)s->n_batch * s->channels; plane++)
        for (int oh = 0; oh < out_h; oh++)
            for (int ow = 0; ow < out_w; ow++) {
                double max, sum;
                int count;
                pool_window(s, x + plane * s->in_h * s->in_w, oh, ow, &max, &sum, &count);
                y[(plane * out_h + oh) * out_w + ow] = max;
            }
}

void ref_avgpool2d(const ref_pool2d_shape *s, const double *x, double *y)
{
    int out_h = ref_pool2d_out_size(s->in_h, s->kernel_h, s->stride_h, s->pad_h);
    int out_w = ref_pool2d_out_size(s->in_w, s->kernel_w, s->stride_w, s->pad_w);
    for (int64_t plane = 0; plane < (int64_t)s->n_batch * s->channels; plane++)
        for (int oh = 0; oh < out_h; oh++)
            for (int ow = 0; ow < out_w; ow++) {
                double max, sum;
                int count;
                pool_window(s, x + plane * s->in_h * s->in_w, oh, ow, &max, &sum, &count);
                /* In floor mode a window never reaches past the padding, so
                 * with count_include_pad the divisor is the whole kernel. */
                int divisor = s->exclude_pad ? count : s->kernel_h * s->kernel_w;
                y[(plane * out_h + oh) * out_w + ow] = sum / divisor;
            }
}

void ref_global_avgpool(int n, int c, int inner, const double *x, double *y)
{
    for (int64_t plane = 0; plane < (int64_t)n * c; plane++) {
        double sum = 0.0;
        for (int i = 0; i < inner; i++)
            sum += x[plane * inner + i];
        y[plane] = sum / inner;
    }
}

void ref_relu(int64_t count, const double *x, double *y)
{
    for (int64_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0 ? x[i] : 0.0;
}

void ref_sigmoid(int64_t count, const double *x, double *y)
{
    for (int64_t i = 0; i < count; i++)
        y[i] = 1.0 / (1.0 + exp(-x[i]));
}

void ref_tanh(int64_t count, const double *x, double *y)
{
    for (int64_t i = 0; i < count; i++)
        y[i] = tanh(x[i]);
}

void ref_batchnorm2d_train(int n, int c, int inner, const double *x, const double *gamma,
                           const double *beta, double eps, double momentum,
                           double *running_mean, double *running_var, double *y)
{
    int64_t m = (int64_t)n * inner;
    for (int ch = 0; ch < c; ch++) {
        double sum = 0.0;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++)
                sum += x[((int64_t)b * c + ch) * inner + i];
        double mean = sum / m;
        double square_sum = 0.0;
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++) {
                double centered = x[((int64_t)b * c + ch) * inner + i] - mean;
                square_sum += centered * centered;
            }
        double var_biased = square_sum / m;
        double invstd = 1.0 / sqrt(var_biased + eps);
        for (int b = 0; b < n; b++)
            for (int i = 0; i < inner; i++) {
                int64_t at = ((int64_t)b * c + ch) * inner + i;
                y[at] = (x[at] - mean) * invstd * gamma[ch] + beta[ch];
            }
        if (running_mean && running_var) {
            double var_unbiased = m > 1 ? square_sum / (m - 1) : var_biased;
            running_mean[ch] = (1.0 - momentum) * running_mean[ch] + momentum * mean;
            running_var[ch] = (1.0 - momentum) * running_var[ch] + momentum * var_unbiased;
        }
    }
}

void ref_batchnorm2d_eval(int n, int c, int inner, const double *x, const double *gamma,
                          const double *beta, const double *running_mean,
                          const double *running_var, double eps, double *y)
{
    for (int b = 0; b < n; b++)
        for (int ch = 0; ch < c; ch++) {
            double invstd = 1.0 / sqrt(running_var[ch] + eps);
            for (int i = 0; i < inner; i++) {
                int64_t at = ((int64_t)b * c + ch) * inner + i;
                y[at] = (x[at] - running_mean[ch]) * invstd * gamma[ch] + beta[ch];
            }
        }
}

void ref_dropout(int64_t count, const double *x, const uint8_t *keep, double p, double *y)
{
    for (int64_t i = 0; i < count; i++)
        y[i] = keep[i] ? x[i] / (1.0 - p) : 0.0;
}

void ref_add(int64_t count, const double *a, const double *b, double *y)
{
    for (int64_t i = 0; i < count; i++)
        y[i] = a[i] + b[i];
}

void ref_concat(int n, int inner, int n_inputs, const int *channels, const double *const *xs,
                double *y)
{
    int total = 0;
    for (int k = 0; k < n_inputs; k++)
        total += channels[k];
    for (int b = 0; b < n; b++) {
        int offset = 0;
        for (int k = 0; k < n_inputs; k++) {
            for (int ch = 0; ch < channels[k]; ch++)
                for (int i = 0; i < inner; i++)
                    y[((int64_t)b * total + offset + ch) * inner + i] =
                        xs[k][((int64_t)b * channels[k] + ch) * inner + i];
            offset += channels[k];
        }
    }
}

/* log sum_j e^row[j], shifted by the max so that nothing overflows. */
static double log_sum_exp(int c, const double *row)
{
    double max = row[0];
    for (int j = 1; j < c; j++)
        if (row[j] > max)
            max = row[j];
    double sum = 0.0;
    for (int j = 0; j < c; j++)
        sum += exp(row[j] - max);
    return max + log(sum);
}

void ref_softmax(int n, int c, const double *x, double *y)
{
    for (int b = 0; b < n; b++) {
        const double *row = x + (int64_t)b * c;
        double lse = log_sum_exp(c, row);
        for (int j = 0; j < c; j++)
            y[(int64_t)b * c + j] = exp(row[j] - lse);
    }
}

double ref_cross_entropy(int n, int c, const double *logits, const int64_t *labels,
                         double label_smoothing)
{
    double total = 0.0;
    for (int b = 0; b < n; b++) {
        const double *row = logits + (int64_t)b * c;
        double lse = log_sum_exp(c, row);
        double sum_log_p = 0.0;
        for (int j = 0; j < c; j++)
            sum_log_p += row[j] - lse;
        double log_p_label = row[labels[b]] - lse;
        total += -(1.0 - label_smoothing) * log_p_label - label_smoothing / c * sum_log_p;
    }
    return total / n;
}
