/*
 * The profiler: records for every node run, in order, with phases, times
 * that nest inside the step, FLOP estimates that match the formulas, the
 * device-timer hook of the backend vtable (driven by a fake device clock),
 * and a Chrome trace that parses as JSON with well-formed events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuttle.h"
#include "graph/backend.h"
#include "harness.h"
#include "io/json.h"
#include "prof/profiler.h"

#define BATCH 8
#define CLASSES 10
#define N_PARAMS 10 /* SimpleCNN: 5 weights, 5 biases */

typedef struct fixture {
    ct_graph *graph;
    ct_backend *backend;
    ct_plan *plan;
    ct_tensor *x, *labels;
} fixture;

static bool fixture_new(fixture *f, const char *device)
{
    memset(f, 0, sizeof *f);
    f->graph = ct_graph_new();
    f->x = ct_input(f->graph, "x", CT_F32, 4, (int64_t[]){BATCH, 1, 28, 28});
    f->labels = ct_input(f->graph, "labels", CT_I64, 1, (int64_t[]){BATCH});
    ct_tensor *logits = ct_model_simplecnn(f->graph, f->x, CLASSES);
    ct_tensor_keep(logits);
    ct_tensor *loss = ct_cross_entropy(f->graph, logits, f->labels, 0);
    CHECK_OK(ct_graph_backward(f->graph, loss));
    CHECK_OK(ct_graph_sgd(f->graph, (ct_sgd_args){.lr = 0.01f, .momentum = 0.9f,
                                                   .weight_decay = 5e-4f, .nesterov = true}));
    CHECK_OK(ct_backend_new(device, &f->backend));
    if (f->backend)
        CHECK_OK(ct_plan_new(f->graph, f->backend, 1, &f->plan));
    if (!f->plan)
        return false;
    static float images[BATCH * 28 * 28];
    int64_t classes[BATCH];
    harness_fill(images, BATCH * 28 * 28, 7, -1, 1);
    for (int i = 0; i < BATCH; i++)
        classes[i] = i % CLASSES;
    CHECK_OK(ct_plan_write(f->plan, f->x, images, sizeof images));
    CHECK_OK(ct_plan_write(f->plan, f->labels, classes, sizeof classes));
    return true;
}

static void fixture_free(fixture *f)
{
    ct_plan_free(f->plan);
    ct_backend_free(f->backend);
    ct_graph_free(f->graph);
}

static void test_profile_needs_profiling_on(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    ct_profile profile;
    CHECK_OK(ct_plan_run(f.plan, CT_TRAIN));
    CHECK(ct_plan_profile(f.plan, &profile) == CT_ERR_STATE, "a profile without profiling");
    CHECK(strstr(ct_last_error(), "ct_plan_set_profiling"), "message: %s", ct_last_error());
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    CHECK(ct_plan_profile(f.plan, &profile) == CT_ERR_STATE, "a profile before any step");
    CHECK_OK(ct_plan_run(f.plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(f.plan, &profile));
    CHECK_OK(ct_plan_set_profiling(f.plan, false));
    CHECK(ct_plan_profile(f.plan, &profile) == CT_ERR_STATE, "a profile after turning it off");
    CHECK(ct_plan_set_profiling(NULL, true) == CT_ERR_ARG, "NULL plan");
    fixture_free(&f);
}

/* Records in schedule order, phases forward -> backward -> optimizer, each
 * inside the step and after the one before. */
static void check_records(const ct_plan *plan, const ct_profile *p, ct_mode mode)
{
    CHECK(p->mode == mode, "mode %d", (int)p->mode);
    CHECK(p->n_records > 0 && p->n_records <= ct_plan_n_nodes(plan, mode),
          "%d records of %d nodes", p->n_records, ct_plan_n_nodes(plan, mode));
    int per_phase[CT_PROF_PHASE_COUNT] = {0};
    for (int i = 0; i < p->n_records; i++) {
        const ct_prof_record *r = &p->records[i];
        CHECK(r->op && r->label && r->shapes && strstr(r->shapes, "->"), "record %d strings",
              i);
        CHECK(r->start_ns <= r->end_ns, "record %d (%s) ends before it starts", i, r->op);
        CHECK(r->start_ns >= p->start_ns && r->end_ns <= p->end_ns,
              "record %d (%s) outside the step", i, r->op);
        if (i > 0) {
            CHECK(r->start_ns >= p->records[i - 1].end_ns, "record %d overlaps the one before",
                  i);
            CHECK(r->phase >= p->records[i - 1].phase, "record %d (%s) goes back a phase", i,
                  r->op);
        }
        CHECK(r->flops >= 0 && r->bytes > 0, "record %d (%s): %g flops %g bytes", i, r->op,
              r->flops, r->bytes);
        CHECK(r->device_start_ns == -1, "the CPU has no device clock");
        per_phase[r->phase]++;
    }
    if (mode == CT_TRAIN) {
        CHECK(per_phase[CT_PROF_BACKWARD] > per_phase[CT_PROF_FORWARD],
              "%d backward records", per_phase[CT_PROF_BACKWARD]);
        CHECK(per_phase[CT_PROF_OPTIMIZER] == N_PARAMS, "%d optimizer records",
              per_phase[CT_PROF_OPTIMIZER]);
    } else {
        CHECK(per_phase[CT_PROF_FORWARD] == p->n_records, "eval runs only forward nodes");
    }
}

static void test_records_cover_the_step(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    CHECK_OK(ct_plan_set_profiling(f.plan, true)); /* twice is fine */
    ct_profile train, eval;
    CHECK_OK(ct_plan_run(f.plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(f.plan, &train));
    CHECK(train.step == 0 && ct_plan_step(f.plan) == 1, "step %lld", (long long)train.step);
    check_records(f.plan, &train, CT_TRAIN);
    int n_train = train.n_records;
    CHECK_OK(ct_plan_run(f.plan, CT_EVAL));
    CHECK_OK(ct_plan_profile(f.plan, &eval));
    check_records(f.plan, &eval, CT_EVAL);
    CHECK(eval.n_records < n_train, "eval %d records, train %d", eval.n_records, n_train);
    CHECK(!strcmp(ct_prof_phase_name(CT_PROF_BACKWARD), "backward"), "phase name");
    fixture_free(&f);
}

/* conv1: 2*N*O*OH*OW*C*KH*KW + the bias; fc1: 2*N*IN*OUT + the bias. */
static void test_flops_follow_the_formulas(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    CHECK_OK(ct_plan_run(f.plan, CT_EVAL));
    ct_profile p;
    CHECK_OK(ct_plan_profile(f.plan, &p));
    double conv1 = 2.0 * BATCH * 6 * 24 * 24 * 1 * 5 * 5 + BATCH * 6 * 24 * 24;
    double fc1 = 2.0 * BATCH * 256 * 120 + BATCH * 120;
    bool seen_conv = false, seen_linear = false;
    for (int i = 0; i < p.n_records; i++) {
        const ct_prof_record *r = &p.records[i];
        if (!strcmp(r->op, "conv2d") && !seen_conv) {
            seen_conv = true;
            CHECK(r->flops == conv1, "conv1: %.0f flops, expected %.0f", r->flops, conv1);
            CHECK(!strcmp(r->shapes, "[8,1,28,28] [6,1,5,5] [6] -> [8,6,24,24]"), "shapes %s",
                  r->shapes);
            double bytes = 4.0 * (BATCH * 28 * 28 + 6 * 25 + 6 + BATCH * 6 * 24 * 24);
            CHECK(r->bytes == bytes, "conv1: %.0f bytes, expected %.0f", r->bytes, bytes);
        }
        if (!strcmp(r->op, "linear") && !seen_linear) {
            seen_linear = true;
            CHECK(r->flops == fc1, "fc1: %.0f flops, expected %.0f", r->flops, fc1);
        }
    }
    CHECK(seen_conv && seen_linear, "no conv2d or linear record");
    fixture_free(&f);
}

/* A device clock that is the host clock: marks record it, elapsed reads it. */
static ct_status fake_timer_new(ct_backend *backend, int n_marks, bool counts, void **timer)
{
    (void)backend;
    (void)counts;
    *timer = calloc((size_t)n_marks, sizeof(int64_t));
    return *timer ? CT_OK : CT_ERR_MEMORY;
}

static void fake_timer_mark(ct_backend *backend, void *timer, int mark)
{
    (void)backend;
    ((int64_t *)timer)[mark] = ct_prof_now_ns();
}

static ct_status fake_timer_elapsed(ct_backend *backend, void *timer, int mark, int64_t *ns)
{
    (void)backend;
    *ns = ((int64_t *)timer)[mark] - ((int64_t *)timer)[0];
    return CT_OK;
}

static void fake_timer_free(ct_backend *backend, void *timer)
{
    (void)backend;
    free(timer);
}

static void test_device_timer_hook(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    ct_backend_i with_timer = *f.backend->iface;
    with_timer.timer_new = fake_timer_new;
    with_timer.timer_mark = fake_timer_mark;
    with_timer.timer_elapsed_ns = fake_timer_elapsed;
    with_timer.timer_free = fake_timer_free;
    const ct_backend_i *cpu_iface = f.backend->iface;
    f.backend->iface = &with_timer;
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    CHECK_OK(ct_plan_run(f.plan, CT_TRAIN));
    ct_profile p;
    CHECK_OK(ct_plan_profile(f.plan, &p));
    for (int i = 0; i < p.n_records; i++) {
        const ct_prof_record *r = &p.records[i];
        CHECK(r->device_start_ns >= p.start_ns && r->device_start_ns <= r->device_end_ns &&
                  r->device_end_ns <= p.end_ns,
              "record %d (%s): device %lld..%lld, step %lld..%lld", i, r->op,
              (long long)r->device_start_ns, (long long)r->device_end_ns,
              (long long)p.start_ns, (long long)p.end_ns);
        if (i > 0)
            CHECK(r->device_start_ns == p.records[i - 1].device_end_ns,
                  "device records %d and %d do not meet", i - 1, i);
    }
    char path[] = "/tmp/cuttle_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0)
        close(fd);
    ct_trace *trace = NULL;
    CHECK_OK(ct_trace_open(path, &trace));
    CHECK_OK(ct_trace_add(trace, &p));
    CHECK_OK(ct_trace_close(trace));
    FILE *file = fopen(path, "r");
    static char text[1 << 20];
    size_t length = file ? fread(text, 1, sizeof text - 1, file) : 0;
    text[length] = '\0';
    if (file)
        fclose(file);
    CHECK(strstr(text, "\"pid\": 2") && strstr(text, "\"device\""), "no device track");
    remove(path);
    CHECK_OK(ct_plan_set_profiling(f.plan, false)); /* frees the timer with the hook */
    f.backend->iface = cpu_iface;
    fixture_free(&f);
}

/* Every "X" event has a name, ts, dur, pid and tid, and args. */
static int check_trace_events(const ct_json_value *events)
{
    int n_complete = 0;
    const ct_json_value *event = ct_json_first(events);
    for (int i = 0; i < events->count; i++, event = ct_json_next(event)) {
        CHECK(event->type == CT_JSON_OBJECT, "event %d is %s", i, ct_json_kind(event->type));
        const ct_json_value *ph = ct_json_get(event, "ph");
        CHECK(ph && ph->type == CT_JSON_STRING, "event %d has no ph", i);
        if (!ph || strcmp(ph->string, "X") != 0)
            continue;
        n_complete++;
        const char *numbers[] = {"ts", "dur", "pid", "tid"};
        for (int k = 0; k < 4; k++) {
            const ct_json_value *v = ct_json_get(event, numbers[k]);
            CHECK(v && v->type == CT_JSON_NUMBER && v->number >= 0, "event %d: %s", i,
                  numbers[k]);
        }
        const ct_json_value *name = ct_json_get(event, "name");
        const ct_json_value *args = ct_json_get(event, "args");
        CHECK(name && name->type == CT_JSON_STRING && name->string_len > 0, "event %d name", i);
        CHECK(args && args->type == CT_JSON_OBJECT, "event %d args", i);
    }
    return n_complete;
}

/* Each record names the implementation that ran its node (graph/impl.h):
 * the CPU's preferred conv path by default, im2col when it is asked for by
 * name; an unknown name is refused with the names there are. */
static const char *conv_kernel(const ct_plan *plan)
{
    ct_profile p;
    CHECK_OK(ct_plan_run((ct_plan *)plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(plan, &p));
    const char *kernel = NULL;
    for (int i = 0; i < p.n_records; i++) {
        CHECK(p.records[i].kernel && *p.records[i].kernel, "record %d (%s): no kernel", i,
              p.records[i].op);
        if (strcmp(p.records[i].op, "conv2d") == 0)
            kernel = p.records[i].kernel;
        else if (strcmp(p.records[i].op, "relu_bwd") == 0)
            CHECK(strcmp(p.records[i].kernel, "native") == 0, "relu_bwd ran '%s'",
                  p.records[i].kernel);
    }
    return kernel ? kernel : "(none)";
}

static void test_records_name_the_kernel(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    const char *kernel = conv_kernel(f.plan);
    CHECK(strcmp(kernel, "direct") == 0 || strcmp(kernel, "im2col") == 0,
          "SimpleCNN's first conv ran '%s' (direct with AVX2, else im2col)", kernel);
    CHECK_OK(ct_backend_set_kernels(f.backend, "im2col"));
    kernel = conv_kernel(f.plan);
    CHECK(strcmp(kernel, "im2col") == 0, "asked for im2col, ran '%s'", kernel);
    CHECK(ct_backend_set_kernels(f.backend, "magic") == CT_ERR_ARG, "an unknown kernel name");
    CHECK(strstr(ct_last_error(), "'magic'") && strstr(ct_last_error(), "winograd"),
          "message: %s", ct_last_error());
    CHECK(ct_backend_set_kernels(f.backend, "vendor") == CT_ERR_UNSUPPORTED,
          "vendor kernels on the CPU");
    fixture_free(&f);
}

static void test_trace_is_chrome_json(void)
{
    fixture f;
    if (!fixture_new(&f, "cpu:1"))
        return;
    char path[] = "/tmp/cuttle_trace_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    close(fd);
    ct_trace *trace = NULL;
    CHECK_OK(ct_plan_set_profiling(f.plan, true));
    CHECK_OK(ct_trace_open(path, &trace));
    int expected = 0;
    for (int step = 0; step < 2; step++) {
        ct_profile p;
        CHECK_OK(ct_plan_run(f.plan, CT_TRAIN));
        CHECK_OK(ct_plan_profile(f.plan, &p));
        CHECK_OK(ct_trace_add(trace, &p));
        expected += 1 + CT_PROF_PHASE_COUNT + p.n_records; /* step, phases, nodes */
    }
    CHECK_OK(ct_trace_close(trace));
    FILE *file = fopen(path, "r");
    static char text[1 << 20];
    size_t length = file ? fread(text, 1, sizeof text, file) : 0;
    if (file)
        fclose(file);
    remove(path);
    ct_json_doc doc = {0};
    ct_json_error error = {0};
    ct_status status = ct_json_parse(text, length, 16, &doc, &error);
    CHECK(status == CT_OK, "the trace is not JSON: %s at byte %zu", error.message,
          error.offset);
    if (status == CT_OK) {
        const ct_json_value *events = ct_json_get(ct_json_root(&doc), "traceEvents");
        CHECK(events && events->type == CT_JSON_ARRAY, "no traceEvents array");
        if (events) {
            int n_complete = check_trace_events(events);
            CHECK(n_complete == expected, "%d X events, expected %d", n_complete, expected);
        }
    }
    ct_json_free(&doc);
    CHECK(ct_trace_open("/nonexistent-dir/trace.json", &trace) == CT_ERR_IO,
          "an unwritable path");
    CHECK(trace == NULL, "no trace on error");
    CHECK_OK(ct_trace_close(NULL));
    fixture_free(&f);
}

/* On a team of two threads each linear layer's backward data and weight
 * gradient run side by side (cpu/table.c: the data record a group of 2, the
 * weight's 0 after it), on three threads each alone; the trained weights
 * are one thread's bit for bit either way. */
static int linear_pairs(const ct_plan *plan)
{
    ct_profile p;
    CHECK_OK(ct_plan_run((ct_plan *)plan, CT_TRAIN));
    CHECK_OK(ct_plan_profile(plan, &p));
    int pairs = 0;
    for (int i = 0; i + 1 < p.n_records; i++) {
        const ct_prof_record *r = &p.records[i], *next = &p.records[i + 1];
        if (strcmp(r->op, "linear_bwd_data") != 0)
            continue;
        CHECK(r->group == 1 || (r->group == 2 && strcmp(next->op, "linear_bwd_weight") == 0 &&
                                next->group == 0),
              "record %d: a linear backward's group %d, then %s's %d", i, r->group, next->op,
              next->group);
        pairs += r->group == 2;
    }
    return pairs;
}

static void test_linear_backward_pairs_on_two_threads(void)
{
    fixture one, two, three;
    memset(&two, 0, sizeof two), memset(&three, 0, sizeof three);
    bool made = fixture_new(&one, "cpu:1") && fixture_new(&two, "cpu:2") &&
                fixture_new(&three, "cpu:3");
    if (made && strstr(ct_backend_name(two.backend), "2 threads")) { /* else: no OpenMP */
        CHECK_OK(ct_plan_set_profiling(two.plan, true));
        CHECK_OK(ct_plan_set_profiling(three.plan, true));
        int paired = linear_pairs(two.plan), alone = linear_pairs(three.plan);
        CHECK(paired == 3, "two threads: %d of SimpleCNN's 3 linear layers paired", paired);
        CHECK(alone == 0, "three threads: %d linear layers paired", alone);
        for (int step = 0; step < 3; step++) {
            CHECK_OK(ct_plan_run(one.plan, CT_TRAIN));
            if (step > 0) {
                CHECK_OK(ct_plan_run(two.plan, CT_TRAIN));
                CHECK_OK(ct_plan_run(three.plan, CT_TRAIN));
            }
        }
        for (int i = 0; i < ct_graph_n_state(one.graph); i++) {
            const ct_tensor *t = ct_graph_state(one.graph, i);
            size_t bytes = sizeof(float) * (size_t)ct_tensor_numel(t);
            float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
            if (a && b && c) {
                CHECK_OK(ct_plan_read(one.plan, t, a, bytes));
                CHECK_OK(ct_plan_read(two.plan, ct_graph_state(two.graph, i), b, bytes));
                CHECK_OK(ct_plan_read(three.plan, ct_graph_state(three.graph, i), c, bytes));
                CHECK(memcmp(a, b, bytes) == 0, "state %d after 3 steps: 2 threads differ from 1",
                      i);
                CHECK(memcmp(a, c, bytes) == 0, "state %d after 3 steps: 3 threads differ from 1",
                      i);
            }
            free(a), free(b), free(c);
        }
    }
    fixture_free(&one);
    fixture_free(&two);
    fixture_free(&three);
}

int main(void)
{
    RUN(test_profile_needs_profiling_on);
    RUN(test_records_cover_the_step);
    RUN(test_flops_follow_the_formulas);
    RUN(test_device_timer_hook);
    RUN(test_records_name_the_kernel);
    RUN(test_trace_is_chrome_json);
    RUN(test_linear_backward_pairs_on_two_threads);
    return harness_finish();
}
