// Google Benchmark cases for the standard e-graph workloads (egg's figures in
// ../shared/workloads/egraph/README.md).
#include <benchmark/benchmark.h>

#include "workloads.hpp"

using namespace egbench;

static void BM_MathMicro(benchmark::State& st) {
  for (auto _ : st) {
    EGraph<Math> g;
    std::vector<Id> roots;
    Report rep = run_math_micro(g, static_cast<std::size_t>(st.range(0)), roots);
    benchmark::DoNotOptimize(rep.nodes);
    st.counters["nodes"] = static_cast<double>(g.num_nodes());
  }
}
BENCHMARK(BM_MathMicro)->Arg(10)->Arg(11)->Unit(benchmark::kMillisecond)->Iterations(3);

static void BM_MathMicroExtract10(benchmark::State& st) {
  EGraph<Math> g;
  std::vector<Id> roots;
  run_math_micro(g, 10, roots);
  for (auto _ : st) benchmark::DoNotOptimize(extract_ast_size(g, roots));
}
BENCHMARK(BM_MathMicroExtract10)->Unit(benchmark::kMillisecond);

static void BM_MathMicroEmatch10(benchmark::State& st) {
  EGraph<Math> g;
  std::vector<Id> roots;
  run_math_micro(g, 10, roots);
  for (auto _ : st) benchmark::DoNotOptimize(count_matches(g));
}
BENCHMARK(BM_MathMicroEmatch10)->Unit(benchmark::kMillisecond);

static void BM_AcBlowup(benchmark::State& st) {
  for (auto _ : st) {
    EGraph<Math> g;
    Report rep = run_ac_blowup(g, static_cast<int>(st.range(0)));
    benchmark::DoNotOptimize(rep.nodes);
  }
}
BENCHMARK(BM_AcBlowup)->Arg(8)->Arg(10)->Unit(benchmark::kMillisecond)->Iterations(3);

static void BM_CongruenceCascadeRebuild(benchmark::State& st) {
  for (auto _ : st) {
    st.PauseTiming();
    auto* g = new EGraph<Math>();
    std::vector<Id> leaves = build_cascade(*g, static_cast<std::size_t>(st.range(0)));
    unite_pairs(*g, leaves);
    st.ResumeTiming();
    benchmark::DoNotOptimize(g->rebuild());
    st.PauseTiming();
    delete g;
    st.ResumeTiming();
  }
}
BENCHMARK(BM_CongruenceCascadeRebuild)->Arg(100000)->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
