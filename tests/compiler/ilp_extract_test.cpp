// The heuristic DAG extractor against the exact optimum (an ILP solved by COIN-OR CBC,
// GLPK where cbc is absent) on the e-graphs of real programs: the decoder block at test
// size and an MLP (in CI), the decoder block at Llama-3-8B size over 1, 16 and 128
// tokens (by hand). Prints the gap; asserts the ILP's solution is a valid acyclic program
// costing its objective, that the heuristic is never below a proven optimum, and that
// it is within 1% of it.
#include <catch2/catch.hpp>

#include <memory>

#include <cstdio>

#include "ilp_extract.hpp"
#include "translation_models.hpp"

using namespace luminal;

namespace {

struct Gap {
  double heuristic = 0, exact = 0;
  bool optimal = false;
};

// `guided`: as the search does, the guided passes on the heuristic's program and a second
// extraction before the ILP (which then sees the grown e-graph).
Gap measure(const Graph& graph, const char* label, double time_limit_s,
            const Target& target = Target::reference(), bool guided = false) {
  const auto& gi = *graph.impl();
  CompileOptions o;
  o.compile_only = true;
  auto settings = compiler::make_search_settings(target, o, std::chrono::steady_clock::now());
  auto sat = compiler::saturate_graph(gi, settings);
  compiler::KernelCost cost(sat->g, gi, settings.ctx.target);
  using Extractor = egraph::DagExtractor<ir::TensorLang, ir::TensorAnalysis, compiler::KernelCost>;
  auto ex = std::make_unique<Extractor>(sat->g, cost, compiler::extraction_options());
  auto h = ex->extract(sat->roots);
  if (guided && compiler::guided_round(sat->g, settings, sat->roots, h.choice) > 0) {
    ex = std::make_unique<Extractor>(sat->g, cost, compiler::extraction_options());
    h = ex->extract(sat->roots);
  }
  auto ilp = test::ilp_extract(sat->g, cost, sat->roots, time_limit_s, h.choice);
  INFO(label << ": ILP " << ilp.columns << " columns, " << ilp.rows << " rows");
  REQUIRE(ilp.solved);
  // The ILP's choice is a program: acyclic, every root computed, costing at most its
  // objective (which also pays for active classes nothing reads, 0 at the optimum).
  std::vector<egraph::Id> roots;
  for (egraph::Id r : sat->roots) roots.push_back(sat->g.find(r));
  const double check = ex->dag_cost(ilp.choice, roots);
  CHECK(check <= ilp.cost * (1 + 1e-9));
  if (ilp.optimal) CHECK(check == Approx(ilp.cost).epsilon(1e-9));
  std::printf("%-28s heuristic %.6g s, exact %.6g s%s (%s, %d cols, %d rows, %.2f s): gap %.3f%%\n", label,
              h.cost, ilp.cost, ilp.optimal ? "" : " (time limit: best found)", ilp.solver, ilp.columns, ilp.rows,
              ilp.seconds, 100.0 * (h.cost - ilp.cost) / ilp.cost);
  if (ilp.optimal) CHECK(h.cost >= ilp.cost * (1 - 1e-9));
  if (const char* dbg = std::getenv("LUMINAL_DEBUG_ILP"); dbg && *dbg)
    for (const auto* which : {&h.choice, &ilp.choice}) {
      std::printf("%s:\n", which == &h.choice ? "heuristic" : "ILP");
      std::vector<uint8_t> seen(which->size(), 0);
      std::vector<egraph::Id> st(sat->roots.begin(), sat->roots.end());
      while (!st.empty()) {
        const egraph::Id c = sat->g.find(st.back());
        st.pop_back();
        if (seen[c] || (*which)[c] == egraph::kNoId) continue;
        seen[c] = 1;
        const ir::NodeView v = sat->g.node((*which)[c]);
        std::string kids;
        for (egraph::Id k : v.kids) {
          kids += " c" + std::to_string(sat->g.find(k));
          st.push_back(k);
        }
        if (v.op != ir::Op::Kernel) continue;
        const auto& spec = *sat->g.analysis().attrs().get(v.payload).kernel;
        const detail::KernelWork w = cost.work(v);
        std::printf("  c%u %s %zu nodes, %.3g us, %g staged, slots%s\n", c, ir::kind_name(spec.kind),
                    spec.body->nodes.size(), cost(v) * 1e6, w.staged_kernels, kids.c_str());
      }
    }
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

// The f16 decode step for sm_90 on the H200's figures (gpu_bench's), launches priced: by
// hand, build/tests/compiler/compiler_ilp_tests "[ilp-gpu]"
TEST_CASE("DAG extraction of a GPU decode step: the heuristic against the ILP", "[.][ilp-gpu]") {
  setenv("LUMINAL_GPU_MODEL", "H200", 1);
  Graph g;
  test::build_decode_block_f16(g, 4096);
  Gap gap = measure(g, "decode step f16, sm_90", 300, Target::parse("cuda:sm_90"), true);
  CHECK(gap.heuristic <= gap.exact * 1.01);
  unsetenv("LUMINAL_GPU_MODEL");
}
