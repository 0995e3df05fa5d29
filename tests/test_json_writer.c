/*
 * The command line's JSON writer (tools/json_writer.c), read back with the
 * library's strict parser: hostile strings (quotes, backslashes, control
 * characters, bytes that are not UTF-8) stay valid JSON and come back as
 * written (the non-UTF-8 byte as U+FFFD); NaN and infinities are null;
 * numbers read back as the same float in the fewest digits; commas and
 * nesting are right.  tests/test_json_cli.sh checks every --json output.
 */
#include <string.h>

#include "../tools/json_writer.h"
#include "harness.h"
#include "io/json.h"

#define OUTPUT_CAPACITY 4096
#define HOSTILE "q\"uote \\back\tslash\nnew\x01" "ctl \xff end \xc3\xa9"
#define HOSTILE_READ "q\"uote \\back\tslash\nnew\x01" "ctl \xef\xbf\xbd end \xc3\xa9"

/* What `write` printed, NUL-terminated, in out. */
static void capture(void (*write)(json_writer *), char *out, size_t capacity)
{
    FILE *file = tmpfile();
    json_writer w = json_writer_start(file);
    write(&w);
    rewind(file);
    size_t n = fread(out, 1, capacity - 1, file);
    out[n] = '\0';
    fclose(file);
}

static void write_hostile(json_writer *w)
{
    json_object(w);
    json_field_string(w, HOSTILE, HOSTILE);
    json_field_string(w, "absent", NULL);
    json_end(w);
}

static void hostile_strings_read_back(void)
{
    char text[OUTPUT_CAPACITY];
    capture(write_hostile, text, sizeof text);
    CHECK(text[strlen(text) - 1] == '\n', "the object ends its line: %s", text);
    ct_json_doc doc = {0};
    ct_json_error error;
    CHECK_OK(ct_json_parse(text, strlen(text), 4, &doc, &error));
    if (!doc.values)
        return;
    const ct_json_value *root = ct_json_root(&doc);
    CHECK(root->type == CT_JSON_OBJECT && root->count == 2, "%s", text);
    const ct_json_value *key = ct_json_first(root);
    CHECK(strcmp(key->string, HOSTILE_READ) == 0, "key %s", key->string);
    const ct_json_value *value = ct_json_get(root, HOSTILE_READ);
    CHECK(value && value->type == CT_JSON_STRING && strcmp(value->string, HOSTILE_READ) == 0,
          "value of %s", text);
    value = ct_json_get(root, "absent");
    CHECK(value && value->type == CT_JSON_NULL, "NULL string: %s", text);
    ct_json_free(&doc);
}

static void write_numbers(json_writer *w)
{
    json_array(w);
    json_number(w, 0.05f);
    json_number(w, 1.0f / 3.0f);
    json_number(w, NAN);
    json_number(w, INFINITY);
    json_fixed(w, -INFINITY, 3);
    json_fixed(w, 2.5, 3);
    json_int(w, -9007199254740993LL);
    json_bool(w, true);
    json_null(w);
    json_end(w);
}

static void numbers_are_json_numbers(void)
{
    char text[OUTPUT_CAPACITY];
    capture(write_numbers, text, sizeof text);
    CHECK(strcmp(text, "[0.05, 0.33333334, null, null, null, 2.500, -9007199254740993, true, "
                       "null]\n") == 0,
          "got %s", text);
    ct_json_doc doc = {0};
    ct_json_error error;
    CHECK_OK(ct_json_parse(text, strlen(text), 4, &doc, &error));
    if (doc.values) {
        const ct_json_value *v = ct_json_first(ct_json_root(&doc));
        CHECK((float)v->number == 0.05f, "0.05f read back as %.9g", v->number);
        v = ct_json_next(v);
        CHECK((float)v->number == 1.0f / 3.0f, "1/3 read back as %.9g", v->number);
    }
    ct_json_free(&doc);
}

static void write_nested(json_writer *w)
{
    json_object(w);
    json_key(w, "rows");
    json_array(w);
    for (int r = 0; r < 2; r++) {
        json_array(w);
        for (int c = 0; c < 3; c++)
            json_int(w, r * 3 + c);
        json_end(w);
    }
    json_end(w);
    json_key(w, "empty");
    json_object(w);
    json_end(w);
    json_key(w, "items");
    json_array(w);
    json_object(w);
    json_field_int(w, "a", 1);
    json_field_string(w, "b", "x");
    json_end(w);
    json_object(w);
    json_end(w);
    json_end(w);
    json_end(w);
}

static void nesting_and_commas(void)
{
    char text[OUTPUT_CAPACITY];
    capture(write_nested, text, sizeof text);
    CHECK(strcmp(text, "{\"rows\": [[0, 1, 2], [3, 4, 5]], \"empty\": {}, "
                       "\"items\": [{\"a\": 1, \"b\": \"x\"}, {}]}\n") == 0,
          "got %s", text);
}

int main(void)
{
    RUN(hostile_strings_read_back);
    RUN(numbers_are_json_numbers);
    RUN(nesting_and_commas);
    return harness_finish();
}
