/*
 * Launch sizes: each device's SM count (set when a backend is made for it)
 * and, per kernel, how many of its blocks fit on one SM (the occupancy API:
 * registers, shared memory and threads of the compiled kernel), so a
 * grid-stride launch fills the device it runs on whatever the kernel.  And
 * each backend stream's tickets (ct_cuda_set_tickets), which split
 * reductions count their finished blocks with.
 */
#include <mutex>

#include "cuda/common.cuh"

enum { MAX_DEVICES = 64, MAX_KERNELS = 128, DEFAULT_SM_COUNT = 16, MAX_STREAMS = 256 };

static int sm_counts[MAX_DEVICES];

struct occupancy {
    const void *kernel;
    int device, blocks_per_sm;
};
static occupancy known[MAX_KERNELS];
static int n_known;
static std::mutex known_lock;

extern "C" void ct_cuda_set_device_info(int device, int sm_count)
{
    if (device >= 0 && device < MAX_DEVICES)
        sm_counts[device] = sm_count;
}

/* The streams with tickets: few (one per backend), so a list. */
struct ticket_book {
    cudaStream_t stream;
    unsigned *tickets;
};
static ticket_book books[MAX_STREAMS];
static std::mutex books_lock;

extern "C" void ct_cuda_set_tickets(cudaStream_t stream, unsigned *tickets)
{
    std::lock_guard<std::mutex> guard(books_lock);
    ticket_book *free_book = nullptr;
    for (ticket_book &book : books) {
        if (book.tickets && book.stream == stream) {
            book.tickets = tickets;
            return;
        }
        if (!book.tickets && !free_book)
            free_book = &book;
    }
    if (tickets && free_book)
        *free_book = ticket_book{stream, tickets};
}

extern "C" unsigned *ct_cuda_tickets(cudaStream_t stream, int64_t count)
{
    if (count > CT_CUDA_TICKETS)
        return nullptr;
    std::lock_guard<std::mutex> guard(books_lock);
    for (const ticket_book &book : books)
        if (book.tickets && book.stream == stream)
            return book.tickets;
    return nullptr;
}

static int current_device()
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= MAX_DEVICES)
        return 0;
    return device;
}

int ct_cuda_sm_count(void)
{
    int count = sm_counts[current_device()];
    return count > 0 ? count : DEFAULT_SM_COUNT;
}

/* Blocks of `kernel` (CT_CUDA_BLOCK threads, no dynamic shared memory) that
 * fit on one SM of `device`: asked once, then remembered. */
static int blocks_per_sm(const void *kernel, int device)
{
    std::lock_guard<std::mutex> guard(known_lock);
    for (int i = 0; i < n_known; i++)
        if (known[i].kernel == kernel && known[i].device == device)
            return known[i].blocks_per_sm;
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, CT_CUDA_BLOCK, 0) !=
            cudaSuccess ||
        blocks < 1) {
        (void)cudaGetLastError(); /* not sticky; the launch reports real trouble */
        blocks = 1;
    }
    if (n_known < MAX_KERNELS)
        known[n_known++] = occupancy{kernel, device, blocks};
    return blocks;
}

unsigned ct_cuda_grid_for(const void *kernel, int64_t count)
{
    int device = current_device();
    int64_t needed = (count + CT_CUDA_BLOCK - 1) / CT_CUDA_BLOCK;
    int64_t cap = (int64_t)ct_cuda_sm_count() * blocks_per_sm(kernel, device);
    if (needed > cap)
        needed = cap;
    return needed < 1 ? 1u : (unsigned)needed;
}
