/*
 * Errors as values.  Library code returns ct_status and records the message
 * in a thread-local buffer with ct_set_error; CT_ASSERT guards invariants
 * that only a bug in cuttle can break (always on, also in release builds).
 */
#ifndef CT_CORE_ERROR_H
#define CT_CORE_ERROR_H

#include <stdio.h>
#include <stdlib.h>

#include "cuttle.h"

/* Record a message for ct_last_error() and return `status`.  An argument may
 * be ct_last_error() itself: ct_set_error(status, "context: %s",
 * ct_last_error()) puts context in front of the message of a failed call. */
ct_status ct_set_error(ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define CT_ASSERT(cond)                                                                   \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "cuttle: internal error at %s:%d: %s\n", __FILE__, __LINE__, \
                    #cond);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* Propagate a failing status. */
#define CT_TRY(call)                       \
    do {                                   \
        ct_status ct_try_status_ = (call); \
        if (ct_try_status_ != CT_OK)       \
            return ct_try_status_;         \
    } while (0)

#endif
