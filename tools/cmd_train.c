/*
 * cuttle train: train a model on a dataset's training split, evaluating on
 * its test split after every epoch, and checkpoint every epoch into --out:
 *
 *   model.safetensors  the weights (a PyTorch state_dict) and what eval and
 *                      predict need to use them (tools/run_info.h)
 *   state.safetensors  weights, optimizer state, and where the run is
 *                      (epoch, step, its options) for --resume
 *   metrics.jsonl      one JSON line per epoch
 *   curves.svg         loss, accuracy and learning rate so far (cuttle plot)
 *
 * The default recipe (what the options default to): simplecnn, SGD with
 * Nesterov momentum 0.9 and weight decay 5e-4, batch 64, 15 epochs, a
 * one-cycle learning rate peaking at 0.05, no augmentation.  --recipe strong
 * starts from other defaults (vgg8_bn, batch 128, 20 epochs, peak 0.1,
 * random crops with 2 px of padding and flips); options given beside it
 * still override them.  The training set is
 * reshuffled every epoch from the seed and the last partial batch dropped,
 * so one seed gives one run, and a resumed run continues exactly (same
 * thread count: the BLAS sums in an order that depends on it).
 *
 * A plan runs a graph of one batch size, so evaluation has its own graph
 * (forward only) and plan; the weights are copied into it by name.
 */
#include <stdlib.h>
#include <string.h>

#include "json_writer.h"
#include "cli.h"
#include "plot.h"
#include "run_files.h"
#include "run_info.h"
#include "train_dist.h"
#include "train_options.h"
#include "trainer.h"

#define EVAL_BATCH 500

/* Everything a run holds, freed by run_free. */
typedef struct run {
    train_options opts;
    run_args args;
    train_job job;
    FILE *log;
    ct_dataset *train_data, *test_data;
    ct_backend *backend; /* backends[0] */
    ct_backend *backends[TRAINER_MAX_PARTS];
    int n_backends;
    run_info info;
    trainer t;
    cli_evaluator *ev;
    long first_epoch;
    int64_t first_batch; /* of first_epoch: a run resumed inside it starts there */
    int64_t trained;     /* images, all ranks' */
    double seconds, train_seconds, images_per_second, test_loss, test_accuracy;
} run;

static void run_free(run *r)
{
    cli_evaluator_free(r->ev);
    trainer_free(&r->t);
    run_info_free(&r->info);
    for (int k = 0; k < r->n_backends; k++)
        ct_backend_free(r->backends[k]);
    ct_dataset_free(r->test_data);
    ct_dataset_free(r->train_data);
    run_args_free(&r->args);
}

/* An epoch's figures over all ranks (each ran as many steps of one batch). */
static int epoch_figures(run *r, const epoch_sums *mine, epoch_metrics *m)
{
    double sums[3] = {mine->loss, (double)mine->correct, (double)mine->steps};
    CLI_TRY(train_job_sum(&r->job, sums, 3));
    double steps = sums[2] > 0 ? sums[2] : 1;
    m->train_loss = sums[0] / steps;
    m->train_accuracy = sums[1] / (steps * (double)r->t.batch);
    r->trained += (int64_t)sums[2] * r->t.batch;
    m->images_per_second = sums[2] * (double)r->t.batch / m->train_seconds;
    return CLI_EXIT_OK;
}

static int train_epoch(run *r, long epoch, int64_t total_steps, epoch_metrics *m)
{
    trainer *t = &r->t;
    int64_t steps = ct_loader_batches(t->loader);
    int64_t first = epoch == r->first_epoch ? r->first_batch : 0;
    epoch_sums sums = {0};
    double start = cli_now();
    trainer_epoch e = {.epoch = epoch, .epochs = r->opts.epochs, .first_batch = first,
                       .total_steps = total_steps, .max_steps = r->opts.max_steps,
                       .schedule = r->opts.schedule, .lr = r->opts.lr, .ranks = r->job.size,
                       .log = r->log};
    CLI_TRY(trainer_run_epoch(t, &e, &sums));
    m->train_seconds = cli_now() - start;
    m->epoch = epoch;
    m->partial = first + sums.steps < steps;
    m->lr = ct_plan_lr(t->plan);
    CLI_TRY(epoch_figures(r, &sums, m));
    m->loss_scaling = t->loss_scaling;
    m->loss_scale = ct_plan_loss_scale(t->plan);
    m->skipped_steps = ct_plan_skipped_steps(t->plan);
    CLI_TRY(cli_evaluator_copy_weights("train", r->ev, t->plan));
    CLI_TRY(train_job_evaluate(&r->job, r->ev, r->test_data, &m->test_loss, &m->test_accuracy));
    m->seconds = cli_now() - start;
    return CLI_EXIT_OK;
}

/* The curves so far into the run's directory.  A chart that cannot be drawn
 * is worth a warning, not the training run. */
static void draw_curves(const run *r)
{
    if (plot_curves_of_run("train", r->opts.out) != CLI_EXIT_OK)
        fprintf(stderr, "cuttle train: warning: no " PLOT_CURVES_FILE
                        " (above: why); training goes on\n");
}

static int train_epochs(run *r)
{
    int64_t total_steps = ct_loader_batches(r->t.loader) * r->opts.epochs;
    double start = cli_now();
    long last = r->opts.stop_after > 0 && r->opts.stop_after < r->opts.epochs ? r->opts.stop_after
                                                                               : r->opts.epochs;
    for (long epoch = r->first_epoch; epoch <= last; epoch++) {
        epoch_metrics m = {0};
        CLI_TRY(train_epoch(r, epoch, total_steps, &m));
        r->train_seconds += m.train_seconds;
        fprintf(r->log,
                "epoch %ld/%ld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s  "
                "%.0f img/s%s\n",
                epoch, r->opts.epochs, m.train_loss, 100.0 * m.train_accuracy, m.test_loss,
                100.0 * m.test_accuracy, m.seconds, m.images_per_second,
                m.partial ? "  (stopped inside the epoch: --max-steps)" : "");
        if (m.loss_scaling)
            fprintf(r->log, "  fp16 loss scale %g, %lld step%s skipped so far (inf or NaN "
                    "gradients)\n", m.loss_scale, (long long)m.skipped_steps,
                    m.skipped_steps == 1 ? "" : "s");
        fflush(r->log);
        if (r->job.rank == 0) { /* the others' weights are the same */
            CLI_TRY(run_save_epoch(r->opts.out, r->t.plan, &r->info, &r->args, &m, r->job.size));
            draw_curves(r);
        }
        r->test_loss = m.test_loss;
        r->test_accuracy = m.test_accuracy;
        if (r->opts.max_steps > 0 && ct_plan_step(r->t.plan) >= r->opts.max_steps)
            break;
    }
    r->seconds = cli_now() - start;
    r->images_per_second = r->train_seconds > 0 ? (double)r->trained / r->train_seconds : 0;
    return CLI_EXIT_OK;
}

/* ---- setting up ---------------------------------------------------------------- */

/* --resume: the saved state into the plan, and where to go on from. */
static int resume(run *r)
{
    const train_options *opts = &r->opts;
    long done = 0;
    CLI_TRY(run_resume_state(opts->resume, r->t.plan, r->job.size, &done));
    int64_t step = ct_plan_step(r->t.plan), steps_per_epoch = ct_loader_batches(r->t.loader);
    r->first_epoch = done + 1;
    r->first_batch = step - (int64_t)done * steps_per_epoch;
    if (r->first_batch < 0 || r->first_batch >= steps_per_epoch) {
        fprintf(stderr,
                "cuttle train: the run in %s stopped at step %lld, which is not in epoch %ld "
                "of %lld steps: was its dataset another size?\n",
                opts->resume, (long long)step, done + 1, (long long)steps_per_epoch);
        return CLI_EXIT_FAILED;
    }
    if (done >= opts->epochs || (opts->max_steps > 0 && step >= opts->max_steps)) {
        fprintf(stderr,
                "cuttle train: the run in %s has done %ld epochs (%lld steps) already; pass "
                "--epochs or --max-steps with more to train on\n",
                opts->resume, done, (long long)step);
        return CLI_EXIT_USAGE;
    }
    if (r->job.rank == 0)
        CLI_TRY(run_trim_metrics(opts->out, done));
    fprintf(r->log, "resuming %s after epoch %ld (step %lld)\n", opts->resume, done,
            (long long)step);
    return CLI_EXIT_OK;
}

/* --device cuda:0,1 (or cuda:0,cuda:1): one part of every batch on each
 * GPU of this process.  names: the devices, one each. */
static int device_list(const char *device, char names[][32], int *n)
{
    *n = 0;
    for (const char *at = device; *at;) {
        size_t length = strcspn(at, ",");
        if (*n == TRAINER_MAX_PARTS || length == 0 || length >= 24) {
            fprintf(stderr, "cuttle train: --device %s: give up to %d devices, such as "
                    "cuda:0,1 or cuda:0,cuda:1\n", device, TRAINER_MAX_PARTS);
            return CLI_EXIT_USAGE;
        }
        bool index = strspn(at, "0123456789") == length;
        snprintf(names[*n], sizeof names[0], "%s%.*s", index ? "cuda:" : "", (int)length, at);
        for (int k = 0; k < *n; k++)
            if (strcmp(names[k], names[*n]) == 0) {
                fprintf(stderr, "cuttle train: --device %s names %s twice: each part of the "
                        "batch needs a GPU of its own\n", device, names[k]);
                return CLI_EXIT_USAGE;
            }
        (*n)++;
        at += length + (at[length] == ',');
    }
    if (*n > 1 && strncmp(names[0], "cuda", 4) != 0) {
        fprintf(stderr, "cuttle train: --device %s: several devices must be GPUs (cuda:0,1)\n",
                device);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* A backend for each device of --device. */
static int open_backends(run *r)
{
    const train_options *opts = &r->opts;
    char names[TRAINER_MAX_PARTS][32];
    int n = 0;
    CLI_TRY(device_list(opts->device, names, &n));
    if (n > 1 && r->job.size > 1) {
        fprintf(stderr, "cuttle train: --device %s: under mpirun each rank trains on one GPU "
                "(--device cuda takes the rank's own)\n", opts->device);
        return CLI_EXIT_USAGE;
    }
    for (int k = 0; k < n; k++) {
        CLI_TRY(cli_backend("train", &(cli_device){n > 1 ? names[k] : opts->device, opts->threads,
                                                   opts->strict_device, opts->cuda_graph, false,
                                                   opts->kernels},
                            r->log, &r->backends[k]));
        r->n_backends = k + 1;
    }
    r->backend = r->backends[0];
    return CLI_EXIT_OK;
}

static int setup(run *r)
{
    const train_options *opts = &r->opts;
    /* --json keeps stdout for the JSON; ranks other than 0 log nothing */
    r->log = train_job_log(&r->job, opts->json ? stderr : stdout);
    CLI_TRY(cli_load_dataset("train", opts->data, opts->data_dir, "train", &r->train_data));
    CLI_TRY(cli_load_dataset("train", opts->data, opts->data_dir, "test", &r->test_data));
    if (opts->batch * r->job.size > ct_dataset_size(r->train_data)) {
        fprintf(stderr, "cuttle train: --batch %ld%s is larger than the %lld training images\n",
                opts->batch, r->job.size > 1 ? " on every rank" : "",
                (long long)ct_dataset_size(r->train_data));
        return CLI_EXIT_USAGE;
    }
    char name[128];
    char *text = NULL;
    cli_model_name(opts->model, name, sizeof name);
    if (opts->resume)
        CLI_TRY(run_resume_model_text(opts->resume, &text));
    else
        CLI_TRY(cli_model_text("train", opts->model, &text));
    int exit_status =
        run_info_from_dataset("train", name, text, opts->data, r->train_data, &r->info);
    free(text);
    CLI_TRY(exit_status);
    if (opts->check_numerics && r->job.size > 1) {
        fprintf(stderr, "cuttle train: --check-numerics runs in one process only: a rank that "
                "stopped would leave the others waiting in an all-reduce; run it without "
                "mpirun\n");
        return CLI_EXIT_USAGE;
    }
    CLI_TRY(open_backends(r));
    if (opts->batch * r->n_backends > ct_dataset_size(r->train_data)) {
        fprintf(stderr, "cuttle train: --batch %ld on %d GPUs is larger than the %lld training "
                "images\n", opts->batch, r->n_backends, (long long)ct_dataset_size(r->train_data));
        return CLI_EXIT_USAGE;
    }
    CLI_TRY(trainer_init(&r->t, "train", opts, &r->info, r->train_data, r->backends,
                         r->n_backends, r->job.rank, r->job.size));
    int64_t test_size = ct_dataset_size(r->test_data);
    int eval_batch = (int)(test_size < EVAL_BATCH ? test_size : EVAL_BATCH);
    CLI_TRY(cli_evaluator_new("train", r->info.text, NULL, r->info.input, r->info.classes, eval_batch,
                              cli_precision(opts->precision), r->backend, &r->ev));
    if (r->job.rank == 0)
        CLI_TRY(run_prepare_dir("train", opts->out));
    r->first_epoch = 1;
    if (opts->resume)
        CLI_TRY(resume(r));
    else if (r->job.rank == 0)
        CLI_TRY(run_trim_metrics(opts->out, 0)); /* a new run replaces an old one's metrics */
    train_identity identity = {opts, r->info.text, ct_dataset_size(r->train_data), test_size,
                               ct_plan_step(r->t.plan)};
    CLI_TRY(train_job_agree(&r->job, &identity));
    CLI_TRY(trainer_join(&r->t, opts->bucket_mb, opts->sync_bn));
    return train_job_share(&r->job, r->t.plan, opts->bucket_mb, opts->sync_bn);
}

static void print_start(const run *r)
{
    const train_options *o = &r->opts;
    char ranks[96] = "";
    if (r->job.size > 1)
        snprintf(ranks, sizeof ranks, " per rank, %ld in all (%d ranks)", o->batch * r->job.size,
                 r->job.size);
    else if (r->n_backends > 1)
        snprintf(ranks, sizeof ranks, " per GPU, %ld in all (%d GPUs)", o->batch * r->n_backends,
                 r->n_backends);
    char backends[512] = "";
    for (int k = 0, used = 0; k < r->n_backends && used < (int)sizeof backends; k++)
        used += snprintf(backends + used, sizeof backends - (size_t)used, "%s%s",
                         k ? " and " : "", ct_backend_name(r->backends[k]));
    fprintf(r->log,
            "train %s on %s (recipe %s): %lld training images, %lld test images; %s, lr %g "
            "(%s), weight decay %g, augment %s, batch %ld%s, %ld epochs, seed %ld; precision "
            "%s; backend %s; saving to %s\n",
            r->info.name, o->data, o->recipe, (long long)ct_dataset_size(r->train_data),
            (long long)ct_dataset_size(r->test_data),
            strcmp(o->optim, "sgd") == 0 ? "sgd (nesterov)" : o->optim, o->lr, o->schedule,
            o->weight_decay, o->augment, o->batch, ranks, o->epochs, o->seed,
            o->precision ? o->precision : "fp32", backends, o->out);
    fflush(r->log);
}

/* One line of what averaging between the GPUs of this process cost. */
static void report_replicas(const run *r)
{
    ct_dist_stats stats;
    if (!r->t.replicas || ct_replicas_stats(r->t.replicas, &stats) != CT_OK || stats.steps == 0)
        return;
    double steps = (double)stats.steps;
    fprintf(r->log,
            "all-reduce (%d GPUs): %d bucket%s, %.2f MB per step; per step %.3f ms in NCCL "
            "calls (queued: the GPUs wait, not the host), of a %.3f ms step\n",
            r->t.n_parts, stats.buckets, stats.buckets == 1 ? "" : "s",
            (double)stats.bytes / (1024.0 * 1024.0), 1e3 * stats.comm_seconds / steps,
            1e3 * r->train_seconds / steps);
}

static void print_json(const run *r)
{
    char path[600];
    snprintf(path, sizeof path, "%s/" RUN_MODEL_FILE, r->opts.out);
    json_writer out = json_writer_start(stdout);
    json_object(&out);
    json_field_string(&out, "model", r->info.name);
    json_field_string(&out, "dataset", r->opts.data);
    json_field_int(&out, "epochs", r->opts.epochs);
    json_field_int(&out, "batch", r->opts.batch);
    json_field_string(&out, "optimizer", r->opts.optim);
    json_field_number(&out, "lr", r->opts.lr);
    json_field_string(&out, "schedule", r->opts.schedule);
    json_field_int(&out, "seed", r->opts.seed);
    json_field_fixed(&out, "test_accuracy", r->test_accuracy, 6);
    json_field_fixed(&out, "test_loss", r->test_loss, 6);
    json_field_fixed(&out, "seconds", r->seconds, 3);
    json_field_fixed(&out, "images_per_second", r->images_per_second, 1);
    json_field_int(&out, "ranks", r->job.size);
    json_field_string(&out, "checkpoint", path);
    json_end(&out);
}

int cmd_train(int argc, char **argv)
{
    run r = {.opts = {0}};
    char out_buffer[512];
    bool help = false;
    int exit_status = train_options_parse(&r.opts, &r.args, argc, argv, out_buffer,
                                          sizeof out_buffer, &help);
    help = help || cli_parse_only; /* stop as --help does, once the options are checked */
    if (exit_status == CLI_EXIT_OK && !help)
        exit_status = train_job_join(&r.job, &r.opts);
    if (exit_status == CLI_EXIT_OK && !help)
        exit_status = setup(&r);
    if (exit_status == CLI_EXIT_OK && !help) {
        print_start(&r);
        exit_status = train_epochs(&r);
    }
    if (exit_status == CLI_EXIT_OK && !help) {
        fprintf(r.log, "test accuracy: %.2f%% (%lld images); saved to %s/" RUN_MODEL_FILE "\n",
                100.0 * r.test_accuracy, (long long)ct_dataset_size(r.test_data), r.opts.out);
        train_job_report(&r.job, r.log, r.train_seconds,
                         strncmp(ct_backend_name(r.backend), "cuda", 4) == 0);
        report_replicas(&r);
        if (r.opts.json && r.job.rank == 0)
            print_json(&r);
    }
    run_free(&r);
    return train_job_end(&r.job, exit_status);
}
