/*
 * Reduced precision (ct_graph_set_precision): the 16-bit conversions, the
 * places autocast puts 16-bit values, the CPU's reduced-precision reference
 * (cpu/widen.c), and training in bf16 and fp16.
 *
 * - The conversions (core/half.h) against an independent reference: the
 *   nearest of all 16-bit values, found by binary search in double
 *   precision, ties to the even bit pattern, past the largest finite value
 *   rounding as if infinity were the next value.
 * - A bf16 or fp16 graph gives exactly the bits of an f32 graph that rounds
 *   by hand (a cast to 16 bits and back) at the documented points: each
 *   convolution's and linear layer's input and weight, and every output of
 *   an op on 16-bit values.  On the CPU, and on a CUDA device (emulated or
 *   real) within a few units in the last place.
 * - SimpleCNN trained in bf16 and fp16 follows the f32 run's loss.
 * - The loss's gradient fused into the loss's kernel (graph/fuse.c) gives
 *   the bits of the fill and backward kernels, in f32, bf16 and fp16 (the
 *   seed times the loss scale), for rows of a thread's, a warp's and too
 *   many classes to stage.
 * - On CUDA's vendor kernels the 16-bit convolutions run on cuDNN (a
 *   forward pass with a bias on f32 copies, in TF32: the same sums) and the
 *   linear layers on cuBLAS.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "cuttle.h"
#include "graph/graph.h"
#include "graph/impl.h"
#include "graph/plan.h"
#include "harness.h"

/* ---- conversions ----------------------------------------------------------------- */

typedef struct format {
    ct_dtype dtype;
    uint16_t largest;  /* bits of the largest finite value */
    double overflow;   /* the value infinity stands for when rounding: 2^(emax+1) */
    uint16_t (*from_f32)(float);
    float (*to_f32)(uint16_t);
} format;

static const format formats[2] = {
    {CT_F16, 0x7bff, 65536.0, ct_f16_from_f32, ct_f16_to_f32},
    {CT_BF16, 0x7f7f, 0x1p128, ct_bf16_from_f32, ct_bf16_to_f32},
};

static double value_of(const format *f, uint32_t bits)
{
    return bits > f->largest ? f->overflow : (double)f->to_f32((uint16_t)bits);
}

/* The nearest 16-bit value to x (not NaN), from the table of magnitudes. */
static uint16_t reference_round(const format *f, float x)
{
    double a = fabs((double)x);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    uint32_t lo = 0, hi = (uint32_t)f->largest + 1; /* value_of(hi) = "infinity" */
    if (a >= f->overflow)
        return (uint16_t)(sign | 0x7c00u * (f->dtype == CT_F16) | 0x7f80u * (f->dtype == CT_BF16));
    while (hi - lo > 1) { /* value_of(lo) <= a < value_of(hi) */
        uint32_t mid = (lo + hi) / 2;
        if (value_of(f, mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    double below = a - value_of(f, lo), above = value_of(f, hi) - a;
    uint32_t bits = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    if (bits > f->largest) /* rounded up past the largest finite value */
        bits = f->dtype == CT_F16 ? 0x7c00u : 0x7f80u;
    return (uint16_t)(sign | bits);
}

static bool is_nan16(const format *f, uint16_t h)
{
    return isnan(f->to_f32(h));
}

static void conversions_round_trip(void)
{
    for (int k = 0; k < 2; k++) {
        const format *f = &formats[k];
        int bad = 0;
        for (uint32_t bits = 0; bits <= 0xffff; bits++) {
            float x = f->to_f32((uint16_t)bits);
            uint16_t back = f->from_f32(x);
            bool ok = isnan(x) ? is_nan16(f, back) : back == bits;
            bad += !ok;
            if (!ok && bad <= 3)
                CHECK(ok, "%s 0x%04x -> %g -> 0x%04x", ct_dtype_name(f->dtype), bits, (double)x,
                      back);
        }
        CHECK(bad == 0, "%s: %d patterns do not round-trip", ct_dtype_name(f->dtype), bad);
    }
}

static void check_rounding(const format *f, float x, int *bad)
{
    uint16_t got = f->from_f32(x);
    if (isnan(x)) {
        if (!is_nan16(f, got) && ++*bad <= 3)
            CHECK(false, "%s of NaN gave 0x%04x", ct_dtype_name(f->dtype), got);
        return;
    }
    uint16_t want = reference_round(f, x);
    if (got != want && ++*bad <= 3)
        CHECK(false, "%s(%a) = 0x%04x, nearest-even is 0x%04x", ct_dtype_name(f->dtype),
              (double)x, got, want);
}

static void conversions_round_to_nearest_even(void)
{
    uint64_t state = 12345;
    for (int k = 0; k < 2; k++) {
        const format *f = &formats[k];
        int bad = 0;
        /* every value, the midpoints around it and their neighbours: the ties */
        for (uint32_t bits = 0; bits <= f->largest; bits++) {
            float v = f->to_f32((uint16_t)bits);
            float next = bits < f->largest ? f->to_f32((uint16_t)(bits + 1)) : (float)f->overflow;
            float mid = (float)(((double)v + (double)next) / 2);
            float probes[5] = {v, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY), -mid};
            for (int p = 0; p < 5; p++)
                check_rounding(f, probes[p], &bad);
        }
        /* random floats of every magnitude, and the specials */
        for (int i = 0; i < 1000000; i++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            check_rounding(f, ct_f32_from_bits((uint32_t)(state >> 32)), &bad);
        }
        float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65519.99f,
                            65520.0f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1p-149f, 3.4e38f};
        for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
            check_rounding(f, specials[i], &bad);
        CHECK(bad == 0, "%s: %d values rounded wrongly", ct_dtype_name(f->dtype), bad);
    }
}

static void precision_names(void)
{
    const char *names[] = {"fp32", "tf32", "bf16", "fp16"};
    for (int p = 0; p < 4; p++) {
        ct_precision parsed = CT_PRECISION_COUNT;
        CHECK_OK(ct_precision_parse(names[p], &parsed));
        CHECK(parsed == (ct_precision)p && strcmp(ct_precision_name(parsed), names[p]) == 0,
              "%s", names[p]);
    }
    ct_precision parsed;
    CHECK(ct_precision_parse("half", &parsed) == CT_ERR_ARG, "unknown name accepted");
    const char *message = ct_last_error();
    for (int p = 0; p < 4; p++)
        CHECK(strstr(message, names[p]), "the error does not list %s: %s", names[p], message);
}

/* ---- where autocast rounds ------------------------------------------------------------ */

/* t rounded to `dtype` and back: a rounding point written out by hand. */
static ct_tensor *rounded(ct_graph *g, ct_tensor *t, ct_dtype dtype)
{
    return dtype == CT_F32 ? t : ct_cast(g, ct_cast(g, t, dtype), CT_F32);
}

typedef struct net {
    ct_graph *graph;
    ct_tensor *x, *logits, *probabilities;
} net;

/* conv (bias) -> batchnorm -> relu -> maxpool -> flatten -> linear (bias),
 * and relu -> global average pool -> softmax.  precision: the graph's;
 * by_hand: the 16-bit type to round to by hand in an f32 graph (CT_F32:
 * none). */
static net build_net(ct_precision precision, ct_dtype by_hand)
{
    net n = {.graph = ct_graph_new()};
    ct_graph *g = n.graph;
    ct_dtype h = by_hand;
    n.x = ct_input(g, "x", CT_F32, 4, (int64_t[]){4, 3, 8, 8});
    CHECK_OK(ct_graph_set_precision(g, precision));
    ct_tensor *w1 = ct_param(g, "w1", 4, (int64_t[]){6, 3, 3, 3}, CT_INIT_UNIFORM, 0.5f);
    ct_tensor *b1 = ct_param(g, "b1", 1, (int64_t[]){6}, CT_INIT_UNIFORM, 0.5f);
    ct_tensor *gamma = ct_param(g, "gamma", 1, (int64_t[]){6}, CT_INIT_UNIFORM, 1.0f);
    ct_tensor *beta = ct_param(g, "beta", 1, (int64_t[]){6}, CT_INIT_UNIFORM, 0.5f);
    ct_tensor *mean = ct_buffer(g, "mean", CT_F32, 1, (int64_t[]){6}, CT_INIT_CONST, 0.0f);
    ct_tensor *var = ct_buffer(g, "var", CT_F32, 1, (int64_t[]){6}, CT_INIT_CONST, 1.0f);
    ct_tensor *w2 = ct_param(g, "w2", 2, (int64_t[]){5, 96}, CT_INIT_UNIFORM, 0.2f);
    ct_tensor *b2 = ct_param(g, "b2", 1, (int64_t[]){5}, CT_INIT_UNIFORM, 0.2f);
    ct_tensor *y = ct_conv2d(g, rounded(g, n.x, h), rounded(g, w1, h), b1,
                             (ct_conv_args){.pad = {1, 1}});
    y = rounded(g, ct_batchnorm2d(g, rounded(g, y, h), gamma, beta, mean, var, 1e-5f, 0.1f), h);
    ct_tensor *r = ct_relu(g, y);
    ct_tensor *p = rounded(g, ct_maxpool2d(g, r, (ct_pool_args){.kernel = {2, 2}}), h);
    ct_tensor *flat = ct_flatten(g, p);
    n.logits = rounded(g, ct_linear(g, flat, rounded(g, w2, h), b2), h);
    ct_tensor *pooled = rounded(g, ct_global_avgpool(g, r), h);
    n.probabilities = ct_softmax(g, ct_flatten(g, pooled));
    ct_tensor_keep(n.logits);
    ct_tensor_keep(n.probabilities);
    CHECK_OK(ct_graph_status(g));
    return n;
}

static void run_net(net *n, ct_backend *backend, float *logits, float *probabilities)
{
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(n->graph, backend, 7, &plan));
    if (!plan)
        return;
    float x[4 * 3 * 8 * 8];
    harness_fill(x, 4 * 3 * 8 * 8, 3, -2.0f, 2.0f);
    CHECK_OK(ct_plan_write(plan, n->x, x, sizeof x));
    CHECK_OK(ct_plan_run(plan, CT_TRAIN));
    CHECK_OK(ct_plan_read_f32(plan, n->logits, logits, 20));
    CHECK_OK(ct_plan_read_f32(plan, n->probabilities, probabilities, 24));
    ct_plan_free(plan);
}

static void autocast_places_16_bit_values(void)
{
    net n = build_net(CT_PRECISION_BF16, CT_F32);
    const ct_tensor *logits = n.logits;
    CHECK(logits->op == CT_OP_LINEAR && logits->dtype == CT_BF16, "logits %s",
          ct_dtype_name(logits->dtype));
    const ct_tensor *w2_copy = logits->src[1];
    CHECK(w2_copy->op == CT_OP_CAST && w2_copy->src[0]->role == CT_ROLE_PARAM &&
              w2_copy->dtype == CT_BF16,
          "the linear weight is not a bf16 copy of the parameter");
    CHECK(logits->src[2]->dtype == CT_F32 && logits->src[2]->role == CT_ROLE_PARAM,
          "the bias must stay the f32 parameter");
    CHECK(n.probabilities->dtype == CT_F32 && n.probabilities->src[0]->op == CT_OP_CAST,
          "softmax must compute in f32 from a cast");
    for (int i = 0; i < ct_graph_n_state(n.graph); i++)
        CHECK(ct_tensor_dtype(ct_graph_state(n.graph, i)) == CT_F32, "state %d not f32", i);
    /* a weight shared by two layers is converted once */
    ct_graph *g = ct_graph_new();
    CHECK_OK(ct_graph_set_precision(g, CT_PRECISION_FP16));
    ct_tensor *x = ct_input(g, "x", CT_F32, 2, (int64_t[]){2, 4});
    ct_tensor *w = ct_param(g, "w", 2, (int64_t[]){4, 4}, CT_INIT_UNIFORM, 1.0f);
    ct_tensor *a = ct_linear(g, x, w, NULL), *b = ct_linear(g, a, w, NULL);
    CHECK(a->src[1] == b->src[1] && a->src[1]->dtype == CT_F16 && b->src[0] == a,
          "one fp16 copy of the weight, the fp16 activation passed on as it is");
    ct_tensor *loss = ct_cross_entropy(g, b, ct_input(g, "l", CT_I64, 1, (int64_t[]){2}), 0.0f);
    CHECK(loss && loss->dtype == CT_F32, "the loss is f32");
    CHECK_OK(ct_graph_backward(g, loss));
    CHECK(ct_tensor_grad(w) && ct_tensor_dtype(ct_tensor_grad(w)) == CT_F32,
          "the parameter's gradient is f32");
    ct_graph_free(g);
    ct_graph_free(n.graph);
}

/* The graph under `precision` against the f32 graph rounded by hand, on
 * `backend`: bit for bit when exact, else within `ulps` units in the last
 * place of the 16-bit type (relative to the largest output). */
static void compare_with_hand_rounding(ct_backend *backend, double ulps)
{
    const struct {
        ct_precision precision;
        ct_dtype dtype;
        double ulp;
    } cases[2] = {{CT_PRECISION_BF16, CT_BF16, 0x1p-8}, {CT_PRECISION_FP16, CT_F16, 0x1p-11}};
    for (int c = 0; c < 2; c++) {
        net autocast = build_net(cases[c].precision, CT_F32);
        net by_hand = build_net(CT_PRECISION_FP32, cases[c].dtype);
        net exact = build_net(CT_PRECISION_FP32, CT_F32);
        float logits[3][20], probabilities[3][24];
        run_net(&autocast, backend, logits[0], probabilities[0]);
        run_net(&by_hand, backend, logits[1], probabilities[1]);
        run_net(&exact, backend, logits[2], probabilities[2]);
        /* what the 16 bits cost against f32: a few of their units */
        double lost = harness_rel_err_f32(logits[0], logits[2], 20);
        fprintf(stderr, "  %s against f32: logits off by %.3g (%.3g ulps of %s)\n",
                ct_precision_name(cases[c].precision), lost, lost / cases[c].ulp,
                ct_dtype_name(cases[c].dtype));
        CHECK(lost <= 16 * cases[c].ulp && lost > 0, "%s: %g from f32",
              ct_precision_name(cases[c].precision), lost);
        if (ulps == 0) {
            CHECK(memcmp(logits[0], logits[1], sizeof logits[0]) == 0 &&
                      memcmp(probabilities[0], probabilities[1], sizeof probabilities[0]) == 0,
                  "%s: autocast differs from the hand-rounded f32 graph",
                  ct_precision_name(cases[c].precision));
        } else {
            double e1 = harness_rel_err_f32(logits[0], logits[1], 20);
            double e2 = harness_rel_err_f32(probabilities[0], probabilities[1], 24);
            fprintf(stderr, "  %s: logits %.3g ulps, probabilities %.3g ulps\n",
                    ct_precision_name(cases[c].precision), e1 / cases[c].ulp, e2 / cases[c].ulp);
            CHECK(e1 <= ulps * cases[c].ulp && e2 <= ulps * cases[c].ulp,
                  "%s: %.3g and %.3g ulps", ct_precision_name(cases[c].precision),
                  e1 / cases[c].ulp, e2 / cases[c].ulp);
        }
        ct_graph_free(autocast.graph);
        ct_graph_free(by_hand.graph);
        ct_graph_free(exact.graph);
    }
}

/* ---- training ------------------------------------------------------------------------- */

/* Under a sanitizer (ASan makes the emulated GPU some 30 times slower) the
 * runs are short: they still track f32, too few steps to learn much. */
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
/* The CPU trains TRAIN_STEPS (enough to learn the batch), a GPU the first
 * GPU_STEPS of them (the emulated GPU is slow; tracking shows from the
 * first steps). */
#ifdef SANITIZED
enum { TRAIN_BATCH = 16, TRAIN_STEPS = 6, GPU_STEPS = 4 };
#else
enum { TRAIN_BATCH = 16, TRAIN_STEPS = 30, GPU_STEPS = 10 };
#endif

/* SimpleCNN with Adam, `steps` steps on one fixed batch; the loss of every
 * step into losses[]. */
static void train_simplecnn(ct_backend *backend, ct_precision precision, int steps,
                            float *losses)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){TRAIN_BATCH, 1, 28, 28});
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){TRAIN_BATCH});
    CHECK_OK(ct_graph_set_precision(g, precision));
    ct_tensor *loss = ct_cross_entropy(g, ct_model_simplecnn(g, x, 10), labels, 0.0f);
    CHECK_OK(ct_graph_backward(g, loss));
    ct_adam_args adam = ct_adam_defaults();
    adam.lr = 3e-3f;
    CHECK_OK(ct_graph_adam(g, adam));
    ct_plan *plan = NULL;
    CHECK_OK(ct_plan_new(g, backend, 5, &plan));
    float images[TRAIN_BATCH * 28 * 28];
    int64_t classes[TRAIN_BATCH];
    harness_fill(images, TRAIN_BATCH * 28 * 28, 9, 0.0f, 0.5f);
    for (int i = 0; i < TRAIN_BATCH; i++) { /* a bright row per class */
        classes[i] = i % 10;
        for (int col = 0; col < 28; col++)
            images[i * 28 * 28 + (2 + 2 * classes[i]) * 28 + col] += 1.0f;
    }
    for (int s = 0; plan && s < steps; s++) {
        CHECK_OK(ct_plan_write(plan, x, images, sizeof images));
        CHECK_OK(ct_plan_write(plan, labels, classes, sizeof classes));
        CHECK_OK(ct_plan_run(plan, CT_TRAIN));
        CHECK_OK(ct_plan_read(plan, loss, &losses[s], sizeof *losses));
    }
    for (int i = 0; i < ct_graph_n_state(g); i++)
        CHECK(ct_tensor_dtype(ct_graph_state(g, i)) == CT_F32, "state %d is not f32", i);
    ct_plan_free(plan);
    ct_graph_free(g);
}

/* bf16 and fp16 follow the f32 run over `steps`: the same start, the loss
 * falling as far, every step's loss close to f32's; their losses into
 * half[].  `reference` (may be NULL): the CPU's losses in bf16 and fp16,
 * which a GPU's must match closely. */
static void training_tracks_fp32(ct_backend *backend, int steps, float half[2][TRAIN_STEPS],
                                 float reference[2][TRAIN_STEPS])
{
    float f32[TRAIN_STEPS];
    train_simplecnn(backend, CT_PRECISION_FP32, steps, f32);
    CHECK(steps < 30 || f32[steps - 1] < 0.5f * f32[0], "f32 did not learn: %g -> %g",
          (double)f32[0], (double)f32[steps - 1]);
    for (int p = 0; p < 2; p++) {
        ct_precision precision = p == 0 ? CT_PRECISION_BF16 : CT_PRECISION_FP16;
        train_simplecnn(backend, precision, steps, half[p]);
        double worst = 0;
        for (int s = 0; s < steps; s++) {
            double gap = fabs((double)half[p][s] - (double)f32[s]);
            worst = gap > worst ? gap : worst;
        }
        fprintf(stderr, "  %s: loss %.4f -> %.4f (f32 %.4f -> %.4f), largest gap %.4f\n",
                ct_precision_name(precision), (double)half[p][0],
                (double)half[p][steps - 1], (double)f32[0], (double)f32[steps - 1], worst);
        CHECK(fabs((double)half[p][0] - (double)f32[0]) < 0.02,
              "%s: the first loss %g is not f32's %g", ct_precision_name(precision),
              (double)half[p][0], (double)f32[0]);
        CHECK(worst < 0.1 + 0.1 * (double)f32[0], "%s strays from f32 by %g",
              ct_precision_name(precision), worst);
        if (reference) {
            double gap = 0;
            for (int s = 0; s < steps; s++)
                gap = fmax(gap, fabs((double)half[p][s] - (double)reference[p][s]));
            CHECK(gap < 0.02, "%s: the device's losses differ from the CPU reference's by %g",
                  ct_precision_name(precision), gap);
        }
    }
}

/* ---- bad input ------------------------------------------------------------------------ */

static void bad_input(void)
{
    ct_graph *g = ct_graph_new();
    CHECK(ct_graph_set_precision(g, (ct_precision)9) == CT_ERR_ARG, "precision 9 accepted");
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){2});
    CHECK(ct_cast(g, labels, CT_F16) == NULL && ct_graph_status(g) == CT_ERR_DTYPE,
          "an i64 cast to f16");
    ct_graph_free(g);

    g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 2, (int64_t[]){2, 3});
    CHECK(ct_cast(g, x, CT_I32) == NULL && ct_graph_status(g) == CT_ERR_DTYPE, "cast to i32");
    ct_graph_free(g);

    /* tf32 is a GPU math: the CPU says so */
    g = ct_graph_new();
    x = ct_input(g, "x", CT_F32, 2, (int64_t[]){2, 3});
    CHECK_OK(ct_graph_set_precision(g, CT_PRECISION_TF32));
    ct_tensor *w = ct_param(g, "w", 2, (int64_t[]){4, 3}, CT_INIT_UNIFORM, 1);
    ct_tensor *y = ct_linear(g, x, w, NULL);
    ct_tensor_keep(y);
    ct_backend *cpu = NULL;
    CHECK_OK(ct_backend_new("cpu", &cpu));
    ct_plan *plan = NULL;
    CHECK(ct_plan_new(g, cpu, 1, &plan) == CT_ERR_UNSUPPORTED && !plan, "tf32 on the CPU");
    CHECK(strstr(ct_last_error(), "fp32"), "the error offers no choice: %s", ct_last_error());
    /* reading a 16-bit output whole, as floats only */
    CHECK_OK(ct_graph_set_precision(g, CT_PRECISION_BF16));
    ct_graph_free(g);
    g = ct_graph_new();
    x = ct_input(g, "x", CT_F32, 2, (int64_t[]){2, 3});
    CHECK_OK(ct_graph_set_precision(g, CT_PRECISION_BF16));
    y = ct_linear(g, x, ct_param(g, "w", 2, (int64_t[]){4, 3}, CT_INIT_UNIFORM, 1), NULL);
    ct_tensor_keep(y);
    CHECK_OK(ct_plan_new(g, cpu, 1, &plan));
    float out[8];
    CHECK(ct_plan_read_f32(plan, y, out, 7) == CT_ERR_ARG, "a short read accepted");
    CHECK(ct_plan_read_f32(plan, x, out, 6) == CT_OK, "an f32 tensor read as floats");
    CHECK(ct_plan_read(plan, y, out, 16) == CT_OK, "the bf16 bytes themselves");
    ct_plan_free(plan);
    ct_graph_free(g);
    ct_backend_free(cpu);
}

/* ---- main ---------------------------------------------------------------------------- */

/* Whether the implementation named `name` of `op` has run on `backend`. */
static bool impl_ran(const ct_backend *backend, ct_op op, const char *name)
{
    const ct_impl *const *list = NULL;
    int count = ct_impl_list(backend, op, &list);
    for (int i = 0; i < count; i++)
        if (strcmp(list[i]->name, name) == 0)
            return ct_impl_has_run(backend, op, i);
    return false;
}

/* conv (no bias) -> relu -> conv (bias) -> relu -> linear (bias) ->
 * cross-entropy, a training step in bf16 and in fp16 on a fresh CUDA
 * backend's vendor kernels: every convolution and linear node is 16-bit, so
 * what ran, ran on 16-bit tensors. */
static void cuda_vendor_runs_16_bit_layers_on_the_libraries(void)
{
    const ct_precision precisions[] = {CT_PRECISION_BF16, CT_PRECISION_FP16};
    for (int p = 0; p < 2; p++) {
        ct_backend *backend = NULL;
        CHECK_OK(ct_backend_new("cuda", &backend));
        CHECK_OK(ct_backend_set_kernels(backend, "vendor"));
        ct_graph *g = ct_graph_new();
        ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){2, 3, 6, 6});
        ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, (int64_t[]){2});
        CHECK_OK(ct_graph_set_precision(g, precisions[p]));
        ct_tensor *w1 = ct_param(g, "w1", 4, (int64_t[]){4, 3, 3, 3}, CT_INIT_UNIFORM, 0.5f);
        ct_tensor *w2 = ct_param(g, "w2", 4, (int64_t[]){5, 4, 6, 6}, CT_INIT_UNIFORM, 0.2f);
        ct_tensor *b2 = ct_param(g, "b2", 1, (int64_t[]){5}, CT_INIT_UNIFORM, 0.2f);
        ct_tensor *h = ct_relu(g, ct_conv2d(g, x, w1, NULL, (ct_conv_args){.pad = {1, 1}}));
        ct_tensor *w3 = ct_param(g, "w3", 2, (int64_t[]){7, 5}, CT_INIT_UNIFORM, 0.3f);
        ct_tensor *b3 = ct_param(g, "b3", 1, (int64_t[]){7}, CT_INIT_UNIFORM, 0.3f);
        ct_tensor *z = ct_relu(g, ct_flatten(g, ct_conv2d(g, h, w2, b2, (ct_conv_args){0})));
        ct_tensor *loss = ct_cross_entropy(g, ct_linear(g, z, w3, b3), labels, 0.0f);
        CHECK_OK(ct_graph_backward(g, loss));
        ct_plan *plan = NULL;
        CHECK_OK(ct_plan_new(g, backend, 3, &plan));
        float images[2 * 3 * 6 * 6];
        int64_t classes[2] = {1, 3};
        harness_fill(images, 2 * 3 * 6 * 6, 5, -1.0f, 1.0f);
        float value = NAN;
        if (plan) {
            CHECK_OK(ct_plan_write(plan, x, images, sizeof images));
            CHECK_OK(ct_plan_write(plan, labels, classes, sizeof classes));
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
            CHECK_OK(ct_plan_read(plan, loss, &value, sizeof value));
        }
        CHECK(isfinite(value), "%s: loss %g", ct_precision_name(precisions[p]), value);
        const char *name = ct_precision_name(precisions[p]);
        CHECK(impl_ran(backend, CT_OP_CONV2D, "cudnn") &&
                  !impl_ran(backend, CT_OP_CONV2D, "tensor_core"),
              "%s: forward not on cuDNN", name);
        CHECK(impl_ran(backend, CT_OP_CONV2D_BWD_DATA, "cudnn") &&
                  !impl_ran(backend, CT_OP_CONV2D_BWD_DATA, "tensor_core"),
              "%s: backward data not on cuDNN", name);
        CHECK(impl_ran(backend, CT_OP_CONV2D_BWD_WEIGHT, "cudnn") &&
                  !impl_ran(backend, CT_OP_CONV2D_BWD_WEIGHT, "tensor_core"),
              "%s: backward weight not on cuDNN", name);
        const ct_op linear_ops[] = {CT_OP_LINEAR, CT_OP_LINEAR_BWD_DATA,
                                    CT_OP_LINEAR_BWD_WEIGHT};
        for (int i = 0; i < 3; i++)
            CHECK(impl_ran(backend, linear_ops[i], "cublas") &&
                      !impl_ran(backend, linear_ops[i], "tensor_core"),
                  "%s: %s not on cuBLAS", name, ct_op_name(linear_ops[i]));
        ct_plan_free(plan);
        ct_graph_free(g);
        ct_backend_free(backend);
    }
}

/* ---- the loss's gradient fused into the loss -------------------------------------- */

/* x [rows, 24] -> linear (no bias: a bias gradient fused into the weight
 * gradient may add in another order) -> cross-entropy over `classes`
 * (smoothing 0.1), SGD; three steps on `backend` and on an unfused copy
 * of it give the same
 * loss and weights, bit for bit, and the fused plan runs no
 * cross_entropy_bwd and no fill where `fused` says it should. */
static void check_loss_grad_fused(const char *device, ct_precision precision, int rows,
                                  int classes, bool fused)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 2, (int64_t[]){rows, 24});
    ct_tensor *labels = ct_input(g, "labels", CT_I32, 1, (int64_t[]){rows});
    CHECK_OK(ct_graph_set_precision(g, precision));
    ct_tensor *w = ct_param(g, "w", 2, (int64_t[]){classes, 24}, CT_INIT_UNIFORM, 0.5f);
    ct_tensor *loss = ct_cross_entropy(g, ct_linear(g, x, w, NULL), labels, 0.1f);
    CHECK_OK(ct_graph_backward(g, loss));
    CHECK_OK(ct_graph_sgd(g, (ct_sgd_args){.lr = 0.1f, .momentum = 0.9f}));
    ct_backend *backends[2] = {NULL, NULL};
    ct_plan *plans[2] = {NULL, NULL};
    float losses[2][3], *weights[2] = {NULL, NULL};
    size_t w_bytes = (size_t)classes * 24 * sizeof(float);
    float *input = malloc(sizeof(float) * (size_t)rows * 24);
    int32_t *classes_of = malloc(sizeof(int32_t) * (size_t)rows);
    harness_fill(input, (int64_t)rows * 24, 17, -2.0f, 2.0f);
    for (int i = 0; i < rows; i++)
        classes_of[i] = (i * 7) % classes;
    for (int k = 0; k < 2; k++) {
        CHECK_OK(ct_backend_new(device, &backends[k]));
        if (!backends[k])
            goto done;
        backends[k]->unfused = k == 1;
        CHECK_OK(ct_plan_new(g, backends[k], 3, &plans[k]));
        if (!plans[k])
            goto done;
        for (int step = 0; step < 3; step++) {
            CHECK_OK(ct_plan_write(plans[k], x, input, sizeof(float) * (size_t)rows * 24));
            CHECK_OK(ct_plan_write(plans[k], labels, classes_of, sizeof(int32_t) * (size_t)rows));
            CHECK_OK(ct_plan_run(plans[k], CT_TRAIN));
            CHECK_OK(ct_plan_read(plans[k], loss, &losses[k][step], sizeof(float)));
        }
        weights[k] = malloc(w_bytes);
        CHECK_OK(ct_plan_read(plans[k], w, weights[k], w_bytes));
    }
    int fused_runs = ct_plan_count_runs(plans[0], CT_TRAIN, CT_OP_CROSS_ENTROPY_BWD) +
                     ct_plan_count_runs(plans[0], CT_TRAIN, CT_OP_FILL);
    CHECK(fused ? fused_runs == 0 : fused_runs == 2,
          "%s %s, %d x %d: %d cross_entropy_bwd and fill run (want %d)", device,
          ct_precision_name(precision), rows, classes, fused_runs, fused ? 0 : 2);
    CHECK(ct_plan_count_runs(plans[1], CT_TRAIN, CT_OP_CROSS_ENTROPY_BWD) == 1,
          "the unfused plan has no backward");
    CHECK(memcmp(losses[0], losses[1], sizeof losses[0]) == 0 &&
              memcmp(weights[0], weights[1], w_bytes) == 0,
          "%s %s, %d x %d: fused and unfused differ (losses %.9g %.9g, %.9g %.9g)", device,
          ct_precision_name(precision), rows, classes, losses[0][2], losses[1][2],
          losses[0][0], losses[1][0]);
done:
    for (int k = 0; k < 2; k++) {
        ct_plan_free(plans[k]);
        ct_backend_free(backends[k]);
        free(weights[k]);
    }
    free(input);
    free(classes_of);
    ct_graph_free(g);
}

static void cpu_loss_gradient_fused_in(void)
{
    check_loss_grad_fused("cpu", CT_PRECISION_FP32, 64, 10, true);
    check_loss_grad_fused("cpu", CT_PRECISION_FP32, 5000, 3, true); /* parallel rows */
    /* 16-bit logits: the CPU rounds only a node's own outputs (cpu/widen.c) */
    check_loss_grad_fused("cpu", CT_PRECISION_BF16, 8, 10, false);
}

static void cuda_loss_gradient_fused_in(void)
{
    const ct_precision precisions[3] = {CT_PRECISION_FP32, CT_PRECISION_BF16, CT_PRECISION_FP16};
    for (int p = 0; p < 3; p++) {
        check_loss_grad_fused("cuda", precisions[p], 64, 10, true);   /* a thread a row */
        check_loss_grad_fused("cuda", precisions[p], 600, 100, true); /* warps, 15 groups */
        check_loss_grad_fused("cuda", precisions[p], 6, 1000, true);  /* read in place */
    }
    /* past one block's share: the backward kernel's blocks */
    check_loss_grad_fused("cuda", CT_PRECISION_FP32, 80, 1000, false);
}

static ct_backend *cpu_backend, *cuda_backend;
static float cpu_losses[2][TRAIN_STEPS];

static void cpu_reference_rounds_where_a_gpu_stores(void)
{
    compare_with_hand_rounding(cpu_backend, 0);
}

static void cpu_training_tracks_fp32(void)
{
    training_tracks_fp32(cpu_backend, TRAIN_STEPS, cpu_losses, NULL);
}

static void cuda_matches_the_cpu_reference(void)
{
    compare_with_hand_rounding(cuda_backend, 2);
}

static void cuda_training_tracks_fp32(void)
{
    float losses[2][TRAIN_STEPS];
    training_tracks_fp32(cuda_backend, GPU_STEPS, losses, cpu_losses);
}

int main(void)
{
    RUN(conversions_round_trip);
    RUN(conversions_round_to_nearest_even);
    RUN(precision_names);
    RUN(autocast_places_16_bit_values);
    RUN(bad_input);
    if (ct_backend_new("cpu", &cpu_backend) != CT_OK)
        return 1;
    RUN(cpu_reference_rounds_where_a_gpu_stores);
    RUN(cpu_training_tracks_fp32);
    RUN(cpu_loss_gradient_fused_in);
    if (ct_backend_new("cuda", &cuda_backend) == CT_OK) {
        RUN(cuda_matches_the_cpu_reference);
        RUN(cuda_training_tracks_fp32);
        RUN(cuda_vendor_runs_16_bit_layers_on_the_libraries);
        RUN(cuda_loss_gradient_fused_in);
        ct_backend_free(cuda_backend);
    } else if (getenv("CT_REQUIRE_GPU")) {
        printf("FAIL cuda_cases (no CUDA device: %s)\n", ct_last_error());
        harness_failed++;
    } else {
        fprintf(stderr, "test_precision: skipped 4 CUDA cases: %s\n", ct_last_error());
    }
    ct_backend_free(cpu_backend);
    return harness_finish();
}
