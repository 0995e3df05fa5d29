/*
 * Model texts: the built-in ones (compiled in from the files in models/) and
 * files.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "nn/model.h"

#define CT_MODEL_MAX_BYTES (16 << 20)

const char *ct_model_builtin(const char *name)
{
    for (int i = 0; name && ct_mbuiltins[i].name; i++)
        if (strcmp(ct_mbuiltins[i].name, name) == 0)
            return ct_mbuiltins[i].text;
    return NULL;
}

const char *const *ct_model_builtin_names(void)
{
    return ct_mbuiltin_names;
}

static void list_builtins(char *out, size_t capacity)
{
    out[0] = '\0';
    for (int i = 0; ct_mbuiltin_names[i]; i++)
        snprintf(out + strlen(out), capacity - strlen(out), "%s%s", i ? ", " : "",
                 ct_mbuiltin_names[i]);
}

ct_status ct_model_source(const char *name_or_path, char **text)
{
    if (!text)
        return ct_set_error(CT_ERR_ARG, "ct_model_source: text is NULL");
    *text = NULL;
    if (!name_or_path)
        return ct_set_error(CT_ERR_ARG, "ct_model_source: the name is NULL");
    const char *builtin = ct_model_builtin(name_or_path);
    if (builtin) {
        *text = malloc(strlen(builtin) + 1);
        if (!*text)
            return ct_set_error(CT_ERR_MEMORY, "model '%s': out of memory", name_or_path);
        memcpy(*text, builtin, strlen(builtin) + 1);
        return CT_OK;
    }
    FILE *f = fopen(name_or_path, "rb");
    if (!f) {
        char names[512];
        list_builtins(names, sizeof names);
        return ct_set_error(CT_ERR_IO,
                            "model '%s' is neither a built-in model (%s) nor a "
                            "readable file: %s",
                            name_or_path, names, strerror(errno));
    }
    size_t n = 0, capacity = 0;
    char *buffer = NULL;
    bool too_big = false;
    while (!too_big) {
        if (capacity - n < 2) {
            capacity = capacity ? 2 * capacity : 65536;
            char *grown = realloc(buffer, capacity);
            if (!grown) {
                free(buffer);
                fclose(f);
                return ct_set_error(CT_ERR_MEMORY, "model file %s: out of memory", name_or_path);
            }
            buffer = grown;
        }
        size_t got = fread(buffer + n, 1, capacity - n - 1, f);
        if (got == 0)
            break;
        n += got;
        too_big = n > CT_MODEL_MAX_BYTES;
    }
    bool read_error = ferror(f) != 0;
    fclose(f);
    ct_status status = CT_OK;
    if (read_error)
        status =
            ct_set_error(CT_ERR_IO, "model file %s: read error (is it a directory?)", name_or_path);
    else if (too_big)
        status = ct_set_error(CT_ERR_FORMAT,
                              "model file %s is larger than %d MiB: not a model "
                              "text",
                              name_or_path, CT_MODEL_MAX_BYTES >> 20);
    else if (memchr(buffer, '\0', n))
        status = ct_set_error(CT_ERR_FORMAT, "model file %s holds a NUL byte: not a model text",
                              name_or_path);
    if (status != CT_OK) {
        free(buffer);
        return status;
    }
    buffer[n] = '\0';
    *text = buffer;
    return CT_OK;
}
