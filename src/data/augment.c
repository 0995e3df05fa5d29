/*
 * Training augmentation of one item, in torchvision's order:
 * RandomCrop(size, padding=crop_pad) -> RandomHorizontalFlip() ->
 * ToTensor + Normalize -> Cutout(cutout).
 *
 * - The crop pads the raw image with byte 0 (black), as torchvision's
 *   RandomCrop does with its default fill, so a padded pixel becomes
 *   (0 - mean[c]) / std[c] after normalization, not 0.
 * - Cutout (DeVries & Taylor, 2017) zeroes a side x side square of the
 *   normalized image (0 = the mean colour) in every channel; its centre
 *   (cy, cx) is uniform over the pixels, and the square, rows
 *   [cy - side/2, cy - side/2 + side), is clipped at the borders, so near
 *   an edge less than side x side is cut.  (The paper's code uses
 *   [cy - side/2, cy + side/2), the same for the even sides used in
 *   practice, one less for odd ones.)
 *
 * The draws of item i in epoch e are Philox words (seed,
 * CT_RNG_STREAM_AUGMENT, step e, blocks 2i and 2i+1), one word per
 * decision, so the result depends on nothing but (seed, epoch, item), and
 * switching one augmentation on or off leaves the others' draws unchanged:
 *   word 0: crop row offset in [0, 2*crop_pad]   word 1: column offset
 *   word 2: flip when its top bit is set          word 3: unused
 *   word 4: cutout centre row in [0, H)           word 5: centre column
 */
#include <stdbool.h>
#include <stddef.h>

#include "core/rng.h"
#include "data/dataset.h"

#define AUGMENT_WORDS 8
#define FLIP_BIT 0x80000000u

/* A uniform integer in [0, n) from a 32-bit word (n < 2^32). */
static int uniform_below(uint32_t word, int n)
{
    return (int)(((uint64_t)word * (uint64_t)n) >> 32);
}

/* out[c,y,x] = normalized[c][ in[c, y + row_shift, x' + col_shift] ], x' = x
 * or W-1-x (flip), byte 0 outside the image. */
static void crop_flip_normalize(const ct_dataset *ds, const uint8_t *in, int row_shift,
                                int col_shift, bool flip, float *out)
{
    int height = ds->height, width = ds->width;
    for (int c = 0; c < ds->channels; c++) {
        const float *table = ds->normalized[c];
        const uint8_t *plane = in + (size_t)c * (size_t)height * (size_t)width;
        for (int y = 0; y < height; y++) {
            float *row_out = out + ((size_t)c * (size_t)height + (size_t)y) * (size_t)width;
            int source_row = y + row_shift;
            if (source_row < 0 || source_row >= height) {
                for (int x = 0; x < width; x++)
                    row_out[x] = table[0];
                continue;
            }
            const uint8_t *row_in = plane + (size_t)source_row * (size_t)width;
            for (int x = 0; x < width; x++) {
                int source_col = (flip ? width - 1 - x : x) + col_shift;
                row_out[x] = source_col >= 0 && source_col < width ? table[row_in[source_col]]
                                                                   : table[0];
            }
        }
    }
}

/* Zero rows [top, top + side) x columns [left, left + side), clipped. */
static void cut_out(const ct_dataset *ds, int top, int left, int side, float *out)
{
    int y0 = top < 0 ? 0 : top, x0 = left < 0 ? 0 : left;
    int y1 = top + side > ds->height ? ds->height : top + side;
    int x1 = left + side > ds->width ? ds->width : left + side;
    for (int c = 0; c < ds->channels; c++)
        for (int y = y0; y < y1; y++)
            for (int x = x0; x < x1; x++)
                out[((size_t)c * (size_t)ds->height + (size_t)y) * (size_t)ds->width +
                    (size_t)x] = 0.0f;
}

void ct_augment_item(const ct_dataset *ds, const ct_augment *augment, uint64_t seed,
                     int64_t epoch, int64_t item, float *out)
{
    const uint8_t *in = ds->pixels + (size_t)item * ct_dataset_item_bytes(ds);
    uint32_t words[AUGMENT_WORDS] = {0};
    if (augment->crop_pad > 0 || augment->hflip || augment->cutout > 0) {
        ct_philox_block(seed, CT_RNG_STREAM_AUGMENT, (uint32_t)epoch, 2 * (uint64_t)item, words);
        ct_philox_block(seed, CT_RNG_STREAM_AUGMENT, (uint32_t)epoch, 2 * (uint64_t)item + 1,
                        words + 4);
    }
    int pad = augment->crop_pad;
    int row_shift = pad > 0 ? uniform_below(words[0], 2 * pad + 1) - pad : 0;
    int col_shift = pad > 0 ? uniform_below(words[1], 2 * pad + 1) - pad : 0;
    bool flip = augment->hflip && (words[2] & FLIP_BIT);
    crop_flip_normalize(ds, in, row_shift, col_shift, flip, out);
    int side = augment->cutout;
    if (side > 0) {
        int cy = uniform_below(words[4], ds->height), cx = uniform_below(words[5], ds->width);
        cut_out(ds, cy - side / 2, cx - side / 2, side, out);
    }
}
