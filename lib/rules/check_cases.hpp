// The rule checker's case generator (rules/check_support.hpp is the driver,
// rules/check_eval.hpp the evaluator): random instances of a rule's left side -- shapes,
// dtypes, attributes and input values -- chosen to reach the edges where a rule that
// holds "usually" goes wrong:
//   * shapes of rank 0 to 5, and (in a share of the instances) dims of size 0, so
//     reductions over empty axes, empty slices and pads of empty axes occur;
//   * f32 values in five regimes: mixed (signed, small integers, +0 and -0), positive,
//     special (inf, -inf, NaNs with random payloads and signs), wide (2^-24 .. 2^24) and
//     extreme (subnormals, the smallest normals, values within a factor 4 of overflow,
//     signed zeros, NaN payloads);
//   * i32 over its whole range in the extreme regime (INT_MIN, INT_MAX, their
//     neighbours, random 32-bit values), so wrap-around is exercised;
//   * constants (pattern variables bound to broadcast constants) from pools that include
//     -0, subnormals, near-overflow values and the i32 extremes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/reference/view.hpp"
#include "ir/tensor_lang.hpp"
#include "luminal/dim.hpp"
#include "luminal/egraph/pattern.hpp"

namespace luminal::rules::check {

using egraph::Id;
using Shape = std::vector<int64_t>;
using Pat = egraph::Pattern<ir::TensorLang>;

/// Value regimes (see the file comment); fast-math rules are checked on the first two.
enum Regime { kMixed = 0, kPositive = 1, kSpecial = 2, kWide = 3, kExtreme = 4 };
inline constexpr int kRegimes = 5;
const char* regime_name(int r);

/// An instance that cannot be built or evaluated (ill-typed): regenerate, no verdict.
struct Reject {
  std::string why;
};

/// Concatenates anything streamable (operator+ on string literals trips GCC 12's
/// -Wrestrict false positive).
template <class... T>
std::string cat(const T&... xs) {
  std::ostringstream os;
  (os << ... << xs);
  return os.str();
}
std::string shape_str(const Shape& s);
std::vector<Dim> dims_of(const Shape& s);
std::optional<Shape> concrete(const std::vector<Dim>& s, const DimBindings& dims = {});
int64_t numel(const Shape& s);

/// Random choices for one instance.
struct Rng {
  std::mt19937_64& g;
  bool zero_dims = false;  ///< this instance may have dims of size 0
  bool pools = false;      ///< this instance's f32 leaves draw from leaf_value's small pools
  int below(int n) { return static_cast<int>(g() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
  /// A dim: 1-4, or 0 in instances with zero dims; `high_rank` keeps it at most 3.
  int64_t dim(bool high_rank = false);
  /// A random shape of rank 0-5.
  Shape shape();
  std::vector<int> perm(size_t n);
  /// A random shape with `n` elements (n = 0: one dim is 0) of a random rank.
  Shape factor(int64_t n);
};

/// An input of the instance: its data comes from leaf_value.
struct Leaf {
  std::string name;
  DType dtype;
  Shape shape;
  int64_t index_bound = 0;  ///< > 0: an index tensor, values in [0, bound)
};

/// One random e-graph containing an instance of a rule's left side.
struct Instance {
  ir::EGraph g;
  std::vector<Leaf> leaves;
  // A symbolic instance: every attribute dim equal to `sym_value` is the variable `sym`
  // instead (bound to that value when evaluating), so rules meet symbolic shapes.
  int64_t sym_value = 0;
  Dim sym;
  DimBindings dims;
  // Ranks of the SPMD semantics (graph/primitives.hpp): 1, or 2-4 for the sharding rules,
  // whose values are checked on every rank ("%rank" bound to each; check_eval's eval_all).
  int64_t world = 1;
  // The rule being checked is fast-math (check_eval's eval: its declared inaccuracy).
  bool fast_math = false;
  // An example's outputs (a rule's random instance has none): the program's roots.
  std::vector<Id> roots;
};

/// What a pattern node must produce.
struct Want {
  Shape shape;
  DType dtype;
};

/// Instantiates pattern nodes top-down: each node receives the shape and dtype its parent
/// needs and chooses attributes and child requirements that produce them.
class Builder {
 public:
  /// `regime` picks the constants a pattern variable may become (special and extreme
  /// values only in their regimes, so fast-math rules never meet them).
  Builder(Rng& rng, Instance& inst, int regime) : rng_(rng), inst_(inst), regime_(regime) {}
  Id build(const Pat& p, uint32_t i, const Want& w);

 private:
  Id var_leaf(int var, const Want& w, int64_t index_bound = 0);
  Id fresh_leaf(const Want& w, int64_t index_bound = 0);
  double constant_value(DType dt);

  struct Bound {
    Id id;
    Want want;
    int64_t index_bound;
  };
  Rng& rng_;
  Instance& inst_;
  int regime_;
  std::array<std::optional<Bound>, egraph::kMaxVars> bound_{};
  bool in_view_leaf_ = false;  ///< building a leaf's view: its operand is a plain leaf
};

/// A random result type (shape of rank 0-5 and dtype) for a left side's root.
Want random_want(Rng& rng);
/// A random program (as a pattern whose variables become leaves) for pass rules.
void random_pattern(Rng& rng, Pat& p, int depth);
/// Loads a GraphImpl (RuleInfo::example) into the instance's e-graph; its named dims are
/// bound to random values in their range (at most 4).
void load_example(Instance& inst, Rng& rng, const detail::GraphImpl& gi);
/// Random data for a leaf in a value regime.
detail::reference::View leaf_value(Rng& rng, const Leaf& l, int regime);

}  // namespace luminal::rules::check
