// The decoder block on the CPU with sibling products merged (matmul-siblings: Q/K/V one
// GEMM, gate/up one GEMM, each reading its weights in place through a segmented B)
// against the same block compiled with those two rules skipped (CompileOptions::
// skip_rules: Q, K, V, gate and up each their own GEMM), in the same process, on the same
// bound weights. Llama-3-8B layer sizes (d_model 4096, 32 heads, 8 KV heads, FFN 14336)
// over S = 1, 16 and 128 tokens; f32 weights (872 MB, shared by both programs).
// After the runs, main() prints the medians and their ratio.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>

#include "bench_util.hpp"
#include "compiler/translation_models.hpp"

namespace lm = luminal;

namespace {

struct Block {
  lm::Graph g;
  lm::Callable f;
  std::map<std::string, lm::HostTensor> in, out;
};

// The weights, generated once and bound to every program (HostTensor shares storage).
std::map<std::string, lm::HostTensor>& weights(const lm::Graph& g, const lm::Callable& f) {
  static std::map<std::string, lm::HostTensor> w;
  if (!w.empty()) return w;
  std::mt19937_64 rng(7);
  const auto& impl = *g.impl();
  for (uint32_t id : impl.params) {
    const auto& n = impl.nodes[id];
    std::vector<int64_t> shape;
    for (const auto& d : n.shape) shape.push_back(*d.as_constant());
    // Norm weights near 1; projections scaled like a trained layer's (|w| ~ 1/sqrt(d)).
    const bool norm = shape.size() == 1;
    w.emplace(n.name, cpu_bench::rand_tensor(shape, rng, norm ? 0.1f : 0.02f, norm ? 1.f : 0.f));
  }
  (void)f;
  return w;
}

Block& get(int64_t s, bool merged) {
  static std::map<std::pair<int64_t, bool>, Block> cache;
  const auto key = std::make_pair(s, merged);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Block& b = cache[key];
  lm::test::BlockConfig c = lm::test::BlockConfig::llama_4096();
  c.seq = s;
  lm::test::build_model(b.g, c, 1);
  lm::CompileOptions opt;
  if (!merged) opt.skip_rules = {"matmul-siblings", "matmul-siblings-3"};
  b.f = lm::compile(b.g, lm::Target::cpu(), opt);
  for (const auto& [name, t] : weights(b.g, b.f)) b.f.bind(name, t);
  std::printf("decoder block S %lld, siblings %s: %lld kernels, %lld C kernels, estimate %.2f ms\n",
              static_cast<long long>(s), merged ? "merged" : "separate",
              static_cast<long long>(b.f.report().kernels), static_cast<long long>(b.f.report().generated_kernels),
              b.f.report().estimated_seconds * 1e3);
  std::mt19937_64 rng(3);
  b.in.emplace("x", cpu_bench::rand_tensor({s, c.d_model}, rng, 1.f));
  std::vector<int32_t> pos(static_cast<size_t>(s));
  for (int64_t i = 0; i < s; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  b.in.emplace("pos", lm::HostTensor::from(pos, {s}));
  b.out = b.f(b.in);
  return b;
}

void run(benchmark::State& st, bool merged) {
  Block& b = get(st.range(0), merged);
  for (auto _ : st) {
    auto r = b.f.run(b.in, b.out);
    if (!r.ok) st.SkipWithError(r.message.c_str());
  }
}

void BM_BlockMerged(benchmark::State& st) { run(st, true); }
void BM_BlockSeparate(benchmark::State& st) { run(st, false); }

BENCHMARK(BM_BlockMerged)->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_BlockSeparate)->Arg(1)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  cpu_bench::RecordingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\n%-5s %14s %14s %8s\n", "S", "merged ms", "separate ms", "speedup");
  for (int s : {1, 16, 128}) {
    std::string suffix = "/";  // appended: GCC 12 reports a false -Wrestrict for "/" + to_string(s)
    suffix.append(std::to_string(s)).append("/repeats:5/real_time_median");
    const auto m = rep.seconds.find("BM_BlockMerged" + suffix), p = rep.seconds.find("BM_BlockSeparate" + suffix);
    if (m == rep.seconds.end() || p == rep.seconds.end()) continue;
    std::printf("%-5d %14.2f %14.2f %7.2fx\n", s, m->second * 1e3, p->second * 1e3, p->second / m->second);
  }
  return 0;
}
