/*
 * libFuzzer target: the command line of every subcommand.  The input, split
 * at newlines, is the arguments after "cuttle" (its first line the command:
 * train, eval, bench, ...).  Each command parses and checks its options and
 * stops there (cli_parse_only): the option tables, numbers and ranges,
 * choices, --input CxHxW, --augment lists, --device names, recipes, and
 * the commands' own checks of what is required.  May be refused; may not
 * crash or leak.  tests/fuzz/run.sh compiles tools/ into this target with
 * the program's main() renamed cuttle_main, and runs it with stdout and
 * stderr closed (cli.flags): every refusal prints a message.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 64

extern bool cli_parse_only;
int cuttle_main(int argc, char **argv);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2] = {"cuttle"};
    int argc = 1;
    for (char *line = text; line && argc <= MAX_ARGS;) {
        char *newline = strchr(line, '\n');
        if (newline)
            *newline = '\0';
        argv[argc++] = line;
        line = newline ? newline + 1 : NULL;
    }
    argv[argc] = NULL;
    cli_parse_only = true;
    cuttle_main(argc, argv);
    free(text);
    return 0;
}
