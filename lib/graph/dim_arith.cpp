// Arithmetic on Dims with the simplifications that keep shapes symbolic and comparable:
// polynomial normal form for + - *, and for / % min max the rules
//   (q*c + r)/c -> q + r/c,  g*x/(g*y) -> x/y,  (a*b)/b -> a,  x/1 -> x,
//   (q*c + r)%c -> r%c,      x%1 -> 0,          r%c -> r when 0 <= r < c,
//   min/max decided from the bounds of their difference.
// Anything left is an opaque atom whose operands are themselves canonical.
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <numeric>
#include <optional>

#include "graph/dim_expr.hpp"
#include "graph/int_poly.hpp"
#include "luminal/error.hpp"

namespace luminal {

using namespace detail;
namespace poly = detail::poly;

namespace {

Dim make_atom(AtomKind kind, const Dim& a, const Dim& b) {
  auto atom = std::make_shared<Atom>();
  atom->kind = kind;
  atom->a = a;
  atom->b = b;
  // An operand prints bare when it is a single variable-like atom or a non-negative
  // constant, and in parentheses otherwise, so the text stays unambiguous.
  auto operand = [](const Dim& d) {
    const Atom* s = as_single_atom(d);
    if ((s && (s->kind == AtomKind::Var || s->kind == AtomKind::Min || s->kind == AtomKind::Max)) ||
        (d.is_constant() && *d.as_constant() >= 0))
      return d.to_string();
    std::string t = "(";  // built by append: GCC 12 warns falsely on "(" + std::string
    t += d.to_string();
    t += ')';
    return t;
  };
  const int64_t alo = a.lower_bound(), ahi = a.upper_bound(), blo = b.lower_bound(), bhi = b.upper_bound();
  switch (kind) {
    case AtomKind::Div: {
      atom->text = operand(a) + "/" + operand(b);
      if (blo > 0) {
        int64_t c[4] = {floor_div(alo, blo), floor_div(alo, bhi), floor_div(ahi, blo), floor_div(ahi, bhi)};
        atom->lo = std::min({c[0], c[1], c[2], c[3]});
        atom->hi = std::max({c[0], c[1], c[2], c[3]});
      } else {
        atom->lo = std::numeric_limits<int64_t>::min();
        atom->hi = std::numeric_limits<int64_t>::max();
      }
      break;
    }
    case AtomKind::Mod:
      atom->text = operand(a) + "%" + operand(b);
      if (blo > 0) {
        atom->lo = 0;
        atom->hi = bhi - 1;
        if (alo >= 0) atom->hi = std::min(ahi, atom->hi);
      } else {
        atom->lo = std::numeric_limits<int64_t>::min();
        atom->hi = std::numeric_limits<int64_t>::max();
      }
      break;
    case AtomKind::Min:
      atom->text = "min(" + a.to_string() + ", " + b.to_string() + ")";
      atom->lo = std::min(alo, blo);
      atom->hi = std::min(ahi, bhi);
      break;
    case AtomKind::Max:
      atom->text = "max(" + a.to_string() + ", " + b.to_string() + ")";
      atom->lo = std::max(alo, blo);
      atom->hi = std::max(ahi, bhi);
      break;
    case AtomKind::Var:
      break;
  }
  return atom_dim(std::move(atom));
}

// The canonical operand order of commutative atoms: symbolic before constant, then by text.
bool operands_ordered(const Dim& a, const Dim& b) {
  if (a.is_constant() != b.is_constant()) return !a.is_constant();
  return a.to_string() < b.to_string();
}

Dim scale(const Dim& d, int64_t k) {
  if (k == 0) return Dim(0);
  if (k == 1) return d;
  const DimExpr& e = *d.expr();
  std::vector<Term> terms = e.terms;
  for (Term& t : terms) t.coeff = checked_mul(t.coeff, k);
  return make_dim(checked_mul(e.constant, k), std::move(terms));
}

// A dim as a polynomial of the shared integer algebra (graph/int_poly.hpp), its atoms
// keyed by their canonical text, and back.
struct AsPoly {
  poly::Poly p;
  std::map<std::string, AtomPtr> atoms;
};
void add_to(AsPoly& out, const Dim& d) {
  const DimExpr& e = *d.expr();
  poly::add_term(out.p, {}, e.constant);
  for (const Term& t : e.terms) {
    poly::Mono m;
    for (const AtomPtr& a : t.atoms) {
      m.push_back(a->text);  // sorted by text already
      out.atoms.emplace(a->text, a);
    }
    poly::add_term(out.p, m, t.coeff);
  }
}
Dim to_dim(const poly::Poly& p, const std::map<std::string, AtomPtr>& atoms) {
  std::vector<Term> terms;
  for (const auto& [m, c] : p) {
    if (m.empty()) continue;
    Term t;
    for (const std::string& k : m) t.atoms.push_back(atoms.at(k));
    t.coeff = c;
    terms.push_back(std::move(t));
  }
  return make_dim(poly::constant_term(p), std::move(terms));
}
poly::Poly poly_of(const Dim& d, std::map<std::string, AtomPtr>& atoms) {
  AsPoly x;
  add_to(x, d);
  atoms.insert(x.atoms.begin(), x.atoms.end());
  return x.p;
}

// Overflowing coefficients are a ShapeError for dims (the algebra throws PolyOverflow).
template <class F>
auto checked(const char* what, F&& f) {
  try {
    return f();
  } catch (const poly::PolyOverflow&) {
    throw ShapeError(std::string("[dim] ") + what + " overflows int64");
  }
}

// a / b when b divides a exactly as polynomials (b a single term, or a = k*b).
std::optional<Dim> exact_quotient(const Dim& a, const Dim& b) {
  if (b.expr()->terms.empty()) return std::nullopt;  // constant divisors are handled elsewhere
  return checked("division", [&]() -> std::optional<Dim> {
    std::map<std::string, AtomPtr> atoms;
    const poly::Poly pa = poly_of(a, atoms), pb = poly_of(b, atoms);
    auto q = poly::exact_quotient(pa, pb);
    if (!q) return std::nullopt;
    return to_dim(*q, atoms);
  });
}

Dim divide_by_constant(const Dim& a, int64_t c) {
  // (x/c1)/c2 -> x/(c1*c2) for positive constants (floor division composes).
  if (const Atom* s = as_single_atom(a);
      s && s->kind == AtomKind::Div && s->b.is_constant() && *s->b.as_constant() > 0)
    return s->a / Dim(checked_mul(*s->b.as_constant(), c));
  std::map<std::string, AtomPtr> atoms;
  const poly::Poly pa = checked("division", [&] { return poly_of(a, atoms); });
  // a common factor g of every coefficient and c cancels: (g*x)/(g*c) = x/c
  const int64_t g = poly::content(pa, c);
  if (g > 1) {
    poly::Poly reduced;
    for (const auto& [m, k] : pa) reduced.emplace(m, k / g);
    return divide_by_constant(to_dim(reduced, atoms), c / g);
  }
  if (c == 1) return a;
  // a = c*q + r (the shared split, the constant floored so 0 <= r's constant < c):
  // a/c = q + r/c, and r/c is a constant when r's bounds decide it.
  poly::DivMod d;
  checked("division", [&] {
    poly::split(pa, poly::constant(c), d.q, d.r, /*floor_constant=*/true);
    return 0;
  });
  const Dim qd = to_dim(d.q, atoms);
  if (d.r.empty()) return qd;
  const Dim rd = to_dim(d.r, atoms);
  const int64_t lo = floor_div(rd.lower_bound(), c), hi = floor_div(rd.upper_bound(), c);
  if (lo == hi) return qd + Dim(lo);
  return qd + make_atom(AtomKind::Div, rd, Dim(c));
}

Dim mod_by_constant(const Dim& a, int64_t c) {
  // (x%c1)%c2 -> x%c2 when c2 divides c1.
  if (const Atom* s = as_single_atom(a); s && s->kind == AtomKind::Mod && s->b.is_constant() &&
                                         *s->b.as_constant() > 0 && *s->b.as_constant() % c == 0)
    return s->a % Dim(c);
  const DimExpr& e = *a.expr();
  std::vector<Term> r;
  for (const Term& t : e.terms) {
    if (make_dim(0, {t}).known_divisor() % c == 0) continue;  // a multiple of c: adds 0
    Term x = t;
    x.coeff = floor_mod(t.coeff, c);
    if (x.coeff != 0) r.push_back(std::move(x));
  }
  const Dim rd = make_dim(floor_mod(e.constant, c), std::move(r));
  if (rd.is_constant()) return rd;
  if (rd.lower_bound() >= 0 && rd.upper_bound() < c) return rd;
  return make_atom(AtomKind::Mod, rd, Dim(c));
}

}  // namespace

Dim operator+(const Dim& a, const Dim& b) {
  const DimExpr& ea = *a.expr();
  const DimExpr& eb = *b.expr();
  if (eb.terms.empty() && eb.constant == 0) return a;
  if (ea.terms.empty() && ea.constant == 0) return b;
  std::vector<Term> terms = ea.terms;
  terms.insert(terms.end(), eb.terms.begin(), eb.terms.end());
  return make_dim(checked_add(ea.constant, eb.constant), std::move(terms));
}

Dim operator-(const Dim& a, const Dim& b) { return a + scale(b, -1); }

Dim operator*(const Dim& a, const Dim& b) {
  if (auto c = a.as_constant()) return scale(b, *c);
  if (auto c = b.as_constant()) return scale(a, *c);
  const DimExpr& ea = *a.expr();
  const DimExpr& eb = *b.expr();
  // Distribute: (sum_i s_i)(sum_j t_j), the constants being atom-free terms.
  std::vector<Term> xs = ea.terms, ys = eb.terms, out;
  if (ea.constant) xs.push_back(Term{{}, ea.constant, {}});
  if (eb.constant) ys.push_back(Term{{}, eb.constant, {}});
  for (const Term& x : xs)
    for (const Term& y : ys) {
      Term t;
      t.atoms = x.atoms;
      t.atoms.insert(t.atoms.end(), y.atoms.begin(), y.atoms.end());
      t.coeff = checked_mul(x.coeff, y.coeff);
      out.push_back(std::move(t));
    }
  return make_dim(0, std::move(out));
}

Dim operator/(const Dim& a, const Dim& b) {
  if (auto c = b.as_constant()) {
    if (*c == 0) throw ShapeError("[dim] division by zero: " + a.to_string() + " / 0");
    if (auto x = a.as_constant()) return Dim(floor_div(*x, *c));
    if (*c == 1) return a;
    if (*c > 0) return divide_by_constant(a, *c);
    return make_atom(AtomKind::Div, a, b);
  }
  if (a.is_constant() && *a.as_constant() == 0) return Dim(0);
  if (b.lower_bound() > 0) {
    if (a.same_as(b)) return Dim(1);
    if (auto q = exact_quotient(a, b)) return *q;
    if (a.lower_bound() >= 0 && a.upper_bound() < b.lower_bound()) return Dim(0);
  }
  return make_atom(AtomKind::Div, a, b);
}

Dim operator%(const Dim& a, const Dim& b) {
  if (auto c = b.as_constant()) {
    if (*c == 0) throw ShapeError("[dim] modulo by zero: " + a.to_string() + " % 0");
    if (auto x = a.as_constant()) return Dim(floor_mod(*x, *c));
    if (*c == 1 || *c == -1) return Dim(0);
    if (*c > 0) return mod_by_constant(a, *c);
    return make_atom(AtomKind::Mod, a, b);
  }
  if (a.is_constant() && *a.as_constant() == 0) return Dim(0);
  if (b.lower_bound() > 0) {
    if (a.same_as(b) || exact_quotient(a, b)) return Dim(0);
    if (a.lower_bound() >= 0 && a.upper_bound() < b.lower_bound()) return a;
  }
  return make_atom(AtomKind::Mod, a, b);
}

Dim min(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return a;
  const Dim d = a - b;
  if (d.upper_bound() <= 0) return a;
  if (d.lower_bound() >= 0) return b;
  if (a.upper_bound() <= b.lower_bound()) return a;
  if (b.upper_bound() <= a.lower_bound()) return b;
  // min is commutative: order the operands so min(a, b) and min(b, a) are one Dim.
  return operands_ordered(a, b) ? make_atom(AtomKind::Min, a, b) : make_atom(AtomKind::Min, b, a);
}

Dim max(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return a;
  const Dim d = a - b;
  if (d.upper_bound() <= 0) return b;
  if (d.lower_bound() >= 0) return a;
  if (a.upper_bound() <= b.lower_bound()) return b;
  if (b.upper_bound() <= a.lower_bound()) return a;
  return operands_ordered(a, b) ? make_atom(AtomKind::Max, a, b) : make_atom(AtomKind::Max, b, a);
}

}  // namespace luminal
