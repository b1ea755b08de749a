// The rule checker (docs/design.md: "A rule is as good as its proof"), in three
// parts: this driver, the case generator (check_cases.hpp: random instances that reach the
// edges -- rank 0-5, empty dims, -0, subnormals, values near overflow, NaN payloads, i32
// over its whole range) and the evaluator (check_eval.hpp: one node on its children's
// values with the reference interpreter's kernels; the comparison).
//
// For one registered rule the driver repeatedly
//   1. builds a small random e-graph that contains an instance of the rule's left side
//      (or, for a pass rule, a random program or the rule's example);
//   2. evaluates every node with the reference interpreter's kernels on random data;
//   3. applies the rule once (rules::apply_once) -- an instance counts only where the rule
//      changed the e-graph, i.e. where its condition held;
//   4. checks EVERY node of EVERY class of the result: evaluated on the reference values of
//      its child classes, it must equal its class's value (check_eval.hpp's Agreement:
//      exactly -- signed zeros, inf, NaN -- up to rounding for rules not tagged
//      fast-math; up to the rounding of a reordered sum in the classes of a sum for rules
//      tagged ReordersSum), with the same shape and dtype, agree with the analysis' shape/dtype,
//      and no merge may join classes whose shape, dtype or constant differ.
// Values come from five regimes (mixed, positive, special, wide, extreme); a fast-math
// rule is checked on the first two only, where both sides are finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rules/registry.hpp"

namespace luminal::rules::check {

struct Options {
  int instances = 40;       ///< checked instances wanted per rule
  int max_attempts = 4000;  ///< random instances tried per rule before giving up
  uint64_t seed = 0x5eed;
  PassContext ctx;  ///< handed to apply_once
};

struct Result {
  std::string name;
  std::string set;
  bool fast_math = false;
  bool reorders_sum = false;      ///< tagged ReordersSum
  int instances = 0;              ///< instances where the rule applied and every node was checked
  int attempts = 0;               ///< random instances built (well-typed ones)
  int rejected = 0;               ///< instances that did not type-check (regenerated)
  int not_applied = 0;            ///< well-typed instances where the rule did not fire
  int nodes_checked = 0;          ///< node evaluations compared against their class
  int per_regime[5] = {0, 0, 0, 0, 0};  ///< checked instances per value regime (mixed, positive, special,
                                        ///< wide, extreme)
  int symbolic = 0;               ///< checked instances with a symbolic dim (bound when evaluated)
  int empty = 0;                  ///< checked instances with an empty tensor (a dim of size 0)
  int high_rank = 0;              ///< checked instances with a tensor of rank >= 4
  int failures = 0;               ///< instances with a wrong node
  std::string first_failure;      ///< what went wrong first (the instance, the node, the values)
  bool ok() const { return failures == 0 && instances > 0; }
};

/// Checks one rule. `registry` supplies prerequisite rules (a fusion rule is checked on
/// e-graphs that the lowering rules have already given kernel nodes).
Result check_rule(const RuleInfo& rule, const Registry& registry, const Options& opt = {});

/// One line: "name set [fast-math] instances=.. (per regime; symbolic, empty, rank>=4) nodes=.. ...".
std::string to_string(const Result& r);

}  // namespace luminal::rules::check
