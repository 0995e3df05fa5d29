/*
 * libFuzzer target: PNG and JPEG files (told by their content), decoded,
 * converted to RGB and resized as an image folder's items are.  May be
 * refused; may not crash or leak.  (libpng and libjpeg are Debian's,
 * uninstrumented: this fuzzes cuttle's use of them.)
 */
#include <stdint.h>

#include "cuttle.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file("image", data, size);
    static float out[3 * 16 * 16];
    if (path)
        ct_image_load(path, 3, 16, 16, NULL, NULL, out);
    return 0;
}
