# cuttle — build with `make`, test with `make test`, install with `make install`.
#
#   make SANITIZE=1        AddressSanitizer + UndefinedBehaviorSanitizer build (in build-san/)
#   make TSAN=1 test-tsan  ThreadSanitizer build (in build-tsan/) of the tests that run threads,
#                          and their run: clang with LLVM's OpenMP and its Archer tool, without
#                          BLAS, CUDA or MPI (docs/reliability.md)
#   make BLAS=0            without OpenBLAS (the built-in GEMM)
#   make OPENMP=0          single-threaded CPU backend
#   make CUDA=0            CPU only, even where nvcc is installed
#   make MPI=0             without MPI (data-parallel training needs it; docs/distributed.md)
#   make CUDA=emu          the CUDA backend on the emulated device (emu/), no GPU
#                          or toolkit needed (in build-emu/, build-emu-san/)
#   make test-gpu-emu      the GPU suite on the emulated device, in three thread
#                          orders and under ASan + UBSan
#   make CUDA_ARCHS="..."  GPU architectures (default: sm_80 sm_86 sm_89 sm_90 + PTX of 90)
#   make NVCC=/path/nvcc   the CUDA compiler (default: nvcc on PATH, else /usr/local/cuda)
#   make test-gpu          the GPU tests, which fail without a GPU (+ compute-sanitizer)
#   make fuzz              the libFuzzer targets (FUZZ_SECONDS=30 each), in build-fuzz/
#   make PREFIX=/opt/cuttle install
#   make install-python    the Python package with this build's libcuttle.so in it, by pip
#                          (PIP_FLAGS="--user" or "--break-system-packages" on Debian's
#                          Python; docs/python.md)

CC       ?= cc
PREFIX   ?= /usr/local
PYTHON   ?= python3
PIP_FLAGS ?=
SANITIZE ?= 0
BLAS     ?= auto
OPENMP   ?= 1
CUDA     ?= auto
MPI      ?= auto
CUDA_ARCHS ?= 80 86 89 90
TSAN     ?= 0

# ThreadSanitizer: GCC's libgomp is not instrumented, so its barriers look
# like races; LLVM's libomp with Archer (an OMPT tool that tells TSan what
# OpenMP synchronizes) does not.  OpenBLAS (built on libgomp), CUDA and MPI
# stay out: the threads under test are cuttle's own.
ifeq ($(TSAN),1)
TSAN_CLANG := $(shell command -v clang-14 2>/dev/null || command -v clang 2>/dev/null)
ifeq ($(origin CC),default)
CC := $(or $(TSAN_CLANG),cc)
endif
BUILD    ?= build-tsan
OPTFLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=thread
override BLAS := 0
override CUDA := 0
override MPI := 0
# clang outlines a parallel loop's body into a function without the AVX2
# kernels' target attribute and refuses their vector types there: the two
# files with such loops get AVX2 whole (the build runs where it is built),
# and without AVX2 here, OpenMP is left out (the pthreads are still tested).
TSAN_AVX2 := $(shell grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo && echo 1)
ifneq ($(TSAN_AVX2),1)
override OPENMP := 0
endif
# GCC's libgomp would fill the reports with its barriers: pthreads only.
ifeq ($(findstring clang,$(CC)),)
override OPENMP := 0
endif
endif
ifeq ($(CUDA)$(SANITIZE),emu1)
BUILD    ?= build-emu-san
else ifeq ($(CUDA),emu)
BUILD    ?= build-emu
endif
ifeq ($(SANITIZE),1)
BUILD    ?= build-san
OPTFLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
else
BUILD    ?= build
OPTFLAGS ?= -O3 -g
endif

# -fvisibility=hidden: libcuttle.so exports only what include/ marks CT_API.
CFLAGS_BASE := -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -fPIC -pthread \
               -fvisibility=hidden $(OPTFLAGS)
# The library, tests and benchmarks see its private headers; the command
# line and the examples see the public ones only (tools/lib_internal.h
# names the one exception).
INCLUDES := -Iinclude -Isrc
LDLIBS_BASE := -lm -pthread
LDFLAGS_BASE := $(filter -fsanitize=%,$(OPTFLAGS))
# The executables' debug sections compressed (a third of their size; gdb
# reads them as they are): every test carries the whole library.
LD_COMPRESS_DEBUG := -Wl,--compress-debug-sections=zlib
LDFLAGS_BASE += $(shell echo 'int main(void){return 0;}' | \
                  $(CC) $(LD_COMPRESS_DEBUG) -x c - -o /dev/null 2>/dev/null && echo $(LD_COMPRESS_DEBUG))

# ---- what the build found ---------------------------------------------------

# Without OpenMP the pragmas, and variables and functions that only feed
# their if() clauses, are unused by design.
NO_OPENMP_FLAGS := -Wno-unknown-pragmas -Wno-unused-variable -Wno-unused-but-set-variable \
                   -Wno-unused-function
HAVE_OPENMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1)
ifeq ($(OPENMP),1)
ifeq ($(HAVE_OPENMP),1)
CFLAGS_BASE += -fopenmp
LDFLAGS_BASE += -fopenmp
FOUND_OPENMP := found
else
CFLAGS_BASE += $(NO_OPENMP_FLAGS)
FOUND_OPENMP := not found (single-threaded)
endif
else
CFLAGS_BASE += $(NO_OPENMP_FLAGS)
FOUND_OPENMP := disabled
endif

# Prefer the OpenMP build of OpenBLAS: the pthread build's threads fight
# with our OpenMP threads for the cores (see docs/perf.md).  The rpath makes
# the OpenMP build load whatever Debian's alternatives point at.
OPENBLAS_OMP_PC := $(firstword $(wildcard /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc))
ifneq ($(OPENBLAS_OMP_PC),)
OPENBLAS_PKG := PKG_CONFIG_PATH=$(dir $(OPENBLAS_OMP_PC)) pkg-config
OPENBLAS_RPATH := -Wl,-rpath,$(patsubst %/pkgconfig/,%,$(dir $(OPENBLAS_OMP_PC)))
OPENBLAS_KIND := OpenMP build
else
OPENBLAS_PKG := pkg-config
OPENBLAS_KIND := pthread build: threads may contend with OpenMP; apt-get install libopenblas-openmp-dev
endif
HAVE_OPENBLAS := $(shell $(OPENBLAS_PKG) --exists openblas 2>/dev/null && echo 1)
ifneq ($(BLAS),0)
ifeq ($(HAVE_OPENBLAS),1)
CFLAGS_BASE += -DCT_HAVE_OPENBLAS $(shell $(OPENBLAS_PKG) --cflags openblas)
LDLIBS_BASE += $(shell $(OPENBLAS_PKG) --libs openblas) $(OPENBLAS_RPATH)
FOUND_BLAS := found (OpenBLAS $(shell $(OPENBLAS_PKG) --modversion openblas), $(OPENBLAS_KIND))
else
FOUND_BLAS := not found (built-in GEMM; apt-get install libopenblas-openmp-dev)
endif
else
FOUND_BLAS := disabled (built-in GEMM)
endif

HAVE_ZLIB := $(shell pkg-config --exists zlib 2>/dev/null && echo 1)
ifeq ($(HAVE_ZLIB),1)
CFLAGS_BASE += -DCT_HAVE_ZLIB
LDLIBS_BASE += -lz
FOUND_ZLIB := found (.gz datasets)
else
FOUND_ZLIB := not found (.gz datasets must be unpacked; apt-get install zlib1g-dev)
endif

# Image files for folder datasets and `predict`.
HAVE_PNG := $(shell pkg-config --exists libpng 2>/dev/null && echo 1)
ifeq ($(HAVE_PNG),1)
CFLAGS_BASE += -DCT_HAVE_PNG $(shell pkg-config --cflags libpng)
LDLIBS_BASE += $(shell pkg-config --libs libpng)
FOUND_PNG := found (libpng $(shell pkg-config --modversion libpng))
else
FOUND_PNG := not found (PNG images refused; apt-get install libpng-dev)
endif

HAVE_JPEG := $(shell pkg-config --exists libjpeg 2>/dev/null && echo 1)
ifeq ($(HAVE_JPEG),1)
CFLAGS_BASE += -DCT_HAVE_JPEG $(shell pkg-config --cflags libjpeg)
LDLIBS_BASE += $(shell pkg-config --libs libjpeg)
FOUND_JPEG := found (libjpeg $(shell pkg-config --modversion libjpeg))
else
FOUND_JPEG := not found (JPEG images refused; apt-get install libjpeg-dev)
endif

# MPI for data-parallel training (src/dist/mpi.c; docs/distributed.md): the
# library links it and initializes it only in a process that mpirun started.
# Found by pkg-config (Open MPI's ompi-c), else by asking mpicc.
HAVE_MPI_PC := $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1)
ifeq ($(HAVE_MPI_PC),1)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c)
MPI_LIBS := $(shell pkg-config --libs ompi-c)
MPI_FOUND_BY := Open MPI $(shell pkg-config --modversion ompi-c)
else
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS := $(shell mpicc --showme:link 2>/dev/null)
MPI_FOUND_BY := mpicc --showme
endif
ifeq ($(MPI),0)
FOUND_MPI := disabled (one process only)
else ifneq ($(MPI_LIBS),)
USE_MPI := 1
CFLAGS_BASE += -DCT_HAVE_MPI $(MPI_CFLAGS)
LDLIBS_BASE += $(MPI_LIBS)
FOUND_MPI := found ($(MPI_FOUND_BY))
else
FOUND_MPI := not found (one process only; apt-get install libopenmpi-dev openmpi-bin)
endif

# CUDA: nvcc compiles src/cuda/*.cu (the kernels); the host side of the
# backend (src/cuda/*.c) is C, built like the rest (and sanitized with it).
# cuBLAS and cuDNN are each optional: without one, its ops run native kernels.
NVCC ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
comma := ,
CUDA_SRCS :=
CUDA_C_SRCS :=
EMU_SRCS :=
ifeq ($(CUDA),0)
FOUND_CUDA := disabled (CPU only)
else ifeq ($(CUDA),emu)
# The emulated device: the .cu files compile as C++ against emu/ (which
# also stands in for the toolkit's headers, cuBLAS and cuDNN), sanitized
# like the rest of the build, so ASan sees the kernels' memory accesses.
FOUND_CUDA := emulated (emu/: every GPU thread a fiber on the CPU; no GPU speed)
FOUND_CUBLAS := emulated (reference shim)
FOUND_CUDNN := emulated (reference shim)
FOUND_NCCL := emulated (reference shim: ranks in one process or over shared memory)
CUDA_DEFS := -DCT_HAVE_CUDA -DCT_CUDA_EMULATED -DCT_HAVE_CUBLAS -DCT_HAVE_CUDNN -DCT_HAVE_NCCL \
             -DCT_HAVE_NCCL_H -DCT_CUDA_ARCHS='"90"' -DCT_CUDA_PTX_ARCH=90
CUDA_SRCS := $(sort $(wildcard src/cuda/*.cu))
CUDA_C_SRCS := $(sort $(wildcard src/cuda/*.c))
# emu/count_pass.cpp is a compiler plugin, not part of the library.
EMU_SRCS := $(filter-out emu/shared_begin.cpp emu/shared_end.cpp emu/count_pass.cpp,\
                         $(sort $(wildcard emu/*.cpp)))
CFLAGS_BASE += $(CUDA_DEFS) -Iemu
LDLIBS_BASE += -lstdc++
else ifeq ($(NVCC),)
FOUND_CUDA := nvcc not found (CPU only)
else
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(realpath $(NVCC)))
CUDA_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
CUDA_INC_DIRS := $(CUDA_HOME)/include /usr/include /usr/include/$(CUDA_MULTIARCH)
CUDA_LIB_DIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib /usr/lib/$(CUDA_MULTIARCH))
cuda_find = $(firstword $(wildcard $(addsuffix /$(1),$(2))))
CUDA_INC := $(dir $(call cuda_find,cuda_runtime_api.h,$(CUDA_INC_DIRS)))
CUDART_LIB := $(call cuda_find,libcudart_static.a,$(CUDA_LIB_DIRS))
CUDA_ARCH_LIST := $(strip $(CUDA_ARCHS))
CUDA_PTX_ARCH := $(lastword $(CUDA_ARCH_LIST))
NVCC_GENCODE := $(foreach a,$(CUDA_ARCH_LIST),-gencode arch=compute_$(a)$(comma)code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX_ARCH)$(comma)code=compute_$(CUDA_PTX_ARCH)
CUDA_DEFS := -DCT_HAVE_CUDA -DCT_CUDA_ARCHS='"$(CUDA_ARCH_LIST)"' -DCT_CUDA_PTX_ARCH=$(CUDA_PTX_ARCH)
CUDA_LIBS := $(CUDART_LIB) -ldl -lrt -lpthread
# cuBLAS and cuDNN are loaded when first used (src/cuda/vendor_api.c), not
# linked: the build needs their headers only.
HAVE_CUBLAS := $(call cuda_find,cublas_v2.h,$(CUDA_INC_DIRS))
HAVE_CUDNN := $(call cuda_find,cudnn.h,$(CUDA_INC_DIRS))
HAVE_NCCL_H := $(call cuda_find,nccl.h,$(CUDA_INC_DIRS))
ifneq ($(HAVE_CUBLAS),)
CUDA_DEFS += -DCT_HAVE_CUBLAS
FOUND_CUBLAS := found (loaded at first use)
else
FOUND_CUBLAS := not found (linear runs native kernels)
endif
ifneq ($(HAVE_CUDNN),)
CUDA_DEFS += -DCT_HAVE_CUDNN
FOUND_CUDNN := found (loaded at first use)
else
FOUND_CUDNN := not found (convolution and pooling run native kernels)
endif
ifneq ($(HAVE_NCCL_H),)
CUDA_DEFS += -DCT_HAVE_NCCL_H -DCT_HAVE_NCCL
FOUND_NCCL := found (loaded at first use)
else
FOUND_NCCL := not found (data-parallel training on GPUs needs it)
endif
ifeq ($(CUDART_LIB),)
FOUND_CUDA := nvcc found at $(NVCC), but not libcudart_static.a (CPU only)
else
FOUND_CUDA := found ($(NVCC), $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm: $(CUDA_ARCH_LIST) + PTX $(CUDA_PTX_ARCH))
CUDA_SRCS := $(sort $(wildcard src/cuda/*.cu))
CUDA_C_SRCS := $(sort $(wildcard src/cuda/*.c))
CFLAGS_BASE += $(CUDA_DEFS) -I$(CUDA_INC)
CUDA_RPATH_DIRS := $(filter-out /usr/lib/$(CUDA_MULTIARCH),$(CUDA_LIB_DIRS))
LDLIBS_BASE += $(addprefix -L,$(CUDA_LIB_DIRS)) $(addprefix -Wl$(comma)-rpath$(comma),$(CUDA_RPATH_DIRS)) \
               $(CUDA_LIBS) -lstdc++
endif
endif
# Kernels are compiled without sanitizers (nvcc's host objects link into
# the sanitized build all the same).
NVCCFLAGS ?= -O3 -lineinfo
# The device code compressed for size: conv.o's five images (with their line
# tables) are 34 MB stored as nvcc 13 compresses by default, 4.4 MB so, and
# every test binary carries the whole library (docs/reliability.md, "The
# build's size").  nvcc before 12.8 has only -Xfatbin -compress-all.
NVCC_COMPRESS := $(if $(NVCC),$(if $(shell $(NVCC) --help 2>/dev/null | grep -e --compress-mode),\
                 --compress-mode=size,-Xfatbin -compress-all))
NVCCFLAGS_BASE := -std=c++17 -Iinclude -Isrc $(CUDA_DEFS) $(NVCC_GENCODE) $(NVCC_COMPRESS) \
                  -Xcompiler -fPIC$(comma)-fvisibility=hidden$(comma)-Wall$(comma)-Wextra \
                  -Werror all-warnings

# ---- sources ------------------------------------------------------------------

LIB_SRCS   := $(sort $(wildcard src/core/*.c src/graph/*.c src/ops/*.c src/cpu/*.c \
                                src/nn/*.c src/io/*.c src/data/*.c src/prof/*.c \
                                src/devices/*.c src/quant/*.c src/dist/*.c)) $(CUDA_C_SRCS)
ifneq ($(USE_MPI),1)
LIB_SRCS   := $(filter-out src/dist/mpi.c,$(LIB_SRCS))
endif
ifeq ($(CUDA),emu)
# One object for every kernel, between the two ends of the __shared__
# section (emu/shared_begin.cpp), so the emulator can poison it whole.
LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(EMU_SRCS:%.cpp=$(BUILD)/obj/%.o) \
              $(BUILD)/obj/emu/kernels.o
else
LIB_OBJS   := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o)
endif
# The built-in models: models/*.model, compiled in as strings (the files stay
# the one source; scripts/embed-models.sh writes the C file).
MODEL_FILES := $(sort $(wildcard models/*.model))
LIB_OBJS   += $(BUILD)/obj/gen/models.o
TEST_SRCS  := $(sort $(wildcard tests/test_*.c))
TEST_BINS  := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
# Tests with kernels of their own (the emulator's): emulated builds only.
ifeq ($(CUDA),emu)
TEST_CU_SRCS := $(sort $(wildcard tests/test_*.cu))
TEST_BINS  += $(TEST_CU_SRCS:tests/%.cu=$(BUILD)/tests/%)
endif
TEST_SUPPORT_SRCS := $(filter-out $(TEST_SRCS),$(wildcard tests/*.c))
TEST_SUPPORT_OBJS := $(TEST_SUPPORT_SRCS:%.c=$(BUILD)/obj/%.o)
EXAMPLE_SRCS := $(sort $(wildcard examples/*.c))
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
BENCH_SRCS := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
TOOL_SRCS  := $(sort $(wildcard tools/*.c))
TOOL_OBJS  := $(TOOL_SRCS:%.c=$(BUILD)/obj/%.o)

LIB_A  := $(BUILD)/libcuttle.a
LIB_SO := $(BUILD)/libcuttle.so
CLI    := $(BUILD)/cuttle
FLAGS_STAMP := $(BUILD)/flags

.PHONY: all config test test-gpu test-gpu-emu test-tsan check fuzz install install-python uninstall clean
.SECONDARY:
all: config $(LIB_A) $(LIB_SO) $(CLI) $(TEST_BINS) $(EXAMPLE_BINS) $(BENCH_BINS)

config:
	@echo "cuttle $(shell sed -n 's/.*CT_VERSION_STRING "\(.*\)"/\1/p' include/cuttle.h) build in $(BUILD)/"
	@echo "  OpenMP:   $(FOUND_OPENMP)"
	@echo "  BLAS:     $(FOUND_BLAS)"
	@echo "  zlib:     $(FOUND_ZLIB)"
	@echo "  libpng:   $(FOUND_PNG)"
	@echo "  libjpeg:  $(FOUND_JPEG)"
	@echo "  MPI:      $(FOUND_MPI)"
	@echo "  CUDA:     $(FOUND_CUDA)"
	@echo "  cuBLAS:   $(if $(CUDA_SRCS),$(FOUND_CUBLAS),-)"
	@echo "  cuDNN:    $(if $(CUDA_SRCS),$(FOUND_CUDNN),-)"
	@echo "  NCCL:     $(if $(CUDA_SRCS),$(FOUND_NCCL),-)"
	@echo "  sanitize: $(if $(filter 1,$(SANITIZE)),address+undefined,$(if $(filter 1,$(TSAN)),thread ($(CC)$(comma) Archer: $(or $(ARCHER_LIB),not found)),off))"
ifeq ($(CUDA),emu)
	@echo "  counters: $(FOUND_EMU_COUNTERS)"
endif

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(INCLUDES) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/obj/tools/%.o: INCLUDES := -Iinclude -Itools
# Adam's sqrtf vectorizes only without errno (its argument is never
# negative, and NaN gives NaN either way): the same bits, optim.c's comment.
$(BUILD)/obj/src/cpu/optim.o: CFLAGS += -fno-math-errno
ifeq ($(TSAN)$(TSAN_AVX2),11)
$(BUILD)/obj/src/cpu/winograd_transforms.o $(BUILD)/obj/src/cpu/conv_avx2.o \
    $(BUILD)/obj/src/cpu/conv_weight_avx2.o: CFLAGS += -mavx2 -mfma
endif
$(BUILD)/obj/examples/%.o: INCLUDES := -Iinclude

$(BUILD)/gen/models.c: $(MODEL_FILES) models scripts/embed-models.sh
	@mkdir -p $(dir $@)
	@sh scripts/embed-models.sh $(MODEL_FILES) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/models.o: $(BUILD)/gen/models.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_BASE) $(INCLUDES) $(CFLAGS) -c $< -o $@
ifeq ($(CUDA),emu)
# fmaf (every kernel's multiply-add) inline where the host has FMA: the
# emulated build runs where it is built.
EMU_FMA := $(shell grep -qw fma /proc/cpuinfo 2>/dev/null && echo -mfma)
EMU_CXXFLAGS := -std=c++17 -Wall -Wextra -Werror -fPIC -fvisibility=hidden -pthread -Iemu \
                -Iinclude -Isrc \
                $(CUDA_DEFS) $(OPTFLAGS) $(EMU_FMA)
# The kernel counters (emu/counters.cpp) need clang's load and store hooks
# in the kernels' objects; the sanitized build keeps one compiler (GCC's
# ASan runtime) and does without them.
EMU_CLANG := $(shell command -v clang++-14 2>/dev/null || command -v clang++ 2>/dev/null)
# Floating-point work and branches: a pass plugin (emu/count_pass.cpp) that
# the kernels' clang loads, built against LLVM's headers of clang's version
# (apt-get install llvm-14-dev).  It tells the emulator's code from the
# kernels' by the debug line tables: -gline-tables-only comes first, so
# that a -g in OPTFLAGS still gives full debug information.
LLVM_CONFIG ?= llvm-config-14
EMU_LLVM_MAJOR := $(shell $(LLVM_CONFIG) --version 2>/dev/null | cut -d. -f1)
EMU_LLVM_PLUGIN_H := $(shell $(LLVM_CONFIG) --includedir 2>/dev/null)/llvm/Passes/PassPlugin.h
EMU_CLANG_MAJOR := $(if $(EMU_CLANG),$(shell $(EMU_CLANG) -dumpversion | cut -d. -f1))
# The LLVM version when the plugin can be built and loaded; empty if not.
EMU_COUNT_PASS := $(if $(wildcard $(EMU_LLVM_PLUGIN_H)),$(filter $(EMU_CLANG_MAJOR),$(EMU_LLVM_MAJOR)))
ifeq ($(SANITIZE)$(if $(EMU_CLANG),yes,no),0yes)
EMU_KERNEL_CXX := $(EMU_CLANG)
EMU_CXXFLAGS += -DCT_EMU_COUNTERS
ifneq ($(EMU_COUNT_PASS),)
EMU_PLUGIN := $(BUILD)/count_pass.so
EMU_KERNEL_FLAGS := -gline-tables-only -fsanitize-coverage=func,trace-loads,trace-stores \
                    -fpass-plugin=$(EMU_PLUGIN)
EMU_CXXFLAGS += -DCT_EMU_COUNT_PASS
FOUND_EMU_COUNTERS := memory, fp work and branches (clang hooks, emu/count_pass.cpp)
else
EMU_KERNEL_FLAGS := -fsanitize-coverage=func,trace-loads,trace-stores
FOUND_EMU_COUNTERS := memory only (fp work and branches need $(LLVM_CONFIG): apt-get install llvm-14-dev)
endif
else
EMU_KERNEL_CXX := $(CXX)
EMU_KERNEL_FLAGS :=
FOUND_EMU_COUNTERS := none (they need clang, without SANITIZE)
endif
$(BUILD)/obj/%.o: %.cu $(EMU_PLUGIN) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CXX-EMU $<"
	@$(EMU_KERNEL_CXX) $(EMU_KERNEL_FLAGS) $(EMU_CXXFLAGS) -Wno-unknown-pragmas -x c++ \
	        -include cuda_runtime.h -MMD -MP -c $< -o $@
# LLVM's headers are not -Wextra clean: they come in as system headers.
$(BUILD)/count_pass.so: emu/count_pass.cpp emu/count_hooks.h
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	@$(EMU_CLANG) $(patsubst -I%,-isystem %,$(shell $(LLVM_CONFIG) --cxxflags)) -Wall -Wextra \
	        -Werror -fPIC -shared -O2 $< -o $@
$(BUILD)/obj/emu/%.o: emu/%.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  CXX     $<"
	@$(CXX) $(EMU_CXXFLAGS) -MMD -MP -c $< -o $@
# A group of kernel objects between the two ends of their __shared__
# section, the ends then made local to the group (emu/shared_begin.cpp).
# A __shared__ variable in a function with external linkage (a plain inline
# function or template) lands in a COMDAT copy of the section outside the
# ends, unpoisoned: such functions must be static (docs/emulator.md).
emu_group = $(LD) -r -o $@ $^ && objcopy --localize-symbol=cuda_emu_shared_begin \
            --localize-symbol=cuda_emu_shared_end $@ && \
            if readelf -SW $@ | grep -q 'cuda_emu_shared.*G'; then \
                echo "$@: a __shared__ variable in a non-static function (make it static)" >&2; \
                rm -f $@; exit 1; fi
$(BUILD)/obj/emu/kernels.o: $(BUILD)/obj/emu/shared_begin.o $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.o) \
                            $(BUILD)/obj/emu/shared_end.o
	@echo "  LD -r   $@"
	@$(emu_group)
$(BUILD)/obj/tests/%.group.o: $(BUILD)/obj/emu/shared_begin.o $(BUILD)/obj/tests/%.o \
                              $(BUILD)/obj/emu/shared_end.o
	@$(emu_group)
else
$(BUILD)/obj/%.o: %.cu $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVCCFLAGS_BASE) $(NVCCFLAGS) -MMD -MP -c $< -o $@
endif

# The flags the objects in $(BUILD)/ were compiled with: when they change
# (another CUDA=, BLAS= or OPTFLAGS=, a library found or gone), every object
# is rebuilt, not only those whose sources changed; mixing objects of two
# configurations links wrong or not at all.  Written at parse time, and only
# when different, so an unchanged configuration rebuilds nothing.
BUILD_FLAGS := $(CC) $(CFLAGS_BASE) $(CFLAGS) | $(NVCC) $(NVCCFLAGS_BASE) $(NVCCFLAGS) | \
               $(CXX) $(EMU_CXXFLAGS) $(EMU_KERNEL_FLAGS)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifneq ($(file < $(FLAGS_STAMP)),$(BUILD_FLAGS))
$(shell mkdir -p $(BUILD))
$(file > $(FLAGS_STAMP),$(BUILD_FLAGS))
endif
endif

$(LIB_A): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Exported: only the CT_API functions (src/exports.map; nothing of a static
# archive linked in, such as cudart).
$(LIB_SO): $(LIB_OBJS) src/exports.map
	$(CC) -shared -Wl,--exclude-libs,ALL -Wl,--version-script=src/exports.map $(LDFLAGS_BASE) \
	      $(LDFLAGS) -o $@ $(LIB_OBJS) $(LDLIBS_BASE)

$(CLI): $(TOOL_OBJS) $(LIB_A)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(TOOL_OBJS) $(LIB_A) $(LDLIBS_BASE)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_SUPPORT_OBJS) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(TEST_SUPPORT_OBJS) $(LIB_A) $(LDLIBS_BASE)

ifeq ($(CUDA),emu)
$(TEST_CU_SRCS:tests/%.cu=$(BUILD)/tests/%): $(BUILD)/tests/%: $(BUILD)/obj/tests/%.group.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_A) $(LDLIBS_BASE)
# The custom-op example's CPU half, with its CUDA kernels registered (the
# test compiles those for the emulator).
$(BUILD)/tests/test_custom_cuda: $(BUILD)/obj/examples/custom_op/mish.o
$(BUILD)/obj/examples/custom_op/mish.o: CFLAGS += -DMISH_CUDA
endif

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(LIB_A) $(LDLIBS_BASE)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $< $(LIB_A) $(LDLIBS_BASE)

# The command line's JSON writer, tested on its own.
$(BUILD)/tests/test_json_writer: $(BUILD)/obj/tests/test_json_writer.o \
                                 $(BUILD)/obj/tools/json_writer.o $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_BASE) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB_A) $(LDLIBS_BASE)

# Counts cuttle's own allocations (see the test).
$(BUILD)/tests/test_noalloc $(BUILD)/tests/test_alloc_failures: \
    LDFLAGS += -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=aligned_alloc

test: all
	@BUILD=$(BUILD) sh tests/run.sh

# The GPU tests: fail when there is no GPU (CT_REQUIRE_GPU), then again under
# compute-sanitizer's memcheck and racecheck where it is installed.
COMPUTE_SANITIZER ?= $(or $(shell command -v compute-sanitizer 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/compute-sanitizer))
test-gpu: all
	CT_REQUIRE_GPU=1 $(BUILD)/tests/test_gpu
ifneq ($(COMPUTE_SANITIZER),)
	CT_REQUIRE_GPU=1 CT_GPU_QUICK=1 $(COMPUTE_SANITIZER) --tool memcheck --error-exitcode 1 $(BUILD)/tests/test_gpu
	CT_REQUIRE_GPU=1 CT_GPU_QUICK=1 $(COMPUTE_SANITIZER) --tool racecheck --error-exitcode 1 $(BUILD)/tests/test_gpu
else
	@echo "test-gpu: compute-sanitizer not found; memcheck and racecheck not run"
endif

# The GPU suite on the emulated device: builds build-emu/ and build-emu-san/,
# runs it in the three thread orders and under ASan + UBSan.
test-gpu-emu:
	@$(MAKE) --no-print-directory CUDA=emu all
	@$(MAKE) --no-print-directory CUDA=emu SANITIZE=1 all
	@sh tests/run-gpu-emu.sh

# The tests that run threads, under ThreadSanitizer (make TSAN=1
# test-tsan): the loader's workers (pthreads), the CPU backend's OpenMP
# kernels and its own pool (src/cpu/threads.c), on 4 threads whatever the
# cores, Archer loaded into
# libomp.  A report fails the test (exit 66).  The other OpenMP tests run
# clean too, but take a minute more (docs/reliability.md).
TSAN_TESTS := test_loader test_alloc_failures test_cpu_kernels test_cpu_conv test_cpu_panel \
              test_noalloc test_precision test_threads test_prof
ARCHER_LIB := $(firstword $(wildcard /usr/lib/llvm-*/lib/libarcher.so))
TSAN_RUN := OMP_NUM_THREADS=4 OMP_TOOL_LIBRARIES=$(ARCHER_LIB) \
            TSAN_OPTIONS="ignore_noninstrumented_modules=1 exitcode=66 second_deadlock_stack=1" \
            BUILD=build-tsan TESTS="$(TSAN_TESTS:%=build-tsan/tests/%)" sh tests/run.sh
test-tsan:
	@$(MAKE) --no-print-directory TSAN=1 config $(TSAN_TESTS:%=build-tsan/tests/%)
	@$(TSAN_RUN)

# The libFuzzer targets (tests/fuzz/), FUZZ_SECONDS each (default 30), on a
# clang ASan + UBSan build of the library in build-fuzz/.
fuzz:
	@sh tests/fuzz/run.sh

# The README's test command: the suite, the suite under ASan + UBSan, the
# GPU suite on the emulated device (plain, then sanitized), and the tests
# that run threads under TSan, each build's suite soon after its build
# (the emulated build before the first suite: test_bench_compare_cuda.sh
# and test_onnx_torch.sh run its cuttle, and fail without it where
# CT_REQUIRE_EMU is set, as here; elsewhere they skip), with one
# closing line for all; every FAIL line, and the failed checks'
# messages (the first 60 lines of both), are repeated just above it, so
# that the end of a long log says what failed and why.  CHECK_PRUNE=1
# (.ci/run) removes each build's objects and executables once its suite
# has run, keeping its check.log: the run then needs the disk of one build
# at a time, not of all six (docs/reliability.md, "The build's size").
CHECK_PRUNE ?=
check_prune = $(if $(CHECK_PRUNE),rm -rf $(addprefix $(1)/,obj gen tests bench examples python \
                                                         cuttle libcuttle.a libcuttle.so),:)
CHECK_LOGS := build/check.log build-san/check.log build-emu/check.log build-emu-san/check.log \
              build-tsan/check.log
check:
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory CUDA=emu all
	@CT_REQUIRE_EMU=1 BUILD=build sh tests/run.sh > build/check.log 2>&1; \
	 cat build/check.log; $(call check_prune,build)
	@$(MAKE) --no-print-directory SANITIZE=1 all
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	 BUILD=build-san sh tests/run.sh > build-san/check.log 2>&1; \
	 sed 's/^/[asan+ubsan] /' build-san/check.log; $(call check_prune,build-san)
	@EMU_SAN_BUILD= sh tests/run-gpu-emu.sh > build-emu/check.log 2>&1; \
	 cat build-emu/check.log; $(call check_prune,build-emu)
	@$(MAKE) --no-print-directory CUDA=emu SANITIZE=1 all
	@EMU_BUILD= sh tests/run-gpu-emu.sh > build-emu-san/check.log 2>&1; \
	 cat build-emu-san/check.log; $(call check_prune,build-emu-san)
	@$(MAKE) --no-print-directory TSAN=1 $(TSAN_TESTS:%=build-tsan/tests/%)
	@$(TSAN_RUN) > build-tsan/check.log 2>&1; \
	 sed 's/^/[tsan] /' build-tsan/check.log; \
	 grep -H -e 'FAIL' -e 'check failed' $(CHECK_LOGS) | head -n 60 | sed 's/^/failed: /'; \
	 tail -n 1 $(CHECK_LOGS) | awk '/passed/ {p += $$1; f += $$3} END {print "all builds: " p " passed, " f " failed"; exit f > 0}'

# The version and the static library's dependencies, for the pkg-config
# file and the CMake package (cmake/).
INSTALL_SUBST := -e 's|@PREFIX@|$(PREFIX)|' \
    -e 's|@VERSION@|$(shell sed -n 's/.*CT_VERSION_STRING "\(.*\)"/\1/p' include/cuttle.h)|' \
    -e 's|@LIBS_PRIVATE@|$(strip $(filter -fopenmp,$(LDFLAGS_BASE)) $(LDLIBS_BASE))|'
CMAKE_DIR := $(DESTDIR)$(PREFIX)/lib/cmake/cuttle

install: $(LIB_A) $(LIB_SO) $(CLI)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	           $(DESTDIR)$(PREFIX)/lib/pkgconfig $(CMAKE_DIR)
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/cuttle.h include/cuttle_cuda.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(CLI) $(DESTDIR)$(PREFIX)/bin/
	sed $(INSTALL_SUBST) cuttle.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/cuttle.pc
	sed $(INSTALL_SUBST) cmake/cuttleConfig.cmake.in > $(CMAKE_DIR)/cuttleConfig.cmake
	sed $(INSTALL_SUBST) cmake/cuttleConfigVersion.cmake.in > $(CMAKE_DIR)/cuttleConfigVersion.cmake

# A copy of python/ with the library beside the package's code, where it
# looks first; built with the installed setuptools (no download).
install-python: $(LIB_SO)
	rm -rf $(BUILD)/python
	mkdir -p $(BUILD)/python
	cp -r python/pyproject.toml python/README.md python/cuttle $(BUILD)/python/
	cp $(LIB_SO) $(BUILD)/python/cuttle/
	$(PYTHON) -m pip install --no-build-isolation $(PIP_FLAGS) $(BUILD)/python

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libcuttle.a $(DESTDIR)$(PREFIX)/lib/libcuttle.so \
	      $(DESTDIR)$(PREFIX)/include/cuttle.h $(DESTDIR)$(PREFIX)/include/cuttle_cuda.h \
	      $(DESTDIR)$(PREFIX)/bin/cuttle \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/cuttle.pc \
	      $(CMAKE_DIR)/cuttleConfig.cmake $(CMAKE_DIR)/cuttleConfigVersion.cmake
	-rmdir $(CMAKE_DIR)

clean:
	rm -rf build build-san build-emu build-emu-san build-fuzz build-tsan

-include $(LIB_OBJS:.o=.d) $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.d) $(TEST_CU_SRCS:tests/%.cu=$(BUILD)/obj/tests/%.d) $(TOOL_OBJS:.o=.d) $(TEST_SRCS:tests/%.c=$(BUILD)/obj/tests/%.d)
# the benchmarks and examples use the internal headers too (a changed
# signature must rebuild them, not wait for a clean build to fail)
-include $(BENCH_SRCS:bench/%.c=$(BUILD)/obj/bench/%.d) $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/obj/examples/%.d)
