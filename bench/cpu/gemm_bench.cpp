// SGEMM f32 at 512, 1024, 2048: Luminal's generated packed GEMM (rendered from the kernel
// IR and JIT-compiled, exactly as compile() would) vs cblas_sgemm (OpenBLAS) called
// directly in the same process. Prints GFLOP/s and the ratio ours / OpenBLAS.
//   build-cpu/bench/cpu/cpu_gemm_bench [--benchmark_repetitions=5]
// LUMINAL_GEMM_TILE="mr,nr,mc,kc,nc" overrides the micro/cache tile (for tuning).
#include "bench_util.hpp"

#include <cmath>
#include <cstdio>
#include <random>

#include "backends/cpu/gemm_codegen.hpp"

#ifdef LUMINAL_HAS_BLAS
#include <cblas.h>
#endif

using namespace luminal::kernel;

namespace {

// LUMINAL_GEMM_ISA=avx2|avx512|generic selects the micro-kernel ISA (default: the host's).
luminal::cpu::CpuIsa isa() {
  const char* env = std::getenv("LUMINAL_GEMM_ISA");
  std::string v = env ? env : "";
  if (v == "avx2") return luminal::cpu::CpuIsa::Avx2;
  if (v == "avx512") return luminal::cpu::CpuIsa::Avx512;
  if (v == "generic") return luminal::cpu::CpuIsa::Generic;
  return luminal::cpu::host_isa();
}

GemmTile tile() {
  auto d = luminal::cpu::default_gemm_tile(isa());
  GemmTile t{d.mr, d.nr, d.mc, d.kc, d.nc};
  if (const char* env = std::getenv("LUMINAL_GEMM_TILE"))
    std::sscanf(env, "%d,%d,%d,%d,%d", &t.mr, &t.nr, &t.mc, &t.kc, &t.nc);
  return t;
}

Program gemm_program(int64_t n, GemmImpl impl) {
  Program p;
  p.buffers = {{"a", luminal::DType::f32, n * n, BufferRole::Input},
               {"b", luminal::DType::f32, n * n, BufferRole::Param},
               {"c", luminal::DType::f32, n * n, BufferRole::Output}};
  Gemm g;
  g.m = n;
  g.n = n;
  g.k = n;
  g.a = {0, 0, n, 1};
  g.b = {1, 0, n, 1};
  g.c = {2, 0, n, 1};
  g.tile = tile();
  g.impl = impl;
  Kernel k;
  k.name = "sgemm";
  k.kind = KernelKind::Gemm;
  k.gemm = g;
  p.kernels = {k};
  return p;
}

struct Mats {
  cpu_bench::AlignedFloats a, b, c;
  explicit Mats(int64_t n) : a(n * n), b(n * n), c(n * n) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> d(-1, 1);
    for (size_t i = 0; i < a.n; ++i) a.data[i] = d(rng), b.data[i] = d(rng), c.data[i] = 0;
  }
};

void set_flops(benchmark::State& st, int64_t n) {
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Luminal(benchmark::State& st) {
  const int64_t n = st.range(0);
  Mats m(n);
  cpu_bench::Compiled fn = cpu_bench::compile(gemm_program(n, GemmImpl::Generated), {isa()});
  std::vector<void*> bufs = {m.a.data, m.b.data, m.c.data};
  fn.run(bufs);  // warm up: threads, page faults
  for (auto _ : st) fn.run(bufs);
  set_flops(st, n);
}

#ifdef LUMINAL_HAS_BLAS
void BM_OpenBLAS(benchmark::State& st) {
  const int64_t n = st.range(0);
  Mats m(n);
  const int ni = static_cast<int>(n);
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, m.a.data, ni, m.b.data, ni, 0.0f,
                m.c.data, ni);
  };
  call();
  for (auto _ : st) call();
  set_flops(st, n);
}
BENCHMARK(BM_OpenBLAS)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif
BENCHMARK(BM_Luminal)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode-shaped product: x[1, 2048] @ W^T with W a [5632, 2048] weight (a linear layer's
// layout): bandwidth-bound, 46 MB of weights per call.
constexpr int64_t kDecK = 2048, kDecN = 5632;
Program decode_program() {
  Program p;
  p.buffers = {{"x", luminal::DType::f32, kDecK, BufferRole::Input},
               {"w", luminal::DType::f32, kDecN * kDecK, BufferRole::Param},
               {"y", luminal::DType::f32, kDecN, BufferRole::Output}};
  Gemm g;
  g.m = 1;
  g.n = kDecN;
  g.k = kDecK;
  g.a = {0, 0, kDecK, 1};
  g.b = {1, 0, 1, kDecK};  // B[k, n] = W[n, k]
  g.c = {2, 0, kDecN, 1};
  g.tile = tile();
  Kernel k;
  k.name = "decode";
  k.kind = KernelKind::Gemm;
  k.gemm = g;
  p.kernels = {k};
  return p;
}

void set_weight_bandwidth(benchmark::State& st) { st.SetBytesProcessed(st.iterations() * kDecN * kDecK * 4); }

void BM_LuminalDecode(benchmark::State& st) {
  cpu_bench::AlignedFloats x(kDecK), w(kDecN * kDecK), y(kDecN);
  for (size_t i = 0; i < w.n; ++i) w.data[i] = static_cast<float>(i % 7) * 0.1f;
  for (size_t i = 0; i < x.n; ++i) x.data[i] = 1.0f;
  cpu_bench::Compiled fn = cpu_bench::compile(decode_program(), {isa()});
  std::vector<void*> bufs = {x.data, w.data, y.data};
  fn.run(bufs);
  for (auto _ : st) fn.run(bufs);
  set_weight_bandwidth(st);
}
BENCHMARK(BM_LuminalDecode)->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef LUMINAL_HAS_BLAS
void BM_OpenBLASDecode(benchmark::State& st) {
  cpu_bench::AlignedFloats x(kDecK), w(kDecN * kDecK), y(kDecN);
  for (size_t i = 0; i < w.n; ++i) w.data[i] = static_cast<float>(i % 7) * 0.1f;
  for (size_t i = 0; i < x.n; ++i) x.data[i] = 1.0f;
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 1, kDecN, kDecK, 1.0f, x.data, kDecK, w.data, kDecK,
                0.0f, y.data, kDecN);
  };
  call();
  for (auto _ : st) call();
  set_weight_bandwidth(st);
}
BENCHMARK(BM_OpenBLASDecode)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

// Max |ours - naive double loop| over sampled entries of a 257-wide odd-sized product,
// and max |ours - OpenBLAS| at 512: a fast wrong GEMM must not report a ratio.
double verify(int64_t n) {
  Mats m(n);
  cpu_bench::Compiled fn = cpu_bench::compile(gemm_program(n, GemmImpl::Generated), {isa()});
  std::vector<void*> bufs = {m.a.data, m.b.data, m.c.data};
  fn.run(bufs);
  double worst = 0;
  for (int64_t i = 0; i < n; i += 7)
    for (int64_t j = 0; j < n; j += 5) {
      double s = 0;
      for (int64_t q = 0; q < n; ++q) s += static_cast<double>(m.a.data[i * n + q]) * m.b.data[q * n + j];
      worst = std::max(worst, std::abs(s - m.c.data[i * n + j]));
    }
  return worst;
}

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int64_t n : {257, 512}) {
    double err = verify(n);
    std::printf("check N=%lld: max |ours - double reference| = %.2e\n", static_cast<long long>(n), err);
    if (err > 1e-3) {
      std::printf("GEMM result is wrong; not benchmarking\n");
      return 1;
    }
  }
  cpu_bench::RecordingReporter rep;
  GemmTile t = tile();
  std::printf("Luminal GEMM: isa %s, tile mr=%d nr=%d mc=%d kc=%d nc=%d\n", luminal::cpu::isa_name(isa()),
              t.mr, t.nr, t.mc, t.kc, t.nc);
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\n%-6s %14s %14s %8s\n", "N", "Luminal GF/s", "OpenBLAS GF/s", "ratio");
  for (int n : {512, 1024, 2048}) {
    auto find = [&](const std::string& name) {
      for (const auto& [k, v] : rep.seconds)
        if (k.rfind(name + "/" + std::to_string(n), 0) == 0 && k.find("_mean") == std::string::npos &&
            k.find("_stddev") == std::string::npos && k.find("_cv") == std::string::npos)
          if (k.find("_median") != std::string::npos ||
              rep.seconds.count(name + "/" + std::to_string(n) + "/real_time_median") == 0)
            return v;
      return 0.0;
    };
    double ours = find("BM_Luminal"), blas = find("BM_OpenBLAS");
    double gf = 2.0 * n * n * n / 1e9;
    if (ours > 0)
      std::printf("%-6d %14.1f %14.1f %8.2f\n", n, gf / ours, blas > 0 ? gf / blas : 0.0,
                  blas > 0 ? blas / ours : 0.0);
  }
  double ld = rep.seconds.count("BM_LuminalDecode/real_time") ? rep.seconds["BM_LuminalDecode/real_time"] : 0;
  double bd =
      rep.seconds.count("BM_OpenBLASDecode/real_time") ? rep.seconds["BM_OpenBLASDecode/real_time"] : 0;
  if (ld > 0)
    std::printf(
        "decode 1x%lldx%lld (W^T): Luminal %.2f ms (%.1f GB/s of weights), OpenBLAS %.2f ms, ratio %.2f\n",
        static_cast<long long>(kDecN), static_cast<long long>(kDecK), ld * 1e3, kDecN * kDecK * 4 / ld / 1e9,
        bd * 1e3, bd > 0 ? bd / ld : 0.0);
  benchmark::Shutdown();
  return 0;
}
