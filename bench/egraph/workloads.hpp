// The three standard e-graph workloads, shared by the CLI and the Google Benchmark cases.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "egraph/math_lang.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/egraph/runner.hpp"
#include "luminal/egraph/sexpr.hpp"

namespace egbench {

using namespace luminal::egraph;
using mathlang::Math;
using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// W1: the 7 terms and 24 rules for k iterations. Returns the runner's report; `roots`
/// receives the term classes.
/// `semi_naive` = false applies every match every iteration, as egg does.
inline Report run_math_micro(EGraph<Math>& g, std::size_t k, std::vector<Id>& roots,
                             std::function<void(const IterationStats&)> hook = {}, bool semi_naive = true) {
  for (const auto& t : mathlang::math_micro_terms()) roots.push_back(add_term(g, t, mathlang::Syntax{}));
  static const auto rules = mathlang::math_micro_rules();
  Runner<Math> r(g);
  r.iter_limit(k).semi_naive(semi_naive);
  if (hook) r.on_iteration(std::move(hook));
  return r.run(rules);
}

/// Greedy AST-size extraction summed over the roots.
inline double extract_ast_size(EGraph<Math>& g, const std::vector<Id>& roots) {
  GreedyExtractor ex(g, AstSize{});
  double total = 0;
  for (Id r : roots) total += ex.cost(r);
  return total;
}

/// E-matching alone: every rule's left side on the current e-graph; total matches.
inline std::size_t count_matches(EGraph<Math>& g) {
  static const auto rules = mathlang::math_micro_rules();
  const auto& ix = g.index();
  std::size_t n = 0;
  for (const auto& r : rules) n += r.count(g, ix);
  return n;
}

/// W3: comm+assoc of + on a right-nested sum of n leaves, to saturation.
inline Report run_ac_blowup(EGraph<Math>& g, int n, std::function<void(const IterationStats&)> hook = {},
                            bool semi_naive = true) {
  mathlang::add_right_nested_sum(g, n);
  static const auto rules = mathlang::ac_rules();
  Runner<Math> r(g);
  r.iter_limit(1000).semi_naive(semi_naive);
  if (hook) r.on_iteration(std::move(hook));
  return r.run(rules);
}

/// W4 set-up: n chains of 20 alternating f/g over distinct symbols, rebuilt; returns leaves.
inline std::vector<Id> build_cascade(EGraph<Math>& g, std::size_t n) {
  g.reserve(21 * n, 20 * n);
  std::vector<Id> leaves;
  leaves.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    Id x = g.add(mathlang::Op::Sym, static_cast<std::int64_t>(i), {});
    leaves.push_back(x);
    for (int k = 0; k < 20; ++k) x = g.add(k % 2 == 0 ? mathlang::Op::F : mathlang::Op::G, 0, {x});
  }
  g.rebuild();
  return leaves;
}

/// W4 step: unite x_2k with x_2k+1 (not timed by the workload's definition).
inline void unite_pairs(EGraph<Math>& g, const std::vector<Id>& leaves) {
  for (std::size_t k = 0; k + 1 < leaves.size(); k += 2) g.merge(leaves[k], leaves[k + 1]);
}

}  // namespace egbench
