// Compile time of the compiler pipeline on the reference target (no codegen):
//   BM_CompileDecoderBlock/S one Llama-style layer, d_model 4096, 32 heads, 8 KV heads,
//                            FFN 14336, over S = 1, 16, 128 tokens (goal < 1 s, at most 8
//                            kernels, one of them the whole attention)
//   BM_CompileModel32        32 such layers (goal < 5 s; identical layers share a search)
//   BM_CompileModel32Sharded/P  the same with a communicator of P ranks: the sharding
//                            rules join the search (goal still < 5 s; docs/distributed.md)
//   BM_CompileMLP            linear -> gelu -> linear
//   BM_CompileDecoderBlockGpu/T/S/F  the block searched for GPU target T (cuda:sm_80,
//                            cuda:sm_90, hip:gfx90a; search only, no NVRTC) with the fusion
//                            policies (F = 1) or without (F = 0: skip_rules fuse-producers):
//                            the plan with them should never be dearer (docs/compiler.md)
// Counters: primitive_ops, kernels, attention (kernels of the Attention kind), searches,
// blocks, estimate_us (the cost model's estimate of one call).
#include <string>

#include <benchmark/benchmark.h>

#include "compiler/translation_models.hpp"

using namespace luminal;

namespace {

test::BlockConfig big() { return test::BlockConfig::llama_4096(); }

void report(benchmark::State& st, const compiler::CompiledProgram& p) {
  st.counters["primitive_ops"] = static_cast<double>(p.report.primitive_ops);
  st.counters["kernels"] = static_cast<double>(p.report.kernels);
  st.counters["attention"] = test::count_kind(p, ir::KernelKind::Attention);
  st.counters["searches"] = static_cast<double>(p.searches);
  st.counters["blocks"] = static_cast<double>(p.blocks);
  st.counters["egraph_nodes"] = static_cast<double>(p.report.egraph_nodes);
  st.counters["collectives"] = test::count_kind(p, ir::KernelKind::Collective);
  st.counters["estimate_us"] = p.report.estimated_seconds * 1e6;
}

void BM_CompileDecoderBlock(benchmark::State& st) {
  Graph g;
  test::BlockConfig c = big();
  c.seq = st.range(0);
  test::build_model(g, c, 1);
  compiler::CompiledProgram p;
  for (auto _ : st) p = compiler::compile_graph(*g.impl(), Target::reference(), {});
  report(st, p);
}
BENCHMARK(BM_CompileDecoderBlock)->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_CompileModel32(benchmark::State& st) {
  Graph g;
  test::build_model(g, big(), 32);
  compiler::CompiledProgram p;
  for (auto _ : st) p = compiler::compile_graph(*g.impl(), Target::reference(), {});
  report(st, p);
}
BENCHMARK(BM_CompileModel32)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_CompileModel32Sharded(benchmark::State& st) {
  Graph g;
  test::build_model(g, big(), 32);
  CompileOptions o;
  o.communicator = Communicator::local_group(static_cast<int>(st.range(0)))[0];  // compiled, never called
  compiler::CompiledProgram p;
  for (auto _ : st) p = compiler::compile_graph(*g.impl(), Target::reference(), o);
  report(st, p);
}
BENCHMARK(BM_CompileModel32Sharded)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_CompileMLP(benchmark::State& st) {
  Graph g;
  test::build_mlp(g, 128, 4096, 14336);
  compiler::CompiledProgram p;
  for (auto _ : st) p = compiler::compile_graph(*g.impl(), Target::reference(), {});
  report(st, p);
}
BENCHMARK(BM_CompileMLP)->Unit(benchmark::kMillisecond)->Iterations(3);

constexpr const char* kGpuTargets[] = {"cuda:sm_80", "cuda:sm_90", "hip:gfx90a"};

void BM_CompileDecoderBlockGpu(benchmark::State& st) {
  Graph g;
  test::BlockConfig c = big();
  c.seq = st.range(1);
  test::build_model(g, c, 1);
  const char* target = kGpuTargets[st.range(0)];
  CompileOptions o;
  if (st.range(2) == 0) o.skip_rules = {"fuse-producers"};
  st.SetLabel(std::string(target) + (st.range(2) ? "" : ", without fuse-producers"));
  compiler::CompiledProgram p;
  for (auto _ : st) p = compiler::compile_graph(*g.impl(), Target::parse(target), o);
  report(st, p);
}
BENCHMARK(BM_CompileDecoderBlockGpu)
    ->ArgsProduct({{0, 1, 2}, {1, 16, 128}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
