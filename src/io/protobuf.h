/*
 * The protobuf wire format, both ways: just enough for ONNX files
 * (docs/onnx.md says why cuttle has its own codec instead of protobuf-c).
 *
 * A message is a sequence of fields, each a key varint (field number << 3 |
 * wire type) and a value: a varint, 8 or 4 little-endian bytes, or a
 * length-delimited run of bytes (strings, bytes, nested messages and packed
 * repeated scalars).  Groups (wire types 3 and 4) have been deprecated since
 * proto2 and are refused.
 *
 * The reader never recurses: a caller decodes a nested message by starting a
 * new reader on the field's bytes, so the depth is the caller's schema, not
 * the file's.  Every length is checked against the bytes that remain before
 * anything is read.
 */
#ifndef CT_IO_PROTOBUF_H
#define CT_IO_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pb_wire {
    PB_VARINT = 0,
    PB_FIXED64 = 1,
    PB_BYTES = 2,
    PB_FIXED32 = 5
} pb_wire;

typedef struct pb_reader {
    const uint8_t *at, *end;
} pb_reader;

typedef struct pb_field {
    uint32_t number;
    pb_wire wire;
    uint64_t value;       /* VARINT: the value; FIXED32/FIXED64: the bits */
    const uint8_t *bytes; /* BYTES: the payload (borrowed from the reader's buffer) */
    size_t length;
} pb_field;

static inline pb_reader pb_reader_of(const uint8_t *data, size_t length)
{
    return (pb_reader){data, data + length};
}

/* The next field of the message into *field: 1, or 0 at the end of the
 * message, or -1 when the bytes are not a valid field (a varint over 10
 * bytes, a length past the end, a group or an unknown wire type); *why then
 * says which. */
int pb_next(pb_reader *r, pb_field *field, const char **why);

/* A packed run of varints (a repeated int64 field's BYTES payload): the
 * count, or -1 when it is malformed. */
int64_t pb_count_varints(const uint8_t *data, size_t length);
/* Decode them, in order, into out (room for pb_count_varints values). */
void pb_read_varints(const uint8_t *data, size_t length, int64_t *out);

static inline float pb_float_of(uint64_t bits)
{
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)bits};
    return v.f;
}

/* ---- writing ---------------------------------------------------------------- */

/* A growing buffer.  A failed allocation sets `failed` and turns every later
 * write into nothing, so a writer checks once at the end. */
typedef struct pb_writer {
    uint8_t *data;
    size_t length, capacity;
    bool failed;
} pb_writer;

void pb_put_varint(pb_writer *w, uint32_t number, uint64_t value);
void pb_put_float(pb_writer *w, uint32_t number, float value);
void pb_put_bytes(pb_writer *w, uint32_t number, const void *data, size_t length);
void pb_put_string(pb_writer *w, uint32_t number, const char *text);
/* A packed repeated int64 field. */
void pb_put_packed_varints(pb_writer *w, uint32_t number, const int64_t *values, int count);

/* A nested message: pb_begin returns a mark, the fields follow, pb_end
 * writes the length in front of them. */
size_t pb_begin(pb_writer *w, uint32_t number);
void pb_end(pb_writer *w, size_t mark);

void pb_writer_free(pb_writer *w);

#endif
