/*
 * cuttle — the command-line program.  Subcommands arrive with their issues;
 * this version has `version` and `help`.
 */
#include <stdio.h>
#include <string.h>

#include "cuttle.h"

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: cuttle <command> [options]\n"
            "\n"
            "commands:\n"
            "  version    print the version of cuttle\n"
            "  help       show this help\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        print_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("cuttle %s\n", ct_version());
        return 0;
    }
    fprintf(stderr, "cuttle: unknown command '%s' (see cuttle --help)\n", argv[1]);
    return 2;
}
