/*
 * For fuzz targets whose parser takes a path: the input written to a file
 * of this process's own (one per target and process), rewritten each run.
 */
#ifndef CT_TESTS_FUZZ_FILE_H
#define CT_TESTS_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* A folder of this process's own, made once: "/tmp/cuttle-fuzz-<pid>". */
static inline const char *fuzz_dir(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/cuttle-fuzz-%ld", (long)getpid());
        mkdir(dir, 0700);
    }
    return dir;
}

/* Write data[0, size) to "<fuzz_dir>/<name>"; its path, or NULL. */
static inline const char *fuzz_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[16][160];
    static int next;
    char *out = path[next++ % 16];
    snprintf(out, sizeof path[0], "%s/%s", fuzz_dir(), name);
    FILE *file = fopen(out, "wb");
    if (!file)
        return NULL;
    size_t written = size ? fwrite(data, 1, size, file) : 0;
    return fclose(file) == 0 && written == size ? out : NULL;
}

#endif
