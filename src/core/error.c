#include "core/error.h"

#include <stdarg.h>
#include <string.h>

#define CT_ERROR_CAPACITY 1024

static _Thread_local char last_error[CT_ERROR_CAPACITY];

/* Formats into a local buffer first: an argument may be ct_last_error() itself
 * (a caller adding its context to the message of a call it made), and
 * vsnprintf into the buffer it reads from is undefined behaviour. */
ct_status ct_set_error(ct_status status, const char *fmt, ...)
{
    char message[CT_ERROR_CAPACITY];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    memcpy(last_error, message, sizeof last_error);
    return status;
}

const char *ct_last_error(void)
{
    return last_error;
}

const char *ct_status_name(ct_status status)
{
    switch (status) {
    case CT_OK: return "CT_OK";
    case CT_ERR_ARG: return "CT_ERR_ARG";
    case CT_ERR_SHAPE: return "CT_ERR_SHAPE";
    case CT_ERR_DTYPE: return "CT_ERR_DTYPE";
    case CT_ERR_MEMORY: return "CT_ERR_MEMORY";
    case CT_ERR_IO: return "CT_ERR_IO";
    case CT_ERR_FORMAT: return "CT_ERR_FORMAT";
    case CT_ERR_UNSUPPORTED: return "CT_ERR_UNSUPPORTED";
    case CT_ERR_DEVICE: return "CT_ERR_DEVICE";
    case CT_ERR_STATE: return "CT_ERR_STATE";
    case CT_ERR_INTERNAL: return "CT_ERR_INTERNAL";
    case CT_ERR_NUMERIC: return "CT_ERR_NUMERIC";
    }
    return "CT_ERR_UNKNOWN";
}

const char *ct_version(void)
{
    return CT_VERSION_STRING;
}
