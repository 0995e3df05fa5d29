/*
 * Charts as SVG (tools/svg.h): a training run's curves from its
 * metrics.jsonl (cuttle plot, and cuttle train after every epoch), and the
 * time per op of cuttle profile as horizontal bars.
 *
 * So that a test (and a curious reader) can check a chart against its
 * numbers exactly, the SVG states its scales: each panel is a
 * <g class="panel" data-metric="..." data-x-lo data-x-hi data-y-lo
 * data-y-hi> whose <rect class="plot-area"> maps x-lo..x-hi onto its width
 * and y-lo..y-hi onto its height (y up; values drawn times data-scale);
 * each series is a <g class="series" data-run data-split> of polylines (a
 * gap where a value is missing or not finite) and dots,
 * <circle class="series-point">, on every point up to 30 epochs, else on
 * those without a neighbour.  Each
 * bar is a <g class="bar" data-label> around its <rect>, on a
 * <g class="bars" data-x-lo data-x-hi> over its plot-area.
 */
#ifndef CUTTLE_TOOLS_PLOT_H
#define CUTTLE_TOOLS_PLOT_H

#include <stdbool.h>

#define PLOT_CURVES_FILE "curves.svg"

/* The values of one metric per epoch, NaN where missing or not finite. */
typedef enum plot_metric {
    PLOT_TRAIN_LOSS,
    PLOT_TEST_LOSS,
    PLOT_TRAIN_ACCURACY,
    PLOT_TEST_ACCURACY,
    PLOT_LR,
    PLOT_N_METRICS
} plot_metric;

/* One run's metrics.jsonl. */
typedef struct plot_run {
    char *name; /* the run's directory as given, for the legend */
    int n_epochs;
    double *epochs;                   /* [n_epochs] */
    double *values[PLOT_N_METRICS];   /* [n_epochs] each */
} plot_run;

/* Read DIR/metrics.jsonl.  A missing directory or file, a file without
 * epochs and a line that is not a metrics object (named by its number) are
 * errors: the message is printed, prefixed "cuttle <command>:", and the
 * exit status returned.  null, NaN and infinities (as C's printf and
 * Python's json write them) are values that are not there. */
int plot_run_read(const char *command, const char *dir, plot_run *run);
void plot_run_free(plot_run *run);

/* The loss, accuracy and learning-rate panels of the runs, one colour per
 * run (a single run: one colour per split), train solid and test dashed. */
int plot_curves_write(const char *command, const plot_run *runs, int n_runs, const char *path);

/* Read DIR/metrics.jsonl and write DIR/curves.svg. */
int plot_curves_of_run(const char *command, const char *dir);

/* One bar of a bar chart: a label and a value, in a group (a colour). */
typedef struct plot_bar {
    const char *label;
    const char *group;
    double value;
} plot_bar;

/* Horizontal bars, longest first (bars is sorted in place), the value
 * printed after each bar with `unit` ("ms"), the axis named axis_label. */
int plot_bars_write(const char *command, plot_bar *bars, int n_bars, const char *title,
                    const char *unit, const char *axis_label, const char *path);

#endif
