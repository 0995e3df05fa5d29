/*
 * cuttle train: train a model on a dataset's training split, evaluating on
 * its test split after every epoch.
 *
 * The default recipe (what the options default to): SGD with Nesterov
 * momentum 0.9 and weight decay 5e-4, batch 64, 15 epochs, a one-cycle
 * learning rate (linear warm-up from peak/25 to the peak 0.05 over the first
 * 30% of the steps, then a cosine down to peak/25/1e4, as PyTorch's
 * OneCycleLR), no label smoothing.  The training set is reshuffled every
 * epoch from the seed, and the last partial batch is dropped, so one seed
 * gives one run.
 *
 * A plan runs a graph of one batch size, so evaluation has its own graph
 * (forward only, batch EVAL_BATCH) and plan; the weights are copied into it
 * from the training plan by name before each evaluation.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_EPOCHS 15
#define DEFAULT_BATCH 64
#define DEFAULT_SEED 1
#define SGD_PEAK_LR 0.05
#define SGD_MOMENTUM 0.9f
#define SGD_WEIGHT_DECAY 5e-4
#define ADAMW_PEAK_LR 0.002
#define ADAMW_WEIGHT_DECAY 0.01
#define WARMUP_FRACTION 0.3
#define ONE_CYCLE_START_DIV 25.0  /* the first lr is peak / 25 */
#define ONE_CYCLE_FINAL_DIV 1e4   /* the last is the first / 1e4 */
#define EVAL_BATCH 500
#define UNSET (-1.0)
#define PI 3.14159265358979323846

static const char *const optimizers[] = {"sgd", "adamw", NULL};

typedef struct train_options {
    const char *model, *data, *data_dir, *optim;
    long epochs, batch, seed, threads;
    double lr, weight_decay, label_smoothing;
    bool json;
} train_options;

/* The training graph and plan, and host memory for one batch. */
typedef struct trainer {
    ct_graph *graph;
    ct_plan *plan;
    ct_tensor *x, *labels, *logits, *loss;
    int batch, classes;
    float *images, *scores;
    int64_t *batch_labels, *order;
} trainer;

/* One-cycle: linear warm-up to the peak, then a cosine down to ~0. */
static double one_cycle_lr(double peak, int64_t step, int64_t total_steps)
{
    double start = peak / ONE_CYCLE_START_DIV, final = start / ONE_CYCLE_FINAL_DIV;
    double warmup = WARMUP_FRACTION * (double)total_steps;
    if ((double)step < warmup)
        return start + (peak - start) * (double)step / warmup;
    double progress = ((double)step - warmup) / ((double)total_steps - warmup);
    return final + (peak - final) * 0.5 * (1.0 + cos(PI * progress));
}

/* splitmix64: a small seeded generator for the shuffles. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* order = a permutation of 0..n-1 that depends only on (seed, epoch). */
static void shuffle(int64_t *order, int64_t n, uint64_t seed, long epoch)
{
    uint64_t state = seed * 0x2545F4914F6CDD1DULL + (uint64_t)epoch;
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(next_random(&state) % (uint64_t)(i + 1));
        int64_t swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
}

static void trainer_free(trainer *t)
{
    ct_plan_free(t->plan);
    ct_graph_free(t->graph);
    free(t->images);
    free(t->scores);
    free(t->batch_labels);
    free(t->order);
}

static int trainer_init(trainer *t, const train_options *opts, const ct_dataset *data,
                        ct_backend *backend)
{
    t->batch = (int)opts->batch;
    t->classes = ct_dataset_classes(data);
    if (!(t->graph = ct_graph_new()))
        return cli_fail("train");
    int64_t shape[4] = {opts->batch, ct_dataset_channels(data), ct_dataset_height(data),
                        ct_dataset_width(data)};
    t->x = ct_input(t->graph, "x", CT_F32, 4, shape);
    t->labels = ct_input(t->graph, "labels", CT_I64, 1, shape);
    t->logits = cli_build_model(t->graph, opts->model, t->x, t->classes);
    t->loss = ct_cross_entropy(t->graph, t->logits, t->labels, (float)opts->label_smoothing);
    if (ct_graph_status(t->graph) != CT_OK)
        return cli_fail("train");
    ct_tensor_keep(t->logits);
    if (ct_graph_backward(t->graph, t->loss) != CT_OK)
        return cli_fail("train");
    ct_status status;
    if (strcmp(opts->optim, "sgd") == 0) {
        ct_sgd_args sgd = {.lr = (float)opts->lr, .momentum = SGD_MOMENTUM,
                           .weight_decay = (float)opts->weight_decay, .nesterov = true};
        status = ct_graph_sgd(t->graph, sgd);
    } else {
        ct_adam_args adam = ct_adam_defaults();
        adam.lr = (float)opts->lr;
        adam.weight_decay = (float)opts->weight_decay;
        adam.decoupled = true;
        status = ct_graph_adam(t->graph, adam);
    }
    if (status != CT_OK || ct_plan_new(t->graph, backend, (uint64_t)opts->seed, &t->plan) != CT_OK)
        return cli_fail("train");
    size_t item = (size_t)(shape[1] * shape[2] * shape[3]);
    t->images = malloc(sizeof *t->images * item * (size_t)t->batch);
    t->scores = malloc(sizeof *t->scores * (size_t)t->classes * (size_t)t->batch);
    t->batch_labels = malloc(sizeof *t->batch_labels * (size_t)t->batch);
    t->order = malloc(sizeof *t->order * (size_t)ct_dataset_size(data));
    if (!t->images || !t->scores || !t->batch_labels || !t->order) {
        fprintf(stderr, "cuttle train: out of host memory for the training batch\n");
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

/* One training step on order[0..batch); adds to the loss sum and correct. */
static int train_step(trainer *t, const ct_dataset *data, const int64_t *indices,
                      double *loss_sum, int64_t *correct)
{
    float loss = 0;
    if (ct_dataset_batch(data, indices, t->batch, t->images, t->batch_labels) != CT_OK ||
        ct_plan_write(t->plan, t->x, t->images, ct_tensor_bytes(t->x)) != CT_OK ||
        ct_plan_write(t->plan, t->labels, t->batch_labels, ct_tensor_bytes(t->labels)) != CT_OK ||
        ct_plan_run(t->plan, CT_TRAIN) != CT_OK ||
        ct_plan_read(t->plan, t->loss, &loss, sizeof loss) != CT_OK ||
        ct_plan_read(t->plan, t->logits, t->scores, ct_tensor_bytes(t->logits)) != CT_OK)
        return cli_fail("train");
    if (!isfinite(loss)) {
        fprintf(stderr,
                "cuttle train: the loss is %g at step %lld: training diverged; try a lower "
                "--lr\n",
                (double)loss, (long long)ct_plan_step(t->plan));
        return CLI_EXIT_FAILED;
    }
    *loss_sum += loss;
    for (int b = 0; b < t->batch; b++)
        *correct += cli_argmax(t->scores + (size_t)b * (size_t)t->classes, t->classes) ==
                    t->batch_labels[b];
    return CLI_EXIT_OK;
}

typedef struct run_result {
    double test_loss, test_accuracy, seconds, images_per_second;
} run_result;

static int train_epochs(const train_options *opts, const ct_dataset *train_data,
                        const ct_dataset *test_data, trainer *t, cli_evaluator *ev, FILE *log,
                        run_result *result)
{
    int64_t steps_per_epoch = ct_dataset_size(train_data) / t->batch;
    int64_t total_steps = steps_per_epoch * opts->epochs;
    double run_start = cli_now(), train_seconds = 0;
    for (long epoch = 1; epoch <= opts->epochs; epoch++) {
        double epoch_start = cli_now(), loss_sum = 0;
        int64_t correct = 0;
        shuffle(t->order, ct_dataset_size(train_data), (uint64_t)opts->seed, epoch);
        for (int64_t s = 0; s < steps_per_epoch; s++) {
            ct_plan_set_lr(t->plan, (float)one_cycle_lr(opts->lr, ct_plan_step(t->plan),
                                                        total_steps));
            int exit_status = train_step(t, train_data, t->order + s * t->batch, &loss_sum,
                                         &correct);
            if (exit_status != CLI_EXIT_OK)
                return exit_status;
        }
        double epoch_train_seconds = cli_now() - epoch_start;
        train_seconds += epoch_train_seconds;
        int exit_status = cli_evaluator_copy_weights("train", ev, t->graph, t->plan);
        if (exit_status == CLI_EXIT_OK)
            exit_status = cli_evaluate("train", ev, test_data, &result->test_loss,
                                       &result->test_accuracy);
        if (exit_status != CLI_EXIT_OK)
            return exit_status;
        int64_t trained = steps_per_epoch * t->batch;
        fprintf(log,
                "epoch %ld/%ld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s  "
                "%.0f img/s\n",
                epoch, opts->epochs, loss_sum / (double)steps_per_epoch,
                100.0 * (double)correct / (double)trained, result->test_loss,
                100.0 * result->test_accuracy, cli_now() - epoch_start,
                (double)trained / epoch_train_seconds);
        fflush(log);
    }
    result->seconds = cli_now() - run_start;
    result->images_per_second = (double)(total_steps * t->batch) / train_seconds;
    return CLI_EXIT_OK;
}

static int load_split(const train_options *opts, const char *split, ct_dataset **out)
{
    if (ct_dataset_load(opts->data, opts->data_dir, split, out) != CT_OK)
        return cli_fail("train");
    return CLI_EXIT_OK;
}

static void print_json(const train_options *opts, const run_result *result)
{
    printf("{\"model\": \"%s\", \"dataset\": \"%s\", \"epochs\": %ld, \"batch\": %ld, "
           "\"optimizer\": \"%s\", \"lr\": %g, \"seed\": %ld, \"test_accuracy\": %.6f, "
           "\"test_loss\": %.6f, \"seconds\": %.3f, \"images_per_second\": %.1f}\n",
           opts->model, opts->data, opts->epochs, opts->batch, opts->optim, opts->lr, opts->seed,
           result->test_accuracy, result->test_loss, result->seconds,
           result->images_per_second);
}

static int run(const train_options *opts)
{
    FILE *log = opts->json ? stderr : stdout; /* --json keeps stdout for the JSON */
    ct_dataset *train_data = NULL, *test_data = NULL;
    ct_backend *backend = NULL;
    trainer t = {0};
    cli_evaluator *ev = NULL;
    int exit_status = load_split(opts, "train", &train_data);
    if (exit_status == CLI_EXIT_OK)
        exit_status = load_split(opts, "test", &test_data);
    if (exit_status == CLI_EXIT_OK && opts->batch > ct_dataset_size(train_data)) {
        fprintf(stderr, "cuttle train: --batch %ld is larger than the %lld training images\n",
                opts->batch, (long long)ct_dataset_size(train_data));
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK) {
        char device[32] = "cpu";
        if (opts->threads > 0)
            snprintf(device, sizeof device, "cpu:%ld", opts->threads);
        if (ct_backend_new(device, &backend) != CT_OK)
            exit_status = cli_fail("train");
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = trainer_init(&t, opts, train_data, backend);
    if (exit_status == CLI_EXIT_OK) {
        int64_t test_size = ct_dataset_size(test_data);
        int eval_batch = (int)(test_size < EVAL_BATCH ? test_size : EVAL_BATCH);
        exit_status = cli_evaluator_new("train", opts->model, test_data, eval_batch, backend,
                                        (uint64_t)opts->seed, &ev);
    }
    run_result result = {0};
    if (exit_status == CLI_EXIT_OK) {
        fprintf(log,
                "train %s on %s: %lld training images, %lld test images; %s, lr %g (one-cycle), "
                "weight decay %g, batch %ld, %ld epochs, seed %ld; backend %s\n",
                opts->model, opts->data, (long long)ct_dataset_size(train_data),
                (long long)ct_dataset_size(test_data),
                strcmp(opts->optim, "sgd") == 0 ? "sgd (nesterov momentum 0.9)" : "adamw",
                opts->lr, opts->weight_decay, opts->batch, opts->epochs, opts->seed,
                ct_backend_name(backend));
        fflush(log);
        exit_status = train_epochs(opts, train_data, test_data, &t, ev, log, &result);
    }
    if (exit_status == CLI_EXIT_OK) {
        fprintf(log, "test accuracy: %.2f%% (%lld images)\n", 100.0 * result.test_accuracy,
                (long long)ct_dataset_size(test_data));
        if (opts->json)
            print_json(opts, &result);
    }
    cli_evaluator_free(ev);
    trainer_free(&t);
    ct_backend_free(backend);
    ct_dataset_free(test_data);
    ct_dataset_free(train_data);
    return exit_status;
}

int cmd_train(int argc, char **argv)
{
    train_options opts = {.model = "simplecnn", .data = "fashion-mnist", .optim = "sgd",
                          .epochs = DEFAULT_EPOCHS, .batch = DEFAULT_BATCH, .seed = DEFAULT_SEED,
                          .lr = UNSET, .weight_decay = UNSET};
    const cli_option options[] = {
        {"--model", "NAME", CLI_TEXT, &opts.model, 0, 0, cli_models,
         "the model: simplecnn (default simplecnn)"},
        {"--data", "NAME", CLI_TEXT, &opts.data, 0, 0, cli_datasets,
         "the dataset: fashion-mnist or mnist (default fashion-mnist)"},
        {"--data-dir", "DIR", CLI_TEXT, &opts.data_dir, 0, 0, NULL,
         "where its IDX files are, raw or .gz (default /usr/share/datasets/<dataset>)"},
        {"--epochs", "N", CLI_INT, &opts.epochs, 1, 100000, NULL, "epochs (default 15)"},
        {"--batch", "B", CLI_INT, &opts.batch, 1, 65536, NULL, "batch size (default 64)"},
        {"--optim", "NAME", CLI_TEXT, &opts.optim, 0, 0, optimizers,
         "sgd (nesterov, momentum 0.9) or adamw (default sgd)"},
        {"--lr", "X", CLI_FLOAT, &opts.lr, 1e-7, 10, NULL,
         "peak of the one-cycle learning rate (default 0.05 sgd, 0.002 adamw)"},
        {"--weight-decay", "X", CLI_FLOAT, &opts.weight_decay, 0, 1, NULL,
         "weight decay (default 5e-4 sgd, 0.01 adamw)"},
        {"--label-smoothing", "X", CLI_FLOAT, &opts.label_smoothing, 0, 0.99, NULL,
         "label smoothing of the loss (default 0)"},
        {"--seed", "S", CLI_INT, &opts.seed, 0, 2147483647, NULL,
         "seed of the initial weights and the shuffles (default 1)"},
        {"--threads", "T", CLI_INT, &opts.threads, 0, 4096, NULL,
         "CPU threads, 0 for all cores (default 0)"},
        {"--json", NULL, CLI_FLAG, &opts.json, 0, 0, NULL,
         "print the result as one JSON object on stdout (progress goes to stderr)"},
    };
    cli_parsed parsed = cli_parse("train", "[options]", argc, argv, options,
                                  (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    bool sgd = strcmp(opts.optim, "sgd") == 0;
    if (opts.lr == UNSET)
        opts.lr = sgd ? SGD_PEAK_LR : ADAMW_PEAK_LR;
    if (opts.weight_decay == UNSET)
        opts.weight_decay = sgd ? SGD_WEIGHT_DECAY : ADAMW_WEIGHT_DECAY;
    return run(&opts);
}
