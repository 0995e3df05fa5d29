/*
 * cuttle — the command-line program: one binary, one subcommand per job.
 * Each subcommand parses its own options (tools/cli.h); exit status 0 on
 * success, 1 when the library fails, 2 for a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lib_internal.h"

int cmd_doctor(int argc, char **argv); /* tools/cmd_doctor.c */

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: cuttle <command> [options]\n"
            "\n"
            "commands:\n"
            "  train      train a model on a dataset and report its test accuracy\n"
            "  eval       accuracy and loss of saved weights on a dataset\n"
            "  predict    top classes of saved weights for images or dataset items\n"
            "  bench      time a model's training or inference step on synthetic data\n"
            "  profile    time every op of a step; per-op table and Chrome trace\n"
            "  plot       draw the loss, accuracy and learning rate of runs as an SVG chart\n"
            "  export     write saved weights and their model as an ONNX file\n"
            "  optimize   fold batchnorms, drop dropout: a faster inference model (ONNX)\n"
            "  quantize   post-training INT8 on the CPU: calibrate, report, evaluate\n"
            "  prune      remove conv channels or zero small weights, fine-tune, save\n"
            "  doctor     check the GPU, drivers and libraries (exit status 3: no GPU)\n"
            "  version    print the version of cuttle\n"
            "  help       show this help\n"
            "\n"
            "cuttle <command> --help lists the options of a command, e.g.\n"
            "  cuttle train --model simplecnn --data fashion-mnist --epochs 15\n"
            "  cuttle eval --weights runs/simplecnn-fashion-mnist/model.safetensors\n"
            "  cuttle predict --weights runs/simplecnn-fashion-mnist/model.safetensors "
            "fashion-mnist:test:0-4\n"
            "  cuttle plot runs/simplecnn-fashion-mnist\n");
}

/* Where OpenBLAS took kernels without AVX2 on a CPU that has them (a
 * model it does not know: src/cpu/blas_core.h), run this program again
 * with OPENBLAS_CORETYPE set, which it reads as it loads; set already,
 * the check says nothing, so this happens once.  If the program cannot
 * be run again, it goes on with the kernels it has. */
static void use_openblas_vector_kernels(char **argv)
{
    const char *core = ct_cpu_blas_better_core();
    if (!core || setenv("OPENBLAS_CORETYPE", core, 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
}

int main(int argc, char **argv)
{
    use_openblas_vector_kernels(argv);
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *command = argv[1];
    if (strcmp(command, "help") == 0 || strcmp(command, "--help") == 0 ||
        strcmp(command, "-h") == 0) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "version") == 0 || strcmp(command, "--version") == 0) {
        printf("cuttle %s\n", ct_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(command, "train") == 0)
        return cmd_train(argc - 2, argv + 2);
    if (strcmp(command, "eval") == 0)
        return cmd_eval(argc - 2, argv + 2);
    if (strcmp(command, "predict") == 0)
        return cmd_predict(argc - 2, argv + 2);
    if (strcmp(command, "bench") == 0)
        return cmd_bench(argc - 2, argv + 2);
    if (strcmp(command, "profile") == 0)
        return cmd_profile(argc - 2, argv + 2);
    if (strcmp(command, "plot") == 0)
        return cmd_plot(argc - 2, argv + 2);
    if (strcmp(command, "export") == 0)
        return cmd_export(argc - 2, argv + 2);
    if (strcmp(command, "optimize") == 0)
        return cmd_optimize(argc - 2, argv + 2);
    if (strcmp(command, "quantize") == 0)
        return cmd_quantize(argc - 2, argv + 2);
    if (strcmp(command, "prune") == 0)
        return cmd_prune(argc - 2, argv + 2);
    if (strcmp(command, "doctor") == 0)
        return cmd_doctor(argc - 2, argv + 2);
    fprintf(stderr, "cuttle: unknown command '%s' (see cuttle --help)\n", command);
    return CLI_EXIT_USAGE;
}
