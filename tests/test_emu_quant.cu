/*
 * The GPU's INT8 kernels (src/cuda/quant.cu, __dp4a) against the CPU's
 * reference path (src/quant/), bit for bit: GEMMs on edge and random shapes
 * (depth not a multiple of 4 or of the 8-word tile, rows and columns 1, odd,
 * one past a 64 tile), strided and transposed operands, extreme values
 * (weights -128/127, activations 0/255, zero points 0 and 255, all-max rows
 * at depth 4608), float and uint8 output, relu on and off; convolutions
 * (3x3 pad 1, stride 2, 1x1, dilation, batch > 1) where the padding must
 * read as the zero point.  Built only with `make CUDA=emu`.
 */
#include <string.h>

#include "core/window_math.h"
#include "cuda/kernels.h"

extern "C" {
#include "harness.h"
}

enum { POISON = 0xA5 };

static uint64_t rng_state = 1;

static int rng_int(int lo, int hi) /* [lo, hi] */
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int)((uint32_t)(rng_state >> 33) % (uint32_t)(hi - lo + 1));
}

template <class T>
static T *upload(const T *host, size_t count)
{
    T *dev = NULL;
    CHECK(cudaMalloc((void **)&dev, sizeof(T) * (count ? count : 1)) == cudaSuccess, "cudaMalloc");
    if (count)
        CHECK(cudaMemcpy(dev, host, sizeof(T) * count, cudaMemcpyHostToDevice) == cudaSuccess,
              "upload");
    return dev;
}

/* A layer's quantized weights on both sides: the CPU's reference packing
 * and the GPU's padded rows. */
typedef struct layer_weights {
    ct_int8_weights *cpu;
    ct_cuda_int8_weights gpu;
    float *bias_dev;
} layer_weights;

static void weights_new(layer_weights *lw, int rows, int depth, const int8_t *q,
                        const float *scales, const float *bias)
{
    CHECK_OK(ct_int8_kernel_set(CT_INT8_REF));
    CHECK_OK(ct_int8_weights_pack(rows, depth, q, scales, &lw->cpu));
    CHECK_OK(ct_int8_kernel_set(CT_INT8_AUTO));
    int row_bytes = ct_cuda_int8_row_bytes(depth);
    int8_t *padded = (int8_t *)calloc((size_t)rows * row_bytes, 1);
    for (int m = 0; m < rows; m++)
        memcpy(padded + (size_t)m * row_bytes, q + (size_t)m * depth, depth);
    lw->gpu.rows = rows;
    lw->gpu.depth = depth;
    lw->gpu.q = upload(padded, (size_t)rows * row_bytes);
    lw->gpu.scales = upload(scales, rows);
    lw->gpu.row_sums = upload(lw->cpu->row_sums, rows);
    lw->bias_dev = upload(bias, rows);
    free(padded);
}

static void weights_free(layer_weights *lw)
{
    ct_int8_weights_free(lw->cpu);
    cudaFree((void *)lw->gpu.q);
    cudaFree((void *)lw->gpu.scales);
    cudaFree((void *)lw->gpu.row_sums);
    cudaFree(lw->bias_dev);
}

static void fill_case(int rows, int depth, int extreme, int8_t *q, float *scales, float *bias)
{
    for (size_t i = 0; i < (size_t)rows * depth; i++)
        q[i] = extreme == 2 ? 127 : extreme && rng_int(0, 1) ? (rng_int(0, 1) ? 127 : -128)
                                                       : (int8_t)rng_int(-127, 127);
    for (int m = 0; m < rows; m++) {
        scales[m] = 1e-3f * (float)rng_int(1, 50);
        bias[m] = 0.01f * (float)rng_int(-100, 100);
    }
}

/* One GEMM: the reference on the CPU, then the GPU's, both poisoned first,
 * compared whole (gaps included), in all four output variants. */
static void check_gemm(int rows, int n, int depth, int extreme, bool b_transposed,
                       bool out_transposed)
{
    int8_t *q = (int8_t *)malloc((size_t)rows * depth);
    float *scales = (float *)malloc(sizeof(float) * rows);
    float *bias = (float *)malloc(sizeof(float) * rows);
    fill_case(rows, depth, extreme, q, scales, bias);
    int b_gap = rng_int(0, 3);
    size_t b_bytes = b_transposed ? (size_t)n * depth : (size_t)depth * (n + b_gap);
    uint8_t *b = (uint8_t *)malloc(b_bytes);
    for (size_t i = 0; i < b_bytes; i++)
        b[i] = extreme == 2 ? 255 : extreme && rng_int(0, 1) ? (rng_int(0, 1) ? 255 : 0)
                                                      : (uint8_t)rng_int(0, 255);
    ct_quant_act b_q = {0.02f, extreme == 2 ? 0 : extreme ? 255 : rng_int(0, 255)};
    ptrdiff_t b_rs = b_transposed ? 1 : n + b_gap, b_cs = b_transposed ? depth : 1;
    ptrdiff_t out_rs = out_transposed ? 1 : n + 2, out_cs = out_transposed ? rows + 2 : 1;
    size_t out_elems = out_transposed ? (size_t)n * out_cs : (size_t)rows * out_rs;
    size_t out_bytes = sizeof(float) * out_elems;

    layer_weights lw;
    weights_new(&lw, rows, depth, q, scales, bias);
    uint8_t *b_dev = upload(b, b_bytes);
    char *want = (char *)malloc(out_bytes), *got = (char *)malloc(out_bytes);
    memset(want, POISON, out_bytes);
    char *out_dev = upload(want, out_bytes);
    void *workspace = NULL;
    CHECK(cudaMalloc(&workspace, ct_cuda_int8_gemm_workspace(depth, n) + 1) == cudaSuccess, "ws");
    for (int variant = 0; variant < 4; variant++) {
        ct_int8_epilogue e = {bias, (variant & 1) != 0, (variant & 2) != 0, {0.05f, 100}};
        memset(want, POISON, out_bytes);
        ct_int8_gemm(lw.cpu, n, ct_int8_matrix{b, b_rs, b_cs}, b_q, &e,
                     ct_int8_matrix{want, out_rs, out_cs}, NULL);
        memset(got, POISON, out_bytes);
        CHECK(cudaMemcpy(out_dev, got, out_bytes, cudaMemcpyHostToDevice) == cudaSuccess, "poison");
        e.bias = lw.bias_dev;
        CHECK_OK(ct_cuda_int8_gemm(&lw.gpu, n, ct_int8_matrix{b_dev, b_rs, b_cs}, b_q, &e,
                                   ct_int8_matrix{out_dev, out_rs, out_cs}, workspace, 0));
        CHECK(cudaMemcpy(got, out_dev, out_bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "down");
        CHECK(memcmp(got, want, out_bytes) == 0, "%dx%dx%d (extreme %d, b^T %d, out^T %d): "
              "relu %d %s differs", rows, n, depth, extreme, b_transposed, out_transposed,
              e.relu, e.out_u8 ? "u8" : "float");
    }
    cudaFree(workspace);
    cudaFree(out_dev);
    cudaFree(b_dev);
    weights_free(&lw);
    free(q);
    free(scales);
    free(bias);
    free(b);
    free(want);
    free(got);
}

static void gemm_edge_shapes_match_cpu(void)
{
    static const int SHAPES[][3] = {{1, 1, 1},   {1, 65, 3},  {65, 1, 5},   {64, 64, 32},
                                    {65, 63, 33}, {7, 130, 7}, {130, 9, 100}, {3, 200, 257}};
    rng_state = 41;
    for (int i = 0; i < 8; i++)
        check_gemm(SHAPES[i][0], SHAPES[i][1], SHAPES[i][2], i % 3 == 1, i % 4 == 2, i % 4 == 3);
}

static void gemm_random_shapes_match_cpu(void)
{
    rng_state = 42;
    for (int i = 0; i < 12; i++)
        check_gemm(rng_int(1, 90), rng_int(1, 150), rng_int(1, 300), i % 3 == 0, i % 4 == 1,
                   i % 5 == 2);
}

/* Every product 127 * (255 - 128) and the full sum at depth 4608. */
static void gemm_extreme_values_match_cpu(void)
{
    rng_state = 43;
    check_gemm(9, 33, 4608, 2, false, false);
    check_gemm(17, 5, 4608, 1, true, false);
}

static void conv_matches_cpu(void)
{
    static const int CASES[][13] = {
        /* n  c   h   w   o kh kw sh sw ph pw dh dw */
        {2, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1},
        {3, 5, 11, 10, 7, 3, 3, 2, 2, 1, 1, 1, 1},
        {2, 16, 7, 7, 33, 1, 1, 1, 1, 0, 0, 1, 1},
        {1, 4, 13, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2},
    };
    rng_state = 44;
    for (int t = 0; t < 4; t++) {
        const int *k = CASES[t];
        ct_conv2d_shape s = {k[0], k[1], k[2], k[3], k[4],
                             ct_window_count(k[2], k[5], k[7], k[9], k[11]),
                             ct_window_count(k[3], k[6], k[8], k[10], k[12]),
                             k[5], k[6], k[7], k[8], k[9], k[10], k[11], k[12], 1};
        int rows = s.out_channels, depth = s.in_channels * s.kernel_h * s.kernel_w;
        size_t x_count = (size_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
        size_t y_bytes = sizeof(float) * s.n_batch * s.out_channels * s.out_h * s.out_w;
        int8_t *q = (int8_t *)malloc((size_t)rows * depth);
        float *scales = (float *)malloc(sizeof(float) * rows);
        float *bias = (float *)malloc(sizeof(float) * rows);
        fill_case(rows, depth, 0, q, scales, bias);
        uint8_t *x = (uint8_t *)malloc(x_count);
        for (size_t i = 0; i < x_count; i++)
            x[i] = (uint8_t)rng_int(0, 255);
        ct_quant_act x_q = {0.03f, 77};
        layer_weights lw;
        weights_new(&lw, rows, depth, q, scales, bias);
        char *want = (char *)malloc(y_bytes), *got = (char *)malloc(y_bytes);
        void *cpu_ws = malloc(ct_int8_conv2d_workspace(&s, lw.cpu, 1) + 1), *gpu_ws = NULL;
        CHECK(cudaMalloc(&gpu_ws, ct_cuda_int8_conv2d_workspace(&s)) == cudaSuccess, "ws");
        uint8_t *x_dev = upload(x, x_count);
        char *y_dev = NULL;
        CHECK(cudaMalloc((void **)&y_dev, y_bytes) == cudaSuccess, "cudaMalloc");
        for (int variant = 0; variant < 4; variant++) {
            ct_int8_epilogue e = {bias, (variant & 1) != 0, (variant & 2) != 0, {0.04f, 20}};
            memset(want, POISON, y_bytes);
            CHECK(cudaMemcpy(y_dev, want, y_bytes, cudaMemcpyHostToDevice) == cudaSuccess,
                  "poison");
            ct_int8_conv2d_forward(&s, x, x_q, lw.cpu, &e, want, cpu_ws, 1);
            e.bias = lw.bias_dev;
            CHECK_OK(ct_cuda_int8_conv2d_forward(&s, x_dev, x_q, &lw.gpu, &e, y_dev, gpu_ws, 0));
            CHECK(cudaMemcpy(got, y_dev, y_bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "down");
            CHECK(memcmp(got, want, y_bytes) == 0, "conv case %d: relu %d %s differs", t, e.relu,
                  e.out_u8 ? "u8" : "float");
        }
        cudaFree(gpu_ws);
        cudaFree(x_dev);
        cudaFree(y_dev);
        weights_free(&lw);
        free(cpu_ws);
        free(q);
        free(scales);
        free(bias);
        free(x);
        free(want);
        free(got);
    }
}

/* __dp4a itself: the four signed byte products plus c, wrapping. */
__global__ void dp4a_kernel(const int *a, const int *b, const int *c, int *out)
{
    out[threadIdx.x] = __dp4a(a[threadIdx.x], b[threadIdx.x], c[threadIdx.x]);
}

static void dp4a_sums_signed_bytes(void)
{
    enum { COUNT = 64 };
    int a[COUNT], b[COUNT], c[COUNT], out[COUNT];
    rng_state = 45;
    for (int i = 0; i < COUNT; i++) {
        a[i] = (int)(rng_int(0, 65535) | (unsigned)rng_int(0, 65535) << 16);
        b[i] = i == 0 ? (int)0x80808080u /* with a[0]: (-128)^2 * 4 */
                      : (int)(rng_int(0, 65535) | (unsigned)rng_int(0, 65535) << 16);
        c[i] = i == 1 ? 0x7fffffff : rng_int(-1000, 1000);
    }
    a[0] = (int)0x80808080u; /* (-128)^2 * 4 = 65536 */
    int *a_dev = upload(a, COUNT), *b_dev = upload(b, COUNT), *c_dev = upload(c, COUNT);
    int *out_dev = upload(out, COUNT);
    CT_EMU_LAUNCH(dp4a_kernel, 1, COUNT, 0, 0, a_dev, b_dev, c_dev, out_dev);
    CHECK(cudaMemcpy(out, out_dev, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess, "down");
    for (int i = 0; i < COUNT; i++) {
        uint32_t want = (uint32_t)c[i];
        for (int j = 0; j < 4; j++)
            want += (uint32_t)((int8_t)(a[i] >> 8 * j) * (int8_t)(b[i] >> 8 * j));
        CHECK(out[i] == (int)want, "lane %d: %d, want %d", i, out[i], (int)want);
    }
    CHECK(out[0] == c[0] + 65536, "(-128)^2 * 4");
    cudaFree(a_dev);
    cudaFree(b_dev);
    cudaFree(c_dev);
    cudaFree(out_dev);
}

int main(void)
{
    RUN(dp4a_sums_signed_bytes);
    RUN(gemm_edge_shapes_match_cpu);
    RUN(gemm_random_shapes_match_cpu);
    RUN(gemm_extreme_values_match_cpu);
    RUN(conv_matches_cpu);
    return harness_finish();
}
