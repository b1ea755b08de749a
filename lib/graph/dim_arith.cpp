// Arithmetic on Dims with the simplifications that keep shapes symbolic and comparable.
// The algebra is graph/int_poly.hpp's, shared with the kernel index simplifier: its
// normal form for + - *, and for / % min max its identities
//   (q*c + r)/c -> q + r/c,  g*x/(g*y) -> x/y,  (a*b)/b -> a,  x/1 -> x,
//   (q*c + r)%c -> r%c,      x%1 -> 0,          r%c -> r when 0 <= r < c,
//   min/max decided by the range of their difference,
// with the dims' own knowledge as its range oracle (DimRanges: the variables' declared
// ranges) plus their divisibility facts (variables declared as multiples).
// Anything left is an opaque atom whose operands are themselves canonical.
#include <algorithm>
#include <limits>
#include <string>
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

const DimPoly& poly_of(const Dim& d) { return d.expr()->poly; }

// Overflowing coefficients are a ShapeError for dims (the algebra throws PolyOverflow).
template <class F>
auto checked(const char* message, F&& f) {
  try {
    return f();
  } catch (const poly::PolyOverflow&) {
    throw ShapeError(message);
  }
}
constexpr const char* kArithOverflow = "[dim] integer overflow in a dim expression";
constexpr const char* kDivOverflow = "[dim] division overflows int64";
Dim scale(const Dim& d, int64_t k) {
  if (k == 0) return Dim(0);
  if (k == 1) return d;
  return make_dim(checked(kArithOverflow, [&] { return poly::scale(poly_of(d), k); }));
}

// 0 <= a < b for every value (then a / b = 0 and a % b = a).
bool in_range(const Dim& a, const Dim& b) {
  DimRanges ranges;
  try {
    return poly::in_range(poly_of(a), poly_of(b), ranges);
  } catch (const poly::PolyOverflow&) {
    return false;
  }
}

// a <= b where the range of b - a decides it (nullopt: undecided, overflow included).
std::optional<bool> decide_le(const Dim& a, const Dim& b) {
  DimRanges ranges;
  try {
    return poly::decide_le(poly_of(a), poly_of(b), /*strict=*/false, ranges);
  } catch (const poly::PolyOverflow&) {
    return std::nullopt;
  }
}

// a / b when b divides a exactly as polynomials (b a single term, or a = k*b).
std::optional<Dim> exact_quotient(const Dim& a, const Dim& b) {
  if (b.expr()->terms.empty()) return std::nullopt;  // constant divisors are handled elsewhere
  return checked(kDivOverflow, [&]() -> std::optional<Dim> {
    auto q = poly::exact_quotient(poly_of(a), poly_of(b));
    if (!q) return std::nullopt;
    return make_dim(std::move(*q));
  });
}

Dim divide_by_constant(const Dim& a, int64_t c) {
  const DimPoly& pa = poly_of(a);
  // a common factor g of every coefficient and c cancels: (g*x)/(g*c) = x/c
  const int64_t g = poly::content(pa, c);
  if (g > 1) {
    DimPoly reduced;
    for (const auto& [m, k] : pa) reduced.emplace(m, k / g);
    return divide_by_constant(make_dim(std::move(reduced)), c / g);
  }
  if (c == 1) return a;
  // a = c*q + r (the shared split, the constant floored so 0 <= r's constant < c):
  // a/c = q + r/c, and r/c is a constant when r's bounds decide it.
  poly::DivModOf<AtomKey> d;
  checked(kDivOverflow, [&] {
    poly::split(pa, poly::constant<AtomKey>(c), d.q, d.r, /*floor_constant=*/true);
    return 0;
  });
  const Dim qd = make_dim(std::move(d.q));
  if (d.r.empty()) return qd;
  const Dim rd = make_dim(d.r);
  const int64_t lo = floor_div(rd.lower_bound(), c), hi = floor_div(rd.upper_bound(), c);
  if (lo == hi) return qd + Dim(lo);
  // (x/c1)/c2 -> x/(c1*c2) for what is left (the shared composition, as the index
  // simplifier applies it; here for positive constants c1).
  auto as_floordiv = [](const AtomKey& k) -> std::optional<std::pair<DimPoly, DimPoly>> {
    const Atom& s = *k.atom;
    if (s.kind != AtomKind::Div || !s.b.is_constant() || *s.b.as_constant() <= 0) return std::nullopt;
    return std::make_pair(poly_of(s.a), poly_of(s.b));
  };
  if (auto xd = checked(kArithOverflow,
                        [&] { return poly::compose_floordiv(d.r, poly::constant<AtomKey>(c), as_floordiv); }))
    return qd + make_dim(std::move(xd->first)) / make_dim(std::move(xd->second));
  return qd + make_atom(AtomKind::Div, rd, Dim(c));
}

Dim mod_by_constant(const Dim& a, int64_t c) {
  // (x%c1)%c2 -> x%c2 when c2 divides c1.
  if (const Atom* s = as_single_atom(a); s && s->kind == AtomKind::Mod && s->b.is_constant() &&
                                         *s->b.as_constant() > 0 && *s->b.as_constant() % c == 0)
    return s->a % Dim(c);
  // (k*c + r) % c = r % c (the shared reduction), a term known to be a multiple of c by
  // its coefficient times its variables' declared multiples dropping whole.
  auto multiple_of_c = [c](const poly::MonoOf<AtomKey>& m, int64_t k) {
    int64_t divisor = k < 0 ? -k : k;  // |k| (k != INT64_MIN: make_dim rejects it)
    for (const AtomKey& x : m)
      if (x.atom->kind == AtomKind::Var && __builtin_mul_overflow(divisor, x.atom->multiple, &divisor))
        divisor = 1;
    return divisor % c == 0;
  };
  const Dim rd = make_dim(poly::reduce_mod(poly_of(a), c, multiple_of_c));
  if (rd.is_constant()) return rd;
  if (in_range(rd, Dim(c))) return rd;
  return make_atom(AtomKind::Mod, rd, Dim(c));
}

}  // namespace

Dim operator+(const Dim& a, const Dim& b) {
  if (b.as_constant() == int64_t{0}) return a;
  if (a.as_constant() == int64_t{0}) return b;
  return make_dim(checked(kArithOverflow, [&] { return poly::add(poly_of(a), poly_of(b)); }));
}

Dim operator-(const Dim& a, const Dim& b) {
  if (b.as_constant() == int64_t{0}) return a;
  return make_dim(checked(kArithOverflow, [&] { return poly::add(poly_of(a), poly_of(b), -1); }));
}

Dim operator*(const Dim& a, const Dim& b) {
  if (auto c = a.as_constant()) return scale(b, *c);
  if (auto c = b.as_constant()) return scale(a, *c);
  return make_dim(checked(kArithOverflow, [&] { return poly::mul(poly_of(a), poly_of(b)); }));
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
    if (in_range(a, b)) return Dim(0);
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
    if (in_range(a, b)) return a;
  }
  return make_atom(AtomKind::Mod, a, b);
}

Dim min(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return a;
  if (decide_le(a, b) == true) return a;
  if (decide_le(b, a) == true) return b;
  // min is commutative: order the operands so min(a, b) and min(b, a) are one Dim.
  return operands_ordered(a, b) ? make_atom(AtomKind::Min, a, b) : make_atom(AtomKind::Min, b, a);
}

Dim max(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return a;
  if (decide_le(a, b) == true) return b;
  if (decide_le(b, a) == true) return a;
  return operands_ordered(a, b) ? make_atom(AtomKind::Max, a, b) : make_atom(AtomKind::Max, b, a);
}

}  // namespace luminal
