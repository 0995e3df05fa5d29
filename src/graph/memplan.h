/*
 * Static memory planning: place tensors with known lifetimes in one arena
 * so that tensors alive at the same time never overlap.
 */
#ifndef CT_GRAPH_MEMPLAN_H
#define CT_GRAPH_MEMPLAN_H

#include <stddef.h>

/* A tensor alive from schedule position `first` to `last`, inclusive. */
typedef struct ct_lifetime {
    int first, last;
    size_t bytes;
} ct_lifetime;

#define CT_ARENA_ALIGNMENT 64

/* Writes offsets[i] for every item (aligned to CT_ARENA_ALIGNMENT) and
 * returns the arena size: the planned peak.  Greedy: largest first, each at
 * the lowest offset free during its whole lifetime.  Deterministic.
 * Returns (size_t)-1 when host memory for the bookkeeping runs out. */
size_t ct_memplan_layout(const ct_lifetime *items, int n, size_t *offsets);
/* Every item its own bytes (no reuse), in the order above; the sum. */
size_t ct_memplan_apart(const ct_lifetime *items, int n, size_t *offsets);

#endif
