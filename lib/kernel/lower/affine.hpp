// Affine forms of index expressions: which loop variables an index (or an element
// expression's loads) uses, and an index as sum(coef[var] * var) + base -- how the GEMM
// and attention emitters turn a load into a strided matrix view.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel::lower {

/// An affine form sum(coef[var] * var) + base, coefficients free of loop variables.
struct Affine {
  std::map<int, Index> coef;
  Index base;
};

// Loop variables of interest: an affine form is taken in these only; every other
// variable (a batch loop) counts as a constant, so a batch offset may be any index
// expression (e.g. h / G for grouped-query attention).
using VarSet = std::vector<int>;

bool uses_var(const Index& i, int v);
bool var_free(const Index& i, const VarSet& vars);
/// `i` as an affine form in `vars`, or nullopt where it is not one.
std::optional<Affine> affine(const Index& i, const VarSet& vars);
Index coef_of(const Affine& a, int var);
/// Whether element expression `e` reads loop variable `v` (in a load's index, a
/// validity predicate or an index value).
bool expr_uses_var(const Expr& e, int v);

}  // namespace luminal::kernel::lower
