/*
 * Model texts: the parser (tokens -> ct_mtext).  The grammar is in
 * docs/model-format.md; in short:
 *
 *   text      := ["model" NAME END] { block | statement }
 *   block     := "block" NAME "(" [param {"," param}] ")" END body "end" END
 *   param     := NAME ["=" expr]
 *   statement := "if" expr (":" statement | END body ["else" END body] "end" END)
 *              | "repeat" expr (":" statement | END body "end" END)
 *              | "save" NAME | "use" NAME | "let" NAME "=" expr | "fail" STRING
 *              | [NAME ":"] ("seq" mods END body "end" | ("add"|"concat") {NAME} mods
 *                            | (LAYER | BLOCK) {arg} mods) END
 *   arg       := [NAME "="] (expr | "(" expr "," expr ")")
 *   mods      := ["on" NAME] ["->" NAME]
 */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "nn/model_lex.h"
#include "nn/model_parse.h"

/* Names that always mean a tensor: the current one and the model's input. */
static bool reserved_tensor(const char *name)
{
    return strcmp(name, "x") == 0 || strcmp(name, "input") == 0;
}

/* ---- expressions ---- */

static const ct_mexpr *parse_or(ct_mparser *p);
static const ct_mexpr *parse_comparison(ct_mparser *p);

static ct_mexpr *new_expr(ct_mparser *p, ct_mexpr_kind kind, int line)
{
    ct_mexpr *e = ct_mp_alloc(p, sizeof *e, line);
    if (e) {
        e->kind = kind;
        e->line = line;
    }
    return e;
}

static const ct_mexpr *binary(ct_mparser *p, ct_mbinop op, const ct_mexpr *a, const ct_mexpr *b,
                              int line)
{
    if (!a || !b)
        return NULL;
    ct_mexpr *e = new_expr(p, CT_ME_BINARY, line);
    if (e) {
        e->op = op;
        e->a = a;
        e->b = b;
    }
    return e;
}

static const ct_mexpr *parse_primary(ct_mparser *p)
{
    const ct_mtoken *t = ct_mp_peek(p);
    if (++p->depth > CT_M_MAX_DEPTH) {
        ct_mp_fail(p, t->line, "expression nested more than %d deep", CT_M_MAX_DEPTH);
        return NULL;
    }
    const ct_mexpr *result = NULL;
    if (ct_mp_is_punct(t, "-") || ct_mp_is_word(t, "not")) {
        ct_mp_next(p);
        const ct_mexpr *operand = ct_mp_is_punct(t, "-") ? parse_primary(p) : parse_comparison(p);
        ct_mexpr *e =
            operand ? new_expr(p, ct_mp_is_punct(t, "-") ? CT_ME_NEG : CT_ME_NOT, t->line) : NULL;
        if (e)
            e->a = operand;
        result = e;
    } else if (t->kind == CT_MT_NUMBER || ct_mp_is_word(t, "true") || ct_mp_is_word(t, "false")) {
        ct_mp_next(p);
        ct_mexpr *e = new_expr(p, CT_ME_NUMBER, t->line);
        if (e)
            e->number = t->kind == CT_MT_NUMBER ? t->number : ct_mp_is_word(t, "true");
        result = e;
    } else if (ct_mp_is_punct(t, "(")) {
        ct_mp_next(p);
        result = parse_or(p);
        if (result && !ct_mp_expect_punct(p, ")", "to close '('"))
            result = NULL;
    } else if (t->kind == CT_MT_NAME && !ct_mp_is_keyword(t)) {
        ct_mexpr *e = new_expr(p, CT_ME_NAME, t->line);
        if (e && (e->name = ct_mp_copy_token(p, t)))
            result = e;
        ct_mp_next(p);
    } else {
        char got[64];
        ct_mp_fail(p, t->line, "expected a number, a name or '(', got %s",
                   ct_mp_describe(t, got, sizeof got));
    }
    p->depth--;
    return result;
}

static const ct_mexpr *parse_product(ct_mparser *p)
{
    const ct_mexpr *e = parse_primary(p);
    while (e && (ct_mp_is_punct(ct_mp_peek(p), "*") || ct_mp_is_punct(ct_mp_peek(p), "/"))) {
        const ct_mtoken *op = ct_mp_next(p);
        e = binary(p, ct_mp_is_punct(op, "*") ? CT_MB_MUL : CT_MB_DIV, e, parse_primary(p),
                   op->line);
    }
    return e;
}

static const ct_mexpr *parse_sum(ct_mparser *p)
{
    const ct_mexpr *e = parse_product(p);
    while (e && (ct_mp_is_punct(ct_mp_peek(p), "+") || ct_mp_is_punct(ct_mp_peek(p), "-"))) {
        const ct_mtoken *op = ct_mp_next(p);
        e = binary(p, ct_mp_is_punct(op, "+") ? CT_MB_ADD : CT_MB_SUB, e, parse_product(p),
                   op->line);
    }
    return e;
}

static const ct_mexpr *parse_comparison(ct_mparser *p)
{
    static const char *const ops[] = {"<", "<=", ">", ">=", "==", "!="};
    static const ct_mbinop codes[] = {CT_MB_LT, CT_MB_LE, CT_MB_GT, CT_MB_GE, CT_MB_EQ, CT_MB_NE};
    const ct_mexpr *e = parse_sum(p);
    for (int i = 0; e && i < 6; i++)
        if (ct_mp_is_punct(ct_mp_peek(p), ops[i])) {
            const ct_mtoken *op = ct_mp_next(p);
            return binary(p, codes[i], e, parse_sum(p), op->line);
        }
    return e;
}

static const ct_mexpr *parse_and(ct_mparser *p)
{
    const ct_mexpr *e = parse_comparison(p);
    while (e && ct_mp_is_word(ct_mp_peek(p), "and")) {
        const ct_mtoken *op = ct_mp_next(p);
        e = binary(p, CT_MB_AND, e, parse_comparison(p), op->line);
    }
    return e;
}

static const ct_mexpr *parse_or(ct_mparser *p)
{
    const ct_mexpr *e = parse_and(p);
    while (e && ct_mp_is_word(ct_mp_peek(p), "or")) {
        const ct_mtoken *op = ct_mp_next(p);
        e = binary(p, CT_MB_OR, e, parse_and(p), op->line);
    }
    return e;
}

/* ---- arguments ---- */

/* An argument value: an expression, or "(a, b)". */
static bool parse_arg_value(ct_mparser *p, ct_marg *arg)
{
    int start = p->pos;
    if (ct_mp_is_punct(ct_mp_peek(p), "(")) {
        ct_mp_next(p);
        const ct_mexpr *first = parse_or(p);
        if (first && ct_mp_is_punct(ct_mp_peek(p), ",")) {
            ct_mp_next(p);
            arg->value[0] = first;
            arg->value[1] = parse_or(p);
            arg->pair = true;
            return arg->value[1] && ct_mp_expect_punct(p, ")", "to close the pair");
        }
        if (!first)
            return false;
        p->pos = start; /* "(a) * 2": an ordinary expression */
    }
    arg->value[0] = parse_or(p);
    return arg->value[0] != NULL;
}

static bool at_args_end(const ct_mparser *p)
{
    const ct_mtoken *t = ct_mp_peek(p);
    return t->kind == CT_MT_END || t->kind == CT_MT_EOF || ct_mp_is_word(t, "on") ||
           ct_mp_is_punct(t, "->");
}

/* Bind "a b key=c" to the parameters names[0..n) of what (a layer or block). */
static bool parse_args(ct_mparser *p, const char *what, int n, const char *const *names,
                       int n_required, const bool *pair_ok, ct_marg *args)
{
    char list[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "", names[i]);
    int line = ct_mp_peek(p)->line;
    int positional = 0;
    while (!p->failed && !at_args_end(p)) {
        int slot = positional;
        const ct_mtoken *t = ct_mp_peek(p);
        if (t->kind == CT_MT_NAME && ct_mp_is_punct(&p->tokens[p->pos + 1], "=")) {
            for (slot = 0; slot < n && !ct_mp_is_word(t, names[slot]); slot++) {
            }
            if (slot == n)
                return ct_mp_fail(p, t->line, "%s has no argument '%.*s'; its arguments: %s", what,
                                  (int)t->len, t->start, n ? list : "none");
            p->pos += 2;
        } else if (positional++ >= n) {
            return ct_mp_fail(p, t->line, "%s takes %d argument%s (%s), got more", what, n,
                              n == 1 ? "" : "s", n ? list : "none");
        }
        if (args[slot].value[0])
            return ct_mp_fail(p, t->line, "%s: argument '%s' given twice", what, names[slot]);
        if (!parse_arg_value(p, &args[slot]))
            return false;
        if (args[slot].pair && !(pair_ok && pair_ok[slot]))
            return ct_mp_fail(p, t->line, "%s: '%s' is one number, not a pair", what, names[slot]);
    }
    for (int i = 0; !p->failed && i < n_required; i++)
        if (!args[i].value[0])
            return ct_mp_fail(p, line, "%s needs '%s' (its arguments: %s)", what, names[i], list);
    return !p->failed;
}

/* ["on" NAME] ["->" NAME] */
static bool parse_mods(ct_mparser *p, ct_mstmt *s)
{
    while (!p->failed &&
           (ct_mp_is_word(ct_mp_peek(p), "on") || ct_mp_is_punct(ct_mp_peek(p), "->"))) {
        bool on = ct_mp_is_word(ct_mp_next(p), "on");
        const char **slot = on ? &s->from : &s->to;
        if (*slot)
            return ct_mp_fail(p, s->line, "'%s' given twice", on ? "on" : "->");
        *slot = ct_mp_expect_name(p, on ? "a tensor name after 'on'" : "a tensor name after '->'");
        if (*slot && !on && reserved_tensor(*slot))
            return ct_mp_fail(p, s->line,
                              "'-> %s': '%s' is reserved (the current tensor and the "
                              "model's input)",
                              *slot, *slot);
    }
    return !p->failed;
}

/* ---- statements ---- */

static bool parse_body(ct_mparser *p, bool in_seq, bool else_ok, ct_mbody *body, int open_line,
                       const char *opener);
static ct_mstmt *parse_statement(ct_mparser *p, bool in_seq);
static void append(ct_mparser *p, ct_mbody *body, int *capacity, ct_mstmt *s);

static int find_layer(const ct_mtoken *t)
{
    const ct_mlayer_info *table = ct_mlayer_table();
    for (int i = 0; i < CT_ML_COUNT; i++)
        if (ct_mp_is_word(t, table[i].name))
            return i;
    return -1;
}

static int find_block(const ct_mparser *p, const ct_mtoken *t)
{
    for (int i = 0; i < p->text->n_blocks; i++)
        if (ct_mp_is_word(t, p->text->blocks[i].name))
            return i;
    return -1;
}

static bool unknown_layer(ct_mparser *p, const ct_mtoken *t)
{
    char known[512] = "";
    const ct_mlayer_info *table = ct_mlayer_table();
    for (int i = 0; i < CT_ML_COUNT; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s, ", table[i].name);
    snprintf(known + strlen(known), sizeof known - strlen(known), "add, concat, seq");
    for (int i = 0; i < p->text->n_blocks; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                 i ? ", " : "; blocks defined above: ", p->text->blocks[i].name);
    char got[64];
    return ct_mp_fail(p, t->line, "unknown layer %s; known: %s", ct_mp_describe(t, got, sizeof got),
                      known);
}

/* if / repeat: ":" statement, or a body up to "end" (if: an "else" body). */
static bool parse_branches(ct_mparser *p, ct_mstmt *s, bool in_seq, const char *opener)
{
    if (ct_mp_is_punct(ct_mp_peek(p), ":")) {
        ct_mp_next(p);
        ct_mstmt *inner = parse_statement(p, in_seq);
        ct_mstmt **items = inner ? ct_mp_alloc(p, sizeof *items, s->line) : NULL;
        if (!items)
            return false;
        items[0] = inner;
        s->body = (ct_mbody){items, 1};
        return true;
    }
    if (!ct_mp_expect_end(p, opener) ||
        !parse_body(p, in_seq, s->kind == CT_MS_IF, &s->body, s->line, opener))
        return false;
    if (ct_mp_is_word(ct_mp_peek(p), "else")) {
        ct_mp_next(p);
        if (!ct_mp_expect_end(p, "else") ||
            !parse_body(p, in_seq, false, &s->else_body, s->line, opener))
            return false;
    }
    ct_mp_next(p); /* "end" */
    return ct_mp_expect_end(p, "end");
}

/* [NAME ":"] then a layer, block call, seq, add or concat. */
static bool parse_module(ct_mparser *p, ct_mstmt *s, bool in_seq)
{
    if (ct_mp_peek(p)->kind == CT_MT_NAME && ct_mp_is_punct(&p->tokens[p->pos + 1], ":") &&
        !ct_mp_is_keyword(ct_mp_peek(p))) {
        const ct_mtoken *t = ct_mp_peek(p);
        if (in_seq)
            return ct_mp_fail(p, t->line,
                              "'%.*s:': a seq numbers its layers itself (0, 1, ...); "
                              "write the layer without a name, or move it out of the seq",
                              (int)t->len, t->start);
        if (!(s->name = ct_mp_copy_token(p, t)))
            return false;
        p->pos += 2;
    }
    const ct_mtoken *word = ct_mp_next(p);
    const char *who = s->name ? s->name : "";
    if (ct_mp_is_word(word, "seq")) {
        s->kind = CT_MS_SEQ;
        if (!s->name && !in_seq)
            return ct_mp_fail(p, word->line,
                              "a seq needs a name outside a seq (its layers are "
                              "named <name>.0, <name>.1, ...): write 'features: seq'");
        return parse_mods(p, s) && ct_mp_expect_end(p, "seq") &&
               parse_body(p, true, false, &s->body, s->line, "seq") && ct_mp_next(p) &&
               ct_mp_expect_end(p, "end");
    }
    if (ct_mp_is_word(word, "add") || ct_mp_is_word(word, "concat")) {
        s->kind = ct_mp_is_word(word, "add") ? CT_MS_ADD : CT_MS_CONCAT;
        while (!p->failed && !at_args_end(p)) {
            if (s->n_names == CT_M_MAX_NAMES)
                return ct_mp_fail(p, word->line, "%.*s takes at most %d tensor names",
                                  (int)word->len, word->start, CT_M_MAX_NAMES);
            s->names[s->n_names++] = ct_mp_expect_name(p, "a tensor name");
        }
        if (!p->failed && s->n_names == 0)
            return ct_mp_fail(p, word->line,
                              "%.*s needs the names of the tensors to combine with the "
                              "current one ('add shortcut')",
                              (int)word->len, word->start);
        return parse_mods(p, s) && ct_mp_expect_end(p, "the tensor names");
    }
    int layer = find_layer(word);
    int block = layer < 0 ? find_block(p, word) : -1;
    if (layer < 0 && block < 0)
        return unknown_layer(p, word);
    char what[128];
    snprintf(what, sizeof what, "%s%s%.*s", who, *who ? ": " : "", (int)word->len, word->start);
    if (layer >= 0) {
        const ct_mlayer_info *info = &ct_mlayer_table()[layer];
        s->kind = CT_MS_LAYER;
        s->layer = (ct_mlayer)layer;
        if (info->has_params && !s->name && !in_seq)
            return ct_mp_fail(p, word->line,
                              "%s has parameters, so it needs a name here (they are "
                              "'<name>.weight', ...): write 'conv1: %s ...', or put it in a seq",
                              info->name, info->name);
        if (layer == CT_ML_CUSTOM && !(s->op = ct_mp_expect_name(p, "the name of a custom op")))
            return false;
        if (!parse_args(p, what, info->n_args, info->args, info->n_required, info->pair_ok,
                        s->args))
            return false;
    } else {
        const ct_mblock *b = &p->text->blocks[block];
        s->kind = CT_MS_CALL;
        s->block = block;
        int n_required = 0;
        while (n_required < b->n_params && !b->defaults[n_required])
            n_required++;
        if (!parse_args(p, what, b->n_params, b->params, n_required, NULL, s->args))
            return false;
    }
    return parse_mods(p, s) && ct_mp_expect_end(p, "the arguments");
}

static ct_mstmt *parse_statement(ct_mparser *p, bool in_seq)
{
    const ct_mtoken *t = ct_mp_peek(p);
    if (++p->depth > CT_M_MAX_DEPTH) {
        ct_mp_fail(p, t->line, "statements nested more than %d deep", CT_M_MAX_DEPTH);
        return NULL;
    }
    ct_mstmt *s = ct_mp_alloc(p, sizeof *s, t->line);
    if (!s)
        return NULL;
    s->line = t->line;
    bool ok;
    char got[64];
    if (t->kind != CT_MT_NAME) {
        ok = ct_mp_fail(p, t->line,
                        "expected a layer, block, seq, if, repeat, save, use, let, add, "
                        "concat or fail, got %s",
                        ct_mp_describe(t, got, sizeof got));
    } else if (ct_mp_is_word(t, "if") || ct_mp_is_word(t, "repeat")) {
        ct_mp_next(p);
        s->kind = ct_mp_is_word(t, "if") ? CT_MS_IF : CT_MS_REPEAT;
        ok = (s->expr = parse_or(p)) &&
             parse_branches(p, s, in_seq, s->kind == CT_MS_IF ? "if" : "repeat");
    } else if (ct_mp_is_word(t, "save") || ct_mp_is_word(t, "use")) {
        ct_mp_next(p);
        s->kind = ct_mp_is_word(t, "save") ? CT_MS_SAVE : CT_MS_USE;
        ok = (s->name = ct_mp_expect_name(p, "a tensor name"));
        if (ok && s->kind == CT_MS_SAVE && reserved_tensor(s->name))
            ok = ct_mp_fail(p, t->line, "'save %s': '%s' is reserved", s->name, s->name);
        ok = ok && ct_mp_expect_end(p, "the tensor name");
    } else if (ct_mp_is_word(t, "let")) {
        ct_mp_next(p);
        s->kind = CT_MS_LET;
        ok = (s->name = ct_mp_expect_name(p, "a value name after 'let'")) &&
             ct_mp_expect_punct(p, "=", "after the name") && (s->expr = parse_or(p)) &&
             ct_mp_expect_end(p, "the value");
    } else if (ct_mp_is_word(t, "fail")) {
        ct_mp_next(p);
        s->kind = CT_MS_FAIL;
        const ct_mtoken *message = ct_mp_next(p);
        if (message->kind != CT_MT_STRING)
            ok = ct_mp_fail(p, t->line, "fail needs a message in quotes");
        else
            ok = (s->message = ct_mp_copy(p, message->start + 1, message->len - 2, t->line)) &&
                 ct_mp_expect_end(p, "fail");
    } else if (ct_mp_is_word(t, "end") || ct_mp_is_word(t, "else")) {
        ok = ct_mp_fail(p, t->line, "'%.*s' without an open if, repeat, seq or block", (int)t->len,
                        t->start);
    } else if (ct_mp_is_word(t, "model")) {
        ok = ct_mp_fail(p, t->line, "'model NAME' must be the first line");
    } else if (ct_mp_is_word(t, "block")) {
        ok = ct_mp_fail(p, t->line, "'block' belongs at the top level, outside other statements");
    } else {
        ok = parse_module(p, s, in_seq);
    }
    p->depth--;
    return ok ? s : NULL;
}

/* Statements up to "end" (or "else" when else_ok), which is left unread. */
static bool parse_body(ct_mparser *p, bool in_seq, bool else_ok, ct_mbody *body, int open_line,
                       const char *opener)
{
    int capacity = 0;
    while (!p->failed) {
        while (ct_mp_peek(p)->kind == CT_MT_END)
            ct_mp_next(p);
        const ct_mtoken *t = ct_mp_peek(p);
        if (t->kind == CT_MT_EOF)
            return ct_mp_fail(p, t->line, "the %s opened on line %d has no 'end'", opener,
                              open_line);
        if (ct_mp_is_word(t, "end") || (else_ok && ct_mp_is_word(t, "else")))
            return true;
        ct_mstmt *s = parse_statement(p, in_seq);
        if (s)
            append(p, body, &capacity, s);
    }
    return false;
}

/* block NAME(param, param=default, ...) END body end */
static bool parse_block(ct_mparser *p, int capacity)
{
    const ct_mtoken *start = ct_mp_next(p);
    const ct_mtoken *t = ct_mp_peek(p);
    if (t->kind != CT_MT_NAME || ct_mp_is_keyword(t) || find_layer(t) >= 0 ||
        find_block(p, t) >= 0) {
        char got[64];
        return ct_mp_fail(p, t->line, "expected a new block name after 'block', got %s%s",
                          ct_mp_describe(t, got, sizeof got),
                          t->kind == CT_MT_NAME ? " (a keyword, a layer or a block already defined)"
                                                : "");
    }
    CT_ASSERT(p->text->n_blocks < capacity);
    ct_mblock *b = &p->text->blocks[p->text->n_blocks];
    b->line = start->line;
    if (!(b->name = ct_mp_copy_token(p, ct_mp_next(p))) ||
        !ct_mp_expect_punct(p, "(", "after the block name"))
        return false;
    while (!p->failed && !ct_mp_is_punct(ct_mp_peek(p), ")")) {
        if (b->n_params == CT_M_MAX_ARGS)
            return ct_mp_fail(p, start->line, "a block takes at most %d parameters", CT_M_MAX_ARGS);
        if (b->n_params && !ct_mp_expect_punct(p, ",", "between parameters"))
            return false;
        int i = b->n_params++;
        if (!(b->params[i] = ct_mp_expect_name(p, "a parameter name")))
            return false;
        if (ct_mp_is_punct(ct_mp_peek(p), "=")) {
            ct_mp_next(p);
            b->defaults[i] = parse_or(p);
        } else if (i > 0 && b->defaults[i - 1]) {
            return ct_mp_fail(p, start->line,
                              "block %s: parameter '%s' without a default follows one "
                              "with a default",
                              b->name, b->params[i]);
        }
    }
    if (p->failed || !ct_mp_expect_punct(p, ")", "after the parameters") ||
        !ct_mp_expect_end(p, "the parameters"))
        return false;
    /* Counted after its body: a block calls only blocks defined before it,
     * so there is no recursion. */
    if (!parse_body(p, false, false, &b->body, b->line, "block"))
        return false;
    p->text->n_blocks++;
    ct_mp_next(p);
    return ct_mp_expect_end(p, "end");
}

/* The NAME of a first line "model NAME" (before lexing, so that even a
 * lexer error can say which model), or "model". */
static const char *scan_model_name(const char *text, char *buf, size_t capacity)
{
    const char *s = text;
    for (;;) {
        s += strspn(s, " \t\r\n");
        if (*s != '#')
            break;
        s += strcspn(s, "\n");
    }
    if (strncmp(s, "model", 5) != 0 || !strchr(" \t", s[5]) || s[5] == '\0')
        return "model";
    s += 5 + strspn(s + 5, " \t");
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
    if (n == 0 || n >= capacity)
        return "model";
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

static void append(ct_mparser *p, ct_mbody *body, int *capacity, ct_mstmt *s)
{
    if (body->count == *capacity) {
        *capacity = *capacity ? 2 * *capacity : 16;
        ct_mstmt **grown = ct_mp_alloc(p, (size_t)*capacity * sizeof *grown, s->line);
        if (!grown)
            return;
        if (body->count)
            memcpy(grown, body->items, (size_t)body->count * sizeof *grown);
        body->items = grown;
    }
    body->items[body->count++] = s;
}

static void parse_text(ct_mparser *p, int n_blocks)
{
    while (ct_mp_peek(p)->kind == CT_MT_END)
        ct_mp_next(p);
    if (ct_mp_is_word(ct_mp_peek(p), "model")) {
        ct_mp_next(p);
        if (!ct_mp_expect_name(p, "the model's name after 'model'") ||
            !ct_mp_expect_end(p, "the model name"))
            return;
    }
    if (n_blocks &&
        !(p->text->blocks = ct_mp_alloc(p, (size_t)n_blocks * sizeof *p->text->blocks, 1)))
        return;
    int capacity = 0;
    while (!p->failed) {
        while (ct_mp_peek(p)->kind == CT_MT_END)
            ct_mp_next(p);
        if (ct_mp_peek(p)->kind == CT_MT_EOF)
            return;
        if (ct_mp_is_word(ct_mp_peek(p), "block")) {
            parse_block(p, n_blocks);
            continue;
        }
        ct_mstmt *s = parse_statement(p, false);
        if (s)
            append(p, &p->text->body, &capacity, s);
    }
}

ct_status ct_mtext_parse(const char *text, ct_mtext *out)
{
    memset(out, 0, sizeof *out);
    char name[CT_M_NAME_CAPACITY];
    const char *model_name = scan_model_name(text, name, sizeof name);
    ct_mlexer lex;
    ct_status status = ct_mlex(model_name, text, &lex);
    if (status != CT_OK)
        return status;
    ct_mparser p = {.text = out, .tokens = lex.tokens};
    out->model_name = ct_marena_strndup(&out->arena, model_name, strlen(model_name));
    if (!out->model_name) {
        out->model_name = "model";
        ct_mp_out_of_memory(&p, 1);
    }
    int n_blocks = 0;
    for (int i = 0; i < lex.count; i++)
        n_blocks += ct_mp_is_word(&lex.tokens[i], "block");
    if (!p.failed)
        parse_text(&p, n_blocks);
    ct_mlex_free(&lex);
    if (p.failed) {
        ct_mtext_free(out);
        return p.status;
    }
    return CT_OK;
}
