#!/usr/bin/env bash
# Decode of the ~110M Llama, every way in one go: 1 process x 2 threads and x 1 thread,
# then N MPI ranks x 1 thread for each N given (default 2; "2 4" for both; more ranks than
# cores are oversubscribed). Usage: bench/dist/run_decode.sh [build dir] [rank counts]
set -euo pipefail
build=${1:-build}
ranks=${2:-2}
bench=$build/bench/dist/dist_decode_bench
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 2 1; do
  echo "== 1 process x $t thread(s)"
  LUMINAL_BENCH_THREADS=$t "$bench" --benchmark_counters_tabular=true
done
for np in $ranks; do
  echo "== $np MPI ranks x 1 thread (load $(cut -d' ' -f1 /proc/loadavg))"
  LUMINAL_BENCH_THREADS=1 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -x LUMINAL_BENCH_THREADS \
    -np "$np" "$bench" --benchmark_counters_tabular=true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
