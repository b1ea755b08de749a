// Patterns as C++ expression templates.
//
// Variables are types (`Var<0>`, `Var<1>`, ...), so the set of variables a pattern uses
// is a compile-time constant: `rule()` rejects, with a static_assert, a right side that
// uses a variable the left side does not bind. A language gives its patterns operators
// with `pnode`:
// \code
//   template <PatternExpr X, PatternExpr Y>
//   constexpr auto operator+(X x, Y y) { return pnode<Math>(Math::Op::Add, x, y); }
//   constexpr Var<0> a; constexpr Var<1> b;
//   auto r = rule("comm-add", a + b, b + a);
// \endcode
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "luminal/egraph/pattern.hpp"

namespace luminal::egraph {

/// Pattern variable number N (0..63). Declare one object per name: `constexpr Var<0> a;`.
template <int N>
struct Var {
  static_assert(N >= 0 && N < kMaxVars, "pattern variables are numbered 0..63");
  static constexpr int id = N;
  static constexpr std::uint64_t vars = std::uint64_t{1} << N;
};

/// An op node of language L in a pattern, with child pattern expressions `Kids`.
template <Language L, class... Kids>
struct PNode {
  using Lang = L;
  typename L::Op op;
  typename L::Payload payload;
  bool check_payload;
  std::tuple<Kids...> kids;
  static constexpr std::uint64_t vars = (std::uint64_t{0} | ... | Kids::vars);
};

namespace detail {
template <class T>
struct is_var : std::false_type {};
template <int N>
struct is_var<Var<N>> : std::true_type {};
template <class T>
struct is_pnode : std::false_type {};
template <Language L, class... K>
struct is_pnode<PNode<L, K...>> : std::true_type {};
}  // namespace detail

/// A pattern expression: a variable or an op node.
template <class T>
concept PatternExpr =
    detail::is_var<std::remove_cvref_t<T>>::value || detail::is_pnode<std::remove_cvref_t<T>>::value;

/// An op-node pattern `op(kids...)` that matches any payload.
template <Language L, PatternExpr... K>
constexpr PNode<L, std::remove_cvref_t<K>...> pnode(typename L::Op op, K&&... kids) {
  return {op, typename L::Payload{}, false, {std::forward<K>(kids)...}};
}

/// An op-node pattern that matches only nodes with this exact payload (a constant leaf,
/// a symbol, an attribute).
template <Language L, PatternExpr... K>
constexpr PNode<L, std::remove_cvref_t<K>...> pnode_with(typename L::Op op, typename L::Payload payload,
                                                         K&&... kids) {
  return {op, std::move(payload), true, {std::forward<K>(kids)...}};
}

namespace detail {
template <Language L, class E>
std::uint32_t lower(Pattern<L>& p, const E& e) {
  using T = std::remove_cvref_t<E>;
  if constexpr (is_var<T>::value) {
    typename Pattern<L>::Node n;
    n.var = T::id;
    p.nodes.push_back(n);
  } else {
    static_assert(std::is_same_v<typename T::Lang, L>, "a pattern mixes two languages");
    std::vector<std::uint32_t> kid_ids;
    std::apply([&](const auto&... k) { (kid_ids.push_back(lower<L>(p, k)), ...); }, e.kids);
    typename Pattern<L>::Node n;
    n.op = e.op;
    n.payload = e.payload;
    n.check_payload = e.check_payload;
    n.kid_begin = static_cast<std::uint32_t>(p.kids.size());
    n.nkids = static_cast<std::uint32_t>(kid_ids.size());
    p.kids.insert(p.kids.end(), kid_ids.begin(), kid_ids.end());
    p.nodes.push_back(n);
  }
  return static_cast<std::uint32_t>(p.nodes.size() - 1);
}
}  // namespace detail

/// Converts a pattern expression to its runtime form.
template <Language L, PatternExpr E>
Pattern<L> to_pattern(const E& e) {
  Pattern<L> p;
  detail::lower<L>(p, e);
  return p;
}

}  // namespace luminal::egraph
