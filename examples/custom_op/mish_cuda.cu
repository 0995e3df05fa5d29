/* Mish's CUDA kernels: one thread per element, the CPU kernels' math. */
#include "cuttle.h"
#include "cuttle_cuda.h"
#include "mish.h"

static __device__ float mish_softplus(float x)
{
    return x > 20.0f ? x : log1pf(expf(x));
}

static __global__ void mish_forward_kernel(int64_t n, const float *x, float *y)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] * tanhf(mish_softplus(x[i]));
}

static __global__ void mish_backward_kernel(int64_t n, const float *x, const float *dy, float *dx)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float t = tanhf(mish_softplus(x[i])), sigmoid = 1.0f / (1.0f + expf(-x[i]));
        dx[i] = dy[i] * (t + x[i] * (1.0f - t * t) * sigmoid);
    }
}

static unsigned blocks_for(int64_t n)
{
    int64_t blocks = (n + 255) / 256;
    return (unsigned)(blocks < 1024 ? (blocks > 0 ? blocks : 1) : 1024);
}

extern "C" ct_status mish_cuda_forward(const ct_custom_call *call)
{
    return CT_LAUNCH(mish_forward_kernel, blocks_for(call->out_numel), 256, 0, call->stream,
                     call->out_numel, call->inputs[0], call->out);
}

extern "C" ct_status mish_cuda_backward(const ct_custom_call *call)
{
    return CT_LAUNCH(mish_backward_kernel, blocks_for(call->out_numel), 256, 0, call->stream,
                     call->out_numel, call->inputs[0], call->dy, call->out);
}
