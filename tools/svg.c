/*
 * SVG primitives and axes (svg.h).
 */
#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lib_internal.h"

/* Smaller steps than this, or labels larger than LABEL_LARGE, print as %g. */
#define LABEL_SMALLEST_STEP 1e-4
#define LABEL_LARGE 1e6
/* A constant series gets a range of this fraction of its value each side
 * (or CONSTANT_PAD_ZERO around zero). */
#define CONSTANT_PAD_FRACTION 0.1
#define CONSTANT_PAD_ZERO 1.0

static const char *const anchors[] = {"start", "middle", "end"};

/* The charts only draw finite numbers; anything else is a bug in cuttle. */
static double finite(double value)
{
    if (!isfinite(value)) {
        fprintf(stderr, "cuttle: a non-finite SVG coordinate (a bug in cuttle: please report "
                        "it)\n");
        abort();
    }
    return value;
}

/* ---- the file ------------------------------------------------------------------ */

int svg_open(const char *command, const char *path, int width, int height, const char *title,
             svg_file *svg)
{
    memset(svg, 0, sizeof *svg);
    if ((size_t)snprintf(svg->path, sizeof svg->path, "%s", path) >= sizeof svg->path) {
        fprintf(stderr, "cuttle %s: the path %s is too long\n", command, path);
        return CLI_EXIT_USAGE;
    }
    snprintf(svg->temp, sizeof svg->temp, "%s.tmp", path);
    if (!(svg->out = fopen(svg->temp, "w"))) {
        fprintf(stderr, "cuttle %s: cannot write %s: %s\n", command, svg->temp, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    fprintf(svg->out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\">\n<title>",
            width, height, width, height);
    svg_escape(svg->out, title);
    fprintf(svg->out, "</title>\n");
    svg_rect(svg->out, "background", 0, 0, width, height, "white", NULL);
    return CLI_EXIT_OK;
}

int svg_close(const char *command, svg_file *svg)
{
    fprintf(svg->out, "</svg>\n");
    bool ok = !ferror(svg->out);
    ok = fclose(svg->out) == 0 && ok;
    svg->out = NULL;
    if (!ok || rename(svg->temp, svg->path) != 0) {
        fprintf(stderr, "cuttle %s: cannot write %s: %s\n", command, svg->path, strerror(errno));
        remove(svg->temp);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

void svg_abandon(svg_file *svg)
{
    if (!svg->out)
        return;
    fclose(svg->out);
    svg->out = NULL;
    remove(svg->temp);
}

/* ---- text and shapes ------------------------------------------------------------- */

void svg_escape(FILE *out, const char *text)
{
    bool utf8 = ct_json_utf8_valid(text, strlen(text));
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&apos;", out); break;
        default:
            if ((*p < 0x20 && *p != '\t') || *p == 0x7f || (*p >= 0x80 && !utf8))
                fputc('?', out);
            else
                fputc(*p, out);
        }
    }
}

static void class_attribute(FILE *out, const char *class_name)
{
    if (class_name)
        fprintf(out, " class=\"%s\"", class_name);
}

void svg_text(FILE *out, const char *class_name, double x, double y, svg_anchor anchor,
              double size, const char *fill, const char *text)
{
    fprintf(out, "<text");
    class_attribute(out, class_name);
    fprintf(out, " x=\"" SVG_COORD "\" y=\"" SVG_COORD "\" font-size=\"%g\" fill=\"%s\"",
            finite(x), finite(y), size, fill);
    if (anchor != SVG_START)
        fprintf(out, " text-anchor=\"%s\"", anchors[anchor]);
    fprintf(out, ">");
    svg_escape(out, text);
    fprintf(out, "</text>\n");
}

static void stroke_attributes(FILE *out, const char *stroke, double width, const char *dash)
{
    fprintf(out, " stroke=\"%s\" stroke-width=\"%g\"", stroke, width);
    if (dash)
        fprintf(out, " stroke-dasharray=\"%s\"", dash);
}

void svg_line(FILE *out, const char *class_name, double x1, double y1, double x2, double y2,
              const char *stroke, double width, const char *dash)
{
    fprintf(out, "<line");
    class_attribute(out, class_name);
    fprintf(out, " x1=\"" SVG_COORD "\" y1=\"" SVG_COORD "\" x2=\"" SVG_COORD "\" y2=\"" SVG_COORD
                 "\"",
            finite(x1), finite(y1), finite(x2), finite(y2));
    stroke_attributes(out, stroke, width, dash);
    fprintf(out, "/>\n");
}

void svg_rect(FILE *out, const char *class_name, double x, double y, double width,
              double height, const char *fill, const char *stroke)
{
    fprintf(out, "<rect");
    class_attribute(out, class_name);
    fprintf(out,
            " x=\"" SVG_COORD "\" y=\"" SVG_COORD "\" width=\"" SVG_COORD "\" height=\"" SVG_COORD
            "\" fill=\"%s\"",
            finite(x), finite(y), finite(width), finite(height), fill);
    if (stroke)
        fprintf(out, " stroke=\"%s\"", stroke);
    fprintf(out, "/>\n");
}

void svg_circle(FILE *out, const char *class_name, double cx, double cy, double r,
                const char *fill)
{
    fprintf(out, "<circle");
    class_attribute(out, class_name);
    fprintf(out, " cx=\"" SVG_COORD "\" cy=\"" SVG_COORD "\" r=\"%g\" fill=\"%s\"/>\n",
            finite(cx), finite(cy), r, fill);
}

void svg_group_begin(FILE *out, const char *class_name)
{
    fprintf(out, "<g");
    class_attribute(out, class_name);
}

void svg_attribute(FILE *out, const char *name, const char *value)
{
    fprintf(out, " %s=\"", name);
    svg_escape(out, value);
    fprintf(out, "\"");
}

void svg_attribute_number(FILE *out, const char *name, double value)
{
    fprintf(out, " %s=\"%.17g\"", name, finite(value));
}

void svg_group_open(FILE *out)
{
    fprintf(out, ">\n");
}

void svg_group_end(FILE *out)
{
    fprintf(out, "</g>\n");
}

void svg_polyline_begin(FILE *out, const char *class_name, const char *stroke, double width,
                        const char *dash)
{
    fprintf(out, "<polyline");
    class_attribute(out, class_name);
    fprintf(out, " fill=\"none\" stroke-linejoin=\"round\"");
    stroke_attributes(out, stroke, width, dash);
    fprintf(out, " points=\"");
}

void svg_polyline_point(FILE *out, double x, double y)
{
    fprintf(out, SVG_COORD "," SVG_COORD " ", finite(x), finite(y));
}

void svg_polyline_end(FILE *out)
{
    fprintf(out, "\"/>\n");
}

/* ---- axes ------------------------------------------------------------------------ */

/* 1, 2 or 5 times a power of ten, the smallest at or above raw. */
static double round_step(double raw)
{
    double magnitude = pow(10, floor(log10(raw)));
    double normalized = raw / magnitude;
    double nice = normalized <= 1 ? 1 : normalized <= 2 ? 2 : normalized <= 5 ? 5 : 10;
    return nice * magnitude;
}

svg_axis svg_axis_fit(double min, double max, int ticks, bool integer, double from, double to)
{
    if (max <= min) { /* one value: a range around it */
        double pad = integer || min == 0 ? CONSTANT_PAD_ZERO : fabs(min) * CONSTANT_PAD_FRACTION;
        min -= pad;
        max += pad;
    }
    double step = round_step((max - min) / (ticks > 1 ? ticks - 1 : 1));
    if (integer && step < 1)
        step = 1;
    svg_axis axis = {.lo = floor(min / step) * step, .hi = ceil(max / step) * step,
                     .step = step, .from = from, .to = to};
    return axis;
}

double svg_axis_map(const svg_axis *axis, double value)
{
    return axis->from + (value - axis->lo) / (axis->hi - axis->lo) * (axis->to - axis->from);
}

int svg_axis_n_ticks(const svg_axis *axis)
{
    return (int)lround((axis->hi - axis->lo) / axis->step) + 1;
}

double svg_axis_tick(const svg_axis *axis, int i)
{
    double value = axis->lo + i * axis->step;
    return fabs(value) < axis->step * 1e-9 ? 0.0 : value; /* no "-0" */
}

void svg_axis_label(const svg_axis *axis, double value, char *out, size_t capacity)
{
    double largest = fmax(fabs(axis->lo), fabs(axis->hi));
    if (axis->step < LABEL_SMALLEST_STEP || largest >= LABEL_LARGE) {
        snprintf(out, capacity, "%g", value);
        return;
    }
    int decimals = (int)fmax(0, -floor(log10(axis->step) + 1e-9));
    snprintf(out, capacity, "%.*f", decimals, value);
}
