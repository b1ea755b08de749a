// Pattern constructors and small e-graph helpers shared by the math rule sets (algebra,
// movement, contraction). Patterns match any payload; attribute-carrying nodes on a right
// side are built by appliers through ir/build.hpp (see the contract in ir/tensor_lang.hpp).
#pragma once

#include <cstdlib>
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

/// The attribute-carrying nodes with op `op` in class `cls` (a copy: adding nodes
/// invalidates the class data).
inline std::vector<ir::AttrNode> attr_nodes(const ir::EGraph& g, Id cls, Op op) {
  std::vector<ir::AttrNode> out;
  for (const ir::AttrNode& n : g.data(cls).attributed)
    if (n.op == op) out.push_back(n);
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

/// Registers one rule of a math set (a function, so no designated initializer leaves
/// RuleInfo members unnamed).
/// LUMINAL_SKIP_MATH_RULES="name,name,set,..." leaves those math rules (or whole math sets)
/// unregistered: for bisecting which rule changes a compiled program.
inline bool skipped_by_env(const char* set, const char* name) {
  const char* env = std::getenv("LUMINAL_SKIP_MATH_RULES");
  if (!env || !*env) return false;
  const std::string list = std::string(",") + env + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos ||
         list.find(std::string(",") + set + ",") != std::string::npos;
}

inline bool add_rule(const char* set, const char* name, bool fast_math, const char* doc,
                     std::shared_ptr<const TensorRule> r) {
  if (skipped_by_env(set, name)) return false;
  RuleInfo info;
  info.name = name;
  info.set = set;
  info.fast_math = fast_math;
  info.doc = doc;
  info.rule = std::move(r);
  Registry::global().add(std::move(info));
  return true;
}

}  // namespace luminal::rules::dsl

/// LUMINAL_MATH_RULE("algebra", "mul-one", /*fast_math=*/false, "x*1 = x", egraph::rule(...));
#define LUMINAL_MATH_RULE(set, name, fast_math, doc, ...)                          \
  [[maybe_unused]] const bool LUMINAL_RULES_CAT(luminal_math_rule_, __COUNTER__) = \
      ::luminal::rules::dsl::add_rule(set, name, fast_math, doc, ::luminal::rules::make_rule(__VA_ARGS__))
