/*
 * cuttle prune: saved weights made smaller, then fine-tuned (docs/pruning.md).
 *
 *   --structured R    R of each prunable convolution's output channels go
 *                     (ct_plan_prune_channels): a real smaller network, its
 *                     model text with the new channel counts and its weights
 *   --unstructured R  the R of all conv and linear weights of smallest |w|
 *                     are set to 0 (ct_plan_prune_weights), and stay 0 while
 *                     the rest are fine-tuned (the masks are applied again
 *                     after every step); same shapes
 *
 * Then --finetune EPOCHS of training on the dataset's training split with
 * cuttle train's loop (tools/trainer.h), and DIR/model.safetensors (with the
 * metadata eval, predict and bench read) and DIR/model.model (its text).
 * The report: parameters and FLOPs before and after, each layer's channels
 * kept or sparsity, and the test accuracy before pruning, right after it
 * and after fine-tuning.  Everything is checked before anything is written.
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json_writer.h"
#include "run_files.h"
#include "run_info.h"
#include "trainer.h"

#define PRUNE_EVAL_BATCH 500
#define PRUNE_DEFAULT_BATCH 64
#define PRUNE_DEFAULT_LR 0.01
#define PRUNE_MODEL_TEXT_FILE "model.model"
#define UNSET_RATIO (-1.0)

typedef struct prune_options {
    const char *weights, *model, *data, *data_dir, *input, *rank, *out, *device, *augment;
    double structured, unstructured, lr;
    long classes, finetune, batch, threads, seed;
    bool json;
} prune_options;

static const char *const ranks[] = {"l1", "bn", NULL};

/* What one run holds, freed by job_free. */
typedef struct prune_job {
    const prune_options *o;
    FILE *log;                 /* progress: stdout, or stderr under --json */
    ct_checkpoint *checkpoint;
    run_info info;             /* the model's; then the pruned model's text and name */
    ct_dataset *train, *test;
    ct_backend *backend;
    ct_graph *graph;           /* the model as saved, batch 1, for pruning */
    ct_plan *plan;
    ct_tensor *x, *y;
    ct_pruned pruned;          /* --structured */
    ct_sparsity sparsity;      /* --unstructured */
    ct_plan *result;           /* borrowed: the plan whose weights are written */
    cli_evaluator *ev;
    trainer t;
    bool trained;
    double accuracy[3];        /* before pruning, right after, after fine-tuning */
    double flops[2];           /* per image, before and after */
    int64_t params[2];
    int64_t *zeros_after;      /* --unstructured: each mask's zeros after fine-tuning */
} prune_job;

static void job_free(prune_job *j)
{
    free(j->zeros_after);
    trainer_free(&j->t);
    cli_evaluator_free(j->ev);
    ct_sparsity_free(&j->sparsity);
    ct_pruned_free(&j->pruned);
    ct_plan_free(j->plan);
    ct_graph_free(j->graph);
    ct_backend_free(j->backend);
    ct_dataset_free(j->test);
    ct_dataset_free(j->train);
    run_info_free(&j->info);
    ct_checkpoint_close(j->checkpoint);
}

static int64_t count_params(const ct_graph *graph)
{
    int64_t n = 0;
    for (int i = 0; i < ct_graph_n_state(graph); i++)
        if (ct_tensor_is_param(ct_graph_state(graph, i)))
            n += ct_tensor_numel(ct_graph_state(graph, i));
    return n;
}

/* Every parameter and buffer of `from`'s graph into the tensor of the same
 * name in `to` (a training plan also holds optimizer state, left as is). */
static int copy_state(ct_plan *from, ct_plan *to)
{
    const ct_graph *src = ct_plan_graph(from), *dst = ct_plan_graph(to);
    int exit_status = CLI_EXIT_OK;
    for (int i = 0; i < ct_graph_n_state(src) && exit_status == CLI_EXIT_OK; i++) {
        ct_tensor *t = ct_graph_state(src, i), *u = ct_graph_find(dst, ct_tensor_name(t));
        size_t bytes = ct_tensor_bytes(t);
        void *buffer = malloc(bytes ? bytes : 1);
        if (!u || ct_tensor_bytes(u) != bytes || !buffer) {
            fprintf(stderr, "cuttle prune: cannot copy '%s' into the fine-tuning model (%s)\n",
                    ct_tensor_name(t), buffer ? "no match: a bug in cuttle" : "out of memory");
            exit_status = CLI_EXIT_FAILED;
        } else if (ct_plan_read(from, t, buffer, bytes) != CT_OK ||
                   ct_plan_write(to, u, buffer, bytes) != CT_OK) {
            exit_status = cli_fail("prune");
        }
        free(buffer);
    }
    return exit_status;
}

static int load_data(prune_job *j)
{
    const prune_options *o = j->o;
    const char *name = o->data ? o->data : j->info.dataset;
    if (!name) {
        fprintf(stderr, "cuttle prune: %s does not say which dataset it was trained on; give "
                        "--data (fine-tuning and the accuracies need it)\n", o->weights);
        return CLI_EXIT_USAGE;
    }
    CLI_TRY(cli_load_dataset("prune", name, o->data_dir, "train", &j->train));
    CLI_TRY(cli_load_dataset("prune", name, o->data_dir, "test", &j->test));
    const ct_dataset *d = j->train;
    int shape[3] = {ct_dataset_channels(d), ct_dataset_height(d), ct_dataset_width(d)};
    if (memcmp(shape, j->info.input, sizeof shape) != 0 ||
        ct_dataset_classes(d) != j->info.classes) {
        fprintf(stderr, "cuttle prune: %s holds %dx%dx%d images of %d classes, but %s takes "
                        "%dx%dx%d and %d classes\n", name, shape[0], shape[1], shape[2],
                ct_dataset_classes(d), j->info.name, j->info.input[0], j->info.input[1],
                j->info.input[2], j->info.classes);
        return CLI_EXIT_USAGE;
    }
    if (o->batch > ct_dataset_size(j->train)) {
        fprintf(stderr, "cuttle prune: --batch %ld is larger than the %lld training images\n",
                o->batch, (long long)ct_dataset_size(j->train));
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The model as saved, at batch 1, its accuracy, FLOPs and parameters. */
static int load_model(prune_job *j)
{
    int64_t shape[4] = {1, j->info.input[0], j->info.input[1], j->info.input[2]};
    if (!(j->graph = ct_graph_new()))
        return cli_fail("prune");
    j->x = ct_input(j->graph, "x", CT_F32, 4, shape);
    j->y = ct_model_build(j->graph, j->info.text, j->x, j->info.classes);
    if (ct_graph_status(j->graph) != CT_OK)
        return cli_fail("prune");
    ct_tensor_keep(j->y);
    if (ct_plan_new(j->graph, j->backend, 1, &j->plan) != CT_OK ||
        ct_plan_load_checkpoint(j->plan, j->checkpoint, CT_SAVE_MODEL) != CT_OK)
        return cli_fail("prune");
    j->flops[0] = ct_plan_flops(j->plan, CT_EVAL);
    j->params[0] = count_params(j->graph);
    return CLI_EXIT_OK;
}

/* Test accuracy of `text` with the weights of `weights` into accuracy[k]. */
static int evaluate(prune_job *j, const char *text, ct_plan *weights, int k)
{
    cli_evaluator_free(j->ev);
    j->ev = NULL;
    int64_t size = ct_dataset_size(j->test);
    int batch = (int)(size < PRUNE_EVAL_BATCH ? size : PRUNE_EVAL_BATCH);
    double loss = 0;
    CLI_TRY(cli_evaluator_new("prune", text, NULL, j->info.input, j->info.classes, batch,
                              CT_PRECISION_FP32, j->backend, &j->ev));
    CLI_TRY(cli_evaluator_copy_weights("prune", j->ev, weights));
    return cli_evaluate("prune", j->ev, j->test, &loss, &j->accuracy[k], NULL);
}

static int prune(prune_job *j)
{
    const prune_options *o = j->o;
    if (o->structured != UNSET_RATIO) {
        char name[160];
        snprintf(name, sizeof name, "%s_pruned", j->info.name);
        for (char *c = name; *c; c++) /* a model name is a word of the model format */
            *c = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                 (*c >= '0' && *c <= '9') ? *c : '_';
        ct_prune_args args = {.ratio = o->structured, .name = name,
                              .rank = strcmp(o->rank, "bn") == 0 ? CT_PRUNE_RANK_BN
                                                                 : CT_PRUNE_RANK_L1};
        if (ct_plan_prune_channels(j->plan, j->x, j->y, &args, &j->pruned) != CT_OK)
            return cli_fail("prune");
        char *text = strdup(j->pruned.text), *copy = strdup(name);
        if (!text || !copy) {
            free(text);
            free(copy);
            fprintf(stderr, "cuttle prune: out of host memory\n");
            return CLI_EXIT_FAILED;
        }
        free(j->info.text);
        free(j->info.name);
        j->info.text = text;
        j->info.name = copy;
        j->result = j->pruned.plan;
        j->flops[1] = ct_plan_flops(j->pruned.plan, CT_EVAL);
        j->params[1] = count_params(j->pruned.graph);
    } else {
        if (ct_plan_prune_weights(j->plan, j->y, o->unstructured, &j->sparsity) != CT_OK)
            return cli_fail("prune");
        j->result = j->plan;
        j->flops[1] = j->flops[0]; /* the kernels are dense: the zeros are still computed */
        j->params[1] = j->params[0];
    }
    return evaluate(j, j->info.text, j->result, 1);
}

static int put_masks_back(void *user, ct_plan *plan)
{
    return ct_plan_apply_masks(plan, user) == CT_OK ? CLI_EXIT_OK : cli_fail("prune");
}

static int finetune(prune_job *j)
{
    const prune_options *o = j->o;
    train_options opts;
    train_options_defaults(&opts);
    opts.batch = o->batch;
    opts.lr = o->lr;
    opts.seed = o->seed;
    opts.epochs = o->finetune;
    opts.schedule = "cosine";
    opts.augment = o->augment;
    CLI_TRY(trainer_init(&j->t, "prune", &opts, &j->info, j->train, &j->backend, 1, 0, 1));
    CLI_TRY(copy_state(j->result, j->t.plan));
    if (o->unstructured != UNSET_RATIO) {
        j->t.after_step = put_masks_back;
        j->t.user = &j->sparsity;
    }
    int64_t total = ct_loader_batches(j->t.loader) * o->finetune;
    for (long epoch = 1; epoch <= o->finetune; epoch++) {
        epoch_sums sums = {0};
        trainer_epoch e = {.epoch = epoch, .epochs = o->finetune, .total_steps = total,
                           .schedule = opts.schedule, .lr = opts.lr, .ranks = 1, .log = j->log};
        CLI_TRY(trainer_run_epoch(&j->t, &e, &sums));
        double steps = (double)(sums.steps ? sums.steps : 1);
        fprintf(j->log, "fine-tune epoch %ld/%ld  train loss %.4f acc %.2f%%\n", epoch,
                o->finetune, sums.loss / steps,
                100.0 * (double)sums.correct / (steps * j->t.batch));
    }
    j->result = j->t.plan;
    j->trained = true;
    return evaluate(j, j->info.text, j->result, 2);
}

/* --unstructured: the zeros each weight holds now (after fine-tuning). */
static int count_zeros(prune_job *j)
{
    const ct_graph *graph = ct_plan_graph(j->result);
    if (!(j->zeros_after = calloc((size_t)j->sparsity.n_layers + 1, sizeof *j->zeros_after)))
        return CLI_EXIT_FAILED;
    for (int k = 0; k < j->sparsity.n_layers; k++) {
        const ct_weight_mask *m = &j->sparsity.layers[k];
        ct_tensor *w = ct_graph_find(graph, m->name);
        float *v = j->sparsity.scratch;
        if (!w || ct_plan_read(j->result, w, v, sizeof *v * (size_t)m->count) != CT_OK)
            return cli_fail("prune");
        for (int64_t i = 0; i < m->count; i++)
            j->zeros_after[k] += v[i] == 0.0f;
    }
    return CLI_EXIT_OK;
}

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok) {
        fprintf(stderr, "cuttle prune: cannot write %s\n", path);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

static int write_outputs(prune_job *j, char *path, size_t capacity)
{
    CLI_TRY(run_prepare_dir("prune", j->o->out));
    run_meta meta = {.n = 0};
    int exit_status = CLI_EXIT_OK;
    if (!run_meta_add_info(&meta, &j->info)) {
        fprintf(stderr, "cuttle prune: out of host memory for the metadata\n");
        exit_status = CLI_EXIT_FAILED;
    }
    snprintf(path, capacity, "%s/%s", j->o->out, PRUNE_MODEL_TEXT_FILE);
    if (exit_status == CLI_EXIT_OK)
        exit_status = write_file(path, j->info.text);
    snprintf(path, capacity, "%s/%s", j->o->out, RUN_MODEL_FILE);
    if (exit_status == CLI_EXIT_OK &&
        ct_plan_save(j->result, path, CT_SAVE_MODEL, meta.n, meta.items) != CT_OK)
        exit_status = cli_fail("prune");
    run_meta_free(&meta);
    return exit_status;
}

static void print_report(const prune_job *j, const char *path)
{
    const prune_options *o = j->o;
    bool structured = o->structured != UNSET_RATIO;
    if (structured) {
        printf("pruned %.3g of the output channels of each prunable convolution (ranked by %s):\n",
               o->structured, strcmp(o->rank, "bn") == 0 ? "batchnorm |gamma|" : "filter L1");
        printf("  %-24s %8s -> %-8s %s\n", "convolution", "channels", "kept", "note");
        for (int k = 0; k < j->pruned.n_layers; k++) {
            const ct_prune_layer *l = &j->pruned.layers[k];
            char note[96] = "";
            if (l->reason)
                snprintf(note, sizeof note, "kept whole: %s", l->reason);
            else if (l->tie)
                snprintf(note, sizeof note, "residual set %d (pruned together)", l->tie);
            printf("  %-24s %8d -> %-8d %s\n", l->name, l->channels_before, l->channels_after,
                   note);
        }
    } else {
        printf("pruned %.3g of all convolution and linear weights by magnitude (global "
               "threshold |w| <= %.4g):\n", o->unstructured, (double)j->sparsity.threshold);
        printf("  %-24s %10s %10s %9s %s\n", "weight", "values", "pruned", "sparsity",
               j->trained ? "zeros after fine-tuning" : "");
        for (int k = 0; k < j->sparsity.n_layers; k++) {
            const ct_weight_mask *m = &j->sparsity.layers[k];
            printf("  %-24s %10lld %10lld %8.1f%% ", m->name, (long long)m->count,
                   (long long)m->zeros, 100.0 * (double)m->zeros / (double)m->count);
            if (j->trained)
                printf("%lld", (long long)j->zeros_after[k]);
            printf("\n");
        }
    }
    printf("  parameters          %lld -> %lld (%.1f%%)\n", (long long)j->params[0],
           (long long)j->params[1], 100.0 * (double)j->params[1] / (double)j->params[0]);
    printf("  FLOPs per image     %.4g -> %.4g (%.2fx fewer)%s\n", j->flops[0], j->flops[1],
           j->flops[0] / j->flops[1],
           structured ? "" : "  (dense kernels: zeros are still multiplied)");
    printf("  test accuracy       %.2f%% before pruning, %.2f%% right after", 100 * j->accuracy[0],
           100 * j->accuracy[1]);
    if (j->trained)
        printf(", %.2f%% after %ld epoch%s of fine-tuning", 100 * j->accuracy[2], o->finetune,
               o->finetune == 1 ? "" : "s");
    printf(" (%lld images)\n", (long long)ct_dataset_size(j->test));
    printf("wrote %s and %s/%s: cuttle eval --weights %s\n", path, o->out,
           PRUNE_MODEL_TEXT_FILE, path);
}

static void print_json(const prune_job *j, const char *path)
{
    const prune_options *o = j->o;
    bool structured = o->structured != UNSET_RATIO;
    json_writer out = json_writer_start(stdout);
    json_object(&out);
    json_field_string(&out, "model", j->info.name);
    json_field_string(&out, "method", structured ? "structured" : "unstructured");
    json_field_number(&out, "ratio", structured ? o->structured : o->unstructured);
    if (structured)
        json_field_string(&out, "rank", o->rank);
    json_field_int(&out, "params_before", j->params[0]);
    json_field_int(&out, "params_after", j->params[1]);
    json_field_number(&out, "flops_before", j->flops[0]);
    json_field_number(&out, "flops_after", j->flops[1]);
    json_field_fixed(&out, "accuracy_before", j->accuracy[0], 6);
    json_field_fixed(&out, "accuracy_pruned", j->accuracy[1], 6);
    if (j->trained)
        json_field_fixed(&out, "accuracy_finetuned", j->accuracy[2], 6);
    else
        json_field_null(&out, "accuracy_finetuned");
    json_field_int(&out, "finetune_epochs", o->finetune);
    json_key(&out, "layers");
    json_array(&out);
    int n = structured ? j->pruned.n_layers : j->sparsity.n_layers;
    for (int k = 0; k < n; k++) {
        json_object(&out);
        if (structured) {
            const ct_prune_layer *l = &j->pruned.layers[k];
            json_field_string(&out, "name", l->name);
            json_field_int(&out, "channels_before", l->channels_before);
            json_field_int(&out, "channels_after", l->channels_after);
            json_field_int(&out, "residual_set", l->tie);
            json_field_string(&out, "kept_whole_because", l->reason);
        } else {
            const ct_weight_mask *m = &j->sparsity.layers[k];
            json_field_string(&out, "name", m->name);
            json_field_int(&out, "values", m->count);
            json_field_int(&out, "pruned", m->zeros);
            json_field_int(&out, "zeros_after", j->zeros_after[k]);
        }
        json_end(&out);
    }
    json_end(&out);
    json_field_string(&out, "checkpoint", path);
    json_end(&out);
}

static int run_prune(const prune_options *o)
{
    prune_job j = {.o = o, .log = o->json ? stderr : stdout};
    char path[4096];
    int exit_status = run_info_open("prune", &(run_source){o->weights, o->model, o->data,
                                                          o->data_dir, o->input, o->classes},
                                    &j.checkpoint, &j.info);
    if (exit_status == CLI_EXIT_OK &&
        snprintf(path, sizeof path, "%s/%s", o->out, RUN_MODEL_FILE) >= (int)sizeof path) {
        fprintf(stderr, "cuttle prune: the path %s is too long\n", o->out);
        exit_status = CLI_EXIT_USAGE;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = load_data(&j);
    if (exit_status == CLI_EXIT_OK)
        exit_status = cli_backend("prune",
                                  &(cli_device){o->device, o->threads, false, NULL, false, NULL},
                                  j.log, &j.backend);
    if (exit_status == CLI_EXIT_OK)
        exit_status = load_model(&j);
    if (exit_status == CLI_EXIT_OK)
        exit_status = evaluate(&j, j.info.text, j.plan, 0);
    if (exit_status == CLI_EXIT_OK)
        exit_status = prune(&j);
    if (exit_status == CLI_EXIT_OK && o->finetune > 0)
        exit_status = finetune(&j);
    if (exit_status == CLI_EXIT_OK && o->unstructured != UNSET_RATIO)
        exit_status = count_zeros(&j);
    if (exit_status == CLI_EXIT_OK)
        exit_status = write_outputs(&j, path, sizeof path);
    if (exit_status == CLI_EXIT_OK && o->json)
        print_json(&j, path);
    else if (exit_status == CLI_EXIT_OK)
        print_report(&j, path);
    job_free(&j);
    return exit_status;
}

static int check_ratio(const char *option, double ratio)
{
    if (ratio == UNSET_RATIO || (ratio > 0 && ratio < 1))
        return CLI_EXIT_OK;
    fprintf(stderr, "cuttle prune: %s %g: the ratio is the share removed, strictly between 0 "
                    "and 1 (e.g. 0.5)\n", option, ratio);
    return CLI_EXIT_USAGE;
}

int cmd_prune(int argc, char **argv)
{
    prune_options o = {.structured = UNSET_RATIO, .unstructured = UNSET_RATIO, .rank = "l1",
                       .finetune = -1, .batch = PRUNE_DEFAULT_BATCH, .lr = PRUNE_DEFAULT_LR,
                       .seed = 1, .device = "cpu", .augment = "none"};
    const cli_option options[] = {
        {"--weights", "FILE", CLI_TEXT, &o.weights, 0, 0, NULL,
         "the checkpoint (model.safetensors from cuttle train; a state_dict with --model)"},
        {"--model", "NAME|FILE", CLI_TEXT, &o.model, 0, 0, NULL,
         "the model (default: the one recorded in the checkpoint)"},
        {"--structured", "R", CLI_FLOAT, &o.structured, -1e9, 1e9, NULL,
         "remove R (0 < R < 1) of each prunable convolution's output channels"},
        {"--rank", "l1|bn", CLI_TEXT, &o.rank, 0, 0, ranks,
         "for --structured: rank channels by their filter's L1 norm (default) or by the "
         "following batchnorm's |gamma|"},
        {"--unstructured", "R", CLI_FLOAT, &o.unstructured, -1e9, 1e9, NULL,
         "set R (0 < R < 1) of all conv and linear weights to 0, smallest |w| first"},
        {"--finetune", "EPOCHS", CLI_INT, &o.finetune, 0, 100000, NULL,
         "epochs of fine-tuning on the training split after pruning (required; 0: none)"},
        {"-o", "DIR", CLI_TEXT, &o.out, 0, 0, NULL,
         "where model.safetensors and model.model go (required)"},
        {"--out", "DIR", CLI_TEXT, &o.out, 0, 0, NULL, "the same as -o"},
        {"--batch", "B", CLI_INT, &o.batch, 1, 65536, NULL, "fine-tuning batch (default 64)"},
        {"--lr", "X", CLI_FLOAT, &o.lr, 1e-7, 10, NULL,
         "fine-tuning learning rate: SGD (nesterov) on a cosine schedule from it (default 0.01)"},
        {"--augment", "LIST", CLI_TEXT, &o.augment, 0, 0, NULL,
         "fine-tuning augmentation as cuttle train takes it: none (default) or a comma list "
         "of crop[:PAD] flip cutout[:SIZE]"},
        {"--seed", "S", CLI_INT, &o.seed, 0, 2147483647, NULL,
         "seed of the fine-tuning's shuffles and dropout (default 1)"},
        {"--device", "DEV", CLI_TEXT, &o.device, 0, 0, NULL,
         "auto, cpu, cpu:N, cuda or cuda:N (default cpu)"},
        {"--threads", "T", CLI_INT, &o.threads, 0, 4096, NULL, "CPU threads (default all)"},
        RUN_SOURCE_OPTIONS(o),
        {"--json", NULL, CLI_FLAG, &o.json, 0, 0, NULL,
         "the report as one JSON object on stdout (progress goes to stderr)"},
    };
    cli_parsed parsed = cli_parse("prune",
                                  "--weights FILE (--structured R [--rank l1|bn] | "
                                  "--unstructured R) --finetune EPOCHS -o DIR [options]",
                                  argc, argv, options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if ((o.structured == UNSET_RATIO) == (o.unstructured == UNSET_RATIO)) {
        fprintf(stderr, "cuttle prune: give one of --structured R and --unstructured R (%s)\n",
                o.structured == UNSET_RATIO ? "neither was given" : "not both");
        return CLI_EXIT_USAGE;
    }
    CLI_TRY(check_ratio("--structured", o.structured));
    CLI_TRY(check_ratio("--unstructured", o.unstructured));
    if (!o.weights || !o.out || o.finetune < 0) {
        fprintf(stderr, "cuttle prune: --weights FILE, --finetune EPOCHS and -o DIR are "
                        "required (see cuttle prune --help)\n");
        return CLI_EXIT_USAGE;
    }
    ct_augment augment;
    if (!train_parse_augment(o.augment, &augment)) {
        fprintf(stderr, "cuttle prune: --augment '%s' is not understood; use none or a comma "
                        "list of crop[:PAD], flip, cutout[:SIZE]\n", o.augment);
        return CLI_EXIT_USAGE;
    }
    if (o.model && cli_model_is_onnx(o.model)) {
        fprintf(stderr, "cuttle prune: %s is an ONNX file; prune works on a model definition "
                        "and its checkpoint\n", o.model);
        return CLI_EXIT_USAGE;
    }
    if (o.unstructured != UNSET_RATIO && strcmp(o.rank, "l1") != 0) {
        fprintf(stderr, "cuttle prune: --rank is for --structured (unstructured pruning ranks "
                        "weights by |w|)\n");
        return CLI_EXIT_USAGE;
    }
    return cli_parse_only ? CLI_EXIT_OK : run_prune(&o);
}
