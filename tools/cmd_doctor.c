/*
 * cuttle doctor: what the GPU side of this machine and this build can do.
 * Driver, CUDA runtime, cuBLAS, cuDNN and NCCL versions (built with vs
 * loaded), each GPU and whether this binary carries machine code for it, a
 * smoke test (a small convolution and GEMM on the GPU against the CPU), and
 * an N x N SGEMM timed with cuttle's kernel, with cuBLAS and on the CPU.
 * First what holds on any machine: the build (its options, BLAS, the CUDA
 * architectures compiled in), the CPU's threads and vector paths, and the
 * MPI library of data-parallel training with, under mpirun, the job's size
 * (rank 0 reports; the other ranks say nothing).  --json writes all of it,
 * GPU or not, like PyTorch's collect_env.
 *
 * Exit status: 0 all good; 1 the smoke test or a library call failed;
 * 2 a bad command line; 3 no usable GPU (a CPU-only build, no driver or no
 * device), said plainly.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lib_internal.h"
#include "cuttle_cuda.h"
#include "json_writer.h"

enum { DOCTOR_EXIT_NO_GPU = 3, DEFAULT_GEMM_SIZE = 10000, EMULATED_GEMM_SIZE = 256 };
#define SMOKE_TOLERANCE 1e-4

typedef struct doctor_options {
    bool json, no_cpu_gemm;
    long gemm_size;
    json_writer *out; /* --json: the object being written; NULL: text */
} doctor_options;

/* The MPI library and the job this process is part of (mpirun -np N). */
typedef struct doctor_mpi {
    const char *library; /* NULL: a build without MPI */
    int size, rank;
    char error[512]; /* ct_dist_init's, or "" */
} doctor_mpi;

static void find_mpi(doctor_mpi *mpi)
{
    ct_dist *dist = NULL;
    *mpi = (doctor_mpi){.library = ct_dist_library(), .size = 1};
    if (ct_dist_init(&dist) != CT_OK) {
        snprintf(mpi->error, sizeof mpi->error, "%s", ct_last_error());
        return;
    }
    mpi->size = ct_dist_size(dist);
    mpi->rank = ct_dist_rank(dist);
    ct_dist_free(dist);
}

static void print_mpi(const doctor_mpi *mpi)
{
    if (mpi->error[0])
        printf("MPI:           %s\n", mpi->error);
    else if (!mpi->library)
        printf("MPI:           not in this build: one process only (apt-get install "
               "libopenmpi-dev openmpi-bin, then make)\n");
    else
        printf("MPI:           %s; %d process%s%s\n", mpi->library, mpi->size,
               mpi->size == 1 ? " (not started by mpirun)" : "es (mpirun), this is rank ",
               mpi->size == 1 ? "" : "0");
}

/* "mpi": {...} (null without MPI), "mpi_error". */
static void print_mpi_json(json_writer *out, const doctor_mpi *mpi)
{
    json_key(out, "mpi");
    if (mpi->library) {
        json_object(out);
        json_field_string(out, "library", mpi->library);
        json_field_int(out, "world_size", mpi->size);
        json_field_int(out, "rank", mpi->rank);
        json_end(out);
    } else {
        json_null(out);
    }
    json_field_string(out, "mpi_error", mpi->error[0] ? mpi->error : NULL);
}

/* The build and the CPU: known on every machine. */
static void print_build(const doctor_options *opts)
{
    ct_build_info b;
    ct_build_info_get(&b);
    ct_backend *cpu = NULL;
    int threads = ct_backend_new("cpu", &cpu) == CT_OK ? ct_backend_threads(cpu) : 0;
    ct_backend_free(cpu);
    json_writer *out = opts->out;
    if (out) {
        json_key(out, "build");
        json_object(out);
        json_field_string(out, "version", b.version);
        json_field_string(out, "compiler", b.compiler);
        json_field_string(out, "cuda", b.cuda);
        json_field_string(out, "cuda_archs", b.cuda_archs);
        json_field_bool(out, "cublas", b.cublas);
        json_field_bool(out, "cudnn", b.cudnn);
        json_field_bool(out, "nccl_header", b.nccl_header);
        json_field_string(out, "blas", b.blas);
        if (ct_cpu_blas_core())
            json_field_string(out, "blas_kernels", ct_cpu_blas_core());
        json_field_bool(out, "openmp", b.openmp);
        json_field_bool(out, "zlib", b.zlib);
        json_field_bool(out, "png", b.png);
        json_field_bool(out, "jpeg", b.jpeg);
        json_field_bool(out, "mpi", b.mpi);
        json_end(out);
        json_key(out, "cpu");
        json_object(out);
        json_field_int(out, "threads", threads);
        json_field_string(out, "simd", b.cpu_simd);
        json_field_string(out, "int8_kernel", b.int8_kernel);
        json_end(out);
        return;
    }
    printf("cuttle:        %s, built by %s\n", b.version, b.compiler);
    if (b.cuda_archs[0])
        printf("build:         CUDA%s (sm %s)%s%s; %s\n",
               b.cuda[0] == 'e' ? " emulated" : "", b.cuda_archs, b.cublas ? ", cuBLAS" : "",
               b.cudnn ? ", cuDNN" : "", b.openmp ? "OpenMP" : "no OpenMP");
    else
        printf("build:         CPU only; %s\n", b.openmp ? "OpenMP" : "no OpenMP");
    printf("BLAS:          %s\n", b.blas);
    /* this command ran itself again with OPENBLAS_CORETYPE where OpenBLAS
     * did not know the CPU (tools/cuttle.c) */
    if (ct_cpu_blas_core())
        printf("BLAS kernels:  %s%s%s\n", ct_cpu_blas_core(),
               getenv("OPENBLAS_CORETYPE") ? ", as OPENBLAS_CORETYPE says: " : "",
               getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
    printf("formats:       zlib %s, PNG %s, JPEG %s\n", b.zlib ? "yes" : "no",
           b.png ? "yes" : "no", b.jpeg ? "yes" : "no");
    printf("CPU:           %d threads; %s kernels, INT8 %s\n", threads, b.cpu_simd,
           b.int8_kernel);
}

static int no_gpu(const doctor_options *opts, const char *why)
{
    if (opts->out) {
        json_field_bool(opts->out, "gpu_available", false);
        json_field_string(opts->out, "reason", why);
        json_end(opts->out);
    } else {
        printf("No usable GPU: %s.\ncuttle runs on the CPU only here.\n", why);
    }
    return DOCTOR_EXIT_NO_GPU;
}

/* "13.0" from 13000 (CUDA), "9.19.0" from 91900 (cuDNN), ... */
static const char *version_text(int version, int major_div, int minor_div, char *buf,
                                size_t size)
{
    if (version <= 0)
        snprintf(buf, size, "not found");
    else if (minor_div == 0)
        snprintf(buf, size, "%d.%d", version / major_div, version % major_div / 10);
    else
        snprintf(buf, size, "%d.%d.%d", version / major_div, version % major_div / minor_div,
                 version % minor_div);
    return buf;
}

/* Max relative error of y = linear(conv(x)) on the GPU against the CPU. */
static ct_status smoke_test(double *error)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 4, (int64_t[]){2, 3, 12, 12});
    ct_tensor *h = ct_layer_conv2d(g, "conv", x, 8, 3, 3, (ct_conv_args){.pad = {1, 1}}, true);
    ct_tensor *y = ct_layer_linear(g, "fc", ct_flatten(g, h), 10, true);
    ct_tensor_keep(y);
    ct_backend *cpu = NULL, *gpu = NULL;
    ct_plan *plans[2] = {NULL, NULL};
    float xs[2 * 3 * 12 * 12], ys[2][20];
    for (int i = 0; i < 2 * 3 * 12 * 12; i++)
        xs[i] = sinf(0.37f * (float)i);
    ct_status status = ct_graph_status(g);
    if (status == CT_OK)
        status = ct_backend_new("cpu", &cpu);
    if (status == CT_OK)
        status = ct_backend_new("cuda", &gpu);
    for (int p = 0; p < 2 && status == CT_OK; p++) {
        status = ct_plan_new(g, p ? gpu : cpu, 1, &plans[p]);
        if (status == CT_OK)
            status = ct_plan_write(plans[p], x, xs, sizeof xs);
        if (status == CT_OK)
            status = ct_plan_run(plans[p], CT_EVAL);
        if (status == CT_OK)
            status = ct_plan_read(plans[p], y, ys[p], sizeof ys[p]);
    }
    double max_diff = 0, max_ref = 1e-12;
    for (int i = 0; status == CT_OK && i < 20; i++) {
        max_diff = fmax(max_diff, fabs((double)ys[1][i] - ys[0][i]));
        max_ref = fmax(max_ref, fabs((double)ys[0][i]));
    }
    *error = max_diff / max_ref;
    ct_plan_free(plans[0]);
    ct_plan_free(plans[1]);
    ct_backend_free(cpu);
    ct_backend_free(gpu);
    ct_graph_free(g);
    return status;
}

/* Milliseconds of one n x n x n SGEMM (a linear layer without bias) on a
 * device with a kernel choice, after one warm-up run. */
static ct_status time_gemm(const char *device, const char *kernels, int n, double *ms)
{
    ct_graph *g = ct_graph_new();
    ct_tensor *x = ct_input(g, "x", CT_F32, 2, (int64_t[]){n, n});
    ct_tensor *w = ct_param(g, "w", 2, (int64_t[]){n, n}, CT_INIT_UNIFORM, 0.01f);
    ct_tensor_keep(ct_linear(g, x, w, NULL));
    ct_backend *backend = NULL;
    ct_plan *plan = NULL;
    ct_status status = ct_graph_status(g);
    if (status == CT_OK)
        status = ct_backend_new(device, &backend);
    if (status == CT_OK && kernels)
        status = ct_backend_set_kernels(backend, kernels);
    if (status == CT_OK)
        status = ct_plan_new(g, backend, 1, &plan);
    if (status == CT_OK)
        status = ct_plan_run(plan, CT_EVAL);
    double start = cli_now();
    if (status == CT_OK)
        status = ct_plan_run(plan, CT_EVAL);
    if (status == CT_OK)
        status = ct_backend_synchronize(backend);
    *ms = (cli_now() - start) * 1e3;
    ct_plan_free(plan);
    ct_backend_free(backend);
    ct_graph_free(g);
    return status;
}

static void print_gemm(const doctor_options *opts, const char *label, const char *device,
                       const char *kernels)
{
    double ms = 0, n = (double)opts->gemm_size;
    ct_status status = time_gemm(device, kernels, (int)opts->gemm_size, &ms);
    double gflops = status == CT_OK ? 2.0 * n * n * n / (ms * 1e6) : 0;
    if (opts->out) {
        json_key(opts->out, label);
        json_object(opts->out);
        if (status == CT_OK) {
            json_field_fixed(opts->out, "ms", ms, 3);
            json_field_fixed(opts->out, "gflops", gflops, 1);
        } else {
            json_field_string(opts->out, "error", ct_last_error());
        }
        json_end(opts->out);
    } else if (status == CT_OK) {
        printf("  %-8s %10.1f ms  %9.1f GFLOP/s\n", label, ms, gflops);
    } else {
        printf("  %-8s failed: %s\n", label, ct_last_error());
    }
    fflush(stdout);
}

/* A vendor library: the version built with and the one loaded (at first
 * use, by dlopen), or why it is not loaded. */
static void print_library(const char *label, int built, int loaded, const char *why)
{
    char a[32], b[32];
    if (why) {
        printf("%s built with %s, not loaded: %s\n", label,
               version_text(built, 10000, 100, a, 32), why);
        return;
    }
    printf("%s built with %s, loaded %s%s\n", label, version_text(built, 10000, 100, a, 32),
           version_text(loaded, 10000, 100, b, 32),
           built / 10000 != loaded / 10000 ? "  (major versions differ)" : "");
}

static void print_versions(const doctor_options *opts, const ct_cuda_versions *v)
{
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], i[32];
    if (opts->out) {
        json_writer *out = opts->out;
        json_key(out, "cuda");
        json_object(out);
        json_field_string(out, "driver_cuda", version_text(v->driver, 1000, 0, a, 32));
        json_field_string(out, "driver_error", v->driver_error);
        json_field_string(out, "runtime_built", version_text(v->runtime_built, 1000, 0, b, 32));
        json_field_string(out, "runtime_loaded", version_text(v->runtime_loaded, 1000, 0, c, 32));
        json_field_string(out, "cublas_built", version_text(v->cublas_built, 10000, 100, d, 32));
        json_field_string(out, "cublas_loaded", version_text(v->cublas_loaded, 10000, 100, e, 32));
        json_field_string(out, "cublas_error", v->cublas_error);
        json_field_string(out, "cudnn_built", version_text(v->cudnn_built, 10000, 100, f, 32));
        json_field_string(out, "cudnn_loaded", version_text(v->cudnn_loaded, 10000, 100, g, 32));
        json_field_string(out, "cudnn_error", v->cudnn_error);
        json_field_string(out, "nccl_built", version_text(v->nccl_built, 10000, 100, h, 32));
        json_field_string(out, "nccl_loaded", version_text(v->nccl_loaded, 10000, 100, i, 32));
        json_field_string(out, "nccl_error", v->nccl_error);
        json_field_string(out, "archs", ct_cuda_probe_archs());
        json_field_int(out, "ptx_arch", ct_cuda_probe_ptx_arch());
        json_field_bool(out, "emulated", v->emulated);
        json_end(out);
        return;
    }
    if (v->emulated) {
        printf("device:        EMULATED (built with make CUDA=emu): every GPU thread runs as "
               "a fiber on the CPU,\n"
               "               cuBLAS and cuDNN are reference shims; results are checked, "
               "times are not GPU speed\n"
               "CUDA API:      the runtime API of CUDA %s, cuBLAS %s, cuDNN %s, NCCL %s "
               "(emulated)\n",
               version_text(v->runtime_built, 1000, 0, b, 32),
               version_text(v->cublas_built, 10000, 100, d, 32),
               version_text(v->cudnn_built, 10000, 100, f, 32),
               version_text(v->nccl_loaded, 10000, 100, i, 32));
        if (v->cublas_error)
            printf("cuBLAS:        %s\n", v->cublas_error);
        if (v->cudnn_error)
            printf("cuDNN:         %s\n", v->cudnn_error);
        if (v->nccl_error)
            printf("NCCL:          %s\n", v->nccl_error);
        return;
    }
    printf("driver:        supports CUDA %s%s%s\n", version_text(v->driver, 1000, 0, a, 32),
           v->driver_error ? " - " : "", v->driver_error ? v->driver_error : "");
    printf("CUDA runtime:  built with %s, loaded %s (linked statically)%s\n",
           version_text(v->runtime_built, 1000, 0, b, 32),
           version_text(v->runtime_loaded, 1000, 0, c, 32),
           v->driver && v->driver < v->runtime_built ? "  INCOMPATIBLE: update the driver" : "");
    print_library("cuBLAS:       ", v->cublas_built, v->cublas_loaded, v->cublas_error);
    print_library("cuDNN:        ", v->cudnn_built, v->cudnn_loaded, v->cudnn_error);
    print_library("NCCL:         ", v->nccl_built, v->nccl_loaded, v->nccl_error);
    printf("compiled for:  sm %s + PTX compute_%d\n", ct_cuda_probe_archs(),
           ct_cuda_probe_ptx_arch());
}

static void print_device(const doctor_options *opts, int index, const ct_cuda_device_info *d)
{
    char code[64];
    if (d->has_sass)
        snprintf(code, sizeof code, "SASS sm_%d", d->sass_arch);
    else if (d->has_ptx)
        snprintf(code, sizeof code, "PTX only (JIT at load)");
    else
        snprintf(code, sizeof code, "NONE: rebuild with CUDA_ARCHS=%d%d", d->major, d->minor);
    if (opts->out) {
        char capability[16];
        snprintf(capability, sizeof capability, "%d.%d", d->major, d->minor);
        json_object(opts->out);
        json_field_int(opts->out, "index", index);
        json_field_string(opts->out, "name", d->name);
        json_field_string(opts->out, "compute_capability", capability);
        json_field_int(opts->out, "sms", d->sm_count);
        json_field_int(opts->out, "memory_mib", (long long)(d->memory_bytes >> 20));
        json_field_string(opts->out, "code", code);
        json_end(opts->out);
    }
    else
        printf("GPU %d:         %s, compute %d.%d, %d SMs, %.1f GiB; binary has %s\n", index,
               d->name, d->major, d->minor, d->sm_count, d->memory_bytes / 1073741824.0, code);
}

static int doctor_cuda(doctor_options *opts)
{
    ct_cuda_versions versions;
    ct_cuda_probe_versions(&versions);
    /* An emulated 10000^3 SGEMM would take hours: a small one shows it runs. */
    if (versions.emulated && opts->gemm_size == DEFAULT_GEMM_SIZE)
        opts->gemm_size = EMULATED_GEMM_SIZE;
    const char *why = NULL;
    int count = ct_cuda_probe_device_count(&why);
    bool built_with_cuda = ct_cuda_probe_archs()[0] != '\0';
    if (opts->out || built_with_cuda)
        print_versions(opts, &versions);
    if (count == 0)
        return no_gpu(opts, versions.driver_error ? versions.driver_error : why);
    if (opts->out) {
        json_field_bool(opts->out, "gpu_available", true);
        json_key(opts->out, "gpus");
        json_array(opts->out);
    }
    for (int i = 0; i < count; i++) {
        ct_cuda_device_info info;
        if (ct_cuda_probe_device(i, &info) == CT_OK)
            print_device(opts, i, &info);
    }
    double error = 0;
    ct_status status = smoke_test(&error);
    bool smoke_ok = status == CT_OK && error <= SMOKE_TOLERANCE;
    if (opts->out) {
        json_end(opts->out);
        json_key(opts->out, "smoke_test");
        json_object(opts->out);
        json_field_bool(opts->out, "ok", smoke_ok);
        json_field_number(opts->out, "max_rel_error", error);
        json_field_string(opts->out, "error", status != CT_OK ? ct_last_error() : NULL);
        json_end(opts->out);
        json_field_int(opts->out, "gemm_size", opts->gemm_size);
        json_key(opts->out, "gemm");
        json_object(opts->out);
    } else {
        printf("smoke test:    conv + linear on cuda:0 vs cpu: %s (max rel error %.2g)%s%s\n",
               smoke_ok ? "ok" : "FAILED", error, status != CT_OK ? ": " : "",
               status != CT_OK ? ct_last_error() : "");
        printf("SGEMM %ld x %ld x %ld%s:\n", opts->gemm_size, opts->gemm_size, opts->gemm_size,
               versions.emulated ? " (emulated: CPU time, not GPU speed)" : "");
    }
    print_gemm(opts, "native", "cuda", "native");
    /* Without cuBLAS, "vendor" would time cuttle's kernel again under its name. */
    if (!versions.cublas_error)
        print_gemm(opts, "cublas", "cuda", "vendor");
    else if (!opts->out)
        printf("  cublas   not loaded (above)\n");
    if (!opts->no_cpu_gemm) {
        if (!opts->json)
            printf("  (the CPU run may take a while; --no-cpu-gemm or --gemm-size N skip or "
                   "shrink it)\n");
        print_gemm(opts, "cpu", "cpu", NULL);
    }
    if (opts->out) {
        json_end(opts->out);
        json_end(opts->out);
    }
    return smoke_ok ? CLI_EXIT_OK : CLI_EXIT_FAILED;
}

int cmd_doctor(int argc, char **argv)
{
    doctor_options opts = {.gemm_size = DEFAULT_GEMM_SIZE};
    const cli_option options[] = {
        {"--json", NULL, CLI_FLAG, &opts.json, 0, 0, NULL, "one JSON object on stdout"},
        {"--no-cpu-gemm", NULL, CLI_FLAG, &opts.no_cpu_gemm, 0, 0, NULL,
         "skip the CPU SGEMM (slow at the default size)"},
        {"--gemm-size", "N", CLI_INT, &opts.gemm_size, 16, 32768, NULL,
         "size of the timed SGEMM (default 10000)"},
    };
    cli_parsed parsed = cli_parse("doctor", "[options]  (exit status 3: no usable GPU)", argc,
                                  argv, options, (int)(sizeof options / sizeof options[0]));
    if (parsed != CLI_PARSED_RUN)
        return parsed == CLI_PARSED_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (cli_parse_only)
        return CLI_EXIT_OK;
    doctor_mpi mpi;
    find_mpi(&mpi);
    if (mpi.rank != 0)
        return CLI_EXIT_OK; /* under mpirun, rank 0 reports */
    json_writer out = json_writer_start(stdout);
    if (opts.json) {
        opts.out = &out;
        json_object(&out);
        print_build(&opts);
        print_mpi_json(&out, &mpi);
    } else {
        print_build(&opts);
        print_mpi(&mpi);
    }
    return doctor_cuda(&opts);
}
