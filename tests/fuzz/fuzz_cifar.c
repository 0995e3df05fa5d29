/*
 * libFuzzer target: CIFAR-10's binary format (a label byte and 3072 pixel
 * bytes per image) as the test split of a dataset folder.  May be refused;
 * may not crash or leak.
 */
#include <stdint.h>

#include "cuttle.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_file("test_batch.bin", data, size))
        return 0;
    ct_dataset *dataset = NULL;
    if (ct_dataset_load("cifar10", fuzz_dir(), "test", &dataset) == CT_OK &&
        ct_dataset_size(dataset) > 0) {
        int64_t index = ct_dataset_size(dataset) - 1, label;
        static float pixels[3 * 32 * 32];
        ct_dataset_batch(dataset, &index, 1, pixels, &label);
    }
    ct_dataset_free(dataset);
    return 0;
}
