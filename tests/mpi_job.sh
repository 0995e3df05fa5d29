# Sourced by the tests that start mpirun (". tests/mpi_job.sh"; test_dist.sh,
# dist_cuda.sh): Open MPI's settings for this machine, $mpirun (under
# `timeout $limit`: a hang fails, exit status 124), kill_rank, which ends
# one rank of a running job with SIGKILL, and kill_after_an_epoch.
limit=${limit:-60} # seconds for one mpirun
# Open MPI runs as root only when told twice; two ranks may exceed the cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Its shared-memory transport copies between processes with process_vm_readv,
# which containers often forbid ("Read -1, expected ..., errno = 1"): plain
# copies through shared memory work everywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_mca_base_component_disable_dlclose=1
export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan-mpi.supp:fast_unwind_on_malloc=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
mpirun="timeout $limit mpirun --oversubscribe"

children() { # the processes whose parent is $1
    for status_file in /proc/[0-9]*/status; do
        grep -q "^PPid:[[:space:]]*$1\$" "$status_file" 2> /dev/null &&
            basename "$(dirname "$status_file")"
    done
}

# kill_rank JOB RANK: SIGKILL to rank RANK of the mpirun started in the
# background as JOB (timeout -> mpirun -> the ranks); prints its pid.
kill_rank() {
    victim=""
    for launcher in $(children "$1"); do
        for pid in $(children "$launcher"); do
            tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null |
                grep -q "^OMPI_COMM_WORLD_RANK=$2\$" && victim=$pid
        done
    done
    [ -n "$victim" ] && kill -9 "$victim" && echo "$victim"
}

# kill_after_an_epoch JOB DIR TENTHS: once the training job JOB (mpirun in
# the background) has saved an epoch into DIR (waiting at most TENTHS tenths
# of a second), SIGKILL to its rank 1, then wait for the job.  Sets victim
# (the pid killed, or empty), status (mpirun's) and seconds (from the start).
kill_after_an_epoch() {
    start=$(date +%s)
    for _ in $(seq "$3"); do
        [ -s "$2/metrics.jsonl" ] && break
        sleep 0.1
    done
    victim=$(kill_rank "$1" 1)
    wait "$1"
    status=$?
    seconds=$(($(date +%s) - start))
}
