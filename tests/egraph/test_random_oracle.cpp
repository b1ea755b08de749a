// Randomized congruence closure: random terms and unions, then rebuild; the e-graph's
// partition must equal a naive congruence-closure oracle's, and every invariant must hold
// (canonical hashcons, no duplicate canonical nodes, analysis data joined).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "egraph/congruence_oracle.hpp"

using namespace luminal::egraph;
using namespace mathlang;

TEST_CASE("random terms and unions agree with a naive congruence closure", "[egraph][random]") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 60; ++round) {
    INFO("round " << round);
    EGraph<Math, egtest::MinSym> g;
    egtest::CongruenceOracle<EGraph<Math, egtest::MinSym>> o;
    auto add_random = [&] {
      const int pick = static_cast<int>(rng() % 10);
      if (o.size() == 0 || pick < 3)
        o.add(g, Op::Sym, static_cast<std::int64_t>(rng() % 4), {});
      else if (pick < 6)
        o.add(g, pick < 5 ? Op::F : Op::G, 0, {rng() % o.size()});
      else
        o.add(g, pick < 8 ? Op::Add : Op::Mul, 0, {rng() % o.size(), rng() % o.size()});
    };
    const int nterms = 20 + static_cast<int>(rng() % 100);
    for (int i = 0; i < nterms; ++i) add_random();
    const int nunions = 1 + static_cast<int>(rng() % 12);
    for (int u = 0; u < nunions; ++u) {
      o.unite(g, rng() % o.size(), rng() % o.size());
      // Sometimes add terms between unions and a rebuild (stale hashcons keys).
      if (rng() % 3 == 0) add_random();
      if (rng() % 4 == 0) g.rebuild();
    }
    REQUIRE(o.check(g) == "");
  }
}
