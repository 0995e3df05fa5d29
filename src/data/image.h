/*
 * Image files: PNG (libpng) and JPEG (libjpeg), recognized by their first
 * bytes, decoded into bytes [height, width, channels].
 */
#ifndef CT_DATA_IMAGE_H
#define CT_DATA_IMAGE_H

#include <stdint.h>

#include "cuttle.h"

#define CT_IMAGE_MAX_SIDE 16384 /* a larger side is refused as corrupt or absurd */

typedef struct ct_image {
    uint8_t *pixels; /* [height, width, channels], malloc'ed; free with ct_image_release */
    int height, width, channels;
} ct_image;

/* Decode the PNG or JPEG file at path into `channels` (1 gray, 3 RGB; 0:
 * the file's own, 1 for gray images and 3 for the others).  Alpha is
 * dropped, palettes are expanded, 16-bit samples keep their high byte, RGB
 * becomes gray with ITU-R 601 weights.  CT_ERR_IO, CT_ERR_FORMAT (not a
 * PNG/JPEG, corrupt: the message has the path and the library's words),
 * CT_ERR_UNSUPPORTED (built without the library, CMYK JPEG), CT_ERR_MEMORY.
 * On error out->pixels is NULL. */
ct_status ct_image_decode(const char *path, int channels, ct_image *out);
void ct_image_release(ct_image *image);

/* Bilinear resize of `in` to height x width, written as [channels, height,
 * width] bytes (the dataset layout), rounded to the nearest byte. */
void ct_image_resize_chw(const ct_image *in, int height, int width, uint8_t *out);

#endif
