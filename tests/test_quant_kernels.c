/*
 * The INT8 kernels (src/quant/): every vector path against the C reference
 * bit for bit, the reference against the rule of src/quant/int8.h written
 * out here in plain integer and float math, and the quantized results
 * against float math on the dequantized values.
 *
 * GEMMs on random shapes (depth not a multiple of 2, 4 or 16, rows and
 * columns 1, odd, a tile and one more, large), strided and transposed
 * operands, outputs with poisoned gaps (a store past its tile shows), both
 * output kinds, relu on and off, and extreme values: weights -128/-127/127,
 * activations 0/255, all-max rows whose pair sums would saturate
 * vpmaddubsw, the longest depth whose sums fit int32, and NaN and
 * infinite biases.  Convolutions:
 * 3x3 pad 1, stride 2, 1x1, dilation, batch > 1 (small planes: several
 * images per GEMM, and a remainder).  A path the CPU lacks is
 * skipped with a printed line, not failed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/window_math.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"
#include "harness.h"
#include "quant/int8.h"
#include "quant/int8_paths.h"

enum { POISON = 0xA5, OUT_GAP = 3 };

static uint64_t rng_state = 1;

static uint32_t rng_next(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static int rng_int(int lo, int hi) /* [lo, hi] */
{
    return lo + (int)(rng_next() % (uint32_t)(hi - lo + 1));
}

static float rng_float(float lo, float hi)
{
    return harness_uniform(&rng_state, lo, hi);
}

/* The vector paths this CPU runs; says which it skips, once. */
static int vector_paths(ct_int8_kernel paths[2])
{
    static bool said;
    int count = 0;
    for (int k = CT_INT8_AVX2; k <= CT_INT8_VNNI; k++) {
        if (ct_int8_kernel_supported(k))
            paths[count++] = k;
        else if (!said)
            printf("skipped: int8 path %s: this CPU or build lacks it\n", ct_int8_kernel_name(k));
    }
    said = true;
    return count;
}

/* ---- GEMM cases --------------------------------------------------------- */

typedef enum values { VALUES_RANDOM, VALUES_EXTREME, VALUES_ALL_MAX, VALUES_ALL_MIN } values;

typedef struct gemm_case {
    int rows, n, depth;
    values kind;
    bool b_transposed, out_transposed, relu, out_u8, bias;
} gemm_case;

typedef struct gemm_data {
    gemm_case c;
    int8_t *q;
    float *scales, *bias;
    uint8_t *b;
    ct_int8_matrix b_matrix;
    ct_quant_act b_q;
    ct_int8_epilogue e;
    ptrdiff_t out_rs, out_cs;
    size_t out_bytes;
} gemm_data;

static int8_t weight_value(values kind)
{
    static const int8_t EXTREMES[] = {-128, -127, 127, 0, 1, -1};
    if (kind == VALUES_ALL_MAX)
        return 127;
    if (kind == VALUES_ALL_MIN)
        return -128;
    if (kind == VALUES_EXTREME && rng_int(0, 1))
        return EXTREMES[rng_int(0, 5)];
    return (int8_t)rng_int(-127, 127);
}

static uint8_t act_value(values kind)
{
    if (kind == VALUES_ALL_MAX || kind == VALUES_ALL_MIN)
        return 255;
    if (kind == VALUES_EXTREME && rng_int(0, 1))
        return rng_int(0, 1) ? 255 : 0;
    return (uint8_t)rng_int(0, 255);
}

static void gemm_data_new(gemm_data *d, gemm_case c)
{
    memset(d, 0, sizeof *d);
    d->c = c;
    d->q = malloc((size_t)c.rows * c.depth);
    d->scales = malloc(sizeof(float) * c.rows);
    d->bias = malloc(sizeof(float) * c.rows);
    for (size_t i = 0; i < (size_t)c.rows * c.depth; i++)
        d->q[i] = weight_value(c.kind);
    static const float ODD_BIASES[] = {NAN, INFINITY, -INFINITY};
    for (int m = 0; m < c.rows; m++) {
        d->scales[m] = rng_float(1e-3f, 5e-2f);
        d->bias[m] = rng_float(-1.0f, 1.0f);
        /* extreme cases: a NaN, +inf and -inf bias (relu keeps NaN; u8 takes it to 0) */
        if (c.kind == VALUES_EXTREME && m < 3 && c.rows > 3)
            d->bias[m] = ODD_BIASES[m];
    }
    /* b: [depth, n] with a gap after each row, or [n, depth] (a linear input) */
    int b_gap = rng_int(0, 5);
    size_t b_bytes = c.b_transposed ? (size_t)c.n * c.depth : (size_t)c.depth * (c.n + b_gap);
    d->b = malloc(b_bytes);
    for (size_t i = 0; i < b_bytes; i++)
        d->b[i] = act_value(c.kind);
    d->b_matrix = c.b_transposed ? (ct_int8_matrix){d->b, 1, c.depth}
                                 : (ct_int8_matrix){d->b, c.n + b_gap, 1};
    d->b_q.scale = rng_float(1e-3f, 0.1f);
    d->b_q.zero_point = c.kind == VALUES_RANDOM    ? rng_int(0, 255)
                        : c.kind == VALUES_EXTREME ? 255
                                                   : 0;
    d->e = (ct_int8_epilogue){c.bias ? d->bias : NULL, c.relu, false, {1.0f, 0}};
    d->out_rs = c.out_transposed ? 1 : c.n + OUT_GAP;
    d->out_cs = c.out_transposed ? c.rows + OUT_GAP : 1;
    size_t elems = c.out_transposed ? (size_t)c.n * d->out_cs : (size_t)c.rows * d->out_rs;
    d->out_bytes = elems * sizeof(float);
}

static void gemm_data_free(gemm_data *d)
{
    free(d->q);
    free(d->scales);
    free(d->bias);
    free(d->b);
}

/* out (d->out_bytes, poisoned first) = the GEMM on `kernel`. */
static void run_gemm(const gemm_data *d, ct_int8_kernel kernel, void *out)
{
    ct_int8_weights *w = NULL;
    CHECK_OK(ct_int8_kernel_set(kernel));
    CHECK_OK(ct_int8_weights_pack(d->c.rows, d->c.depth, d->q, d->scales, &w));
    CHECK_OK(ct_int8_kernel_set(CT_INT8_AUTO));
    if (!w)
        return;
    CHECK(w->kernel == kernel, "packed for %s", ct_int8_kernel_name(w->kernel));
    void *workspace = malloc(ct_int8_gemm_workspace(w, d->c.n) + 1);
    memset(out, POISON, d->out_bytes);
    ct_int8_matrix out_matrix = {out, d->out_rs, d->out_cs};
    ct_int8_gemm(w, d->c.n, d->b_matrix, d->b_q, &d->e, out_matrix, workspace);
    free(workspace);
    ct_int8_weights_free(w);
}

/* The rule of int8.h for out[m, n], from the unpacked operands. */
static void expected_value(const gemm_data *d, int m, int n, float *f, uint8_t *u)
{
    int64_t acc = 0;
    for (int k = 0; k < d->c.depth; k++) {
        uint8_t b = ((const uint8_t *)d->b_matrix.data)[k * d->b_matrix.row_stride +
                                                       n * d->b_matrix.col_stride];
        acc += (int64_t)d->q[(size_t)m * d->c.depth + k] * (b - d->b_q.zero_point);
    }
    float v = (float)acc * (d->b_q.scale * d->scales[m]) + (d->e.bias ? d->e.bias[m] : 0.0f);
    if (d->e.relu)
        v = v < 0.0f ? 0.0f : v;
    *f = v;
    *u = ct_int8_requantize(v, 1.0f / d->e.out_q.scale, d->e.out_q.zero_point);
}

/* Runs the case on the reference (checked against the rule) and on every
 * vector path (checked against the reference, gaps included), with float
 * output, then with uint8 output quantized to cover 60 % of its range. */
static void check_gemm_case(gemm_case c)
{
    gemm_data d;
    gemm_data_new(&d, c);
    ct_int8_kernel paths[2];
    int n_paths = vector_paths(paths);
    char *ref = malloc(d.out_bytes), *got = malloc(d.out_bytes);
    for (int pass = 0; pass < 2; pass++) {
        d.e.out_u8 = pass == 1;
        run_gemm(&d, CT_INT8_REF, ref);
        float max_abs = 0.0f;
        int wrong = 0;
        for (int m = 0; m < c.rows; m++)
            for (int n = 0; n < c.n; n++) {
                float f;
                uint8_t u;
                expected_value(&d, m, n, &f, &u);
                if (isfinite(f))
                    max_abs = fabsf(f) > max_abs ? fabsf(f) : max_abs;
                ptrdiff_t at = m * d.out_rs + n * d.out_cs;
                wrong += d.e.out_u8 ? ((uint8_t *)ref)[at] != u
                                    : memcmp((float *)ref + at, &f, sizeof f) != 0;
            }
        CHECK(wrong == 0, "reference: %d of %d outputs differ from the rule (%dx%dx%d, %s)", wrong,
              c.rows * c.n, c.rows, c.n, c.depth, d.e.out_u8 ? "u8" : "float");
        for (int p = 0; p < n_paths; p++) {
            run_gemm(&d, paths[p], got);
            CHECK(memcmp(got, ref, d.out_bytes) == 0, "%s differs from ref: %dx%dx%d %s relu %d",
                  ct_int8_kernel_name(paths[p]), c.rows, c.n, c.depth,
                  d.e.out_u8 ? "u8" : "float", c.relu);
        }
        if (pass == 0)
            CHECK_OK(ct_quant_act_from_range(-0.6f * max_abs, 0.6f * max_abs, &d.e.out_q));
    }
    free(ref);
    free(got);
    gemm_data_free(&d);
}

static gemm_case random_case(int max_rows, int max_n, int max_depth, values kind)
{
    gemm_case c = {rng_int(1, max_rows), rng_int(1, max_n), rng_int(1, max_depth), kind,
                   rng_int(0, 3) == 0, rng_int(0, 3) == 0, rng_int(0, 1), false,
                   rng_int(0, 3) != 0};
    return c;
}

static void gemm_edge_shapes_match_reference(void)
{
    static const int ROWS[] = {1, 5, 6, 7, 8, 9, 17, 48, 65};
    static const int COLS[] = {1, 3, 15, 16, 17, 31, 32, 33, 49, 129};
    static const int DEPTHS[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 63, 64, 65, 131};
    rng_state = 11;
    for (int i = 0; i < 9; i++)
        for (int j = 0; j < 10; j++) {
            gemm_case c = random_case(1, 1, 1, VALUES_RANDOM);
            c.rows = ROWS[i];
            c.n = COLS[j];
            c.depth = DEPTHS[(i + j) % 13];
            check_gemm_case(c);
        }
}

static void gemm_random_shapes_match_reference(void)
{
    rng_state = 12;
    for (int i = 0; i < 120; i++)
        check_gemm_case(random_case(70, 140, 300, i % 3 == 0 ? VALUES_EXTREME : VALUES_RANDOM));
}

/* Every pair sum at its largest (255 * 127 * 2 = 64770: vpmaddubsw would
 * saturate it at 32767), and the longest depth whose int32 sums still fit. */
static void gemm_extreme_values_are_exact(void)
{
    rng_state = 13;
    static const int DEPTHS[] = {2, 64, 4608, CT_INT8_MAX_DEPTH};
    for (int i = 0; i < 4; i++) {
        gemm_case all_max = {9, 33, DEPTHS[i], VALUES_ALL_MAX, false, false, false, false, true};
        check_gemm_case(all_max);
        gemm_case all_min = {7, 17, DEPTHS[i], VALUES_ALL_MIN, i % 2, false, true, false, false};
        check_gemm_case(all_min);
    }
}

/* Tiles across threads: shapes of real convolutions (ResNet-18's 56x56 and
 * 7x7 layers), as a GEMM. */
static void gemm_conv_sized_shapes_match_reference(void)
{
    rng_state = 14;
    gemm_case wide = {64, 3136, 576, VALUES_RANDOM, false, false, true, false, true};
    gemm_case deep = {512, 49, 4608, VALUES_RANDOM, false, false, false, false, true};
    check_gemm_case(wide);
    check_gemm_case(deep);
}

static void gemm_same_bits_for_any_thread_count(void)
{
    rng_state = 15;
    gemm_case c = {130, 257, 300, VALUES_RANDOM, false, false, true, false, true};
    gemm_data d;
    gemm_data_new(&d, c);
    char *one = malloc(d.out_bytes), *all = malloc(d.out_bytes);
    int threads = ct_cpu_max_threads();
    ct_int8_kernel active = ct_int8_kernel_active();
    ct_cpu_set_threads(1);
    run_gemm(&d, active, one);
    ct_cpu_set_threads(threads > 1 ? threads : 2);
    run_gemm(&d, active, all);
    ct_cpu_set_threads(threads);
    CHECK(memcmp(one, all, d.out_bytes) == 0, "%s: 1 thread and %d differ",
          ct_int8_kernel_name(active), threads);
    free(one);
    free(all);
    gemm_data_free(&d);
}

/* ---- quantization ---------------------------------------------------------- */

static void requantize_rounds_half_to_even_and_saturates(void)
{
    CHECK(ct_int8_requantize(2.5f, 1.0f, 0) == 2, "2.5 -> 2");
    CHECK(ct_int8_requantize(3.5f, 1.0f, 0) == 4, "3.5 -> 4");
    CHECK(ct_int8_requantize(-0.5f, 1.0f, 10) == 10, "-0.5 + 10 -> 10");
    CHECK(ct_int8_requantize(-1.5f, 1.0f, 10) == 8, "-1.5 + 10 -> 8");
    CHECK(ct_int8_requantize(300.0f, 1.0f, 0) == 255, "saturates high");
    CHECK(ct_int8_requantize(-3.0f, 1.0f, 2) == 0, "saturates low");
    CHECK(ct_int8_requantize(INFINITY, 1.0f, 7) == 255, "+inf -> 255");
    CHECK(ct_int8_requantize(-INFINITY, 1.0f, 7) == 0, "-inf -> 0");
    CHECK(ct_int8_requantize(NAN, 1.0f, 200) == 0, "NaN -> 0");
    CHECK(ct_int8_requantize(1e30f, 1.0f, 0) == 255, "1e30 -> 255");
}

/* ct_int8_quantize on each path = the scalar rule, at awkward lengths and
 * on NaN, infinities, ties, -0 and subnormals. */
static void quantize_paths_match_the_rule(void)
{
    static const float SPECIAL[] = {NAN, INFINITY, -INFINITY, 0.5f, 1.5f, -2.5f, -0.0f,
                                    1e-40f, 1e30f, -1e30f, 127.5f, 128.5f};
    static const int LENGTHS[] = {1, 7, 15, 16, 17, 33, 1003, 70001};
    rng_state = 21;
    ct_quant_act p = {0.75f, 131};
    int64_t count = 70001;
    float *x = malloc(sizeof(float) * count);
    uint8_t *want = malloc(count), *got = malloc(count + 1);
    for (int64_t i = 0; i < count; i++)
        x[i] = i % 5 == 0 ? SPECIAL[i / 5 % 12] : rng_float(-120.0f, 120.0f);
    for (int64_t i = 0; i < count; i++)
        want[i] = ct_int8_requantize(x[i], 1.0f / p.scale, p.zero_point);
    for (int k = 0; k < CT_INT8_KERNEL_COUNT; k++) {
        if (!ct_int8_kernel_supported(k))
            continue;
        CHECK_OK(ct_int8_kernel_set(k));
        for (int l = 0; l < 8; l++) {
            memset(got, POISON, LENGTHS[l] + 1);
            ct_int8_quantize(LENGTHS[l], x, p, got);
            CHECK(memcmp(got, want, LENGTHS[l]) == 0 && got[LENGTHS[l]] == POISON,
                  "%s, %d values", ct_int8_kernel_name(k), LENGTHS[l]);
        }
    }
    CHECK_OK(ct_int8_kernel_set(CT_INT8_AUTO));
    free(x);
    free(want);
    free(got);
}

static void activation_round_trip_within_half_a_step(void)
{
    rng_state = 22;
    for (int trial = 0; trial < 20; trial++) {
        float lo = rng_float(-5.0f, 1.0f), hi = rng_float(-1.0f, 8.0f);
        ct_quant_act p;
        CHECK_OK(ct_quant_act_from_range(lo, hi, &p));
        CHECK(p.zero_point >= 0 && p.zero_point <= 255 && p.scale > 0, "params");
        float zero = 0.0f, back;
        uint8_t q;
        ct_int8_quantize(1, &zero, p, &q);
        ct_int8_dequantize(1, &q, p, &back);
        CHECK(back == 0.0f, "0 must be exact, got %g", (double)back);
        float x[256], y[256];
        uint8_t qs[256];
        float a = lo < 0 ? lo : 0, b = hi > 0 ? hi : 0;
        for (int i = 0; i < 256; i++)
            x[i] = rng_float(a, b);
        ct_int8_quantize(256, x, p, qs);
        ct_int8_dequantize(256, qs, p, y);
        for (int i = 0; i < 256; i++)
            CHECK(fabsf(x[i] - y[i]) <= 0.5f * p.scale * (1 + 1e-5f), "%g -> %g, step %g",
                  (double)x[i], (double)y[i], (double)p.scale);
    }
    ct_quant_act empty;
    CHECK_OK(ct_quant_act_from_range(0.0f, 0.0f, &empty));
    CHECK(empty.scale == 1.0f && empty.zero_point == 0, "an empty range gets scale 1");
    CHECK(ct_quant_act_from_range(NAN, 1.0f, &empty) == CT_ERR_ARG, "NaN bound refused");
}

static void weight_round_trip_within_half_a_step(void)
{
    enum { ROWS = 5, DEPTH = 37 };
    rng_state = 23;
    float w[ROWS * DEPTH], back[ROWS * DEPTH], scales[ROWS];
    int8_t q[ROWS * DEPTH];
    for (int i = 0; i < ROWS * DEPTH; i++)
        w[i] = i / DEPTH == 2 ? 0.0f : rng_float(-3.0f, 3.0f) * (float)(i / DEPTH + 1);
    CHECK_OK(ct_int8_weights_quantize(ROWS, DEPTH, w, q, scales));
    ct_int8_weights_dequantize(ROWS, DEPTH, q, scales, back);
    CHECK(scales[2] == 1.0f, "an all-zero row gets scale 1, got %g", (double)scales[2]);
    for (int m = 0; m < ROWS; m++) {
        int max_q = 0;
        for (int k = 0; k < DEPTH; k++) {
            int i = m * DEPTH + k;
            max_q = abs(q[i]) > max_q ? abs(q[i]) : max_q;
            CHECK(q[i] >= -127 && q[i] <= 127, "q %d", q[i]);
            CHECK(fabsf(w[i] - back[i]) <= 0.5f * scales[m] * (1 + 1e-5f), "row %d: %g -> %g",
                  m, (double)w[i], (double)back[i]);
        }
        CHECK(m == 2 ? max_q == 0 : max_q == 127, "row %d reaches %d", m, max_q);
    }
    w[7] = NAN;
    CHECK(ct_int8_weights_quantize(ROWS, DEPTH, w, q, scales) == CT_ERR_ARG, "NaN refused");
}

/* ---- convolution and linear --------------------------------------------------- */

typedef struct conv_case {
    int n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
} conv_case;

static const conv_case CONV_CASES[] = {
    /* n  c   h   w   o kh kw sh sw ph pw dh dw */
    {2, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1},     /* 3x3 pad 1 */
    {3, 5, 11, 10, 7, 3, 3, 2, 2, 1, 1, 1, 1},   /* stride 2, odd sizes */
    {2, 16, 7, 7, 33, 1, 1, 1, 1, 0, 0, 1, 1},   /* 1x1: col is x */
    {2, 8, 8, 9, 16, 1, 1, 2, 2, 0, 0, 1, 1},    /* 1x1 stride 2 (downsample) */
    {1, 4, 13, 12, 6, 3, 3, 1, 1, 2, 2, 2, 2},   /* dilation 2 */
    {2, 3, 10, 8, 5, 5, 3, 1, 2, 2, 1, 1, 1},    /* non-square kernel and stride */
    {4, 32, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1}, /* batch 4, stride 2: one GEMM for 4 images */
    {5, 6, 8, 8, 12, 3, 3, 1, 1, 1, 1, 1, 1},    /* images per GEMM 4, then 1 */
    {1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1}, /* ResNet-18 layer1, batch 1 */
    {6, 4, 20, 20, 16, 3, 3, 1, 1, 1, 1, 1, 1},  /* batch 6: threads take whole images */
    {6, 8, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1},  /* 144-pixel planes: 2 images a thread's GEMM */
    {3, 4, 3, 3, 8, 3, 3, 1, 1, 1, 1, 1, 1},     /* rows of 3 bytes (copied byte by byte) */
    {2, 4, 40, 40, 8, 3, 3, 1, 1, 1, 1, 1, 1},   /* rows of 40 bytes (one memcpy) */
    {1, 2, 5, 120, 8, 3, 3, 1, 1, 1, 1, 1, 1},   /* 120-pixel rows */
    {1, 4, 40, 20, 8, 3, 3, 1, 1, 0, 0, 8, 8},   /* 4-pixel rows 20 apart: past a 128-byte window */
};

static ct_conv2d_shape conv_shape(const conv_case *k)
{
    ct_conv2d_shape s = {k->n, k->c, k->h, k->w, k->o,
                         ct_window_count(k->h, k->kh, k->sh, k->ph, k->dh),
                         ct_window_count(k->w, k->kw, k->sw, k->pw, k->dw),
                         k->kh, k->kw, k->sh, k->sw, k->ph, k->pw, k->dh, k->dw, 1};
    return s;
}

/* y = the int8 convolution (linear when s is NULL: x [n_batch, depth]) on `kernel`. */
static void run_layer(const ct_conv2d_shape *s, int n_batch, int rows, int depth,
                      const int8_t *q, const float *scales, const uint8_t *x, ct_quant_act x_q,
                      const ct_int8_epilogue *e, ct_int8_kernel kernel, int threads, void *y,
                      size_t y_bytes)
{
    ct_int8_weights *w = NULL;
    CHECK_OK(ct_int8_kernel_set(kernel));
    CHECK_OK(ct_int8_weights_pack(rows, depth, q, scales, &w));
    CHECK_OK(ct_int8_kernel_set(CT_INT8_AUTO));
    if (!w)
        return;
    size_t bytes = s ? ct_int8_conv2d_workspace(s, w, threads)
                     : ct_int8_linear_workspace(n_batch, w);
    if (s && s->n_batch == 6 && threads > 1) /* the batch-6 cases: a slot per thread */
        CHECK(bytes == (size_t)threads * ct_int8_conv2d_workspace(s, w, 1),
              "batch 6 on %d threads: workspace %zu, not %d slots", threads, bytes, threads);
    void *workspace = malloc(bytes + 1);
    memset(y, POISON, y_bytes);
    int saved = ct_cpu_max_threads();
    ct_cpu_set_threads(threads);
    if (s)
        ct_int8_conv2d_forward(s, x, x_q, w, e, y, workspace, threads);
    else
        ct_int8_linear_forward(n_batch, x, x_q, w, e, y, workspace);
    ct_cpu_set_threads(saved);
    free(workspace);
    ct_int8_weights_free(w);
}

/* One layer: quantized inputs and weights; the float output against the
 * float kernel on the dequantized values (exact but for float rounding),
 * then every vector path against the reference in both output kinds. */
static void check_layer(const ct_conv2d_shape *s, int n_batch, int rows, int depth, int64_t x_count,
                        int64_t y_count)
{
    float *xf = malloc(sizeof(float) * x_count), *wf = malloc(sizeof(float) * rows * depth);
    float *bias = malloc(sizeof(float) * rows), *scales = malloc(sizeof(float) * rows);
    float *want = malloc(sizeof(float) * y_count);
    uint8_t *x = malloc(x_count);
    int8_t *q = malloc((size_t)rows * depth);
    char *ref = malloc(sizeof(float) * y_count), *got = malloc(sizeof(float) * y_count);
    harness_fill(xf, x_count, rng_next(), -1.0f, 3.0f);
    harness_fill(wf, (int64_t)rows * depth, rng_next(), -0.5f, 0.5f);
    harness_fill(bias, rows, rng_next(), -1.0f, 1.0f);
    ct_quant_act x_q;
    CHECK_OK(ct_quant_act_from_range(-1.0f, 3.0f, &x_q));
    ct_int8_quantize(x_count, xf, x_q, x);
    ct_int8_dequantize(x_count, x, x_q, xf);
    CHECK_OK(ct_int8_weights_quantize(rows, depth, wf, q, scales));
    ct_int8_weights_dequantize(rows, depth, q, scales, wf);
    if (s) {
        void *float_workspace = malloc(ct_cpu_conv2d_im2col_workspace(s) + 1);
        ct_cpu_conv2d_forward(s, xf, wf, bias, want, float_workspace);
        free(float_workspace);
    } else {
        ct_cpu_linear_forward(n_batch, depth, rows, xf, wf, bias, want);
    }
    ct_int8_epilogue e = {bias, false, false, {1.0f, 0}};
    run_layer(s, n_batch, rows, depth, q, scales, x, x_q, &e, CT_INT8_REF, 1, ref,
              sizeof(float) * y_count);
    double err = harness_rel_err_f32((float *)ref, want, y_count);
    CHECK(err <= 1e-5, "int8 vs float on dequantized values: %.3g relative", err);
    float max_abs = 0.0f;
    for (int64_t i = 0; i < y_count; i++)
        max_abs = fabsf(want[i]) > max_abs ? fabsf(want[i]) : max_abs;
    ct_int8_kernel paths[2];
    int n_paths = vector_paths(paths);
    for (int variant = 0; variant < 4; variant++) {
        e.relu = variant & 1;
        e.out_u8 = variant & 2;
        CHECK_OK(ct_quant_act_from_range(-0.5f * max_abs, 0.8f * max_abs, &e.out_q));
        size_t y_bytes = e.out_u8 ? (size_t)y_count : sizeof(float) * y_count;
        run_layer(s, n_batch, rows, depth, q, scales, x, x_q, &e, CT_INT8_REF, 1, ref, y_bytes);
        /* 3 threads: whole images per thread where the batch allows, else
         * the threads inside each image */
        for (int p = 0; p < n_paths; p++)
            for (int threads = 1; threads <= 3; threads += 2)
                for (int images = 0; images < 2; images++) {
                    /* panels packed from the padded images where the path
                     * can (images 1), and from an im2col matrix */
                    if (images && !ct_int8_image_packing(paths[p]))
                        continue;
                    ct_int8_image_packing_allow(images);
                    run_layer(s, n_batch, rows, depth, q, scales, x, x_q, &e, paths[p],
                              threads, got, y_bytes);
                    ct_int8_image_packing_allow(true);
                    CHECK(memcmp(got, ref, y_bytes) == 0,
                          "%s on %d threads%s differs from ref (relu %d, %s)",
                          ct_int8_kernel_name(paths[p]), threads,
                          images ? ", panels from the images," : "", e.relu,
                          e.out_u8 ? "u8" : "float");
                }
    }
    free(xf);
    free(wf);
    free(bias);
    free(scales);
    free(want);
    free(x);
    free(q);
    free(ref);
    free(got);
}

static void conv_matches_float_conv_and_reference(void)
{
    rng_state = 31;
    for (size_t i = 0; i < sizeof CONV_CASES / sizeof CONV_CASES[0]; i++) {
        ct_conv2d_shape s = conv_shape(&CONV_CASES[i]);
        int64_t x_count = (int64_t)s.n_batch * s.in_channels * s.in_h * s.in_w;
        int64_t y_count = (int64_t)s.n_batch * s.out_channels * s.out_h * s.out_w;
        check_layer(&s, s.n_batch, s.out_channels, s.in_channels * s.kernel_h * s.kernel_w,
                    x_count, y_count);
    }
}

static void linear_matches_float_linear_and_reference(void)
{
    static const int SHAPES[][3] = {{1, 10, 84}, {3, 7, 5}, {64, 120, 400}, {17, 33, 131}};
    rng_state = 32;
    for (int i = 0; i < 4; i++) {
        int n = SHAPES[i][0], out = SHAPES[i][1], in = SHAPES[i][2];
        check_layer(NULL, n, out, in, (int64_t)n * in, (int64_t)n * out);
    }
}

/* The u8 max pool (int8 models' activations) is the f32 pool of the same
 * values: 2x2/2 (the vectorizable path, odd sizes too) and padded or
 * overlapping windows. */
static void maxpool_u8_matches_float(void)
{
    static const int SHAPES[][7] = {
        /* h   w  kernel stride pad */
        {28, 28, 2, 2, 0}, {7, 9, 2, 2, 0}, {9, 8, 3, 2, 1}, {6, 5, 3, 1, 1}, {5, 5, 2, 1, 0},
    };
    rng_state = 33;
    for (int i = 0; i < 5; i++) {
        const int *k = SHAPES[i];
        ct_pool2d_shape s = {3, 5, k[0], k[1], ct_window_count(k[0], k[2], k[3], k[4], 1),
                             ct_window_count(k[1], k[2], k[3], k[4], 1), k[2], k[2], k[3], k[3],
                             k[4], k[4], false};
        int64_t nx = (int64_t)s.n_batch * s.channels * s.in_h * s.in_w;
        int64_t ny = (int64_t)s.n_batch * s.channels * s.out_h * s.out_w;
        uint8_t *x = malloc(nx), *y = malloc(ny);
        float *xf = malloc(sizeof(float) * nx), *yf = malloc(sizeof(float) * ny);
        for (int64_t j = 0; j < nx; j++)
            xf[j] = x[j] = (uint8_t)(rng_next() >> 24);
        ct_cpu_maxpool2d_forward(&s, xf, yf);
        ct_cpu_maxpool2d_forward_u8(&s, x, y);
        int64_t wrong = 0;
        for (int64_t j = 0; j < ny; j++)
            wrong += y[j] != (uint8_t)yf[j];
        CHECK(wrong == 0, "pool %dx%d k%d s%d p%d: %lld of %lld outputs differ", k[0], k[1], k[2],
              k[3], k[4], (long long)wrong, (long long)ny);
        free(x);
        free(y);
        free(xf);
        free(yf);
    }
}

/* ---- the path setting ------------------------------------------------------------ */

/* CT_INT8_KERNEL, read once per process: each value in a child of its own,
 * forked before this process asks (an unsupported or unknown name leaves
 * the best path). */
static void environment_selects_the_kernel(void)
{
    static const char *const VALUES[] = {"ref", "avx2", "vnni", "fastest"};
    ct_int8_kernel best = CT_INT8_REF;
    for (int k = 0; k < CT_INT8_KERNEL_COUNT; k++)
        best = ct_int8_kernel_supported(k) ? (ct_int8_kernel)k : best;
    for (int i = 0; i < 4; i++) {
        bool usable = i < CT_INT8_KERNEL_COUNT && ct_int8_kernel_supported(i);
        ct_int8_kernel expected = usable ? (ct_int8_kernel)i : best;
        pid_t child = fork();
        if (child == 0) {
            setenv("CT_INT8_KERNEL", VALUES[i], 1);
            _exit(ct_int8_kernel_active() == expected ? 0 : 1);
        }
        int status = -1;
        CHECK(child > 0 && waitpid(child, &status, 0) == child, "fork");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "CT_INT8_KERNEL=%s", VALUES[i]);
    }
}

static void kernel_setting_and_names(void)
{
    CHECK(strcmp(ct_int8_kernel_name(CT_INT8_REF), "ref") == 0, "ref");
    CHECK(strcmp(ct_int8_kernel_name(CT_INT8_AVX2), "avx2") == 0, "avx2");
    CHECK(strcmp(ct_int8_kernel_name(CT_INT8_VNNI), "vnni") == 0, "vnni");
    CHECK(ct_int8_kernel_set(CT_INT8_KERNEL_COUNT) == CT_ERR_ARG, "out of range refused");
    for (int k = 0; k < CT_INT8_KERNEL_COUNT; k++) {
        ct_status status = ct_int8_kernel_set(k);
        if (ct_int8_kernel_supported(k))
            CHECK(status == CT_OK && ct_int8_kernel_active() == (ct_int8_kernel)k, "%d", k);
        else
            CHECK(status == CT_ERR_UNSUPPORTED, "%d: %s", k, ct_status_name(status));
    }
    CHECK_OK(ct_int8_kernel_set(CT_INT8_AUTO));
    printf("int8 kernels: avx2 %s, vnni %s; this run uses %s\n",
           ct_int8_kernel_supported(CT_INT8_AVX2) ? "yes" : "no",
           ct_int8_kernel_supported(CT_INT8_VNNI) ? "yes" : "no",
           ct_int8_kernel_name(ct_int8_kernel_active()));
}

int main(void)
{
    RUN(environment_selects_the_kernel); /* first: the parent has not asked yet */
    RUN(kernel_setting_and_names);
    RUN(requantize_rounds_half_to_even_and_saturates);
    RUN(quantize_paths_match_the_rule);
    RUN(activation_round_trip_within_half_a_step);
    RUN(weight_round_trip_within_half_a_step);
    RUN(gemm_edge_shapes_match_reference);
    RUN(gemm_random_shapes_match_reference);
    RUN(gemm_extreme_values_are_exact);
    RUN(gemm_conv_sized_shapes_match_reference);
    RUN(gemm_same_bits_for_any_thread_count);
    RUN(conv_matches_float_conv_and_reference);
    RUN(linear_matches_float_linear_and_reference);
    RUN(maxpool_u8_matches_float);
    return harness_finish();
}
