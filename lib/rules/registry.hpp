// The rule registry: every rewrite rule of the compiler, named and registered ONCE with
// its rule set. The compiler picks rules by set; the rule checker enumerates all of them.
//
// Rule sets (DESIGN.md "Rules"):
//   "algebra", "movement", "contraction"  math = math rules (rules helper), phase 1
//   "lower_reference", "lower_cpu"        a kernel node beside each math node, phase 2
//   "fusion"                              kernel nodes absorbing producers, phase 2
//
// CONTRACT for rule authors and for the rule checker:
//  * A rule is EITHER an engine rule (`rule`: a pattern => pattern, or a pattern with a
//    custom applier / condition, see include/luminal/egraph/rule.hpp and the language
//    contract in ir/tensor_lang.hpp), OR a whole-e-graph pass (`pass`: used by lowering
//    and fusion, which add kernel nodes beside existing nodes and never merge classes).
//  * Every rule states an identity: after it runs, every node of a class computes the
//    class's value. The checker verifies exactly that: it loads an example graph
//    (`example`, or its own generator) with ir::load_graph, applies the rule once
//    (apply_once below), then evaluates every node of every class with
//    ir::node_to_graph + the reference interpreter (kernel nodes through their bodies)
//    and compares within dtype tolerance.
//  * `fast_math`: the identity changes NaN/inf results (x*0 = 0, x-x = 0); such rules run
//    only with CompileOptions::fast_math, and the checker compares on finite inputs only.
//  * Register at namespace scope in your .cpp:
//      LUMINAL_REGISTER_RULE({.name = "mul-one", .set = "algebra", .fast_math = false,
//                             .doc = "x*1 = x", .rule = make_rule(...), .pass = {}, .example = {}});
//    (name every field: GCC warns about omitted ones under -Wextra)
//    Registration runs at load time of the shared library. (With LUMINAL_BUILD_STATIC the
//    linker may drop a rules object file nothing references: keep rule files in the
//    default shared build, or reference them.)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cost/target_desc.hpp"
#include "ir/tensor_lang.hpp"
#include "luminal/egraph/rule.hpp"

namespace luminal::rules {

using ir::EGraph;
using TensorRule = egraph::Rule<ir::TensorLang, ir::TensorAnalysis>;

/// What a pass-style rule (lowering, fusion) may read.
struct PassContext {
  detail::TargetDesc target;  ///< the cost model's target (GEMM tiles, library kernels)
  bool library_gemm = false;  ///< the target offers a BLAS GEMM (CPU)
  bool fast_math = false;
  std::size_t node_limit = 200000;   ///< stop adding nodes beyond this many e-nodes
  std::size_t max_body_nodes = 160;  ///< largest fused kernel body
  std::vector<egraph::Id> roots;     ///< the program's output classes (empty: unknown)
  /// Optional passes (fusion) stop adding variants after this (the time budget).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

struct RuleInfo {
  std::string name;  ///< unique, kebab-case: "mul-one", "fuse-elementwise-producer"
  std::string set;   ///< "algebra", "movement", "contraction", "lower_reference", ...
  bool fast_math = false;
  std::string doc;  ///< one line: the identity, e.g. "x*1 = x"
  /// An engine rule (converted from egraph::rule(...) specs: `make_rule(spec)`).
  std::shared_ptr<const TensorRule> rule;
  /// Or a pass over the whole (rebuilt) e-graph; returns the number of nodes it added.
  std::function<std::size_t(EGraph&, const PassContext&)> pass;
  /// Optional: a small graph (with outputs) containing an instance of the left side, on
  /// random shapes/dtypes drawn from `rng`. The checker gives its Inputs/Params random data.
  std::function<std::shared_ptr<detail::GraphImpl>(std::mt19937_64& rng)> example;
};

/// Converts an egraph::rule(...) / multi_rule(...) spec into a shareable engine rule.
template <class Spec>
std::shared_ptr<const TensorRule> make_rule(const Spec& spec) {
  return std::make_shared<const TensorRule>(static_cast<TensorRule>(spec));
}

class Registry {
 public:
  /// The process-wide registry every LUMINAL_REGISTER_RULE adds to.
  static Registry& global();
  /// Adds a rule; throws InternalError on a duplicate name or a rule with neither `rule`
  /// nor `pass` (or both).
  void add(RuleInfo info);
  const std::vector<RuleInfo>& all() const { return rules_; }
  /// Rules of one set, in registration order; fast-math ones only when `fast_math`.
  std::vector<const RuleInfo*> set(std::string_view name, bool fast_math = true) const;
  /// The engine rules of several sets (passes skipped), ready for egraph::Runner.
  std::vector<TensorRule> engine_rules(const std::vector<std::string>& sets, bool fast_math) const;
  const RuleInfo* find(std::string_view name) const;

 private:
  std::vector<RuleInfo> rules_;
};

/// Runs one rule once on a rebuilt e-graph (one search + apply for an engine rule, one
/// call for a pass), then rebuilds. Returns the number of effective applications.
std::size_t apply_once(const RuleInfo& rule, EGraph& g, const PassContext& ctx = {});

struct Registrar {
  explicit Registrar(RuleInfo info) { Registry::global().add(std::move(info)); }
};

#define LUMINAL_RULES_CAT2(a, b) a##b
#define LUMINAL_RULES_CAT(a, b) LUMINAL_RULES_CAT2(a, b)
/// Registers a rule at load time: LUMINAL_REGISTER_RULE({.name = ..., .set = ..., ...});
#define LUMINAL_REGISTER_RULE(...)                            \
  static const ::luminal::rules::Registrar LUMINAL_RULES_CAT( \
      luminal_rule_registrar_, __COUNTER__)(::luminal::rules::RuleInfo __VA_ARGS__)

}  // namespace luminal::rules
