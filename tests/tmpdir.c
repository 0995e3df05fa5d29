/* See tmpdir.h.  nftw is XSI, hence _XOPEN_SOURCE. */
#define _XOPEN_SOURCE 700
#include "tmpdir.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMPDIR_PATHS 16
#define TMPDIR_PATH_MAX 1024
#define TMPDIR_OPEN_FDS 16

static char root[TMPDIR_PATH_MAX];

const char *tmpdir_create(const char *name)
{
    snprintf(root, sizeof root, "/tmp/cuttle-%s-XXXXXX", name);
    if (!mkdtemp(root)) {
        fprintf(stderr, "%s: cannot create a temporary directory: %s\n", name, strerror(errno));
        exit(1);
    }
    return root;
}

const char *tmpdir_path(const char *fmt, ...)
{
    static char paths[TMPDIR_PATHS][TMPDIR_PATH_MAX];
    static int next;
    char *path = paths[next];
    next = (next + 1) % TMPDIR_PATHS;
    int length = snprintf(path, TMPDIR_PATH_MAX, "%s/", root);
    va_list args;
    va_start(args, fmt);
    vsnprintf(path + length, TMPDIR_PATH_MAX - (size_t)length, fmt, args);
    va_end(args);
    return path;
}

void tmpdir_mkdirs(const char *path)
{
    char partial[TMPDIR_PATH_MAX];
    snprintf(partial, sizeof partial, "%s", path);
    size_t length = strlen(partial);
    for (size_t i = strlen(root) + 1; i < length; i++)
        if (partial[i] == '/') {
            partial[i] = '\0';
            mkdir(partial, 0700);
            partial[i] = '/';
        }
    if (mkdir(partial, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", partial, strerror(errno));
        exit(1);
    }
}

void tmpdir_write(const char *path, const void *bytes, size_t n)
{
    char parent[TMPDIR_PATH_MAX];
    snprintf(parent, sizeof parent, "%s", path);
    *strrchr(parent, '/') = '\0';
    tmpdir_mkdirs(parent);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static int remove_entry(const char *path, const struct stat *info, int flag, struct FTW *ftw)
{
    (void)info;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tmpdir_remove(void)
{
    if (root[0] && nftw(root, remove_entry, TMPDIR_OPEN_FDS, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "cannot remove %s: %s\n", root, strerror(errno));
    root[0] = '\0';
}
