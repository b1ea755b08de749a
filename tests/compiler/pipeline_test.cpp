// The pipeline's report, budgets and outputs.
#include <catch2/catch.hpp>

#include "translation_models.hpp"

using namespace luminal;

TEST_CASE("the report is filled", "[compiler][pipeline]") {
  Graph g;
  test::build_mlp(g, 2, 8, 8);
  auto v = test::validate(g);
  const CompileReport& r = v.program.report;
  CHECK(r.target == "reference");
  CHECK(r.primitive_ops > r.kernels);
  CHECK(r.kernels >= 1);
  CHECK(r.egraph_nodes > 0);
  CHECK(r.egraph_classes > 0);
  CHECK(r.iterations > 0);
  CHECK(!r.stop_reason.empty());
  CHECK(r.compile_seconds > 0);
  CHECK(r.estimated_seconds > 0);
  CHECK(v.program.dot.find("digraph") != std::string::npos);
  CHECK(v.program.phases.size() >= 3);
}

TEST_CASE("a tiny node limit still gives a correct program and says so", "[compiler][pipeline]") {
  Graph g;
  test::BlockConfig c;
  test::build_model(g, c, 1);
  CompileOptions o;
  o.node_limit = 10;
  auto v = test::validate(g, o);
  INFO(v.program.report.to_string());
  CHECK(v.error <= 1.0);
  CHECK(v.program.report.stop_reason.find("node-limit") != std::string::npos);
}

TEST_CASE("a zero time budget still gives a correct program and says so", "[compiler][pipeline]") {
  Graph g;
  test::build_mlp(g, 3, 8, 12);
  CompileOptions o;
  o.time_budget_seconds = 0;
  auto v = test::validate(g, o);
  INFO(v.program.report.to_string());
  CHECK(v.error <= 1.0);
  CHECK(v.program.report.stop_reason.find("time-limit") != std::string::npos);
}

TEST_CASE("outputs that are inputs or shared values are returned correctly", "[compiler][pipeline]") {
  Graph g;
  Tensor x = g.input("x", {3, 4});
  Tensor y = exp(x);
  g.output("x_again", x);
  g.output("y", y);
  g.output("y_t", transpose(y, 0, 1));
  auto v = test::validate(g);
  CHECK(v.error <= 1.0);
}
