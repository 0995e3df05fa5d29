/*
 * XXH64 (https://github.com/Cyan4973/xxHash, the 64-bit hash of its
 * spec): the checksum cuttle writes into a safetensors file's metadata over
 * the data section, so that a bit flipped on a disk or in a copy is found
 * when the file is loaded.  Not cryptographic: it finds accidents, not
 * tampering.  Portable C, about 10 GB/s a core here (docs/reliability.md).
 */
#ifndef CT_IO_CHECKSUM_H
#define CT_IO_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#define CT_XXH64_STRIPE_BYTES 32

/* A hash over bytes that come in pieces: init, update per piece, digest. */
typedef struct ct_xxh64_state {
    uint64_t lanes[4];
    uint64_t total;                              /* bytes so far */
    unsigned char pending[CT_XXH64_STRIPE_BYTES]; /* the start of an unfinished stripe */
    size_t n_pending;
} ct_xxh64_state;

void ct_xxh64_init(ct_xxh64_state *state, uint64_t seed);
void ct_xxh64_update(ct_xxh64_state *state, const void *data, size_t bytes);
uint64_t ct_xxh64_digest(const ct_xxh64_state *state);

/* The hash of one buffer. */
uint64_t ct_xxh64(const void *data, size_t bytes, uint64_t seed);

#endif
