// Pattern constructors and small e-graph helpers shared by the math rule sets (algebra,
// movement, contraction). Patterns match any payload; attribute-carrying nodes on a right
// side are built by appliers through ir/build.hpp (see the contract in ir/tensor_lang.hpp).
#pragma once

#include <algorithm>

#include <type_traits>
#include <optional>
#include <string>
#include <vector>

#include "ir/build.hpp"
#include "luminal/egraph/pattern_dsl.hpp"
#include "luminal/egraph/rule.hpp"
#include "rules/registry.hpp"

namespace luminal::rules::dsl {

using ir::Op;
using L = ir::TensorLang;
using egraph::Id;
using egraph::Match;
using egraph::PatternExpr;

inline constexpr egraph::Var<0> a;
inline constexpr egraph::Var<1> b;
inline constexpr egraph::Var<2> c;
inline constexpr egraph::Var<3> d;

template <PatternExpr X>
constexpr auto op1(Op op, X x) {
  return egraph::pnode<L>(op, x);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto op2(Op op, X x, Y y) {
  return egraph::pnode<L>(op, x, y);
}
template <PatternExpr X>
constexpr auto exp2_(X x) {
  return op1(Op::Exp2, x);
}
template <PatternExpr X>
constexpr auto log2_(X x) {
  return op1(Op::Log2, x);
}
template <PatternExpr X>
constexpr auto recip_(X x) {
  return op1(Op::Recip, x);
}
template <PatternExpr X>
constexpr auto neg_(X x) {
  return op1(Op::Neg, x);
}
template <PatternExpr X>
constexpr auto cast_(X x) {
  return op1(Op::Cast, x);
}
template <PatternExpr X>
constexpr auto sum_(X x) {
  return op1(Op::SumReduce, x);
}
template <PatternExpr X>
constexpr auto maxr_(X x) {
  return op1(Op::MaxReduce, x);
}
template <PatternExpr X>
constexpr auto reshape_(X x) {
  return op1(Op::Reshape, x);
}
template <PatternExpr X>
constexpr auto permute_(X x) {
  return op1(Op::Permute, x);
}
template <PatternExpr X>
constexpr auto expand_(X x) {
  return op1(Op::Expand, x);
}
template <PatternExpr X>
constexpr auto slice_(X x) {
  return op1(Op::Slice, x);
}
template <PatternExpr X>
constexpr auto pad_(X x) {
  return op1(Op::Pad, x);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto add_(X x, Y y) {
  return op2(Op::Add, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto mul_(X x, Y y) {
  return op2(Op::Mul, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto max_(X x, Y y) {
  return op2(Op::Max, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto lt_(X x, Y y) {
  return op2(Op::LessThan, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto eq_(X x, Y y) {
  return op2(Op::Equal, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto matmul_(X x, Y y) {
  return op2(Op::MatMul, x, y);
}
template <PatternExpr X, PatternExpr Y, PatternExpr Z>
constexpr auto where_(X x, Y y, Z z) {
  return egraph::pnode<L>(Op::Where, x, y, z);
}

/// The attribute-carrying nodes with op `op` in class `cls`, each once, children
/// canonical (a copy: adding nodes invalidates the class data).
inline std::vector<ir::AttrNode> attr_nodes(const ir::EGraph& g, Id cls, Op op) {
  std::vector<ir::AttrNode> out;
  for (const ir::AttrNode& n : g.data(cls).attributed)
    if (n.op == op) out.push_back({n.op, n.payload, n.kid == egraph::kNoId ? n.kid : g.find(n.kid)});
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
/// The attributes behind a payload (a copy, for the same reason).
inline ir::Attr attr(const ir::EGraph& g, uint32_t payload) { return g.analysis().attrs().get(payload); }

/// Whether every element of class `cls` is known to equal `v`.
inline bool is_const(const ir::EGraph& g, Id cls, double v) {
  const auto& k = g.data(cls).constant;
  return k && *k == v;
}
/// The constant value of a dim, if it has one.
inline std::optional<int64_t> cdim(const Dim& x) { return x.as_constant(); }
inline bool is_one(const Dim& x) { return cdim(x) == 1; }
inline bool same_shape(const std::vector<Dim>& x, const std::vector<Dim>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!x[i].same_as(y[i])) return false;
  return true;
}
/// True when `s` holds exactly one element.
inline bool unit_shape(const std::vector<Dim>& s) {
  for (const Dim& x : s)
    if (!is_one(x)) return false;
  return true;
}

/// `v` (as dtype `dt`) broadcast to `shape`: constant -> reshape to ones -> expand.
inline Id broadcast_const(ir::EGraph& g, double v, DType dt, const std::vector<Dim>& shape) {
  Id k = ir::add_constant(g, v, dt);
  if (shape.empty()) return k;
  k = ir::add_reshape(g, k, std::vector<Dim>(shape.size(), Dim(1)));
  if (unit_shape(shape)) return k;
  return ir::add_expand(g, k, shape);
}

/// Merges `x` into the matched root; counts as an application only if they differ.
inline void merge_root(ir::EGraph& g, const Match& m, Id x) { g.merge(m.root(), x); }

}  // namespace luminal::rules::dsl

namespace luminal::rules::dsl {

/// The identity a pattern => pattern rule states, printed from its two sides with the
/// variables named x, y, z, w: "(x + y) + z = x + (y + z)".
std::string print_identity(const egraph::Pattern<L>& lhs, const egraph::Pattern<L>& rhs);

/// A right side that applies only where `cond(egraph, match)` holds.
template <PatternExpr R, class C>
struct Guarded {
  R rhs;
  C cond;
};
template <PatternExpr R, class C>
Guarded<R, C> rhs_if(R rhs, C cond) {
  return {rhs, std::move(cond)};
}

namespace detail_rows {
template <class T>
struct is_guarded : std::false_type {};
template <class R, class C>
struct is_guarded<Guarded<R, C>> : std::true_type {};
}  // namespace detail_rows

/// One row of a math rule set: {name, lhs, rhs-or-applier, Exact|ReordersSum|FastMath, doc}.
///  * `rhs` a pattern: the doc is printed from the two sides; `note` (may be empty) is
///    appended in parentheses (why it is exact, or why it is fast-math).
///  * `rhs` = rhs_if(pattern, cond): the same, applied where the condition holds.
///  * `rhs` an applier `void(EGraph&, const Match&)`: `note` is the doc, written by hand.
template <PatternExpr Lhs, class Rhs>
RuleInfo math_rule(std::string name, const Lhs& lhs, Rhs rhs, Exactness ex, std::string note) {
  RuleInfo r;
  r.name = name;
  r.fast_math = ex == FastMath;
  r.reorders_sum = ex == ReordersSum;
  if constexpr (PatternExpr<Rhs> || detail_rows::is_guarded<Rhs>::value) {
    auto spec = [&] {
      if constexpr (PatternExpr<Rhs>)
        return egraph::rule(name, lhs, rhs);
      else
        return egraph::rule(name, lhs, rhs.rhs, std::move(rhs.cond));
    }();
    r.doc = print_identity(spec.lhs[0], spec.rhs[0]);
    if (!note.empty()) r.doc += " (" + note + ")";
    r.rule = make_rule(spec);
  } else {
    r.doc = std::move(note);
    r.rule = make_rule(egraph::rule(name, lhs, std::move(rhs)));
  }
  return r;
}

/// `a` followed by `b`: a set made of rows derived from the op table and rows written out.
inline std::vector<RuleInfo> concat(std::vector<RuleInfo> a, std::vector<RuleInfo> b) {
  for (RuleInfo& r : b) a.push_back(std::move(r));
  return a;
}

/// A primitive's printed name in rule-name form: "less_than" -> "less-than".
inline std::string kebab(std::string_view name) {
  std::string s(name);
  for (char& ch : s)
    if (ch == '_') ch = '-';
  return s;
}

/// The same row with an example graph for the checker (RuleInfo::example).
inline RuleInfo with_example(RuleInfo r, decltype(RuleInfo::example) example) {
  r.example = std::move(example);
  return r;
}

}  // namespace luminal::rules::dsl
