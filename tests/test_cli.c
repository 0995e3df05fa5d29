/*
 * The cuttle command-line program, run as a user runs it: help, bad
 * commands and options (exit status 2, the option named), a missing dataset
 * (exit status 1, the file named), and short real training runs on a tiny
 * IDX dataset of two easy patterns written to a temporary directory.
 *
 * The program is $BUILD/cuttle (BUILD defaults to "build").
 */
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define SIDE 28
#define N_TRAIN 256
#define N_TEST 128
#define OUTPUT_CAPACITY 65536
#define STRIPE 4 /* period of the stripes, in pixels */

static char cuttle[512];
static char tmp_dir[64];
static char data_dir[128];  /* the tiny dataset */
static char empty_dir[128]; /* no files */
static char output[OUTPUT_CAPACITY];

/* Run "cuttle <args>" and capture its stdout in `output`, with stderr
 * joined to it or thrown away; returns the exit status, or -1 if it did not
 * exit normally. */
static int run_cuttle_with(const char *args, bool join_stderr)
{
    char command[2048];
    snprintf(command, sizeof command, "%s %s %s", cuttle, args,
             join_stderr ? "2>&1" : "2>/dev/null");
    FILE *pipe = popen(command, "r");
    if (!pipe) {
        fprintf(stderr, "  cannot run %s\n", command);
        return -1;
    }
    size_t length = fread(output, 1, sizeof output - 1, pipe);
    output[length] = '\0';
    int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int run_cuttle(const char *args)
{
    return run_cuttle_with(args, true);
}

static void put_u32(FILE *f, uint32_t value)
{
    uint8_t bytes[4] = {(uint8_t)(value >> 24), (uint8_t)(value >> 16), (uint8_t)(value >> 8),
                        (uint8_t)value};
    fwrite(bytes, 1, sizeof bytes, f);
}

/* Class 0: horizontal stripes, class 1: vertical stripes, each with a
 * random phase and noise; labels alternate. */
static bool write_split(const char *prefix, int n, uint64_t seed)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", data_dir, prefix);
    FILE *images = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", data_dir, prefix);
    FILE *labels = fopen(path, "wb");
    if (!images || !labels) {
        if (images)
            fclose(images);
        if (labels)
            fclose(labels);
        return false;
    }
    put_u32(images, 0x00000803u);
    put_u32(images, (uint32_t)n);
    put_u32(images, SIDE);
    put_u32(images, SIDE);
    put_u32(labels, 0x00000801u);
    put_u32(labels, (uint32_t)n);
    uint64_t state = seed;
    for (int i = 0; i < n; i++) {
        int label = i % 2;
        int phase = (int)(harness_uniform(&state, 0, STRIPE));
        for (int r = 0; r < SIDE; r++)
            for (int c = 0; c < SIDE; c++) {
                int along = label == 0 ? r : c;
                bool bright = (along + phase) % STRIPE < STRIPE / 2;
                float value = (bright ? 200.0f : 30.0f) + harness_uniform(&state, -25, 25);
                fputc((int)value, images);
            }
        fputc(label, labels);
    }
    bool ok = !ferror(images) && !ferror(labels);
    ok = fclose(images) == 0 && ok;
    return fclose(labels) == 0 && ok;
}

static void test_help(void)
{
    CHECK(run_cuttle("--help") == 0, "cuttle --help must exit 0: %s", output);
    CHECK(strstr(output, "train") != NULL, "help lacks the commands: %s", output);
    CHECK(run_cuttle("") == 2, "cuttle without a command must exit 2");
    CHECK(run_cuttle("version") == 0 && strstr(output, "cuttle 0."), "version: %s", output);

    CHECK(run_cuttle("train --help") == 0, "train --help must exit 0: %s", output);
    const char *options[] = {"--model",   "--data",         "--data-dir",        "--epochs",
                             "--batch",   "--optim",        "--lr",              "--seed",
                             "--threads", "--weight-decay", "--label-smoothing", "--json",
                             "--schedule", "--augment",     "--device",          "--out",
                             "--resume",  "--workers"};
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        CHECK(strstr(output, options[i]), "train --help does not list %s", options[i]);
}

static void test_bad_command_lines(void)
{
    CHECK(run_cuttle("frobnicate") == 2 && strstr(output, "frobnicate"),
          "an unknown command must exit 2 and be named: %s", output);
    CHECK(run_cuttle("train --frobnicate 3") == 2 && strstr(output, "--frobnicate"),
          "an unknown option must exit 2 and be named: %s", output);
    CHECK(run_cuttle("train --epochs 0") == 2 && strstr(output, "--epochs"),
          "--epochs 0 must be refused: %s", output);
    CHECK(run_cuttle("train --epochs 3x") == 2 && strstr(output, "--epochs"),
          "--epochs 3x must be refused: %s", output);
    CHECK(run_cuttle("train --batch=-4") == 2 && strstr(output, "--batch"),
          "--batch=-4 must be refused: %s", output);
    CHECK(run_cuttle("train --lr nan") == 2 && strstr(output, "--lr"),
          "--lr nan must be refused: %s", output);
    CHECK(run_cuttle("train --optim rmsprop") == 2 && strstr(output, "--optim") &&
              strstr(output, "adamw"),
          "an unknown optimizer must be refused with the choices: %s", output);
    CHECK(run_cuttle("train --model resnet999") == 2 && strstr(output, "resnet999") &&
              strstr(output, "resnet18"),
          "an unknown model must be refused, listing the known ones: %s", output);
    CHECK(run_cuttle("train --augment crop:x") == 2 && strstr(output, "--augment"),
          "a bad --augment must be refused: %s", output);
    CHECK(run_cuttle("train --schedule linear") == 2 && strstr(output, "cosine"),
          "an unknown schedule must be refused with the choices: %s", output);
    CHECK(run_cuttle("eval") == 2 && strstr(output, "--weights"),
          "eval without --weights must be refused: %s", output);
    CHECK(run_cuttle("predict --weights x.safetensors") == 2 && strstr(output, "INPUT"),
          "predict without inputs must be refused: %s", output);
    CHECK(run_cuttle("train --epochs") == 2 && strstr(output, "--epochs"),
          "an option without its value must be refused: %s", output);
    CHECK(run_cuttle("train --json=yes") == 2 && strstr(output, "--json"),
          "a flag with a value must be refused: %s", output);
}

static void test_missing_data(void)
{
    char args[512];
    snprintf(args, sizeof args, "train --data mnist --data-dir %s --epochs 1", empty_dir);
    CHECK(run_cuttle(args) == 1, "a directory without the files must exit 1: %s", output);
    CHECK(strstr(output, empty_dir) && strstr(output, "train-images-idx3-ubyte"),
          "the message must name the missing file: %s", output);
    snprintf(args, sizeof args, "train --data mnist --data-dir %s --batch 1000", data_dir);
    CHECK(run_cuttle(args) == 2 && strstr(output, "--batch"),
          "a batch larger than the training set must be refused: %s", output);
}

/* The epoch lines of `text` without their timings (the part before "%  "
 * that follows the test accuracy), one after another. */
static void epoch_results(const char *text, char *out, size_t capacity)
{
    out[0] = '\0';
    for (const char *line = strstr(text, "epoch "); line; line = strstr(line + 1, "\nepoch ")) {
        const char *test = strstr(line, "test loss");
        const char *end = test ? strchr(test, '%') : NULL;
        if (!end)
            break;
        size_t used = strlen(out);
        snprintf(out + used, capacity - used, "%.*s|", (int)(end - line), line);
    }
}

static void test_train_tiny(void)
{
    char args[512], first[2048], second[2048];
    snprintf(args, sizeof args,
             "train --data mnist --data-dir %s --epochs 5 --batch 16 --threads 2 --lr 0.02 --out %s/tiny",
             data_dir, tmp_dir);
    CHECK(run_cuttle(args) == 0, "the tiny run must succeed: %s", output);
    CHECK(strstr(output, "epoch 1/5") && strstr(output, "epoch 5/5"), "epoch lines: %s",
          output);
    const char *result = strstr(output, "test accuracy: ");
    CHECK(result && strstr(result, "(128 images)"), "no final result: %s", output);
    double accuracy = result ? atof(result + strlen("test accuracy: ")) : 0;
    CHECK(accuracy >= 90.0, "two easy patterns: test accuracy %.2f%% < 90%%: %s", accuracy,
          output);
    epoch_results(output, first, sizeof first);

    /* The same seed gives the same run. */
    CHECK(run_cuttle(args) == 0, "the second tiny run must succeed: %s", output);
    epoch_results(output, second, sizeof second);
    CHECK(first[0] && strcmp(first, second) == 0, "runs differ:\n%s\n%s", first, second);
}

static void test_train_json(void)
{
    char args[512];
    snprintf(args, sizeof args,
             "train --data mnist --data-dir %s --epochs 1 --batch 16 --optim adamw --json "
             "--out %s/json",
             data_dir, tmp_dir);
    CHECK(run_cuttle_with(args, false) == 0, "the --json run must succeed: %s", output);
    CHECK(output[0] == '{' && strchr(output, '}') && strchr(output, '}')[1] == '\n' &&
              strchr(output, '}')[2] == '\0',
          "stdout must be one JSON object: %s", output);
    const char *keys[] = {"\"test_accuracy\": ", "\"test_loss\": ", "\"epochs\": 1",
                          "\"seconds\": ", "\"images_per_second\": ",
                          "\"checkpoint\": \"/tmp/"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(strstr(output, keys[i]), "the JSON lacks %s: %s", keys[i], output);
}

/* The whole file in a malloc'd buffer; NULL if unreadable. */
static char *slurp(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *data = malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, file) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(file);
    if (data) {
        data[size] = '\0';
        *length = (size_t)size;
    }
    return data;
}

static int count_lines(const char *text)
{
    int lines = 0;
    for (; text && *text; text++)
        lines += *text == '\n';
    return lines;
}

/* The number after "key": in text, or -1. */
static double json_number(const char *text, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *at = strstr(text, pattern);
    return at ? atof(at + strlen(pattern)) : -1;
}

static void test_run_files(void)
{
    char path[256];
    size_t length = 0;
    snprintf(path, sizeof path, "%s/tiny/metrics.jsonl", tmp_dir);
    char *metrics = slurp(path, &length);
    CHECK(metrics && count_lines(metrics) == 5, "metrics.jsonl must have 5 lines: %s",
          metrics ? metrics : "(missing)");
    CHECK(metrics && strstr(metrics, "\"epoch\": 5,") && strstr(metrics, "\"test_accuracy\": ") &&
              strstr(metrics, "\"train_loss\": ") && strstr(metrics, "\"images_per_second\": "),
          "metrics lines lack fields: %s", metrics ? metrics : "");
    free(metrics);
    const char *files[] = {"model.safetensors", "state.safetensors"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/tiny/%s", tmp_dir, files[i]);
        char *data = slurp(path, &length);
        CHECK(data && length > 1000, "%s is missing or small", path);
        CHECK(data && strstr(data + 8, "\"model\":") && strstr(data + 8, "conv1.weight"),
              "%s lacks the model text or the weights", path);
        free(data);
    }
}

static void test_eval(void)
{
    char args[512];
    static char train_json[OUTPUT_CAPACITY];
    snprintf(args, sizeof args,
             "train --data mnist --data-dir %s --epochs 2 --batch 16 --json --out %s/eval",
             data_dir, tmp_dir);
    CHECK(run_cuttle_with(args, false) == 0, "training for eval: %s", output);
    snprintf(train_json, sizeof train_json, "%s", output);
    snprintf(args, sizeof args, "eval --weights %s/eval/model.safetensors --data-dir %s --json",
             tmp_dir, data_dir);
    CHECK(run_cuttle_with(args, false) == 0, "eval must succeed: %s", output);
    CHECK(json_number(output, "n") == N_TEST, "eval n: %s", output);
    double trained = json_number(train_json, "test_accuracy");
    double evaluated = json_number(output, "accuracy");
    CHECK(trained >= 0 && fabs(trained - evaluated) < 1e-9,
          "eval accuracy %f differs from training's %f", evaluated, trained);
    CHECK(fabs(json_number(train_json, "test_loss") - json_number(output, "loss")) < 1e-5,
          "eval loss differs from training's: %s vs %s", output, train_json);
    snprintf(args, sizeof args,
             "eval --weights %s/eval/model.safetensors --data-dir %s --split train --confusion",
             tmp_dir, data_dir);
    CHECK(run_cuttle(args) == 0 && strstr(output, "confusion matrix") &&
              strstr(output, "train: accuracy"),
          "eval --confusion on train: %s", output);
}

static void test_predict(void)
{
    char args[512];
    snprintf(args, sizeof args,
             "predict --weights %s/eval/model.safetensors --data-dir %s --top 2 --json "
             "mnist:test:0-3 mnist:test:7",
             tmp_dir, data_dir);
    CHECK(run_cuttle_with(args, false) == 0, "predict must succeed: %s", output);
    int predictions = 0;
    for (const char *at = strstr(output, "\"input\": "); at; at = strstr(at + 1, "\"input\": "))
        predictions++;
    CHECK(predictions == 5, "5 predictions expected: %s", output);
    CHECK(strstr(output, "\"input\": \"mnist:test:7\"") && strstr(output, "\"probability\": ") &&
              strstr(output, "\"logits\": ["),
          "predict JSON lacks fields: %s", output);
    snprintf(args, sizeof args,
             "predict --weights %s/eval/model.safetensors --data-dir %s mnist:test:0", tmp_dir,
             data_dir);
    CHECK(run_cuttle(args) == 0 && strstr(output, "mnist:test:0  (labelled 0)") &&
              strstr(output, "  1. "),
          "predict text output: %s", output);
    snprintf(args, sizeof args,
             "predict --weights %s/eval/model.safetensors --data-dir %s mnist:test:100000",
             tmp_dir, data_dir);
    CHECK(run_cuttle(args) == 2 && strstr(output, "out of range"),
          "an index out of range must be refused: %s", output);
    snprintf(args, sizeof args, "predict --weights %s/eval/model.safetensors nosuch.png",
             tmp_dir);
    CHECK(run_cuttle(args) == 2 && strstr(output, "nosuch.png"),
          "a missing image must be refused by name: %s", output);
}

/* Whether two runs under tmp_dir saved the same model.safetensors, byte for byte. */
static bool same_weights(const char *run_a, const char *run_b)
{
    char path[256];
    size_t a_length = 0, b_length = 0;
    snprintf(path, sizeof path, "%s/%s/model.safetensors", tmp_dir, run_a);
    char *a = slurp(path, &a_length);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", tmp_dir, run_b);
    char *b = slurp(path, &b_length);
    bool same = a && b && a_length == b_length && memcmp(a, b, a_length) == 0;
    free(a);
    free(b);
    return same;
}

/* 4 epochs equal 2 epochs, then a resume for 2 more, bit for bit. */
static void test_resume_exact(void)
{
    char args[768], path[256];
    const char *common = "train --data mnist --batch 16 --threads 2 --augment crop:2,flip "
                         "--optim adamw --schedule cosine";
    snprintf(args, sizeof args, "%s --data-dir %s --epochs 4 --out %s/whole", common, data_dir,
             tmp_dir);
    CHECK(run_cuttle(args) == 0, "4 epochs: %s", output);
    snprintf(args, sizeof args, "%s --data-dir %s --epochs 4 --stop-after 2 --out %s/half",
             common, data_dir, tmp_dir);
    CHECK(run_cuttle(args) == 0, "2 epochs: %s", output);
    /* as if killed after writing epoch 3's metrics but before its checkpoint */
    snprintf(path, sizeof path, "%s/half/metrics.jsonl", tmp_dir);
    FILE *metrics = fopen(path, "a");
    if (metrics) {
        fputs("{\"epoch\": 3, \"test_accuracy\": 0.5}\n", metrics);
        fclose(metrics);
    }
    snprintf(args, sizeof args, "train --resume %s/half --data-dir %s", tmp_dir, data_dir);
    CHECK(run_cuttle(args) == 0 && strstr(output, "resuming") && strstr(output, "epoch 3/4"),
          "resume: %s", output);
    CHECK(same_weights("whole", "half"),
          "the resumed run's weights differ from the uninterrupted run's");
    size_t length = 0;
    snprintf(path, sizeof path, "%s/half/metrics.jsonl", tmp_dir);
    char *lines = slurp(path, &length);
    CHECK(lines && count_lines(lines) == 4 && !strstr(lines, "0.5}"),
          "metrics after resume must hold epochs 1-4 once: %s", lines ? lines : "");
    free(lines);
    snprintf(args, sizeof args, "train --resume %s/half --data-dir %s", tmp_dir, data_dir);
    CHECK(run_cuttle(args) == 2 && strstr(output, "--epochs"),
          "resuming a finished run must ask for more epochs: %s", output);
    snprintf(args, sizeof args, "train --resume %s/nothing-here", tmp_dir);
    CHECK(run_cuttle(args) == 1 && strstr(output, "nothing-here"),
          "resuming from a missing run must name it: %s", output);
}

/* --max-steps stops inside an epoch and saves it as partial; a resume with
 * a larger --max-steps goes on from the next batch, bit for bit. */
static void test_max_steps(void)
{
    char args[768], path[256];
    const char *common = "train --data mnist --batch 16 --threads 2 --epochs 3";
    int steps = N_TRAIN / 16 * 2 + 3; /* inside epoch 3 */
    snprintf(args, sizeof args, "%s --data-dir %s --max-steps %d --out %s/steps", common,
             data_dir, steps, tmp_dir);
    CHECK(run_cuttle(args) == 0 && strstr(output, "epoch 3/3") &&
              strstr(output, "stopped inside the epoch"),
          "--max-steps %d: %s", steps, output);
    snprintf(args, sizeof args, "%s --data-dir %s --max-steps 5 --out %s/fewer", common,
             data_dir, tmp_dir);
    CHECK(run_cuttle(args) == 0 && !strstr(output, "epoch 2/3"), "--max-steps 5: %s", output);
    snprintf(path, sizeof path, "%s/fewer/metrics.jsonl", tmp_dir);
    size_t length = 0;
    char *lines = slurp(path, &length);
    CHECK(lines && count_lines(lines) == 1 && strstr(lines, "\"partial\": true"),
          "a stop inside epoch 1 writes its line, partial: %s", lines ? lines : "");
    free(lines);
    snprintf(args, sizeof args, "train --resume %s/fewer --data-dir %s --max-steps %d", tmp_dir,
             data_dir, steps);
    CHECK(run_cuttle(args) == 0 && strstr(output, "(step 5)"), "resume: %s", output);
    CHECK(same_weights("steps", "fewer"),
          "stopped at step 5 and resumed: the weights differ from the uninterrupted run's");
    snprintf(args, sizeof args, "train --resume %s/fewer --data-dir %s --max-steps %d", tmp_dir,
             data_dir, steps);
    CHECK(run_cuttle(args) == 2 && strstr(output, "--max-steps"),
          "resuming a run at its --max-steps must ask for more: %s", output);
}

/* Every optimizer and schedule trains; augmentation and LeNet-5 too. */
static void test_recipes(void)
{
    const char *recipes[] = {
        "--optim sgd --schedule step",         "--optim adam --schedule constant",
        "--optim adamw --schedule onecycle",   "--augment crop,flip,cutout:4 --schedule cosine",
        "--model lenet5 --workers 2",
    };
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        char args[768];
        snprintf(args, sizeof args,
                 "train --data mnist --data-dir %s --epochs 1 --batch 32 %s --out %s/recipe%zu",
                 data_dir, recipes[i], tmp_dir, i);
        CHECK(run_cuttle(args) == 0 && strstr(output, "test accuracy"), "%s: %s", recipes[i],
              output);
    }
}

/* --recipe strong starts from other defaults; the options beside it win
 * wherever they stand; a resumed run keeps its recipe. */
static void test_strong_recipe(void)
{
    char args[768];
    snprintf(args, sizeof args,
             "train --data mnist --data-dir %s --epochs 1 --batch 32 --recipe strong --out %s/strong",
             data_dir, tmp_dir);
    CHECK(run_cuttle(args) == 0 && strstr(output, "train vgg8_bn on mnist (recipe strong)") &&
              strstr(output, "lr 0.1 (onecycle)") &&
              strstr(output, "augment crop:2,flip, batch 32, 1 epochs"),
          "--recipe strong: %s", output);
    snprintf(args, sizeof args, "train --resume %s/strong --recipe default --epochs 2", tmp_dir);
    CHECK(run_cuttle(args) == 2 && strstr(output, "used --recipe strong"),
          "resuming with another recipe must be refused: %s", output);
}

static void test_bad_weights(void)
{
    char args[768], path[256];
    snprintf(path, sizeof path, "%s/truncated.safetensors", tmp_dir);
    FILE *file = fopen(path, "wb");
    if (file) {
        fputs("\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", file);
        fclose(file);
    }
    snprintf(args, sizeof args, "eval --weights %s --data-dir %s", path, data_dir);
    CHECK(run_cuttle(args) == 1 && strstr(output, "truncated.safetensors"),
          "a corrupt checkpoint must be refused by name: %s", output);
    snprintf(args, sizeof args, "eval --weights %s/eval/model.safetensors --model lenet5 "
                                "--data-dir %s",
             tmp_dir, data_dir);
    CHECK(run_cuttle(args) == 1 && strstr(output, "does not fit"),
          "weights of another model must be refused: %s", output);
    snprintf(args, sizeof args, "eval --weights %s/nothing.safetensors", tmp_dir);
    CHECK(run_cuttle(args) == 1 && strstr(output, "nothing.safetensors"),
          "a missing checkpoint must be named: %s", output);
}

/* "cuttle <args>" in the background, its output thrown away; its pid. */
static pid_t spawn_cuttle(const char *args)
{
    char command[2048];
    snprintf(command, sizeof command, "exec %s %s > /dev/null 2>&1", cuttle, args);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Files of a folder whose name holds ".tmp": temporaries left behind. */
static int temporaries(const char *dir)
{
    int count = 0;
    DIR *d = opendir(dir);
    for (struct dirent *entry; d && (entry = readdir(d));)
        count += strstr(entry->d_name, ".tmp") != NULL;
    if (d)
        closedir(d);
    return count;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* SIGKILL at KILLS random moments of a training run, each time resumed:
 * the final weights equal an uninterrupted run's bit for bit, and no
 * temporary file stays behind.  The moments scale with the uninterrupted
 * run's time (a sanitizer build is slower): 1/120 to 1/20 of it after the
 * start, and the first run is killed only once its first checkpoint is
 * there, so that there is always a run to resume. */
#define KILLS 20
static void test_killed_and_resumed(void)
{
    char args[768], run[256], state[300], path[300];
    const char *common = "train --data mnist --batch 16 --threads 1 --epochs 60 --seed 3";
    snprintf(args, sizeof args, "%s --data-dir %s --out %s/k_whole", common, data_dir, tmp_dir);
    double start = seconds_now();
    CHECK(run_cuttle(args) == 0, "the uninterrupted run: %s", output);
    double whole_seconds = seconds_now() - start;
    snprintf(run, sizeof run, "%s/k_run", tmp_dir);
    snprintf(state, sizeof state, "%s/state.safetensors", run);
    snprintf(args, sizeof args, "%s --data-dir %s --out %s", common, data_dir, run);
    uint64_t random = 12345;
    int kills = 0, finished = 0;
    for (int attempt = 0; kills < KILLS && !finished; attempt++) {
        bool resume = attempt > 0;
        if (resume)
            snprintf(args, sizeof args, "train --resume %s --data-dir %s", run, data_dir);
        pid_t pid = spawn_cuttle(args);
        for (int wait = 0; !resume && wait < 60000 && access(state, F_OK) != 0; wait++)
            nanosleep(&(struct timespec){0, 1000000L}, NULL);
        double delay = whole_seconds * harness_uniform(&random, 1.0f / 120, 1.0f / 20);
        nanosleep(&(struct timespec){(time_t)delay, (long)((delay - (time_t)delay) * 1e9)},
                  NULL);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        kills += WIFSIGNALED(status);
        finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CHECK(kills == KILLS, "%d kills landed (the runs were too short to kill?)", kills);
    snprintf(args, sizeof args, "train --resume %s --data-dir %s", run, data_dir);
    int status = run_cuttle(args); /* 2: already finished (it asks for more epochs) */
    CHECK(status == 0 || (status == 2 && strstr(output, "--epochs")), "the last resume: %s",
          output);
    size_t whole_length = 0, killed_length = 0;
    snprintf(path, sizeof path, "%s/k_whole/model.safetensors", tmp_dir);
    char *whole = slurp(path, &whole_length);
    snprintf(path, sizeof path, "%s/model.safetensors", run);
    char *killed = slurp(path, &killed_length);
    CHECK(whole && killed && whole_length == killed_length &&
              memcmp(whole, killed, whole_length) == 0,
          "after %d kills the weights differ from the uninterrupted run's", kills);
    free(whole);
    free(killed);
    CHECK(temporaries(run) == 0, "%d temporary files left in %s", temporaries(run), run);
}

int main(void)
{
    const char *build = getenv("BUILD");
    snprintf(cuttle, sizeof cuttle, "%s/cuttle", build && *build ? build : "build");
    if (access(cuttle, X_OK) != 0) {
        fprintf(stderr, "test_cli: %s is missing: build it first (make)\n", cuttle);
        return 1;
    }
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/cuttle_test_cli_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        fprintf(stderr, "test_cli: mkdtemp failed\n");
        return 1;
    }
    snprintf(data_dir, sizeof data_dir, "%s/data", tmp_dir);
    snprintf(empty_dir, sizeof empty_dir, "%s/empty", tmp_dir);
    if (mkdir(data_dir, 0700) != 0 || mkdir(empty_dir, 0700) != 0 ||
        !write_split("train", N_TRAIN, 1) || !write_split("t10k", N_TEST, 2)) {
        fprintf(stderr, "test_cli: cannot write the tiny dataset in %s\n", data_dir);
        return 1;
    }
    RUN(test_help);
    RUN(test_bad_command_lines);
    RUN(test_missing_data);
    RUN(test_train_tiny);
    RUN(test_train_json);
    RUN(test_run_files);
    RUN(test_eval);
    RUN(test_predict);
    RUN(test_resume_exact);
    RUN(test_max_steps);
    RUN(test_killed_and_resumed);
    RUN(test_recipes);
    RUN(test_strong_recipe);
    RUN(test_bad_weights);
    char command[128];
    snprintf(command, sizeof command, getenv("KEEP") ? "true %s" : "rm -rf %s", tmp_dir);
    if (system(command) != 0)
        fprintf(stderr, "test_cli: could not remove %s\n", tmp_dir);
    return harness_finish();
}
