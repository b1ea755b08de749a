#include "graph/dim_vars.hpp"

#include "graph/dim_expr.hpp"

namespace luminal::detail {

void collect_vars(const Dim& d, std::map<std::string, VarRange>& out) {
  for (const Term& t : d.expr()->terms)
    for (const AtomPtr& a : t.atoms) {
      if (a->kind == AtomKind::Var) {
        out.emplace(a->name, VarRange{a->lo, a->hi, a->multiple});
      } else {
        collect_vars(a->a, out);
        collect_vars(a->b, out);
      }
    }
}

std::optional<LinearForm> as_linear(const Dim& d) {
  const DimExpr& e = *d.expr();
  if (e.terms.size() != 1) return std::nullopt;
  const Term& t = e.terms[0];
  if (t.atoms.size() != 1 || t.atoms[0]->kind != AtomKind::Var) return std::nullopt;
  return LinearForm{t.atoms[0]->name, t.coeff, e.constant};
}

}  // namespace luminal::detail
