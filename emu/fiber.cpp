/* Fibers (fiber.h): stacks, the x86-64 switch, AddressSanitizer's annotations. */
#include "fiber.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CT_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_EMU_ASAN 1
#endif
#endif
#if CT_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if CT_EMU_FIBER_ASM
/* emu_context_switch(save, load): push the callee-saved registers, store the
 * stack pointer in *save, load `load`, pop and return into the other fiber.
 * emu_fiber_start: a new fiber's first return lands here, with entry in r12
 * and its argument in r13 (fiber_prepare put them there). */
extern "C" void emu_context_switch(void **save, void *load);
extern "C" void emu_fiber_start(void);
asm(R"(
    .text
    .p2align 4
    .globl emu_context_switch
    .hidden emu_context_switch
    .type emu_context_switch, @function
emu_context_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_context_switch, .-emu_context_switch

    .p2align 4
    .globl emu_fiber_start
    .hidden emu_fiber_start
    .type emu_fiber_start, @function
emu_fiber_start:
    movq %r13, %rdi
    callq *%r12
    ud2
    .size emu_fiber_start, .-emu_fiber_start
)");
#endif

namespace emu {

bool fiber_init(fiber *f, size_t stack_size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_size = (stack_size + page - 1) / page * page;
    void *mapping = mmap(nullptr, stack_size + page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapping == MAP_FAILED)
        return false;
    mprotect(mapping, page, PROT_NONE); /* an overflow faults instead of corrupting */
    f->stack = (char *)mapping + page;
    f->stack_size = stack_size;
    f->context.stack_bottom = f->stack;
    f->context.stack_size = stack_size;
    return true;
}

#if CT_EMU_FIBER_ASM
void fiber_prepare(fiber *f, void (*entry)(void *), void *arg)
{
    /* From the top: a zero word, the return into emu_fiber_start (so that
     * its call leaves the stack 16-byte aligned plus 8, as the ABI wants at
     * a function's entry), then rbp, rbx, r12 = entry, r13 = arg, r14, r15. */
    uintptr_t top = ((uintptr_t)(f->stack + f->stack_size)) & ~(uintptr_t)15;
    void **slot = (void **)top;
    *--slot = nullptr;
    *--slot = nullptr;
    *--slot = (void *)emu_fiber_start;
    *--slot = nullptr;       /* rbp */
    *--slot = nullptr;       /* rbx */
    *--slot = (void *)entry; /* r12 */
    *--slot = arg;           /* r13 */
    *--slot = nullptr;       /* r14 */
    *--slot = nullptr;       /* r15 */
    f->context.sp = slot;
}

static void context_switch(fiber_context *from, fiber_context *to)
{
    emu_context_switch(&from->sp, to->sp);
}
#else
void fiber_prepare(fiber *f, void (*entry)(void *), void *arg)
{
    getcontext(&f->context.uc);
    f->context.uc.uc_stack.ss_sp = f->stack;
    f->context.uc.uc_stack.ss_size = f->stack_size;
    f->context.uc.uc_link = nullptr;
    /* glibc passes a pointer through makecontext on 64-bit targets. */
    makecontext(&f->context.uc, (void (*)())entry, 1, arg);
}

static void context_switch(fiber_context *from, fiber_context *to)
{
    swapcontext(&from->uc, &to->uc);
}
#endif

#if CT_EMU_ASAN
static void announce(fiber_context *from, fiber_context *to, bool from_dies)
{
    __sanitizer_start_switch_fiber(from_dies ? nullptr : &from->asan_fake_stack,
                                   to->stack_bottom, to->stack_size);
}
static void arrived(fiber_context *self, fiber_context *from)
{
    __sanitizer_finish_switch_fiber(self->asan_fake_stack, &from->stack_bottom,
                                    &from->stack_size);
}
#else
static void announce(fiber_context *, fiber_context *, bool) {}
static void arrived(fiber_context *, fiber_context *) {}
#endif

void fiber_abandoned(fiber *f)
{
#if CT_EMU_ASAN
    __asan_unpoison_memory_region(f->stack, f->stack_size);
#else
    (void)f;
#endif
}

void fiber_started(fiber_context *worker)
{
#if CT_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &worker->stack_bottom, &worker->stack_size);
#else
    (void)worker;
#endif
}

void fiber_resume(fiber_context *worker, fiber *f)
{
    announce(worker, &f->context, false);
    context_switch(worker, &f->context);
    arrived(worker, &f->context);
}

void fiber_suspend(fiber *f, fiber_context *worker)
{
    announce(&f->context, worker, false);
    context_switch(&f->context, worker);
    arrived(&f->context, worker);
}

void fiber_exit(fiber *f, fiber_context *worker)
{
    announce(&f->context, worker, true);
    context_switch(&f->context, worker);
    abort(); /* never resumed */
}

} // namespace emu
