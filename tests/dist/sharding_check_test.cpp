// The rule checker on the sharding rules (docs/distributed.md): every rule of the set
// holds on every rank of the SPMD semantics (rule_check_test checks them with all the
// others; here each one's instances are also required to cover 2-4 ranks), and a rule
// that gets the rank's block wrong -- shapes right, values wrong on all but rank 0 -- is
// caught.
#include <catch2/catch.hpp>
#include <iostream>

#include "graph/primitives.hpp"
#include "rules/algebra_dsl.hpp"
#include "rules/check_support.hpp"
#include "rules/registry.hpp"

using namespace luminal;
using namespace luminal::rules;
using namespace luminal::rules::dsl;

TEST_CASE("every sharding rule passes the checker", "[dist][rules]") {
  const Registry& reg = Registry::global();
  const auto rules = reg.set("sharding");
  REQUIRE(rules.size() >= 20);
  for (const RuleInfo* r : rules) {
    check::Result res = check::check_rule(*r, reg, {});
    std::cout << check::to_string(res) << "\n";
    INFO(res.first_failure);
    CHECK(res.ok());
  }
}

TEST_CASE("the checker catches a column split that gives every rank block 0", "[dist][rules]") {
  RuleInfo wrong;
  wrong.name = "planted-shard-block-0";
  wrong.set = "sharding";  // checked over 2-4 ranks
  wrong.rule = make_rule(egraph::rule("planted-shard-block-0", matmul_(a, b), [](ir::EGraph& g, const Match& m) {
    const int64_t P = g.analysis().world();
    const auto& s = g.data(m[b]).shape;
    if (P < 2 || s.size() != 2 || s[1].known_divisor() % P != 0) return;
    const Dim n = s[1] / Dim(P);
    const Id w = ir::add_slice(g, m[b], 1, Dim(0), n, 1);  // should start at %rank * n
    g.merge(m.root(), ir::add_collective(g, Op::AllGather, ir::add_plain(g, Op::MatMul, {m[a], w}), 1, P));
  }));
  check::Result res = check::check_rule(wrong, Registry::global(), {});
  std::cout << check::to_string(res) << "\n  caught: " << res.first_failure << "\n";
  CHECK(res.failures > 0);
}
