/*
 * The training loop (trainer.h), shared by cuttle train and cuttle prune.
 */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"
#include "schedule.h"

#define BYTES_PER_MB (1024.0 * 1024.0)

void trainer_free(trainer *t)
{
    ct_replicas_free(t->replicas);
    ct_loader_free(t->loader);
    for (int k = 0; k < t->n_parts; k++) {
        ct_plan_free(t->parts[k].plan);
        ct_graph_free(t->parts[k].graph);
    }
    free(t->scores);
    free(t->step_labels);
}

static ct_status add_optimizer(ct_graph *graph, const train_options *opts)
{
    if (strcmp(opts->optim, "sgd") == 0) {
        ct_sgd_args sgd = {.lr = (float)opts->lr, .momentum = (float)opts->momentum,
                           .weight_decay = (float)opts->weight_decay,
                           .nesterov = opts->momentum > 0};
        return ct_graph_sgd(graph, sgd);
    }
    ct_adam_args adam = ct_adam_defaults();
    adam.lr = (float)opts->lr;
    adam.weight_decay = (float)opts->weight_decay;
    adam.decoupled = strcmp(opts->optim, "adamw") == 0;
    return ct_graph_adam(graph, adam);
}

/* Part `part`'s graph and plan: the model with its loss, backward and
 * optimizer, on `backend`. */
static int build_part(trainer *t, const train_options *opts, const run_info *info,
                      ct_backend *backend, trainer_part *part)
{
    if (!(part->graph = ct_graph_new()))
        return cli_fail(t->command);
    int64_t shape[4] = {opts->batch, info->input[0], info->input[1], info->input[2]};
    part->x = ct_input(part->graph, "x", CT_F32, 4, shape);
    part->labels = ct_input(part->graph, "labels", CT_I64, 1, shape);
    ct_graph_set_precision(part->graph, cli_precision(opts->precision));
    part->logits = ct_model_build(part->graph, info->text, part->x, t->classes);
    part->loss = ct_cross_entropy(part->graph, part->logits, part->labels,
                                  (float)opts->label_smoothing);
    if (ct_graph_status(part->graph) != CT_OK)
        return cli_fail(t->command);
    ct_tensor_keep(part->logits);
    if (ct_graph_backward(part->graph, part->loss) != CT_OK ||
        add_optimizer(part->graph, opts) != CT_OK ||
        ct_plan_new(part->graph, backend, (uint64_t)opts->seed, &part->plan) != CT_OK ||
        ct_plan_set_check_numerics(part->plan, opts->check_numerics) != CT_OK)
        return cli_fail(t->command);
    return CLI_EXIT_OK;
}

int trainer_init(trainer *t, const char *command, const train_options *opts,
                 const run_info *info, const ct_dataset *data, ct_backend *const *backends,
                 int n_backends, int rank, int ranks)
{
    t->command = command;
    t->part_batch = (int)opts->batch;
    t->batch = (int)opts->batch * n_backends;
    t->classes = info->classes;
    t->loss_scaling = cli_precision(opts->precision) == CT_PRECISION_FP16;
    for (int k = 0; k < n_backends && k < TRAINER_MAX_PARTS; k++) {
        t->n_parts = k + 1;
        CLI_TRY(build_part(t, opts, info, backends[k], &t->parts[k]));
    }
    t->graph = t->parts[0].graph;
    t->plan = t->parts[0].plan;
    t->x = t->parts[0].x;
    t->labels = t->parts[0].labels;
    t->logits = t->parts[0].logits;
    t->loss = t->parts[0].loss;
    ct_loader_args loader = {.batch = t->batch, .shuffle = true, .drop_last = true,
                             .seed = (uint64_t)opts->seed, .n_threads = (int)opts->workers,
                             .shard = rank, .n_shards = ranks};
    if (!train_parse_augment(opts->augment, &loader.augment))
        return CLI_EXIT_USAGE; /* checked before; cannot happen */
    if (ct_loader_new(data, &loader, &t->loader) != CT_OK)
        return cli_fail(t->command);
    if (!(t->scores = malloc(sizeof *t->scores * (size_t)t->classes * (size_t)t->batch)) ||
        !(t->step_labels = malloc(sizeof *t->step_labels * (size_t)t->batch))) {
        fprintf(stderr, "cuttle %s: out of host memory for the training batch\n", t->command);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

int trainer_join(trainer *t, double bucket_mb, bool sync_bn)
{
    if (t->n_parts == 1)
        return CLI_EXIT_OK;
    ct_plan *plans[TRAINER_MAX_PARTS];
    for (int k = 0; k < t->n_parts; k++)
        plans[k] = t->parts[k].plan;
    if (ct_replicas_new(plans, t->n_parts, (size_t)(bucket_mb * BYTES_PER_MB), &t->replicas) !=
        CT_OK)
        return cli_fail(t->command);
    for (int k = 0; sync_bn && k < t->n_parts; k++)
        if (ct_plan_set_sync_bn(plans[k], true) != CT_OK)
            return cli_fail(t->command);
    return CLI_EXIT_OK;
}

/* The step's loss (the mean over the parts) and logits into t->scores;
 * *bad: the first part whose loss is not finite (-1: none). */
static int read_step(trainer *t, float *loss, int *bad)
{
    *loss = 0;
    *bad = -1;
    for (int k = 0; k < t->n_parts; k++) {
        trainer_part *part = &t->parts[k];
        float part_loss = 0;
        size_t offset = (size_t)k * (size_t)t->part_batch * (size_t)t->classes;
        if (ct_plan_read(part->plan, part->loss, &part_loss, sizeof part_loss) != CT_OK ||
            ct_plan_read_f32(part->plan, part->logits, t->scores + offset,
                             ct_tensor_numel(part->logits)) != CT_OK)
            return cli_fail(t->command);
        if (!isfinite(part_loss) && *bad < 0)
            *bad = k;
        *loss += part_loss / (float)t->n_parts;
    }
    return CLI_EXIT_OK;
}

/* The loader's next batch, queued for the step after the ones queued
 * before (ct_plan_stage), each part its slice: on a GPU its copy runs
 * beside the step queued before it.  *n: its items, 0 at the epoch's end
 * or where max_steps leaves no room for a step `ahead` steps from now. */
static int stage_next(trainer *t, const trainer_epoch *e, int64_t ahead, const int64_t **labels,
                      int *n)
{
    const float *images = NULL;
    *n = 0;
    if (e->max_steps != 0 && ct_plan_step(t->plan) + ahead >= e->max_steps)
        return CLI_EXIT_OK;
    if (ct_loader_next(t->loader, &images, labels, n) != CT_OK)
        return cli_fail(t->command);
    size_t image = (size_t)ct_tensor_numel(t->x) / (size_t)t->part_batch;
    for (int k = 0; k < t->n_parts && *n > 0; k++) {
        trainer_part *part = &t->parts[k];
        size_t first = (size_t)k * (size_t)t->part_batch;
        if (ct_plan_stage(part->plan, part->x, images + first * image,
                          ct_tensor_bytes(part->x)) != CT_OK ||
            ct_plan_stage(part->plan, part->labels, *labels + first,
                          ct_tensor_bytes(part->labels)) != CT_OK)
            return cli_fail(t->command);
    }
    return CLI_EXIT_OK;
}

/* Runs the step whose batch was staged first; `labels` are its labels. */
static int train_step(trainer *t, const int64_t *labels, epoch_sums *sums)
{
    ct_status ran = t->replicas ? ct_replicas_run(t->replicas, CT_TRAIN)
                                : ct_plan_run(t->plan, CT_TRAIN);
    if (ran == CT_ERR_NUMERIC) { /* --check-numerics */
        fprintf(stderr, "cuttle %s: --check-numerics stopped training at %s; nothing of "
                "this epoch was saved; try a lower --lr\n", t->command, ct_last_error());
        return CLI_EXIT_FAILED;
    }
    if (ran != CT_OK)
        return cli_fail(t->command);
    float loss = 0;
    int bad = -1;
    CLI_TRY(read_step(t, &loss, &bad));
    if (bad >= 0 && t->loss_scaling && ct_plan_step_skipped(t->plan))
        return CLI_EXIT_OK; /* fp16: an overflow, the step skipped and the scale halved */
    if (bad >= 0) { /* the step updated nothing: run it again to see where */
        ct_plan *plan = t->parts[bad].plan;
        int64_t step = ct_plan_step(plan) - 1;
        char where[256] = "";
        ct_plan_set_step(plan, step);
        if (ct_plan_find_nonfinite(plan, CT_TRAIN, where, sizeof where) != CT_OK)
            snprintf(where, sizeof where, "not found (%s)", ct_last_error());
        fprintf(stderr,
                "cuttle %s: the loss is %g at step %lld: training diverged; the first inf or "
                "NaN of that step: %s; try a lower --lr\n",
                t->command, (double)loss, (long long)step, where[0] ? where : "none when it ran again");
        return CLI_EXIT_FAILED;
    }
    if (t->after_step)
        CLI_TRY(t->after_step(t->user, t->plan));
    sums->loss += loss;
    sums->steps++;
    for (int b = 0; b < t->batch; b++)
        sums->correct += cli_argmax(t->scores + (size_t)b * (size_t)t->classes, t->classes) ==
                         labels[b];
    return CLI_EXIT_OK;
}

/* Batch j + 1 is staged before step j runs, so that on a GPU its copy runs
 * beside step j; the loader's next call lets go of batch j, whose labels
 * the step's accuracy still needs: they are copied first. */
int trainer_run_epoch(trainer *t, const trainer_epoch *e, epoch_sums *sums)
{
    int64_t steps = ct_loader_batches(t->loader);
    progress bar;
    double start = cli_now();
    progress_start(&bar, e->log, e->epoch, e->epochs, steps);
    if (ct_loader_start(t->loader, e->epoch, e->first_batch) != CT_OK)
        return cli_fail(t->command);
    const int64_t *labels = NULL;
    int n = 0;
    CLI_TRY(stage_next(t, e, 0, &labels, &n));
    while (n > 0) {
        memcpy(t->step_labels, labels, sizeof *labels * (size_t)t->batch);
        int64_t step = ct_plan_step(t->plan);
        CLI_TRY(stage_next(t, e, 1, &labels, &n)); /* batch j + 1, before step j */
        float lr = (float)schedule_lr(e->schedule, e->lr, step, e->total_steps);
        for (int k = 0; k < t->n_parts; k++)
            ct_plan_set_lr(t->parts[k].plan, lr);
        CLI_TRY(train_step(t, t->step_labels, sums));
        double elapsed = cli_now() - start; /* the bar: rank 0's shard, all ranks' speed */
        progress_update(&bar, e->first_batch + sums->steps, sums->loss / (double)sums->steps,
                        (double)sums->correct / (double)(sums->steps * t->batch),
                        (double)(sums->steps * t->batch * e->ranks) /
                            (elapsed > 0 ? elapsed : 1e-9));
    }
    progress_end(&bar);
    return CLI_EXIT_OK;
}
