// The canonical form behind luminal::Dim: a polynomial with integer coefficients over
// atoms. An atom is a named variable (with an inclusive range) or an opaque
// floor-division, floor-modulo, min or max of two canonical Dims that could not be
// simplified away. Terms are sorted by their monomial text, so two expressions that
// simplify to the same polynomial print -- and compare, and hash -- identically.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

/// coeff * atoms[0] * atoms[1] * ... (atoms sorted by text, repeated for powers).
struct Term {
  std::vector<AtomPtr> atoms;
  int64_t coeff = 1;
  std::string key;  // atom texts joined by '*': the sort and merge key
};

struct DimExpr {
  int64_t constant = 0;
  std::vector<Term> terms;  // sorted by key, distinct keys, non-zero coefficients
  int64_t lo = 0, hi = 0;   // inclusive bounds implied by the variables' ranges
  std::string text;
  size_t hash = 0;
};

/// Builds the canonical Dim of constant + sum(terms): sorts, merges, drops zeros,
/// computes text and bounds.
Dim make_dim(int64_t constant, std::vector<Term> terms);
/// A Dim that is exactly one atom with coefficient 1.
Dim atom_dim(AtomPtr atom);
/// The atom when `d` is exactly one atom with coefficient 1 and no constant.
const Atom* as_single_atom(const Dim& d);

// Checked integer arithmetic: dims that overflow int64 are a ShapeError.
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
// Saturating arithmetic for bounds (a bound may be "unbounded").
int64_t sat_add(int64_t a, int64_t b);
int64_t sat_mul(int64_t a, int64_t b);
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

}  // namespace luminal::detail
