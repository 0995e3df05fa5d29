/*
 * Shapes as text, for messages (core/shapes.h).
 */
#include "core/shapes.h"

#include <stdio.h>

void ct_shape_text(int ndim, const int64_t *shape, char *buf, size_t capacity)
{
    size_t len = (size_t)snprintf(buf, capacity, "[");
    for (int d = 0; d < ndim && len < capacity; d++)
        len += (size_t)snprintf(buf + len, capacity - len, "%s%lld", d ? "," : "",
                                (long long)shape[d]);
    if (len < capacity)
        snprintf(buf + len, capacity - len, "]");
}
