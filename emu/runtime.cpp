/*
 * The emulated runtime, part one: settings, devices, errors and memory.
 *
 * Device memory is host heap memory (posix_memalign), filled with 0xff
 * bytes (NaN floats) when allocated, as compute-sanitizer's initcheck would
 * flag a read of it, and each device honours a memory cap (CUDA_EMU_MEMORY).
 * A failed kernel leaves a sticky error on its device, as on hardware:
 * every later call fails until cudaDeviceReset.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <thread>

#include "state.h"

namespace emu {

enum : size_t {
    DEFAULT_MEMORY = (size_t)80 << 30, /* H100 SXM: 80 GB */
    DEFAULT_STACK = 64 << 10,
    ASAN_STACK = 512 << 10, /* instrumented frames are larger */
    ALIGNMENT = 256,        /* what cudaMalloc guarantees */
};
enum { DEFAULT_SMS = 132, MAX_DEVICES = 16, POISON_BYTE = 0xff };

#if defined(__SANITIZE_ADDRESS__)
static const size_t stack_default = ASAN_STACK;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
static const size_t stack_default = ASAN_STACK;
#else
static const size_t stack_default = DEFAULT_STACK;
#endif
#else
static const size_t stack_default = DEFAULT_STACK;
#endif

/* ---- settings ------------------------------------------------------------------ */

static std::string settings_error;

/* A positive number with an optional K, M or G (binary) suffix, or 0. */
static uint64_t parse_size(const char *text)
{
    char *end = nullptr;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text)
        return 0;
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    return *end ? 0 : value << shift;
}

static uint64_t size_setting(const char *name, uint64_t fallback, uint64_t most)
{
    const char *text = getenv(name);
    if (!text || !*text)
        return fallback;
    uint64_t value = parse_size(text);
    if (value == 0 || value > most) {
        char message[256];
        snprintf(message, sizeof message, "%s='%s': expected a number from 1 to %llu (K, M, G "
                 "suffixes allowed)", name, text, (unsigned long long)most);
        settings_error = message;
        return fallback;
    }
    return value;
}

static settings read_settings()
{
    settings s;
    s.order = ORDER_FORWARD;
    const char *order = getenv("CUDA_EMU_ORDER");
    if (order && *order) {
        if (strcmp(order, "reverse") == 0)
            s.order = ORDER_REVERSE;
        else if (strcmp(order, "shuffle") == 0)
            s.order = ORDER_SHUFFLE;
        else if (strcmp(order, "forward") != 0)
            settings_error = std::string("CUDA_EMU_ORDER='") + order +
                             "': expected forward, reverse or shuffle";
    }
    unsigned cores = std::thread::hardware_concurrency();
    s.seed = size_setting("CUDA_EMU_SEED", 1, UINT64_MAX);
    s.workers = (int)size_setting("CUDA_EMU_THREADS", cores ? cores : 1, 256);
    s.stack_bytes = size_setting("CUDA_EMU_STACK", stack_default, (uint64_t)64 << 20);
    s.devices = (int)size_setting("CUDA_EMU_DEVICES", 1, MAX_DEVICES);
    s.memory_bytes = size_setting("CUDA_EMU_MEMORY", DEFAULT_MEMORY, (uint64_t)1 << 50);
    s.sm_count = (int)size_setting("CUDA_EMU_SMS", DEFAULT_SMS, 1024);
    s.compute_capability = 90;
    const char *cc = getenv("CUDA_EMU_CC");
    if (cc && *cc) {
        int major = 0, minor = 0;
        char end = 0;
        if (sscanf(cc, "%d.%d%c", &major, &minor, &end) == 2 && major >= 1 && major <= 20 &&
            minor >= 0 && minor <= 9)
            s.compute_capability = major * 10 + minor;
        else
            settings_error = std::string("CUDA_EMU_CC='") + cc +
                             "': expected a compute capability such as 8.0 or 9.0";
    }
    s.nccl_timeout = 60;
    const char *timeout = getenv("CUDA_EMU_NCCL_TIMEOUT");
    if (timeout && *timeout) {
        char *end = nullptr;
        double seconds = strtod(timeout, &end);
        if (end != timeout && !*end && seconds > 0 && seconds <= 86400)
            s.nccl_timeout = seconds;
        else
            settings_error = std::string("CUDA_EMU_NCCL_TIMEOUT='") + timeout +
                             "': expected seconds, more than 0 and at most 86400";
    }
    const char *abort_setting = getenv("CUDA_EMU_ABORT");
    s.abort_on_error = abort_setting && strcmp(abort_setting, "1") == 0;
    return s;
}

const settings &config()
{
    static const settings s = read_settings();
    return s;
}

uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- the runtime and the current device ------------------------------------------- */

runtime &rt()
{
    static runtime *r = [] {
        runtime *made = new runtime; /* lives as long as the process */
        made->config_error = (config(), settings_error);
        made->random = config().seed;
        made->devices.resize((size_t)config().devices);
        for (int d = 0; d < config().devices; d++) {
            stream_state *legacy = new stream_state{made->next_stream_id++, d, true, true, {}, {}};
            made->streams[legacy->id] = legacy;
            made->devices[(size_t)d] = device_state{legacy, 0, cudaSuccess, ""};
        }
        return made;
    }();
    return *r;
}

static thread_local int this_device;

int current_device()
{
    return this_device;
}

/* ---- errors -------------------------------------------------------------------------- */

static thread_local cudaError_t last_error = cudaSuccess;
static thread_local std::string last_detail;
static thread_local cudaError_t detail_for = cudaSuccess;

cudaError_t set_error(cudaError_t error, const std::string &detail)
{
    if (error == cudaSuccess)
        return error;
    last_error = error;
    if (!detail.empty()) {
        last_detail = detail;
        detail_for = error;
    }
    return error;
}

cudaError_t sticky(int device)
{
    runtime &r = rt();
    if (device < 0 || device >= (int)r.devices.size())
        return cudaSuccess;
    const device_state &d = r.devices[(size_t)device];
    return set_error(d.sticky, d.sticky_message);
}

/* Every call starts here: a bad setting fails them all, saying which. */
static cudaError_t ready()
{
    runtime &r = rt();
    if (!r.config_error.empty())
        return set_error(cudaErrorInitializationError, r.config_error);
    return cudaSuccess;
}

} // namespace emu

using namespace emu;

extern "C" {

cudaError_t cudaGetLastError(void)
{
    cudaError_t error = last_error;
    last_error = cudaSuccess;
    cudaError_t stuck = rt().devices.empty() ? cudaSuccess : rt().devices[(size_t)this_device].sticky;
    if (stuck != cudaSuccess)
        last_error = stuck;
    return error;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

struct error_text {
    cudaError_t code;
    const char *name, *text;
};
static const error_text error_texts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress",
     "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources",
     "too many resources requested for launch"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not ended in the same stream as it began"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined",
     "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

static const error_text *text_of(cudaError_t error)
{
    for (const error_text &e : error_texts)
        if (e.code == error)
            return &e;
    return nullptr;
}

const char *cudaGetErrorName(cudaError_t error)
{
    const error_text *e = text_of(error);
    return e ? e->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    static thread_local std::string text;
    const error_text *e = text_of(error);
    text = e ? e->text : "unrecognized error code";
    if (error != cudaSuccess && error == detail_for)
        text += " [cuda-emu: " + last_detail + "]";
    return text.c_str();
}

/* ---- devices ----------------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 0;
    if (ready() != cudaSuccess)
        return last_error;
    *count = (int)rt().devices.size();
    return cudaSuccess;
}

static cudaError_t check_device(int device)
{
    if (ready() != cudaSuccess)
        return last_error;
    if (device < 0 || device >= (int)rt().devices.size())
        return set_error(cudaErrorInvalidDevice,
                         "device " + std::to_string(device) + " of " +
                             std::to_string(rt().devices.size()) +
                             " emulated (CUDA_EMU_DEVICES sets how many)");
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (check_device(device) != cudaSuccess)
        return last_error;
    this_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    *device = this_device;
    return ready();
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int device)
{
    if (check_device(device) != cudaSuccess)
        return last_error;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated H100 (CPU)");
    p->totalGlobalMem = config().memory_bytes;
    p->sharedMemPerBlock = 48 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->totalConstMem = 64 << 10;
    p->major = config().compute_capability / 10;
    p->minor = config().compute_capability % 10;
    p->multiProcessorCount = config().sm_count;
    p->l2CacheSize = 50 << 20;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerMultiprocessor = 65536;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->maxBlocksPerMultiProcessor = 32;
    p->memoryBusWidth = 5120;
    p->pciBusID = device;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, const void *kernel,
                                                          int block_size,
                                                          size_t dynamic_shared_bytes)
{
    (void)kernel;
    enum { ASSUMED_REGISTERS = 32, WARP = 32 };
    *blocks = 0;
    if (ready() != cudaSuccess)
        return last_error;
    if (block_size <= 0 || block_size > 1024)
        return set_error(cudaErrorInvalidValue, "block size " + std::to_string(block_size));
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, this_device);
    int threads = (block_size + WARP - 1) / WARP * WARP;
    int by_threads = p.maxThreadsPerMultiProcessor / threads;
    int by_registers = p.regsPerMultiprocessor / (ASSUMED_REGISTERS * threads);
    int by_shared = dynamic_shared_bytes
                        ? (int)(p.sharedMemPerMultiprocessor / dynamic_shared_bytes)
                        : p.maxBlocksPerMultiProcessor;
    int most = p.maxBlocksPerMultiProcessor;
    *blocks = std::min(std::min(by_threads, by_registers), std::min(by_shared, most));
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attribute, int value)
{
    if (ready() != cudaSuccess)
        return last_error;
    if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return set_error(cudaErrorInvalidValue,
                         "cudaFuncSetAttribute: attribute " + std::to_string((int)attribute) +
                             " is not emulated");
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, this_device);
    if (!kernel || value < 0 || (size_t)value > p.sharedMemPerBlockOptin)
        return set_error(cudaErrorInvalidValue,
                         "cudaFuncSetAttribute: " + std::to_string(value) +
                             " bytes of dynamic shared memory (the device allows 0 to " +
                             std::to_string(p.sharedMemPerBlockOptin) + ")");
    std::lock_guard<runtime_lock> lock(rt().lock);
    rt().max_dynamic_shared[kernel] = value;
    return cudaSuccess;
}

/* ---- memory ------------------------------------------------------------------------------- */

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    *ptr = nullptr;
    if (ready() != cudaSuccess || sticky(this_device) != cudaSuccess)
        return last_error;
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    if (check_unsafe_call("cudaMalloc") != cudaSuccess)
        return last_error;
    device_state &d = r.devices[(size_t)this_device];
    if (bytes > config().memory_bytes - d.in_use)
        return set_error(cudaErrorMemoryAllocation,
                         "cudaMalloc of " + std::to_string(bytes) + " bytes with " +
                             std::to_string(d.in_use) + " of " +
                             std::to_string(config().memory_bytes) +
                             " in use (CUDA_EMU_MEMORY sets the size)");
    void *memory = nullptr;
    if (posix_memalign(&memory, ALIGNMENT, bytes ? bytes : 1) != 0)
        return set_error(cudaErrorMemoryAllocation, "the host is out of memory");
    memset(memory, POISON_BYTE, bytes);
    r.allocations[(uintptr_t)memory] = allocation{bytes, this_device};
    d.in_use += bytes;
    *ptr = memory;
    return cudaSuccess;
}

static cudaError_t free_allocation(void *ptr, bool pinned)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    auto found = r.allocations.find((uintptr_t)ptr);
    if (found == r.allocations.end() || (found->second.device < 0) != pinned) {
        char text[128];
        snprintf(text, sizeof text, "%p is not the start of a live %s allocation", ptr,
                 pinned ? "pinned host" : "device");
        return set_error(pinned ? cudaErrorInvalidValue : cudaErrorInvalidDevicePointer, text);
    }
    if (!pinned)
        r.devices[(size_t)found->second.device].in_use -= found->second.bytes;
    r.allocations.erase(found);
    free(ptr);
    return cudaSuccess;
}

/* Even cudaFree(NULL) is refused during a capture that forbids unsafe
 * calls (the idiom that initializes a context is one). */
cudaError_t cudaFree(void *ptr)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (check_unsafe_call("cudaFree") != cudaSuccess)
        return last_error;
    if (!ptr)
        return cudaSuccess;
    run_all(); /* cudaFree waits for the whole device */
    return free_allocation(ptr, false);
}

static cudaError_t host_alloc(const char *call, void **ptr, size_t bytes)
{
    *ptr = nullptr;
    if (ready() != cudaSuccess)
        return last_error;
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (check_unsafe_call(call) != cudaSuccess)
        return last_error;
    void *memory = nullptr;
    if (posix_memalign(&memory, ALIGNMENT, bytes ? bytes : 1) != 0)
        return set_error(cudaErrorMemoryAllocation, "the host is out of memory");
    rt().allocations[(uintptr_t)memory] = allocation{bytes, -1};
    *ptr = memory;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **ptr, size_t bytes, unsigned flags)
{
    (void)flags;
    return host_alloc("cudaHostAlloc", ptr, bytes);
}

cudaError_t cudaMallocHost(void **ptr, size_t bytes)
{
    return host_alloc("cudaMallocHost", ptr, bytes);
}

cudaError_t cudaFreeHost(void *ptr)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (check_unsafe_call("cudaFreeHost") != cudaSuccess)
        return last_error;
    if (!ptr)
        return cudaSuccess;
    run_all();
    return free_allocation(ptr, true);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (ready() != cudaSuccess)
        return last_error;
    std::lock_guard<runtime_lock> lock(rt().lock);
    *total_bytes = config().memory_bytes;
    *free_bytes = config().memory_bytes - rt().devices[(size_t)this_device].in_use;
    return cudaSuccess;
}

cudaError_t cudaDeviceReset(void)
{
    if (ready() != cudaSuccess)
        return last_error;
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    int device = this_device;
    for (auto it = r.streams.begin(); it != r.streams.end();) {
        stream_state *s = it->second;
        if (s->device == device && !s->legacy) {
            it = r.streams.erase(it);
            delete s;
            continue;
        }
        if (s->device == device)
            s->pending.clear();
        ++it;
    }
    for (auto it = r.allocations.begin(); it != r.allocations.end();) {
        if (it->second.device == device) {
            free((void *)it->first);
            it = r.allocations.erase(it);
        } else {
            ++it;
        }
    }
    r.devices[(size_t)device] = device_state{r.devices[(size_t)device].legacy, 0, cudaSuccess, ""};
    last_error = cudaSuccess;
    return cudaSuccess;
}

/* ---- injected failures ------------------------------------------------------------- */

static std::string failing_calls; /* ",a,b," */
static std::map<std::string, int> failures, calls_made;
static bool failing_read;

void cuda_emu_fail(const char *calls)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    failing_calls = std::string(",") + (calls ? calls : "") + ",";
    failing_read = true;
}

int cuda_emu_failures(const char *call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    auto found = failures.find(call);
    return found == failures.end() ? 0 : found->second;
}

int cuda_emu_calls(const char *call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    auto found = calls_made.find(call);
    return found == calls_made.end() ? 0 : found->second;
}

unsigned long long cuda_emu_kernel_launches(void)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    return rt().launches;
}

} /* extern "C" */

namespace emu {

void report_rejection(const char *function, const char *format, va_list args)
{
    fprintf(stderr, "cuda-emu: %s: ", function);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
}

bool injected_failure(const char *call)
{
    std::lock_guard<runtime_lock> lock(rt().lock);
    if (!failing_read) {
        const char *setting = getenv("CUDA_EMU_FAIL");
        failing_calls = std::string(",") + (setting ? setting : "") + ",";
        failing_read = true;
    }
    calls_made[call]++;
    if (failing_calls.find(std::string(",") + call + ",") == std::string::npos)
        return false;
    failures[call]++;
    return true;
}

const allocation *find_range(const void *ptr, size_t bytes)
{
    runtime &r = rt();
    std::lock_guard<runtime_lock> lock(r.lock);
    auto next = r.allocations.upper_bound((uintptr_t)ptr);
    if (next == r.allocations.begin())
        return nullptr;
    --next;
    uintptr_t start = next->first, p = (uintptr_t)ptr;
    if (p + bytes < p || p + bytes > start + next->second.bytes)
        return nullptr;
    return &next->second;
}

bool is_device_range(const void *ptr, size_t bytes)
{
    const allocation *a = find_range(ptr, bytes);
    return a && a->device >= 0;
}

} // namespace emu
