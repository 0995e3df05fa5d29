/*
 * cuttle train under mpirun (train_dist.h).
 */
#include "train_dist.h"

#include <stdlib.h>
#include <string.h>

/* Room for one rank's description of its run. */
#define IDENTITY_BYTES 2048
#define BYTES_PER_MB (1024.0 * 1024.0)

int train_job_join(train_job *job, train_options *opts)
{
    *job = (train_job){.size = 1};
    if (ct_dist_init(&job->dist) != CT_OK)
        return cli_fail("train");
    job->rank = ct_dist_rank(job->dist);
    job->size = ct_dist_size(job->dist);
    /* One GPU per rank: plain "cuda" is the GPU of the rank's place on its
     * machine; NCCL refuses two ranks on one GPU (dist/nccl.c says which). */
    if (job->size > 1 && strcmp(opts->device, "cuda") == 0) {
        snprintf(job->device, sizeof job->device, "cuda:%d", ct_dist_local_rank(job->dist));
        opts->device = job->device;
    }
    return CLI_EXIT_OK;
}

FILE *train_job_log(train_job *job, FILE *log)
{
    if (job->rank == 0)
        return log;
    if (!job->quiet)
        job->quiet = fopen("/dev/null", "w");
    return job->quiet ? job->quiet : log;
}

int train_job_end(train_job *job, int exit_status)
{
    if (exit_status != CLI_EXIT_OK && job->size > 1 && !job->failed_together) {
        fprintf(stderr,
                "cuttle train: rank %d of %d failed (the error above); ending every rank\n",
                job->rank, job->size);
        fflush(stderr);
        ct_dist_abort(job->dist, exit_status);
    }
    ct_dist_free(job->dist);
    if (job->quiet)
        fclose(job->quiet);
    return exit_status;
}

/* 64-bit FNV-1a: tells model definitions apart. */
static unsigned long long text_hash(const char *text)
{
    unsigned long long hash = 14695981039346656037ull;
    for (; *text; text++)
        hash = (hash ^ (unsigned char)*text) * 1099511628211ull;
    return hash;
}

/* One line per thing to agree on, each a phrase that reads after "rank N
 * has"; the version first (the rest may differ in form between versions). */
static void describe(const train_identity *id, char *out, size_t capacity)
{
    const train_options *o = id->opts;
    char model[128];
    cli_model_name(o->model, model, sizeof model);
    snprintf(out, capacity,
             "cuttle %s\n--model %s (definition %016llx)\n--data %s\n%lld training images\n"
             "%lld test images\n--batch %ld\n--precision %s\n--seed %ld\n--epochs %ld\n"
             "--optim %s\n--lr %g\n--schedule %s\n--momentum %g\n--weight-decay %g\n"
             "--label-smoothing %g\n--augment %s\n--bucket-mb %g\n--max-steps %ld\n"
             "--stop-after %ld\nits run at step %lld\n",
             ct_version(), model, text_hash(id->model_text), o->data,
             (long long)id->train_images, (long long)id->test_images, o->batch,
             o->precision ? o->precision : "fp32", o->seed, o->epochs, o->optim, o->lr,
             o->schedule, o->momentum, o->weight_decay, o->label_smoothing, o->augment,
             o->bucket_mb, o->max_steps, o->stop_after, (long long)id->first_step);
}

/* Line `index` of a description into out ("" past the end). */
static void line_of(const char *text, int index, char *out, size_t capacity)
{
    for (int i = 0; i < index && text; i++)
        text = strchr(text, '\n') ? strchr(text, '\n') + 1 : NULL;
    size_t length = text ? strcspn(text, "\n") : 0;
    length = length < capacity - 1 ? length : capacity - 1;
    memcpy(out, text ? text : "", length);
    out[length] = '\0';
}

/* Rank 0 prints each line where some rank differs from it; returns how
 * many lines differ. */
static int report_differences(const char *all, int size, bool print)
{
    int differences = 0;
    char mine[IDENTITY_BYTES], theirs[IDENTITY_BYTES];
    for (int line = 0; line_of(all, line, mine, sizeof mine), mine[0]; line++) {
        for (int r = 1; r < size; r++) {
            line_of(all + (size_t)r * IDENTITY_BYTES, line, theirs, sizeof theirs);
            if (strcmp(mine, theirs) == 0)
                continue;
            if (print)
                fprintf(stderr, "cuttle train: the ranks disagree: rank %d has %s, rank 0 has %s\n",
                        r, theirs, mine);
            differences++;
            break;
        }
        if (line == 0 && differences > 0)
            break; /* other versions: the rest may not compare */
    }
    return differences;
}

int train_job_agree(train_job *job, const train_identity *identity)
{
    if (job->size == 1)
        return CLI_EXIT_OK;
    char mine[IDENTITY_BYTES] = "";
    describe(identity, mine, sizeof mine);
    char *all = malloc((size_t)job->size * IDENTITY_BYTES);
    if (!all) {
        fprintf(stderr, "cuttle train: out of host memory\n");
        return CLI_EXIT_FAILED;
    }
    int exit_status = CLI_EXIT_OK;
    if (ct_dist_allgather(job->dist, mine, IDENTITY_BYTES, all) != CT_OK)
        exit_status = cli_fail("train");
    else if (report_differences(all, job->size, job->rank == 0) > 0) {
        if (job->rank == 0)
            fprintf(stderr, "cuttle train: every rank stops: start all %d with the same options, "
                            "data and cuttle\n", job->size);
        job->failed_together = true;
        exit_status = CLI_EXIT_USAGE;
    }
    free(all);
    return exit_status;
}

int train_job_share(train_job *job, ct_plan *plan, double bucket_mb, bool sync_bn)
{
    if (job->size == 1)
        return CLI_EXIT_OK; /* one batch: synchronized batchnorm is plain batchnorm */
    if (ct_dist_broadcast_plan(job->dist, plan, 0) != CT_OK)
        return cli_fail("train");
    ct_status status = ct_plan_set_dist(plan, job->dist, (size_t)(bucket_mb * BYTES_PER_MB));
    /* What every rank finds alike (two ranks on one GPU, a rank without
     * NCCL, gradients it cannot average) stops them together, said once. */
    if (status == CT_ERR_ARG || status == CT_ERR_UNSUPPORTED) {
        if (job->rank == 0)
            cli_fail("train");
        job->failed_together = true;
        return CLI_EXIT_USAGE;
    }
    if (status != CT_OK || (sync_bn && ct_plan_set_sync_bn(plan, true) != CT_OK))
        return cli_fail("train");
    return CLI_EXIT_OK;
}

void train_job_report(train_job *job, FILE *log, double train_seconds, bool on_gpu)
{
    ct_dist_stats stats;
    if (job->size == 1 || ct_dist_stats_get(job->dist, &stats) != CT_OK || stats.steps == 0)
        return;
    double steps = (double)stats.steps;
    /* NCCL's calls only queue the sums: the GPU waits for them, not the host */
    fprintf(log,
            "all-reduce (rank 0 of %d): %d bucket%s, %.2f MB per step; per step %.3f ms in %s "
            "calls, %.3f ms of it waiting before the optimizer, of a %.3f ms step\n",
            job->size, stats.buckets, stats.buckets == 1 ? "" : "s",
            (double)stats.bytes / BYTES_PER_MB, 1e3 * stats.comm_seconds / steps,
            on_gpu ? "NCCL" : "MPI", 1e3 * stats.wait_seconds / steps,
            1e3 * train_seconds / steps);
}

int train_job_sum(train_job *job, double *values, int count)
{
    if (ct_dist_allreduce_f64(job->dist, values, count) != CT_OK)
        return cli_fail("train");
    return CLI_EXIT_OK;
}

int train_job_evaluate(train_job *job, cli_evaluator *ev, const ct_dataset *data, double *loss,
                       double *accuracy)
{
    cli_eval_sums mine;
    CLI_TRY(cli_evaluate_sums("train", ev, data, job->rank, job->size, &mine, NULL));
    double sums[3] = {mine.loss, (double)mine.correct, (double)mine.count};
    CLI_TRY(train_job_sum(job, sums, 3));
    *loss = sums[0] / sums[2];
    *accuracy = sums[1] / sums[2];
    return CLI_EXIT_OK;
}
