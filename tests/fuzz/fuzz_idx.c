/*
 * libFuzzer target: IDX image and label files (MNIST's format, raw or
 * gzipped).  The first byte of the input says where the images file ends
 * and the labels file begins (as a share of the rest); both are loaded as
 * a dataset of 10 classes.  May be refused; may not crash or leak.
 */
#include <stdint.h>

#include "cuttle.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t rest = size - 1, split = rest * data[0] / 255;
    const char *images = fuzz_file("images-idx3-ubyte", data + 1, split);
    const char *labels = fuzz_file("labels-idx1-ubyte", data + 1 + split, rest - split);
    ct_dataset *dataset = NULL;
    if (images && labels && ct_dataset_load_idx(images, labels, 10, &dataset) == CT_OK &&
        ct_dataset_size(dataset) > 0) {
        int64_t index = 0;
        float pixels[28 * 28 * 4];
        int64_t label;
        if ((size_t)ct_dataset_height(dataset) * ct_dataset_width(dataset) *
                ct_dataset_channels(dataset) <= sizeof pixels / sizeof pixels[0])
            ct_dataset_batch(dataset, &index, 1, pixels, &label);
    }
    ct_dataset_free(dataset);
    return 0;
}
