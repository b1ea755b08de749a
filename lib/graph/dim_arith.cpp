// Arithmetic on Dims with the simplifications that keep shapes symbolic and comparable:
// polynomial normal form for + - *, and for / % min max the rules
//   (q*c + r)/c -> q + r/c,  g*x/(g*y) -> x/y,  (a*b)/b -> a,  x/1 -> x,
//   (q*c + r)%c -> r%c,      x%1 -> 0,          r%c -> r when 0 <= r < c,
//   min/max decided from the bounds of their difference.
// Anything left is an opaque atom whose operands are themselves canonical.
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "graph/dim_expr.hpp"
#include "luminal/error.hpp"

namespace luminal {

using namespace detail;

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

// True when every atom of `sub` (a multiset) occurs in `super`; `rest` gets the others.
bool monomial_divides(const std::vector<AtomPtr>& sub, const std::vector<AtomPtr>& super,
                      std::vector<AtomPtr>& rest) {
  rest.clear();
  size_t i = 0;
  for (const AtomPtr& s : super) {
    if (i < sub.size() && sub[i]->text == s->text) {
      ++i;
    } else {
      rest.push_back(s);
    }
  }
  return i == sub.size();
}

// a / b when b divides a exactly as polynomials (b a single term, or a = k*b).
std::optional<Dim> exact_quotient(const Dim& a, const Dim& b) {
  const DimExpr& ea = *a.expr();
  const DimExpr& eb = *b.expr();
  if (eb.terms.empty()) return std::nullopt;  // constant divisors are handled elsewhere
  if (eb.constant == 0 && eb.terms.size() == 1) {
    const Term& d = eb.terms[0];
    if (ea.constant != 0) return std::nullopt;
    std::vector<Term> q;
    for (const Term& t : ea.terms) {
      Term r;
      if (t.coeff % d.coeff != 0 || !monomial_divides(d.atoms, t.atoms, r.atoms)) return std::nullopt;
      r.coeff = t.coeff / d.coeff;
      q.push_back(std::move(r));
    }
    return make_dim(0, std::move(q));
  }
  // a == k * b for an integer k?
  if (ea.terms.size() != eb.terms.size()) return std::nullopt;
  const int64_t num = ea.terms[0].coeff, den = eb.terms[0].coeff;
  if (num % den != 0) return std::nullopt;
  const int64_t k = num / den;
  if (scale(b, k).same_as(a)) return Dim(k);
  return std::nullopt;
}

int64_t gcd_all(const DimExpr& e, int64_t g) {
  g = std::gcd(g, e.constant);
  for (const Term& t : e.terms) g = std::gcd(g, t.coeff);
  return g;
}

Dim divide_by_constant(const Dim& a, int64_t c) {
  // (x/c1)/c2 -> x/(c1*c2) for positive constants (floor division composes).
  if (const Atom* s = as_single_atom(a);
      s && s->kind == AtomKind::Div && s->b.is_constant() && *s->b.as_constant() > 0)
    return s->a / Dim(checked_mul(*s->b.as_constant(), c));
  const DimExpr& e = *a.expr();
  const int64_t g = gcd_all(e, c);
  if (g > 1) {
    std::vector<Term> terms = e.terms;
    for (Term& t : terms) t.coeff /= g;
    return divide_by_constant(make_dim(e.constant / g, std::move(terms)), c / g);
  }
  if (c == 1) return a;
  // a = c*q + r with every coefficient of r not a multiple of c and 0 <= r.constant < c.
  std::vector<Term> q, r;
  for (const Term& t : e.terms) {
    if (t.coeff % c == 0) {
      Term x = t;
      x.coeff /= c;
      q.push_back(std::move(x));
    } else {
      r.push_back(t);
    }
  }
  const int64_t qc = floor_div(e.constant, c), rc = floor_mod(e.constant, c);
  const Dim qd = make_dim(qc, std::move(q));
  if (r.empty()) return qd;
  const Dim rd = make_dim(rc, std::move(r));
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
