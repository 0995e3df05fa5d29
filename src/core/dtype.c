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
