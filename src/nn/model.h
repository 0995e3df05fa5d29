/*
 * Model definitions (docs/model-format.md): the syntax tree that
 * model_parse.c makes from a text and model_build.c turns into graph nodes.
 *
 * Parsing checks everything that does not depend on the input (syntax,
 * layer and block names, arguments, where names are needed), so a typo in a
 * branch that this input does not take is still reported.  Building
 * evaluates the expressions and conditions for one input and appends the
 * layers.  Every error is a graph error (ct_graph_fail) that starts with
 * "<model>:<line>: ", where <model> is the name from the text's `model` line
 * ("model" if it has none).
 *
 * All nodes of a parse live in one arena (ct_mtext_free frees them at once),
 * so an error anywhere needs no cleanup.
 */
#ifndef CT_NN_MODEL_H
#define CT_NN_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "cuttle.h"

#define CT_M_MAX_ARGS 8     /* arguments of a layer or block */
#define CT_M_MAX_NAMES 7    /* tensors named by one add/concat (plus the current one) */
#define CT_M_MAX_DEPTH 64   /* nesting of bodies, expressions and block calls */
#define CT_M_MAX_REPEAT 1000
#define CT_M_NAME_CAPACITY 256

/* ---- the layers the format knows (model_build.c has their table) ---- */

typedef enum ct_mlayer {
    CT_ML_CONV = 0,
    CT_ML_LINEAR,
    CT_ML_BN,
    CT_ML_RELU,
    CT_ML_SIGMOID,
    CT_ML_TANH,
    CT_ML_MAXPOOL,
    CT_ML_AVGPOOL,
    CT_ML_GLOBAL_AVGPOOL,
    CT_ML_DROPOUT,
    CT_ML_FLATTEN,
    CT_ML_SOFTMAX,
    CT_ML_COUNT
} ct_mlayer;

typedef struct ct_mlayer_info {
    const char *name;
    bool has_params;                   /* needs a name outside a seq */
    int n_args;
    const char *args[CT_M_MAX_ARGS];   /* in positional order */
    int n_required;                    /* the first n_required args */
    bool pair_ok[CT_M_MAX_ARGS];       /* may be written (a, b) */
} ct_mlayer_info;

const ct_mlayer_info *ct_mlayer_table(void); /* CT_ML_COUNT entries */

/* ---- expressions ---- */

typedef enum ct_mexpr_kind {
    CT_ME_NUMBER = 0,
    CT_ME_NAME,   /* a value, or "<tensor>.channels|height|width" */
    CT_ME_NOT,
    CT_ME_NEG,
    CT_ME_BINARY
} ct_mexpr_kind;

typedef enum ct_mbinop {
    CT_MB_ADD = 0, CT_MB_SUB, CT_MB_MUL, CT_MB_DIV,
    CT_MB_LT, CT_MB_LE, CT_MB_GT, CT_MB_GE, CT_MB_EQ, CT_MB_NE,
    CT_MB_AND, CT_MB_OR
} ct_mbinop;

typedef struct ct_mexpr {
    ct_mexpr_kind kind;
    ct_mbinop op;
    double number;
    const char *name;
    const struct ct_mexpr *a, *b;
    int line;
} ct_mexpr;

/* An argument: one expression, or a pair "(a, b)" (height, width). */
typedef struct ct_marg {
    const ct_mexpr *value[2]; /* value[0] NULL: not given */
    bool pair;
} ct_marg;

/* ---- statements ---- */

typedef enum ct_mstmt_kind {
    CT_MS_LAYER = 0, /* conv, relu, ... */
    CT_MS_CALL,      /* a block */
    CT_MS_SEQ,       /* name: seq ... end */
    CT_MS_ADD,       /* add a b ... */
    CT_MS_CONCAT,    /* concat a b ... */
    CT_MS_IF,
    CT_MS_REPEAT,
    CT_MS_SAVE,      /* save name */
    CT_MS_USE,       /* use name */
    CT_MS_LET,       /* let name = expr */
    CT_MS_FAIL       /* fail "message" */
} ct_mstmt_kind;

typedef struct ct_mstmt ct_mstmt;

typedef struct ct_mbody {
    ct_mstmt **items;
    int count;
} ct_mbody;

struct ct_mstmt {
    ct_mstmt_kind kind;
    int line;
    const char *name;  /* "conv1:" (layer, call, seq); the target of save/use/let */
    const char *from;  /* "on NAME": input instead of the current tensor */
    const char *to;    /* "-> NAME": output kept under NAME, the current one unchanged */
    ct_mlayer layer;   /* CT_MS_LAYER */
    int block;         /* CT_MS_CALL: index into the text's blocks */
    ct_marg args[CT_M_MAX_ARGS]; /* bound to the layer's or block's parameters */
    const char *names[CT_M_MAX_NAMES]; /* add/concat */
    int n_names;
    const ct_mexpr *expr;  /* if/repeat condition or count; let value */
    const char *message;   /* fail */
    ct_mbody body, else_body;
};

typedef struct ct_mblock {
    const char *name;
    int line;
    int n_params;
    const char *params[CT_M_MAX_ARGS];
    const ct_mexpr *defaults[CT_M_MAX_ARGS]; /* NULL: required */
    ct_mbody body;
} ct_mblock;

typedef struct ct_mtext {
    const char *model_name; /* "model resnet18", or "model" */
    ct_mblock *blocks;
    int n_blocks;
    ct_mbody body;
    struct ct_marena *arena;
} ct_mtext;

/* Parse text into *out.  On error records a graph error with the line and
 * returns false (*out is then empty). */
bool ct_mtext_parse(ct_graph *graph, const char *text, ct_mtext *out);
void ct_mtext_free(ct_mtext *text);

/* ---- built-in texts: generated from the models/ files by scripts/embed-models.sh ---- */

typedef struct ct_mbuiltin {
    const char *name; /* "resnet18" for models/resnet18.model */
    const char *text;
} ct_mbuiltin;

extern const ct_mbuiltin ct_mbuiltins[];         /* ends with {NULL, NULL} */
extern const char *const ct_mbuiltin_names[];    /* NULL-terminated */

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

/* Split text into tokens; on error records a graph error with the line. */
bool ct_mlex(ct_graph *graph, const char *model_name, const char *text, ct_mlexer *lex);
void ct_mlex_free(ct_mlexer *lex);

/* ---- the parser's cursor over the tokens (model_lex.c) ---- */

typedef struct ct_mparser {
    ct_graph *graph;
    ct_mtext *text;
    const ct_mtoken *tokens;
    int pos;
    int depth;
    bool failed;
} ct_mparser;

/* Record "<model>:<line>: message" as the graph's error (once); false. */
bool ct_mp_fail(ct_mparser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const ct_mtoken *ct_mp_peek(const ct_mparser *p);
const ct_mtoken *ct_mp_next(ct_mparser *p); /* never past the EOF token */
bool ct_mp_is_word(const ct_mtoken *t, const char *word);
bool ct_mp_is_punct(const ct_mtoken *t, const char *punct);
bool ct_mp_is_keyword(const ct_mtoken *t);
/* "'conv3d'", "the end of the line", ... for messages. */
const char *ct_mp_describe(const ct_mtoken *t, char *buf, size_t capacity);
bool ct_mp_expect_punct(ct_mparser *p, const char *punct, const char *where);
bool ct_mp_expect_end(ct_mparser *p, const char *after); /* a line end or EOF */
const char *ct_mp_copy_token(ct_mparser *p, const ct_mtoken *t); /* into the arena */
const char *ct_mp_expect_name(ct_mparser *p, const char *what); /* not a keyword */
void *ct_mp_alloc(ct_mparser *p, size_t bytes, int line);

/* Arena allocation for the parser (zeroed; NULL when memory runs out). */
void *ct_marena_alloc(struct ct_marena **arena, size_t bytes);
char *ct_marena_strndup(struct ct_marena **arena, const char *s, size_t n);
void ct_marena_free(struct ct_marena *arena);

#endif
