/*
 * Atomic file writes (atomic_file.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "io/atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* Bytes the writes may still put on the disk before it is "full" (tests). */
static _Atomic size_t write_budget = SIZE_MAX;

void ct_io_fail_writes_after(size_t bytes)
{
    write_budget = bytes;
}

/* fwrite, as a disk with write_budget bytes left would do it: the part that
 * fits, then ENOSPC. */
static bool write_chunk(FILE *stream, const void *data, size_t bytes)
{
    size_t budget = write_budget, fits = bytes < budget ? bytes : budget;
    if (budget != SIZE_MAX)
        write_budget = budget - fits;
    if (fits && fwrite(data, 1, fits, stream) != fits)
        return false;
    if (fits < bytes)
        errno = ENOSPC;
    return fits == bytes;
}

/* Write, flush and fsync the whole file to an open stream. */
static bool write_stream(FILE *stream, int n, const void *const *data, const size_t *bytes)
{
    bool ok = true;
    for (int i = 0; ok && i < n; i++)
        ok = write_chunk(stream, data[i], bytes[i]);
    return ok && fflush(stream) == 0 && fsync(fileno(stream)) == 0;
}

/* Remove "<path>.tmp.<pid>" files that a process killed while saving left
 * behind: those whose process is gone.  A live process's (another save in
 * progress) stays.  Best effort: a folder that cannot be read is skipped. */
static void remove_stale_temps(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t folder_len = slash ? (size_t)(slash - path) + 1 : 0, base_len = strlen(base);
    char folder[4096];
    if (folder_len + 2 > sizeof folder)
        return;
    snprintf(folder, sizeof folder, "%.*s", (int)folder_len, folder_len ? path : "./");
    DIR *dir = opendir(folder);
    for (struct dirent *entry; dir && (entry = readdir(dir));) {
        const char *name = entry->d_name;
        if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(name + base_len + 5, &end, 10);
        if (end == name + base_len + 5 || *end || pid <= 0 || pid == (long)getpid() ||
            kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        char stale[4096 + 256];
        snprintf(stale, sizeof stale, "%s%s", folder, name);
        remove(stale);
    }
    if (dir)
        closedir(dir);
}

/* fsync the directory holding path, so that the rename itself is durable. */
static ct_status sync_directory(const char *who, const char *path)
{
    const char *slash = strrchr(path, '/');
    char *directory = !slash ? strdup(".") : slash == path ? strdup("/")
                                                           : strndup(path, (size_t)(slash - path));
    if (!directory)
        return ct_set_error(CT_ERR_MEMORY, "%s %s: out of memory", who, path);
    int fd = open(directory, O_RDONLY | O_DIRECTORY);
    /* Some file systems cannot sync a directory (EINVAL); nothing to do there. */
    bool ok = fd >= 0 && (fsync(fd) == 0 || errno == EINVAL || errno == ENOTSUP);
    int saved_errno = errno;
    if (fd >= 0)
        close(fd);
    free(directory);
    if (!ok)
        return ct_set_error(CT_ERR_IO, "%s: saved, but syncing its directory failed (%s): the "
                            "file may be lost if the machine crashes now", path,
                            strerror(saved_errno));
    return CT_OK;
}

/* Write the file to temp_path and rename it over path; on failure remove
 * temp_path, so that path keeps whatever it held before. */
static ct_status replace_file(const char *path, const char *temp_path, int n,
                              const void *const *data, const size_t *bytes)
{
    FILE *stream = fopen(temp_path, "wb");
    if (!stream)
        return ct_set_error(CT_ERR_IO, "%s: cannot create the temporary file %s: %s: is the "
                            "directory writable?", path, temp_path, strerror(errno));
    bool written = write_stream(stream, n, data, bytes);
    int write_errno = errno;
    if (fclose(stream) != 0 && written) {
        written = false;
        write_errno = errno;
    }
    ct_status status = CT_OK;
    if (!written)
        status = ct_set_error(CT_ERR_IO, "%s: writing %s failed: %s: is the disk full? (the old "
                              "file, if any, is unchanged)", path, temp_path,
                              strerror(write_errno));
    else if (rename(temp_path, path) != 0)
        status = ct_set_error(CT_ERR_IO, "%s: cannot replace it with %s: %s (the old file, if "
                              "any, is unchanged)", path, temp_path, strerror(errno));
    if (status != CT_OK)
        remove(temp_path);
    return status;
}

ct_status ct_write_file_atomic(const char *who, const char *path, int n,
                               const void *const *data, const size_t *bytes)
{
    size_t temp_len = strlen(path) + 32;
    char *temp_path = malloc(temp_len);
    if (!temp_path)
        return ct_set_error(CT_ERR_MEMORY, "%s %s: out of memory", who, path);
    snprintf(temp_path, temp_len, "%s.tmp.%ld", path, (long)getpid());
    remove_stale_temps(path);
    ct_status status = replace_file(path, temp_path, n, data, bytes);
    if (status == CT_OK)
        status = sync_directory(who, path);
    free(temp_path);
    return status;
}
