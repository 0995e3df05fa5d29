/*
 * The allocation functions of a test binary linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc (the
 * Makefile says which): cuttle's own calls reach __wrap_*, which the test
 * defines; __real_* are the C library's.
 */
#ifndef CT_TESTS_ALLOC_WRAP_H
#define CT_TESTS_ALLOC_WRAP_H

#include <stddef.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);

#endif
