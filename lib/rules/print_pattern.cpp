// Printing a rule's two sides as the identity it states (the doc of a pattern rule).
#include <string>

#include "rules/algebra_dsl.hpp"

namespace luminal::rules::dsl {

namespace {

const char* infix(Op op) {
  switch (op) {
    case Op::Add:
      return " + ";
    case Op::Mul:
      return " * ";
    case Op::LessThan:
      return " < ";
    case Op::Equal:
      return " == ";
    default:
      return nullptr;
  }
}

// Node `i` of `p`; `nested`: a child of an infix op (so an infix node needs parentheses).
std::string print(const egraph::Pattern<L>& p, uint32_t i, bool nested) {
  static const char* const kVarNames[] = {"x", "y", "z", "w"};
  const auto& n = p.nodes[i];
  std::string s;  // built by appending (GCC 12 misreads "lit" + string as an overlapping copy)
  if (n.var >= 0) {
    if (n.var < 4) return kVarNames[n.var];
    s += 'v';
    s += std::to_string(n.var);
    return s;
  }
  auto kid = [&](uint32_t k, bool in_infix) { return print(p, p.kids[n.kid_begin + k], in_infix); };
  // Parenthesised inside another infix op, and comparisons always: "(x == y) = (y == x)".
  const bool parens = nested || n.op == Op::LessThan || n.op == Op::Equal;
  if (const char* sep = infix(n.op); sep && n.nkids == 2) {
    if (parens) s += '(';
    s += kid(0, true);
    s += sep;
    s += kid(1, true);
    if (parens) s += ')';
    return s;
  }
  if (n.op == Op::Neg && n.nkids == 1) {  // "-x", "-(-x)", "(-x) * y"
    const bool var_kid = p.nodes[p.kids[n.kid_begin]].var >= 0;
    if (nested) s += '(';
    s += '-';
    if (!var_kid) s += '(';
    s += kid(0, false);
    if (!var_kid) s += ')';
    if (nested) s += ')';
    return s;
  }
  s += ir::op_name(n.op);
  s += '(';
  for (uint32_t k = 0; k < n.nkids; ++k) {
    if (k) s += ", ";
    s += kid(k, false);
  }
  s += ')';
  return s;
}

}  // namespace

std::string print_identity(const egraph::Pattern<L>& lhs, const egraph::Pattern<L>& rhs) {
  std::string s = print(lhs, lhs.root(), false);
  s += " = ";
  s += print(rhs, rhs.root(), false);
  return s;
}

}  // namespace luminal::rules::dsl
