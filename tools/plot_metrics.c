/*
 * Reading a run's metrics.jsonl for the charts (plot.h), with the strict
 * JSON reader of the library (lib_internal.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "lib_internal.h"
#include "plot.h"
#include "run_files.h"

#define METRICS_JSON_DEPTH 2
#define PATH_CAPACITY 1024

static const char *const metric_keys[PLOT_N_METRICS] = {
    [PLOT_TRAIN_LOSS] = "train_loss",         [PLOT_TEST_LOSS] = "test_loss",
    [PLOT_TRAIN_ACCURACY] = "train_accuracy", [PLOT_TEST_ACCURACY] = "test_accuracy",
    [PLOT_LR] = "lr"};

/* How C's printf and Python's json write values that are not finite.  JSON
 * has none; they are read as null. */
static const char *const nonfinite_words[] = {"-Infinity", "Infinity", "-NaN", "NaN",
                                              "-nan",      "nan",      "-inf", "inf"};

static bool is_word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* The line with each non-finite word outside strings made "null", into out
 * (room for 2 * len + 1: "null" is at most 4/3 of a word). */
static size_t nonfinite_to_null(const char *line, size_t len, char *out)
{
    size_t n = 0;
    bool in_string = false;
    for (size_t i = 0; i < len;) {
        char c = line[i];
        if (in_string) {
            out[n++] = line[i++];
            if (c == '\\' && i < len)
                out[n++] = line[i++];
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"')
            in_string = true;
        size_t word = 0;
        for (size_t w = 0; w < sizeof nonfinite_words / sizeof nonfinite_words[0] && !word; w++) {
            size_t word_len = strlen(nonfinite_words[w]);
            if (word_len <= len - i && memcmp(line + i, nonfinite_words[w], word_len) == 0 &&
                (i + word_len == len || !is_word_char(line[i + word_len])) &&
                (i == 0 || !is_word_char(line[i - 1])))
                word = word_len;
        }
        if (word) {
            memcpy(out + n, "null", 4);
            n += 4;
            i += word;
        } else {
            out[n++] = line[i++];
        }
    }
    out[n] = '\0';
    return n;
}

static int grow(plot_run *run, int *capacity)
{
    if (run->n_epochs < *capacity)
        return CLI_EXIT_OK;
    int grown = *capacity ? 2 * *capacity : 16;
    double *epochs = realloc(run->epochs, sizeof *epochs * (size_t)grown);
    if (epochs)
        run->epochs = epochs;
    bool ok = epochs != NULL;
    for (int m = 0; m < PLOT_N_METRICS && ok; m++) {
        double *values = realloc(run->values[m], sizeof *values * (size_t)grown);
        if (values)
            run->values[m] = values;
        ok = values != NULL;
    }
    if (!ok) {
        fprintf(stderr, "cuttle: out of host memory for the metrics\n");
        return CLI_EXIT_FAILED;
    }
    *capacity = grown;
    return CLI_EXIT_OK;
}

static int bad_line(const char *command, const char *path, long line_number, const char *what,
                    const char *detail)
{
    fprintf(stderr, "cuttle %s: %s line %ld %s%s\n", command, path, line_number, what, detail);
    return CLI_EXIT_FAILED;
}

/* One line's epoch and metrics onto the end of the run. */
static int add_line(const char *command, const char *path, long line_number,
                    const ct_json_value *root, plot_run *run)
{
    if (root->type != CT_JSON_OBJECT)
        return bad_line(command, path, line_number, "is not a JSON object but ",
                        ct_json_kind(root->type));
    const ct_json_value *epoch = ct_json_get(root, "epoch");
    if (!epoch || epoch->type != CT_JSON_NUMBER || !isfinite(epoch->number))
        return bad_line(command, path, line_number, "has no \"epoch\" number", "");
    int e = run->n_epochs;
    run->epochs[e] = epoch->number;
    for (int m = 0; m < PLOT_N_METRICS; m++) {
        const ct_json_value *v = ct_json_get(root, metric_keys[m]);
        run->values[m][e] = NAN;
        if (v && v->type == CT_JSON_NUMBER && isfinite(v->number))
            run->values[m][e] = v->number;
        else if (v && v->type != CT_JSON_NUMBER && v->type != CT_JSON_NULL) {
            fprintf(stderr, "cuttle %s: %s line %ld has \"%s\" that is %s, not a number\n",
                    command, path, line_number, metric_keys[m], ct_json_kind(v->type));
            return CLI_EXIT_FAILED;
        }
    }
    run->n_epochs++;
    return CLI_EXIT_OK;
}

static bool is_blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '\n')
            return false;
    return true;
}

static int read_lines(const char *command, const char *path, FILE *file, plot_run *run)
{
    char *line = NULL, *cleaned = NULL;
    size_t line_capacity = 0, cleaned_capacity = 0;
    int capacity = 0, exit_status = CLI_EXIT_OK;
    ssize_t len;
    for (long line_number = 1;
         exit_status == CLI_EXIT_OK && (len = getline(&line, &line_capacity, file)) >= 0;
         line_number++) {
        if (is_blank(line, (size_t)len))
            continue;
        if (cleaned_capacity < 2 * (size_t)len + 1) {
            free(cleaned);
            cleaned_capacity = 2 * (size_t)len + 1;
            if (!(cleaned = malloc(cleaned_capacity))) {
                fprintf(stderr, "cuttle %s: out of host memory for %s\n", command, path);
                exit_status = CLI_EXIT_FAILED;
                break;
            }
        }
        size_t cleaned_len = nonfinite_to_null(line, (size_t)len, cleaned);
        ct_json_doc doc = {0};
        ct_json_error error;
        if (ct_json_parse(cleaned, cleaned_len, METRICS_JSON_DEPTH, &doc, &error) != CT_OK)
            exit_status = bad_line(command, path, line_number, "is not valid JSON: ",
                                   error.message);
        else if ((exit_status = grow(run, &capacity)) == CLI_EXIT_OK)
            exit_status = add_line(command, path, line_number, ct_json_root(&doc), run);
        ct_json_free(&doc);
    }
    free(line);
    free(cleaned);
    if (exit_status == CLI_EXIT_OK && ferror(file)) {
        fprintf(stderr, "cuttle %s: cannot read %s: %s\n", command, path, strerror(errno));
        exit_status = CLI_EXIT_FAILED;
    }
    return exit_status;
}

/* The directory as the legend names it: without trailing slashes. */
static char *run_name(const char *dir)
{
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/')
        len--;
    char *name = malloc(len + 1);
    if (name) {
        memcpy(name, dir, len);
        name[len] = '\0';
    }
    return name;
}

int plot_run_read(const char *command, const char *dir, plot_run *run)
{
    memset(run, 0, sizeof *run);
    struct stat st;
    if (stat(dir, &st) != 0) {
        fprintf(stderr, "cuttle %s: no run directory %s: %s\n", command, dir, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "cuttle %s: %s is not a directory (give the run's directory, the "
                        "--out of cuttle train)\n", command, dir);
        return CLI_EXIT_FAILED;
    }
    char path[PATH_CAPACITY];
    if ((size_t)snprintf(path, sizeof path, "%s/" RUN_METRICS_FILE, dir) >= sizeof path) {
        fprintf(stderr, "cuttle %s: the path %s is too long\n", command, dir);
        return CLI_EXIT_USAGE;
    }
    FILE *file = fopen(path, "r");
    if (!file) {
        fprintf(stderr, "cuttle %s: cannot read %s: %s (is %s a run directory of cuttle "
                        "train?)\n", command, path, strerror(errno), dir);
        return CLI_EXIT_FAILED;
    }
    if (!(run->name = run_name(dir))) {
        fclose(file);
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return CLI_EXIT_FAILED;
    }
    int exit_status = read_lines(command, path, file, run);
    fclose(file);
    if (exit_status == CLI_EXIT_OK && run->n_epochs == 0) {
        fprintf(stderr, "cuttle %s: %s has no epochs (it is empty: has the run finished an "
                        "epoch?)\n", command, path);
        exit_status = CLI_EXIT_FAILED;
    }
    if (exit_status != CLI_EXIT_OK)
        plot_run_free(run);
    return exit_status;
}

void plot_run_free(plot_run *run)
{
    if (!run)
        return;
    free(run->name);
    free(run->epochs);
    for (int m = 0; m < PLOT_N_METRICS; m++)
        free(run->values[m]);
    memset(run, 0, sizeof *run);
}

int plot_curves_of_run(const char *command, const char *dir)
{
    plot_run run;
    CLI_TRY(plot_run_read(command, dir, &run));
    char path[PATH_CAPACITY];
    int exit_status = CLI_EXIT_OK;
    if ((size_t)snprintf(path, sizeof path, "%s/" PLOT_CURVES_FILE, dir) >= sizeof path) {
        fprintf(stderr, "cuttle %s: the path %s is too long\n", command, dir);
        exit_status = CLI_EXIT_USAGE;
    } else {
        exit_status = plot_curves_write(command, &run, 1, path);
    }
    plot_run_free(&run);
    return exit_status;
}
