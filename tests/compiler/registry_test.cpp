// The rule registry: the sets registry.cpp lists, the docs printed from pattern rules, and
// CompileOptions::skip_rules.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "rules/registry.hpp"
#include "translation_models.hpp"

using namespace luminal;
using rules::Registry;

namespace {

std::string doc_of(const char* name) {
  const rules::RuleInfo* r = Registry::global().find(name);
  REQUIRE(r != nullptr);
  return r->doc;
}

bool has_phase(const compiler::CompiledProgram& p, const std::string& text) {
  for (const std::string& line : p.phases)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("every rule set is listed, every rule has a set, a doc and one kind", "[compiler][rules]") {
  const Registry& reg = Registry::global();
  std::set<std::string> sets;
  for (const rules::RuleInfo& r : reg.all()) {
    INFO(r.name);
    sets.insert(r.set);
    CHECK(!r.doc.empty());
    CHECK(static_cast<bool>(r.rule) != static_cast<bool>(r.pass));
    if (r.rule) CHECK(r.rule->name() == r.name);
  }
  CHECK(sets == std::set<std::string>{"algebra", "movement", "contraction", "lower_reference", "lower_cpu",
                                      "fusion", "schedule_gpu", "sharding"});
  // Rules keep the order their file writes them in (folds first in algebra).
  const auto algebra = reg.set("algebra");
  REQUIRE(!algebra.empty());
  CHECK(algebra.front()->name == "fold-exp2");
}

TEST_CASE("a pattern rule's doc is printed from its two sides", "[compiler][rules]") {
  CHECK(doc_of("add-assoc") == "(x + y) + z = x + (y + z) (f32: cancellation makes the error unbounded)");
  CHECK(doc_of("neg-neg") == "-(-x) = x");
  CHECK(doc_of("mul-neg") == "(-x) * y = -(x * y)");
  CHECK(doc_of("equal-comm") == "(x == y) = (y == x)");
  CHECK(doc_of("max-assoc") == "max(max(x, y), z) = max(x, max(y, z))");
  CHECK(doc_of("where-same") == "where(x, y, y) = y");
  // A rule with an applier keeps the doc written beside it.
  CHECK(doc_of("add-zero") == "x + (-0) = x (f32), x + 0 = x (i32); x + (+0) is not x at x = -0");
}

TEST_CASE("fast-math tags come from the rows", "[compiler][rules]") {
  const Registry& reg = Registry::global();
  CHECK(reg.find("add-assoc")->fast_math);
  CHECK_FALSE(reg.find("add-assoc-exact")->fast_math);
  for (const rules::RuleInfo* r : reg.set("algebra", /*fast_math=*/false)) CHECK_FALSE(r->fast_math);
}

TEST_CASE("skip_rules leaves rules and sets out of the search", "[compiler][rules]") {
  Graph g;
  test::build_mlp(g, 2, 8, 8);
  CompileOptions o;
  o.skip_rules = {"algebra", "movement", "contraction"};
  auto v = test::validate(g, o);
  CHECK(v.error <= 1.0);
  CHECK(has_phase(v.program, "math: no rules registered"));

  const std::size_t all = Registry::global().engine_rules({"algebra"}, true).size();
  CHECK(Registry::global().engine_rules({"algebra"}, true, {"add-comm", "mul-comm"}).size() == all - 2);
  o.skip_rules = {"add-comm", "fusion"};
  v = test::validate(g, o);
  CHECK(v.error <= 1.0);
}

TEST_CASE("skip_rules rejects unknown names and the required lowering", "[compiler][rules]") {
  Graph g;
  test::build_mlp(g, 2, 8, 8);
  CompileOptions o;
  o.skip_rules = {"mul-comutative"};
  CHECK_THROWS_AS(test::validate(g, o), CompileError);
  CHECK_THROWS_WITH(test::validate(g, o), Catch::Contains("no rule or rule set is named 'mul-comutative'"));
  o.skip_rules = {"lower_reference"};
  CHECK_THROWS_WITH(test::validate(g, o), Catch::Contains("required lowering"));
  o.skip_rules = {"lower-math-node"};
  CHECK_THROWS_AS(test::validate(g, o), CompileError);
}
