// The one place where the golden comparison's tolerances are stated, per dtype.
//
// An element passes when |got - expected| <= atol + rtol * |expected|; NaN must meet NaN
// and an infinity the same infinity. Why these values:
//  * f32: PyTorch and Luminal may sum in a different order and use different (correctly
//    rounded to ~1 ulp) transcendental functions; 1e-5 relative is ~80 ulp of headroom
//    for the composite ops (softmax, norms, attention). atol covers results near 0 that
//    come out of cancellation (a 40-term dot product of O(1) values that nearly cancels
//    carries ~1e-6 of absolute rounding error in any summation order) and composite
//    forms such as cos(x) = sin(x + pi/2), whose argument rounds by ulp(x)/2.
//  * f16 / bf16: both sides compute in f32 and round once, so they differ by at most one
//    unit in the last place when the f32 values straddle a rounding boundary: rtol is two
//    ulp at 1.0 (2^-10 resp. 2^-7 per ulp).
//  * i32 and bool: exact.
#pragma once

#include "luminal/dtype.hpp"

namespace golden {

struct Tolerance {
  double rtol;
  double atol;
};

constexpr Tolerance tolerance_for(luminal::DType dtype) {
  switch (dtype) {
    case luminal::DType::f32:
      return {1e-5, 1e-5};
    case luminal::DType::f16:
      return {2e-3, 5e-5};
    case luminal::DType::bf16:
      return {1.6e-2, 1e-4};
    case luminal::DType::i32:
      return {0.0, 0.0};
    case luminal::DType::boolean:
      return {0.0, 0.0};
  }
  return {0.0, 0.0};
}

}  // namespace golden
