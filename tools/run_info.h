/*
 * What a checkpoint says about its model, so that eval and predict need
 * nothing else: the model's definition text, its input shape, the
 * normalization its images went through, the class names and the dataset.
 *
 * In model.safetensors these are "__metadata__" strings:
 *   cuttle_version  "0.1.0"
 *   model_name      "simplecnn"
 *   model           the definition text (docs/model-format.md)
 *   input           "[1, 28, 28]"               channels, height, width
 *   mean, std       "[0.286, ...]"              per channel
 *   classes         "[\"T-shirt/top\", ...]"    names, by label
 *   dataset         "fashion-mnist" (absent for a model not trained by cuttle)
 *   epoch           "15"
 */
#ifndef CUTTLE_TOOLS_RUN_INFO_H
#define CUTTLE_TOOLS_RUN_INFO_H

#include "cli.h"

#define RUN_MAX_CHANNELS 4
#define RUN_META_CAPACITY 24

typedef struct run_info {
    char *name, *text, *dataset;
    int input[3]; /* channels, height, width */
    int classes;
    float mean[RUN_MAX_CHANNELS], std[RUN_MAX_CHANNELS];
    char **class_names; /* classes entries */
    ct_onnx *onnx;      /* an ONNX model (text is then NULL): its weights are inside */
} run_info;

/* From a training run: the model and the training split that fed it. */
int run_info_from_dataset(const char *command, const char *model_name, const char *model_text,
                          const char *dataset_name, const ct_dataset *data, run_info *info);
/* A model nothing describes: no normalization (mean 0, std 1), classes
 * named "0", "1", ..., no dataset; text may be NULL (an ONNX model). */
int run_info_plain(const char *command, const char *name, const char *text, const int input[3],
                   int classes, run_info *info);
/* From a checkpoint's metadata; `path` is for messages. */
int run_info_read(const char *command, const ct_checkpoint *checkpoint, const char *path,
                  run_info *info);
void run_info_free(run_info *info);

/* What eval, predict and export start from: a checkpoint and its model.  A
 * checkpoint written by cuttle train describes itself; for a plain
 * state_dict (from PyTorch, say) `model` names the model, and `data` the
 * dataset that gives the input shape, classes and normalization (or
 * `input` "CxHxW" and `classes`: no normalization, classes by number).
 * `model` may be given to override the checkpoint's.  An ONNX file as
 * `model` needs no weights (*checkpoint stays NULL): its own metadata, or
 * `data`, or nothing describe it. */
typedef struct run_source {
    const char *weights, *model, *data, *data_dir, *input;
    long classes;
} run_source;
int run_info_open(const char *command, const run_source *src, ct_checkpoint **checkpoint,
                  run_info *info);

/* The cli_option entries that describe a plain state_dict (--data,
 * --data-dir, --input, --classes), bound to the fields of that name of the
 * struct `o` (data, data_dir, input: const char *; classes: long). */
#define RUN_SOURCE_OPTIONS(o)                                                              \
    {"--data", "NAME", CLI_TEXT, &(o).data, 0, 0, cli_datasets,                            \
     "for a plain state_dict: the dataset that gives input, classes and normalization"},   \
    {"--data-dir", "DIR", CLI_TEXT, &(o).data_dir, 0, 0, NULL,                             \
     "where that dataset's files are (default: Debian's place for fashion-mnist)"},        \
    {"--input", "CxHxW", CLI_TEXT, &(o).input, 0, 0, NULL,                                 \
     "for a plain state_dict without --data: the input's channels x height x width"},      \
    {"--classes", "K", CLI_INT, &(o).classes, 2, 100000, NULL,                             \
     "for a plain state_dict without --data: the number of classes"}

/* Metadata pairs whose strings this owns. */
typedef struct run_meta {
    ct_meta items[RUN_META_CAPACITY];
    char *owned[RUN_META_CAPACITY];
    int n;
} run_meta;

/* Add a pair; the value is copied.  Returns false when memory or capacity
 * runs out. */
bool run_meta_add(run_meta *meta, const char *key, const char *value);
/* The model's pairs (all of the list above but epoch). */
bool run_meta_add_info(run_meta *meta, const run_info *info);
void run_meta_free(run_meta *meta);

#endif
