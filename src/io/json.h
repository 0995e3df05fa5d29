/*
 * A small, strict JSON parser (RFC 8259) for file headers (safetensors), and
 * a helper that escapes strings for writing JSON.
 *
 * The parser makes a flat array of values in document order: a container is
 * followed by its children, and `span` counts the values in its subtree, so
 * the next sibling of v is v + v->span.  In an object each member is a key
 * (a string value) followed by its value.  Strings are decoded (escapes,
 * \uXXXX and surrogate pairs to UTF-8) into one buffer, NUL-terminated.
 * Parsing allocates the value array (grown by doubling) and one string
 * buffer no larger than the text.
 *
 * Strict: no comments, no trailing commas, no leading zeros, no NaN, no
 * invalid UTF-8, no lone surrogates, no control characters in strings, and
 * nothing but whitespace after the value.  Nesting is limited to max_depth.
 * The parser never reads outside text[0, len); text need not end in NUL.
 */
#ifndef CT_IO_JSON_H
#define CT_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuttle.h"

typedef enum ct_json_type {
    CT_JSON_NULL = 0,
    CT_JSON_FALSE,
    CT_JSON_TRUE,
    CT_JSON_NUMBER,
    CT_JSON_STRING,
    CT_JSON_ARRAY,
    CT_JSON_OBJECT
} ct_json_type;

typedef struct ct_json_value {
    ct_json_type type;
    int count;          /* array: elements; object: members */
    int span;           /* values in this subtree, itself included */
    size_t offset;      /* byte offset of the value in the text */
    const char *string; /* CT_JSON_STRING: decoded, NUL-terminated */
    size_t string_len;  /* bytes before the NUL (a \u0000 may sit inside) */
    double number;      /* CT_JSON_NUMBER */
    bool is_integer;    /* no fraction or exponent, and it fits in int64 */
    int64_t integer;    /* when is_integer */
} ct_json_value;

typedef struct ct_json_doc {
    ct_json_value *values; /* values[0] is the root */
    int n_values;
    char *strings;
} ct_json_doc;

typedef struct ct_json_error {
    size_t offset;       /* byte offset in the text where parsing stopped */
    const char *message; /* static: "expected ',' or '}' in object" */
} ct_json_error;

/* Parse text[0, len).  On success fills *doc (free it with ct_json_free)
 * and returns CT_OK.  Otherwise returns CT_ERR_FORMAT (with *error filled)
 * or CT_ERR_MEMORY, and leaves *doc empty.  Does not touch ct_last_error():
 * the caller knows which file it was and says so. */
ct_status ct_json_parse(const char *text, size_t len, int max_depth, ct_json_doc *doc,
                        ct_json_error *error);
void ct_json_free(ct_json_doc *doc); /* an empty or zeroed doc is fine */

static inline const ct_json_value *ct_json_root(const ct_json_doc *doc)
{
    return doc->values;
}

/* First element of an array, or first key of an object; NULL if empty. */
static inline const ct_json_value *ct_json_first(const ct_json_value *container)
{
    return container->count > 0 ? container + 1 : NULL;
}

/* The value after v in its array (only while elements remain: use count). */
static inline const ct_json_value *ct_json_next(const ct_json_value *v)
{
    return v + v->span;
}

/* Object members: the value of a key, and the key of the next member. */
static inline const ct_json_value *ct_json_member_value(const ct_json_value *key)
{
    return key + 1;
}

static inline const ct_json_value *ct_json_next_member(const ct_json_value *key)
{
    return ct_json_next(key + 1);
}

/* The value of the first member named key, or NULL.  Borrowed. */
const ct_json_value *ct_json_get(const ct_json_value *object, const char *key);

/* "an object", "a string", "null", ... for messages. */
const char *ct_json_kind(ct_json_type type);

/* Write s[0, len) as a JSON string literal, quotes included, snprintf-style:
 * writes at most cap bytes including a NUL, and returns the length that the
 * whole literal needs (without the NUL).  Escapes '"', '\\' and control
 * characters; a byte that does not start a valid UTF-8 sequence becomes
 * \ufffd (the replacement character), so the literal is always valid JSON;
 * everything else passes through. */
size_t ct_json_escape(char *out, size_t cap, const char *s, size_t len);

/* True when s[0, len) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
bool ct_json_utf8_valid(const char *s, size_t len);

#endif
