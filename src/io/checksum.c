/*
 * XXH64 (checksum.h), after the xxHash spec: four lanes eat 32-byte
 * stripes (lane += word * P2, rotate 31, * P1), then the lanes merge, the
 * tail's 8-, 4- and 1-byte pieces mix in, and an avalanche finishes.
 * Words are read little-endian, so the hash is the same on every machine.
 */
#include "io/checksum.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t lane_round(uint64_t lane, uint64_t word)
{
    lane += word * P2;
    return rotl64(lane, 31) * P1;
}

static inline uint64_t merge_round(uint64_t h, uint64_t lane)
{
    h ^= lane_round(0, lane);
    return h * P1 + P4;
}

/* Whole stripes of p into the lanes; returns the bytes eaten. */
static size_t eat_stripes(uint64_t lanes[4], const unsigned char *p, size_t bytes)
{
    uint64_t v1 = lanes[0], v2 = lanes[1], v3 = lanes[2], v4 = lanes[3];
    size_t done = 0;
    for (; bytes - done >= CT_XXH64_STRIPE_BYTES; done += CT_XXH64_STRIPE_BYTES) {
        v1 = lane_round(v1, read64(p + done));
        v2 = lane_round(v2, read64(p + done + 8));
        v3 = lane_round(v3, read64(p + done + 16));
        v4 = lane_round(v4, read64(p + done + 24));
    }
    lanes[0] = v1, lanes[1] = v2, lanes[2] = v3, lanes[3] = v4;
    return done;
}

void ct_xxh64_init(ct_xxh64_state *state, uint64_t seed)
{
    memset(state, 0, sizeof *state);
    state->lanes[0] = seed + P1 + P2;
    state->lanes[1] = seed + P2;
    state->lanes[2] = seed;
    state->lanes[3] = seed - P1;
}

void ct_xxh64_update(ct_xxh64_state *state, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    if (bytes == 0)
        return; /* data may be NULL */
    state->total += bytes;
    if (state->n_pending > 0) {
        size_t take = CT_XXH64_STRIPE_BYTES - state->n_pending;
        take = take < bytes ? take : bytes;
        memcpy(state->pending + state->n_pending, p, take);
        state->n_pending += take;
        p += take;
        bytes -= take;
        if (state->n_pending < CT_XXH64_STRIPE_BYTES)
            return;
        eat_stripes(state->lanes, state->pending, CT_XXH64_STRIPE_BYTES);
        state->n_pending = 0;
    }
    size_t eaten = eat_stripes(state->lanes, p, bytes);
    memcpy(state->pending, p + eaten, bytes - eaten);
    state->n_pending = bytes - eaten;
}

uint64_t ct_xxh64_digest(const ct_xxh64_state *state)
{
    const uint64_t *v = state->lanes;
    uint64_t h;
    if (state->total >= CT_XXH64_STRIPE_BYTES) {
        h = rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18);
        for (int i = 0; i < 4; i++)
            h = merge_round(h, v[i]);
    } else {
        h = v[2] + P5; /* lanes[2] is the seed */
    }
    h += state->total;
    const unsigned char *p = state->pending;
    size_t left = state->n_pending;
    for (; left >= 8; p += 8, left -= 8)
        h = rotl64(h ^ lane_round(0, read64(p)), 27) * P1 + P4;
    if (left >= 4) {
        h = rotl64(h ^ (uint64_t)read32(p) * P1, 23) * P2 + P3;
        p += 4;
        left -= 4;
    }
    for (; left > 0; p++, left--)
        h = rotl64(h ^ *p * P5, 11) * P1;
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t ct_xxh64(const void *data, size_t bytes, uint64_t seed)
{
    ct_xxh64_state state;
    ct_xxh64_init(&state, seed);
    ct_xxh64_update(&state, data, bytes);
    return ct_xxh64_digest(&state);
}
