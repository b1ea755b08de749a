// Fusion on a sharded program, measured: tests/dist/tensor_parallel_test.cpp's decode
// step (2 layers, d 512, 8 heads, 4 KV heads, FFN 1536; 100 cached positions, f32) over
// the ranks mpirun starts, compiled twice -- the default search and the same without
// absorb-producers -- and the two programs' calls interleaved in one process, so the
// host's drift hits both alike. Counters (medians of the calls of a repetition, rank 0):
// fused_us, unfused_us, ratio (fused / unfused), the kernels and collectives of each
// plan and their estimates. One thread per rank (`LUMINAL_BENCH_THREADS` overrides).
//   mpirun --allow-run-as-root --mca btl self,vader -np 2 build/bench/dist/dist_fusion_bench
// Every rank runs the same fixed number of iterations (the calls are collectives).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "compiler/translation_models.hpp"
#include "dist/decode_step_model.hpp"
#include "luminal/luminal.hpp"
#include "rank_main.hpp"

using namespace luminal;

namespace {

constexpr int64_t kLayers = 2, kPast = 100;

struct Pair {
  std::shared_ptr<Communicator> comm;
  std::unique_ptr<Callable> fused, unfused;
  std::map<std::string, HostTensor> in;
};

Pair& pair() {
  static std::unique_ptr<Pair> p;
  if (p) return *p;
  p = std::make_unique<Pair>();
  const Graph g = test::tp_decode_step(kLayers);
  CompileOptions o;
  o.threads = 1;
  if (const char* t = std::getenv("LUMINAL_BENCH_THREADS")) o.threads = std::atoi(t);
  o.time_budget_seconds = 300;  // every rank must extract the same plan
  if (Communicator::launched_by_mpirun()) {
    p->comm = Communicator::from_environment();
    o.communicator = p->comm;
  }
  p->fused = std::make_unique<Callable>(compile(g, Target::cpu(), o));
  o.skip_rules = {"absorb-producers"};
  p->unfused = std::make_unique<Callable>(compile(g, Target::cpu(), o));
  // Random weights, inputs and caches of kPast positions, bound alike to both programs.
  const auto data = test::random_inputs(*g.impl(), 1, {{"P", kPast}});
  for (const auto& name : p->fused->param_names()) {
    p->fused->bind(name, data.at(name));
    p->unfused->bind(name, data.at(name));
  }
  for (const auto& name : p->fused->input_names()) p->in.emplace(name, data.at(name));
  if (!p->comm || p->comm->rank() == 0)
    std::fprintf(stderr, "fused:   %s\nunfused: %s\n", p->fused->report().to_string().c_str(),
                 p->unfused->report().to_string().c_str());
  return *p;
}

double median(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void BM_ShardedDecodeFusion(benchmark::State& st) {
  Pair& p = pair();
  std::map<std::string, HostTensor> out;
  for (int i = 0; i < 20; ++i) {  // warm-up: arenas, caches
    if (!p.fused->run(p.in, out) || !p.unfused->run(p.in, out)) st.SkipWithError("a call failed");
  }
  std::vector<double> fused, unfused;
  auto timed = [&](Callable& fn, std::vector<double>& into) {
    const auto t0 = std::chrono::steady_clock::now();
    Status s = fn.run(p.in, out);
    into.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e6);
    if (!s) st.SkipWithError(s.message.c_str());
  };
  for (auto _ : st) {
    timed(*p.fused, fused);
    timed(*p.unfused, unfused);
  }
  const CompileReport &a = p.fused->report(), &b = p.unfused->report();
  st.counters["fused_us"] = median(fused);
  st.counters["unfused_us"] = median(unfused);
  st.counters["ratio"] = median(fused) / std::max(median(unfused), 1e-9);
  st.counters["kernels_f"] = static_cast<double>(a.kernels);
  st.counters["kernels_u"] = static_cast<double>(b.kernels);
  st.counters["coll_f"] = static_cast<double>(a.collectives);
  st.counters["coll_u"] = static_cast<double>(b.collectives);
  st.counters["est_f_us"] = a.estimated_seconds * 1e6;
  st.counters["est_u_us"] = b.estimated_seconds * 1e6;
}
BENCHMARK(BM_ShardedDecodeFusion)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1000)
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) { return luminal::bench::run_on_every_rank(argc, argv); }
