// The one integer algebra behind both symbolic simplifiers -- the dims of shapes
// (graph/dim_arith.cpp) and the index expressions of kernels (kernel/index_simplify.cpp):
// polynomials with int64 coefficients over opaque atoms, and the exact identities of floor
// division and modulo on them.
//
//   normal form      sums of monomials, each a sorted multiset of atom keys; like terms
//                    merged, zero terms dropped, so equal polynomials compare equal
//   split            a = q*b + r where q collects the terms of a that are multiples of the
//                    monomial b (coefficient divisible, atoms contained); with a positive
//                    constant b the constant term splits by floor division too
//   division         (q*b + r) // b = q + r // b,   (q*b + r) % b = r % b     (any b != 0)
//   by ranges        r // b = 0,  r % b = r                       when 0 <= r < b
//   composition      (x // c1) // c2 = x // (c1*c2)                           (c2 > 0)
// What "0 <= r < b" means is the caller's: a dim knows integer bounds of its variables,
// an index knows its loop variables' symbolic extents. Each caller keeps its own atoms
// (a dim's named variables and opaque div/mod/min/max; an index's loop variables, symbols
// and opaque nodes) and maps them to keys here. Arithmetic that would overflow int64
// throws PolyOverflow; the caller turns it into its own error (a ShapeError for dims, "leave
// the index unsimplified" for kernels).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace luminal::detail::poly {

struct PolyOverflow {};

using Mono = std::vector<std::string>;  ///< sorted atom keys, repeated for powers; {} = 1
using Poly = std::map<Mono, int64_t>;   ///< monomial -> non-zero coefficient

inline int64_t add_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw PolyOverflow{};
  return r;
}
inline int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw PolyOverflow{};
  return r;
}
/// d divides c exactly (INT64_MIN / -1 overflows: not taken).
inline bool divides(int64_t d, int64_t c) {
  return d != 0 && !(d == -1 && c == std::numeric_limits<int64_t>::min()) && c % d == 0;
}
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

inline Poly constant(int64_t c) {
  Poly p;
  if (c != 0) p[{}] = c;
  return p;
}
inline Poly atom(const std::string& key) {
  Poly p;
  p[{key}] = 1;
  return p;
}
/// The value when `p` is a constant.
inline std::optional<int64_t> const_value(const Poly& p) {
  if (p.empty()) return int64_t{0};
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return std::nullopt;
}
/// The constant term.
inline int64_t constant_term(const Poly& p) {
  auto it = p.find(Mono{});
  return it == p.end() ? 0 : it->second;
}

/// p += c * m.
inline void add_term(Poly& p, const Mono& m, int64_t c) {
  if (c == 0) return;
  auto [it, fresh] = p.emplace(m, c);
  if (!fresh) {
    it->second = add_checked(it->second, c);
    if (it->second == 0) p.erase(it);
  }
}
/// a + sign * b.
inline Poly add(Poly a, const Poly& b, int64_t sign = 1) {
  for (const auto& [m, c] : b) add_term(a, m, mul_checked(c, sign));
  return a;
}
inline Poly scale(const Poly& a, int64_t k) {
  Poly r;
  if (k == 0) return r;
  for (const auto& [m, c] : a) r.emplace(m, mul_checked(c, k));
  return r;
}
inline Poly mul(const Poly& a, const Poly& b) {
  Poly r;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      Mono m;
      m.reserve(ma.size() + mb.size());
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m));
      add_term(r, m, mul_checked(ca, cb));
    }
  return r;
}

/// `m` with the atoms of `sub` removed (as a multiset); false when `sub` is not in `m`.
inline bool remove_sub(const Mono& m, const Mono& sub, Mono& rest) {
  rest.clear();
  size_t j = 0;
  for (const auto& k : m) {
    if (j < sub.size() && k == sub[j]) {
      ++j;
      continue;
    }
    rest.push_back(k);
  }
  return j == sub.size();
}

/// The gcd of the coefficients and `g` (0 for the zero polynomial and g = 0).
inline int64_t content(const Poly& p, int64_t g = 0) {
  for (const auto& [m, c] : p) g = std::gcd(g, c);
  return g;
}

/// a = q*b + r exactly, for b a single monomial: q collects the terms of a that are
/// multiples of b. With `floor_constant` and b a positive constant, the constant term
/// splits by floor division as well (so 0 <= the constant of r < b).
inline void split(const Poly& a, const Poly& b, Poly& q, Poly& r, bool floor_constant = false) {
  q.clear();
  r.clear();
  if (b.size() != 1) {
    r = a;
    return;
  }
  const auto& [mb, cb] = *b.begin();
  Mono rest;
  for (const auto& [m, c] : a) {
    if (divides(cb, c) && remove_sub(m, mb, rest)) {
      add_term(q, rest, c / cb);
    } else if (floor_constant && mb.empty() && cb > 0 && m.empty()) {
      add_term(q, {}, floor_div(c, cb));
      add_term(r, {}, floor_mod(c, cb));
    } else {
      add_term(r, m, c);
    }
  }
}

/// a / b when b divides a exactly as a polynomial: b a single monomial dividing every
/// term, or a = k*b for an integer k.
inline std::optional<Poly> exact_quotient(const Poly& a, const Poly& b) {
  if (b.empty()) return std::nullopt;
  Poly q, r;
  if (b.size() == 1) {
    split(a, b, q, r);
    if (r.empty()) return q;
    return std::nullopt;
  }
  if (a.size() != b.size()) return std::nullopt;
  const int64_t num = a.begin()->second, den = b.begin()->second;
  if (!divides(den, num)) return std::nullopt;
  const int64_t k = num / den;
  if (scale(b, k) == a) return constant(k);
  return std::nullopt;
}

/// The quotient and remainder by the identities above, given `in_range(r, b)`: whether
/// 0 <= r < b holds for every value of the atoms (the caller's ranges).
struct DivMod {
  Poly q;                   ///< the part of a // b known exactly
  Poly r;                   ///< what is left: a // b = q + r // b, a % b = r % b
  bool r_in_range = false;  ///< 0 <= r < b: r // b = 0 and r % b = r
};
template <class InRange>
DivMod divmod(const Poly& a, const Poly& b, InRange&& in_range, bool floor_constant = false) {
  DivMod d;
  split(a, b, d.q, d.r, floor_constant);
  d.r_in_range = d.r.empty() || in_range(d.r, b);
  return d;
}

}  // namespace luminal::detail::poly
