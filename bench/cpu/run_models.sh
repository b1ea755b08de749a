#!/bin/sh
# One command: Luminal's CPU target and PyTorch eager (2 threads) on the same models, both
# timings and the ratio. Usage: bench/cpu/run_models.sh [build-dir] [benchmark args...]
# (builds cpu_model_bench first; LUMINAL_BENCH_NO_TORCH=1 skips PyTorch).
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
[ $# -gt 0 ] && shift
cmake --build "$build" --target cpu_model_bench -j2 >/dev/null
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
exec "$build/bench/cpu/cpu_model_bench" "$@"
