// The runner: limits and stop reasons, phases, schedulers and reports.
#include <catch2/catch.hpp>

#include "egraph/math_lang.hpp"
#include "luminal/egraph/runner.hpp"
#include "luminal/egraph/sexpr.hpp"

using namespace luminal::egraph;
using namespace mathlang;

namespace {
EGraph<Math> micro() {
  EGraph<Math> g;
  for (const auto& t : math_micro_terms()) add_term(g, t, Syntax{});
  return g;
}
}  // namespace

TEST_CASE("each limit stops the run and is reported", "[egraph][runner]") {
  auto rules = math_micro_rules();
  {
    auto g = micro();
    Report r = Runner<Math>(g).iter_limit(3).run(rules);
    CHECK(r.stop == StopReason::IterationLimit);
    CHECK(r.iterations.size() == 3);
  }
  {
    auto g = micro();
    Report r = Runner<Math>(g).iter_limit(50).node_limit(2000).run(rules);
    CHECK(r.stop == StopReason::NodeLimit);
    CHECK(r.iterations.size() < 10);
  }
  {
    auto g = micro();
    Report r = Runner<Math>(g).time_limit(0.0).run(rules);
    CHECK(r.stop == StopReason::TimeLimit);
  }
  {
    auto g = micro();
    Report r = Runner<Math>(g).memory_limit_mb(1.0).run(rules);
    CHECK(r.stop == StopReason::MemoryLimit);
  }
}

TEST_CASE("saturation, phases and printable reports", "[egraph][runner]") {
  EGraph<Math> g;
  add_right_nested_sum(g, 4);
  auto ac = ac_rules();
  std::vector<Rule<Math>> comm(ac.begin(), ac.begin() + 1), assoc(ac.begin() + 1, ac.end());
  Runner<Math> runner(g);
  Report r = runner.run_phases({{"comm", &comm, 10}, {"assoc", &assoc, 1}, {"both", &ac, 50}});
  CHECK(r.stop == StopReason::Saturated);
  REQUIRE(r.iterations.size() >= 3);
  CHECK(r.iterations.front().phase == "comm");
  CHECK(r.iterations.back().phase == "both");
  CHECK(g.num_classes() == 15);
  CHECK(g.num_nodes() == 81 - 32 + 1 + 4);
  std::string text = r.to_string();
  CHECK(text.find("stop=saturated") != std::string::npos);
  CHECK(text.find("rule assoc-add") != std::string::npos);
  CHECK(text.find("iter 1 comm:") != std::string::npos);
  double sum = 0;
  for (const auto& it : r.iterations) sum += it.total_s();
  CHECK(sum <= r.total_s + 1e-9);
}
