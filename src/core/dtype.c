#include <string.h>

#include "core/error.h"
#include "cuttle.h"

size_t ct_dtype_size(ct_dtype dtype)
{
    switch (dtype) {
    case CT_F32: return 4;
    case CT_F16: return 2;
    case CT_BF16: return 2;
    case CT_I8: return 1;
    case CT_U8: return 1;
    case CT_I32: return 4;
    case CT_I64: return 8;
    case CT_DTYPE_COUNT: break;
    }
    return 0;
}

const char *ct_dtype_name(ct_dtype dtype)
{
    switch (dtype) {
    case CT_F32: return "f32";
    case CT_F16: return "f16";
    case CT_BF16: return "bf16";
    case CT_I8: return "i8";
    case CT_U8: return "u8";
    case CT_I32: return "i32";
    case CT_I64: return "i64";
    case CT_DTYPE_COUNT: break;
    }
    return "?";
}

static const char *const precision_names[CT_PRECISION_COUNT] = {
    [CT_PRECISION_FP32] = "fp32",
    [CT_PRECISION_TF32] = "tf32",
    [CT_PRECISION_BF16] = "bf16",
    [CT_PRECISION_FP16] = "fp16",
};

const char *ct_precision_name(ct_precision precision)
{
    return (int)precision >= 0 && precision < CT_PRECISION_COUNT ? precision_names[precision]
                                                                 : "?";
}

ct_status ct_precision_parse(const char *name, ct_precision *out)
{
    for (int p = 0; name && p < CT_PRECISION_COUNT; p++) {
        if (strcmp(name, precision_names[p]) == 0) {
            *out = (ct_precision)p;
            return CT_OK;
        }
    }
    return ct_set_error(CT_ERR_ARG,
                        "unknown precision '%s': the choices are fp32 (the default), tf32 "
                        "(f32 with TF32 tensor-core math on a GPU), bf16 and fp16 (16-bit "
                        "activations, f32 weights and accumulation)",
                        name ? name : "(null)");
}
