/*
 * Tests of the JSON parser and of safetensors reading and writing: round
 * trips, corrupt files (each refused with a message that names the file),
 * truncated and mangled files (never a crash: run it under ASan/UBSan), and
 * atomic saves that leave the old file alone when they fail.
 *
 * Usage: test_safetensors [fixture_dir]   (default tests/fixtures)
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuttle.h"
#include "harness.h"
#include "io/checksum.h"
#include "io/json.h"
#include "io/safetensors.h"

#define JSON_TEST_DEPTH 16

static char temp_dir[64];
static const char *fixture_dir = "tests/fixtures";

static void temp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", temp_dir, name);
}

static bool write_bytes(const char *path, const void *bytes, size_t len)
{
    FILE *file = fopen(path, "wb");
    if (!file)
        return false;
    bool ok = fwrite(bytes, 1, len, file) == len;
    return fclose(file) == 0 && ok;
}

/* The whole file in a malloc'd buffer of exactly its size (ASan sees overreads). */
static unsigned char *read_bytes(const char *path, size_t *len)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    unsigned char *bytes = malloc(size > 0 ? (size_t)size : 1);
    if (bytes && fread(bytes, 1, (size_t)size, file) != (size_t)size) {
        free(bytes);
        bytes = NULL;
    }
    fclose(file);
    *len = (size_t)size;
    return bytes;
}

/* A safetensors file from a header text (no padding added) and data bytes. */
static void write_safetensors(const char *path, const char *header, const void *data,
                              size_t data_len)
{
    size_t header_len = strlen(header);
    size_t total = 8 + header_len + data_len;
    unsigned char *bytes = malloc(total);
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    memcpy(bytes + 8, header, header_len);
    if (data_len)
        memcpy(bytes + 8 + header_len, data, data_len);
    CHECK(write_bytes(path, bytes, total), "cannot write %s", path);
    free(bytes);
}

/* Load must fail with `status`, leave *out NULL, and say the path and `what`. */
static void expect_refused(const char *path, ct_status status, const char *what)
{
    ct_st_file *file = (ct_st_file *)&file; /* poison: must come back NULL */
    ct_status got = ct_st_load(path, &file);
    CHECK(got == status, "%s: expected %s, got %s (%s)", path, ct_status_name(status),
          ct_status_name(got), ct_last_error());
    CHECK(file == NULL, "%s: out not NULL after a failure", path);
    CHECK(strstr(ct_last_error(), path) != NULL, "message does not name the file: %s",
          ct_last_error());
    CHECK(strstr(ct_last_error(), what) != NULL, "message lacks '%s': %s", what, ct_last_error());
    if (got == CT_OK)
        ct_st_free(file);
}

static bool no_temp_files_left(void)
{
    DIR *dir = opendir(temp_dir);
    bool clean = true;
    for (struct dirent *entry; dir && (entry = readdir(dir));)
        if (strstr(entry->d_name, ".tmp.")) {
            struct stat info;
            char path[512];
            snprintf(path, sizeof path, "%s/%s", temp_dir, entry->d_name);
            if (stat(path, &info) == 0 && S_ISREG(info.st_mode))
                clean = false;
        }
    if (dir)
        closedir(dir);
    return clean;
}

/* ---- JSON ---------------------------------------------------------------- */

/* Parse a copy of exactly strlen(text) bytes, without a NUL after it. */
static ct_status parse_exact(const char *text, ct_json_doc *doc, ct_json_error *error)
{
    size_t len = strlen(text);
    char *copy = malloc(len ? len : 1);
    memcpy(copy, text, len);
    ct_status status = ct_json_parse(copy, len, JSON_TEST_DEPTH, doc, error);
    free(copy);
    return status;
}

static void test_json_values(void)
{
    const char *text = " {\"a\": [1, -2, 3.5, true, false, null, 2e3],"
                       " \"b\": \"x\\u00e9\\ud83d\\ude00\\n\\\"\\\\\\/\", \"c\": {}, \"d\": []} ";
    ct_json_doc doc;
    ct_json_error error;
    CHECK_OK(parse_exact(text, &doc, &error));
    const ct_json_value *root = ct_json_root(&doc);
    CHECK(root->type == CT_JSON_OBJECT && root->count == 4, "root");
    CHECK(root->span == doc.n_values, "root span %d of %d", root->span, doc.n_values);
    const ct_json_value *a = ct_json_get(root, "a");
    CHECK(a && a->type == CT_JSON_ARRAY && a->count == 7, "a");
    const ct_json_value *e = ct_json_first(a);
    CHECK(e->is_integer && e->integer == 1, "a[0]");
    e = ct_json_next(e);
    CHECK(e->is_integer && e->integer == -2, "a[1]");
    e = ct_json_next(e);
    CHECK(!e->is_integer && e->number == 3.5, "a[2]");
    e = ct_json_next(e);
    CHECK(e->type == CT_JSON_TRUE, "a[3]");
    e = ct_json_next(e);
    CHECK(e->type == CT_JSON_FALSE, "a[4]");
    e = ct_json_next(e);
    CHECK(e->type == CT_JSON_NULL, "a[5]");
    e = ct_json_next(e);
    CHECK(!e->is_integer && e->number == 2000.0, "a[6]");
    const ct_json_value *b = ct_json_get(root, "b");
    const char *expected = "x\xc3\xa9\xf0\x9f\x98\x80\n\"\\/";
    CHECK(b && b->type == CT_JSON_STRING && strcmp(b->string, expected) == 0 &&
              b->string_len == strlen(expected), "b = '%s'", b ? b->string : "(null)");
    const ct_json_value *c = ct_json_get(root, "c");
    CHECK(c && c->type == CT_JSON_OBJECT && c->count == 0 && !ct_json_first(c), "c");
    CHECK(ct_json_get(root, "d") && ct_json_get(root, "d")->count == 0, "d");
    CHECK(ct_json_get(root, "missing") == NULL, "missing key");
    ct_json_free(&doc);
    ct_json_free(&doc); /* a freed doc is empty, so twice is fine */
}

static void test_json_integers(void)
{
    struct {
        const char *text;
        bool is_integer;
        int64_t value;
    } cases[] = {
        {"0", true, 0},
        {"-0", true, 0},
        {"9223372036854775807", true, INT64_MAX},
        {"-9223372036854775808", true, INT64_MIN},
        {"9223372036854775808", false, 0},
        {"-9223372036854775809", false, 0},
        {"1e2", false, 0},
        {"1.0", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_json_doc doc;
        ct_json_error error;
        CHECK_OK(parse_exact(cases[i].text, &doc, &error));
        if (!doc.values)
            continue;
        const ct_json_value *v = ct_json_root(&doc);
        CHECK(v->type == CT_JSON_NUMBER && v->is_integer == cases[i].is_integer &&
                  (!v->is_integer || v->integer == cases[i].value),
              "%s", cases[i].text);
        ct_json_free(&doc);
    }
}

static void test_json_rejects(void)
{
    struct {
        const char *text;
        size_t offset;
    } cases[] = {
        {"", 0},          {"   ", 3},          {"{", 1},         {"[1,]", 3},
        {"{\"a\":1,}", 7}, {"01", 0},          {"1.", 2},        {"-", 1},
        {"1e", 2},        {"+1", 0},          {".5", 0},        {"NaN", 0},
        {"tru", 0},       {"nul", 0},         {"[1 2]", 3},     {"{\"a\" 1}", 5},
        {"{1:2}", 1},     {"'a'", 0},         {"\"abc", 0},     {"\"\\x\"", 1},
        {"\"\\u12\"", 1}, {"\"\\ud800\"", 1}, {"\"\\udc00\"", 1}, {"\"\\ud800\\u0041\"", 1},
        {"\"a\nb\"", 2},  {"\"\xff\"", 1},    {"\"\xc0\xaf\"", 1}, {"\"\xed\xa0\x80\"", 1},
        {"\"\xf4\x90\x80\x80\"", 1}, {"\"\xe2\x82\"", 1}, {"1e999", 0}, {"[] x", 3},
        {"{} {}", 3},     {"[1]]", 3},        {"{\"a\":}", 5},  {"\"\\", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_json_doc doc = {0};
        ct_json_error error = {0};
        ct_status status = parse_exact(cases[i].text, &doc, &error);
        CHECK(status == CT_ERR_FORMAT, "case %zu '%s' parsed", i, cases[i].text);
        CHECK(doc.values == NULL, "case %zu: doc not empty after failure", i);
        CHECK(error.message && error.message[0], "case %zu: no message", i);
        CHECK(error.offset == cases[i].offset, "case %zu '%s': offset %zu, expected %zu (%s)", i,
              cases[i].text, error.offset, cases[i].offset, error.message);
        if (status == CT_OK)
            ct_json_free(&doc);
    }
}

static void test_json_depth_limit(void)
{
    char text[2 * JSON_TEST_DEPTH + 3];
    for (int depth = JSON_TEST_DEPTH; depth <= JSON_TEST_DEPTH + 1; depth++) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        text[2 * depth] = '\0';
        ct_json_doc doc = {0};
        ct_json_error error;
        ct_status status = parse_exact(text, &doc, &error);
        if (depth <= JSON_TEST_DEPTH)
            CHECK(status == CT_OK, "depth %d refused: %s", depth, error.message);
        else
            CHECK(status == CT_ERR_FORMAT && error.offset == JSON_TEST_DEPTH,
                  "depth %d: status %d offset %zu", depth, status, error.offset);
        ct_json_free(&doc);
    }
}

/* Every prefix of valid JSON is refused, and read within its bounds. */
static void test_json_prefixes(void)
{
    const char *text = "{\"k\\u00e9y\": [1.5e-3, \"\\ud83d\\ude00\xc3\xa9\", {\"n\": null}]}";
    size_t len = strlen(text);
    for (size_t cut = 0; cut < len; cut++) {
        char *prefix = malloc(cut ? cut : 1);
        memcpy(prefix, text, cut);
        ct_json_doc doc = {0};
        ct_json_error error;
        CHECK(ct_json_parse(prefix, cut, JSON_TEST_DEPTH, &doc, &error) == CT_ERR_FORMAT,
              "prefix of %zu bytes parsed", cut);
        CHECK(error.offset <= cut, "offset %zu past %zu", error.offset, cut);
        free(prefix);
    }
}

static void test_json_escape(void)
{
    char raw[64];
    size_t len = 0;
    for (int c = 1; c < 0x20; c++)
        raw[len++] = (char)c;
    const char *rest = "\"\\/ \xc3\xa9\x7f";
    memcpy(raw + len, rest, strlen(rest));
    len += strlen(rest);
    size_t need = ct_json_escape(NULL, 0, raw, len);
    char *literal = malloc(need + 1);
    CHECK(ct_json_escape(literal, need + 1, raw, len) == need, "length changed");
    CHECK(strlen(literal) == need, "literal length %zu, need %zu", strlen(literal), need);
    ct_json_doc doc;
    ct_json_error error;
    CHECK_OK(parse_exact(literal, &doc, &error));
    if (doc.values)
        CHECK(doc.values[0].string_len == len && memcmp(doc.values[0].string, raw, len) == 0,
              "escape round trip changed the string");
    ct_json_free(&doc);
    char small[5];
    CHECK(ct_json_escape(small, sizeof small, "abcdef", 6) == 8, "need for 'abcdef'");
    CHECK(strcmp(small, "\"abc") == 0, "truncated output '%s'", small);
    free(literal);
}

/* ---- safetensors round trips ----------------------------------------------- */

typedef struct sample_tensors {
    float f32[6];
    uint16_t f16[4];
    uint16_t bf16[2];
    int8_t i8[5];
    uint8_t u8[3];
    int32_t i32[4];
    int64_t i64[3];
    float scalar;
    ct_st_tensor tensors[10];
} sample_tensors;

static ct_st_tensor make_tensor(const char *name, ct_dtype dtype, int ndim, const int64_t *shape,
                                const void *data, size_t bytes)
{
    ct_st_tensor t = {.name = name, .dtype = dtype, .ndim = ndim, .data = data, .bytes = bytes};
    for (int i = 0; i < ndim; i++)
        t.shape[i] = shape[i];
    return t;
}

/* Odd-sized I8/U8 tensors come first, so later ones sit unaligned in the file. */
static void make_samples(sample_tensors *s)
{
    harness_fill(s->f32, 6, 1, -2.0f, 2.0f);
    for (int i = 0; i < 4; i++)
        s->f16[i] = (uint16_t)(0x3c00 + 17 * i);
    s->bf16[0] = 0x3f80;
    s->bf16[1] = 0xc0a0;
    for (int i = 0; i < 5; i++)
        s->i8[i] = (int8_t)(-100 + 47 * i);
    for (int i = 0; i < 3; i++)
        s->u8[i] = (uint8_t)(200 + 20 * i);
    for (int i = 0; i < 4; i++)
        s->i32[i] = -70000 + 12345 * i;
    for (int i = 0; i < 3; i++)
        s->i64[i] = (INT64_C(1) << 40) * (i - 1) + 7;
    s->scalar = 2.5f;
    int k = 0;
    s->tensors[k++] = make_tensor("layer.i8", CT_I8, 1, (int64_t[]){5}, s->i8, 5);
    s->tensors[k++] =
        make_tensor("u8 \"quoted\" \xc3\xa9", CT_U8, 3, (int64_t[]){1, 3, 1}, s->u8, 3);
    s->tensors[k++] = make_tensor("f32", CT_F32, 2, (int64_t[]){2, 3}, s->f32, sizeof s->f32);
    s->tensors[k++] = make_tensor("f16", CT_F16, 1, (int64_t[]){4}, s->f16, sizeof s->f16);
    s->tensors[k++] =
        make_tensor("bf16", CT_BF16, 3, (int64_t[]){1, 2, 1}, s->bf16, sizeof s->bf16);
    s->tensors[k++] = make_tensor("i32", CT_I32, 2, (int64_t[]){2, 2}, s->i32, sizeof s->i32);
    s->tensors[k++] = make_tensor("i64", CT_I64, 1, (int64_t[]){3}, s->i64, sizeof s->i64);
    s->tensors[k++] = make_tensor("scalar", CT_F32, 0, NULL, &s->scalar, sizeof s->scalar);
    s->tensors[k++] = make_tensor("empty", CT_F32, 2, (int64_t[]){0, 4}, NULL, 0);
    s->tensors[k++] = make_tensor("six.dims", CT_U8, 6, (int64_t[]){1, 1, 1, 1, 1, 2}, s->u8, 2);
}

static const char *const meta_keys[] = {"format", "escapes \"\\\n\t\x01", "json", "utf8 \xc3\xa9"};
static const char *const meta_values[] = {"pt", "a\\b\"c\nd\te\x1f",
                                          "{\"op\":\"conv2d\",\"stride\":[2,2]}",
                                          "\xf0\x9f\x98\x80"};
#define N_META 4

static void check_same_tensor(const ct_st_tensor *got, const ct_st_tensor *want)
{
    CHECK(got != NULL, "tensor '%s' missing", want->name);
    if (!got)
        return;
    CHECK(strcmp(got->name, want->name) == 0, "name '%s' != '%s'", got->name, want->name);
    CHECK(got->dtype == want->dtype && got->ndim == want->ndim && got->bytes == want->bytes,
          "'%s': dtype/ndim/bytes differ", want->name);
    CHECK(memcmp(got->shape, want->shape, (size_t)want->ndim * sizeof *want->shape) == 0,
          "'%s': shape differs", want->name);
    CHECK(got->data != NULL, "'%s': data NULL", want->name);
    CHECK((uintptr_t)got->data % ct_st_dtype_size(got->dtype) == 0, "'%s': data unaligned",
          want->name);
    if (want->bytes && got->data)
        CHECK(memcmp(got->data, want->data, want->bytes) == 0, "'%s': data differs", want->name);
}

static void test_roundtrip(void)
{
    sample_tensors s;
    make_samples(&s);
    int n = (int)(sizeof s.tensors / sizeof s.tensors[0]);
    char path[256];
    temp_path(path, sizeof path, "roundtrip.safetensors");
    CHECK_OK(ct_st_save(path, n, s.tensors, N_META, meta_keys, meta_values));
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    if (!file)
        return;
    CHECK(ct_st_count(file) == n, "count %d", ct_st_count(file));
    for (int i = 0; i < n; i++) {
        check_same_tensor(ct_st_get(file, i), &s.tensors[i]); /* saved order */
        check_same_tensor(ct_st_find(file, s.tensors[i].name), &s.tensors[i]);
    }
    for (int i = 0; i < N_META; i++) {
        const char *value = ct_st_metadata(file, meta_keys[i]);
        CHECK(value && strcmp(value, meta_values[i]) == 0, "metadata '%s'", meta_keys[i]);
    }
    CHECK(ct_st_find(file, "nope") == NULL && ct_st_find(file, "") == NULL, "find missing");
    CHECK(ct_st_metadata(file, "nope") == NULL, "metadata missing");
    CHECK(ct_st_get(file, -1) == NULL && ct_st_get(file, n) == NULL, "get out of range");
    ct_st_free(file);
    ct_st_free(NULL);
    CHECK(no_temp_files_left(), "a temporary file was left behind");
}

static void test_roundtrip_empty(void)
{
    char path[256];
    temp_path(path, sizeof path, "empty.safetensors");
    CHECK_OK(ct_st_save(path, 0, NULL, 0, NULL, NULL));
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    CHECK(file && ct_st_count(file) == 0 && !ct_st_find(file, "x") && !ct_st_metadata(file, "x"),
          "empty file");
    ct_st_free(file);
    CHECK_OK(ct_st_save(path, 0, NULL, 1, meta_keys, meta_values));
    CHECK_OK(ct_st_load(path, &file));
    CHECK(file && ct_st_count(file) == 0 && ct_st_metadata(file, "format"), "metadata only");
    ct_st_free(file);
}

/* What the reference implementation insists on: the data starts 8-aligned,
 * the header is padded with spaces, and tensors sit back to back. */
static void test_saved_layout(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256];
    temp_path(path, sizeof path, "layout.safetensors");
    CHECK_OK(ct_st_save(path, 3, s.tensors, 0, NULL, NULL));
    size_t len = 0;
    unsigned char *bytes = read_bytes(path, &len);
    CHECK(bytes && len >= 8, "cannot read back %s", path);
    if (!bytes)
        return;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | bytes[i];
    CHECK((8 + header_len) % 8 == 0, "data starts at %llu", (unsigned long long)(8 + header_len));
    CHECK(bytes[8] == '{', "header starts with '%c'", bytes[8]);
    size_t end = 8 + (size_t)header_len;
    while (end > 8 && bytes[end - 1] == ' ')
        end--;
    CHECK(bytes[end - 1] == '}', "header padded with something other than spaces");
    CHECK(len - 8 - header_len == 5 + 3 + sizeof s.f32, "data section of %llu bytes",
          (unsigned long long)(len - 8 - header_len));
    CHECK(memcmp(bytes + 8 + header_len, s.i8, 5) == 0 &&
              memcmp(bytes + 8 + header_len + 8, s.f32, sizeof s.f32) == 0,
          "data not back to back in the given order");
    free(bytes);
}

/* ---- corrupt files ----------------------------------------------------------- */

static void test_refuses_corrupt(void)
{
    static const float data[4] = {1, 2, 3, 4};
    char path[256];
    temp_path(path, sizeof path, "corrupt.safetensors");
    const char *t = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    write_safetensors(path, t, data, sizeof data);
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file)); /* the baseline is valid */
    ct_st_free(file);

    CHECK(write_bytes(path, "", 0), "write");
    expect_refused(path, CT_ERR_FORMAT, "empty");
    CHECK(write_bytes(path, "\x10\0\0", 3), "write");
    expect_refused(path, CT_ERR_FORMAT, "truncated");
    CHECK(write_bytes(path, "\x40\0\0\0\0\0\0\0{}", 10), "write");
    expect_refused(path, CT_ERR_FORMAT, "header length says 64 bytes");
    CHECK(write_bytes(path, "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10), "write");
    expect_refused(path, CT_ERR_FORMAT, "truncated");
    CHECK(write_bytes(path, "\1\0\0\0\0\0\0\0{", 9), "write");
    expect_refused(path, CT_ERR_FORMAT, "too small");
    CHECK(write_bytes(path, "PK\x03\x04\x14\0\0\0\0\0\0\0", 12), "write");
    expect_refused(path, CT_ERR_FORMAT, "zip");

    struct {
        const char *header;
        ct_status status;
        const char *what;
    } cases[] = {
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}", CT_ERR_FORMAT,
         "not valid JSON"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16],}}", CT_ERR_FORMAT,
         "not valid JSON"},
        {"[1, 2]", CT_ERR_FORMAT, "not a JSON object"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4,2],\"data_offsets\":[0,32]}}", CT_ERR_FORMAT,
         "truncated: header says 32 bytes of tensor data"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}", CT_ERR_FORMAT,
         "truncated"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         CT_ERR_FORMAT, "overlap"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT,
         "needs 12 bytes"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[16,0]}}", CT_ERR_FORMAT,
         "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0]}}", CT_ERR_FORMAT,
         "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2,2]}}", CT_ERR_FORMAT, "data_offsets"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT,
         "shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2.0,2],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT,
         "shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", CT_ERR_FORMAT, "shape"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,4],\"data_offsets\":[0,16]}}",
         CT_ERR_UNSUPPORTED, "7 dimensions"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,16]}}", CT_ERR_FORMAT, "too large"},
        {"{\"t\":{\"dtype\":\"Q7\",\"shape\":[4],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT,
         "unknown dtype"},
        {"{\"t\":{\"dtype\":7,\"shape\":[4],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT, "dtype"},
        {"{\"t\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", CT_ERR_UNSUPPORTED,
         "F64"},
        {"{\"t\":{\"dtype\":\"BOOL\",\"shape\":[16],\"data_offsets\":[0,16]}}",
         CT_ERR_UNSUPPORTED, "BOOL"},
        {"{\"t\":[1]}", CT_ERR_FORMAT, "not an object"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         CT_ERR_FORMAT, "twice"},
        {"{\"__metadata__\":{\"a\":1}}", CT_ERR_FORMAT, "must be strings"},
        {"{\"__metadata__\":[\"a\"]}", CT_ERR_FORMAT, "object of strings"},
        {"{\"__metadata__\":{\"a\":\"x\",\"a\":\"y\"}}", CT_ERR_FORMAT, "twice"},
        {"{\"t\\u0000x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
         CT_ERR_FORMAT, "NUL"},
        {"{\"t\":{\"dtype\":\"F32\",\"shape\":[[[[4]]]],\"data_offsets\":[0,16]}}", CT_ERR_FORMAT,
         "nested too deeply"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_safetensors(path, cases[i].header, data, sizeof data);
        expect_refused(path, cases[i].status, cases[i].what);
    }

    temp_path(path, sizeof path, "does-not-exist.safetensors");
    expect_refused(path, CT_ERR_IO, "cannot open");
    expect_refused(temp_dir, CT_ERR_IO, "not a regular file");
    CHECK(ct_st_load(path, NULL) == CT_ERR_ARG, "NULL out");
}

/* Every truncation of a valid file is refused; mangled headers never crash. */
static void test_truncated_and_mangled(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256], broken[256];
    temp_path(path, sizeof path, "valid.safetensors");
    temp_path(broken, sizeof broken, "broken.safetensors");
    CHECK_OK(ct_st_save(path, 10, s.tensors, N_META, meta_keys, meta_values));
    size_t len = 0;
    unsigned char *bytes = read_bytes(path, &len);
    if (!bytes)
        return;
    for (size_t cut = 0; cut < len; cut++) {
        CHECK(write_bytes(broken, bytes, cut), "write");
        ct_st_file *file = NULL;
        ct_status status = ct_st_load(broken, &file);
        CHECK(status != CT_OK && file == NULL && ct_last_error()[0],
              "a file cut to %zu of %zu bytes loaded", cut, len);
        ct_st_free(file);
    }
    static const unsigned char replacements[] = {0, ' ', '"', '{', '}', '[', ']', ',', ':', '9',
                                                 '-', '\\', 0x80, 0xff};
    size_t header_end = 8 + (size_t)bytes[0] + ((size_t)bytes[1] << 8);
    int loaded = 0, refused = 0;
    for (size_t at = 0; at < header_end && at < len; at++) {
        for (size_t r = 0; r < sizeof replacements; r++) {
            unsigned char saved = bytes[at];
            bytes[at] = replacements[r];
            CHECK(write_bytes(broken, bytes, len), "write");
            bytes[at] = saved;
            ct_st_file *file = NULL;
            if (ct_st_load(broken, &file) == CT_OK) {
                loaded++;
                for (int i = 0; i < ct_st_count(file); i++) {
                    const ct_st_tensor *t = ct_st_get(file, i);
                    volatile unsigned char sink = 0;
                    for (size_t b = 0; b < t->bytes; b++) /* ASan: inside the buffer */
                        sink ^= ((const unsigned char *)t->data)[b];
                    (void)sink;
                }
            } else {
                refused++;
                CHECK(file == NULL && ct_last_error()[0], "refused without a message");
            }
            ct_st_free(file);
        }
    }
    CHECK(refused > 0, "no mangled file was refused");
    fprintf(stderr, "  mangled headers: %d loaded, %d refused\n", loaded, refused);
    free(bytes);
}

/* ---- the checksum ------------------------------------------------------------ */

/* XXH64 against the reference (python3-xxhash 3.2.0: xxhash.xxh64(b).hexdigest()),
 * whole and fed in pieces of every split. */
static void test_xxh64_reference(void)
{
    unsigned char ramp[768], text[40];
    for (int i = 0; i < 768; i++)
        ramp[i] = (unsigned char)i;
    memset(text, 'z', 33);
    memcpy(text + 33, "abcdefg", 7);
    static unsigned char x31[31], y32[32];
    memset(x31, 'x', sizeof x31);
    memset(y32, 'y', sizeof y32);
    struct {
        const void *data;
        size_t bytes;
        uint64_t hash;
    } cases[] = {
        {"", 0, 0xef46db3751d8e999ULL},     {"a", 1, 0xd24ec4f1a98c6e5bULL},
        {"abc", 3, 0x44bc2cf5ad770999ULL},  {ramp, 768, 0x8e03c838c596036fULL},
        {x31, 31, 0x60dd0d01083b99f0ULL},   {y32, 32, 0x64da1f1d3495ce66ULL},
        {text, 40, 0x031a8cfd830c16ddULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = ct_xxh64(cases[i].data, cases[i].bytes, 0);
        CHECK(got == cases[i].hash, "xxh64 of %zu bytes: %016llx, want %016llx", cases[i].bytes,
              (unsigned long long)got, (unsigned long long)cases[i].hash);
        for (size_t a = 0; a <= cases[i].bytes && cases[i].bytes <= 40; a++)
            for (size_t b = a; b <= cases[i].bytes; b++) {
                ct_xxh64_state state;
                ct_xxh64_init(&state, 0);
                const unsigned char *p = cases[i].data;
                ct_xxh64_update(&state, p, a);
                ct_xxh64_update(&state, p + a, b - a);
                ct_xxh64_update(&state, p + b, cases[i].bytes - b);
                CHECK(ct_xxh64_digest(&state) == cases[i].hash, "%zu bytes fed as %zu+%zu+%zu",
                      cases[i].bytes, a, b - a, cases[i].bytes - b);
            }
    }
}

/* Saved files carry the data's checksum; a flipped data bit or a bad
 * checksum text is refused; the key is not the caller's to give. */
static void test_checksum(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256], broken[256];
    temp_path(path, sizeof path, "summed.safetensors");
    temp_path(broken, sizeof broken, "summed-broken.safetensors");
    CHECK_OK(ct_st_save(path, 10, s.tensors, N_META, meta_keys, meta_values));
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    const char *sum = file ? ct_st_metadata(file, CT_ST_CHECKSUM_KEY) : NULL;
    CHECK(sum && strncmp(sum, "xxh64:", 6) == 0 && strlen(sum) == 22, "checksum '%s'",
          sum ? sum : "(none)");
    ct_st_free(file);
    size_t len = 0;
    unsigned char *bytes = read_bytes(path, &len);
    if (!bytes)
        return;
    size_t start = 8 + (size_t)bytes[0] + ((size_t)bytes[1] << 8);
    for (size_t at = start; at < len; at++) {
        bytes[at] ^= 0x10;
        CHECK(write_bytes(broken, bytes, len), "write");
        bytes[at] ^= 0x10;
        expect_refused(broken, CT_ERR_FORMAT, "does not match its checksum");
    }
    /* the checksum text itself: a digit changed, or not hex */
    char *digits = NULL;
    for (size_t at = 8; at + 7 < start && !digits; at++)
        if (memcmp(bytes + at, "\"xxh64:", 7) == 0)
            digits = (char *)bytes + at;
    CHECK(digits != NULL, "no checksum text in the header");
    if (digits) {
        digits[7] = digits[7] == '0' ? '1' : '0';
        CHECK(write_bytes(broken, bytes, len), "write");
        expect_refused(broken, CT_ERR_FORMAT, "does not match its checksum");
        digits[7] = 'g';
        CHECK(write_bytes(broken, bytes, len), "write");
        expect_refused(broken, CT_ERR_FORMAT, "16 hex digits");
        memcpy(digits + 1, "crc32", 5);
        CHECK(write_bytes(broken, bytes, len), "write");
        expect_refused(broken, CT_ERR_FORMAT, "newer cuttle");
    }
    free(bytes);
    const char *keys[1] = {CT_ST_CHECKSUM_KEY}, *values[1] = {"xxh64:0000000000000000"};
    CHECK(ct_st_save(path, 1, s.tensors, 1, keys, values) == CT_ERR_ARG, "reserved key taken");
    CHECK(strstr(ct_last_error(), "reserved"), "message: %s", ct_last_error());
}

/* ---- saving ------------------------------------------------------------------ */

/* The file at path still holds exactly the sample tensors. */
static void check_still_samples(const char *path, const sample_tensors *s)
{
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    CHECK(file && ct_st_count(file) == 10, "old file changed");
    for (int i = 0; file && i < 10; i++)
        check_same_tensor(ct_st_find(file, s->tensors[i].name), &s->tensors[i]);
    ct_st_free(file);
}

static void test_save_refuses_bad_arguments(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256];
    temp_path(path, sizeof path, "args.safetensors");
    CHECK_OK(ct_st_save(path, 10, s.tensors, 0, NULL, NULL));
    ct_st_tensor bad[2] = {s.tensors[2], s.tensors[3]};
    bad[1].name = bad[0].name;
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "duplicate names");
    CHECK(strstr(ct_last_error(), "twice"), "message: %s", ct_last_error());
    bad[1] = s.tensors[3];
    bad[1].bytes += 2;
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "bytes mismatch");
    bad[1] = s.tensors[3];
    bad[1].data = NULL;
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "NULL data");
    bad[1] = s.tensors[3];
    bad[1].name = "__metadata__";
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "reserved name");
    bad[1].name = "bad \xff utf8";
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "invalid UTF-8 name");
    bad[1] = s.tensors[3];
    bad[1].dtype = CT_DTYPE_COUNT;
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "bad dtype");
    bad[1] = s.tensors[3];
    bad[1].ndim = CT_MAX_DIMS + 1;
    CHECK(ct_st_save(path, 2, bad, 0, NULL, NULL) == CT_ERR_ARG, "too many dims");
    const char *keys[2] = {"k", "k"}, *values[2] = {"a", "b"};
    CHECK(ct_st_save(path, 1, s.tensors, 2, keys, values) == CT_ERR_ARG, "duplicate meta keys");
    CHECK(ct_st_save(NULL, 1, s.tensors, 0, NULL, NULL) == CT_ERR_ARG, "NULL path");
    check_still_samples(path, &s);
    CHECK(no_temp_files_left(), "a temporary file was left behind");
}

static void test_save_onto_directory(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256], inside[300];
    temp_path(path, sizeof path, "a-directory");
    CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
    snprintf(inside, sizeof inside, "%s/keep.safetensors", path);
    CHECK_OK(ct_st_save(inside, 10, s.tensors, 0, NULL, NULL));
    ct_status status = ct_st_save(path, 10, s.tensors, 0, NULL, NULL);
    CHECK(status == CT_ERR_IO, "saving onto a directory: %s", ct_status_name(status));
    CHECK(strstr(ct_last_error(), "directory"), "message: %s", ct_last_error());
    struct stat info;
    CHECK(stat(path, &info) == 0 && S_ISDIR(info.st_mode), "the directory is gone");
    check_still_samples(inside, &s);
    CHECK(no_temp_files_left(), "a temporary file was left behind");
    remove(inside);
    rmdir(path);
}

static void test_save_failure_keeps_old_file(void)
{
    sample_tensors s;
    make_samples(&s);
    char path[256], blocker[300];
    temp_path(path, sizeof path, "keep.safetensors");
    CHECK_OK(ct_st_save(path, 10, s.tensors, 0, NULL, NULL));

    /* The temporary file cannot be created: a directory sits in its place
     * (this works as root too, where permissions do not stop writes). */
    snprintf(blocker, sizeof blocker, "%s.tmp.%ld", path, (long)getpid());
    CHECK(mkdir(blocker, 0755) == 0, "mkdir %s", blocker);
    CHECK(ct_st_save(path, 2, s.tensors, 0, NULL, NULL) == CT_ERR_IO, "save went through");
    CHECK(strstr(ct_last_error(), "temporary"), "message: %s", ct_last_error());
    check_still_samples(path, &s);
    rmdir(blocker);

    /* A directory without write permission (not enforced for root). */
    CHECK(chmod(temp_dir, 0555) == 0, "chmod");
    if (access(temp_dir, W_OK) == 0) {
        fprintf(stderr, "  (running as root: the read-only directory case is not testable)\n");
    } else {
        CHECK(ct_st_save(path, 2, s.tensors, 0, NULL, NULL) == CT_ERR_IO, "save went through");
        CHECK(strstr(ct_last_error(), "writable"), "message: %s", ct_last_error());
    }
    chmod(temp_dir, 0700);
    check_still_samples(path, &s);
    CHECK(no_temp_files_left(), "a temporary file was left behind");

    /* And a successful save does replace it. */
    CHECK_OK(ct_st_save(path, 2, s.tensors, 0, NULL, NULL));
    ct_st_file *file = NULL;
    CHECK_OK(ct_st_load(path, &file));
    CHECK(file && ct_st_count(file) == 2, "new file not in place");
    ct_st_free(file);
}

/* ---- fixtures written by tests/gen_fixtures.py --------------------------------- */

static void test_fixtures_load(void)
{
    static const char *const names[] = {"ops.safetensors", "simplecnn.safetensors",
                                        "resblock.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", fixture_dir, names[i]);
        ct_st_file *file = NULL;
        CHECK_OK(ct_st_load(path, &file));
        if (!file)
            continue;
        CHECK(ct_st_count(file) > 0, "%s: no tensors", path);
        CHECK(ct_st_metadata(file, "generator") != NULL, "%s: no generator metadata", path);
        for (int k = 0; k < ct_st_count(file); k++) {
            const ct_st_tensor *t = ct_st_get(file, k);
            CHECK(t->dtype == CT_F32 || t->dtype == CT_I64, "%s: '%s' dtype", path, t->name);
            const float *values = t->data;
            for (size_t e = 0; t->dtype == CT_F32 && e < t->bytes / sizeof(float); e++)
                if (!isfinite(values[e])) {
                    CHECK(false, "%s: '%s'[%zu] is not finite", path, t->name, e);
                    break;
                }
        }
        ct_st_free(file);
    }
}

static void remove_temp_dir(void)
{
    DIR *dir = opendir(temp_dir);
    for (struct dirent *entry; dir && (entry = readdir(dir));) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", temp_dir, entry->d_name);
        if (entry->d_name[0] != '.')
            remove(path);
    }
    if (dir)
        closedir(dir);
    rmdir(temp_dir);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        fixture_dir = argv[1];
    snprintf(temp_dir, sizeof temp_dir, "/tmp/ct_test_safetensors.XXXXXX");
    if (!mkdtemp(temp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_json_values);
    RUN(test_json_integers);
    RUN(test_json_rejects);
    RUN(test_json_depth_limit);
    RUN(test_json_prefixes);
    RUN(test_json_escape);
    RUN(test_roundtrip);
    RUN(test_roundtrip_empty);
    RUN(test_saved_layout);
    RUN(test_refuses_corrupt);
    RUN(test_truncated_and_mangled);
    RUN(test_xxh64_reference);
    RUN(test_checksum);
    RUN(test_save_refuses_bad_arguments);
    RUN(test_save_onto_directory);
    RUN(test_save_failure_keeps_old_file);
    RUN(test_fixtures_load);
    remove_temp_dir();
    return harness_finish();
}
