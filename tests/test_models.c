/*
 * Model definitions: every built-in model builds with torchvision's (and
 * ct_model_simplecnn's) parameter names and shapes from the fixture that
 * tests/gen_model_fixtures.py wrote; simplecnn's text gives the C model's
 * logits bit for bit; each part of the format does what docs/model-format.md
 * says; errors name the line and the problem; truncated and garbled texts
 * fail cleanly (run under ASan by `make check`).
 *
 *   test_models                          the cases
 *   test_models --torch-check FILE MODEL compare with PyTorch's logits in FILE
 *                                        (tests/test_models_torch.sh)
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuttle.h"
#include "harness.h"
#include "io/json.h"
#include "io/safetensors.h"

#define FIXTURE "tests/fixtures/models.json"
#define N_BATCH 2
#define N_CLASSES 10
#define TORCH_TOLERANCE 1e-4
#define FUZZ_MUTATIONS 300
#define MAX_TEXT 16384

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    if (text && fread(text, 1, (size_t)size, f) != (size_t)size) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (text)
        text[size] = '\0';
    *len = (size_t)size;
    return text;
}

/* Build text on [N_BATCH, c, h, w]; the graph is returned in *graph (free it). */
static ct_tensor *build(const char *text, int c, int h, int w, int classes, ct_graph **graph)
{
    *graph = ct_graph_new();
    int64_t shape[4] = {N_BATCH, c, h, w};
    ct_tensor *x = ct_input(*graph, "x", CT_F32, 4, shape);
    return ct_model_build(*graph, text, x, classes);
}

/* ---- built-ins against the fixture ---- */

static void test_builtin_names(void)
{
    const char *const *names = ct_model_builtin_names();
    const char *expected[] = {"simplecnn", "lenet5",   "vgg8_bn",  "vgg11",    "vgg11_bn",
                              "vgg16",     "vgg16_bn", "resnet18", "resnet34", "resnet50"};
    int n = 0;
    while (names[n])
        n++;
    CHECK(n == 10, "%d built-in models", n);
    for (int i = 0; i < 10; i++) {
        const char *text = ct_model_builtin(expected[i]);
        CHECK(text && strstr(text, "model "), "built-in %s missing", expected[i]);
    }
    CHECK(ct_model_builtin("resnet19") == NULL, "an unknown name has a text");
    CHECK(ct_model_builtin(NULL) == NULL, "NULL has a text");
}

/* One fixture case: "<model> <C>x<H>x<W>" and its [[name, shape], ...]. */
static void check_case(const char *key, const ct_json_value *expected)
{
    char model[64];
    int c, h, w;
    if (sscanf(key, "%63s %dx%dx%d", model, &c, &h, &w) != 4) {
        CHECK(false, "fixture key '%s'", key);
        return;
    }
    ct_graph *graph;
    ct_tensor *y = build(ct_model_builtin(model), c, h, w, N_CLASSES, &graph);
    CHECK(y, "%s: %s", key, ct_last_error());
    if (y) {
        CHECK(ct_tensor_ndim(y) == 2 && ct_tensor_dim(y, 0) == N_BATCH &&
                  ct_tensor_dim(y, 1) == N_CLASSES,
              "%s: logits are not [%d, %d]", key, N_BATCH, N_CLASSES);
        CHECK(ct_graph_n_state(graph) == expected->count, "%s: %d state tensors, PyTorch has %d",
              key, ct_graph_n_state(graph), expected->count);
        const ct_json_value *entry = ct_json_first(expected);
        for (int i = 0; entry && i < expected->count && i < ct_graph_n_state(graph); i++) {
            const ct_json_value *name = ct_json_first(entry);
            const ct_json_value *shape = ct_json_next(name);
            ct_tensor *t = ct_graph_state(graph, i);
            bool same = strcmp(ct_tensor_name(t), name->string) == 0 &&
                        ct_tensor_ndim(t) == shape->count;
            const ct_json_value *dim = ct_json_first(shape);
            for (int d = 0; same && d < shape->count; d++, dim = ct_json_next(dim))
                same = ct_tensor_dim(t, d) == dim->integer;
            CHECK(same, "%s: state %d is '%s' (%d dims), PyTorch's is '%s' (%d dims)", key, i,
                  ct_tensor_name(t), ct_tensor_ndim(t), name->string, shape->count);
            entry = ct_json_next(entry);
        }
    }
    ct_graph_free(graph);
}

static void test_builtins_match_torch_names(void)
{
    size_t len;
    char *text = read_file(FIXTURE, &len);
    CHECK(text, "cannot read %s (run from the repository root)", FIXTURE);
    if (!text)
        return;
    ct_json_doc doc = {0};
    ct_json_error error;
    CHECK_OK(ct_json_parse(text, len, 8, &doc, &error));
    const ct_json_value *models = doc.values ? ct_json_get(ct_json_root(&doc), "models") : NULL;
    CHECK(models && models->count == 23, "%s: expected 23 cases", FIXTURE);
    for (const ct_json_value *key = models ? ct_json_first(models) : NULL;
         key && key < doc.values + doc.n_values; key = ct_json_next_member(key))
        check_case(key->string, ct_json_member_value(key));
    ct_json_free(&doc);
    free(text);
}

/* ---- simplecnn's text is ct_model_simplecnn ---- */

static void check_simplecnn(int c, int hw)
{
    ct_graph *graphs[2];
    ct_tensor *logits[2], *inputs[2];
    int64_t shape[4] = {N_BATCH, c, hw, hw};
    for (int i = 0; i < 2; i++) {
        graphs[i] = ct_graph_new();
        inputs[i] = ct_input(graphs[i], "x", CT_F32, 4, shape);
        logits[i] = i ? ct_model_build(graphs[i], ct_model_builtin("simplecnn"), inputs[i],
                                       N_CLASSES)
                      : ct_model_simplecnn(graphs[i], inputs[i], N_CLASSES);
        CHECK(logits[i], "%s", ct_last_error());
        if (logits[i])
            ct_tensor_keep(logits[i]);
    }
    ct_backend *backend = NULL;
    ct_plan *plans[2] = {NULL, NULL};
    CHECK_OK(ct_backend_new("cpu", &backend));
    for (int i = 0; logits[0] && logits[1] && i < 2; i++)
        CHECK_OK(ct_plan_new(graphs[i], backend, 7 + i, &plans[i]));
    int n_state = ct_graph_n_state(graphs[0]);
    CHECK(n_state == ct_graph_n_state(graphs[1]), "state counts differ");
    if (plans[0] && plans[1] && n_state == ct_graph_n_state(graphs[1])) {
        float *input = malloc(sizeof(float) * N_BATCH * c * hw * hw);
        harness_fill(input, N_BATCH * c * hw * hw, 3, -1, 1);
        for (int s = 0; s < n_state; s++) { /* the C model's weights into the text's */
            ct_tensor *from = ct_graph_state(graphs[0], s), *to = ct_graph_state(graphs[1], s);
            CHECK(strcmp(ct_tensor_name(from), ct_tensor_name(to)) == 0 &&
                      ct_tensor_bytes(from) == ct_tensor_bytes(to),
                  "state %d: %s vs %s", s, ct_tensor_name(from), ct_tensor_name(to));
            void *bytes = malloc(ct_tensor_bytes(from));
            CHECK_OK(ct_plan_read(plans[0], from, bytes, ct_tensor_bytes(from)));
            if (ct_tensor_bytes(from) == ct_tensor_bytes(to))
                CHECK_OK(ct_plan_write(plans[1], to, bytes, ct_tensor_bytes(to)));
            free(bytes);
        }
        float out[2][N_BATCH * N_CLASSES];
        for (int i = 0; i < 2; i++) {
            CHECK_OK(ct_plan_write(plans[i], inputs[i], input,
                                   sizeof(float) * N_BATCH * c * hw * hw));
            CHECK_OK(ct_plan_run(plans[i], CT_EVAL));
            CHECK_OK(ct_plan_read(plans[i], logits[i], out[i], sizeof out[i]));
        }
        CHECK(memcmp(out[0], out[1], sizeof out[0]) == 0,
              "%dx%dx%d: logits differ (max rel err %g)", c, hw, hw,
              harness_rel_err_f32(out[1], out[0], N_BATCH * N_CLASSES));
        free(input);
    }
    for (int i = 0; i < 2; i++) {
        ct_plan_free(plans[i]);
        ct_graph_free(graphs[i]);
    }
    ct_backend_free(backend);
}

static void test_simplecnn_text_is_the_c_model(void)
{
    check_simplecnn(1, 28);
    check_simplecnn(3, 32);
}

/* ---- sources ---- */

static void test_source_builtin_file_and_missing(void)
{
    char *text = NULL;
    CHECK_OK(ct_model_source("resnet18", &text));
    CHECK(text && strcmp(text, ct_model_builtin("resnet18")) == 0, "built-in text differs");
    free(text);

    char dir[] = "/tmp/cuttle_models_XXXXXX", path[64];
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/tiny.model", dir);
    const char *tiny = "# a file\nmodel tiny\nflatten\nfc: linear classes\n";
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    if (f) {
        fputs(tiny, f);
        fclose(f);
    }
    text = NULL;
    CHECK_OK(ct_model_source(path, &text));
    CHECK(text && strcmp(text, tiny) == 0, "file text differs: %s", text ? text : "(null)");
    ct_graph *graph = NULL;
    CHECK(text && build(text, 1, 4, 4, 3, &graph), "%s", ct_last_error());
    ct_graph_free(graph);
    free(text);
    remove(path);
    rmdir(dir);

    text = (char *)"untouched";
    CHECK(ct_model_source(path, &text) == CT_ERR_IO, "a missing file loads");
    CHECK(text == NULL, "text not reset on error");
    CHECK(strstr(ct_last_error(), path) && strstr(ct_last_error(), "resnet18") &&
              strstr(ct_last_error(), "No such file"),
          "message: %s", ct_last_error());
    CHECK(ct_model_source(NULL, &text) == CT_ERR_ARG, "NULL name");
    CHECK(ct_model_source("resnet18", NULL) == CT_ERR_ARG, "NULL text");
}

/* ---- the format ---- */

/* Names and shapes of a small text using most of the format. */
static void test_format_parts(void)
{
    const char *text =
        "model demo   # a comment\n"
        "block pair(out, stride=1)\n"
        "    a: conv out 3 stride=stride pad=1 bias=false\n"
        "    save mid\n"
        "    b: conv out 1 on mid -> side\n"
        "    add side\n"
        "end\n"
        "let wide = channels * 4\n"
        "stem: conv wide (3, 5) pad=(1, 2) groups=channels\n"
        "if height >= 64\n"
        "    maxpool 2\n"
        "else\n"
        "    big: seq\n"
        "        repeat 2\n"
        "            conv 8 3 pad=2 dilation=2; relu\n"
        "        end\n"
        "        if x.height > 1000: maxpool 2\n"
        "        bn; sigmoid\n"
        "        pair 8 stride=2\n"
        "    end\n"
        "end\n"
        "save trunk\n"
        "extra: conv 8 1 -> other\n"
        "concat other; tanh\n"
        "pair 16     # unnamed: its names are inline\n"
        "avgpool 3 stride=1 pad=1 count_include_pad=false\n"
        "global_avgpool; flatten; dropout 0.25\n"
        "fc: linear classes bias=false\n"
        "softmax\n";
    const char *names[] = {"stem.weight",   "stem.bias",     "big.0.weight",
                           "big.0.bias",    "big.2.weight",  "big.2.bias",
                           "big.4.weight",  "big.4.bias",    "big.4.running_mean",
                           "big.4.running_var", "big.4.num_batches_tracked", "big.6.a.weight",
                           "big.6.b.weight", "big.6.b.bias", "extra.weight",
                           "extra.bias",    "a.weight",      "b.weight",
                           "b.bias",        "fc.weight"};
    const int64_t dims[][4] = {{12, 1, 3, 5}, {12}, {8, 12, 3, 3}, {8}, {8, 8, 3, 3}, {8},
                               {8}, {8}, {8}, {8}, {0}, {8, 8, 3, 3}, {8, 8, 1, 1}, {8},
                               {8, 8, 1, 1}, {8}, {16, 16, 3, 3}, {16, 16, 1, 1}, {16}, {5, 16}};
    const int ndims[] = {4, 1, 4, 1, 4, 1, 1, 1, 1, 1, 0, 4, 4, 1, 4, 1, 4, 4, 1, 2};
    ct_graph *graph;
    ct_tensor *y = build(text, 3, 12, 12, 5, &graph);
    CHECK(y, "%s", ct_last_error());
    int n = (int)(sizeof names / sizeof *names);
    CHECK(ct_graph_n_state(graph) == n, "%d state tensors, expected %d",
          ct_graph_n_state(graph), n);
    for (int i = 0; y && i < n && i < ct_graph_n_state(graph); i++) {
        ct_tensor *t = ct_graph_state(graph, i);
        bool same = strcmp(ct_tensor_name(t), names[i]) == 0 && ct_tensor_ndim(t) == ndims[i];
        for (int d = 0; same && d < ndims[i]; d++)
            same = ct_tensor_dim(t, d) == dims[i][d];
        CHECK(same, "state %d: '%s', expected '%s'", i, ct_tensor_name(t), names[i]);
    }
    ct_graph_free(graph);
}

/* Each bad text fails with a status and a message holding every fragment. */
static void test_errors_name_the_line(void)
{
    struct {
        const char *text;
        ct_status status;
        const char *fragments[2];
    } cases[] = {
        {"model m\nrelu\nconv3d 3\n", CT_ERR_FORMAT,
         {"m:3: unknown layer 'conv3d'; known: conv, linear, bn,", "seq"}},
        {"\n\nf: seq\n  relu\n", CT_ERR_FORMAT, {"model:5: the seq opened on line 3 has no 'end'"}},
        {"conv 8 3\n", CT_ERR_FORMAT, {":1: conv has parameters, so it needs a name", "conv1:"}},
        {"c: conv 8 3 strides=2\n", CT_ERR_FORMAT,
         {"c: conv has no argument 'strides'", "out kernel stride pad dilation groups bias"}},
        {"c: conv 8\n", CT_ERR_FORMAT, {":1: c: conv needs 'kernel'"}},
        {"l: linear (2, 3)\n", CT_ERR_FORMAT, {"'out' is one number, not a pair"}},
        {"relu\nfc: linear 10\n", CT_ERR_SHAPE, {"model:2: linear layer 'fc'", "flatten it"}},
        {"c: conv chanels 3\n", CT_ERR_ARG, {":1: unknown value 'chanels'"}},
        {"relu\nadd skip\n", CT_ERR_ARG, {":2: no tensor named 'skip'"}},
        {"model m\nif height < 64\n  fail \"too small\"\nend\n", CT_ERR_SHAPE,
         {"m:3: too small (input 3x32x32", "current tensor"}},
        {"relu\n", CT_ERR_SHAPE, {"model:1: the model ends with", "logits are [N, 10]"}},
        {"a: conv 8 3\nrelu\na: conv 8 3\n", CT_ERR_ARG, {"model:3:", "a.weight"}},
        {"s: seq\n  c: conv 8 3\nend\n", CT_ERR_FORMAT, {":2: 'c:': a seq numbers its layers"}},
        {"relu $\n", CT_ERR_FORMAT, {":1: unexpected character '$'"}},
        {"block b()\n  b\nend\n", CT_ERR_FORMAT, {":2: unknown layer 'b'"}},
        {"repeat 5000: relu\n", CT_ERR_ARG, {":1: repeat 5000: at most 1000"}},
        {"relu\nelse\n", CT_ERR_FORMAT, {":2: 'else' without an open if"}},
        {"let height = 3\n", CT_ERR_ARG, {":1: 'height' cannot be set"}},
        {"c: conv 8 3 stride=1/0\n", CT_ERR_ARG, {":1: division by zero"}},
        {"c: conv 8 3 stride=0\n", CT_ERR_ARG, {"conv stride must be a whole number from 1"}},
        {"dropout 1.5\n", CT_ERR_ARG, {"dropout p must be in [0, 1)"}},
        {"fail \"no end\n", CT_ERR_FORMAT, {":1: a string that does not end on its line"}},
        {"model m\nblock b(p)\n relu\nend\nb\n", CT_ERR_FORMAT, {"m:5: b needs 'p'"}},
        {"model m\nrelu\nmodel n\n", CT_ERR_FORMAT, {"m:3: 'model NAME' must be the first line"}},
        {"c: conv 8 3 -> x\n", CT_ERR_FORMAT, {"'x' is reserved"}},
        {"if (1\nend\n", CT_ERR_FORMAT, {":1: expected ')' to close '('"}},
        {"c: conv 8 3 bias=false bias=true\n", CT_ERR_FORMAT, {"'bias' given twice"}},
        {"relu\nsave t\nadd t\nadd c.weight\n", CT_ERR_ARG, {":4: no tensor named 'c.weight'"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ct_graph *graph;
        ct_tensor *y = build(cases[i].text, 3, 32, 32, N_CLASSES, &graph);
        CHECK(!y && ct_graph_status(graph) == cases[i].status,
              "case %zu: built=%d status %s, expected %s (%s)", i, y != NULL,
              ct_status_name(ct_graph_status(graph)), ct_status_name(cases[i].status),
              ct_last_error());
        for (int f = 0; f < 2 && cases[i].fragments[f]; f++)
            CHECK(strstr(ct_last_error(), cases[i].fragments[f]),
                  "case %zu: message lacks \"%s\": %s", i, cases[i].fragments[f], ct_last_error());
        ct_graph_free(graph);
    }
}

/* An error that happened before ct_model_build stands; NULLs are refused. */
static void test_bad_calls(void)
{
    ct_graph *graph = ct_graph_new();
    int64_t shape[2] = {2, 3};
    ct_tensor *flat = ct_input(graph, "flat", CT_F32, 2, shape);
    CHECK(!ct_model_build(graph, "flatten", flat, 3), "a 2-D input builds");
    CHECK(strstr(ct_last_error(), "[N,C,H,W]"), "message: %s", ct_last_error());
    ct_graph_free(graph);
    graph = ct_graph_new();
    int64_t image[4] = {2, 3, 8, 8};
    ct_tensor *x = ct_input(graph, "x", CT_F32, 4, image);
    CHECK(!ct_model_build(graph, NULL, x, 3), "a NULL text builds");
    CHECK(!ct_model_build(graph, "flatten; fc: linear classes", NULL, 3), "a NULL input builds");
    CHECK(!ct_model_build(NULL, "relu", x, 3), "a NULL graph builds");
    ct_graph_free(graph);
}

/* VGG on large inputs is torchvision's only where its adaptive pool is an identity. */
static void test_vgg_refuses_other_large_inputs(void)
{
    ct_graph *graph;
    CHECK(build(ct_model_builtin("vgg11"), 3, 255, 255, N_CLASSES, &graph),
          "255x255 does not build: %s", ct_last_error());
    ct_graph_free(graph);
    CHECK(!build(ct_model_builtin("vgg11_bn"), 3, 100, 100, N_CLASSES, &graph),
          "100x100 builds");
    CHECK(ct_graph_status(graph) == CT_ERR_SHAPE && strstr(ct_last_error(), "vgg11_bn:") &&
              strstr(ct_last_error(), "7x7 features") && strstr(ct_last_error(), "input 3x100x100"),
          "message: %s", ct_last_error());
    ct_graph_free(graph);
}

/* ---- fuzz ---- */

static uint64_t fuzz_state = 12345;

static uint32_t fuzz_next(void)
{
    fuzz_state = fuzz_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(fuzz_state >> 33);
}

/* Build a text: it must either give [N, classes] logits or fail with a
 * message that gives the line ("<model>:<line>: "). */
static void fuzz_one(const char *text, const char *what)
{
    ct_graph *graph;
    ct_tensor *y = build(text, 3, 32, 32, N_CLASSES, &graph);
    if (y)
        CHECK(ct_tensor_ndim(y) == 2 && ct_tensor_dim(y, 1) == N_CLASSES, "%s: bad logits", what);
    else
        CHECK(ct_graph_status(graph) != CT_OK && strchr(ct_last_error(), ':'),
              "%s: failed without a message: '%s'", what, ct_last_error());
    ct_graph_free(graph);
}

static void test_fuzz_truncated_and_garbled(void)
{
    static const char *const garbage[] = {
        "end", "else", "if", "repeat 3:", "seq", "save", "use", "on", "->", "(", ")", ",", "=",
        ":", "conv", "bn", "add x", "concat input", "linear classes", "block q(a)", "let",
        "fail \"boom\"", "x.height", "* 0", "/ 0", "-1e9", "99999999", "#", "\"", "\t", "\x01",
        "\xff", ";", "relu", "maxpool 2", "layer1.0.conv1:", "basic", "2 3 4", "not", "or"};
    static char buffer[MAX_TEXT + 256];
    const char *const *names = ct_model_builtin_names();
    for (int m = 0; names[m]; m++) {
        const char *text = ct_model_builtin(names[m]);
        size_t len = strlen(text);
        if (len > MAX_TEXT)
            continue;
        for (size_t cut = 0; cut < len; cut += 1 + len / 40) { /* truncated */
            memcpy(buffer, text, cut);
            buffer[cut] = '\0';
            fuzz_one(buffer, names[m]);
        }
        for (int k = 0; k < FUZZ_MUTATIONS; k++) { /* a line replaced or words inserted */
            size_t at = fuzz_next() % len, end = at;
            while (end < len && text[end] != '\n')
                end++;
            memcpy(buffer, text, at);
            size_t n = at;
            for (int words = 1 + (int)(fuzz_next() % 3); words > 0; words--) {
                const char *word = garbage[fuzz_next() % (sizeof garbage / sizeof *garbage)];
                n += (size_t)snprintf(buffer + n, 64, "%s ", word);
            }
            size_t rest = fuzz_next() % 2 ? end : at; /* replace the rest of the line, or insert */
            memcpy(buffer + n, text + rest, len - rest);
            buffer[n + len - rest] = '\0';
            fuzz_one(buffer, names[m]);
        }
    }
}

/* ---- --torch-check ---- */

static int torch_check(const char *path, const char *model)
{
    ct_st_file *file = NULL;
    if (ct_st_load(path, &file) != CT_OK) {
        printf("FAIL torch_%s: %s\n", model, ct_last_error());
        return 1;
    }
    const ct_st_tensor *input = ct_st_find(file, "input"), *expected = ct_st_find(file, "logits");
    const char *text = ct_model_builtin(model);
    if (!input || !expected || input->ndim != 4 || expected->ndim != 2 || !text) {
        printf("FAIL torch_%s: %s lacks input/logits, or no such model\n", model, path);
        ct_st_free(file);
        return 1;
    }
    char label[128];
    snprintf(label, sizeof label, "torch_%s_%lldx%lldx%lld", model, (long long)input->shape[1],
             (long long)input->shape[2], (long long)input->shape[3]);
    ct_graph *graph = ct_graph_new();
    ct_tensor *x = ct_input(graph, "input", CT_F32, 4, input->shape);
    ct_tensor *y = ct_model_build(graph, text, x, (int)expected->shape[1]);
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    ct_status status = y ? ct_backend_new("cpu", &backend) : ct_graph_status(graph);
    if (y)
        ct_tensor_keep(y);
    if (status == CT_OK)
        status = ct_plan_new(graph, backend, 1, &plan);
    int n_state = ct_graph_n_state(graph);
    for (int i = 0; status == CT_OK && i < n_state; i++) {
        ct_tensor *t = ct_graph_state(graph, i);
        const ct_st_tensor *w = ct_st_find(file, ct_tensor_name(t));
        if (!w || w->bytes != ct_tensor_bytes(t) || w->dtype != ct_tensor_dtype(t)) {
            printf("FAIL %s: '%s' missing in %s or of another size or dtype\n", label,
                   ct_tensor_name(t), path);
            status = CT_ERR_FORMAT;
        } else {
            status = ct_plan_write(plan, t, w->data, w->bytes);
        }
    }
    if (status == CT_OK && ct_st_count(file) != n_state + 2) {
        printf("FAIL %s: PyTorch has %d state tensors, cuttle %d\n", label,
               ct_st_count(file) - 2, n_state);
        status = CT_ERR_FORMAT;
    }
    float *out = malloc(expected->bytes);
    if (status == CT_OK && (status = ct_plan_write(plan, x, input->data, input->bytes)) == CT_OK &&
        (status = ct_plan_run(plan, CT_EVAL)) == CT_OK)
        status = ct_plan_read(plan, y, out, expected->bytes);
    int failed = 1;
    if (status == CT_OK) {
        int64_t count = expected->shape[0] * expected->shape[1];
        double err = harness_rel_err_f32(out, expected->data, count);
        failed = !(err <= TORCH_TOLERANCE);
        printf("%s %s (max relative error %.3g, tolerance %g)\n", failed ? "FAIL" : "PASS", label,
               err, TORCH_TOLERANCE);
    } else if (ct_last_error()[0]) {
        printf("FAIL %s: %s\n", label, ct_last_error());
    }
    free(out);
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(graph);
    ct_st_free(file);
    return failed;
}

/* Sizes that do not fit: a concat of a tensor with itself, 64 times over,
 * and an input of 2^40 x 2^40 floats, are refused by shape, never
 * wrapped around (the first was fuzz_model's crash of 2026-11-27). */
static void test_sizes_beyond_any_tensor(void)
{
    static char text[4096];
    int used = snprintf(text, sizeof text, "model doubling\n");
    for (int i = 0; i < 64; i++) /* current, then twice itself: x3 a step */
        used += snprintf(text + used, sizeof text - (size_t)used, "save t\nconcat t t\n");
    ct_graph *graph;
    ct_tensor *y = build(text, 3, 32, 32, N_CLASSES, &graph);
    CHECK(!y && ct_graph_status(graph) == CT_ERR_SHAPE &&
              strstr(ct_last_error(), "larger than the 256 TiB"),
          "%s: %s", ct_status_name(ct_graph_status(graph)), ct_last_error());
    ct_graph_free(graph);
    graph = ct_graph_new();
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    CHECK(!ct_input(graph, "x", CT_F32, 2, huge) && ct_graph_status(graph) == CT_ERR_SHAPE,
          "a 2^80-element input: %s", ct_last_error());
    ct_graph_free(graph);
}

/* The fuzz corpus (tests/fuzz/corpus/model): the seeds build, and every
 * text a fuzzer once crashed on (regress-*) builds or is refused with a
 * message, on fuzz_model's input. */
static void test_fuzz_corpus_builds_or_refuses(void)
{
    const char *folder = "tests/fuzz/corpus/model";
    DIR *dir = opendir(folder);
    CHECK(dir != NULL, "cannot open %s (run from the repository root)", folder);
    int files = 0;
    static char text[MAX_TEXT];
    for (struct dirent *entry; dir && (entry = readdir(dir));) {
        if (entry->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", folder, entry->d_name);
        FILE *f = fopen(path, "rb");
        size_t length = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f)
            fclose(f);
        text[length] = '\0';
        ct_graph *graph;
        ct_tensor *y = build(text, 3, 32, 32, N_CLASSES, &graph);
        bool seed = strncmp(entry->d_name, "regress-", 8) != 0;
        ct_status status = ct_graph_status(graph);
        CHECK(seed ? y != NULL : (y != NULL || (status != CT_ERR_INTERNAL && status != CT_OK)),
              "%s: %s: %s", path, ct_status_name(status), ct_last_error());
        ct_graph_free(graph);
        files++;
    }
    if (dir)
        closedir(dir);
    CHECK(files >= 11, "only %d files in %s", files, folder);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--torch-check") == 0)
        return torch_check(argv[2], argv[3]);
    RUN(test_builtin_names);
    RUN(test_builtins_match_torch_names);
    RUN(test_simplecnn_text_is_the_c_model);
    RUN(test_source_builtin_file_and_missing);
    RUN(test_format_parts);
    RUN(test_errors_name_the_line);
    RUN(test_bad_calls);
    RUN(test_vgg_refuses_other_large_inputs);
    RUN(test_fuzz_truncated_and_garbled);
    RUN(test_sizes_beyond_any_tensor);
    RUN(test_fuzz_corpus_builds_or_refuses);
    return harness_finish();
}
