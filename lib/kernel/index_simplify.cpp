// Index simplification by polynomial normal form and variable ranges (see index_simplify.hpp).
#include "kernel/index_simplify.hpp"

#include "graph/int_poly.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace luminal::kernel {

namespace {

namespace poly = detail::poly;

// Thrown when an index leaves what the normal form handles (overflowing coefficients,
// too many terms, division by zero): the input index is then returned unchanged.
struct GiveUp {};

// A product of sums expands term by term; past this many terms the index is left alone.
constexpr size_t kMaxTerms = 128;

// The polynomial algebra is graph/int_poly.hpp's, shared with the dims; here it only
// gains the size bound.
using poly::constant;
using poly::divides;
using poly::Mono;
using poly::Poly;
using poly::remove_sub;

std::optional<int64_t> poly_const(const Poly& p) { return poly::const_value(p); }
int64_t checked_mul(int64_t a, int64_t b) { return poly::mul_checked(a, b); }
int64_t checked_add(int64_t a, int64_t b) { return poly::add_checked(a, b); }

const Poly& bounded(const Poly& p) {
  if (p.size() > kMaxTerms) throw GiveUp{};
  return p;
}
Poly add(Poly a, const Poly& b, int64_t sign) { return bounded(poly::add(std::move(a), b, sign)); }
Poly mul(const Poly& a, const Poly& b) {
  if (a.size() * b.size() > kMaxTerms * kMaxTerms) throw GiveUp{};
  return bounded(poly::mul(a, b));
}

bool is_boolean(const Index& i) {
  switch (i.op()) {
    case IndexOp::Lt:
    case IndexOp::Le:
    case IndexOp::Eq:
    case IndexOp::And:
      return true;
    case IndexOp::Const:
      return i.as_constant() == 0 || i.as_constant() == 1;
    default:
      return false;
  }
}

class Simplifier {
 public:
  Simplifier(const VarExtents& extents, const SymbolMins& sym_min) : ext_(extents), sym_min_(sym_min) {}

  Index run(const Index& i) {
    try {
      return build(poly(i));
    } catch (const GiveUp&) {
      return i;
    } catch (const poly::PolyOverflow&) {
      return i;
    }
  }

 private:
  struct Atom {
    Index index;
    bool has_var = false;
  };
  const VarExtents& ext_;
  const SymbolMins& sym_min_;
  std::map<std::string, Atom> atoms_;
  // Shared subtrees are analysed once (each entry keeps its node alive, so an address is
  // never reused for another node while it is a key).
  std::map<const IndexNode*, std::pair<Index, Poly>> memo_;
  std::map<const IndexNode*, std::pair<Index, bool>> var_memo_;

  bool uses_var(const Index& i) {
    const IndexNode* n = &i.node();
    if (n->op == IndexOp::Var) return true;
    if (auto it = var_memo_.find(n); it != var_memo_.end()) return it->second.second;
    bool r = false;
    for (const auto& a : n->args) r = uses_var(a) || r;
    var_memo_.emplace(n, std::make_pair(i, r));
    return r;
  }

  // ------------------------------------------------------------ normal form
  Poly of_index(const Index& i) {
    if (auto c = i.as_constant()) return constant(*c);
    std::string key;
    const auto& n = i.node();
    // Keys order monomials: loop variables (by id), then symbols, then other atoms.
    if (n.op == IndexOp::Var) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "0v%09lld", static_cast<long long>(n.value));
      key = buf;
    } else if (n.op == IndexOp::Sym) {
      // Built with append: GCC 12 warns falsely (-Wrestrict) on "1" + std::string.
      key.assign("1").append(n.name);
    } else {
      key.assign("2").append(i.to_string());
    }
    atoms_.emplace(key, Atom{i, uses_var(i)});
    Poly p;
    p[{key}] = 1;
    return p;
  }

  Poly poly(const Index& i) {
    if (auto it = memo_.find(&i.node()); it != memo_.end()) return it->second.second;
    Poly p = poly_raw(i);
    memo_.emplace(&i.node(), std::make_pair(i, p));
    return p;
  }

  Poly poly_raw(const Index& i) {
    const auto& n = i.node();
    auto arg = [&](size_t k) { return poly(n.args[k]); };
    switch (n.op) {
      case IndexOp::Const:
      case IndexOp::Var:
      case IndexOp::Sym:
        return of_index(i);
      case IndexOp::Add:
        return recombine(add(arg(0), arg(1), 1));
      case IndexOp::Sub:
        return recombine(add(arg(0), arg(1), -1));
      case IndexOp::Mul:
        return mul(arg(0), arg(1));
      case IndexOp::FloorDiv:
        return divmod(arg(0), arg(1), true);
      case IndexOp::Mod:
        return divmod(arg(0), arg(1), false);
      case IndexOp::Lt:
        return compare(arg(0), arg(1), true);
      case IndexOp::Le:
        return compare(arg(0), arg(1), false);
      case IndexOp::Eq: {
        Poly a = arg(0), b = arg(1);
        if (auto d = poly_const(add(a, b, -1))) return constant(*d == 0);
        return of_index(eq(build(a), build(b)));
      }
      case IndexOp::And: {
        Poly a = arg(0), b = arg(1);
        auto ca = poly_const(a), cb = poly_const(b);
        if (ca == 0 || cb == 0) return {};
        if (ca && cb) return constant(1);
        if (ca && is_boolean(n.args[1])) return b;
        if (cb && is_boolean(n.args[0])) return a;
        return of_index(land(build(a), build(b)));
      }
      case IndexOp::Select: {
        Poly c = arg(0);
        if (auto cc = poly_const(c)) return *cc != 0 ? arg(1) : arg(2);
        return of_index(select(build(c), build(arg(1)), build(arg(2))));
      }
      case IndexOp::Min:
        return of_index(min(build(arg(0)), build(arg(1))));
      case IndexOp::Max:
        return of_index(max(build(arg(0)), build(arg(1))));
    }
    throw GiveUp{};
  }

  Poly divmod(const Poly& a, const Poly& b, bool div) {
    if (b.empty()) throw GiveUp{};  // division by zero: leave it to the caller's checks
    // (q*b + r) // b = q + r // b and (q*b + r) % b = r % b, for the terms of a that are
    // multiples of b (b one monomial), exactly, for any non-zero b.
    Poly q, r;
    split(a, b, q, r);
    if (r.empty()) return div ? q : Poly{};
    if (auto lo_b = extreme(b, false); lo_b && non_negative(*lo_b)) {
      // 0 <= r < b: r // b = 0, r % b = r
      if (in_range(r, b)) return div ? q : r;
      // (x // d) // b = x // (d*b) when b > 0 (b == 0 divides by zero either way)
      auto as_floordiv = [&](const std::string& key) -> std::optional<std::pair<Poly, Poly>> {
        const Index& inner = atoms_.at(key).index;
        if (inner.op() != IndexOp::FloorDiv) return std::nullopt;
        return std::make_pair(poly(inner.node().args[0]), poly(inner.node().args[1]));
      };
      if (div)
        if (auto xd = poly::compose_floordiv(r, b, as_floordiv))
          return add(q, divmod(xd->first, bounded(xd->second), true), 1);
    }
    const Index rest = div ? floordiv(build(r), build(b)) : mod(build(r), build(b));
    return div ? add(q, of_index(rest), 1) : of_index(rest);
  }

  // c*(x % d) + c*d*(x // d) = c*x, the inverse of a split (a reshape that splits x and
  // another that merges the parts again); with x = y // e the partner is y // (e*d).
  Poly recombine(Poly p) {
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& [m, c] : p) {
        if (m.size() != 1) continue;
        const Index& a = atoms_.at(m[0]).index;
        if (a.op() != IndexOp::Mod) continue;
        const Index& x = a.node().args[0];
        const Index& d = a.node().args[1];
        const Poly pd = poly(d);
        if (pd.size() != 1) continue;
        const auto& [md, cd] = *pd.begin();
        // x // d, or y // (e*d) as the nested division folds it when x = y // e
        Index partners[2] = {floordiv(x, d), Index(0)};
        int n_partners = 1;
        // ((y // e) // d = y // (e*d) needs d > 0; d == 0 divides by zero either way)
        if (x.op() == IndexOp::FloorDiv && !uses_var(x.node().args[1]) && !uses_var(d))
          if (auto lo_d = extreme(pd, false); lo_d && non_negative(*lo_d))
            partners[n_partners++] = floordiv(x.node().args[0], build(mul(poly(x.node().args[1]), pd)));
        Mono pm;
        bool found = false;
        for (int k = 0; k < n_partners; ++k) {
          std::string pkey;
          pkey.assign("2").append(partners[k].to_string());
          pm = md;
          pm.insert(std::upper_bound(pm.begin(), pm.end(), pkey), pkey);
          auto pit = p.find(pm);
          if ((found = pit != p.end() && pit->second == checked_mul(c, cd))) break;
        }
        if (!found) continue;
        Poly rest = p;
        rest.erase(m);
        rest.erase(pm);
        p = add(rest, mul(poly(x), constant(c)), 1);
        changed = true;
        break;
      }
    }
    return p;
  }

  // a = q*b + r exactly, with q collecting what divides (see divmod): the shared split
  // for a single-monomial b, else polynomial long division.
  static void split(const Poly& a, const Poly& b, Poly& q, Poly& r) {
    if (b.size() == 1) {
      poly::split(a, b, q, r);
      return;
    }
    q.clear();
    r = a;
    poly_divide(r, b, q);
  }

  // Multivariate division by b's leading (highest degree) monomial: moves t*b from r into
  // q (t a monomial) while some term of r is a multiple of that monomial, so r = r0 - q*b
  // exactly. Kept only when it shortens r (a linearization over (n + 3) splits; others
  // would only reshuffle terms).
  static void poly_divide(Poly& r, const Poly& b, Poly& q) {
    auto lead = b.begin();
    for (auto it = b.begin(); it != b.end(); ++it)
      if (it->first.size() > lead->first.size()) lead = it;
    const Mono& ml = lead->first;
    const int64_t cl = lead->second;
    if (ml.empty()) return;
    Poly rr = r, qq;
    Mono rest;
    for (int step = 0; step < 64; ++step) {
      auto it = std::find_if(rr.begin(), rr.end(), [&](const auto& t) {
        return divides(cl, t.second) && remove_sub(t.first, ml, rest);
      });
      if (it == rr.end()) break;
      Poly t;
      t[rest] = it->second / cl;
      qq = add(qq, t, 1);
      rr = add(rr, mul(t, b), -1);
    }
    if (rr.size() < r.size()) {
      r = std::move(rr);
      q = std::move(qq);
    }
  }

  // a < b (strict) or a <= b, decided where the ranges decide it.
  Poly compare(const Poly& a, const Poly& b, bool strict) {
    if (auto decided = poly::decide_le(a, b, strict, *this)) return constant(*decided ? 1 : 0);
    return of_index(strict ? lt(build(a), build(b)) : le(build(a), build(b)));
  }

  // ------------------------------------------------------------ ranges
  // The range reasoning is graph/int_poly.hpp's (extreme, non_negative, in_range,
  // decide_le), shared with the dims; this class is its oracle: what the loop variables'
  // extents and the symbols' least values say about each atom.
  bool in_range(const Poly& r, const Poly& b) { return poly::in_range(r, b, *this); }
  std::optional<Poly> extreme(const Poly& p, bool want_max) { return poly::extreme(p, want_max, *this); }
  bool non_negative(const Poly& p) { return poly::non_negative(p, *this); }

 public:
  // The oracle (see int_poly.hpp). Bounds are symbolic (extents are index expressions),
  // so no atom has a constant range; bound() says nullopt for one that may be negative.
  std::optional<std::pair<int64_t, int64_t>> constant_range(const std::string&) const { return std::nullopt; }
  bool atom_non_negative(const std::string& key) const {
    const Index& a = atoms_.at(key).index;
    return a.op() == IndexOp::Sym || a.non_negative();
  }
  void limit(const Poly& p) const { bounded(p); }
  std::optional<Poly> bound(const std::string& key, bool upper) { return atom_bound(key, upper); }
  int64_t least(const std::string& key) {
    const Index& i = atoms_.at(key).index;
    return std::max<int64_t>(0, least_value(i).value_or(0));
  }

 private:
  // Bounds of a non-negative atom: loop invariants bound themselves; a loop variable
  // lies in [0, extent - 1]; x % b in [0, b - 1]; x // b in [0, max(x)]; predicates in [0, 1].
  std::optional<Poly> atom_bound(const std::string& key, bool upper) {
    const Atom& a = atoms_.at(key);
    const Index& i = a.index;
    const auto& n = i.node();
    if (!a.has_var) {
      if (n.op != IndexOp::Sym && !i.non_negative()) return std::nullopt;
      Poly p;
      p[{key}] = 1;
      return p;
    }
    switch (n.op) {
      case IndexOp::Var: {
        if (!upper) return Poly{};
        auto it = ext_.find(static_cast<int>(n.value));
        if (it == ext_.end() || uses_var(it->second)) return std::nullopt;
        return add(poly(it->second), constant(1), -1);
      }
      case IndexOp::Mod: {
        auto lo_b = extreme(poly(n.args[1]), false);
        if (!lo_b || !non_negative(*lo_b)) return std::nullopt;
        if (!upper) return Poly{};
        auto hi_b = extreme(poly(n.args[1]), true);
        if (!hi_b) return std::nullopt;
        return add(*hi_b, constant(1), -1);
      }
      case IndexOp::FloorDiv: {
        auto lo_x = extreme(poly(n.args[0]), false);
        auto lo_b = extreme(poly(n.args[1]), false);
        if (!lo_x || !non_negative(*lo_x) || !lo_b || !non_negative(*lo_b)) return std::nullopt;
        if (!upper) return Poly{};
        auto hi_x = extreme(poly(n.args[0]), true);  // b >= 1 (b == 0 divides by zero)
        if (!hi_x || uses_var(n.args[1])) return hi_x;
        // floor(max(x) / b) where max(x) = q*b + r with -b <= r < b (a split row extent)
        const Poly b = poly(n.args[1]);
        Poly q, r;
        split(*hi_x, b, q, r);
        if (r.empty() || in_range(r, b)) return q;
        if (in_range(add(r, b, 1), b)) return add(q, constant(1), -1);
        return hi_x;
      }
      case IndexOp::Lt:
      case IndexOp::Le:
      case IndexOp::Eq:
      case IndexOp::And:
        return upper ? constant(1) : Poly{};
      default:
        return std::nullopt;
    }
  }

  // A lower bound of loop-invariant atom `i` (least(): 0 when nothing better is known).
  std::optional<int64_t> least_value(const Index& i) {
    const auto& n = i.node();
    auto arg = [&](size_t k) { return least_value(n.args[k]); };
    switch (n.op) {
      case IndexOp::Const:
        return n.value;
      case IndexOp::Sym: {
        auto it = sym_min_.find(n.name);
        return it == sym_min_.end() ? int64_t{0} : it->second;
      }
      case IndexOp::Add: {
        auto a = arg(0), b = arg(1);
        if (!a || !b) return std::nullopt;
        return checked_add(*a, *b);
      }
      case IndexOp::Mul: {
        auto a = arg(0), b = arg(1);
        if (!a || !b || *a < 0 || *b < 0) return std::nullopt;
        return checked_mul(*a, *b);
      }
      case IndexOp::FloorDiv: {
        auto a = arg(0);
        auto d = n.args[1].as_constant();
        if (!a || *a < 0 || !d || *d <= 0) return std::nullopt;
        return *a / *d;
      }
      case IndexOp::Min: {
        auto a = arg(0), b = arg(1);
        if (!a || !b) return std::nullopt;
        return std::min(*a, *b);
      }
      case IndexOp::Max: {
        auto a = arg(0), b = arg(1);
        if (!a) return b;  // max(a, b) >= b
        if (!b) return a;
        return std::max(*a, *b);
      }
      default:
        return std::nullopt;
    }
  }

  // ------------------------------------------------------------ back to an Index
  Index build(const Poly& p) {
    Index pos(0), neg(0);
    int64_t k = 0;
    for (const auto& [m, c] : p) {
      if (m.empty()) {
        k = c;
        continue;
      }
      Index t(1);
      for (const auto& a : m) t = t * atoms_.at(a).index;
      t = t * Index(c < 0 ? checked_mul(c, -1) : c);
      if (c > 0)
        pos = pos + t;
      else
        neg = neg + t;
    }
    Index out = k > 0 ? pos + Index(k) : pos;
    out = out - neg;
    return k < 0 ? out - Index(checked_mul(k, -1)) : out;
  }
};

}  // namespace

Index simplify(const Index& i, const VarExtents& extents, const SymbolMins& sym_min) {
  if (i.op() == IndexOp::Const || i.op() == IndexOp::Var || i.op() == IndexOp::Sym) return i;
  return Simplifier(extents, sym_min).run(i);
}

}  // namespace luminal::kernel
