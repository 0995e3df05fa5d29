/*
 * Model texts: tokens, and the parser's cursor over them.  Private to the
 * parser (model_lex.c, model_parse.c); the rest of src/nn sees only
 * model_parse.h.
 *
 * Errors are values: they go to ct_last_error() as "<model>:<line>: ...".
 */
#ifndef CT_NN_MODEL_LEX_H
#define CT_NN_MODEL_LEX_H

#include <stdbool.h>
#include <stddef.h>

#include "cuttle.h"
#include "nn/model_desc.h"

/* ---- tokens (model_lex.c) ---- */

typedef enum ct_mtoken_kind {
    CT_MT_NAME = 0, /* conv, layer1.0.conv1, x.height */
    CT_MT_NUMBER,
    CT_MT_STRING,   /* "..." quotes included */
    CT_MT_PUNCT,    /* : , ( ) = + - * / < > <= >= == != -> */
    CT_MT_END,      /* end of a line: newline or ';' */
    CT_MT_EOF
} ct_mtoken_kind;

typedef struct ct_mtoken {
    ct_mtoken_kind kind;
    int line;
    const char *start; /* into the text */
    size_t len;
    double number;
} ct_mtoken;

typedef struct ct_mlexer {
    ct_mtoken *tokens; /* ends with CT_MT_END, CT_MT_EOF */
    int count, capacity;
} ct_mlexer;

/* Split text into tokens.  On error records "<model_name>:<line>: ..." and
 * returns its status (*lex is then empty). */
ct_status ct_mlex(const char *model_name, const char *text, ct_mlexer *lex);
void ct_mlex_free(ct_mlexer *lex);

/* ---- the parser's cursor over the tokens (model_lex.c) ---- */

typedef struct ct_mparser {
    ct_mtext *text; /* being filled; its arena takes the copies */
    const ct_mtoken *tokens;
    int pos;
    int depth;
    bool failed;      /* the error is recorded: */
    ct_status status; /* CT_ERR_FORMAT, or CT_ERR_MEMORY */
} ct_mparser;

/* Record "<model>:<line>: message" as the error (once); false. */
bool ct_mp_fail(ct_mparser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for memory that ran out (CT_ERR_MEMORY). */
bool ct_mp_out_of_memory(ct_mparser *p, int line);
const ct_mtoken *ct_mp_peek(const ct_mparser *p);
const ct_mtoken *ct_mp_next(ct_mparser *p); /* never past the EOF token */
bool ct_mp_is_word(const ct_mtoken *t, const char *word);
bool ct_mp_is_punct(const ct_mtoken *t, const char *punct);
bool ct_mp_is_keyword(const ct_mtoken *t);
/* "'conv3d'", "the end of the line", ... for messages. */
const char *ct_mp_describe(const ct_mtoken *t, char *buf, size_t capacity);
bool ct_mp_expect_punct(ct_mparser *p, const char *punct, const char *where);
bool ct_mp_expect_end(ct_mparser *p, const char *after); /* a line end or EOF */
/* Copies into the text's arena; NULL (and the error recorded) when memory runs out. */
const char *ct_mp_copy(ct_mparser *p, const char *s, size_t n, int line);
const char *ct_mp_copy_token(ct_mparser *p, const ct_mtoken *t);
const char *ct_mp_expect_name(ct_mparser *p, const char *what); /* not a keyword */
void *ct_mp_alloc(ct_mparser *p, size_t bytes, int line);

#endif
