#!/bin/sh
# The cost model's acceptance runs on this host's CPUs (docs/cost-model.md, "Validation"):
# PAIRS runs of `ldt-bench calibrate_repro` (two consecutive calibrations of 4 rank threads,
# each figure and price side by side) and RUNS runs of `ldt-bench costmodel` (a calibration,
# then 44 redistributions and 6 captured steps measured against their prices), alternating,
# with the host's cores and load before and after each. Meant for an idle host (a lent GPU
# machine's CPUs): on a shared one the load decides more than the model does.
# Writes $OUT (default $BUILD/cpu-repro): each run's table and notes (repro-N.txt,
# costmodel-N.txt: every figure, price and case), each pair's two calibrations (repro-N/
# cal-1.json and cal-2.json, for `ldt-bench calibrate_refit`), and summary.txt: per run its
# wall time, load and goal lines. Prints the summary. Exit status 0 when every run finished (whatever the goals), 1 otherwise.
# With MPI_PAIRS=n (default 0), n pairs more of two consecutive `ldt calibrate --backend mpi
# --json` under scripts/ldt-mpirun (MPI_NP processes, default 4: the mesh's ranks), each pair's
# calibrations in mpi-N/cal-1.json and cal-2.json and compared by `ldt-bench calibrate_refit`
# (mpi-N.txt: the fit's figures, and the compute figures as saved); needs $BUILD/ldt built
# with MPI (the GPU build is).
# Usage: scripts/cpu-repro.sh   (BUILD=dir holding ldt-bench, default build-rel, built when
# missing; PAIRS=n, default 3; RUNS=n, default 2; MPI_PAIRS=n, default 0; MPI_NP=n; OUT=dir)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-rel}
PAIRS=${PAIRS:-3}
RUNS=${RUNS:-2}
OUT=${OUT:-$BUILD/cpu-repro}
export OPENBLAS_NUM_THREADS=1
if [ ! -x "$BUILD/ldt-bench" ]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLDT_BUILD_TESTS=OFF >/dev/null &&
        cmake --build "$BUILD" -j"$(nproc)" --target ldt-bench >/dev/null || {
        echo "cpu-repro: could not build $BUILD/ldt-bench"
        exit 1
    }
fi
mkdir -p "$OUT"
sum="$OUT/summary.txt"
{
    echo "cpu-repro: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')"
} >"$sum"
rc=0
i=1
max=$PAIRS
[ "$RUNS" -gt "$max" ] && max=$RUNS
while [ "$i" -le "$max" ]; do
    for b in calibrate_repro costmodel; do
        if [ "$b" = calibrate_repro ]; then n=$PAIRS; f="$OUT/repro-$i"; else n=$RUNS; f="$OUT/costmodel-$i"; fi
        [ "$i" -le "$n" ] || continue
        l0=$(cut -d' ' -f1 /proc/loadavg)
        t0=$(date +%s.%N)
        if [ "$b" = calibrate_repro ]; then mkdir -p "$f"; fi
        if ! LDT_REPRO_DIR="$f" "$BUILD/ldt-bench" "$b" >"$f.txt" 2>&1; then
            rc=1
        fi
        t1=$(date +%s.%N)
        l1=$(cut -d' ' -f1 /proc/loadavg)
        {
            printf '%s %d: %s s, load %s -> %s\n' "$b" "$i" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$l0" "$l1"
            grep -E '^(goal|fit parameters|host|machine:)' "$f.txt" | sed 's/^/  /'
        } >>"$sum"
    done
    i=$((i + 1))
done
i=1
while [ "$i" -le "${MPI_PAIRS:-0}" ]; do
    np=${MPI_NP:-4}
    f="$OUT/mpi-$i"
    mkdir -p "$f"
    l0=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    for k in 1 2; do
        if ! scripts/ldt-mpirun -x OPENBLAS_NUM_THREADS=1 -np "$np" "$BUILD/ldt" calibrate --mesh "$np" \
            --backend mpi --json >"$f/cal-$k.json" 2>"$f/cal-$k.err"; then
            rc=1
        fi
    done
    if ! "$BUILD/ldt-bench" calibrate_refit "$f/cal-1.json" "$f/cal-2.json" >"$f.txt" 2>&1; then
        rc=1
    fi
    t1=$(date +%s.%N)
    l1=$(cut -d' ' -f1 /proc/loadavg)
    {
        printf 'mpi calibrations %d (%d processes): %s s, load %s -> %s\n' "$i" "$np" \
            "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$l0" "$l1"
        grep -E '^(all sizes|saved:|machine:)' "$f.txt" | sed 's/^/  /'
    } >>"$sum"
    i=$((i + 1))
done
cat "$sum"
exit $rc
