// Kernel IR -> one C translation unit (the CPU backend's renderer).
//
// Every kernel becomes
//   void <name>(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt, void* lm_cx);
// and the program entry `lm_program` (same signature) runs them in order. lm_bufs[i] is
// buffer i of the Program, lm_syms[i] the value of Program::symbols[i], lm_rt the host's
// services (LmRuntime below) and lm_cx the call's context (its threads and scratch).
// Buffers are `restrict` pointers (the memory planner never lets two live buffers
// overlap); loop bodies are straight-line SSA temporaries (shared sub-expressions computed
// once) calling the prelude's branch-free math, so `#pragma omp simd` loops vectorize
// (compiled with -fopenmp-simd: a vectorization hint, no OpenMP runtime). A kernel's
// leading parallel loops become its task, `<name>_task(env, lo, hi, tid)` over their
// collapsed iteration range, which the kernel hands to the call's threads in chunks
// (lm_rt->parallel_for) or runs inline when it is small. Reductions accumulate in a scalar
// under `omp simd reduction(...)` when their innermost loop is vectorized. GEMM kernels
// call a generated packed GEMM (gemm_codegen.hpp) for the chosen ISA, or the runtime's
// cblas_sgemm (library candidate) when the strides allow it, falling back to the
// generated one otherwise; the epilogue runs per tile while it is in cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/gemm_codegen.hpp"
#include "kernel/kernel_ir.hpp"

namespace luminal::cpu {

struct RenderOptions {
  CpuIsa isa = host_isa();  // ISA of the generated GEMM micro-kernels
};

struct CProgram {
  std::string source;
  std::vector<std::string> kernels;  // symbol names, in program order
  std::string entry = "lm_program";
};

CProgram render_c(const kernel::Program& p, const RenderOptions& opt = {});

/// A chunk of a parallel loop in generated code: iterations [lo, hi) run by member `tid`.
using LmTaskFn = void (*)(void* env, int64_t lo, int64_t hi, int tid);

/// Host services handed to every kernel (mirrors `lm_runtime` in the generated C). Every
/// function takes the call's opaque context `lm_cx` (a KernelCall, or null: one thread).
struct LmRuntime {
  /// cblas_sgemm with int enums (row-major = 101, no-trans = 111, trans = 112), or null.
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc);
  /// Threads of the call (the caller plus the pool workers it has; >= 1).
  int (*threads)(void* cx);
  /// Runs fn(env, lo, hi, tid) over [0, n) in chunks of `chunk` on the call's threads.
  /// nowait != 0: may return before every chunk is done (env is copied; the kernel must
  /// issue nothing after it); the executable waits before anything that depends on it.
  void (*parallel_for)(void* cx, int64_t n, int64_t chunk, LmTaskFn fn, const void* env, int64_t env_bytes,
                       int nowait);
  /// Member `tid`'s scratch of at least `bytes` (64-byte aligned), or null when the call
  /// has none that large (the kernel then allocates its own).
  void* (*scratch)(void* cx, int tid, int64_t bytes);
  /// Returns when every chunk issued so far is done (lm_program calls it between kernels).
  void (*barrier)(void* cx);
};
/// The runtime table of this build (sgemm is OpenBLAS when Luminal was built with BLAS).
const LmRuntime* runtime_table();

using KernelFn = void (*)(void* const* buffers, const int64_t* symbols, const LmRuntime* rt, void* cx);

}  // namespace luminal::cpu
