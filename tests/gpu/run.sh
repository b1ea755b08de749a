#!/usr/bin/env bash
# For a machine WITH a CUDA GPU (CI machines have none: everything here is also checked on
# the emulator and with compile_only there). Builds Luminal, then on Target::cuda():
#   the golden cases, the all-ops test, translation validation (test-size graphs and the
#   decoder block), and the GPU benchmark (compile times, estimates, device timings),
# printing every figure. Usage: tests/gpu/run.sh [build-folder]   (default build-gpu)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build-gpu}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target golden_tests cpu_e2e_tests gpu_tests gpu_bench
export LUMINAL_CACHE_DIR="${LUMINAL_CACHE_DIR:-$(mktemp -d)}"
echo "== target availability"
"$build/tests/gpu/gpu_tests" "[target]" --success 2>&1 | grep -E "unavailable|passed|failed" || true
echo "== golden cases on cuda (and the emulator)"
"$build/tests/golden/golden_tests" "[gpu],[emu]"
echo "== every op on every available target (Target::best() is the GPU here)"
"$build/tests/cpu/cpu_e2e_tests" "[backend_ops]"
echo "== translation validation and run_device (device memory, a caller's stream) on the device"
"$build/tests/gpu/gpu_tests" "[device]" --success | tail -3
echo "== GPU benchmark"
"$build/bench/gpu/gpu_bench"
