// What generated kernels see as their call context (`lm_cx`): the call's team of threads
// and the per-thread scratch (GEMM packing buffers) carved from the call's arena.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cpu/c_renderer.hpp"
#include "runtime/thread_pool.hpp"

namespace luminal::cpu {

struct KernelCall {
  detail::CallTeam* team = nullptr;  // null: everything on the calling thread
  std::byte* scratch = nullptr;      // scratch_threads regions of scratch_bytes each
  size_t scratch_bytes = 0;
  int scratch_threads = 0;
};

/// Runs a generated entry point (or kernel) once on `threads` threads of the shared pool
/// (0: all of them), without scratch: for tests and benchmarks of bare programs.
void run_generated(KernelFn fn, void* const* buffers, const int64_t* symbols, int threads = 0);

}  // namespace luminal::cpu
