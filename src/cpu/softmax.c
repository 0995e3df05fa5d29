/*
 * Softmax and softmax cross-entropy over the rows of [n, c].
 *
 * Each row subtracts its maximum before exponentiating, so exp never
 * overflows, and sums in double in column order.  Rows run in parallel; the
 * cross-entropy mean adds per-row losses sequentially in row order, so every
 * result is the same for any thread count.  Outputs are written with =.
 * The per-element and per-row formulas are core/math_shared.h's, shared with
 * the CUDA kernels.
 */
#include <math.h>

#include "core/math_shared.h"
#include "cpu/kernels.h"
#include "cpu/threads.h"

/* Below this many elements (each an exp) a parallel region costs more than
 * it saves: SimpleCNN's [64, 10] logits run on one thread. */
#define PARALLEL_MIN_ELEMENTS 8192
/* The loss with its gradient takes two exps and a log in double an element
 * (about 15 ns): SimpleCNN's [64, 10] took 10 us on one thread, and a
 * parallel region costs 1-2 us. */
#define LOSS_PARALLEL_MIN_ELEMENTS 512

/* Rows whose losses are held on the stack before the sequential sum. */
#define LOSS_ROWS_PER_CHUNK 1024

static float row_max(int c, const float *x)
{
    float m = x[0];
    for (int j = 1; j < c; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* y[i,j] = exp(x[i,j] - max_j x[i,:]) / sum_k exp(x[i,k] - max);  x, y: [n, c] */
void ct_cpu_softmax_forward(int n, int c, const float *x, float *y)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int row = 0; row < n; row++) {
        const float *restrict xr = x + (int64_t)row * c;
        float *restrict yr = y + (int64_t)row * c;
        float m = row_max(c, xr);
        double sum = 0;
        for (int j = 0; j < c; j++) {
            yr[j] = ct_softmax_exp(xr[j], m);
            sum += yr[j];
        }
        for (int j = 0; j < c; j++)
            yr[j] = ct_softmax_normalize(yr[j], sum);
    }
}

/* dx[i,j] = y[i,j] * (dy[i,j] - sum_k dy[i,k] y[i,k]);  y, dy, dx: [n, c] */
void ct_cpu_softmax_backward(int n, int c, const float *y, const float *dy, float *dx)
{
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int row = 0; row < n; row++) {
        const float *restrict yr = y + (int64_t)row * c;
        const float *restrict dyr = dy + (int64_t)row * c;
        float *restrict dxr = dx + (int64_t)row * c;
        double dot = 0;
        for (int j = 0; j < c; j++)
            dot += (double)dyr[j] * yr[j];
        for (int j = 0; j < c; j++)
            dxr[j] = ct_softmax_grad(yr[j], dyr[j], dot);
    }
}

static int64_t label_at(const void *labels, bool labels_i64, int row)
{
    return labels_i64 ? ((const int64_t *)labels)[row] : ((const int32_t *)labels)[row];
}

/* -1 if every label is in [0, c), else the first row whose label is not. */
static int first_bad_label(int n, int c, const void *labels, bool labels_i64)
{
    for (int row = 0; row < n; row++) {
        int64_t label = label_at(labels, labels_i64, row);
        if (label < 0 || label >= c)
            return row;
    }
    return -1;
}

/* log sum_j exp(x_j) of one row, in double. */
static double row_logsumexp(int c, const float *x)
{
    double m = row_max(c, x), sum = 0;
    for (int j = 0; j < c; j++)
        sum += ct_lse_term(x[j], m);
    return ct_logsumexp(m, sum);
}

/* -(1-s) log p[label] - (s/c) sum_j log p[j] of one row whose log-sum-exp is lse. */
static double row_loss(int c, const float *x, int64_t label, double smoothing, double lse)
{
    double sum_log_p = 0;
    for (int j = 0; j < c; j++)
        sum_log_p += ct_log_softmax(x[j], lse);
    return ct_cross_entropy_row(ct_log_softmax(x[label], lse), sum_log_p, smoothing, c);
}

/* The gradient of one row's logits, dr = grad's scale * (p - target). */
static void row_grad(const ct_ce_grad *grad, int c, const float *restrict x, int64_t label,
                     double lse, float *restrict dr)
{
    for (int j = 0; j < c; j++)
        dr[j] = ct_ce_dlogit(grad, x[j], lse, j == label);
}

/* loss[0] = mean_i row_loss(logits[i,:], labels[i]);  logits: [n, c], labels: [n].
 * dlogits (NULL: none) also gets cross_entropy_backward's result for a
 * dloss of `dloss`, each row's log-sum-exp computed once for both: the
 * same bits as the backward alone.  On a bad label nothing is read past
 * it and nothing written to dlogits: returns its row, loss[0] = NaN. */
typedef struct loss_job {
    int first, c;
    const float *logits;
    const void *labels;
    bool labels_i64;
    float label_smoothing;
    const ct_ce_grad *grad;
    double *losses;
    float *dlogits;
    int rows;
} loss_job;

/* One thread's rows of a chunk of ct_cpu_cross_entropy_forward. */
static void loss_part(void *arg)
{
    const loss_job *j = arg;
    int64_t lo, hi;
    ct_cpu_split(j->rows, &lo, &hi);
    for (int r = (int)lo; r < hi; r++) {
        int64_t at = (int64_t)(j->first + r) * j->c;
        int64_t label = label_at(j->labels, j->labels_i64, j->first + r);
        double lse = row_logsumexp(j->c, j->logits + at);
        j->losses[r] = row_loss(j->c, j->logits + at, label, j->label_smoothing, lse);
        if (j->dlogits)
            row_grad(j->grad, j->c, j->logits + at, label, lse, j->dlogits + at);
    }
}

int ct_cpu_cross_entropy_forward(int n, int c, const float *logits, const void *labels,
                                 bool labels_i64, float label_smoothing, float dloss,
                                 float *loss, float *dlogits)
{
    int bad_row = first_bad_label(n, c, labels, labels_i64);
    if (bad_row >= 0) {
        *loss = NAN;
        return bad_row;
    }
    ct_ce_grad grad = ct_ce_grad_of(dloss, n, label_smoothing, c);
    double total = 0;
    for (int first = 0; first < n; first += LOSS_ROWS_PER_CHUNK) {
        double losses[LOSS_ROWS_PER_CHUNK];
        int rows = n - first < LOSS_ROWS_PER_CHUNK ? n - first : LOSS_ROWS_PER_CHUNK;
        loss_job job = {first, c, logits, labels, labels_i64, label_smoothing, &grad, losses,
                        dlogits, rows};
        bool parallel = (int64_t)rows * c >= LOSS_PARALLEL_MIN_ELEMENTS;
        ct_cpu_parallel(parallel ? ct_cpu_max_threads() : 1, loss_part, &job);
        for (int r = 0; r < rows; r++)
            total += losses[r];
    }
    *loss = (float)(total / n);
    return -1;
}

/* dlogits[i,j] = dloss[0]/n * (softmax(logits[i,:])_j - target_ij),
 * target_ij = (1-s)*[j == label_i] + s/c.  A label out of range only drops
 * the one-hot term; the forward pass reports it. */
void ct_cpu_cross_entropy_backward(int n, int c, const float *logits, const void *labels,
                                   bool labels_i64, float label_smoothing, const float *dloss,
                                   float *dlogits)
{
    ct_ce_grad grad = ct_ce_grad_of(dloss[0], n, label_smoothing, c);
    ct_cpu_openmp_region();
#pragma omp parallel for if ((int64_t)n * c >= PARALLEL_MIN_ELEMENTS) schedule(static)
    for (int row = 0; row < n; row++) {
        const float *xr = logits + (int64_t)row * c;
        row_grad(&grad, c, xr, label_at(labels, labels_i64, row), row_logsumexp(c, xr),
                 dlogits + (int64_t)row * c);
    }
}
