/*
 * libFuzzer target: the strict JSON reader (run files, metrics, settings,
 * safetensors headers) at the depths cuttle uses.  May be refused; may not
 * crash or leak.
 */
#include <stdint.h>

#include "io/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ct_json_doc doc = {0};
    ct_json_error error;
    if (ct_json_parse((const char *)data, size, 8, &doc, &error) == CT_OK)
        ct_json_free(&doc);
    return 0;
}
