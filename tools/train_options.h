/*
 * The options of cuttle train: the table (which --help prints), the two
 * recipes' defaults, the defaults that depend on other options, and the
 * saved options of a resumed run under the command line that resumes it.
 */
#ifndef CUTTLE_TOOLS_TRAIN_OPTIONS_H
#define CUTTLE_TOOLS_TRAIN_OPTIONS_H

#include "cli.h"
#include "run_files.h"

typedef struct train_options {
    const char *recipe, *model, *data, *data_dir, *optim, *schedule, *augment, *device, *kernels,
        *out, *resume, *cuda_graph, *precision;
    long epochs, batch, seed, threads, workers, stop_after, max_steps;
    double lr, weight_decay, momentum, label_smoothing, bucket_mb;
    bool json, strict_device, sync_bn, check_numerics;
} train_options;

/* The options of `cuttle train ARGS` into *opts, over the options saved in
 * --resume's run when it has one, with the defaults filled in (--out's in
 * out_buffer); args gets the arguments that define the run (run_files.h).
 * Returns an exit status; *help: --help was printed (exit 0, run nothing). */
int train_options_parse(train_options *opts, run_args *args, int argc, char **argv,
                        char *out_buffer, size_t capacity, bool *help);

/* The default recipe's options with the learning rate and weight decay
 * filled in, for training without train's command line (cuttle prune's
 * fine-tuning); out stays NULL. */
void train_options_defaults(train_options *opts);

/* --augment: "none" or "crop[:PAD],flip,cutout[:SIZE]". */
bool train_parse_augment(const char *text, ct_augment *out);

#endif
