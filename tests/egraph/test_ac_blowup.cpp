// Workload W3 "ac-blowup": commutativity and associativity of + to saturation on
// (+ 1 (+ 2 (+ ... n))); closed forms classes = 2^n - 1, nodes = 3^n - 2^(n+1) + 1 + n.
#include <catch2/catch.hpp>

#include "check.hpp"
#include "egraph/math_lang.hpp"
#include "luminal/egraph/runner.hpp"

using namespace luminal::egraph;
using namespace mathlang;

TEST_CASE("ac-blowup: closed forms for n = 3..8", "[egraph][workload]") {
  auto rules = ac_rules();
  for (int n = 3; n <= 8; ++n) {
    INFO("n = " << n);
    EGraph<Math> g;
    add_right_nested_sum(g, n);
    g.rebuild();
    Report rep = Runner<Math>(g).iter_limit(100).run(rules);
    CHECK(rep.stop == StopReason::Saturated);
    std::size_t p2 = std::size_t{1} << n, p3 = 1;
    for (int i = 0; i < n; ++i) p3 *= 3;
    CHECK(g.num_classes() == p2 - 1);
    CHECK(g.num_nodes() == p3 - 2 * p2 + 1 + static_cast<std::size_t>(n));
    CHECK(egtest::check_invariants(g) == "");
  }
}

TEST_CASE("ac-blowup: the backoff scheduler reaches the same saturated e-graph", "[egraph][scheduler]") {
  auto rules = ac_rules();
  const int n = 6;
  EGraph<Math> g;
  add_right_nested_sum(g, n);
  Report rep =
      Runner<Math>(g).iter_limit(1000).scheduler(std::make_shared<BackoffScheduler>(8, 1)).run(rules);
  CHECK(rep.stop == StopReason::Saturated);
  CHECK(g.num_classes() == (1u << n) - 1);
  CHECK(g.num_nodes() == 729u - 128u + 1u + 6u);
  std::size_t bans = 0;
  for (const auto& r : rep.rules) bans += r.times_banned;
  CHECK(bans > 0);  // a limit of 8 matches must throttle these rules
}

TEST_CASE("ac-blowup: the node limit holds inside an iteration", "[egraph][runner]") {
  // n = 10 saturates at 3^10 - 2^11 + 11 = 57012 nodes, and one iteration's matches
  // multiply the graph: applying must stop once the limit is passed, not at the end of
  // the iteration (a compile with node_limit 20000 once ended at 185k nodes).
  auto rules = ac_rules();
  EGraph<Math> g;
  add_right_nested_sum(g, 10);
  g.rebuild();
  Report rep = Runner<Math>(g).iter_limit(100).node_limit(2000).run(rules);
  CHECK(rep.stop == StopReason::NodeLimit);
  CHECK(g.num_nodes() <= 2000);  // exactly: a node over the limit is refused
  CHECK(egtest::check_invariants(g) == "");
}
