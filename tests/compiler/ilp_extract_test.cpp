// The heuristic DAG extractor against the exact optimum (an ILP solved by COIN-OR CBC,
// GLPK where cbc is absent) on the e-graphs of real programs: the decoder block at test
// size and an MLP (in CI), the decoder block at Llama-3-8B size over 1, 16 and 128
// tokens (by hand). Prints the gap; asserts the ILP's solution is a valid acyclic program
// costing its objective, that the heuristic is never below a proven optimum, and that
// it is within 1% of it.
#include <catch2/catch.hpp>

#include <cstdio>

#include "ilp_extract.hpp"
#include "translation_models.hpp"

using namespace luminal;

namespace {

struct Gap {
  double heuristic = 0, exact = 0;
  bool optimal = false;
};

Gap measure(const Graph& graph, const char* label, double time_limit_s) {
  const auto& gi = *graph.impl();
  auto settings = compiler::make_search_settings(Target::reference(), {}, std::chrono::steady_clock::now());
  auto sat = compiler::saturate_graph(gi, settings);
  compiler::KernelCost cost(sat->g, gi, settings.ctx.target);
  egraph::DagExtractor<ir::TensorLang, ir::TensorAnalysis, compiler::KernelCost> ex(sat->g, cost,
                                                                                     compiler::extraction_options());
  auto h = ex.extract(sat->roots);
  auto ilp = test::ilp_extract(sat->g, cost, sat->roots, time_limit_s, h.choice);
  INFO(label << ": ILP " << ilp.columns << " columns, " << ilp.rows << " rows");
  REQUIRE(ilp.solved);
  // The ILP's choice is a program: acyclic, every root computed, costing at most its
  // objective (which also pays for active classes nothing reads, 0 at the optimum).
  const double check = ex.dag_cost(ilp.choice, sat->roots);
  CHECK(check <= ilp.cost * (1 + 1e-9));
  if (ilp.optimal) CHECK(check == Approx(ilp.cost).epsilon(1e-9));
  std::printf("%-28s heuristic %.6g s, exact %.6g s%s (%s, %d cols, %d rows, %.2f s): gap %.3f%%\n", label,
              h.cost, ilp.cost, ilp.optimal ? "" : " (time limit: best found)", ilp.solver, ilp.columns, ilp.rows,
              ilp.seconds, 100.0 * (h.cost - ilp.cost) / ilp.cost);
  if (ilp.optimal) CHECK(h.cost >= ilp.cost * (1 - 1e-9));
  return {h.cost, ilp.cost, ilp.optimal};
}

}  // namespace

TEST_CASE("DAG extraction: the heuristic against the ILP optimum", "[compiler][extract][ilp]") {
  // CBC proves these optimal in seconds.
  {
    Graph g;
    test::build_model(g, test::BlockConfig{}, 1);
    Gap gap = measure(g, "decoder block (test size)", 60);
    if (gap.optimal) CHECK(gap.heuristic <= gap.exact * 1.01);
  }
  {
    Graph g;
    test::build_mlp(g, 128, 4096, 14336);
    Gap gap = measure(g, "MLP 128x4096x14336", 60);
    if (gap.optimal) CHECK(gap.heuristic <= gap.exact * 1.01);
  }
}

// Minutes each (CBC does not close the gap within 2 min on a 2-core machine; the best
// solution found bounds the heuristic from below): run by hand,
//   build/tests/compiler/compiler_ilp_tests "[ilp-large]"
TEST_CASE("DAG extraction at Llama-3-8B sizes: the heuristic against the ILP", "[.][ilp-large]") {
  for (int64_t s : {1, 16, 128}) {
    Graph g;
    test::BlockConfig c = test::BlockConfig::llama_4096();
    c.seq = s;
    test::build_model(g, c, 1);
    Gap gap = measure(g, ("decoder block 4096, S " + std::to_string(s)).c_str(), 120);
    CHECK(gap.heuristic <= gap.exact * 1.01);
  }
}
