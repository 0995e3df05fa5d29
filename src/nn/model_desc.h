/*
 * Model descriptions (docs/model-format.md): what a model text says, as a
 * tree.  The parser (model_parse.h) makes one from a text, the builder
 * (model_build.h) turns one into graph nodes; neither knows the other, and
 * this header knows neither: it holds only data, the layer table and the
 * arena that owns a description.
 *
 * Parsing has already checked everything that does not depend on the input
 * (syntax, layer and block names, arguments, where names are needed); the
 * expressions and conditions are left for the builder, which evaluates them
 * for one input.  Every node carries the line it came from, so the builder's
 * errors can say "<model>:<line>: " like the parser's.
 *
 * All nodes of a description live in one arena (ct_mtext_free frees them at
 * once), so an error anywhere needs no cleanup.
 */
#ifndef CT_NN_MODEL_DESC_H
#define CT_NN_MODEL_DESC_H

#include <stdbool.h>
#include <stddef.h>

#define CT_M_MAX_ARGS 8     /* arguments of a layer or block */
#define CT_M_MAX_NAMES 7    /* tensors named by one add/concat (plus the current one) */
#define CT_M_MAX_DEPTH 64   /* nesting of bodies, expressions and block calls */
#define CT_M_NAME_CAPACITY 256

/* ---- the layers the format knows ---- */

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
    CT_ML_CUSTOM, /* custom NAME [attributes]: an op registered with ct_custom_op_register */
    CT_ML_COUNT
} ct_mlayer;

/* A layer's name and arguments.  The parser binds a statement's arguments
 * to these slots; the builder reads ct_mstmt.args by the same positions. */
typedef struct ct_mlayer_info {
    const char *name;
    bool has_params;                   /* needs a name outside a seq */
    int n_args;
    const char *args[CT_M_MAX_ARGS];   /* in positional order */
    int n_required;                    /* the first n_required args */
    bool pair_ok[CT_M_MAX_ARGS];       /* may be written (a, b) */
} ct_mlayer_info;

const ct_mlayer_info *ct_mlayer_table(void); /* CT_ML_COUNT entries; static */

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
    const char *op;    /* CT_ML_CUSTOM: the registered op's name */
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

/* A whole model.  A block calls only blocks before it in blocks[]. */
typedef struct ct_mtext {
    const char *model_name; /* "model resnet18", or "model": the errors' prefix */
    ct_mblock *blocks;
    int n_blocks;
    ct_mbody body;
    struct ct_marena *arena; /* owns every node and string above */
} ct_mtext;

/* Frees the arena and empties *text; an empty text is fine. */
void ct_mtext_free(ct_mtext *text);

/* Arena allocation for the nodes of a ct_mtext (zeroed; NULL when memory
 * runs out).  *arena starts NULL. */
void *ct_marena_alloc(struct ct_marena **arena, size_t bytes);
char *ct_marena_strndup(struct ct_marena **arena, const char *s, size_t n);

#endif
