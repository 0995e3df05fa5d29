/*
 * ct_divmod (src/cuda/divmod.cuh): x / d and x % d by a multiply-high, an
 * add and a shift give exactly what / and % give, for every divisor the
 * convolutions use and at the ends of the range (0, 2^31 - 1), on the host
 * and in a kernel on the emulated device (the .cu tests build there only;
 * a GPU runs the same code in every convolution test).
 */
#include <stdint.h>
#include <string.h>

extern "C" {
#include "harness.h"
}
#include "cuda/divmod.cuh"

enum { SAMPLES = 64 };

/* The dividends checked for every divisor: the ends, around multiples of d
 * (where a wrong multiplier first shows), and a spread between. */
static void dividends(int d, int *x)
{
    const int top = 0x7fffffff;
    int n = 0;
    x[n++] = 0;
    x[n++] = 1;
    x[n++] = top;
    x[n++] = top - 1;
    x[n++] = d - 1;
    x[n++] = d;
    x[n++] = d < top ? d + 1 : d;
    int64_t high = (int64_t)top / d * d; /* the largest multiple of d */
    x[n++] = (int)high;
    x[n++] = (int)(high - 1);
    uint32_t state = 2654435761u * (uint32_t)d;
    while (n < SAMPLES) {
        state = state * 1664525u + 1013904223u;
        x[n++] = (int)(state >> 1);
    }
}

static int next_divisor(int d)
{
    return d < 4096 ? d + 1 : d < 0x40000000 ? d + d / 3 + 1 : 0x7fffffff;
}

static void host_quotients_are_exact(void)
{
    int x[SAMPLES], wrong = 0, checked = 0;
    for (int d = 1; d > 0 && wrong < 5; d = d == 0x7fffffff ? -1 : next_divisor(d)) {
        ct_divmod f = ct_divmod_of(d);
        dividends(d, x);
        for (int i = 0; i < SAMPLES; i++, checked++)
            if (ct_div(f, x[i]) != x[i] / d || ct_mod(f, x[i]) != x[i] % d) {
                CHECK(0, "%d / %d: %d rem %d, want %d rem %d", x[i], d, ct_div(f, x[i]),
                      ct_mod(f, x[i]), x[i] / d, x[i] % d);
                wrong++;
            }
    }
    CHECK(checked > 4096 * SAMPLES, "%d quotients checked", checked);
}

static __global__ void divide_all(ct_divmod f, const int *x, int *q, int *r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = ct_div(f, x[i]);
        r[i] = ct_mod(f, x[i]);
    }
}

static void device_quotients_are_exact(void)
{
    static const int divisors[] = {1, 2, 3, 5, 7, 12, 24, 25, 49, 144, 196, 576, 1000, 4095,
                                   65537, 1 << 20, 0x7ffffffe, 0x7fffffff};
    int x[SAMPLES], q[SAMPLES], r[SAMPLES], *dx = NULL, *dq = NULL, *dr = NULL;
    CHECK(cudaMalloc((void **)&dx, sizeof x) == cudaSuccess &&
              cudaMalloc((void **)&dq, sizeof q) == cudaSuccess &&
              cudaMalloc((void **)&dr, sizeof r) == cudaSuccess,
          "cudaMalloc");
    for (size_t k = 0; k < sizeof divisors / sizeof divisors[0]; k++) {
        int d = divisors[k];
        dividends(d, x);
        CHECK(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice) == cudaSuccess, "copy in");
        CT_EMU_LAUNCH(divide_all, 1, SAMPLES, 0, 0, ct_divmod_of(d), dx, dq, dr, (int)SAMPLES);
        CHECK(cudaMemcpy(q, dq, sizeof q, cudaMemcpyDeviceToHost) == cudaSuccess &&
                  cudaMemcpy(r, dr, sizeof r, cudaMemcpyDeviceToHost) == cudaSuccess,
              "copy out");
        for (int i = 0; i < SAMPLES; i++)
            CHECK(q[i] == x[i] / d && r[i] == x[i] % d, "device: %d / %d: %d rem %d", x[i], d,
                  q[i], r[i]);
    }
    cudaFree(dx);
    cudaFree(dq);
    cudaFree(dr);
}

int main(void)
{
    RUN(host_quotients_are_exact);
    RUN(device_quotients_are_exact);
    return harness_finish();
}
