// The canonical form behind luminal::Dim: a polynomial of the shared integer algebra
// (graph/int_poly.hpp) over atoms. An atom is a named variable (with an inclusive range)
// or an opaque floor-division, floor-modulo, min or max of two canonical Dims that could
// not be simplified away. Atoms are keyed by their canonical text, so two expressions
// that simplify to the same polynomial print -- and compare, and hash -- identically.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/int_poly.hpp"
#include "luminal/dim.hpp"

namespace luminal::detail {

enum class AtomKind : uint8_t { Var, Div, Mod, Min, Max };

struct Atom {
  AtomKind kind = AtomKind::Var;
  std::string name;        // Var only
  int64_t lo = 0, hi = 0;  // Var: declared range; others: derived bounds
  int64_t multiple = 1;    // Var: every value is a multiple of this
  Dim a, b;                // operands of Div/Mod/Min/Max
  std::string text;        // canonical text, e.g. "B", "(B + 1)/4", "min(B, 16)"
};
using AtomPtr = std::shared_ptr<const Atom>;

/// An atom as a key of the shared polynomials: ordered and compared by its text.
struct AtomKey {
  AtomPtr atom;
  bool operator<(const AtomKey& o) const { return atom->text < o.atom->text; }
  bool operator==(const AtomKey& o) const { return atom == o.atom || atom->text == o.atom->text; }
};
using DimPoly = poly::PolyOf<AtomKey>;

/// coeff * atoms[0] * atoms[1] * ... (atoms sorted by text, repeated for powers): one
/// non-constant monomial of a DimExpr's polynomial, for readers that walk a dim.
struct Term {
  std::vector<AtomPtr> atoms;
  int64_t coeff = 1;
};

struct DimExpr {
  DimPoly poly;             // the normal form
  int64_t constant = 0;     // its constant term,
  std::vector<Term> terms;  // and its other terms in its order (non-zero coefficients)
  int64_t lo = 0, hi = 0;   // inclusive bounds implied by the variables' ranges
  std::string text;
  size_t hash = 0;
};

/// The canonical Dim of a polynomial: computes the terms, text and bounds. The only way
/// a DimExpr is made; a coefficient of INT64_MIN (it cannot be negated for printing) is a
/// ShapeError.
Dim make_dim(DimPoly p);
/// A Dim that is exactly one atom with coefficient 1.
Dim atom_dim(AtomPtr atom);
/// The atom when `d` is exactly one atom with coefficient 1 and no constant.
const Atom* as_single_atom(const Dim& d);

/// What a dim's atoms' ranges say, as the shared algebra's range oracle (int_poly.hpp):
/// every atom has a constant range (unbounded ones the int64 extremes), so polynomial
/// bounds are interval arithmetic.
struct DimRanges {
  std::optional<std::pair<int64_t, int64_t>> constant_range(const AtomKey& k) const {
    return std::make_pair(k.atom->lo, k.atom->hi);
  }
  std::optional<DimPoly> bound(const AtomKey& k, bool upper) const {
    return poly::constant<AtomKey>(upper ? k.atom->hi : k.atom->lo);
  }
  bool atom_non_negative(const AtomKey& k) const { return k.atom->lo >= 0; }
  int64_t least(const AtomKey& k) const { return k.atom->lo; }
  void limit(const DimPoly&) const {}
};

// Checked integer arithmetic: dims that overflow int64 are a ShapeError.
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
using poly::floor_div;
using poly::floor_mod;

}  // namespace luminal::detail
