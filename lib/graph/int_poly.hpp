// The one integer algebra behind both symbolic simplifiers -- the dims of shapes
// (graph/dim.cpp, graph/dim_arith.cpp) and the index expressions of kernels
// (kernel/index_simplify.cpp): polynomials with int64 coefficients over opaque atoms, the
// exact identities of floor division and modulo on them, and the range reasoning that
// decides the identities which hold only for some values.
//
//   normal form      sums of monomials, each a sorted multiset of atom keys; like terms
//                    merged, zero terms dropped, so equal polynomials compare equal
//   split            a = q*b + r where q collects the terms of a that are multiples of the
//                    monomial b (coefficient divisible, atoms contained); with a positive
//                    constant b the constant term splits by floor division too
//   division         (q*b + r) // b = q + r // b,   (q*b + r) % b = r % b     (any b != 0)
//   modulo c         (k*c + r) % c = r % c: coefficients reduce modulo c   (c > 0)
//   by ranges        r // b = 0,  r % b = r                       when 0 <= r < b
//                    a <= b (a < b) decided                 when the range of b - a does
//   composition      (x // c1) // c2 = x // (c1*c2)                           (c2 > 0)
//
// Ranges (extreme, non_negative, in_range, decide_le): a bound of a polynomial from the
// bounds of its atoms, which the caller supplies through an oracle (RangeOracle below): a
// dim knows integer bounds of its variables, an index knows its loop variables' symbolic
// extents. Each caller keeps its own atoms (a dim's named variables and opaque
// div/mod/min/max; an index's loop variables, symbols and opaque nodes) as the keys here:
// any ordered key type (a dim's atoms compare by their text, an index's keys are strings).
// Arithmetic that would overflow int64 throws PolyOverflow; the caller turns it into its
// own error (a ShapeError for dims, "leave the index unsimplified" for kernels).
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
#include <type_traits>
#include <utility>
#include <vector>

namespace luminal::detail::poly {

struct PolyOverflow {};

template <class K>
using MonoOf = std::vector<K>;  ///< sorted atom keys, repeated for powers; {} = 1
template <class K>
using PolyOf = std::map<MonoOf<K>, int64_t>;  ///< monomial -> non-zero coefficient
using Mono = MonoOf<std::string>;
using Poly = PolyOf<std::string>;

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
/// Floor division and modulo (b != 0). INT64_MIN // -1 saturates to INT64_MAX (its value
/// does not fit); INT64_MIN % -1 is 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  if (b == -1) return a == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -a;
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

template <class K = std::string>
PolyOf<K> constant(int64_t c) {
  PolyOf<K> p;
  if (c != 0) p[{}] = c;
  return p;
}
template <class K = std::string>
PolyOf<K> atom(const std::type_identity_t<K>& key) {
  PolyOf<K> p;
  p[{key}] = 1;
  return p;
}
/// The value when `p` is a constant.
template <class K>
std::optional<int64_t> const_value(const PolyOf<K>& p) {
  if (p.empty()) return int64_t{0};
  if (p.size() == 1 && p.begin()->first.empty()) return p.begin()->second;
  return std::nullopt;
}
/// The constant term.
template <class K>
int64_t constant_term(const PolyOf<K>& p) {
  auto it = p.find(MonoOf<K>{});
  return it == p.end() ? 0 : it->second;
}

/// p += c * m.
template <class K>
void add_term(PolyOf<K>& p, const MonoOf<K>& m, int64_t c) {
  if (c == 0) return;
  auto [it, fresh] = p.emplace(m, c);
  if (!fresh) {
    it->second = add_checked(it->second, c);
    if (it->second == 0) p.erase(it);
  }
}
/// a + sign * b.
template <class K>
PolyOf<K> add(PolyOf<K> a, const PolyOf<K>& b, int64_t sign = 1) {
  for (const auto& [m, c] : b) add_term(a, m, mul_checked(c, sign));
  return a;
}
template <class K>
PolyOf<K> scale(const PolyOf<K>& a, int64_t k) {
  PolyOf<K> r;
  if (k == 0) return r;
  for (const auto& [m, c] : a) r.emplace(m, mul_checked(c, k));
  return r;
}
template <class K>
PolyOf<K> mul(const PolyOf<K>& a, const PolyOf<K>& b) {
  PolyOf<K> r;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      MonoOf<K> m;
      m.reserve(ma.size() + mb.size());
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m));
      add_term(r, m, mul_checked(ca, cb));
    }
  return r;
}

/// `m` with the atoms of `sub` removed (as a multiset); false when `sub` is not in `m`.
template <class K>
bool remove_sub(const MonoOf<K>& m, const MonoOf<K>& sub, MonoOf<K>& rest) {
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
template <class K>
int64_t content(const PolyOf<K>& p, int64_t g = 0) {
  for (const auto& [m, c] : p) g = std::gcd(g, c);
  return g;
}

/// a = q*b + r exactly, for b a single monomial: q collects the terms of a that are
/// multiples of b. With `floor_constant` and b a positive constant, the constant term
/// splits by floor division as well (so 0 <= the constant of r < b).
template <class K>
void split(const PolyOf<K>& a, const PolyOf<K>& b, PolyOf<K>& q, PolyOf<K>& r, bool floor_constant = false) {
  q.clear();
  r.clear();
  if (b.size() != 1) {
    r = a;
    return;
  }
  const auto& [mb, cb] = *b.begin();
  MonoOf<K> rest;
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
template <class K>
std::optional<PolyOf<K>> exact_quotient(const PolyOf<K>& a, const PolyOf<K>& b) {
  if (b.empty()) return std::nullopt;
  PolyOf<K> q, r;
  if (b.size() == 1) {
    split(a, b, q, r);
    if (r.empty()) return q;
    return std::nullopt;
  }
  if (a.size() != b.size()) return std::nullopt;
  const int64_t num = a.begin()->second, den = b.begin()->second;
  if (!divides(den, num)) return std::nullopt;
  const int64_t k = num / den;
  if (scale(b, k) == a) return constant<K>(k);
  return std::nullopt;
}

/// a % c = r % c for a constant c > 0, with r = a with every term reduced modulo c: its
/// coefficient floored modulo c, or the term dropped where `multiple_of_c(m, k)` says the
/// caller knows k*m to be a multiple of c (a dim's variables declared as multiples).
template <class K, class MultipleOfC>
PolyOf<K> reduce_mod(const PolyOf<K>& a, int64_t c, MultipleOfC&& multiple_of_c) {
  PolyOf<K> r;
  for (const auto& [m, k] : a) {
    if (!m.empty() && multiple_of_c(m, k)) continue;
    add_term(r, m, floor_mod(k, c));
  }
  return r;
}

/// (x // d) // b = x // (d*b) for b > 0 (floor division composes, any d != 0). When r is
/// exactly one atom that `as_floordiv(key)` says is x // d (an optional pair of x and d),
/// the numerator and divisor of the composed division: (x, d*b).
template <class K, class AsFloorDiv>
std::optional<std::pair<PolyOf<K>, PolyOf<K>>> compose_floordiv(const PolyOf<K>& r, const PolyOf<K>& b,
                                                                AsFloorDiv&& as_floordiv) {
  if (r.size() != 1 || r.begin()->second != 1 || r.begin()->first.size() != 1) return std::nullopt;
  std::optional<std::pair<PolyOf<K>, PolyOf<K>>> xd = as_floordiv(r.begin()->first[0]);
  if (!xd) return std::nullopt;
  xd->second = mul(xd->second, b);
  return xd;
}

/// The quotient and remainder by the identities above, given `in_range(r, b)`: whether
/// 0 <= r < b holds for every value of the atoms (the caller's ranges).
template <class K>
struct DivModOf {
  PolyOf<K> q;              ///< the part of a // b known exactly
  PolyOf<K> r;              ///< what is left: a // b = q + r // b, a % b = r % b
  bool r_in_range = false;  ///< 0 <= r < b: r // b = 0 and r % b = r
};
using DivMod = DivModOf<std::string>;
template <class K, class InRange>
DivModOf<K> divmod(const PolyOf<K>& a, const PolyOf<K>& b, InRange&& in_range, bool floor_constant = false) {
  DivModOf<K> d;
  split(a, b, d.q, d.r, floor_constant);
  d.r_in_range = d.r.empty() || in_range(d.r, b);
  return d;
}

// ---------------------------------------------------------------- ranges
// What a caller knows about the values of its atoms. An oracle is any object with
//   std::optional<std::pair<int64_t, int64_t>> constant_range(const K& key)
//       the atom's range where it is a constant interval (any signs), else nullopt;
//   std::optional<PolyOf<K>> bound(const K& key, bool upper)
//       an upper (or lower) bound of an atom without a constant range, as a polynomial
//       over atoms that bound themselves; nullopt where unknown or where the atom may be
//       negative (such bounds multiply only for non-negative factors);
//   bool atom_non_negative(const K& key)      the atom is >= 0 for every value;
//   int64_t least(const K& key)               a constant the atom is at least (>= 0 used);
//   void limit(const PolyOf<K>& p)            called on every intermediate polynomial: a
//                                             caller with a size bound throws its own error.

/// An upper (want_max) or lower bound of p, term by term. A term c * a1 * ... * an whose
/// atoms all have constant ranges is bounded by interval arithmetic (the extreme corner of
/// the product, any signs); otherwise each atom (non-negative: bound()'s promise) gives
/// its upper or lower bound as c's sign and want_max say. nullopt where some bound is
/// unknown; PolyOverflow where a bound does not fit int64.
template <class K, class Oracle>
std::optional<PolyOf<K>> extreme(const PolyOf<K>& p, bool want_max, Oracle& o) {
  PolyOf<K> out;
  for (const auto& [m, c] : p) {
    const bool intervals =
        std::all_of(m.begin(), m.end(), [&](const K& k) { return o.constant_range(k).has_value(); });
    if (!intervals) {
      const bool up = (c > 0) == want_max;
      PolyOf<K> t = constant<K>(c);
      for (const auto& k : m) {
        auto b = o.bound(k, up);
        if (!b) return std::nullopt;
        o.limit(t = mul(t, *b));
      }
      o.limit(out = add(out, t, 1));
      continue;
    }
    int64_t lo = c, hi = c;
    for (const auto& k : m) {
      const auto [alo, ahi] = *o.constant_range(k);
      const int64_t x[4] = {mul_checked(lo, alo), mul_checked(lo, ahi), mul_checked(hi, alo),
                            mul_checked(hi, ahi)};
      lo = *std::min_element(x, x + 4);
      hi = *std::max_element(x, x + 4);
    }
    add_term(out, MonoOf<K>{}, want_max ? hi : lo);
    o.limit(out);
  }
  return out;
}

/// True when p >= 0 for all values of its atoms: with every atom non-negative and written
/// as least(a) + a' (a' >= 0), every coefficient is non-negative.
template <class K, class Oracle>
bool non_negative(const PolyOf<K>& p, Oracle& o) {
  auto all_pos = [](const PolyOf<K>& x) {
    return std::all_of(x.begin(), x.end(), [](const auto& t) { return t.second >= 0; });
  };
  for (const auto& [m, c] : p)
    for (const auto& k : m)
      if (!o.atom_non_negative(k)) return false;
  if (all_pos(p)) return true;
  PolyOf<K> shifted;
  for (const auto& [m, c] : p) {
    PolyOf<K> t = constant<K>(c);
    for (const auto& k : m) {
      PolyOf<K> f;
      f[{k}] = 1;
      if (const int64_t lo = o.least(k); lo > 0) f[{}] = lo;
      o.limit(t = mul(t, f));
    }
    o.limit(shifted = add(shifted, t, 1));
  }
  return all_pos(shifted);
}

/// 0 <= r < b for every value of the atoms (then r // b = 0 and r % b = r).
template <class K, class Oracle>
bool in_range(const PolyOf<K>& r, const PolyOf<K>& b, Oracle& o) {
  auto lo = extreme(r, false, o);
  if (!lo || !non_negative(*lo, o)) return false;
  auto hi = extreme(r, true, o);
  auto lo_b = extreme(b, false, o);
  if (!hi || !lo_b) return false;
  PolyOf<K> gap = add(*lo_b, constant<K>(1), -1);  // b - 1 - r >= 0
  o.limit(gap);
  o.limit(gap = add(gap, *hi, -1));
  return non_negative(gap, o);
}

/// a <= b (strict: a < b) where the range of b - a decides it: true, false, or nullopt.
template <class K, class Oracle>
std::optional<bool> decide_le(const PolyOf<K>& a, const PolyOf<K>& b, bool strict, Oracle& o) {
  const PolyOf<K> d = add(b, a, -1);
  o.limit(d);
  const int64_t need = strict ? 1 : 0;  // a <= b (a < b) iff d >= need
  if (auto lo = extreme(d, false, o)) {
    PolyOf<K> x = add(*lo, constant<K>(need), -1);
    o.limit(x);
    if (non_negative(x, o)) return true;
  }
  if (auto hi = extreme(d, true, o)) {
    PolyOf<K> x = add(constant<K>(need - 1), *hi, -1);
    o.limit(x);
    if (non_negative(x, o)) return false;
  }
  return std::nullopt;
}

}  // namespace luminal::detail::poly
