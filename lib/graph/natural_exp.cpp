// See natural_exp.hpp.
#include "graph/natural_exp.hpp"

#include <cmath>
#include <numbers>

namespace luminal::detail {

namespace {

// The value of a constant seen through views (a scalar broadcast to x's shape).
std::optional<double> constant_value(const GraphImpl& g, uint32_t id) {
  for (int depth = 0; depth < 8; ++depth) {
    const Node& n = g.nodes[id];
    if (n.op == PrimOp::Constant) return n.value;
    if ((n.op != PrimOp::Expand && n.op != PrimOp::Reshape) || n.inputs.size() != 1) return std::nullopt;
    id = n.inputs[0];
  }
  return std::nullopt;
}

// k when c = k log2 e up to f32 rounding (a folded constant may have been rounded), k = +-2^j.
std::optional<double> scale_of(double c) {
  if (!std::isfinite(c) || c == 0) return std::nullopt;
  const double k = c / std::numbers::log2e;
  int e = 0;
  const double m = std::frexp(std::fabs(k), &e);  // |k| = m 2^e, m in [0.5, 1)
  const double pow2 = std::ldexp(m < 0.75 ? 0.5 : 1.0, e);
  if (std::fabs(std::fabs(k) - pow2) > pow2 * 0x1p-23) return std::nullopt;
  return k < 0 ? -pow2 : pow2;
}

}  // namespace

std::optional<NaturalExp> natural_exp(const GraphImpl& g, uint32_t id) {
  const Node& n = g.nodes[id];
  if (n.op != PrimOp::Exp2 || n.dtype != DType::f32 || n.inputs.size() != 1) return std::nullopt;
  const Node& m = g.nodes[n.inputs[0]];
  if (m.op != PrimOp::Mul || m.dtype != DType::f32 || m.inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    if (auto c = constant_value(g, m.inputs[side]))
      if (auto k = scale_of(*c)) return NaturalExp{m.inputs[1 - side], *k};
  }
  return std::nullopt;
}

}  // namespace luminal::detail
