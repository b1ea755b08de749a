// A runtime front end: s-expressions for terms, patterns and rules, as used by the
// standard workload files ("(+ ?a (* -1 ?b))"). The templated front end (pattern_dsl.hpp)
// is the one for code; this one is for data files and tools.
//
// A language opts in with a *syntax* object:
//   std::optional<std::pair<Op, Payload>> leaf(std::string_view atom) const;  // "x", "-1"
//   std::optional<Op> op(std::string_view head, std::size_t arity) const;      // "+", 2
#pragma once

#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "luminal/egraph/egraph.hpp"
#include "luminal/egraph/pattern.hpp"
#include "luminal/egraph/rule.hpp"
#include "luminal/error.hpp"

namespace luminal::egraph {

/// A parsed s-expression: an atom or a list.
struct SExpr {
  std::string atom;         ///< the atom's text (empty for a list)
  std::vector<SExpr> list;  ///< the list's items (head first)
  bool is_list = false;
};

namespace detail {
inline void skip_space(std::string_view s, std::size_t& i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
}
inline SExpr parse_one(std::string_view s, std::size_t& i) {
  skip_space(s, i);
  if (i >= s.size())
    throw Error("[egraph] s-expression: unexpected end of input in '" + std::string(s) + "'");
  SExpr e;
  if (s[i] == '(') {
    e.is_list = true;
    ++i;
    for (;;) {
      skip_space(s, i);
      if (i >= s.size()) throw Error("[egraph] s-expression: missing ')' in '" + std::string(s) + "'");
      if (s[i] == ')') {
        ++i;
        break;
      }
      e.list.push_back(parse_one(s, i));
    }
    if (e.list.empty()) throw Error("[egraph] s-expression: empty list in '" + std::string(s) + "'");
    return e;
  }
  if (s[i] == ')') throw Error("[egraph] s-expression: unexpected ')' in '" + std::string(s) + "'");
  std::size_t b = i;
  while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i])) && s[i] != '(' && s[i] != ')') ++i;
  e.atom = std::string(s.substr(b, i - b));
  return e;
}
}  // namespace detail

/// Parses one s-expression; throws luminal::Error on malformed text.
inline SExpr parse_sexpr(std::string_view s) {
  std::size_t i = 0;
  SExpr e = detail::parse_one(s, i);
  detail::skip_space(s, i);
  if (i != s.size())
    throw Error("[egraph] s-expression: trailing text after '" + std::string(s.substr(0, i)) + "'");
  return e;
}

/// Variable names ("?a") to numbers, shared by the sides of one rule.
struct VarNames {
  std::map<std::string, int, std::less<>> ids;
  /// The number of `name`, allocated on first use.
  int get(std::string_view name) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    if (ids.size() >= static_cast<std::size_t>(kMaxVars))
      throw Error("[egraph] pattern: more than 64 variables at '" + std::string(name) + "'");
    int id = static_cast<int>(ids.size());
    ids.emplace(std::string(name), id);
    return id;
  }
};

namespace detail {
template <Language L, class Syntax>
std::uint32_t lower_sexpr(Pattern<L>& p, const SExpr& e, const Syntax& syn, VarNames& vars) {
  typename Pattern<L>::Node n;
  if (!e.is_list) {
    if (!e.atom.empty() && e.atom[0] == '?') {
      n.var = vars.get(e.atom);
      p.var_names[static_cast<std::size_t>(n.var)] = e.atom;
    } else {
      auto leaf = syn.leaf(e.atom);
      if (!leaf) throw Error("[egraph] pattern: unknown atom '" + e.atom + "'");
      n.op = leaf->first;
      n.payload = leaf->second;
      n.check_payload = true;
    }
    p.nodes.push_back(n);
    return static_cast<std::uint32_t>(p.nodes.size() - 1);
  }
  if (e.list[0].is_list) throw Error("[egraph] pattern: a list's head must be an operator name");
  auto op = syn.op(e.list[0].atom, e.list.size() - 1);
  if (!op)
    throw Error("[egraph] pattern: unknown operator '" + e.list[0].atom + "' with " +
                std::to_string(e.list.size() - 1) + " arguments");
  std::vector<std::uint32_t> kids;
  for (std::size_t k = 1; k < e.list.size(); ++k) kids.push_back(lower_sexpr<L>(p, e.list[k], syn, vars));
  n.op = *op;
  n.kid_begin = static_cast<std::uint32_t>(p.kids.size());
  n.nkids = static_cast<std::uint32_t>(kids.size());
  p.kids.insert(p.kids.end(), kids.begin(), kids.end());
  p.nodes.push_back(n);
  return static_cast<std::uint32_t>(p.nodes.size() - 1);
}

template <Language L, class A, class Syntax>
Id add_sexpr(EGraph<L, A>& g, const SExpr& e, const Syntax& syn) {
  if (!e.is_list) {
    if (!e.atom.empty() && e.atom[0] == '?')
      throw Error("[egraph] term: variable '" + e.atom + "' in a term");
    auto leaf = syn.leaf(e.atom);
    if (!leaf) throw Error("[egraph] term: unknown atom '" + e.atom + "'");
    return g.add(leaf->first, leaf->second, std::span<const Id>{});
  }
  auto op = syn.op(e.list[0].atom, e.list.size() - 1);
  if (!op)
    throw Error("[egraph] term: unknown operator '" + e.list[0].atom + "' with " +
                std::to_string(e.list.size() - 1) + " arguments");
  std::vector<Id> kids;
  for (std::size_t k = 1; k < e.list.size(); ++k) kids.push_back(add_sexpr(g, e.list[k], syn));
  return g.add(*op, typename L::Payload{}, std::span<const Id>(kids));
}
}  // namespace detail

/// Parses a pattern ("(+ ?a 0)"); leaves other than variables match their exact payload.
template <Language L, class Syntax>
Pattern<L> parse_pattern(std::string_view text, const Syntax& syn, VarNames& vars) {
  Pattern<L> p;
  detail::lower_sexpr<L>(p, parse_sexpr(text), syn, vars);
  return p;
}

/// Adds a ground term ("(+ x (cos x))") to `g`; returns its class.
template <Language L, class A, class Syntax>
Id add_term(EGraph<L, A>& g, std::string_view text, const Syntax& syn) {
  return detail::add_sexpr(g, parse_sexpr(text), syn);
}

/// A rule "lhs => rhs" from s-expressions.
template <Language L, class A, class Syntax>
Rule<L, A> parse_rule(std::string name, std::string_view lhs, std::string_view rhs, const Syntax& syn) {
  VarNames vars;
  Pattern<L> l = parse_pattern<L>(lhs, syn, vars);
  Pattern<L> r = parse_pattern<L>(rhs, syn, vars);
  return Rule<L, A>(std::move(name), {std::move(l)}, {std::move(r)});
}

}  // namespace luminal::egraph
