/*
 * Temporary files for tests: one mkdtemp directory per test binary, paths
 * in it, small writers, and removal of the whole tree at the end.
 */
#ifndef CT_TESTS_TMPDIR_H
#define CT_TESTS_TMPDIR_H

#include <stddef.h>

/* Create /tmp/cuttle-<name>-XXXXXX (exits the test on failure). */
const char *tmpdir_create(const char *name);
/* "<tmpdir>/<relative>", formatted; valid until 16 more calls. */
const char *tmpdir_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* mkdir -p of a path inside the directory (absolute, from tmpdir_path). */
void tmpdir_mkdirs(const char *path);
/* Write bytes to a path, creating its folders (exits the test on failure). */
void tmpdir_write(const char *path, const void *bytes, size_t n);
/* Remove the directory and everything in it. */
void tmpdir_remove(void);

#endif
