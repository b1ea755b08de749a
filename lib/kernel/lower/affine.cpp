// Affine forms of index expressions (see affine.hpp).
#include "kernel/lower/affine.hpp"

#include <algorithm>

namespace luminal::kernel::lower {

bool uses_var(const Index& i, int v) {
  const auto& n = i.node();
  if (n.op == kernel::IndexOp::Var) return n.value == v;
  return std::any_of(n.args.begin(), n.args.end(), [&](const Index& a) { return uses_var(a, v); });
}

bool var_free(const Index& i, const VarSet& vars) {
  return std::none_of(vars.begin(), vars.end(), [&](int v) { return uses_var(i, v); });
}

std::optional<Affine> affine(const Index& i, const VarSet& vars) {
  const auto& n = i.node();
  if (var_free(i, vars)) return Affine{{}, i};
  switch (n.op) {
    case kernel::IndexOp::Var: {
      Affine a;
      a.coef[static_cast<int>(n.value)] = Index(1);
      return a;
    }
    case kernel::IndexOp::Add:
    case kernel::IndexOp::Sub: {
      auto x = affine(n.args[0], vars), y = affine(n.args[1], vars);
      if (!x || !y) return std::nullopt;
      const bool sub = n.op == kernel::IndexOp::Sub;
      for (auto& [v, c] : y->coef) {
        auto it = x->coef.find(v);
        Index base = it == x->coef.end() ? Index(0) : it->second;
        x->coef[v] = sub ? base - c : base + c;
      }
      x->base = sub ? x->base - y->base : x->base + y->base;
      return x;
    }
    case kernel::IndexOp::Mul: {
      const bool f0 = var_free(n.args[0], vars), f1 = var_free(n.args[1], vars);
      if (!f0 && !f1) return std::nullopt;
      const size_t vf = f0 ? 0 : 1;
      auto x = affine(n.args[1 - vf], vars);
      if (!x) return std::nullopt;
      const Index& sc = n.args[vf];
      for (auto& [v, c] : x->coef) c = c * sc;
      x->base = x->base * sc;
      return x;
    }
    default:
      return std::nullopt;
  }
}

Index coef_of(const Affine& a, int var) {
  auto it = a.coef.find(var);
  return it == a.coef.end() ? Index(0) : it->second;
}

bool expr_uses_var(const Expr& e, int v) {
  const auto& n = e.node();
  if ((n.op == kernel::ExprOp::Load || n.op == kernel::ExprOp::IndexValue) && uses_var(n.index, v))
    return true;
  if (n.valid && uses_var(*n.valid, v)) return true;
  return std::any_of(n.args.begin(), n.args.end(), [&](const Expr& a) { return expr_uses_var(a, v); });
}

}  // namespace luminal::kernel::lower
