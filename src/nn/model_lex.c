/*
 * Model definitions: the arena that holds a parse, and the lexer.
 *
 * Tokens: names ([A-Za-z_][A-Za-z0-9_.]*, so "layer1.0.conv1" and
 * "x.height" are one token), numbers, "strings", punctuation, and line
 * ends (a newline or ';').  '#' starts a comment that runs to the end of
 * the line.  Then the parser's cursor over the tokens (model.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"
#include "ops/common.h"

#define CT_MARENA_CHUNK 16384

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

void ct_marena_free(struct ct_marena *arena)
{
    while (arena) {
        struct ct_marena *next = arena->next;
        free(arena);
        arena = next;
    }
}

static const char *const punctuation[] = {"->", "<=", ">=", "==", "!=", ":", ",", "(",
                                          ")",  "=",  "+",  "-",  "*",  "/", "<", ">"};

static bool push(ct_mlexer *lex, ct_mtoken token)
{
    if (lex->count == lex->capacity) {
        int capacity = lex->capacity ? 2 * lex->capacity : 256;
        ct_mtoken *grown = realloc(lex->tokens, (size_t)capacity * sizeof *grown);
        if (!grown)
            return false;
        lex->tokens = grown;
        lex->capacity = capacity;
    }
    lex->tokens[lex->count++] = token;
    return true;
}

/* Length of the number at s (digits, an optional fraction, an exponent). */
static size_t number_length(const char *s)
{
    size_t n = 0;
    while (isdigit((unsigned char)s[n]))
        n++;
    if (s[n] == '.' && isdigit((unsigned char)s[n + 1]))
        for (n++; isdigit((unsigned char)s[n]); n++) {
        }
    if ((s[n] == 'e' || s[n] == 'E') &&
        (isdigit((unsigned char)s[n + 1]) ||
         ((s[n + 1] == '+' || s[n + 1] == '-') && isdigit((unsigned char)s[n + 2]))))
        for (n += 2; isdigit((unsigned char)s[n]); n++) {
        }
    return n;
}

bool ct_mlex(ct_graph *graph, const char *model_name, const char *text, ct_mlexer *lex)
{
    memset(lex, 0, sizeof *lex);
    int line = 1;
    const char *s = text;
    while (*s) {
        ct_mtoken token = {.line = line, .start = s, .len = 1};
        unsigned char c = (unsigned char)*s;
        if (c == '#') {
            while (*s && *s != '\n')
                s++;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            s++;
            continue;
        }
        if (c == '\n' || c == ';') {
            token.kind = CT_MT_END;
            if (c == '\n')
                line++;
        } else if (isalpha(c) || c == '_') {
            token.kind = CT_MT_NAME;
            while (isalnum((unsigned char)s[token.len]) || s[token.len] == '_' ||
                   s[token.len] == '.')
                token.len++;
        } else if (isdigit(c)) {
            token.kind = CT_MT_NUMBER;
            token.len = number_length(s);
            token.number = strtod(s, NULL);
        } else if (c == '"') {
            const char *close = s + 1;
            while (*close && *close != '"' && *close != '\n')
                close++;
            if (*close != '"') {
                ct_graph_fail(graph, CT_ERR_FORMAT, "%s:%d: a string that does not end on its line",
                              model_name, line);
                ct_mlex_free(lex);
                return false;
            }
            token.kind = CT_MT_STRING;
            token.len = (size_t)(close - s) + 1;
        } else {
            token.kind = CT_MT_PUNCT;
            token.len = 0;
            for (size_t i = 0; i < sizeof punctuation / sizeof *punctuation; i++) {
                size_t n = strlen(punctuation[i]);
                if (strncmp(s, punctuation[i], n) == 0) {
                    token.len = n;
                    break;
                }
            }
            if (!token.len) {
                if (isprint(c))
                    ct_graph_fail(graph, CT_ERR_FORMAT, "%s:%d: unexpected character '%c'",
                                  model_name, line, c);
                else
                    ct_graph_fail(graph, CT_ERR_FORMAT,
                                  "%s:%d: unexpected byte 0x%02x (model texts are ASCII outside "
                                  "comments and strings)",
                                  model_name, line, c);
                ct_mlex_free(lex);
                return false;
            }
        }
        if (!push(lex, token)) {
            ct_graph_fail(graph, CT_ERR_MEMORY, "model text: out of memory");
            ct_mlex_free(lex);
            return false;
        }
        s += token.len;
    }
    ct_mtoken end = {.kind = CT_MT_END, .line = line, .start = s};
    ct_mtoken eof = {.kind = CT_MT_EOF, .line = line, .start = s};
    if (!push(lex, end) || !push(lex, eof)) {
        ct_graph_fail(graph, CT_ERR_MEMORY, "model text: out of memory");
        ct_mlex_free(lex);
        return false;
    }
    return true;
}

void ct_mlex_free(ct_mlexer *lex)
{
    free(lex->tokens);
    memset(lex, 0, sizeof *lex);
}

/* ---- the parser's cursor ---- */

static const char *const keywords[] = {"model", "block", "end",   "if",   "else",  "repeat", "seq",
                                       "save",  "use",   "let",   "fail", "on",    "and",    "or",
                                       "not",   "true",  "false", "add",  "concat"};

bool ct_mp_fail(ct_mparser *p, int line, const char *fmt, ...)
{
    if (p->failed)
        return false;
    char message[768];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    ct_graph_fail(p->graph, CT_ERR_FORMAT, "%s:%d: %s", p->text->model_name, line, message);
    p->failed = true;
    return false;
}

const ct_mtoken *ct_mp_peek(const ct_mparser *p)
{
    return &p->tokens[p->pos];
}

/* Advance, but never past the final EOF. */
const ct_mtoken *ct_mp_next(ct_mparser *p)
{
    const ct_mtoken *t = &p->tokens[p->pos];
    if (t->kind != CT_MT_EOF)
        p->pos++;
    return t;
}

bool ct_mp_is_word(const ct_mtoken *t, const char *word)
{
    return t->kind == CT_MT_NAME && t->len == strlen(word) && memcmp(t->start, word, t->len) == 0;
}

bool ct_mp_is_punct(const ct_mtoken *t, const char *punct)
{
    return t->kind == CT_MT_PUNCT && t->len == strlen(punct) &&
           memcmp(t->start, punct, t->len) == 0;
}

bool ct_mp_is_keyword(const ct_mtoken *t)
{
    for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
        if (ct_mp_is_word(t, keywords[i]))
            return true;
    return false;
}

/* "'conv3d'", "end of line", ... for messages. */
const char *ct_mp_describe(const ct_mtoken *t, char *buf, size_t capacity)
{
    if (t->kind == CT_MT_END)
        snprintf(buf, capacity, "the end of the line");
    else if (t->kind == CT_MT_EOF)
        snprintf(buf, capacity, "the end of the text");
    else
        snprintf(buf, capacity, "'%.*s'", (int)(t->len < 40 ? t->len : 40), t->start);
    return buf;
}

bool ct_mp_expect_punct(ct_mparser *p, const char *punct, const char *where)
{
    if (ct_mp_is_punct(ct_mp_peek(p), punct)) {
        ct_mp_next(p);
        return true;
    }
    char got[64];
    return ct_mp_fail(p, ct_mp_peek(p)->line, "expected '%s' %s, got %s", punct, where,
                      ct_mp_describe(ct_mp_peek(p), got, sizeof got));
}

bool ct_mp_expect_end(ct_mparser *p, const char *after)
{
    if (ct_mp_peek(p)->kind == CT_MT_END || ct_mp_peek(p)->kind == CT_MT_EOF) {
        ct_mp_next(p);
        return true;
    }
    char got[64];
    return ct_mp_fail(p, ct_mp_peek(p)->line, "unexpected %s after %s",
                      ct_mp_describe(ct_mp_peek(p), got, sizeof got), after);
}

const char *ct_mp_copy_token(ct_mparser *p, const ct_mtoken *t)
{
    const char *copy = ct_marena_strndup(&p->text->arena, t->start, t->len);
    if (!copy)
        ct_mp_fail(p, t->line, "out of memory");
    return copy;
}

/* A tensor or value name (not a keyword). */
const char *ct_mp_expect_name(ct_mparser *p, const char *what)
{
    const ct_mtoken *t = ct_mp_peek(p);
    if (t->kind != CT_MT_NAME || ct_mp_is_keyword(t)) {
        char got[64];
        ct_mp_fail(p, t->line, "expected %s, got %s", what, ct_mp_describe(t, got, sizeof got));
        return NULL;
    }
    return ct_mp_copy_token(p, ct_mp_next(p));
}

void *ct_mp_alloc(ct_mparser *p, size_t bytes, int line)
{
    void *memory = ct_marena_alloc(&p->text->arena, bytes);
    if (!memory)
        ct_mp_fail(p, line, "out of memory");
    return memory;
}
