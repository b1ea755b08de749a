#!/usr/bin/env bash
# Installs the Debian packages Luminal builds against, if any are missing.
# Idempotent and silent when everything is present. Usage: cmake/install-deps.sh [--dev] [--fuzz]
#   --dev   also installs the tools the golden-data generator and the benchmarks' reference
#           scripts need (python3-torch, python3-numpy for bench/llama/make_gguf.py).
#   --fuzz  also installs clang 14 with libFuzzer, for the coverage-guided fuzz build
#           (-DLUMINAL_BUILD_FUZZERS=ON, docs/reliability.md); CI does not need it.
set -euo pipefail
pkgs=(cmake ninja-build g++ gcc pkg-config libfmt-dev catch2 libbenchmark-dev
      libopenblas-dev nlohmann-json3-dev
      # HIP backend: hipRTC (in libamdhip64), its builtin headers, comgr's device libraries.
      # dlopen'ed at run time, never linked; compile_only for AMD GPUs needs them.
      hipcc libamdhip64-dev libhiprtc-builtins5 rocm-device-libs
      # Test-only: the exact ILP extraction the heuristic is measured against.
      libglpk-dev coinor-cbc
      # MPI: dlopen'ed at run time, never linked; mpirun for the dist tests.
      openmpi-bin libopenmpi-dev)
for arg in "$@"; do
  [[ "$arg" == "--dev" ]] && pkgs+=(python3-torch python3-numpy graphviz)
  [[ "$arg" == "--fuzz" ]] && pkgs+=(clang-14 libclang-rt-14-dev)
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
