// The computing primitives of the reference interpreter. Operands are unmasked views
// (any strides); results are fresh contiguous views.
#pragma once

#include <string>

#include "backends/reference/view.hpp"
#include "graph/primitives.hpp"

namespace luminal::detail::reference {

View unary(PrimOp op, const View& x);
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
