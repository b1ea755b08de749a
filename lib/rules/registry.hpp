// The rule registry: every rewrite rule of the compiler, as values. Each rules file
// exports its rule set (a function returning a RuleSet: rows built with math_rule /
// pass_rule), and registry.cpp lists the sets explicitly -- no static initialisers, so
// the library links statically as well as shared and rule order is the order written.
//
// Rule sets (docs/rules.md):
//   "algebra", "movement", "contraction"  math rules, phase 1
//   "lower_reference", "lower_cpu"        a kernel node beside each math node, phase 2
//   "fusion"                              kernel nodes absorbing producers, phase 2
//   "schedule_gpu"                        GPU launch alternatives (CUDA, HIP), phase 2
//   "sharding"                            SPMD identities, phase 1b (after the math rules) with several ranks
//
// CONTRACT for rule authors and for the rule checker:
//  * A rule is EITHER an engine rule (a pattern => pattern, or a pattern with a custom
//    applier / condition, see include/luminal/egraph/rule.hpp and the language contract
//    in ir/tensor_lang.hpp; rows from `math_rule` in rules/algebra_dsl.hpp), OR a
//    whole-e-graph pass (`pass_rule`: used by lowering and fusion, which add kernel
//    nodes beside existing nodes and never merge classes).
//  * Every rule states an identity: after it runs, every node of a class computes the
//    class's value. The checker verifies exactly that: it loads an example graph
//    (`example`, or its own generator) with ir::load_graph, applies the rule once
//    (apply_once below), then evaluates every node of every class with
//    ir::node_to_graph + the reference interpreter (kernel nodes through their bodies)
//    and compares within dtype tolerance.
//  * `FastMath`: the identity changes NaN/inf results (x*0 = 0, x-x = 0); such rules run
//    only with CompileOptions::fast_math, and the checker compares on finite inputs only.
//    `Exact` rules hold on every input.
//  * `ReordersSum`: exact but for the order in which one sum adds its terms (a matmul's
//    contracted axis split over ranks and the partial products added by an all_reduce):
//    what every BLAS and PyTorch's own reductions do, so such rules run without fast_math.
//    The checker holds them, on every regime, to the rounding of a reordered sum: within
//    the tolerance relative to the sum of its terms' magnitudes (check_eval.hpp).
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
  bool library_gemm = false;  ///< the target offers a BLAS GEMM (CPU: OpenBLAS, CUDA: cuBLASLt)
  bool fast_math = false;
  std::size_t node_limit = 200000;   ///< stop adding nodes beyond this many e-nodes
  std::size_t max_body_nodes = 160;  ///< largest fused kernel body
  std::vector<egraph::Id> roots;     ///< the program's output classes (empty: unknown)
  /// The e-nodes of the program as loaded: lowering covers them whatever the deadline.
  std::vector<egraph::Id> spine;
  /// Passes stop adding nodes after this (the time budget); lowering still covers `spine`.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Passes act on kernel nodes from this id on: a later round extends what the round
  /// before it added (node ids only grow).
  std::size_t first_node = 0;
  /// The kernel nodes a guided pass (RuleInfo::guided) acts on: the incumbent program's.
  /// Empty: every kernel node (as the rule checker applies it).
  std::vector<egraph::Id> focus;
  /// Kernel nodes of the classes the program's classes are slices of (a product merged
  /// with its siblings: Q, K and V are slices of one Q|K|V product) that the program does
  /// not compute: absorb-producers fuses into them too, so the merged kernel can take what
  /// the separate ones took (a prologue) and the extractor can weigh it against them.
  std::vector<egraph::Id> wider;
  /// Those of `wider` the program reaches only through elementwise functions of their
  /// slices (GuidedFocus::wider_through_elementwise): absorb-producers also computes such
  /// functions off them.
  std::vector<egraph::Id> wider_through_elementwise;
};

/// Whether a rule holds on every input, on every input up to the order of a sum's terms,
/// or only on finite ones (fast-math).
enum class Exactness : uint8_t { Exact, ReordersSum, FastMath };
inline constexpr Exactness Exact = Exactness::Exact;
inline constexpr Exactness ReordersSum = Exactness::ReordersSum;
inline constexpr Exactness FastMath = Exactness::FastMath;

struct RuleInfo {
  std::string name;        ///< unique, kebab-case: "mul-one", "fuse-elementwise-producer"
  std::string set;         ///< "algebra", "movement", ... (filled in from the RuleSet)
  bool fast_math = false;  ///< Exactness::FastMath
  /// Exactness::ReordersSum: a class holding a sum (a matmul or a sum reduction) gets a
  /// node adding the same terms in another order.
  bool reorders_sum = false;
  /// FastMath rules: the relative error the identity adds on top of rounding (dropping a
  /// rounding to bf16: 2^-8); the checker's tolerance is at least this. 0: none.
  double declared_error = 0;
  std::string doc;         ///< one line: the identity, e.g. "x*1 = x"
  /// An engine rule (converted from egraph::rule(...) specs: `make_rule(spec)`).
  std::shared_ptr<const TensorRule> rule;
  /// Or a pass over the whole (rebuilt) e-graph; returns the number of nodes it added.
  std::function<std::size_t(EGraph&, const PassContext&)> pass;
  /// A pass whose equality holds for every pair of e-nodes but whose every application
  /// would grow the e-graph several times over: the search applies it to the kernels of
  /// the program it extracted (PassContext::focus), runs the passes after it on what it
  /// added, and extracts again (search.cpp). The checker applies it everywhere.
  bool guided = false;
  /// Optional: a small graph (with outputs) containing an instance of the left side, on
  /// random shapes/dtypes drawn from `rng`. The checker gives its Inputs/Params random data.
  std::function<std::shared_ptr<detail::GraphImpl>(std::mt19937_64& rng)> example;
};

/// Converts an egraph::rule(...) / multi_rule(...) spec into a shareable engine rule.
template <class Spec>
std::shared_ptr<const TensorRule> make_rule(const Spec& spec) {
  return std::make_shared<const TensorRule>(static_cast<TensorRule>(spec));
}

/// A pass-style rule: `pass(egraph, ctx)` returns the number of nodes it added.
using PassFn = std::function<std::size_t(EGraph&, const PassContext&)>;

/// One row of a pass rule set: {name, pass, Exact|ReordersSum|FastMath, doc}.
inline RuleInfo pass_rule(std::string name, PassFn pass, Exactness ex, std::string doc) {
  RuleInfo r;
  r.name = std::move(name);
  r.fast_math = ex == FastMath;
  r.reorders_sum = ex == ReordersSum;
  r.doc = std::move(doc);
  r.pass = std::move(pass);
  return r;
}

/// A named list of rules: what each rules file exports.
struct RuleSet {
  std::string name;
  std::vector<RuleInfo> rules;
};

// The rule sets, one per rules file (registry.cpp lists them).
RuleSet algebra_rules();          // rules/algebra.cpp
RuleSet movement_rules();         // rules/movement.cpp
RuleSet contraction_rules();      // rules/contraction.cpp
RuleSet lower_reference_rules();  // rules/lower.cpp
RuleSet lower_cpu_rules();        // rules/lower.cpp
RuleSet fusion_rules();           // rules/fusion.cpp
RuleSet schedule_gpu_rules();     // rules/schedule_gpu.cpp
RuleSet sharding_rules();         // rules/sharding.cpp (with a communicator of several ranks)

class Registry {
 public:
  /// Every rule set of the compiler, in the order registry.cpp lists them.
  static const Registry& global();
  /// Adds a set's rules; throws InternalError on a duplicate name or a rule with neither
  /// `rule` nor `pass` (or both).
  void add(RuleSet set);
  const std::vector<RuleInfo>& all() const { return rules_; }
  /// Rules of one set, in the order written; fast-math ones only when `fast_math`; rules
  /// named in `skip` (by rule or by set name) left out.
  std::vector<const RuleInfo*> set(std::string_view name, bool fast_math = true,
                                   const std::vector<std::string>& skip = {}) const;
  /// The engine rules of several sets (passes skipped), ready for egraph::Runner.
  std::vector<TensorRule> engine_rules(const std::vector<std::string>& sets, bool fast_math,
                                       const std::vector<std::string>& skip = {}) const;
  const RuleInfo* find(std::string_view name) const;
  /// Throws CompileError naming the first entry of `skip` (CompileOptions::skip_rules)
  /// that is neither a rule nor a set, or names the required "lower_reference" lowering.
  void check_skippable(const std::vector<std::string>& skip) const;

 private:
  std::vector<RuleInfo> rules_;
};

/// Runs one rule once on a rebuilt e-graph (one search + apply for an engine rule, one
/// call for a pass), then rebuilds. Returns the number of effective applications.
std::size_t apply_once(const RuleInfo& rule, EGraph& g, const PassContext& ctx = {});

}  // namespace luminal::rules
