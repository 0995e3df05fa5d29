/*
 * The files of a training run (run_files.h).
 */
#include "run_files.h"

#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json_writer.h"
#include "lib_internal.h"

#define PATH_CAPACITY 1024
#define ARGS_JSON_DEPTH 4
#define METRICS_LINE_CAPACITY 4096

static int path_in(const char *dir, const char *file, char *out, size_t capacity)
{
    if ((size_t)snprintf(out, capacity, "%s/%s", dir, file) >= capacity) {
        fprintf(stderr, "cuttle train: the path %s/%s is too long\n", dir, file);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* ---- arguments ----------------------------------------------------------------- */

static int add_arg(run_args *args, const char *text)
{
    char **grown = realloc(args->items, sizeof *grown * (size_t)(args->n + 1));
    if (!grown) {
        fprintf(stderr, "cuttle train: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    args->items = grown;
    if (!(args->items[args->n] = strdup(text))) {
        fprintf(stderr, "cuttle train: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    args->n++;
    return CLI_EXIT_OK;
}

/* Options that steer one invocation, not the run: never saved. */
static const char *const unsaved_options[] = {"--resume", "--stop-after", "--max-steps"};

static bool is_unsaved(const char *arg, bool *takes_next)
{
    for (size_t i = 0; i < sizeof unsaved_options / sizeof unsaved_options[0]; i++) {
        size_t len = strlen(unsaved_options[i]);
        if (strncmp(arg, unsaved_options[i], len) == 0 && (arg[len] == '\0' || arg[len] == '=')) {
            *takes_next = arg[len] == '\0';
            return true;
        }
    }
    return false;
}

int run_args_append(run_args *args, int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        bool takes_next = false;
        if (is_unsaved(argv[i], &takes_next)) {
            i += takes_next; /* and its value */
            continue;
        }
        /* Checkpoint metadata is UTF-8 text: a path that is not would be
         * refused at the first save, after an epoch of work. */
        if (!ct_json_utf8_valid(argv[i], strlen(argv[i]))) {
            fprintf(stderr, "cuttle train: the argument \"%s\" is not UTF-8 text; a run keeps its "
                    "arguments in its checkpoints for --resume, as text: rename that file or "
                    "directory\n", argv[i]);
            return CLI_EXIT_USAGE;
        }
        CLI_TRY(add_arg(args, argv[i]));
    }
    return CLI_EXIT_OK;
}

void run_args_free(run_args *args)
{
    for (int i = 0; i < args->n; i++)
        free(args->items[i]);
    free(args->items);
    args->items = NULL;
    args->n = 0;
}

/* The arguments as a JSON array of strings, malloc'ed. */
static char *args_json(const run_args *args)
{
    size_t cap = 3;
    for (int i = 0; i < args->n; i++)
        cap += ct_json_escape(NULL, 0, args->items[i], strlen(args->items[i])) + 2;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < args->n; i++) {
        if (i)
            len += (size_t)sprintf(out + len, ", ");
        len += ct_json_escape(out + len, cap - len, args->items[i], strlen(args->items[i]));
    }
    strcpy(out + len, "]");
    return out;
}

/* ---- writing ------------------------------------------------------------------- */

int run_prepare_dir(const char *command, const char *dir)
{
    char path[PATH_CAPACITY];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        fprintf(stderr, "cuttle %s: the path %s is too long\n", command, dir);
        return CLI_EXIT_USAGE;
    }
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end)
            continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cuttle %s: cannot create the directory %s: %s\n", command, path,
                    strerror(errno));
            return CLI_EXIT_FAILED;
        }
        if (end)
            break;
        *p = '/';
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "cuttle %s: %s is not a directory\n", command, dir);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

static int append_metrics(const char *dir, const epoch_metrics *m)
{
    char path[PATH_CAPACITY];
    CLI_TRY(path_in(dir, RUN_METRICS_FILE, path, sizeof path));
    FILE *file = fopen(path, "a");
    if (!file) {
        fprintf(stderr, "cuttle train: cannot write %s: %s\n", path, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    json_writer line = json_writer_start(file);
    json_object(&line);
    json_field_int(&line, "epoch", m->epoch);
    json_field_fixed(&line, "train_loss", m->train_loss, 6);
    json_field_fixed(&line, "train_accuracy", m->train_accuracy, 6);
    json_field_fixed(&line, "test_loss", m->test_loss, 6);
    json_field_fixed(&line, "test_accuracy", m->test_accuracy, 6);
    json_field_fixed(&line, "seconds", m->seconds, 3);
    json_field_fixed(&line, "images_per_second", m->images_per_second, 1);
    json_field_number(&line, "lr", m->lr);
    if (m->loss_scaling) {
        json_field_number(&line, "loss_scale", m->loss_scale);
        json_field_int(&line, "skipped_steps", m->skipped_steps);
    }
    if (m->partial)
        json_field_bool(&line, "partial", true);
    json_end(&line);
    bool ok = fflush(file) == 0 && fsync(fileno(file)) == 0;
    ok = fclose(file) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "cuttle train: cannot write %s: %s\n", path, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

/* fp16: the loss scaler's state, so that --resume goes on with it.  Keys:
 * loss_scale, loss_scale_growth_interval, loss_scale_clean_steps,
 * loss_scale_skipped_steps.  Nothing for other precisions. */
static bool add_loss_scale(run_meta *meta, const ct_plan *plan)
{
    ct_loss_scale_state s;
    if (ct_plan_loss_scale_state(plan, &s) != CT_OK)
        return true;
    char scale[32], growth[32], clean[32], skipped[32];
    snprintf(scale, sizeof scale, "%.9g", s.scale); /* reads back as the same float */
    snprintf(growth, sizeof growth, "%d", s.growth_interval);
    snprintf(clean, sizeof clean, "%d", s.clean_steps);
    snprintf(skipped, sizeof skipped, "%" PRId64, s.skipped_steps);
    return run_meta_add(meta, "loss_scale", scale) &&
           run_meta_add(meta, "loss_scale_growth_interval", growth) &&
           run_meta_add(meta, "loss_scale_clean_steps", clean) &&
           run_meta_add(meta, "loss_scale_skipped_steps", skipped);
}

int run_save_epoch(const char *dir, ct_plan *plan, const run_info *info, const run_args *args,
                   const epoch_metrics *m, int ranks)
{
    char state_path[PATH_CAPACITY], model_path[PATH_CAPACITY], epoch[32], step[32], n_ranks[32];
    CLI_TRY(path_in(dir, RUN_STATE_FILE, state_path, sizeof state_path));
    CLI_TRY(path_in(dir, RUN_MODEL_FILE, model_path, sizeof model_path));
    CLI_TRY(append_metrics(dir, m));
    snprintf(epoch, sizeof epoch, "%ld", m->partial ? m->epoch - 1 : m->epoch);
    snprintf(step, sizeof step, "%" PRId64, ct_plan_step(plan));
    snprintf(n_ranks, sizeof n_ranks, "%d", ranks);
    run_meta meta = {.n = 0};
    char *saved_args = args_json(args);
    bool ok = saved_args && run_meta_add_info(&meta, info) && run_meta_add(&meta, "epoch", epoch);
    int model_n_meta = meta.n;
    ok = ok && run_meta_add(&meta, "step", step) && run_meta_add(&meta, "ranks", n_ranks) &&
         run_meta_add(&meta, "args", saved_args) && add_loss_scale(&meta, plan);
    free(saved_args);
    int exit_status = CLI_EXIT_OK;
    if (!ok) {
        fprintf(stderr, "cuttle train: out of host memory for the checkpoint's metadata\n");
        exit_status = CLI_EXIT_FAILED;
    } else if (ct_plan_save(plan, state_path, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER, meta.n,
                            meta.items) != CT_OK ||
               ct_plan_save(plan, model_path, CT_SAVE_MODEL, model_n_meta, meta.items) !=
                   CT_OK) {
        exit_status = cli_fail("train");
    }
    run_meta_free(&meta);
    return exit_status;
}

/* ---- resuming ------------------------------------------------------------------ */

static int open_state(const char *dir, ct_checkpoint **out)
{
    char path[PATH_CAPACITY];
    CLI_TRY(path_in(dir, RUN_STATE_FILE, path, sizeof path));
    if (ct_checkpoint_open(path, out) != CT_OK) {
        fprintf(stderr, "cuttle train: cannot resume from %s: %s\n", dir, ct_last_error());
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

static int bad_state(const char *dir, const char *what)
{
    fprintf(stderr, "cuttle train: cannot resume from %s: %s/" RUN_STATE_FILE " %s\n", dir, dir,
            what);
    return CLI_EXIT_FAILED;
}

static int parse_args(const char *dir, const char *text, run_args *args)
{
    ct_json_doc doc = {0};
    ct_json_error error;
    if (!text || ct_json_parse(text, strlen(text), ARGS_JSON_DEPTH, &doc, &error) != CT_OK)
        return bad_state(dir, "has no valid 'args' metadata");
    const ct_json_value *root = ct_json_root(&doc);
    int exit_status = root->type == CT_JSON_ARRAY ? CLI_EXIT_OK
                                                   : bad_state(dir, "has 'args' that is not a list");
    const ct_json_value *v = ct_json_first(root);
    for (int i = 0; exit_status == CLI_EXIT_OK && i < root->count; i++, v = ct_json_next(v)) {
        if (v->type != CT_JSON_STRING)
            exit_status = bad_state(dir, "has 'args' that are not strings");
        else
            exit_status = add_arg(args, v->string);
    }
    ct_json_free(&doc);
    return exit_status;
}

int run_resume_args(const char *dir, run_args *args)
{
    ct_checkpoint *state = NULL;
    CLI_TRY(open_state(dir, &state));
    int exit_status = parse_args(dir, ct_checkpoint_meta(state, "args"), args);
    ct_checkpoint_close(state);
    return exit_status;
}

int run_resume_model_text(const char *dir, char **text)
{
    ct_checkpoint *state = NULL;
    CLI_TRY(open_state(dir, &state));
    const char *model = ct_checkpoint_meta(state, "model");
    int exit_status = CLI_EXIT_OK;
    if (!model)
        exit_status = bad_state(dir, "has no 'model' metadata");
    else if (!(*text = strdup(model)))
        exit_status = bad_state(dir, "could not be read: out of host memory");
    ct_checkpoint_close(state);
    return exit_status;
}

static bool parse_count(const char *text, long long *out)
{
    char *end = NULL;
    if (!text)
        return false;
    errno = 0;
    *out = strtoll(text, &end, 10);
    return end != text && !*end && errno == 0 && *out >= 0;
}

/* The saved scaler's state into an fp16 plan (a run saved before it was
 * kept starts from the default scale); false when the keys are not valid. */
static bool restore_loss_scale(const ct_checkpoint *state, ct_plan *plan)
{
    ct_loss_scale_state s;
    const char *scale = ct_checkpoint_meta(state, "loss_scale");
    if (!scale || ct_plan_loss_scale_state(plan, &s) != CT_OK)
        return true;
    long long growth = 0, clean = 0, skipped = 0;
    char *end = NULL;
    s.scale = strtof(scale, &end);
    if (end == scale || *end || !parse_count(ct_checkpoint_meta(state, "loss_scale_growth_interval"),
                                              &growth) ||
        !parse_count(ct_checkpoint_meta(state, "loss_scale_clean_steps"), &clean) ||
        !parse_count(ct_checkpoint_meta(state, "loss_scale_skipped_steps"), &skipped) ||
        growth > INT32_MAX || clean > INT32_MAX)
        return false;
    s.growth_interval = (int)growth;
    s.clean_steps = (int)clean;
    s.skipped_steps = skipped;
    return ct_plan_set_loss_scale_state(plan, &s) == CT_OK;
}

int run_resume_state(const char *dir, ct_plan *plan, int ranks, long *epochs_done)
{
    ct_checkpoint *state = NULL;
    CLI_TRY(open_state(dir, &state));
    long long epoch = 0, step = 0, saved_ranks = 1; /* no "ranks": from before mpirun */
    const char *ranks_text = ct_checkpoint_meta(state, "ranks");
    int exit_status = CLI_EXIT_OK;
    if (!parse_count(ct_checkpoint_meta(state, "epoch"), &epoch) ||
        !parse_count(ct_checkpoint_meta(state, "step"), &step) ||
        (ranks_text && !parse_count(ranks_text, &saved_ranks)))
        exit_status = bad_state(dir, "lacks a valid 'epoch', 'step' or 'ranks'");
    else if (saved_ranks != ranks) {
        fprintf(stderr,
                "cuttle train: the run in %s was trained by %lld process%s and this is %d: "
                "resume it with %s%lld (another number of ranks would change every batch)\n",
                dir, saved_ranks, saved_ranks == 1 ? "" : "es", ranks,
                saved_ranks == 1 ? "one process, without mpirun, or mpirun -np " : "mpirun -np ",
                saved_ranks);
        exit_status = CLI_EXIT_USAGE;
    } else if (ct_plan_load_checkpoint(plan, state, CT_SAVE_MODEL | CT_SAVE_OPTIMIZER) != CT_OK) {
        exit_status = cli_fail("train");
    } else if (!restore_loss_scale(state, plan)) {
        exit_status = bad_state(dir, "has a 'loss_scale' that is not valid");
    }
    ct_checkpoint_close(state);
    if (exit_status == CLI_EXIT_OK) {
        ct_plan_set_step(plan, step);
        *epochs_done = (long)epoch;
    }
    return exit_status;
}

int run_trim_metrics(const char *dir, long epochs_done)
{
    char path[PATH_CAPACITY], temp[PATH_CAPACITY + 8];
    CLI_TRY(path_in(dir, RUN_METRICS_FILE, path, sizeof path));
    snprintf(temp, sizeof temp, "%s.tmp", path);
    FILE *in = fopen(path, "r");
    if (!in)
        return CLI_EXIT_OK; /* nothing to trim */
    FILE *out = fopen(temp, "w");
    if (!out) {
        fclose(in);
        fprintf(stderr, "cuttle train: cannot write %s: %s\n", temp, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    char line[METRICS_LINE_CAPACITY];
    while (fgets(line, sizeof line, in)) {
        const char *field = strstr(line, "\"epoch\": ");
        long epoch = field ? strtol(field + strlen("\"epoch\": "), NULL, 10) : 0;
        if (field && epoch >= 1 && epoch <= epochs_done)
            fputs(line, out);
    }
    fclose(in);
    bool ok = fflush(out) == 0 && fsync(fileno(out)) == 0;
    ok = fclose(out) == 0 && ok && rename(temp, path) == 0;
    if (!ok) {
        fprintf(stderr, "cuttle train: cannot rewrite %s: %s\n", path, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}
