// Workload W4 "congruence-cascade": n chains x_i, f(x_i), g(f(x_i)), ... (20 unary ops);
// uniting x_2k with x_2k+1 must merge the two chains above: exactly 10 * n merges.
#include <catch2/catch.hpp>

#include "check.hpp"
#include "egraph/math_lang.hpp"

using namespace luminal::egraph;
using namespace mathlang;

TEST_CASE("congruence-cascade: exactly 10 * n merges in one rebuild", "[egraph][workload]") {
  for (std::size_t n : {2u, 10u, 1000u}) {
    INFO("n = " << n);
    EGraph<Math> g;
    std::vector<Id> leaves;
    for (std::size_t i = 0; i < n; ++i) {
      Id x = g.add(Op::Sym, static_cast<std::int64_t>(i), {});
      leaves.push_back(x);
      for (int k = 0; k < 20; ++k) x = g.add(k % 2 == 0 ? Op::F : Op::G, 0, {x});
    }
    g.rebuild();
    CHECK(g.num_nodes() == 21 * n);
    CHECK(g.num_classes() == 21 * n);
    for (std::size_t k = 0; k + 1 < n; k += 2) g.merge(leaves[k], leaves[k + 1]);
    std::size_t merges = g.rebuild();
    CHECK(merges == 10 * n);
    CHECK(g.num_nodes() == 11 * n);
    CHECK(g.num_classes() == 21 * n / 2);
    CHECK(egtest::check_invariants(g) == "");
  }
}
