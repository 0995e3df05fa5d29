#include "json_writer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib_internal.h"

json_writer json_writer_start(FILE *out)
{
    json_writer w;
    memset(&w, 0, sizeof w);
    w.out = out;
    return w;
}

/* The separator before a value: none after a key or first in its level. */
static void before_value(json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (w->has_items[w->depth - 1])
            fputs(", ", w->out);
        w->has_items[w->depth - 1] = true;
    }
}

static void open_level(json_writer *w, char opener, char closer)
{
    before_value(w);
    fputc(opener, w->out);
    if (w->depth < JSON_WRITER_DEPTH) { /* deeper is a bug of the caller; the output shows it */
        w->closer[w->depth] = closer;
        w->has_items[w->depth] = false;
        w->depth++;
    }
}

void json_object(json_writer *w)
{
    open_level(w, '{', '}');
}

void json_array(json_writer *w)
{
    open_level(w, '[', ']');
}

void json_end(json_writer *w)
{
    if (w->depth == 0)
        return;
    fputc(w->closer[--w->depth], w->out);
    if (w->depth == 0)
        fputc('\n', w->out);
}

/* s[0, len) as a JSON string literal, escaped. */
static void put_string(FILE *out, const char *s)
{
    char small[256];
    size_t len = strlen(s), need = ct_json_escape(small, sizeof small, s, len);
    if (need < sizeof small) {
        fputs(small, out);
        return;
    }
    char *big = malloc(need + 1);
    if (big) {
        ct_json_escape(big, need + 1, s, len);
        fputs(big, out);
        free(big);
    } else {
        fputs("null", out); /* out of memory: a valid value rather than a broken one */
    }
}

void json_key(json_writer *w, const char *key)
{
    before_value(w);
    put_string(w->out, key);
    fputs(": ", w->out);
    w->after_key = true;
}

void json_string(json_writer *w, const char *s)
{
    before_value(w);
    if (s)
        put_string(w->out, s);
    else
        fputs("null", w->out);
}

void json_int(json_writer *w, long long v)
{
    before_value(w);
    fprintf(w->out, "%lld", v);
}

void json_number(json_writer *w, double v)
{
    before_value(w);
    if (!isfinite(v)) {
        fputs("null", w->out);
        return;
    }
    char text[32];
    for (int digits = 6; digits <= 9; digits++) { /* 9 always reads back as the same float */
        snprintf(text, sizeof text, "%.*g", digits, v);
        if ((float)strtod(text, NULL) == (float)v)
            break;
    }
    fputs(text, w->out);
}

void json_fixed(json_writer *w, double v, int decimals)
{
    before_value(w);
    if (isfinite(v))
        fprintf(w->out, "%.*f", decimals, v);
    else
        fputs("null", w->out);
}

void json_bool(json_writer *w, bool v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->out);
}

void json_null(json_writer *w)
{
    before_value(w);
    fputs("null", w->out);
}

void json_field_string(json_writer *w, const char *key, const char *s)
{
    json_key(w, key);
    json_string(w, s);
}

void json_field_int(json_writer *w, const char *key, long long v)
{
    json_key(w, key);
    json_int(w, v);
}

void json_field_number(json_writer *w, const char *key, double v)
{
    json_key(w, key);
    json_number(w, v);
}

void json_field_fixed(json_writer *w, const char *key, double v, int decimals)
{
    json_key(w, key);
    json_fixed(w, v, decimals);
}

void json_field_bool(json_writer *w, const char *key, bool v)
{
    json_key(w, key);
    json_bool(w, v);
}

void json_field_null(json_writer *w, const char *key)
{
    json_key(w, key);
    json_null(w);
}
