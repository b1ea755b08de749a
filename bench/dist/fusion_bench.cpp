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
#include <random>

#include "luminal/luminal.hpp"

using namespace luminal;

namespace {

class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

constexpr int64_t kD = 512, kH = 8, kKV = 4, kHd = 64, kF = 1536, kLayers = 2, kPast = 100;

// As tensor_parallel_test's decode_step: RMSNorm, RoPE, the new K/V rows appended to the
// layer's cache and returned, GQA attention over P + 1 keys, SwiGLU.
Graph decode_step() {
  const int64_t G = kH / kKV;
  Graph g;
  const Dim P = g.dim("P", 1, 127), T = P + 1;
  const Tensor pos = slice(arange(T), 0, P, T);
  Tensor h = g.input("x", {1, kD});
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string ls = std::to_string(l);
    auto proj = [&](const Tensor& x, const char* w, int64_t out, int64_t in) {
      return linear(x, g.param(w + ls, {out, in}));
    };
    auto heads_major = [&](const Tensor& t) {
      return reshape(expand(reshape(permute(t, {1, 0, 2}), {kKV, 1, T, kHd}), {kKV, G, T, kHd}),
                     {kH, T, kHd});
    };
    const Tensor x = rms_norm(h, g.param("attn_norm" + ls, {kD}));
    const Tensor q =
        rope(permute(reshape(proj(x, "wq", kH * kHd, kD), {1, kH, kHd}), {1, 0, 2}), pos, 10000.f);
    const Tensor k =
        permute(rope(permute(reshape(proj(x, "wk", kKV * kHd, kD), {1, kKV, kHd}), {1, 0, 2}), pos, 10000.f),
                {1, 0, 2});
    const Tensor v = reshape(proj(x, "wv", kKV * kHd, kD), {1, kKV, kHd});
    g.output("k." + ls, k);
    g.output("v." + ls, v);
    const Tensor keys = concat({g.input("k_cache." + ls, {P, kKV, kHd}), k}, 0);
    const Tensor values = concat({g.input("v_cache." + ls, {P, kKV, kHd}), v}, 0);
    const Tensor a = scaled_dot_product_attention(q, heads_major(keys), heads_major(values), false);
    h = h + proj(reshape(permute(a, {1, 0, 2}), {1, kH * kHd}), "wo", kD, kH * kHd);
    const Tensor y = rms_norm(h, g.param("mlp_norm" + ls, {kD}));
    h = h + proj(silu(proj(y, "wg", kF, kD)) * proj(y, "wu", kF, kD), "wd", kD, kF);
  }
  g.output("y", h);
  return g;
}

std::vector<int64_t> param_shape(const std::string& name) {
  if (name.rfind("wq", 0) == 0 || name.rfind("wo", 0) == 0) return {kD, kD};
  if (name.rfind("wk", 0) == 0 || name.rfind("wv", 0) == 0) return {kKV * kHd, kD};
  if (name.rfind("wg", 0) == 0 || name.rfind("wu", 0) == 0) return {kF, kD};
  if (name.rfind("wd", 0) == 0) return {kD, kF};
  return {kD};  // the norms
}

struct Pair {
  std::shared_ptr<Communicator> comm;
  std::unique_ptr<Callable> fused, unfused;
  std::map<std::string, HostTensor> in;
};

Pair& pair() {
  static std::unique_ptr<Pair> p;
  if (p) return *p;
  p = std::make_unique<Pair>();
  const Graph g = decode_step();
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
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  auto random = [&](const std::vector<int64_t>& shape, bool ones) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = ones ? 1.f : u(rng);
    return HostTensor::from(v, shape);
  };
  for (const auto& name : p->fused->param_names()) {
    const HostTensor t = random(param_shape(name), name.find("norm") != std::string::npos);
    p->fused->bind(name, t);
    p->unfused->bind(name, t);
  }
  p->in.emplace("x", random({1, kD}, false));
  for (int64_t l = 0; l < kLayers; ++l)
    for (const char* kv : {"k_cache.", "v_cache."})
      p->in.emplace(kv + std::to_string(l), random({kPast, kKV, kHd}, false));
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

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (r && std::atoi(r) != 0) {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
}
