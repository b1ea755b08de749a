#!/bin/sh
# One command: Luminal's Llama example vs llama.cpp and PyTorch eager on the same random
# weights, same run, same threads. Usage:
#   bench/llama/run.sh [build-dir] [preset: 110m|1b|tiny] [dtype: f32|f16|bf16] [llama_bench args...]
# The model (tools/make-llama) and its GGUF (make_gguf.py) are written once under
# $LUMINAL_BENCH_MODELS (default /tmp/luminal-bench-llama). llama.cpp comes from
# node-llama-cpp's prebuilt CPU build; install it once, anywhere, and point
# LLAMA_CPP_BINS at its library folder (default: ./.llamacpp under this folder):
#   (cd bench/llama && mkdir -p .llamacpp-npm && cd .llamacpp-npm && npm i -E node-llama-cpp@3.21.1 --ignore-scripts)
# Without it the llama.cpp column is skipped.
set -e
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
preset=${2:-110m}
dtype=${3:-f32}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
cmake --build "$build" --target make-llama llama_bench llamacpp_bench -j2 >/dev/null
models=${LUMINAL_BENCH_MODELS:-/tmp/luminal-bench-llama}
dir=$models/$preset-$dtype
[ -f "$dir/config.json" ] || "$build/examples/llama/make-llama" --out "$dir" --preset "$preset" --dtype "$dtype" --seed 7
bins=${LLAMA_CPP_BINS:-$here/.llamacpp-npm/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64}
set --  "$@"
if [ -f "$bins/libllama.v0.4.0.so" ] && [ "$dtype" != bf16 ]; then
  gguf=$dir/model.gguf
  if [ ! -f "$gguf" ] && ! /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    echo "run.sh: make_gguf.py needs numpy: cmake/install-deps.sh --dev (python3-numpy)" >&2
    exit 1
  fi
  [ -f "$gguf" ] || /usr/bin/python3 "$here/make_gguf.py" "$dir" "$gguf"
  set -- --gguf "$gguf" --llamacpp "$build/bench/llama/llamacpp_bench" --bins "$bins" "$@"
else
  echo "run.sh: no llama.cpp libraries at $bins: llama.cpp skipped (see the comment at the top)" >&2
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$build/bench/llama/llama_bench" --model "$dir" "$@"
