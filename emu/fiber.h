/*
 * Fibers for the emulated GPU threads: each has its own stack (mmap'd, with
 * a guard page below it) and runs until it switches back to the worker
 * that started it.  On x86-64 a switch saves six registers and the stack
 * pointer (emu/fiber.cpp); elsewhere it falls back to ucontext.  Under
 * AddressSanitizer every switch is announced to it, so it keeps track of
 * which stack is live.
 */
#ifndef CT_EMU_FIBER_H
#define CT_EMU_FIBER_H

#include <stddef.h>

#if defined(__x86_64__)
#define CT_EMU_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

namespace emu {

struct fiber_context {
#if CT_EMU_FIBER_ASM
    void *sp;
#else
    ucontext_t uc;
#endif
    void *asan_fake_stack;
    const void *stack_bottom; /* for AddressSanitizer: the stack this context runs on */
    size_t stack_size;
};

struct fiber {
    fiber_context context;
    char *stack;       /* lowest usable byte (the guard page is below it) */
    size_t stack_size; /* usable bytes */
};

/* A fiber with its own stack (the stack lives until the process ends). */
bool fiber_init(fiber *f, size_t stack_size);
/* Make `f` start entry(arg) at its next resume. */
void fiber_prepare(fiber *f, void (*entry)(void *), void *arg);
/* Run `f` from the worker context `worker` until it suspends or exits. */
void fiber_resume(fiber_context *worker, fiber *f);
/* From inside `f`: back to `worker`; returns when resumed again. */
void fiber_suspend(fiber *f, fiber_context *worker);
/* From inside `f`, for the last time (until fiber_prepare again). */
[[noreturn]] void fiber_exit(fiber *f, fiber_context *worker);
/* A fiber abandoned before it exited (its kernel failed) left its frames'
 * AddressSanitizer shadow behind: clear it before the stack is reused. */
void fiber_abandoned(fiber *f);
/* The first thing a new fiber's entry does (AddressSanitizer bookkeeping). */
void fiber_started(fiber_context *worker);

} // namespace emu

#endif
