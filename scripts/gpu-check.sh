#!/bin/sh
# One command to verify lazydt on a GPU machine (docs/gpu.md records each run):
#   1. a Release build with CUDA (and MPI when present), all cores;
#   2. the GPU suite, ctest -L gpu;
#   3. ldt-bench gpu_replay (replay against eager launches, figures in the report);
#   4. ldt train --device cuda against the CPU run of the same step, 50 steps, TF32 off:
#      f64 losses within 1e-9 relative, f32 within 1e-4, on mesh 1 and, with several GPUs,
#      on a data-parallel mesh of all of them (rank threads) and under mpirun --backend nccl.
# It writes one report, JSON and text (each check: pass or fail, its figures, its seconds), to
# $LDT_GPU_CHECK_OUT (default build-gpu/gpu-check/report.{json,txt}) and prints the text.
# Without a GPU it says so and exits 0. Exit status: 0 when every check passed, 1 otherwise.
# Usage: scripts/gpu-check.sh   (BUILD=dir to build elsewhere; STEPS=n for another length;
# LDT_GPU_CHECK_CUDA=EMU with a stand-in nvidia-smi on PATH runs the script itself on the
# CUDA emulator, which is how it is tested without a GPU; LDT_GPU_CHECK_PREBUILT=1 skips the
# set-up and the build and checks the build already in BUILD, e.g. one made elsewhere by
# scripts/gpu-bundle.sh for a GPU machine that cannot install packages; LDT_GPU_CHECK_LIMIT=S
# bounds each step after the build to S seconds (default 900), so a hang fails that check only)
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD=${BUILD:-build-gpu}
OUT=${LDT_GPU_CHECK_OUT:-$BUILD/gpu-check}
STEPS=${STEPS:-50}
LIMIT=${LDT_GPU_CHECK_LIMIT:-900}
CUDA_MODE=${LDT_GPU_CHECK_CUDA:-ON}
export NVIDIA_TF32_OVERRIDE=0 OPENBLAS_NUM_THREADS=1

ngpu=0
if command -v nvidia-smi >/dev/null 2>&1; then
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
if [ "$ngpu" -eq 0 ]; then
    echo "gpu-check: no GPU on this machine (nvidia-smi lists none): nothing to check"
    exit 0
fi
mkdir -p "$OUT"
log="$OUT/log.txt"
: >"$log"
gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
       head -n 1 | sed 's/"/\\"/g')
checks=""   # JSON objects, comma-joined
text=""     # report lines
failed=0

now() { date +%s; }
# record NAME PASS(0/1) SECONDS "JSON figures" "text figures"
record() {
    [ "$2" -eq 1 ] && res=pass || { res=fail; failed=$((failed + 1)); }
    obj="{\"name\":\"$1\",\"result\":\"$res\",\"seconds\":$3${4:+,$4}}"
    checks="${checks:+$checks,}$obj"
    text="$text$(printf '%-28s %-4s %5ss  %s' "$1" "$res" "$3" "$5")
"
    printf '%-28s %-4s %5ss  %s\n' "$1" "$res" "$3" "$5"
}

t0=$(now)
ok=1
if [ "${LDT_GPU_CHECK_PREBUILT:-0}" = 1 ]; then
    echo "gpu-check: $ngpu GPU(s): $gpus; checking the build already in $BUILD (log: $log)"
    for f in ldt ldt-bench CTestTestfile.cmake; do
        [ -e "$BUILD/$f" ] || { echo "gpu-check: $BUILD/$f is missing (LDT_GPU_CHECK_PREBUILT=1 wants a build there)" >>"$log"; ok=0; }
    done
    record build "$ok" $(($(now) - t0)) "\"prebuilt\":true" "prebuilt, $BUILD"
else
    echo "gpu-check: $ngpu GPU(s): $gpus; building Release with CUDA in $BUILD (log: $log)"
    { ./scripts/deps.sh && cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLDT_CUDA="$CUDA_MODE" &&
      cmake --build "$BUILD" -j "$(nproc)"; } >>"$log" 2>&1 || ok=0
    record build "$ok" $(($(now) - t0)) "" "Release, LDT_CUDA=$CUDA_MODE"
fi
if [ "$ok" -eq 0 ]; then
    echo "gpu-check: the build failed; its tail:"
    tail -n 30 "$log"
fi

if [ "$ok" -eq 1 ]; then
    # 2. the GPU suite
    t0=$(now)
    (cd "$BUILD" && ctest -L gpu --output-on-failure --stop-time "$(date -d "+$LIMIT sec" +%H:%M:%S)") \
        >"$OUT/ctest.txt" 2>&1 && ok=1 || ok=0
    summary=$(grep -E 'tests passed|tests failed' "$OUT/ctest.txt" | tail -n 1)
    nfail=$(grep -cE '\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception' "$OUT/ctest.txt" || true)
    nskip=$(grep -c 'Skipped' "$OUT/ctest.txt" || true)
    record ctest_gpu "$ok" $(($(now) - t0)) "\"failed\":$nfail,\"skipped\":$nskip,\"summary\":\"$summary\"" \
        "$summary ($nskip skipped)"
    [ "$ok" -eq 1 ] || grep -E '\*\*\*|Failed|FAIL' "$OUT/ctest.txt" | head -n 20

    # 3. the replay benchmark
    t0=$(now)
    timeout "$LIMIT" "$BUILD/ldt-bench" gpu_replay --json >"$OUT/gpu_replay.json" 2>>"$log" && ok=1 || ok=0
    rep=$(sed -n 's/.*"name":"replay_us_per_step","value":\([^,]*\),.*/\1/p' "$OUT/gpu_replay.json")
    eag=$(sed -n 's/.*"name":"eager_us_per_step","value":\([^,]*\),.*/\1/p' "$OUT/gpu_replay.json")
    [ -n "$rep" ] || ok=0
    record gpu_replay "$ok" $(($(now) - t0)) "\"replay_us_per_step\":${rep:-null},\"eager_us_per_step\":${eag:-null}" \
        "replay ${rep:-?} us, eager ${eag:-?} us a step"

    # 4. training on the GPU against the CPU: max relative loss difference over STEPS steps
    losses() { sed -n 's/.*"losses":\[\([^]]*\)\].*/\1/p' "$1" | tr ',' '\n'; }
    compare() { # cpu.json gpu.json tol -> prints "maxrel pass(0/1)"
        losses "$1" >"$OUT/a.txt"
        losses "$2" >"$OUT/b.txt"
        paste -d' ' "$OUT/a.txt" "$OUT/b.txt" | awk -v tol="$3" -v n="$STEPS" '
            { d = $1 - $2; if (d < 0) d = -d; m = $1 < 0 ? -$1 : $1; r = m > 0 ? d / m : d;
              if (r > worst) worst = r; if ($2 == "" || $2 != $2 + 0) bad = 1; k++ }
            END { printf "%.3g %d\n", worst, (k == n && !bad && worst <= tol) }'
    }
    train_check() { # name mesh dtype tol [launcher...]: CPU threads run against the GPU run
        name=$1 mesh=$2 dt=$3 tol=$4
        shift 4
        t0=$(now)
        args="train --mesh $mesh --steps $STEPS --dtype $dt --json"
        timeout "$LIMIT" "$BUILD/ldt" $args >"$OUT/$name.cpu.json" 2>>"$log"
        if [ $# -gt 0 ]; then
            timeout "$LIMIT" "$@" "$root/$BUILD/ldt" $args --backend nccl --device cuda >"$OUT/$name.gpu.json" 2>>"$log"
        else
            timeout "$LIMIT" "$BUILD/ldt" $args --device cuda >"$OUT/$name.gpu.json" 2>>"$log"
        fi
        set -- $(compare "$OUT/$name.cpu.json" "$OUT/$name.gpu.json" "$tol")
        first=$(losses "$OUT/$name.gpu.json" | head -n 1)
        last=$(losses "$OUT/$name.gpu.json" | tail -n 1)
        record "$name" "${2:-0}" $(($(now) - t0)) \
            "\"mesh\":\"$mesh\",\"dtype\":\"$dt\",\"steps\":$STEPS,\"max_rel_diff\":${1:-null},\"tolerance\":$tol,\"loss_first\":${first:-null},\"loss_last\":${last:-null}" \
            "mesh $mesh $dt: max rel diff ${1:-?} (tol $tol), loss ${first:-?} -> ${last:-?}"
    }
    train_check train_mesh1_f64 1 f64 1e-9
    train_check train_mesh1_f32 1 f32 1e-4
    if [ "$ngpu" -gt 1 ]; then
        train_check "train_dp${ngpu}_f64" "dp=$ngpu" f64 1e-9
        train_check "train_dp${ngpu}_f32" "dp=$ngpu" f32 1e-4
        if command -v mpirun >/dev/null 2>&1; then
            train_check "train_nccl_mpi_dp${ngpu}_f64" "dp=$ngpu" f64 1e-9 ./scripts/ldt-mpirun -np "$ngpu"
        fi
    fi
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"date":"%s","commit":"%s","gpus":%d,"gpu":"%s","failed":%d,"checks":[%s]}\n' \
    "$date" "$commit" "$ngpu" "$gpus" "$failed" "$checks" >"$OUT/report.json"
{
    echo "lazydt gpu-check $date, commit $commit, $ngpu GPU(s): $gpus"
    printf '%s' "$text"
    echo "failed checks: $failed"
} >"$OUT/report.txt"
echo "gpu-check: $failed failed; report: $OUT/report.json and $OUT/report.txt"
[ "$failed" -eq 0 ]
