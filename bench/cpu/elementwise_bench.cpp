// A chain of 10 elementwise ops over 16M floats, written in the kernel IR, rendered to C
// and JIT-compiled as one fused kernel -- vs a plain parallel copy rendered the same way
// (the machine's achievable bandwidth, measured in the same run) and vs PyTorch eager
// (bench/cpu/torch_chain.py, run from here so one command prints both and the ratio).
// Also a tanh-GELU with the prelude's vectorized tanh vs libm's scalar tanhf.
//   build-cpu/bench/cpu/cpu_elementwise_bench
// Set LUMINAL_BENCH_NO_TORCH=1 to skip the PyTorch side.
#include "bench_util.hpp"
#include "kernel/kernel_math.hpp"

#include <cmath>
#include <cstdio>
#include <random>

#include "backends/cpu/c_prelude.hpp"

using namespace luminal::kernel;

namespace {

constexpr int64_t kN = 16 * 1024 * 1024;

// out = (relu(sigmoid(tanh(exp(sin(x)) * y)) - 0.5) * 2 + x) * y, each function written
// the way compiled programs compute it (kernel/kernel_math.hpp: exp and sigmoid through
// exp2 and recip, tanh the primitive's lm_tanh, relu as max): four transcendental calls
// per element.
Program chain_program() {
  Program p;
  p.buffers = {{"x", luminal::DType::f32, kN, BufferRole::Input},
               {"y", luminal::DType::f32, kN, BufferRole::Input},
               {"out", luminal::DType::f32, kN, BufferRole::Output}};
  Index i = Index::var(0);
  Expr x = load(0, luminal::DType::f32, i), y = load(1, luminal::DType::f32, i);
  Expr v = unary(UnaryOp::Sin, x);              // 1
  v = math::exp(v);                             // 2
  v = binary(BinaryOp::Mul, v, y);              // 3
  v = math::tanh(v);                            // 4
  v = math::sigmoid(v);                         // 5
  v = binary(BinaryOp::Sub, v, constant(0.5));  // 6
  v = math::relu(v);                            // 7
  v = binary(BinaryOp::Mul, v, constant(2.0));  // 8
  v = binary(BinaryOp::Add, v, x);              // 9
  v = binary(BinaryOp::Mul, v, y);              // 10
  p.kernels = {Kernel{"chain", KernelKind::Elementwise, {{0, kN, true, true}}, {2, i, v}, {}, {}}};
  return p;
}

Program copy_program() {
  Program p;
  p.buffers = {{"x", luminal::DType::f32, kN, BufferRole::Input},
               {"out", luminal::DType::f32, kN, BufferRole::Output}};
  Index i = Index::var(0);
  p.kernels = {Kernel{"copy",
                      KernelKind::Elementwise,
                      {{0, kN, true, true}},
                      {1, i, load(0, luminal::DType::f32, i)},
                      {},
                      {}}};
  return p;
}

double chain_ref(double x, double y) {
  double v = std::exp(std::sin(x)) * y;
  v = 1.0 / (1.0 + std::exp(-std::tanh(v)));
  v = std::max(v - 0.5, 0.0) * 2.0 + x;
  return v * y;
}

struct Data {
  cpu_bench::AlignedFloats x{kN}, y{kN}, out{kN};
  Data() {
    std::mt19937 rng(0);
    std::uniform_real_distribution<float> d(-2, 2);
    for (int64_t i = 0; i < kN; ++i) x.data[i] = d(rng), y.data[i] = d(rng), out.data[i] = 0;
  }
};
Data& data() {
  static Data d;
  return d;
}

void BM_Copy(benchmark::State& st) {
  static cpu_bench::Compiled fn = cpu_bench::compile(copy_program());
  std::vector<void*> bufs = {data().x.data, data().out.data};
  fn.run(bufs);
  for (auto _ : st) fn.run(bufs);
  st.SetBytesProcessed(st.iterations() * 2 * kN * 4);
}

void BM_Chain(benchmark::State& st) {
  static cpu_bench::Compiled fn = cpu_bench::compile(chain_program());
  std::vector<void*> bufs = {data().x.data, data().y.data, data().out.data};
  fn.run(bufs);
  for (auto _ : st) fn.run(bufs);
  st.SetBytesProcessed(st.iterations() * 3 * kN * 4);
}

// tanh-GELU: prelude (vectorized) vs libm tanhf (scalar calls), both on one thread (the
// loops' `omp simd` is a vectorization hint; no OpenMP runtime runs them).
const char* kGeluSource = R"(
#include <math.h>
void gelu_ours(const float* restrict x, float* restrict y, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = lm_gelu_tanh(x[i]);
}
void gelu_libm(const float* restrict x, float* restrict y, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.797884560802865356f * (v + 0.044715f * v * v * v)));
  }
}
)";
using GeluFn = void (*)(const float*, float*, int64_t);
GeluFn gelu_fn(const char* name) {
  static auto lib = luminal::cpu::Jit::global().compile(luminal::cpu::c_prelude() + kGeluSource);
  return lib->function<GeluFn>(name);
}

void BM_GeluOurs(benchmark::State& st) {
  GeluFn f = gelu_fn("gelu_ours");
  for (auto _ : st) f(data().x.data, data().out.data, kN);
  st.SetBytesProcessed(st.iterations() * 2 * kN * 4);
}
void BM_GeluScalarTanhf(benchmark::State& st) {
  GeluFn f = gelu_fn("gelu_libm");
  for (auto _ : st) f(data().x.data, data().out.data, kN);
  st.SetBytesProcessed(st.iterations() * 2 * kN * 4);
}

BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Chain)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluOurs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluScalarTanhf)->Unit(benchmark::kMillisecond)->UseRealTime();

double torch_ms(const std::string& out, const std::string& name) {
  auto pos = out.find(name + " median_ms=");
  if (pos == std::string::npos) return 0;
  return std::atof(out.c_str() + pos + name.size() + 11);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Correctness first: sampled entries of the fused chain vs a double-precision formula.
  {
    cpu_bench::Compiled fn = cpu_bench::compile(chain_program());
    std::vector<void*> bufs = {data().x.data, data().y.data, data().out.data};
    fn.run(bufs);
    double worst = 0;
    for (int64_t i = 0; i < kN; i += 997)
      worst = std::max(worst, std::abs(chain_ref(data().x.data[i], data().y.data[i]) - data().out.data[i]));
    std::printf("check: max |chain - double reference| = %.2e\n", worst);
    if (worst > 1e-4) return 1;
  }
  cpu_bench::RecordingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  auto sec = [&](const std::string& n) {
    auto it = rep.seconds.find(n + "/real_time");
    return it == rep.seconds.end() ? 0.0 : it->second;
  };
  const double mb = kN * 4 / 1e9;
  double copy = sec("BM_Copy"), chain = sec("BM_Chain"), go = sec("BM_GeluOurs"),
         gl = sec("BM_GeluScalarTanhf");
  std::printf("\n16M floats:\n");
  if (copy > 0) std::printf("  plain parallel copy   %8.2f ms  %6.1f GB/s\n", copy * 1e3, 2 * mb / copy);
  if (chain > 0 && copy > 0)
    std::printf("  fused 10-op chain     %8.2f ms  %6.1f GB/s = %.0f%% of copy bandwidth\n", chain * 1e3,
                3 * mb / chain, 100.0 * (3 * mb / chain) / (2 * mb / copy));
  if (go > 0 && gl > 0)
    std::printf("  tanh-GELU: ours %.2f ms, scalar tanhf %.2f ms (%.1fx)\n", go * 1e3, gl * 1e3, gl / go);
  if (!std::getenv("LUMINAL_BENCH_NO_TORCH")) {
    std::string cmd = "/usr/bin/python3 " LUMINAL_BENCH_CPU_DIR "/torch_chain.py 2>&1";
    std::string out;
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f)) out += buf;
      ::pclose(f);
    }
    double tc = torch_ms(out, "chain"), tg = torch_ms(out, "gelu");
    std::printf("PyTorch eager (%s):\n%s", cmd.c_str(), out.c_str());
    if (tc > 0 && chain > 0)
      std::printf("  chain: PyTorch %.2f ms / Luminal %.2f ms = %.1fx faster\n", tc, chain * 1e3,
                  tc / (chain * 1e3));
    if (tg > 0 && go > 0)
      std::printf("  gelu:  PyTorch %.2f ms / Luminal %.2f ms = %.1fx faster\n", tg, go * 1e3,
                  tg / (go * 1e3));
  }
  benchmark::Shutdown();
  return 0;
}
