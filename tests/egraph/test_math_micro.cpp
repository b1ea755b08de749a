// Workload W1 "math-micro" (../shared/workloads/egraph/math-micro.txt): exact node and
// class counts after each iteration, the extraction cost and the match count after 10.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "check.hpp"
#include "egraph/math_lang.hpp"
#include "luminal/egraph/extract.hpp"
#include "luminal/egraph/runner.hpp"
#include "luminal/egraph/sexpr.hpp"

using namespace luminal::egraph;
using namespace mathlang;

namespace {
std::vector<Id> add_terms(EGraph<Math>& g) {
  std::vector<Id> roots;
  for (const auto& t : math_micro_terms()) roots.push_back(add_term(g, t, Syntax{}));
  g.rebuild();
  return roots;
}
}  // namespace

TEST_CASE("math-micro: exact counts after iterations 1-9", "[egraph][workload]") {
  EGraph<Math> g;
  add_terms(g);
  auto rules = math_micro_rules();
  Report rep = Runner<Math>(g).iter_limit(9).run(rules);
  REQUIRE(rep.stop == StopReason::IterationLimit);
  REQUIRE(rep.iterations.size() == 9);
  for (std::size_t k = 0; k < 9; ++k) {
    INFO("iteration " << k + 1);
    CHECK(rep.iterations[k].nodes == kMathMicroExpect[k].first);
    CHECK(rep.iterations[k].classes == kMathMicroExpect[k].second);
  }
  CHECK(egtest::check_invariants(g) == "");
}

TEST_CASE("math-micro: after 10 iterations, extraction cost 62 and 915328 matches", "[egraph][workload]") {
  EGraph<Math> g;
  std::vector<Id> roots = add_terms(g);
  auto rules = math_micro_rules();
  Report rep = Runner<Math>(g).iter_limit(10).run(rules);
  REQUIRE(rep.iterations.size() == 10);
  CHECK(g.num_nodes() == kMathMicroExpect[9].first);
  CHECK(g.num_classes() == kMathMicroExpect[9].second);

  GreedyExtractor ex(g, AstSize{});
  double total = 0;
  for (Id r : roots) total += ex.cost(r);
  CHECK(total == 62);
  Term<Math> t = ex.extract(std::span<const Id>(roots));
  double tree_total = 0;
  for (std::uint32_t r : t.roots) tree_total += t.tree_size(r);
  CHECK(tree_total == 62);

  std::size_t matches = 0;
  const auto& ix = g.index();
  for (const auto& r : rules) matches += r.count(g, ix);
  CHECK(matches == 915328);
}

TEST_CASE("math-micro: rules parsed from the workload file give the same counts",
          "[egraph][workload][sexpr]") {
  std::ifstream in(std::string(LUMINAL_WORKLOADS_DIR) + "/egraph/math-micro.txt");
  if (!in) {
    WARN("workload file not found; skipped");
    return;
  }
  std::vector<Rule<Math>> rules;
  EGraph<Math> g;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kw;
    ls >> kw;
    if (kw == "rule") {
      std::string name, rest;
      ls >> name;
      std::getline(ls, rest);
      auto arrow = rest.find("=>");
      REQUIRE(arrow != std::string::npos);
      rules.push_back(
          parse_rule<Math, NoAnalysis>(name, rest.substr(0, arrow), rest.substr(arrow + 2), Syntax{}));
    } else if (kw == "term") {
      std::string rest;
      std::getline(ls, rest);
      add_term(g, rest, Syntax{});
    }
  }
  REQUIRE(rules.size() == 24);
  g.rebuild();
  Report rep = Runner<Math>(g).iter_limit(8).run(rules);
  for (std::size_t k = 0; k < 8; ++k) {
    INFO("iteration " << k + 1);
    CHECK(rep.iterations[k].nodes == kMathMicroExpect[k].first);
    CHECK(rep.iterations[k].classes == kMathMicroExpect[k].second);
  }
}
