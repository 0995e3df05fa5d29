/*
 * Model texts: the lexer, and the parser's cursor over its tokens.
 *
 * Tokens: names ([A-Za-z_][A-Za-z0-9_.]*, so "layer1.0.conv1" and
 * "x.height" are one token), numbers, "strings", punctuation, and line
 * ends (a newline or ';').  '#' starts a comment that runs to the end of
 * the line.  Then the parser's cursor over the tokens (model_lex.h).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/model_lex.h"

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

/* Frees what was lexed so far and passes the error on. */
static ct_status lex_fail(ct_mlexer *lex, ct_status status)
{
    ct_mlex_free(lex);
    return status;
}

ct_status ct_mlex(const char *model_name, const char *text, ct_mlexer *lex)
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
            if (*close != '"')
                return lex_fail(lex, ct_set_error(CT_ERR_FORMAT,
                                                  "%s:%d: a string that does not end on its line",
                                                  model_name, line));
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
            if (!token.len && isprint(c))
                return lex_fail(lex, ct_set_error(CT_ERR_FORMAT,
                                                  "%s:%d: unexpected character '%c'", model_name,
                                                  line, c));
            if (!token.len)
                return lex_fail(lex, ct_set_error(CT_ERR_FORMAT,
                                                  "%s:%d: unexpected byte 0x%02x (model texts are "
                                                  "ASCII outside comments and strings)",
                                                  model_name, line, c));
        }
        if (!push(lex, token))
            return lex_fail(lex, ct_set_error(CT_ERR_MEMORY, "model text: out of memory"));
        s += token.len;
    }
    ct_mtoken end = {.kind = CT_MT_END, .line = line, .start = s};
    ct_mtoken eof = {.kind = CT_MT_EOF, .line = line, .start = s};
    if (!push(lex, end) || !push(lex, eof))
        return lex_fail(lex, ct_set_error(CT_ERR_MEMORY, "model text: out of memory"));
    return CT_OK;
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
    ct_set_error(CT_ERR_FORMAT, "%s:%d: %s", p->text->model_name, line, message);
    p->failed = true;
    p->status = CT_ERR_FORMAT;
    return false;
}

bool ct_mp_out_of_memory(ct_mparser *p, int line)
{
    if (!p->failed)
        ct_set_error(CT_ERR_MEMORY, "%s:%d: out of memory", p->text->model_name, line);
    p->status = p->failed ? p->status : CT_ERR_MEMORY;
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

const char *ct_mp_copy(ct_mparser *p, const char *s, size_t n, int line)
{
    const char *copy = ct_marena_strndup(&p->text->arena, s, n);
    if (!copy)
        ct_mp_out_of_memory(p, line);
    return copy;
}

const char *ct_mp_copy_token(ct_mparser *p, const ct_mtoken *t)
{
    return ct_mp_copy(p, t->start, t->len, t->line);
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
        ct_mp_out_of_memory(p, line);
    return memory;
}
