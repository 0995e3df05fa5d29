/*
 * Writing SVG by hand: a file replaced whole when it is done, the few
 * shapes the charts need, text escaped for XML, and linear axes with
 * round ticks.  Coordinates are pixels (y down); every number written is
 * finite (a shape with a non-finite coordinate is a bug: SVG_ASSERT).
 */
#ifndef CUTTLE_TOOLS_SVG_H
#define CUTTLE_TOOLS_SVG_H

#include <stdbool.h>
#include <stdio.h>

/* An SVG file being written: to "<path>.tmp", renamed over path by
 * svg_close, so a reader never sees half a chart. */
typedef struct svg_file {
    FILE *out;
    char path[1024], temp[1040];
} svg_file;

/* Open and write the <svg> start tag of a width x height picture with a
 * <title>.  Exit status (CLI_EXIT_*), a message naming the file printed. */
int svg_open(const char *command, const char *path, int width, int height, const char *title,
             svg_file *svg);
/* Write </svg>, close, rename into place; on any failure the temporary file
 * is removed and a message printed.  Exit status. */
int svg_close(const char *command, svg_file *svg);
/* Close and remove without renaming (after an error elsewhere). */
void svg_abandon(svg_file *svg);

/* Text as XML character data or an attribute value: & < > " ' escaped;
 * bytes of text that is not valid UTF-8, and control characters (which
 * XML 1.0 forbids), written as '?'. */
void svg_escape(FILE *out, const char *text);

typedef enum svg_anchor { SVG_START, SVG_MIDDLE, SVG_END } svg_anchor;

/* <text class="..."> at (x, y), font size in px; class may be NULL. */
void svg_text(FILE *out, const char *class_name, double x, double y, svg_anchor anchor,
              double size, const char *fill, const char *text);
void svg_line(FILE *out, const char *class_name, double x1, double y1, double x2, double y2,
              const char *stroke, double width, const char *dash);
void svg_rect(FILE *out, const char *class_name, double x, double y, double width,
              double height, const char *fill, const char *stroke);
void svg_circle(FILE *out, const char *class_name, double cx, double cy, double r,
                const char *fill);

/* A group: svg_group_begin writes "<g class=...", then svg_attribute adds
 * attributes, svg_group_open ends the start tag; svg_group_end is "</g>". */
void svg_group_begin(FILE *out, const char *class_name);
void svg_attribute(FILE *out, const char *name, const char *value); /* escaped */
void svg_attribute_number(FILE *out, const char *name, double value); /* exact: %.17g */
void svg_group_open(FILE *out);
void svg_group_end(FILE *out);

/* A polyline: svg_polyline_begin writes up to the points attribute, each
 * svg_polyline_point one "x,y", svg_polyline_end closes the tag. */
void svg_polyline_begin(FILE *out, const char *class_name, const char *stroke, double width,
                        const char *dash);
void svg_polyline_point(FILE *out, double x, double y);
void svg_polyline_end(FILE *out);

/* A number as SVG writes it: "%.2f" (0.01 px is finer than any screen). */
#define SVG_COORD "%.2f"

/* A linear axis: values lo..hi onto pixels from..to, ticks every `step`
 * from the first multiple of step at or above lo. */
typedef struct svg_axis {
    double lo, hi, step;
    double from, to;
} svg_axis;

/* An axis over the finite values min..max (min <= max) on pixels
 * from..to: the range widened to round ticks (about `ticks` of them) and
 * never empty: a single value or constant values get a range around
 * them.  integer: ticks on whole numbers (epochs). */
svg_axis svg_axis_fit(double min, double max, int ticks, bool integer, double from, double to);
/* The pixel of a value. */
double svg_axis_map(const svg_axis *axis, double value);
/* The ticks' count and the i-th tick's value. */
int svg_axis_n_ticks(const svg_axis *axis);
double svg_axis_tick(const svg_axis *axis, int i);
/* A tick's label: as many decimals as the step needs ("0.25", "40"), or
 * %g for very small or large values. */
void svg_axis_label(const svg_axis *axis, double value, char *out, size_t capacity);

#endif
