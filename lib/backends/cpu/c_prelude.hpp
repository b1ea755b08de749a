// The C prelude emitted at the top of every generated CPU translation unit: integer
// types, restrict/inline macros, and our own branch-free f32 math (no libm calls, so a
// loop that calls them vectorizes) plus f16/bf16 <-> f32 conversions (round to nearest
// even). Every function is `static inline` and force-inlined: a loop under
// `#pragma omp simd` calling lm_exp() becomes straight vector code.
//
// Stated accuracy, measured by tests/cpu/prelude_math_test.cpp against double-precision
// libm over dense sweeps of the domain (an "ulp" is the f32 spacing at the true result):
#pragma once

#include <string>

namespace luminal::cpu {

/// The C source of the prelude (about 250 lines; compiled in every kernel TU).
const std::string& c_prelude();

/// Maximum errors the prelude promises (asserted by the test).
struct PreludeBounds {
  static constexpr double exp_ulp = 1;        ///< lm_exp, all finite x, normal results
  static constexpr double exp2_ulp = 1;       ///< lm_exp2, normal results
  static constexpr double log_ulp = 2;        ///< lm_log, x > 0 (subnormals included)
  static constexpr double log2_ulp = 3;       ///< lm_log2, x > 0
  static constexpr double sincos_abs = 1e-7;  ///< lm_sin/lm_cos absolute, |x| <= 8192
  static constexpr double sincos_ulp = 1;     ///< lm_sin/lm_cos, |x| <= pi/4 (relative)
  static constexpr double tanh_ulp = 3;       ///< lm_tanh, all x
  static constexpr double sigmoid_ulp = 3;    ///< lm_sigmoid, results >= 2^-126
  static constexpr double erf_ulp = 3;        ///< lm_erf, all x
};

}  // namespace luminal::cpu
