// The rule checker (docs/design.md, docs/rules.md): every registered rule -- algebra, movement,
// contraction, lowering, fusion -- is applied to random instances of its left side (random
// programs for pass rules) and every node of every class it touched is compared with the
// reference interpreter (rules/check_support.hpp). A rule with no checked instance fails,
// and rules planted here that are wrong, or wrongly not tagged fast-math, must be caught.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "compiler/rule_check_planted.hpp"
#include "rules/algebra_dsl.hpp"
#include "rules/check_support.hpp"
#include "rules/registry.hpp"

namespace {

using namespace luminal;
using namespace luminal::rules;
using namespace luminal::rules::dsl;

check::Options options() {
  check::Options o;
  o.instances = 40;
  o.max_attempts = 4000;
  o.ctx.library_gemm = true;  // so the CPU lowering's library GEMM candidates are checked too
  if (const char* s = std::getenv("LUMINAL_RULE_CHECK_SEED")) o.seed = std::strtoull(s, nullptr, 0);
  return o;
}

RuleInfo planted(const char* name, bool fast_math, std::shared_ptr<const TensorRule> r) {
  RuleInfo info;
  info.name = name;
  info.set = "planted";
  info.fast_math = fast_math;
  info.rule = std::move(r);
  return info;
}

// sum_k(x) = sum_k(x[:h]) + sum_k(x[h + skip:]): the same terms added in another order
// (skip = 0), or one term lost (skip = 1).
RuleInfo planted_sum_halves(const char* name, int64_t skip, bool reorders) {
  RuleInfo info = planted(
      name, false, make_rule(egraph::rule(name, sum_(a), [skip](ir::EGraph& g, const Match& m) {
        for (const ir::AttrNode& s : attr_nodes(g, m.root(), Op::SumReduce)) {
          if (g.find(s.kid) != g.find(m[a]) || !is_float(g.data(m[a]).dtype)) continue;
          const int ax = attr(g, s.payload).axis;
          const Dim& n = g.data(m[a]).shape.at(static_cast<size_t>(ax));
          if (!n.as_constant() || *n.as_constant() < 2) continue;
          const int64_t h = *n.as_constant() / 2;
          Id lo = ir::add_reduce(g, Op::SumReduce, ir::add_slice(g, m[a], ax, Dim(0), Dim(h), 1), ax);
          Id hi = ir::add_reduce(g, Op::SumReduce, ir::add_slice(g, m[a], ax, Dim(h + skip), n, 1), ax);
          g.merge(m.root(), ir::add_plain(g, Op::Add, {lo, hi}));
        }
      })));
  info.reorders_sum = reorders;
  return info;
}

}  // namespace

TEST_CASE("every registered rule holds on random instances", "[rules][checker]") {
  const Registry& reg = Registry::global();
  REQUIRE(!reg.all().empty());
  std::map<std::string, int> per_set;
  int failed = 0, unchecked = 0;
  // LUMINAL_RULE_CHECK_ONLY=<name>: check one rule (to debug it).
  const char* only = std::getenv("LUMINAL_RULE_CHECK_ONLY");
  for (const RuleInfo& r : reg.all()) {
    if (only && *only && r.name != only) continue;
    check::Result res = check::check_rule(r, reg, options());
    std::cout << check::to_string(res) << std::endl;
    ++per_set[r.set];
    if (res.failures > 0) {
      ++failed;
      std::cout << "  FAILED: " << res.first_failure << "\n";
    } else if (res.instances == 0) {
      ++unchecked;
      std::cout << "  NO CHECKED INSTANCE: the rule never applied to a well-typed random instance\n";
    }
    CHECK(res.failures == 0);
    CHECK(res.instances > 0);
  }
  for (const auto& [set, n] : per_set) std::cout << "set " << set << ": " << n << " rules\n";
  std::cout << reg.all().size() << " rules, " << failed << " failed, " << unchecked << " unchecked\n";
  if (!(only && *only))
    for (const char* set : {"algebra", "movement", "contraction"}) CHECK(per_set[set] > 0);
}

TEST_CASE("the checker catches every planted rule that is wrong at one edge only", "[rules][checker]") {
  const Registry& reg = Registry::global();
  const auto corpus = planted_rules::corpus();
  REQUIRE(corpus.size() >= 12);
  check::Options o = options();
  o.instances = 120;  // an edge (a subnormal x, an empty axis) is one draw in tens
  for (const planted_rules::Planted& p : corpus) {
    check::Result res = check::check_rule(p.rule, reg, o);
    std::cout << check::to_string(res) << "\n  wrong at: " << p.edge << "\n  caught: " << res.first_failure;
    INFO(p.rule.name << " (wrong at: " << p.edge << ")");
    CHECK(res.failures > 0);
  }
}

TEST_CASE("the checker catches a wrong rule", "[rules][checker]") {
  const Registry& reg = Registry::global();
  // x * 2 = x + x + x: wrong for every x != 0.
  RuleInfo wrong =
      planted("planted-mul-two", false,
              make_rule(egraph::rule("planted-mul-two", mul_(a, b), [](ir::EGraph& g, const Match& m) {
                if (!is_const(g, m[b], 2)) return;
                Id two = ir::add_plain(g, Op::Add, {m[a], m[a]});
                g.merge(m.root(), ir::add_plain(g, Op::Add, {two, m[a]}));
              })));
  check::Result res = check::check_rule(wrong, reg, options());
  std::cout << check::to_string(res) << "\n  caught: " << res.first_failure << "\n";
  CHECK(res.failures > 0);
  CHECK_FALSE(res.ok());
}

TEST_CASE("the checker catches a rule whose attributes are wrong", "[rules][checker]") {
  const Registry& reg = Registry::global();
  // permute_q(permute_p(x)) composed the wrong way round: q∘p instead of p∘q.
  RuleInfo wrong = planted(
      "planted-permute-compose", false,
      make_rule(
          egraph::rule("planted-permute-compose", permute_(permute_(a)), [](ir::EGraph& g, const Match& m) {
            for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Permute))
              for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Permute)) {
                if (g.find(inner.kid) != g.find(m[a])) continue;
                const std::vector<int> p = attr(g, inner.payload).perm, q = attr(g, outer.payload).perm;
                std::vector<int> r(p.size());
                for (size_t i = 0; i < p.size(); ++i) r[i] = q[static_cast<size_t>(p[i])];
                g.merge(m.root(), ir::add_permute(g, m[a], r));
              }
          })));
  check::Result res = check::check_rule(wrong, reg, options());
  std::cout << check::to_string(res) << "\n  caught: " << res.first_failure << "\n";
  CHECK(res.failures > 0);
}

TEST_CASE("the checker catches a NaN-changing rule not tagged fast-math", "[rules][checker]") {
  const Registry& reg = Registry::global();
  // x * 0 = 0 holds for finite x only: untagged, the special-value regime must flag it...
  auto x0 = [] {
    return make_rule(egraph::rule("planted-mul-zero", mul_(a, b), [](ir::EGraph& g, const Match& m) {
      if (is_const(g, m[b], 0) && g.data(m[a]).dtype == DType::f32) g.merge(m.root(), m[b]);
    }));
  };
  check::Result untagged = check::check_rule(planted("planted-mul-zero", false, x0()), reg, options());
  std::cout << check::to_string(untagged) << "\n  caught: " << untagged.first_failure << "\n";
  CHECK(untagged.failures > 0);
  // ...and tagged fast-math it is checked on finite values only, where it holds.
  check::Result tagged = check::check_rule(planted("planted-mul-zero", true, x0()), reg, options());
  std::cout << check::to_string(tagged) << "\n";
  CHECK(tagged.ok());
}

TEST_CASE("a rule that never applies has no checked instance and fails", "[rules][checker]") {
  const Registry& reg = Registry::global();
  RuleInfo never = planted("planted-never", false,
                           make_rule(egraph::rule("planted-never", add_(a, b), add_(b, a),
                                                  [](ir::EGraph&, const Match&) { return false; })));
  check::Options o = options();
  o.max_attempts = 200;
  check::Result res = check::check_rule(never, reg, o);
  CHECK(res.instances == 0);
  CHECK_FALSE(res.ok());
}

TEST_CASE("fast-math tags are needed: untagged, those rules fail on special values", "[rules][checker]") {
  // Every fast-math tag is demonstrated, none rests on an argument alone: float add-assoc
  // fails on the wide regime's cancelling terms, max-reduce-swap on the mixed regime's
  // ties of -0 and +0, recip-recip on subnormals, mul-assoc near overflow.
  const Registry& reg = Registry::global();
  for (const RuleInfo& r : reg.all()) {
    if (!r.fast_math) continue;
    RuleInfo untagged = r;
    untagged.fast_math = false;
    check::Options o = options();
    o.instances = 400;  // NaN/inf-changing inputs (inf times an exact zero sum...) are rare draws
    check::Result res = check::check_rule(untagged, reg, o);
    std::cout << "untagged " << check::to_string(res) << "\n";
    INFO(r.name);
    CHECK(res.failures > 0);
  }
}

TEST_CASE("reordered sums: the tag is needed, and it hides no wrong rule", "[rules][checker]") {
  const Registry& reg = Registry::global();
  check::Options o = options();
  o.instances = 200;  // cancelling terms (the wide regime's 2^25 - 2^25 + x) are rare draws
  // A sum split in halves adds the same terms in another order: untagged, the checker
  // flags the rounding of the cancelling terms; tagged ReordersSum it holds...
  check::Result untagged = check::check_rule(planted_sum_halves("planted-sum-halves", 0, false), reg, o);
  std::cout << "untagged " << check::to_string(untagged) << "\n  caught: " << untagged.first_failure;
  CHECK(untagged.failures > 0);
  check::Result tagged = check::check_rule(planted_sum_halves("planted-sum-halves", 0, true), reg, o);
  std::cout << check::to_string(tagged) << "\n" << tagged.first_failure;
  CHECK(tagged.ok());
  CHECK(tagged.per_regime[2] > 0);  // special values too, where the terms' magnitudes are finite
  // ...but the tolerance is a rounding of the terms, not a licence: a lost term is caught.
  check::Result lost =
      check::check_rule(planted_sum_halves("planted-sum-halves-lost-term", 1, true), reg, options());
  std::cout << check::to_string(lost) << "\n  caught: " << lost.first_failure;
  CHECK(lost.failures > 0);
  // Every registered ReordersSum tag is needed too: held to Exact, the rule fails. A
  // random matmul rarely cancels (one draw in several hundred to several thousand), so up
  // to 32 seeds of 400 instances are tried.
  o.instances = 400;
  for (const RuleInfo& r : reg.all()) {
    if (!r.reorders_sum) continue;
    RuleInfo exact = r;
    exact.reorders_sum = false;
    check::Result res;
    for (int s = 0; s < 32 && res.failures == 0; ++s, ++o.seed) res = check::check_rule(exact, reg, o);
    std::cout << "held to exact " << check::to_string(res) << "\n  caught: " << res.first_failure;
    INFO(r.name);
    CHECK(res.failures > 0);
  }
}
