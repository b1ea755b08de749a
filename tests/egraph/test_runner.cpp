// The runner: limits and stop reasons, phases, schedulers and reports.
#include <catch2/catch.hpp>

#include "egraph/math_lang.hpp"
#include "luminal/egraph/runner.hpp"
#include "egraph/check.hpp"
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

// Budgets hold inside one match's application, however much work a custom applier does:
// the e-graph checks them on every node it creates and every few thousand merges.
TEST_CASE("limits hold inside a single applier call", "[egraph][runner][limits]") {
  auto runaway = [](EGraph<Math>& g, const luminal::egraph::Match& m) {
    // A pathological applier: creates distinct nodes and merges them into the match's
    // class without end (a rule author's n^2 loop over a huge class looks the same).
    for (std::int64_t v = 1'000'000;; ++v) g.merge(m.root(), g.add(Op::Num, v, {}));
  };
  std::vector<Rule<Math>> rules = {luminal::egraph::rule("runaway", sym("x") + luminal::egraph::Var<0>{}, runaway)};
  {
    EGraph<Math> g;
    add_term(g, "(+ x y)", Syntax{});
    g.rebuild();
    Report r = Runner<Math>(g).node_limit(5000).run(rules);
    CHECK(r.stop == StopReason::NodeLimit);
    CHECK(g.num_nodes() <= 5000);  // exactly: the node over the limit is refused
    CHECK(egtest::check_invariants(g) == "");
  }
  {
    EGraph<Math> g;
    add_term(g, "(+ x y)", Syntax{});
    g.rebuild();
    Report r = Runner<Math>(g).time_limit(0.02).run(rules);
    CHECK(r.stop == StopReason::TimeLimit);
    CHECK(r.iterations.size() == 1);  // stopped inside the first iteration's apply
    CHECK(egtest::check_invariants(g) == "");
  }
  {
    EGraph<Math> g;
    add_term(g, "(+ x y)", Syntax{});
    g.rebuild();
    const double mb = luminal::egraph::current_rss_mb();
    if (mb > 0) {
      Report r = Runner<Math>(g).memory_limit_mb(mb + 16).run(rules);
      CHECK(r.stop == StopReason::MemoryLimit);
      CHECK(egtest::check_invariants(g) == "");
    }
  }
}

TEST_CASE("limits are disarmed after a run and never limit rebuild", "[egraph][runner][limits]") {
  EGraph<Math> g;
  add_right_nested_sum(g, 8);
  g.rebuild();
  auto rules = ac_rules();
  Report r = Runner<Math>(g).node_limit(300).run(rules);
  CHECK(r.stop == StopReason::NodeLimit);
  CHECK(g.num_nodes() <= 300);
  CHECK(g.armed_limits() == nullptr);
  // Unlimited again: the graph may grow past the old limit.
  Report r2 = Runner<Math>(g).iter_limit(100).run(rules);
  CHECK(r2.stop == StopReason::Saturated);
  CHECK(g.num_classes() == 255u);
}
