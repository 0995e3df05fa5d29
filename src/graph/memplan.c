#include "graph/memplan.h"

#include <stdbool.h>
#include <stdlib.h>

typedef struct placed {
    size_t begin, end;
} placed;

static _Thread_local const ct_lifetime *sort_items; /* qsort has no context argument in C11 */

static int by_size_descending(const void *a, const void *b)
{
    int ia = *(const int *)a, ib = *(const int *)b;
    size_t sa = sort_items[ia].bytes, sb = sort_items[ib].bytes;
    if (sa != sb)
        return sa > sb ? -1 : 1;
    return ia - ib;
}

static int by_begin(const void *a, const void *b)
{
    const placed *pa = a, *pb = b;
    return pa->begin < pb->begin ? -1 : pa->begin > pb->begin;
}

static size_t align_up(size_t value)
{
    return (value + CT_ARENA_ALIGNMENT - 1) / CT_ARENA_ALIGNMENT * CT_ARENA_ALIGNMENT;
}

static bool overlaps_in_time(const ct_lifetime *a, const ct_lifetime *b)
{
    return a->first <= b->last && b->first <= a->last;
}

/* The lowest offset with `bytes` free among the sorted busy ranges. */
static size_t first_fit(placed *busy, int n_busy, size_t bytes)
{
    qsort(busy, (size_t)n_busy, sizeof *busy, by_begin);
    size_t candidate = 0;
    for (int i = 0; i < n_busy; i++) {
        if (busy[i].begin >= candidate + bytes)
            break;
        if (busy[i].end > candidate)
            candidate = align_up(busy[i].end);
    }
    return candidate;
}

/* The items' indices, largest first (ties by index), or NULL when out of
 * memory. */
static int *by_size(const ct_lifetime *items, int n)
{
    int *order = malloc(sizeof *order * (size_t)(n > 0 ? n : 1));
    if (!order)
        return NULL;
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_items = items;
    qsort(order, (size_t)n, sizeof *order, by_size_descending);
    return order;
}

size_t ct_memplan_layout(const ct_lifetime *items, int n, size_t *offsets)
{
    int *order = by_size(items, n);
    placed *busy = malloc(sizeof *busy * (size_t)(n > 0 ? n : 1));
    if (!order || !busy) {
        free(order);
        free(busy);
        return (size_t)-1;
    }
    size_t peak = 0;
    for (int k = 0; k < n; k++) {
        int item = order[k];
        int n_busy = 0;
        for (int j = 0; j < k; j++) {
            int other = order[j];
            if (overlaps_in_time(&items[item], &items[other])) {
                busy[n_busy].begin = offsets[other];
                busy[n_busy].end = offsets[other] + items[other].bytes;
                n_busy++;
            }
        }
        offsets[item] = first_fit(busy, n_busy, items[item].bytes);
        size_t end = align_up(offsets[item] + items[item].bytes);
        if (end > peak)
            peak = end;
    }
    free(order);
    free(busy);
    return peak;
}

size_t ct_memplan_apart(const ct_lifetime *items, int n, size_t *offsets)
{
    int *order = by_size(items, n);
    if (!order)
        return (size_t)-1;
    size_t end = 0;
    for (int k = 0; k < n; k++) {
        offsets[order[k]] = end;
        end = align_up(end + items[order[k]].bytes);
    }
    free(order);
    return end;
}
