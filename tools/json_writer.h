/*
 * The one way the command line writes JSON: every --json output and each
 * line of metrics.jsonl.  The writer keeps the commas and the nesting;
 * strings go through ct_json_escape (quotes, backslashes and control
 * characters escaped, bytes that are not UTF-8 replaced), and a number that
 * is not finite is written null, since JSON has no NaN or Infinity.  So a
 * model, file or class name can hold anything and the output still parses.
 *
 *     json_writer w = json_writer_start(stdout);
 *     json_object(&w);
 *     json_field_string(&w, "model", name);
 *     json_field_number(&w, "accuracy", accuracy);
 *     json_end(&w);            (prints the closing brace and a newline)
 */
#ifndef CUTTLE_TOOLS_JSON_WRITER_H
#define CUTTLE_TOOLS_JSON_WRITER_H

#include <stdbool.h>
#include <stdio.h>

#define JSON_WRITER_DEPTH 16

typedef struct json_writer {
    FILE *out;
    int depth;
    char closer[JSON_WRITER_DEPTH]; /* '}' or ']' per open level */
    bool has_items[JSON_WRITER_DEPTH];
    bool after_key;
} json_writer;

json_writer json_writer_start(FILE *out);

/* Values: one per array slot, or one after each json_key. */
void json_object(json_writer *w);
void json_array(json_writer *w);
/* Close the innermost object or array; closing the outermost ends the line. */
void json_end(json_writer *w);
void json_key(json_writer *w, const char *key);
void json_string(json_writer *w, const char *s); /* NULL: null */
void json_int(json_writer *w, long long v);
/* The shortest of %.6g to %.9g that reads back as the same float: 0.05,
 * not 0.0500000007. */
void json_number(json_writer *w, double v);
void json_fixed(json_writer *w, double v, int decimals);   /* %.*f */
void json_bool(json_writer *w, bool v);
void json_null(json_writer *w);

/* json_key then the value. */
void json_field_string(json_writer *w, const char *key, const char *s);
void json_field_int(json_writer *w, const char *key, long long v);
void json_field_number(json_writer *w, const char *key, double v);
void json_field_fixed(json_writer *w, const char *key, double v, int decimals);
void json_field_bool(json_writer *w, const char *key, bool v);
void json_field_null(json_writer *w, const char *key);

#endif
