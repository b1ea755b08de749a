// The elementary functions written with kernel-IR ops the way the compiler computes them
// (lib/graph/ops_common.cpp builds exp, sigmoid, ... from exp2, log2, sin, tanh and
// recip): for kernel IR written by hand in tests and benchmarks.
#pragma once

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel::math {

inline Expr mul(Expr a, double k) { return binary(BinaryOp::Mul, std::move(a), constant(k)); }
inline Expr exp(Expr x) { return unary(UnaryOp::Exp2, mul(std::move(x), 1.4426950408889634)); }
inline Expr log(Expr x) { return mul(unary(UnaryOp::Log2, std::move(x)), 0.6931471805599453); }
inline Expr cos(Expr x) {
  return unary(UnaryOp::Sin, binary(BinaryOp::Add, std::move(x), constant(1.5707963267948966)));
}
inline Expr sigmoid(Expr x) {
  return unary(UnaryOp::Recip, binary(BinaryOp::Add, constant(1.0), exp(unary(UnaryOp::Neg, std::move(x)))));
}
inline Expr tanh(Expr x) { return unary(UnaryOp::Tanh, std::move(x)); }
inline Expr relu(Expr x) { return binary(BinaryOp::Max, std::move(x), constant(0.0)); }
inline Expr abs(Expr x) {
  Expr n = unary(UnaryOp::Neg, x);
  return binary(BinaryOp::Max, std::move(x), std::move(n));
}
inline Expr div(Expr a, Expr b) {
  return binary(BinaryOp::Mul, std::move(a), unary(UnaryOp::Recip, std::move(b)));
}

}  // namespace luminal::kernel::math
