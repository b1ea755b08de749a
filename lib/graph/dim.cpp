// Canonical construction, printing, bounds and evaluation of Dim expressions.
#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <numeric>

#include "graph/dim_expr.hpp"
#include "luminal/error.hpp"

namespace luminal::detail {

namespace {
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool is_div_like(const Atom& a) { return a.kind == AtomKind::Div || a.kind == AtomKind::Mod; }

// The text of a term without its sign: "B*C*4", "(B/2)*3".
std::string term_text(const Term& t) {
  const int64_t mag = t.coeff < 0 ? -t.coeff : t.coeff;  // coeff != INT64_MIN (checked)
  const bool wrap = t.atoms.size() > 1 || mag != 1;
  std::string s;
  for (size_t i = 0; i < t.atoms.size(); ++i) {
    if (i) s += '*';
    const Atom& a = *t.atoms[i];
    if (wrap && is_div_like(a)) {
      s += '(' + a.text + ')';
    } else {
      s += a.text;
    }
  }
  if (mag != 1) s += '*' + std::to_string(mag);
  return s;
}

// A bound of p from the atoms' ranges (the shared oracle); an unknown or overflowing
// bound is the int64 extreme (a dim's value always fits int64).
int64_t bound_of(const DimPoly& p, bool upper) {
  DimRanges ranges;
  try {
    if (auto b = poly::extreme(p, upper, ranges))
      if (auto c = poly::const_value(*b)) return *c;
  } catch (const poly::PolyOverflow&) {
  }
  return upper ? kMax : kMin;
}
}  // namespace

int64_t checked_add(int64_t a, int64_t b) {
  try {
    return poly::add_checked(a, b);
  } catch (const poly::PolyOverflow&) {
    throw ShapeError("[dim] integer overflow in a dim expression");
  }
}
int64_t checked_mul(int64_t a, int64_t b) {
  try {
    return poly::mul_checked(a, b);
  } catch (const poly::PolyOverflow&) {
    throw ShapeError("[dim] integer overflow in a dim expression");
  }
}

Dim make_dim(DimPoly p) {
  auto e = std::make_shared<DimExpr>();
  e->constant = poly::constant_term(p);
  for (const auto& [m, c] : p) {
    if (m.empty()) continue;
    if (c == kMin) throw ShapeError("[dim] integer overflow in a dim expression");
    Term t;
    t.coeff = c;
    for (const AtomKey& k : m) t.atoms.push_back(k.atom);
    e->terms.push_back(std::move(t));
  }
  e->lo = bound_of(p, false);
  e->hi = bound_of(p, true);
  std::string text;
  for (size_t i = 0; i < e->terms.size(); ++i) {
    const Term& t = e->terms[i];
    if (i == 0) {
      text += t.coeff < 0 ? "-" : "";
    } else {
      text += t.coeff < 0 ? " - " : " + ";
    }
    text += term_text(t);
  }
  const int64_t constant = e->constant;
  if (e->terms.empty()) {
    text = std::to_string(constant);
  } else if (constant > 0) {
    text += " + " + std::to_string(constant);
  } else if (constant < 0) {
    text += " - " + (constant == kMin ? std::string("9223372036854775808") : std::to_string(-constant));
  }
  e->text = std::move(text);
  e->hash = std::hash<std::string>{}(e->text);
  e->poly = std::move(p);
  return Dim(std::shared_ptr<const DimExpr>(std::move(e)));
}

Dim atom_dim(AtomPtr atom) { return make_dim(poly::atom<AtomKey>(AtomKey{std::move(atom)})); }

const Atom* as_single_atom(const Dim& d) {
  const DimExpr& e = *d.expr();
  if (e.constant != 0 || e.terms.size() != 1) return nullptr;
  const Term& t = e.terms[0];
  if (t.coeff != 1 || t.atoms.size() != 1) return nullptr;
  return t.atoms[0].get();
}

namespace {
int64_t eval_atom(const Atom& a, const DimBindings& b);

int64_t eval_expr(const DimExpr& e, const DimBindings& b) {
  int64_t v = e.constant;
  for (const Term& t : e.terms) {
    int64_t p = t.coeff;
    for (const AtomPtr& a : t.atoms) p = checked_mul(p, eval_atom(*a, b));
    v = checked_add(v, p);
  }
  return v;
}

int64_t eval_atom(const Atom& a, const DimBindings& b) {
  if (a.kind == AtomKind::Var) {
    auto it = b.find(a.name);
    if (it == b.end()) throw RuntimeError("[dim] the dim '" + a.name + "' is not bound");
    return it->second;
  }
  const int64_t x = eval_expr(*a.a.expr(), b);
  const int64_t y = eval_expr(*a.b.expr(), b);
  switch (a.kind) {
    case AtomKind::Div:
    case AtomKind::Mod:
      if (y == 0) throw RuntimeError("[dim] division by zero evaluating " + a.text);
      return a.kind == AtomKind::Div ? floor_div(x, y) : floor_mod(x, y);
    case AtomKind::Min:
      return std::min(x, y);
    case AtomKind::Max:
      return std::max(x, y);
    case AtomKind::Var:
      break;
  }
  return 0;
}

const std::shared_ptr<const DimExpr>& small_constant(int64_t v) {
  // Constants 0..kCached are shared: shapes are full of them.
  constexpr int64_t kCached = 1024;
  static const std::vector<std::shared_ptr<const DimExpr>> table = [] {
    std::vector<std::shared_ptr<const DimExpr>> t;
    for (int64_t i = 0; i <= kCached; ++i) t.push_back(make_dim(poly::constant<AtomKey>(i)).expr());
    return t;
  }();
  return table[static_cast<size_t>(v)];
}
}  // namespace

}  // namespace luminal::detail

namespace luminal {

using namespace detail;

Dim::Dim(int64_t value) {
  if (value >= 0 && value <= 1024) {
    expr_ = small_constant(value);
  } else {
    expr_ = make_dim(poly::constant<AtomKey>(value)).expr();
  }
}

Dim Dim::variable(const std::string& name, int64_t lo, int64_t hi) { return variable(name, lo, hi, 1); }

Dim Dim::variable(const std::string& name, int64_t lo, int64_t hi, int64_t multiple_of) {
  if (name.empty()) throw ShapeError("[dim] a dim variable needs a name");
  if (multiple_of < 1)
    throw ShapeError("[dim] '" + name + "' must be a multiple of a positive number, got " +
                     std::to_string(multiple_of));
  if (lo > hi)
    throw ShapeError("[dim] the range of '" + name + "' is empty: [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  // The range holds only multiples: tighten it to the first and last one.
  const int64_t tlo =
      floor_div(lo, multiple_of) * multiple_of + (floor_mod(lo, multiple_of) ? multiple_of : 0);
  const int64_t thi = floor_div(hi, multiple_of) * multiple_of;
  if (tlo > thi)
    throw ShapeError("[dim] '" + name + "' has no multiple of " + std::to_string(multiple_of) + " in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  lo = tlo;
  hi = thi;
  auto a = std::make_shared<Atom>();
  a->kind = AtomKind::Var;
  a->name = name;
  a->lo = lo;
  a->hi = hi;
  a->multiple = multiple_of;
  a->text = name;
  return atom_dim(std::move(a));
}

std::string Dim::to_string() const { return expr_->text; }

std::optional<int64_t> Dim::as_constant() const {
  if (expr_->terms.empty()) return expr_->constant;
  return std::nullopt;
}

int64_t Dim::lower_bound() const { return expr_->lo; }

int64_t Dim::known_divisor() const {
  int64_t g = expr_->constant < 0 ? -expr_->constant : expr_->constant;
  for (const Term& t : expr_->terms) {
    int64_t d = t.coeff < 0 ? -t.coeff : t.coeff;
    for (const AtomPtr& a : t.atoms)
      if (a->kind == AtomKind::Var && __builtin_mul_overflow(d, a->multiple, &d)) d = 1;
    g = std::gcd(g, d);
  }
  return g;
}
int64_t Dim::upper_bound() const { return expr_->hi; }

int64_t Dim::evaluate(const DimBindings& bindings) const { return eval_expr(*expr_, bindings); }

bool Dim::same_as(const Dim& other) const {
  return expr_ == other.expr_ || (expr_->hash == other.expr_->hash && expr_->text == other.expr_->text);
}

size_t Dim::hash() const { return expr_->hash; }

}  // namespace luminal
