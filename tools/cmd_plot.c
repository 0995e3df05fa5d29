/*
 * cuttle plot RUN_DIR... [-o FILE]: the loss, accuracy and learning rate per
 * epoch of training runs (their metrics.jsonl) as an SVG chart (plot.h).
 * One run: RUN_DIR/curves.svg by default.  Several: one chart with a
 * colour per run, written where -o says (there is no one run directory to
 * put it in).
 */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plot.h"

static int plot(const char *out_path, char **dirs, int n_dirs)
{
    plot_run *runs = calloc((size_t)n_dirs, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "cuttle plot: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    int exit_status = CLI_EXIT_OK;
    for (int i = 0; i < n_dirs && exit_status == CLI_EXIT_OK; i++)
        exit_status = plot_run_read("plot", dirs[i], &runs[i]);
    char default_path[1100];
    if (exit_status == CLI_EXIT_OK && !out_path) {
        if ((size_t)snprintf(default_path, sizeof default_path, "%s/" PLOT_CURVES_FILE,
                             dirs[0]) >= sizeof default_path) {
            fprintf(stderr, "cuttle plot: the path %s is too long\n", dirs[0]);
            exit_status = CLI_EXIT_USAGE;
        }
        out_path = default_path;
    }
    if (exit_status == CLI_EXIT_OK)
        exit_status = plot_curves_write("plot", runs, n_dirs, out_path);
    if (exit_status == CLI_EXIT_OK) {
        int epochs = 0;
        for (int i = 0; i < n_dirs; i++)
            epochs += runs[i].n_epochs;
        printf("wrote %s (%d run%s, %d epoch%s)\n", out_path, n_dirs, n_dirs == 1 ? "" : "s",
               epochs, epochs == 1 ? "" : "s");
    }
    for (int i = 0; i < n_dirs; i++)
        plot_run_free(&runs[i]);
    free(runs);
    return exit_status;
}

int cmd_plot(int argc, char **argv)
{
    const char *out_path = NULL;
    const cli_option options[] = {
        {"-o", "FILE", CLI_TEXT, &out_path, 0, 0, NULL,
         "the SVG to write (default RUN_DIR/" PLOT_CURVES_FILE " for one run; needed for "
         "several)"},
        {"--out", "FILE", CLI_TEXT, &out_path, 0, 0, NULL, "the same as -o"},
    };
    char **positional = malloc(sizeof *positional * (size_t)(argc > 0 ? argc : 1));
    int n_positional = 0, exit_status = CLI_EXIT_OK;
    if (!positional) {
        fprintf(stderr, "cuttle plot: out of host memory\n");
        exit_status = CLI_EXIT_FAILED;
    }
    cli_parsed parsed = CLI_PARSED_ERROR;
    if (exit_status == CLI_EXIT_OK)
        parsed = cli_parse_positional("plot", "RUN_DIR... [-o FILE]", argc, argv, options,
                                      (int)(sizeof options / sizeof options[0]), positional,
                                      &n_positional);
    if (exit_status == CLI_EXIT_OK && parsed != CLI_PARSED_RUN)
        exit_status = parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    else if (exit_status == CLI_EXIT_OK && n_positional == 0) {
        fprintf(stderr, "cuttle plot: name a run directory (the --out of cuttle train), e.g. "
                        "cuttle plot runs/simplecnn-fashion-mnist\n");
        exit_status = CLI_EXIT_USAGE;
    } else if (exit_status == CLI_EXIT_OK && n_positional > 1 && !out_path) {
        fprintf(stderr, "cuttle plot: %d runs on one chart: say where it goes with -o FILE "
                        "(e.g. -o compare.svg)\n", n_positional);
        exit_status = CLI_EXIT_USAGE;
    } else if (exit_status == CLI_EXIT_OK && !cli_parse_only) {
        exit_status = plot(out_path, positional, n_positional);
    }
    free(positional);
    return exit_status;
}
