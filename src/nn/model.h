/*
 * The built-in model texts: generated from the files in models/ by
 * scripts/embed-models.sh (which includes this header by its name), read by
 * model_source.c.
 */
#ifndef CT_NN_MODEL_H
#define CT_NN_MODEL_H

typedef struct ct_mbuiltin {
    const char *name; /* "resnet18" for models/resnet18.model */
    const char *text;
} ct_mbuiltin;

extern const ct_mbuiltin ct_mbuiltins[];         /* ends with {NULL, NULL} */
extern const char *const ct_mbuiltin_names[];    /* NULL-terminated */

#endif
