/*
 * For fuzz targets whose parser takes a path: the input written to a file
 * of this process's own (one per target and process), rewritten each run.
 */
#ifndef CT_TESTS_FUZZ_FILE_H
#define CT_TESTS_FUZZ_FILE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_dir_path[64];

/* At exit: the folder and what the runs left in it. */
static void fuzz_dir_remove(void)
{
    DIR *dir = opendir(fuzz_dir_path);
    struct dirent *entry;
    char path[160];
    while (dir && (entry = readdir(dir)))
        if (entry->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", fuzz_dir_path, entry->d_name);
            unlink(path);
        }
    if (dir)
        closedir(dir);
    rmdir(fuzz_dir_path);
}

/* A folder of this process's own, made once: "/dev/shm/cuttle-fuzz-<pid>"
 * (memory: a file rewritten millions of times never reaches a disk), or
 * under /tmp where there is no /dev/shm; removed when the process exits
 * (not after a crash: libFuzzer keeps the crashing input itself). */
static inline const char *fuzz_dir(void)
{
    char *dir = fuzz_dir_path;
    if (!dir[0]) {
        struct stat shm;
        const char *root = stat("/dev/shm", &shm) == 0 && S_ISDIR(shm.st_mode) ? "/dev/shm"
                                                                                : "/tmp";
        snprintf(dir, sizeof fuzz_dir_path, "%s/cuttle-fuzz-%ld", root, (long)getpid());
        if (mkdir(dir, 0700) == 0)
            atexit(fuzz_dir_remove);
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
