// exp(x) is built as exp2(x * log2 e) (graph/ops_common.cpp), so the e-graph needs no exp
// primitive. Rounding the product x * log2 e to f32 first costs up to |x log2 e| 2^-24 in
// the exponent: 60 ulp of e^x near x = 85, and the same in sigmoid, tanh, softmax, silu.
// Whatever evaluates a graph therefore reads exp2(mul(x, c)), c a constant within f32
// rounding of k log2 e for k = +-2^j, as e^(k x) with the product not rounded: the
// reference interpreter in double precision, the CPU backend with the prelude's lm_exp
// (1 ulp). This is part of the graph's semantics (docs/ops.md), one predicate for all.
#pragma once

#include <cstdint>
#include <optional>

#include "graph/graph_impl.hpp"

namespace luminal::detail {

struct NaturalExp {
  uint32_t operand;  ///< the node x
  double k;          ///< exp2(x * c) = e^(k x); k = +-2^j
};

/// When node `id` of `g` is an f32 exp2(mul(x, c)) with c such a constant (directly or
/// through reshape/expand views of a constant), x and k; else nothing.
std::optional<NaturalExp> natural_exp(const GraphImpl& g, uint32_t id);

}  // namespace luminal::detail
