/*
 * The protobuf wire format (protobuf.h).
 */
#include "io/protobuf.h"

#include <stdlib.h>
#include <string.h>

#define PB_MAX_VARINT_BYTES 10
/* pb_begin reserves room for a length of up to 2^35 - 1; pb_end moves the
 * message back when its length takes fewer bytes. */
#define PB_LENGTH_RESERVE 5

/* One varint at *at (before end): its value, or false when it runs past the
 * end or over 10 bytes. */
static bool read_varint(const uint8_t **at, const uint8_t *end, uint64_t *value)
{
    uint64_t result = 0;
    for (int i = 0; i < PB_MAX_VARINT_BYTES && *at < end; i++) {
        uint8_t byte = *(*at)++;
        result |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) {
            *value = result;
            return true;
        }
    }
    return false;
}

static uint64_t read_little_endian(const uint8_t *at, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++)
        value |= (uint64_t)at[i] << (8 * i);
    return value;
}

int pb_next(pb_reader *r, pb_field *field, const char **why)
{
    if (r->at >= r->end)
        return 0;
    uint64_t key = 0;
    if (!read_varint(&r->at, r->end, &key)) {
        *why = "a field key runs past the end of its message";
        return -1;
    }
    if ((key >> 3) == 0 || (key >> 3) > UINT32_MAX) {
        *why = "a field number is 0 or too large";
        return -1;
    }
    field->number = (uint32_t)(key >> 3);
    field->wire = (pb_wire)(key & 7);
    field->bytes = NULL;
    field->length = 0;
    size_t left = (size_t)(r->end - r->at);
    switch (key & 7) {
    case PB_VARINT:
        if (!read_varint(&r->at, r->end, &field->value)) {
            *why = "a varint runs past the end of its message or over 10 bytes";
            return -1;
        }
        return 1;
    case PB_FIXED64:
    case PB_FIXED32: {
        int bytes = (key & 7) == PB_FIXED64 ? 8 : 4;
        if (left < (size_t)bytes) {
            *why = "a fixed-size value runs past the end of its message";
            return -1;
        }
        field->value = read_little_endian(r->at, bytes);
        r->at += bytes;
        return 1;
    }
    case PB_BYTES: {
        uint64_t length = 0;
        if (!read_varint(&r->at, r->end, &length) || length > (uint64_t)(r->end - r->at)) {
            *why = "a length-delimited field claims more bytes than its message has left";
            return -1;
        }
        field->bytes = r->at;
        field->length = (size_t)length;
        r->at += length;
        return 1;
    }
    default:
        *why = "a group or an unknown wire type (not protobuf, or not proto3)";
        return -1;
    }
}

int64_t pb_count_varints(const uint8_t *data, size_t length)
{
    const uint8_t *at = data, *end = data + length;
    int64_t count = 0;
    uint64_t value;
    while (at < end) {
        if (!read_varint(&at, end, &value))
            return -1;
        count++;
    }
    return count;
}

void pb_read_varints(const uint8_t *data, size_t length, int64_t *out)
{
    const uint8_t *at = data, *end = data + length;
    uint64_t value = 0;
    for (int64_t i = 0; at < end && read_varint(&at, end, &value); i++)
        out[i] = (int64_t)value;
}

/* ---- writing ---------------------------------------------------------------- */

static bool reserve(pb_writer *w, size_t extra)
{
    if (w->failed)
        return false;
    if (w->length + extra <= w->capacity)
        return true;
    size_t capacity = w->capacity ? w->capacity : 4096;
    while (capacity < w->length + extra)
        capacity *= 2;
    uint8_t *data = realloc(w->data, capacity);
    if (!data) {
        w->failed = true;
        return false;
    }
    w->data = data;
    w->capacity = capacity;
    return true;
}

static int encode_varint(uint64_t value, uint8_t *out)
{
    int n = 0;
    do {
        out[n++] = (uint8_t)((value & 0x7f) | (value > 0x7f ? 0x80 : 0));
        value >>= 7;
    } while (value);
    return n;
}

static void put_raw_varint(pb_writer *w, uint64_t value)
{
    if (!reserve(w, PB_MAX_VARINT_BYTES))
        return;
    w->length += (size_t)encode_varint(value, w->data + w->length);
}

static void put_raw(pb_writer *w, const void *data, size_t length)
{
    if (length == 0 || !reserve(w, length))
        return;
    memcpy(w->data + w->length, data, length);
    w->length += length;
}

static void put_key(pb_writer *w, uint32_t number, pb_wire wire)
{
    put_raw_varint(w, (uint64_t)number << 3 | wire);
}

void pb_put_varint(pb_writer *w, uint32_t number, uint64_t value)
{
    put_key(w, number, PB_VARINT);
    put_raw_varint(w, value);
}

void pb_put_float(pb_writer *w, uint32_t number, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    uint8_t bytes[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                        (uint8_t)(bits >> 24)};
    put_key(w, number, PB_FIXED32);
    put_raw(w, bytes, sizeof bytes);
}

void pb_put_bytes(pb_writer *w, uint32_t number, const void *data, size_t length)
{
    put_key(w, number, PB_BYTES);
    put_raw_varint(w, length);
    put_raw(w, data, length);
}

void pb_put_string(pb_writer *w, uint32_t number, const char *text)
{
    pb_put_bytes(w, number, text, strlen(text));
}

void pb_put_packed_varints(pb_writer *w, uint32_t number, const int64_t *values, int count)
{
    size_t mark = pb_begin(w, number);
    for (int i = 0; i < count; i++)
        put_raw_varint(w, (uint64_t)values[i]);
    pb_end(w, mark);
}

size_t pb_begin(pb_writer *w, uint32_t number)
{
    put_key(w, number, PB_BYTES);
    size_t mark = w->length;
    if (reserve(w, PB_LENGTH_RESERVE))
        w->length += PB_LENGTH_RESERVE;
    return mark;
}

void pb_end(pb_writer *w, size_t mark)
{
    if (w->failed)
        return;
    size_t body = mark + PB_LENGTH_RESERVE, length = w->length - body;
    if (length >> (7 * PB_LENGTH_RESERVE)) { /* over 32 GiB: no ONNX file is */
        w->failed = true;
        return;
    }
    uint8_t prefix[PB_MAX_VARINT_BYTES];
    int n = encode_varint(length, prefix);
    memcpy(w->data + mark, prefix, (size_t)n);
    memmove(w->data + mark + n, w->data + body, length);
    w->length = mark + (size_t)n + length;
}

void pb_writer_free(pb_writer *w)
{
    free(w->data);
    *w = (pb_writer){0};
}
