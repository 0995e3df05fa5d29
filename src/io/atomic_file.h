/*
 * Writing a file so that a crash or an error at any point leaves either the
 * old file or the new one, never half: the data goes to "<path>.tmp.<pid>"
 * beside it, is flushed and fsynced, renamed over path, and the directory
 * is fsynced.  On failure the temporary file is removed and an existing
 * file at path is left as it was.  Checkpoints and ONNX exports use it.
 * Before writing, temporary files of the same path whose process is gone
 * (killed while saving) are removed.
 */
#ifndef CT_IO_ATOMIC_FILE_H
#define CT_IO_ATOMIC_FILE_H

#include <stddef.h>

#include "cuttle.h"

/* Write the chunks data[0..n) of bytes[0..n) bytes, back to back, as the
 * file at path.  `who` starts the messages ("ct_st_save"). */
ct_status ct_write_file_atomic(const char *who, const char *path, int n,
                               const void *const *data, const size_t *bytes);

/* Tests: from now on, writes put at most `bytes` more bytes on the disk and
 * then fail with ENOSPC, as a full disk would; SIZE_MAX: no limit. */
void ct_io_fail_writes_after(size_t bytes);

#endif
