// Looking inside Dims: their variables, and the linear form a*V + c used to solve a
// dim from an input's concrete shape.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "luminal/dim.hpp"

namespace luminal::detail {

struct VarRange {
  int64_t lo = 0, hi = 0;
  int64_t multiple = 1;
};

/// Adds every variable of `d` (with its declared range) to `out`.
void collect_vars(const Dim& d, std::map<std::string, VarRange>& out);

/// d == coeff * var + constant with coeff != 0?
struct LinearForm {
  std::string var;
  int64_t coeff = 1, constant = 0;
};
std::optional<LinearForm> as_linear(const Dim& d);

}  // namespace luminal::detail
