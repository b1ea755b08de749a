// The rule checker's machinery (docs/design.md: "A rule is as good as its proof").
//
// For one registered rule it repeatedly
//   1. builds a small random e-graph that contains an instance of the rule's left side:
//      the left-side pattern is instantiated top-down on random shapes, dtypes and
//      attributes (every pattern variable becomes an input or a broadcast constant); a
//      pass rule (lowering, fusion) gets a random program instead; RuleInfo::example, when
//      given, is used for a share of the instances;
//   2. evaluates every node with the reference interpreter's kernels on random data;
//   3. applies the rule once (rules::apply_once) -- an instance counts only where the rule
//      changed the e-graph, i.e. where its condition held;
//   4. checks EVERY node of EVERY class of the result: evaluated on the reference values of
//      its child classes, it must equal its class's value within dtype tolerance, with the
//      same shape and dtype, and agree with the analysis' shape/dtype.
// Values are drawn from four regimes: mixed (signed, zeros, small integers), positive,
// special (mixed with inf, -inf and NaN) and wide (magnitudes 2^-24 .. 2^24: large terms
// beside small ones, exp2 past its range, yet products of four finite) -- the last two
// only for rules not tagged fast_math, so a rule that changes NaN/inf results, or holds
// only at small magnitudes, but is not tagged is caught. A fast_math rule is compared
// only where the reference value is finite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rules/registry.hpp"

namespace luminal::rules::check {

struct Options {
  int instances = 24;       ///< checked instances wanted per rule
  int max_attempts = 4000;  ///< random instances tried per rule before giving up
  uint64_t seed = 0x5eed;
  PassContext ctx;  ///< handed to apply_once
};

struct Result {
  std::string name;
  std::string set;
  bool fast_math = false;
  int instances = 0;              ///< instances where the rule applied and every node was checked
  int attempts = 0;               ///< random instances built (well-typed ones)
  int rejected = 0;               ///< instances that did not type-check (regenerated)
  int not_applied = 0;            ///< well-typed instances where the rule did not fire
  int nodes_checked = 0;          ///< node evaluations compared against their class
  int per_regime[4] = {0, 0, 0, 0};  ///< checked instances per value regime (mixed, positive, special, wide)
  int symbolic = 0;               ///< checked instances with a symbolic dim (bound when evaluated)
  int failures = 0;               ///< instances with a wrong node
  std::string first_failure;      ///< what went wrong first (the instance, the node, the values)
  bool ok() const { return failures == 0 && instances > 0; }
};

/// Checks one rule. `registry` supplies prerequisite rules (a fusion rule is checked on
/// e-graphs that the lowering rules have already given kernel nodes).
Result check_rule(const RuleInfo& rule, const Registry& registry, const Options& opt = {});

/// One line: "name set [fast-math] instances=.. (mixed/positive/special) nodes=.. ...".
std::string to_string(const Result& r);

}  // namespace luminal::rules::check
