/*
 * A strict recursive-descent JSON parser into a flat value array (json.h).
 * Every read of text[pos] is preceded by a pos < len check.
 */
#include "io/json.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Longest number accepted: enough for any double printed exactly. */
#define JSON_MAX_NUMBER_CHARS 800
#define JSON_FIRST_CAPACITY 16

typedef struct json_parser {
    const char *text;
    size_t len;
    size_t pos;
    int max_depth;
    ct_json_value *values;
    int n_values;
    int cap_values;
    char *strings; /* decoded strings; never more bytes than the text */
    size_t strings_used;
    ct_json_error *error;
    ct_status status;
} json_parser;

static int json_fail(json_parser *p, size_t offset, const char *message)
{
    if (p->status == CT_OK) {
        p->status = CT_ERR_FORMAT;
        p->error->offset = offset;
        p->error->message = message;
    }
    return -1;
}

static int json_out_of_memory(json_parser *p)
{
    p->status = CT_ERR_MEMORY;
    p->error->offset = p->pos;
    p->error->message = "out of memory";
    return -1;
}

static void json_skip_space(json_parser *p)
{
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        p->pos++;
    }
}

/* Append a value of `type` at the current position; its index, or -1. */
static int json_new_value(json_parser *p, ct_json_type type)
{
    if (p->n_values == p->cap_values) {
        if (p->cap_values > INT_MAX / 2)
            return json_fail(p, p->pos, "too many values");
        int capacity = p->cap_values ? p->cap_values * 2 : JSON_FIRST_CAPACITY;
        ct_json_value *grown = realloc(p->values, (size_t)capacity * sizeof *grown);
        if (!grown)
            return json_out_of_memory(p);
        p->values = grown;
        p->cap_values = capacity;
    }
    int index = p->n_values++;
    memset(&p->values[index], 0, sizeof p->values[index]);
    p->values[index].type = type;
    p->values[index].span = 1;
    p->values[index].offset = p->pos;
    return index;
}

/* Length of the UTF-8 sequence at s[0, avail), or 0 if it is not valid. */
static size_t utf8_sequence(const unsigned char *s, size_t avail)
{
    unsigned char lead = s[0], low = 0x80, high = 0xBF;
    size_t length;
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0)
            low = 0xA0; /* overlong */
        if (lead == 0xED)
            high = 0x9F; /* surrogates */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0)
            low = 0x90; /* overlong */
        if (lead == 0xF4)
            high = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (avail < length || s[1] < low || s[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return length;
}

bool ct_json_utf8_valid(const char *s, size_t len)
{
    const unsigned char *bytes = (const unsigned char *)s;
    size_t pos = 0;
    while (pos < len) {
        size_t length = utf8_sequence(bytes + pos, len - pos);
        if (length == 0)
            return false;
        pos += length;
    }
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The 4 hex digits after "\u" at text[at]; -1 if missing or not hex. */
static long json_hex4(const json_parser *p, size_t at)
{
    if (at + 6 > p->len || p->text[at] != '\\' || p->text[at + 1] != 'u')
        return -1;
    long code = 0;
    for (size_t i = at + 2; i < at + 6; i++) {
        int digit = hex_digit(p->text[i]);
        if (digit < 0)
            return -1;
        code = code * 16 + digit;
    }
    return code;
}

static size_t utf8_encode(unsigned long code, char *out)
{
    if (code < 0x80) {
        out[0] = (char)code;
        return 1;
    }
    if (code < 0x800) {
        out[0] = (char)(0xC0 | (code >> 6));
        out[1] = (char)(0x80 | (code & 0x3F));
        return 2;
    }
    if (code < 0x10000) {
        out[0] = (char)(0xE0 | (code >> 12));
        out[1] = (char)(0x80 | ((code >> 6) & 0x3F));
        out[2] = (char)(0x80 | (code & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (code >> 18));
    out[1] = (char)(0x80 | ((code >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((code >> 6) & 0x3F));
    out[3] = (char)(0x80 | (code & 0x3F));
    return 4;
}

/* A "\u" escape at p->pos (one or a surrogate pair) into out; bytes written. */
static int json_unicode_escape(json_parser *p, char *out)
{
    size_t start = p->pos;
    long code = json_hex4(p, start);
    if (code < 0)
        return json_fail(p, start, "expected 4 hex digits after \\u");
    p->pos += 6;
    if (code >= 0xDC00 && code <= 0xDFFF)
        return json_fail(p, start, "lone low surrogate in \\u escape");
    if (code >= 0xD800 && code <= 0xDBFF) {
        long low = json_hex4(p, p->pos);
        if (low < 0xDC00 || low > 0xDFFF)
            return json_fail(p, start, "high surrogate not followed by a \\u low surrogate");
        p->pos += 6;
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    return (int)utf8_encode((unsigned long)code, out);
}

/* One escape sequence at p->pos into out; bytes written, or -1. */
static int json_escape_sequence(json_parser *p, char *out)
{
    if (p->pos + 1 >= p->len)
        return json_fail(p, p->pos, "unterminated string");
    char kind = p->text[p->pos + 1];
    static const char from[] = "\"\\/bfnrt";
    static const char to[] = "\"\\/\b\f\n\r\t";
    const char *found = kind ? strchr(from, kind) : NULL;
    if (found) {
        *out = to[found - from];
        p->pos += 2;
        return 1;
    }
    if (kind == 'u')
        return json_unicode_escape(p, out);
    return json_fail(p, p->pos, "invalid escape in string");
}

static int json_parse_string(json_parser *p)
{
    int index = json_new_value(p, CT_JSON_STRING);
    if (index < 0)
        return -1;
    size_t start = p->pos++; /* the opening quote */
    char *out = p->strings + p->strings_used;
    size_t written = 0;
    for (;;) {
        if (p->pos >= p->len)
            return json_fail(p, start, "unterminated string");
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c == '\\') {
            int length = json_escape_sequence(p, out + written);
            if (length < 0)
                return -1;
            written += (size_t)length;
        } else if (c < 0x20) {
            return json_fail(p, p->pos, "control character in string (must be escaped)");
        } else {
            size_t length = utf8_sequence((const unsigned char *)p->text + p->pos,
                                          p->len - p->pos);
            if (length == 0)
                return json_fail(p, p->pos, "invalid UTF-8 in string");
            memcpy(out + written, p->text + p->pos, length);
            written += length;
            p->pos += length;
        }
    }
    out[written] = '\0';
    p->strings_used += written + 1;
    p->values[index].string = out;
    p->values[index].string_len = written;
    return index;
}

static bool json_is_digit(const json_parser *p)
{
    return p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9';
}

/* Digits from p->pos; fails unless there is at least one. */
static int json_digits(json_parser *p, const char *message)
{
    if (!json_is_digit(p))
        return json_fail(p, p->pos, message);
    while (json_is_digit(p))
        p->pos++;
    return 0;
}

/* The integer value of text[start, end) (digits, maybe a leading '-'). */
static bool json_to_int64(const char *text, size_t start, size_t end, int64_t *out)
{
    bool negative = text[start] == '-';
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t magnitude = 0;
    for (size_t i = start + (negative ? 1 : 0); i < end; i++) {
        uint64_t digit = (uint64_t)(text[i] - '0');
        if (magnitude > (limit - digit) / 10)
            return false;
        magnitude = magnitude * 10 + digit;
    }
    *out = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return true;
}

static int json_parse_number(json_parser *p)
{
    int index = json_new_value(p, CT_JSON_NUMBER);
    if (index < 0)
        return -1;
    size_t start = p->pos;
    bool fraction = false;
    if (p->text[p->pos] == '-')
        p->pos++;
    if (p->pos < p->len && p->text[p->pos] == '0') {
        p->pos++;
        if (json_is_digit(p))
            return json_fail(p, start, "leading zeros are not allowed in numbers");
    } else if (json_digits(p, "expected a digit in number") < 0) {
        return -1;
    }
    if (p->pos < p->len && p->text[p->pos] == '.') {
        p->pos++;
        fraction = true;
        if (json_digits(p, "expected a digit after '.' in number") < 0)
            return -1;
    }
    if (p->pos < p->len && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        p->pos++;
        fraction = true;
        if (p->pos < p->len && (p->text[p->pos] == '+' || p->text[p->pos] == '-'))
            p->pos++;
        if (json_digits(p, "expected a digit in exponent") < 0)
            return -1;
    }
    size_t length = p->pos - start;
    if (length > JSON_MAX_NUMBER_CHARS)
        return json_fail(p, start, "number too long");
    char digits[JSON_MAX_NUMBER_CHARS + 1];
    memcpy(digits, p->text + start, length);
    digits[length] = '\0';
    ct_json_value *value = &p->values[index];
    value->number = strtod(digits, NULL);
    if (isinf(value->number))
        return json_fail(p, start, "number out of range");
    if (!fraction)
        value->is_integer = json_to_int64(p->text, start, p->pos, &value->integer);
    return index;
}

static int json_parse_literal(json_parser *p, const char *word, ct_json_type type)
{
    size_t length = strlen(word);
    if (p->len - p->pos < length || memcmp(p->text + p->pos, word, length) != 0)
        return json_fail(p, p->pos, "unexpected characters: expected a value");
    int index = json_new_value(p, type);
    if (index >= 0)
        p->pos += length;
    return index;
}

static int json_parse_value(json_parser *p, int depth);

/* An array or object at p->pos (its opening bracket). */
static int json_parse_container(json_parser *p, int depth, ct_json_type type)
{
    bool is_object = type == CT_JSON_OBJECT;
    if (depth > p->max_depth)
        return json_fail(p, p->pos, "nested too deeply");
    int index = json_new_value(p, type);
    if (index < 0)
        return -1;
    char close = is_object ? '}' : ']';
    int count = 0;
    p->pos++;
    json_skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
        return index;
    }
    for (;;) {
        json_skip_space(p);
        if (is_object) {
            if (p->pos >= p->len || p->text[p->pos] != '"')
                return json_fail(p, p->pos, "expected a string key in object");
            if (json_parse_string(p) < 0)
                return -1;
            json_skip_space(p);
            if (p->pos >= p->len || p->text[p->pos] != ':')
                return json_fail(p, p->pos, "expected ':' after object key");
            p->pos++;
        }
        if (json_parse_value(p, depth + 1) < 0)
            return -1;
        if (count == INT_MAX)
            return json_fail(p, p->pos, "too many values");
        count++;
        json_skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == close) {
            p->pos++;
            break;
        }
        return json_fail(p, p->pos, is_object ? "expected ',' or '}' in object"
                                              : "expected ',' or ']' in array");
    }
    p->values[index].count = count;
    p->values[index].span = p->n_values - index;
    return index;
}

static int json_parse_value(json_parser *p, int depth)
{
    json_skip_space(p);
    if (p->pos >= p->len)
        return json_fail(p, p->pos, "unexpected end of input: expected a value");
    char c = p->text[p->pos];
    switch (c) {
    case '{':
        return json_parse_container(p, depth, CT_JSON_OBJECT);
    case '[':
        return json_parse_container(p, depth, CT_JSON_ARRAY);
    case '"':
        return json_parse_string(p);
    case 't':
        return json_parse_literal(p, "true", CT_JSON_TRUE);
    case 'f':
        return json_parse_literal(p, "false", CT_JSON_FALSE);
    case 'n':
        return json_parse_literal(p, "null", CT_JSON_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return json_parse_number(p);
        return json_fail(p, p->pos, "unexpected character: expected a value");
    }
}

ct_status ct_json_parse(const char *text, size_t len, int max_depth, ct_json_doc *doc,
                        ct_json_error *error)
{
    json_parser p = {.text = text, .len = len, .max_depth = max_depth, .error = error};
    memset(doc, 0, sizeof *doc);
    error->offset = 0;
    error->message = "";
    if (!text && len > 0)
        json_fail(&p, 0, "no text");
    else if (!(p.strings = malloc(len + 1)))
        json_out_of_memory(&p);
    else if (json_parse_value(&p, 1) >= 0) {
        json_skip_space(&p);
        if (p.pos < p.len)
            json_fail(&p, p.pos, "unexpected characters after the JSON value");
    }
    if (p.status != CT_OK) {
        free(p.values);
        free(p.strings);
        return p.status;
    }
    doc->values = p.values;
    doc->n_values = p.n_values;
    doc->strings = p.strings;
    return CT_OK;
}

void ct_json_free(ct_json_doc *doc)
{
    if (!doc)
        return;
    free(doc->values);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

const ct_json_value *ct_json_get(const ct_json_value *object, const char *key)
{
    if (!object || object->type != CT_JSON_OBJECT)
        return NULL;
    size_t key_len = strlen(key);
    const ct_json_value *member = ct_json_first(object);
    for (int i = 0; i < object->count; i++, member = ct_json_next_member(member)) {
        if (member->string_len == key_len && memcmp(member->string, key, key_len) == 0)
            return ct_json_member_value(member);
    }
    return NULL;
}

const char *ct_json_kind(ct_json_type type)
{
    static const char *const kinds[] = {"null",     "a boolean", "a boolean", "a number",
                                        "a string", "an array",  "an object"};
    return (unsigned)type < sizeof kinds / sizeof kinds[0] ? kinds[type] : "?";
}

size_t ct_json_escape(char *out, size_t cap, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t need = 0;
#define JSON_PUT(ch)                                                          \
    do {                                                                      \
        if (need + 1 < cap)                                                   \
            out[need] = (ch);                                                 \
        need++;                                                               \
    } while (0)
    JSON_PUT('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *short_form = NULL;
        switch (c) {
        case '"': short_form = "\\\""; break;
        case '\\': short_form = "\\\\"; break;
        case '\b': short_form = "\\b"; break;
        case '\f': short_form = "\\f"; break;
        case '\n': short_form = "\\n"; break;
        case '\r': short_form = "\\r"; break;
        case '\t': short_form = "\\t"; break;
        default: break;
        }
        if (short_form) {
            JSON_PUT(short_form[0]);
            JSON_PUT(short_form[1]);
        } else if (c < 0x20) {
            JSON_PUT('\\');
            JSON_PUT('u');
            JSON_PUT('0');
            JSON_PUT('0');
            JSON_PUT(hex[c >> 4]);
            JSON_PUT(hex[c & 15]);
        } else if (c < 0x80) {
            JSON_PUT((char)c);
        } else {
            size_t length = utf8_sequence((const unsigned char *)s + i, len - i);
            if (length == 0) { /* not UTF-8: U+FFFD, so that the literal stays valid JSON */
                const char *replacement = "\\ufffd";
                for (int k = 0; replacement[k]; k++)
                    JSON_PUT(replacement[k]);
                continue;
            }
            for (size_t k = 0; k < length; k++)
                JSON_PUT(s[i + k]);
            i += length - 1;
        }
    }
    JSON_PUT('"');
#undef JSON_PUT
    if (cap > 0)
        out[need < cap ? need : cap - 1] = '\0';
    return need;
}
