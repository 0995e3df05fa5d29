/*
 * The training loop (trainer.h), shared by cuttle train and cuttle prune.
 */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "progress.h"
#include "schedule.h"

void trainer_free(trainer *t)
{
    ct_loader_free(t->loader);
    ct_plan_free(t->plan);
    ct_graph_free(t->graph);
    free(t->scores);
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

int trainer_init(trainer *t, const char *command, const train_options *opts,
                 const run_info *info, const ct_dataset *data, ct_backend *backend, int rank,
                 int ranks)
{
    t->command = command;
    t->batch = (int)opts->batch;
    t->classes = info->classes;
    if (!(t->graph = ct_graph_new()))
        return cli_fail(t->command);
    int64_t shape[4] = {opts->batch, info->input[0], info->input[1], info->input[2]};
    t->x = ct_input(t->graph, "x", CT_F32, 4, shape);
    t->labels = ct_input(t->graph, "labels", CT_I64, 1, shape);
    ct_graph_set_precision(t->graph, cli_precision(opts->precision));
    t->loss_scaling = cli_precision(opts->precision) == CT_PRECISION_FP16;
    t->logits = ct_model_build(t->graph, info->text, t->x, t->classes);
    t->loss = ct_cross_entropy(t->graph, t->logits, t->labels, (float)opts->label_smoothing);
    if (ct_graph_status(t->graph) != CT_OK)
        return cli_fail(t->command);
    ct_tensor_keep(t->logits);
    if (ct_graph_backward(t->graph, t->loss) != CT_OK || add_optimizer(t->graph, opts) != CT_OK ||
        ct_plan_new(t->graph, backend, (uint64_t)opts->seed, &t->plan) != CT_OK ||
        ct_plan_set_check_numerics(t->plan, opts->check_numerics) != CT_OK)
        return cli_fail(t->command);
    ct_loader_args loader = {.batch = t->batch, .shuffle = true, .drop_last = true,
                             .seed = (uint64_t)opts->seed, .n_threads = (int)opts->workers,
                             .shard = rank, .n_shards = ranks};
    if (!train_parse_augment(opts->augment, &loader.augment))
        return CLI_EXIT_USAGE; /* checked before; cannot happen */
    if (ct_loader_new(data, &loader, &t->loader) != CT_OK)
        return cli_fail(t->command);
    if (!(t->scores = malloc(sizeof *t->scores * (size_t)t->classes * (size_t)t->batch))) {
        fprintf(stderr, "cuttle %s: out of host memory for the training batch\n", t->command);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

static int train_step(trainer *t, const float *images, const int64_t *labels, epoch_sums *sums)
{
    float loss = 0;
    if (ct_plan_write(t->plan, t->x, images, ct_tensor_bytes(t->x)) != CT_OK ||
        ct_plan_write(t->plan, t->labels, labels, ct_tensor_bytes(t->labels)) != CT_OK)
        return cli_fail(t->command);
    ct_status ran = ct_plan_run(t->plan, CT_TRAIN);
    if (ran == CT_ERR_NUMERIC) { /* --check-numerics */
        fprintf(stderr, "cuttle %s: --check-numerics stopped training at %s; nothing of "
                "this epoch was saved; try a lower --lr\n", t->command, ct_last_error());
        return CLI_EXIT_FAILED;
    }
    if (ran != CT_OK ||
        ct_plan_read(t->plan, t->loss, &loss, sizeof loss) != CT_OK ||
        ct_plan_read_f32(t->plan, t->logits, t->scores, ct_tensor_numel(t->logits)) != CT_OK)
        return cli_fail(t->command);
    if (!isfinite(loss) && t->loss_scaling && ct_plan_step_skipped(t->plan))
        return CLI_EXIT_OK; /* fp16: an overflow, the step skipped and the scale halved */
    if (!isfinite(loss)) { /* the step updated nothing: run it again to see where */
        int64_t step = ct_plan_step(t->plan) - 1;
        char where[256] = "";
        ct_plan_set_step(t->plan, step);
        if (ct_plan_find_nonfinite(t->plan, CT_TRAIN, where, sizeof where) != CT_OK)
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

int trainer_run_epoch(trainer *t, const trainer_epoch *e, epoch_sums *sums)
{
    int64_t steps = ct_loader_batches(t->loader);
    progress bar;
    double start = cli_now();
    progress_start(&bar, e->log, e->epoch, e->epochs, steps);
    if (ct_loader_start(t->loader, e->epoch, e->first_batch) != CT_OK)
        return cli_fail(t->command);
    while (e->max_steps == 0 || ct_plan_step(t->plan) < e->max_steps) {
        const float *images = NULL;
        const int64_t *labels = NULL;
        int n = 0;
        if (ct_loader_next(t->loader, &images, &labels, &n) != CT_OK)
            return cli_fail(t->command);
        if (n == 0)
            break;
        ct_plan_set_lr(t->plan, (float)schedule_lr(e->schedule, e->lr, ct_plan_step(t->plan),
                                                   e->total_steps));
        CLI_TRY(train_step(t, images, labels, sums));
        double elapsed = cli_now() - start; /* the bar: rank 0's shard, all ranks' speed */
        progress_update(&bar, e->first_batch + sums->steps, sums->loss / (double)sums->steps,
                        (double)sums->correct / (double)(sums->steps * t->batch),
                        (double)(sums->steps * t->batch * e->ranks) /
                            (elapsed > 0 ? elapsed : 1e-9));
    }
    progress_end(&bar);
    return CLI_EXIT_OK;
}
