/*
 * The emulated build's dlopen for the vendor libraries (cuda_runtime_api.h):
 * src/cuda/vendor_api.c loads cuBLAS, cuDNN and NCCL through these, so the
 * emulated suite runs the same loading code a GPU machine does, and the
 * tests can make a library "missing" (CUTTLE_CUBLAS=/nonexistent).
 */
#include <string.h>

#include <string>

#define CT_VENDOR_API_TABLES /* the functions themselves, not the loaded tables */
#include "cuda/vendor_api.h"

namespace {

struct symbol {
    const char *name;
    void *address;
};

#define CT_EMU_SYMBOL(name) {#name, (void *)&name},
const symbol cublas_symbols[] = {CT_CUBLAS_FUNCTIONS(CT_EMU_SYMBOL)};
const symbol cudnn_symbols[] = {CT_CUDNN_FUNCTIONS(CT_EMU_SYMBOL)};
#ifdef CT_HAVE_NCCL
const symbol nccl_symbols[] = {CT_NCCL_FUNCTIONS(CT_EMU_SYMBOL)};
#endif
#undef CT_EMU_SYMBOL

#define CT_EMU_STR_(x) #x
#define CT_EMU_STR(x) CT_EMU_STR_(x)

struct library {
    const char *soname;
    const symbol *symbols;
    size_t count;
};
const library libraries[] = {
    {"libcublas.so." CT_EMU_STR(CUBLAS_VER_MAJOR), cublas_symbols,
     sizeof cublas_symbols / sizeof cublas_symbols[0]},
    {"libcudnn.so." CT_EMU_STR(CUDNN_MAJOR), cudnn_symbols,
     sizeof cudnn_symbols / sizeof cudnn_symbols[0]},
#ifdef CT_HAVE_NCCL
    {"libnccl.so." CT_EMU_STR(NCCL_MAJOR), nccl_symbols,
     sizeof nccl_symbols / sizeof nccl_symbols[0]},
#endif
};

thread_local std::string last_error;

} // namespace

extern "C" {

void *cuda_emu_dlopen(const char *path)
{
    for (const library &l : libraries)
        if (strcmp(path, l.soname) == 0)
            return (void *)&l;
    std::string have;
    size_t count = sizeof libraries / sizeof libraries[0];
    for (size_t i = 0; i < count; i++)
        have += std::string(i == 0 ? "" : i + 1 == count ? " and " : ", ") + libraries[i].soname;
    last_error = std::string(path) + ": cannot open shared object file: No such file or "
                                     "directory (the emulator has " +
                 have + ")";
    return nullptr;
}

void *cuda_emu_dlsym(void *handle, const char *name)
{
    const library *l = (const library *)handle;
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->symbols[i].name, name) == 0)
            return l->symbols[i].address;
    last_error = std::string(l->soname) + ": undefined symbol: " + name;
    return nullptr;
}

const char *cuda_emu_dlerror(void)
{
    return last_error.c_str();
}

} // extern "C"
