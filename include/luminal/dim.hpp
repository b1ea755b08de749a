// Symbolic integer dimensions. A Dim is an immutable expression (constants, named
// variables with an inclusive range, + - * / % min max) kept in a canonical form, so
// that B*4/4 and B are the same Dim. Shapes are std::vector<Dim>.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

namespace luminal {

namespace detail {
struct DimExpr;  // lib/graph: the canonical expression node
}

/// Values of named dims, bound from input shapes when a Callable is called.
using DimBindings = std::map<std::string, int64_t>;

class Dim {
 public:
  /// A constant dim. Implicit, so brace lists such as {B, 16} work.
  Dim(int64_t value = 0);  // NOLINT(google-explicit-constructor)
  /// Any other integer type (int, size_t, ...), so `B * v.size()` is not ambiguous.
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, int64_t>) Dim(T value)
      : Dim(static_cast<int64_t>(value)) {}  // NOLINT(google-explicit-constructor)

  /// A named variable with inclusive range [lo, hi]. Prefer Graph::dim().
  static Dim variable(const std::string& name, int64_t lo, int64_t hi);
  /// A variable known to be a multiple of `multiple_of` (a divisibility fact: B%16 is 0).
  static Dim variable(const std::string& name, int64_t lo, int64_t hi, int64_t multiple_of);
  /// The largest known divisor of every value the expression takes (1 when unknown; 0
  /// for the constant 0).
  int64_t known_divisor() const;

  /// The canonical expression, e.g. "B*4 + 1" or "min(B, 16)".
  std::string to_string() const;
  /// The value when the expression is a constant.
  std::optional<int64_t> as_constant() const;
  bool is_constant() const { return as_constant().has_value(); }
  /// Inclusive bounds implied by the variables' ranges.
  int64_t lower_bound() const;
  int64_t upper_bound() const;
  /// Value under the bindings; throws RuntimeError naming an unbound variable.
  int64_t evaluate(const DimBindings& bindings) const;
  /// Structural identity of canonical forms (not a numeric comparison).
  bool same_as(const Dim& other) const;
  /// Hash consistent with same_as.
  size_t hash() const;

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  /// Floor division (operands are non-negative in shapes).
  friend Dim operator/(const Dim& a, const Dim& b);
  friend Dim operator%(const Dim& a, const Dim& b);
  friend Dim min(const Dim& a, const Dim& b);
  friend Dim max(const Dim& a, const Dim& b);

  const std::shared_ptr<const detail::DimExpr>& expr() const { return expr_; }
  explicit Dim(std::shared_ptr<const detail::DimExpr> e) : expr_(std::move(e)) {}

 private:
  std::shared_ptr<const detail::DimExpr> expr_;
};

}  // namespace luminal
