/*
 * A custom op's own CUDA kernels on the emulated GPU: the Mish of
 * examples/custom_op (its CPU kernels, its CUDA kernels launched with
 * CT_LAUNCH, exactly as a user writes them) trains on the CPU and on
 * cuda:0, strictly (no CPU fallback), with the same losses.  Built only
 * with `make CUDA=emu` (its kernels compile for the emulator here; nvcc
 * builds them in examples/custom_op with `make CUDA=1`).
 */
#define MISH_CUDA 1
#include "../examples/custom_op/mish_cuda.cu" /* mish.c is linked (Makefile) */

extern "C" {
#include "harness.h"
}

enum { BATCH = 32, FEATURES = 6, CLASSES = 3, STEPS = 20 };

static bool train(const char *device, float *losses)
{
    ct_graph *g = ct_graph_new();
    const int64_t x_shape[4] = {BATCH, FEATURES, 1, 1}, label_shape[1] = {BATCH};
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, x_shape);
    ct_tensor *labels = ct_input(g, "labels", CT_I64, 1, label_shape);
    ct_tensor *logits = ct_model_build(
        g, "model m\nflatten\nfc1: linear 16\ncustom mish\nfc2: linear classes\n", x, CLASSES);
    ct_tensor *loss = ct_cross_entropy(g, logits, labels, 0.0f);
    ct_tensor_keep(loss);
    CHECK_OK(ct_graph_status(g));
    CHECK_OK(ct_graph_backward(g, loss));
    CHECK_OK(ct_graph_sgd(g, ct_sgd_args{0.1f, 0.9f, 0.0f, 0.0f, false}));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    bool ran = ct_backend_new(device, &backend) == CT_OK;
    if (ran) {
        CHECK_OK(ct_backend_set_strict(backend, true)); /* the op's own CUDA kernels, or fail */
        CHECK_OK(ct_plan_new(g, backend, 3, &plan));
        float xs[BATCH * FEATURES];
        int64_t ys[BATCH];
        harness_fill(xs, BATCH * FEATURES, 9, -1.0f, 1.0f);
        for (int i = 0; i < BATCH; i++)
            ys[i] = (xs[i * FEATURES] > 0) + (xs[i * FEATURES + 1] > 0.3f);
        CHECK_OK(ct_plan_write(plan, x, xs, sizeof xs));
        CHECK_OK(ct_plan_write(plan, labels, ys, sizeof ys));
        for (int s = 0; s < STEPS && plan; s++) {
            CHECK_OK(ct_plan_run(plan, CT_TRAIN));
            CHECK_OK(ct_plan_read(plan, loss, &losses[s], sizeof(float)));
        }
    }
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
    return ran;
}

static void mish_kernels_train_on_the_gpu(void)
{
    float cpu[STEPS], gpu[STEPS];
    CHECK(train("cpu", cpu), "cpu");
    CHECK(train("cuda", gpu), "no emulated GPU: %s", ct_last_error());
    for (int s = 0; s < STEPS; s++)
        CHECK(fabsf(cpu[s] - gpu[s]) <= 1e-4f * fabsf(cpu[s]) + 1e-6f,
              "step %d: cpu %.7g, cuda %.7g", s, cpu[s], gpu[s]);
    CHECK(gpu[STEPS - 1] < gpu[0], "loss %g -> %g", gpu[0], gpu[STEPS - 1]);
}

int main(void)
{
    CHECK_OK(mish_register());
    RUN(mish_kernels_train_on_the_gpu);
    return harness_finish();
}
