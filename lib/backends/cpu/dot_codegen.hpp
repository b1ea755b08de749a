// Generated dot products for the CPU backend's row-dot reductions: a reduction kernel
// whose value is x[k] * w[row, k] over one contiguous k loop (every one-row product
// x @ W^T: a decode step's projections, with an RMSNorm prologue or a SwiGLU epilogue
// fused in) calls one of these per output row instead of a generic `omp simd` loop.
//
// Why a function of its own: the generic loop keeps one accumulator (GCC may not
// reassociate further without -ffast-math) and converts an f16 weight with the prelude's
// bit arithmetic, ~8 integer instructions per vector; a decode step is then bound by the
// conversion instead of by memory. Here four independent accumulators stream the row
// with FMA, and f16 is converted 16 (AVX-512) or 8 (AVX2 + F16C) elements per
// vcvtph2ps, bf16 by a shift. The sum's order differs from the generic loop's (as the
// lanes of `omp simd` already do); each product is rounded once (FMA).
#pragma once

#include <string>

#include "backends/cpu/gemm_codegen.hpp"
#include "luminal/dtype.hpp"

namespace luminal::cpu {

/// Name of the function dot_source(isa, w_dtype) defines.
std::string dot_function_name(CpuIsa isa, DType w_dtype);

/// C source defining
///   static inline float <dot_function_name>(const float* x, const W_T* w, int64_t n);
/// = sum over k < n of x[k] * w[k] (w converted to f32; W_T is float for f32, uint16_t
/// for f16/bf16). Needs the prelude (lm_f16_to_f32, lm_bf16_to_f32); includes
/// <immintrin.h> for the SIMD ISAs. Throws InternalError for another w_dtype.
std::string dot_source(CpuIsa isa, DType w_dtype);

}  // namespace luminal::cpu
