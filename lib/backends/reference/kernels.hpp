// The computing primitives of the reference interpreter. Operands are unmasked views
// (any strides); results are fresh contiguous views.
#pragma once

#include <cmath>
#include <string>

#include "backends/reference/view.hpp"
#include "graph/primitives.hpp"
#include "luminal/error.hpp"

namespace luminal::detail::reference {

/// The meaning of each f32 unary math primitive (graph/op_table.hpp), one element at a
/// time: the interpreter maps it over views and the kernel-IR evaluator calls it, so both
/// compute exactly this. A new unary primitive gets its case here.
inline float unary_f32(PrimOp op, float v) {
  switch (op) {
    case PrimOp::Exp2:
      return std::exp2(v);
    case PrimOp::Log2:
      return std::log2(v);
    case PrimOp::Sin:
      return std::sin(v);
    case PrimOp::Tanh:  // in double, then rounded: correctly rounded but for rare double roundings
      return static_cast<float>(std::tanh(static_cast<double>(v)));
    case PrimOp::Sqrt:
      return std::sqrt(v);
    case PrimOp::Recip:
      return 1.0f / v;
    case PrimOp::Neg:
      return -v;
    default:
      throw InternalError("[reference] " + std::string(prim_name(op)) + " is not a unary math op");
  }
}

View unary(PrimOp op, const View& x);
/// e^(k x) of an f32 view, in double precision and rounded once (graph/natural_exp.hpp).
View natural_exp(const View& x, double k);
View binary(PrimOp op, const View& a, const View& b);
View where(const View& cond, const View& a, const View& b);
View cast(const View& x, DType to);
/// Reduces `axis` away: accumulates in the element type in index order.
View reduce(PrimOp op, const View& x, int axis);
/// sum_reduce(mul(a, b), axis) for f32 without materializing the product: each product
/// is rounded to float and added in index order, so the result is bit-identical to the
/// two-step form (no fused multiply-add: the library builds with -ffp-contract=off
/// semantics of ISO C++).
View sum_of_products(const View& a, const View& b, int axis);
/// `op_name` names the user's op in the out-of-range error.
View gather(const View& table, const View& ids, const std::string& op_name, Stats& stats);
View iota(int64_t n);
View constant(double value, DType dtype);

}  // namespace luminal::detail::reference
