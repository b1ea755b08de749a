// The algebra language of the standard e-graph workloads (math-micro, ac-blowup,
// congruence-cascade), shared by the tests and the benchmarks: ops, payload (an integer
// constant or a symbol id), an s-expression syntax, pattern operators and rule sets.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/egraph/pattern_dsl.hpp"
#include "luminal/egraph/rule.hpp"

namespace mathlang {

using luminal::egraph::Id;
using luminal::egraph::PatternExpr;

/// The language: binary d i + - * / pow; unary ln sqrt sin cos; leaves Num and Sym.
struct Math {
  enum class Op : std::uint8_t { Num, Sym, Add, Sub, Mul, Div, Pow, Ln, Sqrt, Sin, Cos, D, I, F, G };
  using Payload = std::int64_t;  // Num: the value; Sym: the symbol id; otherwise 0
  static constexpr std::size_t kNumOps = 15;
  static std::uint64_t hash_payload(Payload p) noexcept { return static_cast<std::uint64_t>(p); }
};
using Op = Math::Op;

/// Symbol interning (symbol names <-> payload ids).
inline std::int64_t symbol(std::string_view name) {
  static std::unordered_map<std::string, std::int64_t> ids;
  static std::vector<std::string> names;
  auto it = ids.find(std::string(name));
  if (it != ids.end()) return it->second;
  std::int64_t id = static_cast<std::int64_t>(names.size());
  names.emplace_back(name);
  ids.emplace(std::string(name), id);
  return id;
}

/// s-expression syntax for the runtime parser.
struct Syntax {
  std::optional<std::pair<Op, std::int64_t>> leaf(std::string_view atom) const {
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(atom.data(), atom.data() + atom.size(), v);
    if (ec == std::errc() && p == atom.data() + atom.size()) return std::pair{Op::Num, v};
    return std::pair{Op::Sym, symbol(atom)};
  }
  std::optional<Op> op(std::string_view h, std::size_t n) const {
    if (n == 2) {
      if (h == "+") return Op::Add;
      if (h == "-") return Op::Sub;
      if (h == "*") return Op::Mul;
      if (h == "/") return Op::Div;
      if (h == "pow") return Op::Pow;
      if (h == "d") return Op::D;
      if (h == "i") return Op::I;
    }
    if (n == 1) {
      if (h == "ln") return Op::Ln;
      if (h == "sqrt") return Op::Sqrt;
      if (h == "sin") return Op::Sin;
      if (h == "cos") return Op::Cos;
      if (h == "f") return Op::F;
      if (h == "g") return Op::G;
    }
    return std::nullopt;
  }
};

// ------------------------------------------------------------------ pattern operators

/// A constant leaf in a pattern.
constexpr auto num(std::int64_t v) { return luminal::egraph::pnode_with<Math>(Op::Num, v); }
/// A symbol leaf in a pattern.
inline auto sym(std::string_view name) { return luminal::egraph::pnode_with<Math>(Op::Sym, symbol(name)); }

template <PatternExpr X, PatternExpr Y>
constexpr auto operator+(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::Add, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto operator-(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::Sub, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto operator*(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::Mul, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto operator/(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::Div, x, y);
}
template <PatternExpr X>
constexpr auto operator+(X x, std::int64_t c) {
  return x + num(c);
}
template <PatternExpr X>
constexpr auto operator*(X x, std::int64_t c) {
  return x * num(c);
}
template <PatternExpr X>
constexpr auto operator*(std::int64_t c, X x) {
  return num(c) * x;
}
template <PatternExpr X, PatternExpr Y>
constexpr auto pow(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::Pow, x, y);
}
template <PatternExpr X>
constexpr auto pow(X x, std::int64_t c) {
  return pow(x, num(c));
}
template <PatternExpr X, PatternExpr Y>
constexpr auto d(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::D, x, y);
}
template <PatternExpr X, PatternExpr Y>
constexpr auto integral(X x, Y y) {
  return luminal::egraph::pnode<Math>(Op::I, x, y);
}
template <PatternExpr Y>
constexpr auto integral(std::int64_t c, Y y) {
  return integral(num(c), y);
}
template <PatternExpr X>
constexpr auto ln(X x) {
  return luminal::egraph::pnode<Math>(Op::Ln, x);
}
template <PatternExpr X>
constexpr auto sin(X x) {
  return luminal::egraph::pnode<Math>(Op::Sin, x);
}
template <PatternExpr X>
constexpr auto cos(X x) {
  return luminal::egraph::pnode<Math>(Op::Cos, x);
}
template <PatternExpr X>
constexpr auto f(X x) {
  return luminal::egraph::pnode<Math>(Op::F, x);
}
template <PatternExpr X>
constexpr auto g(X x) {
  return luminal::egraph::pnode<Math>(Op::G, x);
}

// ------------------------------------------------------------------ rule sets

namespace vars {
inline constexpr luminal::egraph::Var<0> a{};
inline constexpr luminal::egraph::Var<1> b{};
inline constexpr luminal::egraph::Var<2> c{};
inline constexpr luminal::egraph::Var<3> x{};
inline constexpr luminal::egraph::Var<4> fv{};
inline constexpr luminal::egraph::Var<5> gv{};
}  // namespace vars

/// The 24 rules of math-micro.txt, written with the templated front end.
template <class A = luminal::egraph::NoAnalysis>
std::vector<luminal::egraph::Rule<Math, A>> math_micro_rules() {
  using namespace vars;
  using luminal::egraph::rule;
  return {
      rule("comm-add", a + b, b + a),
      rule("comm-mul", a * b, b * a),
      rule("assoc-add", a + (b + c), (a + b) + c),
      rule("assoc-mul", a * (b * c), (a * b) * c),
      rule("sub-canon", a - b, a + (-1 * b)),
      rule("zero-add", a + 0, a),
      rule("zero-mul", a * 0, num(0)),
      rule("one-mul", a * 1, a),
      rule("cancel-sub", a - a, num(0)),
      rule("distribute", a * (b + c), (a * b) + (a * c)),
      rule("factor", (a * b) + (a * c), a * (b + c)),
      rule("pow-mul", pow(a, b) * pow(a, c), pow(a, b + c)),
      rule("pow1", pow(x, 1), x),
      rule("pow2", pow(x, 2), x * x),
      rule("d-add", d(x, a + b), d(x, a) + d(x, b)),
      rule("d-mul", d(x, a * b), (a * d(x, b)) + (b * d(x, a))),
      rule("d-sin", d(x, sin(x)), cos(x)),
      rule("d-cos", d(x, cos(x)), -1 * sin(x)),
      rule("i-one", integral(1, x), x),
      rule("i-cos", integral(cos(x), x), sin(x)),
      rule("i-sin", integral(sin(x), x), -1 * cos(x)),
      rule("i-sum", integral(fv + gv, x), integral(fv, x) + integral(gv, x)),
      rule("i-dif", integral(fv - gv, x), integral(fv, x) - integral(gv, x)),
      rule("i-parts", integral(a * b, x), (a * integral(b, x)) - integral(d(x, a) * integral(b, x), x)),
  };
}

/// The 7 start terms of math-micro.txt.
inline const std::vector<std::string>& math_micro_terms() {
  static const std::vector<std::string> t = {
      "(i (ln x) x)",
      "(i (+ x (cos x)) x)",
      "(i (* (cos x) x) x)",
      "(d x (+ 1 (* 2 x)))",
      "(d x (- (pow x 3) (* 7 (pow x 2))))",
      "(+ (* y (+ x y)) (- (+ x 2) (+ x x)))",
      "(/ 1 (- (/ (+ 1 (sqrt five)) 2) (/ (- 1 (sqrt five)) 2)))",
  };
  return t;
}

/// Expected (nodes, classes) after iterations 1..11 of math-micro.
inline constexpr std::pair<std::size_t, std::size_t> kMathMicroExpect[11] = {
    {69, 50},     {118, 71},    {208, 116},     {389, 197},      {784, 361},        {1576, 666},
    {3160, 1347}, {8113, 3576}, {28303, 12445}, {136446, 58464}, {1047896, 443832},
};

/// Commutativity and associativity of + (ac-blowup.txt).
template <class A = luminal::egraph::NoAnalysis>
std::vector<luminal::egraph::Rule<Math, A>> ac_rules() {
  using namespace vars;
  using luminal::egraph::rule;
  return {rule("comm-add", a + b, b + a), rule("assoc-add", a + (b + c), (a + b) + c)};
}

/// Adds (+ 1 (+ 2 (+ ... (+ n-1 n)))) and returns its class.
template <class G>
Id add_right_nested_sum(G& g, int n) {
  Id acc = g.add(Op::Num, std::int64_t{n}, {});
  for (int k = n - 1; k >= 1; --k) acc = g.add(Op::Add, 0, {g.add(Op::Num, std::int64_t{k}, {}), acc});
  return acc;
}

}  // namespace mathlang
