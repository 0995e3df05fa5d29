/* The end of a group's __shared__ section (see shared_begin.cpp). */
extern "C" {
thread_local __attribute__((section(".tbss.cuda_emu_shared"))) char cuda_emu_shared_end[1];
}
