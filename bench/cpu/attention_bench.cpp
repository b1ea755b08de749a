// Attention on the CPU: the fused streaming kernel (KernelKind::Attention, online
// softmax, causal key blocks skipped) against the unfused plan the compiler makes when
// the Attention kind is priced out of the search (LUMINAL_CPU_ATTENTION_EFFICIENCY tiny:
// a QK^T GEMM, the masked softmax as a row kernel, a PV GEMM), in the same process; the
// fused plan is forced the other way (the efficiency set very high).
// Shapes of a Llama-3-8B layer (32 query heads, 8 KV heads grouped, repeated as views,
// head dim 128), 12 heads of 64 ungrouped, and the 110M preset of bench/llama (12 heads,
// 4 KV heads, head dim 64; also with k and v token-major, as its KV cache stores them),
// causal; prefill of S tokens and one decode step over S past tokens (16384: over keys
// that cannot stay in the last-level cache). Each plan prints
// the cost model's estimate of it beside its kernel counts: the search picks the plan
// with the lower estimate, so the two columns should rank the plans as the timings do.
// Counters: GFLOP/s counts the products the causal mask leaves (both matmuls).
// The F16 variants take q, k, v in f16 (the op widens them and rounds the result): the
// fused kernel reads and writes halves; before the lowering took them (2026-12-02) the
// f16 plan's Attention kernel lowered as loops, which is what the unfused plan bounds.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "compiler/compile_graph.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;

namespace {

struct Attn {
  lm::Graph g;
  lm::Callable f;
  std::map<std::string, lm::HostTensor> in, out;
  double flops = 0;
};

lm::HostTensor rand_tensor(const std::vector<int64_t>& shape, std::mt19937_64& rng, lm::DType dt) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return lm::HostTensor::from_f32(v, shape, dt);
}

// q [H, Sq, hd]; k, v [KV, Sk, hd] repeated to H heads; causal (bottom-right aligned).
struct Heads {
  int64_t H, KV, hd;
  bool token_major = false;  // k, v stored [Sk, KV, hd], as a KV cache is, read as views
};
// Llama-3-8B; 12 heads of 64 ungrouped; the 110M preset of bench/llama (12 heads, 4 KV),
// then the same with k and v laid out as its KV cache is (token-major: one key's heads
// side by side, so a head's keys are strided).
constexpr Heads kShapes[] = {{32, 8, 128}, {12, 12, 64}, {12, 4, 64}, {12, 4, 64, true}};

Attn& get(int64_t sq, int64_t sk, int64_t shape, bool fused, lm::DType dt) {
  static std::map<std::tuple<int64_t, int64_t, int64_t, bool, lm::DType>, Attn> cache;
  auto key = std::make_tuple(sq, sk, shape, fused, dt);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Attn& a = cache[key];
  const auto [H, KV, hd, token_major] = kShapes[shape];
  const int64_t G = H / KV;
  const std::vector<int64_t> kv_shape =
      token_major ? std::vector<int64_t>{sk, KV, hd} : std::vector<int64_t>{KV, sk, hd};
  const std::vector<lm::Dim> kv_dims(kv_shape.begin(), kv_shape.end());
  lm::Tensor q = a.g.input("q", {H, sq, hd}, dt), k = a.g.input("k", kv_dims, dt),
             v = a.g.input("v", kv_dims, dt);
  if (token_major) {
    k = lm::permute(k, {1, 0, 2});
    v = lm::permute(v, {1, 0, 2});
  }
  // Structured bindings captured by copy: clang before 16 cannot capture them by reference.
  auto rep = [H = H, KV = KV, hd = hd, G, sk](const lm::Tensor& t) {
    return lm::reshape(lm::expand(lm::reshape(t, {KV, 1, sk, hd}), {KV, G, sk, hd}), {H, sk, hd});
  };
  a.g.output("y", lm::scaled_dot_product_attention(q, rep(k), rep(v), true));
  // Each plan forced by the Attention kind's price (the search's own choice is whichever
  // of the two the model ranks first).
  setenv("LUMINAL_CPU_ATTENTION_EFFICIENCY", fused ? "100" : "1e-6", 1);
  auto plan = lm::compiler::compile_graph(*a.g.impl(), lm::Target::cpu(), {});
  a.f = lm::compile(a.g, lm::Target::cpu());
  unsetenv("LUMINAL_CPU_ATTENTION_EFFICIENCY");
  int att = 0;
  for (const auto& st : plan.plan->steps) att += st.spec->kind == lm::ir::KernelKind::Attention ? 1 : 0;
  std::printf("attention %s H %lld KV %lld hd %lld Sq %lld Sk %lld %s: %lld plan kernels (%d attention), "
              "%lld C kernels, estimate %.1f us\n",
              std::string(lm::dtype_name(dt)).c_str(), static_cast<long long>(H), static_cast<long long>(KV),
              static_cast<long long>(hd), static_cast<long long>(sq), static_cast<long long>(sk),
              fused ? "fused" : "unfused", static_cast<long long>(plan.report.kernels), att,
              static_cast<long long>(a.f.report().generated_kernels), plan.report.estimated_seconds * 1e6);
  std::mt19937_64 rng(1);
  a.in.emplace("q", rand_tensor({H, sq, hd}, rng, dt));
  a.in.emplace("k", rand_tensor(kv_shape, rng, dt));
  a.in.emplace("v", rand_tensor(kv_shape, rng, dt));
  a.out = a.f(a.in);
  // Products under the causal mask: query i sees sk - sq + i + 1 keys.
  double seen = 0;
  for (int64_t i = 0; i < sq; ++i) seen += static_cast<double>(sk - sq + i + 1);
  a.flops = 2.0 * 2.0 * static_cast<double>(H) * seen * static_cast<double>(hd);
  return a;
}

void run(benchmark::State& st, bool fused, lm::DType dt = lm::f32) {
  Attn& a = get(st.range(0), st.range(1), st.range(2), fused, dt);
  for (auto _ : st) {
    auto s = a.f.run(a.in, a.out);
    if (!s.ok) st.SkipWithError(s.message.c_str());
  }
  st.counters["GFLOP/s"] = benchmark::Counter(a.flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionFused(benchmark::State& st) { run(st, true); }
void BM_AttentionUnfused(benchmark::State& st) { run(st, false); }
void BM_AttentionFusedF16(benchmark::State& st) { run(st, true, lm::f16); }
void BM_AttentionUnfusedF16(benchmark::State& st) { run(st, false, lm::f16); }

// {Sq, Sk, shape}: prefill 128 and 512, decode one token over 160 to 16384 past tokens.
#define LM_ATTN_ARGS                                                                            \
  ->Args({128, 128, 0})->Args({512, 512, 0})->Args({1, 160, 0})->Args({1, 512, 0})->Args({1, 4096, 0}) \
      ->Args({1, 160, 1})->Args({1, 2048, 1})->Args({1, 160, 2})->Args({1, 2048, 2})->Args({1, 2048, 3})   \
      ->Args({1, 16384, 2})->Args({1, 16384, 3})
BENCHMARK(BM_AttentionFused) LM_ATTN_ARGS->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AttentionUnfused) LM_ATTN_ARGS->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AttentionFusedF16) LM_ATTN_ARGS->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_AttentionUnfusedF16) LM_ATTN_ARGS->Unit(benchmark::kMicrosecond)->UseRealTime()->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
