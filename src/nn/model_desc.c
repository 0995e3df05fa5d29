/*
 * Model descriptions: the layer table and the arena that owns a ct_mtext.
 */
#include <stdlib.h>
#include <string.h>

#include "nn/model_desc.h"

#define CT_MARENA_CHUNK 16384

/* name, has parameters, n args, args in positional order, n required, may be a pair */
static const ct_mlayer_info layer_table[CT_ML_COUNT] = {
    [CT_ML_CONV] = {"conv", true, 7,
                    {"out", "kernel", "stride", "pad", "dilation", "groups", "bias"}, 2,
                    {false, true, true, true, true, false, false}},
    [CT_ML_LINEAR] = {"linear", true, 2, {"out", "bias"}, 1, {false}},
    [CT_ML_BN] = {"bn", true, 0, {NULL}, 0, {false}},
    [CT_ML_RELU] = {"relu", false, 0, {NULL}, 0, {false}},
    [CT_ML_SIGMOID] = {"sigmoid", false, 0, {NULL}, 0, {false}},
    [CT_ML_TANH] = {"tanh", false, 0, {NULL}, 0, {false}},
    [CT_ML_MAXPOOL] = {"maxpool", false, 3, {"kernel", "stride", "pad"}, 1, {true, true, true}},
    [CT_ML_AVGPOOL] = {"avgpool", false, 4, {"kernel", "stride", "pad", "count_include_pad"}, 1,
                       {true, true, true, false}},
    [CT_ML_GLOBAL_AVGPOOL] = {"global_avgpool", false, 0, {NULL}, 0, {false}},
    [CT_ML_DROPOUT] = {"dropout", false, 1, {"p"}, 0, {false}},
    [CT_ML_FLATTEN] = {"flatten", false, 0, {NULL}, 0, {false}},
    [CT_ML_SOFTMAX] = {"softmax", false, 0, {NULL}, 0, {false}},
    /* after its op's name, up to 8 numbers: the op's attributes */
    [CT_ML_CUSTOM] = {"custom", false, 8, {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"}, 0,
                      {false}},
};

const ct_mlayer_info *ct_mlayer_table(void)
{
    return layer_table;
}

/* ---- the arena ---- */

struct ct_marena {
    struct ct_marena *next;
    size_t used, capacity;
    _Alignas(max_align_t) unsigned char data[];
};

void *ct_marena_alloc(struct ct_marena **arena, size_t bytes)
{
    bytes = (bytes + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    struct ct_marena *head = *arena;
    if (!head || head->capacity - head->used < bytes) {
        size_t capacity = bytes > CT_MARENA_CHUNK ? bytes : CT_MARENA_CHUNK;
        struct ct_marena *chunk = malloc(sizeof *chunk + capacity);
        if (!chunk)
            return NULL;
        chunk->next = head;
        chunk->used = 0;
        chunk->capacity = capacity;
        *arena = head = chunk;
    }
    void *at = head->data + head->used;
    head->used += bytes;
    memset(at, 0, bytes);
    return at;
}

char *ct_marena_strndup(struct ct_marena **arena, const char *s, size_t n)
{
    char *copy = ct_marena_alloc(arena, n + 1);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}

void ct_mtext_free(ct_mtext *text)
{
    struct ct_marena *arena = text->arena;
    while (arena) {
        struct ct_marena *next = arena->next;
        free(arena);
        arena = next;
    }
    memset(text, 0, sizeof *text);
}
