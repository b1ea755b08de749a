// Reshapes that only insert or remove unit dims: the views a streaming attention reads
// its scores through, a GEMM reads a concatenated B through, and attention_match.cpp's
// label walk follows. One definition for all of them.
#pragma once

#include <optional>
#include <vector>

#include "luminal/dim.hpp"

namespace luminal::ir {

/// When `out` and `in` differ only by unit dims (their other dims equal, in order): for
/// each axis of `out`, the axis of `in` it is, or -1 for a unit axis of `out` that `in`
/// lacks (unit axes pair up with nothing). nullopt otherwise.
inline std::optional<std::vector<int>> unit_reshape_axes(const std::vector<Dim>& out,
                                                         const std::vector<Dim>& in) {
  auto unit = [](const Dim& d) { return d.as_constant() == int64_t{1}; };
  std::vector<int> of(out.size(), -1);
  size_t i = 0;
  for (size_t o = 0; o < out.size(); ++o) {
    if (unit(out[o])) continue;
    while (i < in.size() && unit(in[i])) ++i;
    if (i == in.size() || !out[o].same_as(in[i])) return std::nullopt;
    of[o] = static_cast<int>(i++);
  }
  while (i < in.size() && unit(in[i])) ++i;
  if (i != in.size()) return std::nullopt;
  return of;
}

}  // namespace luminal::ir
