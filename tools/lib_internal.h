/*
 * The parts of the library's inside that the command line uses: the
 * strict JSON reader and string escaper of src/io/json.h (run files,
 * metrics and resumed runs are JSON, like safetensors headers), and the
 * OpenBLAS kernel check below.
 *
 * tools/ is compiled with include/ and tools/ on its include path only, so
 * every other private header is out of reach; this file names the
 * exception.  The JSON reader is not public API: it is a file-format helper
 * whose shape may change, and a DL library's users should not depend on it.
 * The CLI links the static library, where hidden symbols still resolve.
 */
#ifndef CT_TOOLS_LIB_INTERNAL_H
#define CT_TOOLS_LIB_INTERNAL_H

#include "../src/io/json.h"

/* And which of OpenBLAS's kernel sets runs (src/cpu/blas_core.h): the
 * command runs itself again with OPENBLAS_CORETYPE where OpenBLAS did not
 * recognize the CPU, and the doctor reports it. */
#include "../src/cpu/blas_core.h"

#endif
