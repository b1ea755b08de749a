// Kernel IR -> one C translation unit (the CPU backend's renderer).
//
// Every kernel becomes
//   void <name>(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt);
// and the program entry `lm_program` (same signature) runs them in order. lm_bufs[i] is
// buffer i of the Program, lm_syms[i] the value of Program::symbols[i]. Buffers are
// `restrict` pointers (the memory planner never lets two live buffers overlap); loop
// bodies are straight-line SSA temporaries (shared sub-expressions computed once) calling
// the prelude's branch-free math, so `#pragma omp simd` loops vectorize. The first group
// of consecutive `parallel` loops becomes one `omp parallel for` (collapsed); a loop that
// is both parallel and vectorized becomes `omp parallel for simd`. Reductions accumulate
// in a scalar under `omp simd reduction(...)` when their innermost loop is vectorized.
// GEMM kernels call a generated packed GEMM (gemm_codegen.hpp) for the chosen ISA, or
// the runtime's cblas_sgemm (library candidate) when the strides allow it, falling back
// to the generated one otherwise; the epilogue runs per tile while it is in cache.
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

/// Host services handed to every kernel (mirrors `lm_runtime` in the generated C).
struct LmRuntime {
  /// cblas_sgemm with int enums (row-major = 101, no-trans = 111, trans = 112), or null.
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc);
};
/// The runtime table of this build (sgemm is OpenBLAS when Luminal was built with BLAS).
const LmRuntime* runtime_table();

using KernelFn = void (*)(void* const* buffers, const int64_t* symbols, const LmRuntime* rt);

}  // namespace luminal::cpu
