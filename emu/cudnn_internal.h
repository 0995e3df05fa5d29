/*
 * What the emulated cuDNN's files share (emu/cudnn.cpp: the library,
 * tensors and pooling; emu/cudnn_conv.cpp: convolutions; emu/cudnn_math.cpp:
 * the reference computations): the structs behind cudnn.h's handles, the
 * failure message, and the shapes the computations take.  C++ only; not
 * part of cuttle's API.
 */
#ifndef CT_EMU_CUDNN_INTERNAL_H
#define CT_EMU_CUDNN_INTERNAL_H

#include <cstddef>
#include <new>

#include "cudnn.h"
#include "emu.h"

struct cudnnContext {
    cudaStream_t stream;
};

struct cudnnTensorStruct {
    bool set;
    int n, c, h, w;
    cudnnDataType_t type; /* FLOAT, HALF or BFLOAT16 */
};

struct cudnnFilterStruct {
    bool set;
    int k, c, h, w;
    cudnnDataType_t type;
};

struct cudnnConvolutionStruct {
    bool set;
    int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w;
    cudnnConvolutionMode_t mode;
    int groups = 1;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

struct cudnnPoolingStruct {
    bool set;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int window_h, window_w, pad_h, pad_w, stride_h, stride_w;
};

namespace emu_dnn {

/* Say on stderr why a call failed (the status alone rarely names the
 * argument); returns `status`. */
__attribute__((format(printf, 3, 4))) cudnnStatus_t reject(cudnnStatus_t status,
                                                            const char *function,
                                                            const char *format, ...);

/* Whether [ptr, ptr + count elements of `type`) is device memory; says why not. */
bool device_elements(const char *fn, const char *name, const void *ptr, size_t count,
                     cudnnDataType_t type);
inline bool device_floats(const char *fn, const char *name, const void *ptr, size_t count)
{
    return device_elements(fn, name, ptr, count, CUDNN_DATA_FLOAT);
}

/* The bytes of one element of a data type the emulator computes. */
inline size_t element_bytes(cudnnDataType_t type)
{
    return type == CUDNN_DATA_FLOAT ? 4 : 2;
}

/* 1 + (in + 2 pad - dilated kernel) / stride, or 0 when the kernel does not fit. */
inline int output_dim(int in, int pad, int kernel, int dilation, int stride)
{
    int span = in + 2 * pad - ((kernel - 1) * dilation + 1);
    return span < 0 ? 0 : 1 + span / stride;
}

/* A new descriptor or handle, zeroed but for its defaults. */
template <typename T> cudnnStatus_t create(const char *fn, T **out)
{
    if (!out)
        return reject(CUDNN_STATUS_BAD_PARAM, fn, "descriptor pointer is NULL");
    *out = new (std::nothrow) T{};
    return *out ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
}


/* One convolution's geometry, copied out of its descriptors: x [n,c,h,w],
 * w [k, c/groups, r, s], y [n,k,out_h,out_w]. */
struct conv_shape {
    int n, c, h, w, k, r, s, out_h, out_w;
    int pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, groups;
    bool flip; /* CUDNN_CONVOLUTION: the filter is applied flipped */
    bool tf32; /* inputs rounded to TF32 (set per call, from the algorithm) */
    cudnnDataType_t type; /* of x, w and y (dx, dw): FLOAT, HALF or BFLOAT16 */

    int group_in() const { return c / groups; }
    int group_out() const { return k / groups; }
    size_t x_count() const { return (size_t)n * c * h * w; }
    size_t w_count() const { return (size_t)k * group_in() * r * s; }
    size_t y_count() const { return (size_t)n * k * out_h * out_w; }
    size_t plane_out() const { return (size_t)out_h * out_w; }
    size_t taps() const { return (size_t)group_in() * r * s; } /* rows of the column matrix */
    size_t x_at(int b, int ch, int ih, int iw) const
    {
        return (((size_t)b * c + ch) * h + ih) * w + iw;
    }
    size_t y_at(int b, int ch) const { return ((size_t)b * k + ch) * plane_out(); }
    /* w's index of filter tap (i, j) of output channel kk, input channel ch of its group */
    size_t w_at(int kk, int ch, int i, int j) const
    {
        if (flip) {
            i = r - 1 - i;
            j = s - 1 - j;
        }
        return (((size_t)kk * group_in() + ch) * r + i) * s + j;
    }
    float load(float v) const { return tf32 ? emu::tf32_round(v) : v; }
};

/* The arguments of one queued convolution (pointers and scalars, by value). */
struct conv_data {
    const float *x, *w, *dy; /* the two inputs of each kind; the third is NULL */
    float *out;              /* y, dx or dw */
    float *workspace;
    float alpha, beta;
};

/* The reference computations (emu/cudnn_math.cpp), each the whole
 * convolution of its kind; the _column ones use d.workspace, which holds
 * taps() x plane_out() floats.  Host scratch may throw std::bad_alloc. */
void forward_direct(const conv_shape &s, const conv_data &d);
void forward_column(const conv_shape &s, const conv_data &d);
void backward_data_direct(const conv_shape &s, const conv_data &d);
void backward_data_column(const conv_shape &s, const conv_data &d);
void backward_filter_direct(const conv_shape &s, const conv_data &d);
void backward_filter_column(const conv_shape &s, const conv_data &d);

/* One pooling's geometry and rule: x [planes,h,w], y [planes,out_h,out_w]. */
struct pool_shape {
    int planes, h, w, out_h, out_w;
    int window_h, window_w, pad_h, pad_w, stride_h, stride_w;
    bool is_max, include_padding, propagate_nan;
};

void pooling_forward(const pool_shape &s, const float *x, float *y, float alpha, float beta);

} // namespace emu_dnn

#endif
