/*
 * The charts (plot.h): training curves in three panels sharing the epoch
 * axis, and horizontal bars.
 */
#include "plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "svg.h"

/* ---- layout (pixels) -------------------------------------------------------------- */

#define CHART_WIDTH 760
#define MARGIN_LEFT 72
#define MARGIN_RIGHT 24
#define TITLE_Y 26
#define TITLE_SIZE 16
#define LEGEND_TOP 46
#define LEGEND_ROW 18
#define LEGEND_SAMPLE 28
#define TEXT_SIZE 12
#define TICK_SIZE 11
#define PANEL_HEIGHT 170
#define PANEL_GAP 58  /* under a panel: its x tick labels, then the next one's title */
#define PANEL_TITLE_RISE 8
#define Y_TICKS 5
#define X_TICKS 10
#define LINE_WIDTH 2
#define POINT_RADIUS 3
/* Series of at most this many points mark every point; longer ones only
 * the points without a neighbour. */
#define MARKED_POINTS_MAX 30
#define TEST_DASH "6 4"
#define AXIS_COLOUR "#444444"
#define GRID_COLOUR "#e4e4e4"
#define AREA_COLOUR "#fbfbfb"

/* The bar chart. */
#define BAR_LABELS_RIGHT 250
#define BAR_VALUES_ROOM 90
#define BAR_ROW 20
#define BAR_HEIGHT 14
#define BAR_TICKS 6
#define LEGEND_CHAR_WIDTH 7 /* about, at TEXT_SIZE */

/* Tableau's ten colours: distinct, and readable on white. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define PALETTE_SIZE ((int)(sizeof palette / sizeof palette[0]))

/* ---- the curves ------------------------------------------------------------------- */

typedef struct panel {
    const char *title, *metric;
    double scale; /* drawn value = metric value * scale (accuracy in %) */
    plot_metric train, test; /* test: PLOT_N_METRICS when there is none */
} panel;

static const panel panels[] = {
    {"loss", "loss", 1, PLOT_TRAIN_LOSS, PLOT_TEST_LOSS},
    {"accuracy (%)", "accuracy", 100, PLOT_TRAIN_ACCURACY, PLOT_TEST_ACCURACY},
    {"learning rate", "lr", 1, PLOT_LR, PLOT_N_METRICS},
};
#define N_PANELS ((int)(sizeof panels / sizeof panels[0]))

/* A run's colour for a split: one colour per run, or per split for one run. */
static const char *series_colour(int run, int n_runs, bool test)
{
    return palette[(n_runs == 1 ? (int)test : run) % PALETTE_SIZE];
}

/* The finite values' range of the metrics over all runs; false if none. */
static bool value_range(const plot_run *runs, int n_runs, const plot_metric *metrics,
                        int n_metrics, double scale, double *min, double *max)
{
    *min = INFINITY;
    *max = -INFINITY;
    for (int r = 0; r < n_runs; r++)
        for (int k = 0; k < n_metrics; k++)
            for (int e = 0; e < runs[r].n_epochs; e++) {
                double v = runs[r].values[metrics[k]][e] * scale;
                if (isfinite(v) && isfinite(runs[r].epochs[e])) {
                    *min = fmin(*min, v);
                    *max = fmax(*max, v);
                }
            }
    return *min <= *max;
}

static bool epoch_range(const plot_run *runs, int n_runs, double *min, double *max)
{
    *min = INFINITY;
    *max = -INFINITY;
    for (int r = 0; r < n_runs; r++)
        for (int e = 0; e < runs[r].n_epochs; e++) {
            *min = fmin(*min, runs[r].epochs[e]);
            *max = fmax(*max, runs[r].epochs[e]);
        }
    return *min <= *max;
}

static bool point_ok(const plot_run *run, plot_metric metric, int e)
{
    return e >= 0 && e < run->n_epochs && isfinite(run->values[metric][e]);
}

/* One series: a polyline over each stretch of finite points, and a dot on
 * each point of a short series, or only on points without a finite
 * neighbour (which no line shows) in a long one. */
static void draw_series(FILE *out, const svg_axis *x, const svg_axis *y, const plot_run *run,
                        plot_metric metric, double scale, bool test, const char *colour)
{
    svg_group_begin(out, "series");
    svg_attribute(out, "data-run", run->name);
    svg_attribute(out, "data-split", test ? "test" : "train");
    svg_group_open(out);
    const char *dash = test ? TEST_DASH : NULL;
    for (int e = 0; e < run->n_epochs; e++) {
        if (!point_ok(run, metric, e) || point_ok(run, metric, e - 1) ||
            !point_ok(run, metric, e + 1))
            continue; /* a line starts at a point with a finite successor only */
        svg_polyline_begin(out, "series-line", colour, LINE_WIDTH, dash);
        for (int i = e; point_ok(run, metric, i); i++)
            svg_polyline_point(out, svg_axis_map(x, run->epochs[i]),
                               svg_axis_map(y, run->values[metric][i] * scale));
        svg_polyline_end(out);
    }
    bool mark_all = run->n_epochs <= MARKED_POINTS_MAX;
    for (int e = 0; e < run->n_epochs; e++) {
        bool alone = !point_ok(run, metric, e - 1) && !point_ok(run, metric, e + 1);
        if (point_ok(run, metric, e) && (mark_all || alone))
            svg_circle(out, "series-point", svg_axis_map(x, run->epochs[e]),
                       svg_axis_map(y, run->values[metric][e] * scale), POINT_RADIUS, colour);
    }
    svg_group_end(out);
}

static void draw_x_ticks(FILE *out, const svg_axis *x, double top, double bottom)
{
    char label[32];
    for (int i = 0; i < svg_axis_n_ticks(x); i++) {
        double value = svg_axis_tick(x, i), px = svg_axis_map(x, value);
        svg_line(out, "grid", px, top, px, bottom, GRID_COLOUR, 1, NULL);
        svg_axis_label(x, value, label, sizeof label);
        svg_text(out, "tick-x", px, bottom + TICK_SIZE + 4, SVG_MIDDLE, TICK_SIZE, AXIS_COLOUR,
                 label);
    }
}

static void draw_y_ticks(FILE *out, const svg_axis *y, double left, double right)
{
    char label[32];
    for (int i = 0; i < svg_axis_n_ticks(y); i++) {
        double value = svg_axis_tick(y, i), py = svg_axis_map(y, value);
        svg_line(out, "grid", left, py, right, py, GRID_COLOUR, 1, NULL);
        svg_axis_label(y, value, label, sizeof label);
        svg_text(out, "tick-y", left - 6, py + TICK_SIZE / 3.0, SVG_END, TICK_SIZE, AXIS_COLOUR,
                 label);
    }
}

static void draw_panel(FILE *out, const panel *p, const plot_run *runs, int n_runs,
                       double epoch_min, double epoch_max, double top)
{
    double left = MARGIN_LEFT, right = CHART_WIDTH - MARGIN_RIGHT, bottom = top + PANEL_HEIGHT;
    plot_metric metrics[2] = {p->train, p->test};
    int n_metrics = p->test == PLOT_N_METRICS ? 1 : 2;
    double min, max;
    bool any = value_range(runs, n_runs, metrics, n_metrics, p->scale, &min, &max);
    if (!any) { /* a panel without values: an empty 0..1 */
        min = 0;
        max = 1;
    }
    svg_axis x = svg_axis_fit(epoch_min, epoch_max, X_TICKS, true, left, right);
    svg_axis y = svg_axis_fit(min, max, Y_TICKS, false, bottom, top);
    svg_group_begin(out, "panel");
    svg_attribute(out, "data-metric", p->metric);
    svg_attribute_number(out, "data-scale", p->scale);
    svg_attribute_number(out, "data-x-lo", x.lo);
    svg_attribute_number(out, "data-x-hi", x.hi);
    svg_attribute_number(out, "data-y-lo", y.lo);
    svg_attribute_number(out, "data-y-hi", y.hi);
    svg_group_open(out);
    svg_text(out, "panel-title", left, top - PANEL_TITLE_RISE, SVG_START, TEXT_SIZE + 1,
             "black", p->title);
    svg_rect(out, "plot-area", left, top, right - left, bottom - top, AREA_COLOUR, NULL);
    draw_x_ticks(out, &x, top, bottom);
    draw_y_ticks(out, &y, left, right);
    svg_rect(out, "frame", left, top, right - left, bottom - top, "none", AXIS_COLOUR);
    if (!any)
        svg_text(out, "no-values", (left + right) / 2, (top + bottom) / 2, SVG_MIDDLE,
                 TEXT_SIZE, AXIS_COLOUR, "no finite values");
    for (int r = 0; r < n_runs; r++)
        for (int k = 0; k < n_metrics; k++)
            draw_series(out, &x, &y, &runs[r], metrics[k], p->scale, k == 1,
                        series_colour(r, n_runs, k == 1));
    svg_group_end(out);
}

static void legend_sample(FILE *out, double x, double y, const char *colour, const char *dash,
                          const char *label)
{
    svg_line(out, "legend-line", x, y, x + LEGEND_SAMPLE, y, colour, LINE_WIDTH + 1, dash);
    svg_text(out, "legend-label", x + LEGEND_SAMPLE + 6, y + TEXT_SIZE / 3.0, SVG_START,
             TEXT_SIZE, "black", label);
}

/* The legend's rows: train and test for one run; a row per run and one for
 * the splits for several (legend_height). */
static void draw_legend(FILE *out, const plot_run *runs, int n_runs)
{
    double x = MARGIN_LEFT, y = LEGEND_TOP;
    svg_group_begin(out, "legend");
    svg_group_open(out);
    if (n_runs == 1) {
        legend_sample(out, x, y, series_colour(0, 1, false), NULL, "train");
        legend_sample(out, x + 110, y, series_colour(0, 1, true), TEST_DASH, "test");
        svg_group_end(out);
        return;
    }
    legend_sample(out, x, y, AXIS_COLOUR, NULL, "train");
    legend_sample(out, x + 110, y, AXIS_COLOUR, TEST_DASH, "test");
    for (int r = 0; r < n_runs; r++)
        legend_sample(out, x, y + LEGEND_ROW * (r + 1), series_colour(r, n_runs, false), NULL,
                      runs[r].name);
    svg_group_end(out);
}

static double legend_height(int n_runs)
{
    return LEGEND_ROW * (n_runs == 1 ? 1 : n_runs + 1);
}

int plot_curves_write(const char *command, const plot_run *runs, int n_runs, const char *path)
{
    double epoch_min, epoch_max;
    if (n_runs < 1 || !epoch_range(runs, n_runs, &epoch_min, &epoch_max)) {
        fprintf(stderr, "cuttle %s: no epochs to draw\n", command);
        return CLI_EXIT_FAILED;
    }
    double first_panel = LEGEND_TOP + legend_height(n_runs) + PANEL_GAP / 2.0;
    int height = (int)(first_panel + N_PANELS * (PANEL_HEIGHT + PANEL_GAP));
    char title[1100];
    if (n_runs == 1)
        snprintf(title, sizeof title, "%s: training curves", runs[0].name);
    else
        snprintf(title, sizeof title, "training curves of %d runs", n_runs);
    svg_file svg;
    CLI_TRY(svg_open(command, path, CHART_WIDTH, height, title, &svg));
    svg_text(svg.out, "title", MARGIN_LEFT, TITLE_Y, SVG_START, TITLE_SIZE, "black", title);
    draw_legend(svg.out, runs, n_runs);
    for (int i = 0; i < N_PANELS; i++)
        draw_panel(svg.out, &panels[i], runs, n_runs, epoch_min, epoch_max,
                   first_panel + i * (PANEL_HEIGHT + PANEL_GAP));
    svg_text(svg.out, "axis-label", (MARGIN_LEFT + CHART_WIDTH - MARGIN_RIGHT) / 2.0,
             height - PANEL_GAP / 4.0, SVG_MIDDLE, TEXT_SIZE, "black", "epoch");
    return svg_close(command, &svg);
}

/* ---- bars -------------------------------------------------------------------------- */

static int compare_bars(const void *a, const void *b)
{
    const plot_bar *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? 1 : -1;
    return strcmp(x->label, y->label);
}

/* The groups of the bars, each once, in order of first appearance. */
typedef struct bar_groups {
    const char **names;
    int n;
} bar_groups;

static int bar_groups_find(const bar_groups *groups, const char *name)
{
    for (int g = 0; g < groups->n; g++)
        if (strcmp(groups->names[g], name) == 0)
            return g;
    return -1;
}

static const char *bar_colour(const bar_groups *groups, const plot_bar *bar)
{
    return palette[bar_groups_find(groups, bar->group) % PALETTE_SIZE];
}

static void draw_bar_legend(FILE *out, const bar_groups *groups)
{
    double x = BAR_LABELS_RIGHT;
    svg_group_begin(out, "legend");
    svg_group_open(out);
    for (int g = 0; g < groups->n; g++) {
        svg_rect(out, "legend-box", x, LEGEND_TOP - BAR_HEIGHT / 2.0, BAR_HEIGHT, BAR_HEIGHT,
                 palette[g % PALETTE_SIZE], NULL);
        svg_text(out, "legend-label", x + BAR_HEIGHT + 6, LEGEND_TOP + TEXT_SIZE / 3.0,
                 SVG_START, TEXT_SIZE, "black", groups->names[g]);
        x += BAR_HEIGHT + 24 + LEGEND_CHAR_WIDTH * (double)strlen(groups->names[g]);
    }
    svg_group_end(out);
}

static void draw_bars(FILE *out, const svg_axis *x, const plot_bar *bars, int n_bars,
                      const bar_groups *groups, const char *unit, double top)
{
    char label[64];
    for (int i = 0; i < n_bars; i++) {
        double y = top + BAR_ROW * i + (BAR_ROW - BAR_HEIGHT) / 2.0;
        double value = isfinite(bars[i].value) ? bars[i].value : 0;
        double end = svg_axis_map(x, value);
        svg_text(out, "bar-label", x->from - 8, y + BAR_HEIGHT - 3, SVG_END, TEXT_SIZE, "black",
                 bars[i].label);
        svg_group_begin(out, "bar");
        svg_attribute(out, "data-label", bars[i].label);
        svg_attribute(out, "data-group", bars[i].group);
        svg_group_open(out);
        svg_rect(out, "bar-rect", x->from, y, end - x->from, BAR_HEIGHT,
                 bar_colour(groups, &bars[i]), NULL);
        snprintf(label, sizeof label, "%.3f %s", value, unit);
        svg_text(out, "bar-value", end + 5, y + BAR_HEIGHT - 3, SVG_START, TICK_SIZE,
                 AXIS_COLOUR, label);
        svg_group_end(out);
    }
}

int plot_bars_write(const char *command, plot_bar *bars, int n_bars, const char *title,
                    const char *unit, const char *axis_label, const char *path)
{
    bar_groups groups = {.names = malloc(sizeof *groups.names * (size_t)(n_bars + 1))};
    if (!groups.names) {
        fprintf(stderr, "cuttle %s: out of host memory\n", command);
        return CLI_EXIT_FAILED;
    }
    double max = 0;
    for (int i = 0; i < n_bars; i++) {
        if (bar_groups_find(&groups, bars[i].group) < 0)
            groups.names[groups.n++] = bars[i].group;
        max = isfinite(bars[i].value) ? fmax(max, bars[i].value) : max;
    }
    qsort(bars, (size_t)n_bars, sizeof *bars, compare_bars);
    double left = BAR_LABELS_RIGHT, right = CHART_WIDTH - BAR_VALUES_ROOM;
    double top = LEGEND_TOP + LEGEND_ROW;
    double bottom = top + BAR_ROW * (n_bars > 0 ? n_bars : 1);
    int height = (int)(bottom + PANEL_GAP);
    svg_axis x = svg_axis_fit(0, max, BAR_TICKS, false, left, right);
    x.lo = 0; /* bars start at zero, also when every value is */
    svg_file svg;
    int exit_status = svg_open(command, path, CHART_WIDTH, height, title, &svg);
    if (exit_status != CLI_EXIT_OK) {
        free(groups.names);
        return exit_status;
    }
    FILE *out = svg.out;
    svg_text(out, "title", 12, TITLE_Y, SVG_START, TITLE_SIZE, "black", title);
    draw_bar_legend(out, &groups);
    svg_group_begin(out, "bars");
    svg_attribute_number(out, "data-x-lo", x.lo);
    svg_attribute_number(out, "data-x-hi", x.hi);
    svg_group_open(out);
    svg_rect(out, "plot-area", left, top, right - left, bottom - top, AREA_COLOUR, NULL);
    draw_x_ticks(out, &x, top, bottom);
    draw_bars(out, &x, bars, n_bars, &groups, unit, top);
    svg_group_end(out);
    svg_text(out, "axis-label", (left + right) / 2, height - PANEL_GAP / 4.0, SVG_MIDDLE,
             TEXT_SIZE, "black", axis_label);
    free(groups.names);
    return svg_close(command, &svg);
}
