/*
 * The options of cuttle train (train_options.h).
 */
#include "train_options.h"

#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#define DEFAULT_EPOCHS 15
#define DEFAULT_BATCH 64
#define DEFAULT_SEED 1
#define SGD_PEAK_LR 0.05
#define SGD_MOMENTUM 0.9
#define SGD_WEIGHT_DECAY 5e-4
#define ADAM_LR 1e-3
#define ADAMW_PEAK_LR 0.002
#define ADAMW_WEIGHT_DECAY 0.01
#define DEFAULT_BUCKET_MB 25
#define UNSET (-1.0)

static const char *const optimizers[] = {"sgd", "adam", "adamw", NULL};

static const train_options default_options = {
    .recipe = "default", .model = "simplecnn", .data = "fashion-mnist", .optim = "sgd", .schedule = "onecycle",
    .augment = "none", .device = "cpu", .epochs = DEFAULT_EPOCHS, .batch = DEFAULT_BATCH,
    .seed = DEFAULT_SEED, .workers = 1, .lr = UNSET, .weight_decay = UNSET,
    .momentum = SGD_MOMENTUM, .bucket_mb = DEFAULT_BUCKET_MB};

/* --recipe strong: the defaults that reach 94% on Fashion-MNIST (README). */
static const train_options strong_options = {
    .recipe = "strong", .model = "vgg8_bn", .data = "fashion-mnist", .optim = "sgd",
    .schedule = "onecycle", .augment = "crop:2,flip", .device = "cpu", .epochs = 20,
    .batch = 128, .seed = DEFAULT_SEED, .workers = 1, .lr = 0.1, .weight_decay = UNSET,
    .momentum = SGD_MOMENTUM, .bucket_mb = DEFAULT_BUCKET_MB};

static const char *const recipes[] = {"default", "strong", NULL};

static cli_parsed parse_table(train_options *opts, int argc, char **argv)
{
    const cli_option options[] = {
        {"--recipe", "NAME", CLI_TEXT, &opts->recipe, 0, 0, recipes,
         "where the other options' defaults come from: default (simplecnn, 15 epochs, as "
         "listed here) or strong (vgg8_bn, batch 128, 20 epochs, lr 0.1, augment "
         "crop:2,flip)"},
        {"--model", "NAME|FILE", CLI_TEXT, &opts->model, 0, 0, NULL,
         "a built-in model (simplecnn, lenet5, vgg8_bn, vgg11, vgg11_bn, vgg16, vgg16_bn, "
         "resnet18, resnet34, resnet50) or a model file (default simplecnn)"},
        {"--data", "NAME", CLI_TEXT, &opts->data, 0, 0, cli_datasets,
         "fashion-mnist, mnist, cifar10, cifar100 or folder (default fashion-mnist)"},
        {"--data-dir", "DIR", CLI_TEXT, &opts->data_dir, 0, 0, NULL,
         "where the dataset's files are (default: Debian's place for fashion-mnist)"},
        {"--epochs", "N", CLI_INT, &opts->epochs, 1, 100000, NULL, "epochs (default 15)"},
        {"--batch", "B", CLI_INT, &opts->batch, 1, 65536, NULL, "batch size (default 64)"},
        {"--optim", "NAME", CLI_TEXT, &opts->optim, 0, 0, optimizers,
         "sgd (nesterov), adam or adamw (default sgd)"},
        {"--lr", "X", CLI_FLOAT, &opts->lr, 1e-7, 10, NULL,
         "peak learning rate (default 0.05 sgd, 0.001 adam, 0.002 adamw)"},
        {"--schedule", "NAME", CLI_TEXT, &opts->schedule, 0, 0, schedule_names,
         "constant, step (/10 at 50% and 75%), cosine or onecycle (default onecycle)"},
        {"--momentum", "X", CLI_FLOAT, &opts->momentum, 0, 0.999, NULL,
         "sgd momentum (default 0.9)"},
        {"--weight-decay", "X", CLI_FLOAT, &opts->weight_decay, 0, 1, NULL,
         "weight decay (default 5e-4 sgd, 0 adam, 0.01 adamw)"},
        {"--label-smoothing", "X", CLI_FLOAT, &opts->label_smoothing, 0, 0.99, NULL,
         "label smoothing of the loss (default 0)"},
        {"--augment", "LIST", CLI_TEXT, &opts->augment, 0, 0, NULL,
         "none, or a comma list of crop[:PAD] flip cutout[:SIZE] (default none)"},
        {"--seed", "S", CLI_INT, &opts->seed, 0, 2147483647, NULL,
         "seed of the weights, shuffles, augmentation and dropout (default 1)"},
        {"--device", "DEV", CLI_TEXT, &opts->device, 0, 0, NULL,
         "auto, cpu, cpu:N, cuda or cuda:N (default cpu)"},
        {"--threads", "T", CLI_INT, &opts->threads, 0, 4096, NULL,
         "CPU threads, 0 for all cores (default 0)"},
        {"--cuda-graph", "on|off", CLI_TEXT, &opts->cuda_graph, 0, 0, cli_on_off,
         CLI_CUDA_GRAPH_HELP},
        {"--precision", "P", CLI_TEXT, &opts->precision, 0, 0, cli_precisions,
         CLI_PRECISION_HELP},
        {"--strict-device", NULL, CLI_FLAG, &opts->strict_device, 0, 0, NULL,
         "refuse a model with ops the device cannot run (default: they run on the CPU)"},
        {"--kernels", "K", CLI_TEXT, &opts->kernels, 0, 0, NULL, CLI_KERNELS_HELP},
        {"--workers", "N", CLI_INT, &opts->workers, 1, 64, NULL,
         "loader threads preparing batches ahead (default 1)"},
        {"--out", "DIR", CLI_TEXT, &opts->out, 0, 0, NULL,
         "where checkpoints and metrics go (default runs/<model>-<data>)"},
        {"--resume", "DIR", CLI_TEXT, &opts->resume, 0, 0, NULL,
         "continue the run saved in DIR with its options (--epochs may extend it)"},
        {"--stop-after", "N", CLI_INT, &opts->stop_after, 1, 100000, NULL,
         "stop after epoch N as if interrupted (the schedule still spans --epochs); "
         "continue with --resume"},
        {"--max-steps", "N", CLI_INT, &opts->max_steps, 1, 2147483647, NULL,
         "stop after N training steps in all and save (the schedule still spans --epochs); "
         "continue with --resume"},
        {"--bucket-mb", "MB", CLI_FLOAT, &opts->bucket_mb, 0.001, 4096, NULL,
         "under mpirun: the gradients of one all-reduce, in MB (default 25; "
         "docs/distributed.md)"},
        {"--sync-bn", NULL, CLI_FLAG, &opts->sync_bn, 0, 0, NULL,
         "under mpirun or on several GPUs (cuda:0,1): batchnorm statistics and gradients "
         "over every rank's or GPU's batch, as one process at the global batch"},
        {"--check-numerics", NULL, CLI_FLAG, &opts->check_numerics, 0, 0, NULL,
         "check every op's output for inf and NaN as it runs, and stop at the first with the "
         "op, node, layer and step (slow: for finding where training diverges)"},
        {"--json", NULL, CLI_FLAG, &opts->json, 0, 0, NULL,
         "print the result as one JSON object on stdout (progress goes to stderr)"},
    };
    return cli_parse("train", "[options]", argc, argv, options,
                     (int)(sizeof options / sizeof options[0]));
}

/* The options over *opts.  When they name another recipe, they are parsed
 * again over that recipe's defaults, so the options beside --recipe win
 * wherever they stand. */
static cli_parsed parse_options(train_options *opts, int argc, char **argv)
{
    const char *before = opts->recipe;
    cli_parsed parsed = parse_table(opts, argc, argv);
    if (parsed != CLI_PARSED_RUN || strcmp(before, opts->recipe) == 0)
        return parsed;
    *opts = strcmp(opts->recipe, "strong") == 0 ? strong_options : default_options;
    return parse_table(opts, argc, argv);
}

/* --augment: "none" or "crop[:PAD],flip,cutout[:SIZE]". */
#define DEFAULT_CROP_PAD 4
#define DEFAULT_CUTOUT 8
bool train_parse_augment(const char *text, ct_augment *out)
{
    memset(out, 0, sizeof *out);
    if (strcmp(text, "none") == 0)
        return true;
    char item[64];
    while (*text) {
        size_t len = strcspn(text, ",");
        if (len == 0 || len >= sizeof item)
            return false;
        memcpy(item, text, len);
        item[len] = '\0';
        text += len + (text[len] == ',');
        char *colon = strchr(item, ':');
        long value = -1;
        if (colon) {
            char *end = NULL;
            value = strtol(colon + 1, &end, 10);
            if (end == colon + 1 || *end || value < 1 || value > 1024)
                return false;
            *colon = '\0';
        }
        if (strcmp(item, "crop") == 0)
            out->crop_pad = value > 0 ? (int)value : DEFAULT_CROP_PAD;
        else if (strcmp(item, "cutout") == 0)
            out->cutout = value > 0 ? (int)value : DEFAULT_CUTOUT;
        else if (strcmp(item, "flip") == 0 && !colon)
            out->hflip = true;
        else
            return false;
    }
    return true;
}

static int check_options(const train_options *opts)
{
    ct_augment augment;
    if (!train_parse_augment(opts->augment, &augment)) {
        fprintf(stderr,
                "cuttle train: --augment '%s' is not understood; use none or a comma list of "
                "crop[:PAD], flip, cutout[:SIZE] (e.g. crop:4,flip)\n",
                opts->augment);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The learning rate and weight decay, which depend on the optimizer. */
static void fill_rates(train_options *opts)
{
    bool sgd = strcmp(opts->optim, "sgd") == 0, adamw = strcmp(opts->optim, "adamw") == 0;
    if (opts->lr == UNSET)
        opts->lr = sgd ? SGD_PEAK_LR : adamw ? ADAMW_PEAK_LR : ADAM_LR;
    if (opts->weight_decay == UNSET)
        opts->weight_decay = sgd ? SGD_WEIGHT_DECAY : adamw ? ADAMW_WEIGHT_DECAY : 0;
}

void train_options_defaults(train_options *opts)
{
    *opts = default_options;
    fill_rates(opts);
}

/* Defaults that depend on other options. */
static void fill_defaults(train_options *opts, char *out_buffer, size_t capacity)
{
    fill_rates(opts);
    if (!opts->out) {
        char name[128];
        cli_model_name(opts->model, name, sizeof name);
        snprintf(out_buffer, capacity, "runs/%s-%s", name, opts->data);
        opts->out = out_buffer;
    }
}

int train_options_parse(train_options *opts, run_args *args, int argc, char **argv,
                        char *out_buffer, size_t capacity, bool *help)
{
    *opts = default_options;
    cli_parsed parsed = parse_options(opts, argc, argv);
    *help = parsed == CLI_PARSED_HELP;
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (opts->resume) {
        /* the saved options first, then this command line over them */
        const char *resume = opts->resume;
        CLI_TRY(run_resume_args(resume, args));
        *opts = default_options;
        if (parse_options(opts, args->n, args->items) != CLI_PARSED_RUN) {
            fprintf(stderr, "cuttle train: the options saved in %s are not valid\n", resume);
            return CLI_EXIT_FAILED;
        }
        opts->out = resume;
        const char *saved_recipe = opts->recipe;
        parse_options(opts, argc, argv);
        if (strcmp(saved_recipe, opts->recipe) != 0) {
            fprintf(stderr, "cuttle train: the run in %s used --recipe %s; a resumed run keeps "
                            "its recipe (drop --recipe, or start a new run)\n",
                    resume, saved_recipe);
            return CLI_EXIT_USAGE;
        }
    }
    CLI_TRY(run_args_append(args, argc, argv));
    fill_defaults(opts, out_buffer, capacity);
    return check_options(opts);
}
