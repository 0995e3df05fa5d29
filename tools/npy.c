/*
 * Reading .npy files (npy.h).  The header is a Python dict literal; only
 * the three keys numpy writes are read, and anything else in it is refused
 * rather than guessed at.
 */
#include "npy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_BYTES 6
#define NPY_MAX_HEADER 65536
#define NPY_MAX_ELEMENTS ((int64_t)1 << 32)

static int bad(const char *command, const char *path, const char *why)
{
    fprintf(stderr, "cuttle %s: %s: %s\n", command, path, why);
    return CLI_EXIT_USAGE;
}

static unsigned read_le(const unsigned char *bytes, int n)
{
    unsigned value = 0;
    for (int i = 0; i < n; i++)
        value |= (unsigned)bytes[i] << (8 * i);
    return value;
}

/* The shape tuple after 'shape': in the header, "(2, 1, 28, 28)". */
static bool parse_shape(const char *header, npy_array *a)
{
    const char *at = strstr(header, "'shape':");
    if (!at || !(at = strchr(at, '(')))
        return false;
    at++;
    a->ndim = 0;
    a->numel = 1;
    for (;;) {
        while (*at == ' ')
            at++;
        if (*at == ')')
            return a->ndim > 0;
        char *end = NULL;
        errno = 0;
        long long dim = strtoll(at, &end, 10);
        if (end == at || errno || dim < 0 || a->ndim == NPY_MAX_DIMS ||
            (dim && a->numel > NPY_MAX_ELEMENTS / dim))
            return false;
        a->shape[a->ndim++] = dim;
        a->numel *= dim;
        at = end;
        while (*at == ' ')
            at++;
        if (*at == ',')
            at++;
        else if (*at != ')')
            return false;
    }
}

static int read_header(const char *command, const char *path, FILE *file, npy_array *a)
{
    unsigned char start[NPY_MAGIC_BYTES + 2 + 4];
    if (fread(start, 1, NPY_MAGIC_BYTES + 2, file) != NPY_MAGIC_BYTES + 2 ||
        memcmp(start, NPY_MAGIC, NPY_MAGIC_BYTES) != 0)
        return bad(command, path, "not a .npy file (no \\x93NUMPY magic)");
    int major = start[NPY_MAGIC_BYTES], length_bytes = major == 1 ? 2 : 4;
    if (major < 1 || major > 3 ||
        fread(start + NPY_MAGIC_BYTES + 2, 1, (size_t)length_bytes, file) != (size_t)length_bytes)
        return bad(command, path, "an unknown .npy version or a cut-off header");
    unsigned length = read_le(start + NPY_MAGIC_BYTES + 2, length_bytes);
    if (length > NPY_MAX_HEADER)
        return bad(command, path, "a .npy header over 64 KiB");
    char *header = calloc(length + 1, 1);
    if (!header || fread(header, 1, length, file) != length) {
        free(header);
        return bad(command, path, header ? "a cut-off .npy header" : "out of memory");
    }
    bool f32 = strstr(header, "'descr': '<f4'") != NULL;
    bool c_order = strstr(header, "'fortran_order': False") != NULL;
    bool shaped = parse_shape(header, a);
    free(header);
    if (!f32 || !c_order)
        return bad(command, path, "the array is not float32 in C order (numpy.save of "
                   "x.astype(numpy.float32), not Fortran-ordered)");
    return shaped ? CLI_EXIT_OK : bad(command, path, "an unreadable shape in the .npy header");
}

int npy_read_f32(const char *command, const char *path, npy_array *out)
{
    memset(out, 0, sizeof *out);
    FILE *file = fopen(path, "rb");
    if (!file) {
        fprintf(stderr, "cuttle %s: %s: cannot open: %s\n", command, path, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    int exit_status = read_header(command, path, file, out);
    if (exit_status == CLI_EXIT_OK &&
        !(out->data = malloc(sizeof *out->data * (size_t)(out->numel ? out->numel : 1))))
        exit_status = bad(command, path, "out of memory for the array");
    if (exit_status == CLI_EXIT_OK &&
        fread(out->data, sizeof *out->data, (size_t)out->numel, file) != (size_t)out->numel)
        exit_status = bad(command, path, "the array is shorter than its shape says");
    fclose(file);
    if (exit_status != CLI_EXIT_OK) {
        free(out->data);
        out->data = NULL;
    }
    return exit_status;
}
