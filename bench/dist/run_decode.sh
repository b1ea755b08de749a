#!/usr/bin/env bash
# Decode of the ~110M Llama, both ways in one go: 1 process x 2 threads, then 2 MPI ranks
# x 1 thread. Usage: bench/dist/run_decode.sh [build dir]
set -euo pipefail
build=${1:-build}
bench=$build/bench/dist/dist_decode_bench
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
LUMINAL_BENCH_THREADS=2 "$bench" --benchmark_counters_tabular=true
LUMINAL_BENCH_THREADS=1 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x LUMINAL_BENCH_THREADS -np 2 \
  "$bench" --benchmark_counters_tabular=true
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
