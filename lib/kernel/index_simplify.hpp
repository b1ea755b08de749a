// Simplification of kernel IR index expressions with the loop variables' ranges.
//
// Views over symbolic dims compose into index trees such as
//   ((((v0 * 18 + v4) * (D * D)) + v3) // D) // D      with v3 in [0, D*D)
// which a lowering builds mechanically (a reshape linearizes, the next one splits with
// floor div and mod). Left alone they grow with every view and cost a div/mod per element.
// simplify() rewrites an index into a sum of monomials over atoms (loop variables,
// symbols, and div/mod/min/max/... nodes it could not remove), and removes div and mod by
// exact identities and by ranges:
//   (q*b + r) // b = q + r // b,   (q*b + r) % b = r % b        (terms divisible by b)
//   (x // a) // b  = x // (a*b)                                 (b > 0)
//   r // b = 0,  r % b = r                                      (0 <= r < b, by ranges)
// and folds comparisons (pad validity) that the ranges decide. A divisor of several terms
// (n + 3) divides the dividend polynomially first. Loop variable v ranges over
// [0, extents[v]); a symbol is at least its sym_min (default 0). The result equals the
// input for every binding in range; an index it cannot analyse comes back unchanged.
#pragma once

#include <map>
#include <string>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel {

/// Loop variable id -> its extent (the variable ranges over [0, extent)).
using VarExtents = std::map<int, Index>;
/// Symbol -> its least value (dims declared with a lower bound); absent symbols: 0.
using SymbolMins = std::map<std::string, int64_t>;

Index simplify(const Index& i, const VarExtents& extents, const SymbolMins& sym_min = {});

}  // namespace luminal::kernel
