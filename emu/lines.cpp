/*
 * Kernel counters per source line: where in a kernel the sectors and the
 * bank conflicts come from.  counters.cpp knows each request's instruction
 * (the hook's return address); while lines are on (cuda_emu_counters_lines,
 * CUDA_EMU_COUNTERS=lines) each closed request adds to that instruction's
 * counts here, per block on its host thread and then under a lock.  An
 * instruction becomes "file:line" through addr2line (binutils) and the line
 * tables the kernels' objects carry (-gline-tables-only, the Makefile):
 * only when the lines are read, so counting costs a map update per request.
 */
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "counters.h"

namespace emu {

namespace {

struct line_entry {
    const char *kernel;
    cuda_emu_line_counters counts;
};

std::atomic<bool> lines_on{false};
thread_local std::unordered_map<uintptr_t, cuda_emu_line_counters> block_lines;

/* Made at first use, so that it outlives a table printed at exit by a
 * handler registered after it (lines_set makes it).  By instruction and
 * kernel: a device function that is not inlined runs for several. */
struct totals {
    std::mutex lock;
    std::map<std::pair<uintptr_t, const char *>, line_entry> by_instruction;
};

totals &all()
{
    static totals t;
    return t;
}

void add(cuda_emu_line_counters *to, const cuda_emu_line_counters &from)
{
    to->requests += from.requests;
    to->bytes_moved += from.bytes_moved;
    to->bytes_used += from.bytes_used;
    to->shared_wavefronts += from.shared_wavefronts;
    to->shared_ideal_wavefronts += from.shared_ideal_wavefronts;
    to->flops += from.flops;
    to->branches += from.branches;
    to->divergent_branches += from.divergent_branches;
    to->thread_instructions += from.thread_instructions;
}

/* addr2line's "file:line" for instructions of one object file; "?" where
 * it knows none.  The hook's return address is just past the call, so the
 * call itself is one byte before it. */
std::vector<std::string> lines_in(const char *object, const std::vector<uintptr_t> &offsets)
{
    std::vector<std::string> out(offsets.size(), "?");
    std::string command = "addr2line -e '" + std::string(object) + "'";
    for (uintptr_t offset : offsets) {
        char hex[32];
        snprintf(hex, sizeof hex, " 0x%lx", (unsigned long)(offset - 1));
        command += hex;
    }
    command += " 2>/dev/null";
    FILE *pipe = popen(command.c_str(), "r");
    char text[1024];
    for (size_t i = 0; pipe && i < out.size() && fgets(text, sizeof text, pipe); i++) {
        text[strcspn(text, "\n")] = '\0';
        const char *base = strrchr(text, '/');
        if (!strstr(text, "??"))
            out[i] = base ? base + 1 : text;
    }
    if (pipe)
        pclose(pipe);
    return out;
}

/* Where each instruction is, by object file (a shared library's offsets
 * are from its load address; so are a PIE executable's). */
std::unordered_map<uintptr_t, std::string> resolve(const std::vector<uintptr_t> &pcs)
{
    std::map<std::string, std::vector<uintptr_t>> offsets, by_object;
    for (uintptr_t pc : pcs) {
        Dl_info info;
        if (!dladdr((void *)pc, &info) || !info.dli_fname || !info.dli_fbase)
            continue;
        const Elf64_Ehdr *header = (const Elf64_Ehdr *)info.dli_fbase;
        uintptr_t offset = header->e_type == ET_DYN ? pc - (uintptr_t)info.dli_fbase : pc;
        offsets[info.dli_fname].push_back(offset);
        by_object[info.dli_fname].push_back(pc);
    }
    std::unordered_map<uintptr_t, std::string> where;
    for (const auto &object : offsets) {
        std::vector<std::string> lines = lines_in(object.first.c_str(), object.second);
        for (size_t i = 0; i < lines.size(); i++)
            where[by_object[object.first][i]] = lines[i];
    }
    return where;
}

/* What an entry costs the memory system: bytes moved, and 128 bytes per
 * wavefront above the conflict-free count (a wavefront is one cycle of the
 * 32 x 4-byte banks). */
unsigned long long cost(const cuda_emu_line_counters &c)
{
    return c.bytes_moved + 128ull * (c.shared_wavefronts - c.shared_ideal_wavefronts);
}

} // namespace

bool counting_lines()
{
    return lines_on.load(std::memory_order_relaxed);
}

void lines_request(uintptr_t pc, bool shared, unsigned long long moved, unsigned long long used,
                   unsigned wavefronts, unsigned ideal)
{
    cuda_emu_line_counters &c = block_lines[pc];
    c.requests++;
    if (shared) {
        c.shared_wavefronts += wavefronts;
        c.shared_ideal_wavefronts += ideal;
    } else {
        c.bytes_moved += moved;
        c.bytes_used += used;
    }
}

void lines_fp(uintptr_t pc, unsigned flops, unsigned instructions)
{
    cuda_emu_line_counters &c = block_lines[pc];
    c.flops += flops;
    c.thread_instructions += instructions;
}

void lines_branch(uintptr_t pc, bool divergent)
{
    cuda_emu_line_counters &c = block_lines[pc];
    c.branches++;
    c.divergent_branches += divergent;
}

void lines_block_end(const char *kernel)
{
    if (block_lines.empty())
        return;
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    for (const auto &item : block_lines) {
        line_entry &e = t.by_instruction[{item.first, kernel}];
        e.kernel = kernel;
        add(&e.counts, item.second);
    }
    block_lines.clear();
}

/* The instructions summed per kernel and source line, costliest first. */
std::vector<cuda_emu_line_counters> lines_summed()
{
    std::vector<uintptr_t> pcs;
    std::map<std::pair<uintptr_t, const char *>, line_entry> copy;
    {
        totals &t = all();
        std::lock_guard<std::mutex> lock(t.lock);
        copy = t.by_instruction;
    }
    for (const auto &item : copy)
        pcs.push_back(item.first.first);
    std::unordered_map<uintptr_t, std::string> where = resolve(pcs);
    std::map<std::pair<std::string, std::string>, cuda_emu_line_counters> summed;
    for (const auto &item : copy) {
        auto found = where.find(item.first.first);
        std::string line = found == where.end() ? "?" : found->second;
        cuda_emu_line_counters &c = summed[{item.second.kernel, line}];
        snprintf(c.kernel, sizeof c.kernel, "%s", item.second.kernel);
        snprintf(c.where, sizeof c.where, "%s", line.c_str());
        add(&c, item.second.counts);
    }
    std::vector<cuda_emu_line_counters> out;
    for (const auto &item : summed)
        out.push_back(item.second);
    std::stable_sort(out.begin(), out.end(),
                     [](const cuda_emu_line_counters &a, const cuda_emu_line_counters &b) {
                         return cost(a) > cost(b);
                     });
    return out;
}

void lines_set(bool on)
{
    all();
    lines_on.store(on);
}

void lines_reset()
{
    totals &t = all();
    std::lock_guard<std::mutex> lock(t.lock);
    t.by_instruction.clear();
}

/* One table of lines, the first `top` of `lines` as `order` sorts them. */
static void print_lines(std::vector<cuda_emu_line_counters> lines, int top, const char *title,
                        bool (*order)(const cuda_emu_line_counters &,
                                      const cuda_emu_line_counters &))
{
    std::stable_sort(lines.begin(), lines.end(), order);
    fprintf(stderr, "\ncuda-emu counters per source line, %s: %d of %zu\n%-36s %-28s %9s "
                    "%10s %7s %10s %9s %9s %7s %10s\n",
            title, top, lines.size(), "kernel", "line", "requests", "L2 MB", "ld/st",
            "wavefronts", "conflict", "MFLOP", "diverg", "warp inst");
    for (size_t i = 0; i < lines.size() && (int)i < top; i++) {
        const cuda_emu_line_counters &c = lines[i];
        fprintf(stderr, "%-36.36s %-28.28s %9llu %10.3f %6.1f%% %10llu %8.1f%% %9.3f %6.1f%% %9.3fM\n",
                c.kernel,
                c.where, c.requests, (double)c.bytes_moved / 1e6,
                c.bytes_moved ? 100.0 * (double)c.bytes_used / (double)c.bytes_moved : 100.0,
                c.shared_wavefronts,
                c.shared_wavefronts ? 100.0 * (double)(c.shared_wavefronts -
                                                       c.shared_ideal_wavefronts) /
                                          (double)c.shared_wavefronts
                                    : 0.0,
                (double)c.flops / 1e6,
                c.branches ? 100.0 * (double)c.divergent_branches / (double)c.branches : 0.0,
                (double)c.thread_instructions / 32e6);
    }
}

void lines_print(int top)
{
    std::vector<cuda_emu_line_counters> lines = lines_summed();
    print_lines(lines, top, "costliest (bytes moved, plus 128 per conflict wavefront)",
                [](const cuda_emu_line_counters &a, const cuda_emu_line_counters &b) {
                    return cost(a) > cost(b);
                });
    /* where the issue-bound kernels spend their instructions */
    print_lines(lines, top, "most instructions (the pass's count / 32)",
                [](const cuda_emu_line_counters &a, const cuda_emu_line_counters &b) {
                    return a.thread_instructions > b.thread_instructions;
                });
}

} // namespace emu

extern "C" {

void cuda_emu_counters_lines(int on)
{
    emu::lines_set(on != 0);
}

int cuda_emu_counters_lines_get(cuda_emu_line_counters *out, int capacity)
{
    std::vector<cuda_emu_line_counters> lines = emu::lines_summed();
    int n = (int)std::min<size_t>(lines.size(), capacity > 0 ? (size_t)capacity : 0);
    for (int i = 0; i < n; i++)
        out[i] = lines[(size_t)i];
    return (int)lines.size();
}

} // extern "C"
