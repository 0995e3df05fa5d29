/* Loading cuBLAS, cuDNN and NCCL at first use (vendor_api.h). */
#define CT_VENDOR_API_TABLES
#include "cuda/vendor_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"

#define CT_STR_(x) #x
#define CT_STR(x) CT_STR_(x)

/* The emulated build resolves the same names in its shims. */
#ifdef CUDA_EMU
#define open_library(path) cuda_emu_dlopen(path)
#define find_symbol(library, name) cuda_emu_dlsym(library, name)
#define loader_error() cuda_emu_dlerror()
#else
#define open_library(path) dlopen(path, RTLD_NOW | RTLD_LOCAL)
#define find_symbol(library, name) dlsym(library, name)
#define loader_error() dlerror()
#endif

#if defined(CT_HAVE_CUBLAS) || defined(CT_HAVE_CUDNN) || defined(CT_HAVE_NCCL)
typedef struct vendor_library {
    const char *name;     /* "cuBLAS" */
    const char *variable; /* names another file */
    const char *soname;
    const char *uses;     /* what runs without it */
    pthread_once_t once;
    void *handle;
    bool loaded;
    char why[640];
} vendor_library;

/* Opens the library's file, or says why not (false). */
static bool open_vendor(vendor_library *lib)
{
    const char *path = getenv(lib->variable);
    if (!path || !*path)
        path = lib->soname;
    lib->handle = open_library(path);
    if (!lib->handle)
        snprintf(lib->why, sizeof lib->why,
                 "%s could not be loaded (%s); %s (set %s to the library's path if it is "
                 "installed elsewhere)",
                 lib->name, loader_error(), lib->uses, lib->variable);
    return lib->handle != NULL;
}

/* *slot = the symbol, or false with why. */
static bool find_vendor(vendor_library *lib, const char *name, void **slot)
{
    *slot = find_symbol(lib->handle, name);
    if (!*slot)
        snprintf(lib->why, sizeof lib->why,
                 "%s was loaded but lacks %s (%s): not the major version %s was built "
                 "for?; %s",
                 lib->name, name, loader_error(), lib->soname, lib->uses);
    return *slot != NULL;
}

#define CT_VENDOR_FIND(name)                                                                 \
    if (!find_vendor(lib, #name, (void **)&table->name))                                     \
        return;
#endif

#ifdef CT_HAVE_CUBLAS
ct_cublas_api ct_cublas;
static vendor_library cublas_library = {
    "cuBLAS", "CUTTLE_CUBLAS", "libcublas.so." CT_STR(CUBLAS_VER_MAJOR),
    "the linear layers run cuttle's own kernels", PTHREAD_ONCE_INIT, NULL, false, {0}};

static void load_cublas(void)
{
    vendor_library *lib = &cublas_library;
    ct_cublas_api *table = &ct_cublas;
    if (!open_vendor(lib))
        return;
    CT_CUBLAS_FUNCTIONS(CT_VENDOR_FIND)
    lib->loaded = true;
}

const char *ct_cublas_why(void)
{
    pthread_once(&cublas_library.once, load_cublas);
    return cublas_library.loaded ? NULL : cublas_library.why;
}
#else
const char *ct_cublas_why(void)
{
    return "this build has no cuBLAS (cublas_v2.h was not found); the linear layers run "
           "cuttle's own kernels";
}
#endif

#ifdef CT_HAVE_CUDNN
ct_cudnn_api ct_cudnn;
static vendor_library cudnn_library = {
    "cuDNN", "CUTTLE_CUDNN", "libcudnn.so." CT_STR(CUDNN_MAJOR),
    "convolution and pooling run cuttle's own kernels", PTHREAD_ONCE_INIT, NULL, false, {0}};

static void load_cudnn(void)
{
    vendor_library *lib = &cudnn_library;
    ct_cudnn_api *table = &ct_cudnn;
    if (!open_vendor(lib))
        return;
    CT_CUDNN_FUNCTIONS(CT_VENDOR_FIND)
    lib->loaded = true;
}

const char *ct_cudnn_why(void)
{
    pthread_once(&cudnn_library.once, load_cudnn);
    return cudnn_library.loaded ? NULL : cudnn_library.why;
}
#else
const char *ct_cudnn_why(void)
{
    return "this build has no cuDNN (cudnn.h was not found); convolution and pooling run "
           "cuttle's own kernels";
}
#endif

#ifdef CT_HAVE_NCCL
ct_nccl_api ct_nccl;
static vendor_library nccl_library = {
    "NCCL", "CUTTLE_NCCL", "libnccl.so." CT_STR(NCCL_MAJOR),
    "data-parallel training on GPUs needs it (training on one GPU does not)",
    PTHREAD_ONCE_INIT, NULL, false, {0}};

static void load_nccl(void)
{
    vendor_library *lib = &nccl_library;
    ct_nccl_api *table = &ct_nccl;
    if (!open_vendor(lib))
        return;
    CT_NCCL_FUNCTIONS(CT_VENDOR_FIND)
    lib->loaded = true;
}

const char *ct_nccl_why(void)
{
    pthread_once(&nccl_library.once, load_nccl);
    return nccl_library.loaded ? NULL : nccl_library.why;
}
#else
const char *ct_nccl_why(void)
{
    return "this build has no NCCL (nccl.h was not found with the CUDA toolkit); "
           "data-parallel training on GPUs needs it";
}
#endif

/* All three answer from the reason, which the first call finds out. */
ct_status ct_cublas_load(void)
{
    const char *why = ct_cublas_why();
    return why ? ct_set_error(CT_ERR_UNSUPPORTED, "%s", why) : CT_OK;
}

ct_status ct_cudnn_load(void)
{
    const char *why = ct_cudnn_why();
    return why ? ct_set_error(CT_ERR_UNSUPPORTED, "%s", why) : CT_OK;
}

ct_status ct_nccl_load(void)
{
    const char *why = ct_nccl_why();
    return why ? ct_set_error(CT_ERR_UNSUPPORTED, "%s", why) : CT_OK;
}
