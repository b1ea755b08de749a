// Whole models on the CPU target vs PyTorch eager, ratios in the same run:
//  * a Llama-style decoder block (d 2048, 16 heads, 4 KV heads, FFN 5632, f32): one
//    decode step with 512 past tokens (bound by reading ~180 MB of weights: the fraction
//    of the copy bandwidth measured in this run is printed) and a 128-token prefill;
//  * a 3-layer MLP (1024 -> 4096 -> 4096 -> 1024) at batch 1 and 32;
//  * compile latency of the decode block: first compile including the C compiler (fresh
//    cache folder), then the same program from the disk cache.
// The PyTorch side is bench/cpu/torch_models.py, run from here (LUMINAL_BENCH_NO_TORCH=1
// skips it). Timed calls go through Callable::run with caller-provided outputs.
// Usage: cpu_model_bench [--benchmark_filter=...]; bench/cpu/run_models.sh runs it.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_util.hpp"
#include "graph/graph_impl.hpp"
#include "model_models.hpp"

namespace lm = luminal;

namespace {

using cpu_bench::rand_tensor;

struct Model {
  lm::Graph g;
  lm::Callable f;
  std::map<std::string, lm::HostTensor> in, out;
};

// Compiles `m.g` for the cpu target, binds random params, makes random inputs.
void prepare(Model& m, const std::map<std::string, std::vector<int64_t>>& inputs, const std::string& label) {
  const auto t0 = std::chrono::steady_clock::now();
  m.f = lm::compile(m.g, lm::Target::cpu());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& r = m.f.report();
  std::printf(
      "%s: %lld plan kernels -> %lld C kernels (%lld interpreted) from %lld primitive ops; arena %.1f MB for "
      "%.1f MB of intermediates; compile %.2f s (codegen %.2f s)\n",
      label.c_str(), static_cast<long long>(r.kernels), static_cast<long long>(r.generated_kernels),
      static_cast<long long>(r.interpreted_kernels), static_cast<long long>(r.primitive_ops),
      r.arena_bytes / 1e6, r.intermediate_bytes / 1e6, s, r.codegen_seconds);
  if (r.interpreted_kernels) std::printf("  %s\n", r.stop_reason.c_str());
  std::mt19937_64 rng(42);
  const auto& gi = *m.g.impl();
  for (uint32_t id : gi.params) {
    const auto& n = gi.nodes[id];
    std::vector<int64_t> shape;
    for (const auto& d : n.shape) shape.push_back(*d.as_constant());
    const bool norm = n.name.find("norm") != std::string::npos;
    m.f.bind(n.name, rand_tensor(shape, rng, 0.05f, norm ? 1.f : 0.f));
  }
  for (const auto& [name, shape] : inputs) {
    if (name == "pos") {
      std::vector<int32_t> p(static_cast<size_t>(shape[0]));
      for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(i + (shape[0] == 1 ? 512 : 0));
      m.in.insert_or_assign(name, lm::HostTensor::from(p, shape));
    } else {
      m.in.insert_or_assign(name, rand_tensor(shape, rng, 1.f));
    }
  }
  lm::Status st = m.f.run(m.in, m.out);  // allocates the outputs once; later calls write in place
  if (!st) {
    std::fprintf(stderr, "%s: %s\n", label.c_str(), st.message.c_str());
    std::exit(1);
  }
}

const model_bench::Llama kLlama;
const model_bench::Mlp kMlp;

Model& decode() {
  static Model m = [] {
    Model x;
    model_bench::build_decode(x.g, kLlama, 512);
    return x;
  }();
  static bool ready = false;
  if (!ready) {
    prepare(m, {{"x", {1, 2048}}, {"pos", {1}}, {"k_cache", {4, 512, 128}}, {"v_cache", {4, 512, 128}}},
            "decode");
    ready = true;
  }
  return m;
}
Model& prefill() {
  static Model m = [] {
    Model x;
    model_bench::build_prefill(x.g, kLlama, 128);
    return x;
  }();
  static bool ready = false;
  if (!ready) {
    prepare(m, {{"x", {128, 2048}}, {"pos", {128}}}, "prefill");
    ready = true;
  }
  return m;
}
Model& mlp(int64_t batch) {
  static std::map<int64_t, std::unique_ptr<Model>> ms;
  auto& m = ms[batch];
  if (!m) {
    m = std::make_unique<Model>();
    model_bench::build_mlp(m->g, kMlp, batch);
    prepare(*m, {{"x", {batch, kMlp.d}}}, "mlp_b" + std::to_string(batch));
  }
  return *m;
}

void run_model(benchmark::State& state, Model& m) {
  for (auto _ : state) {
    lm::Status s = m.f.run(m.in, m.out);
    if (!s) state.SkipWithError(s.message.c_str());
  }
}

void BM_Decode(benchmark::State& s) { run_model(s, decode()); }
void BM_Prefill(benchmark::State& s) { run_model(s, prefill()); }
void BM_Mlp(benchmark::State& s) { run_model(s, mlp(s.range(0))); }

// Plain parallel copy of 256 MB: the bandwidth roofline of this machine in this run
// (a generated copy kernel on the same threads as the models).
void BM_Copy(benchmark::State& state) {
  const int64_t n = int64_t{64} << 20;
  static cpu_bench::AlignedFloats a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) a.data[i] = static_cast<float>(i & 1023);
  using namespace luminal::kernel;
  Program p;
  p.buffers = {{"a", luminal::DType::f32, n, BufferRole::Input},
               {"b", luminal::DType::f32, n, BufferRole::Output}};
  const Index i = Index::var(0);
  p.kernels = {Kernel{"copy",
                      KernelKind::Elementwise,
                      {{0, n, true, true}},
                      {1, i, load(0, luminal::DType::f32, i)},
                      {},
                      {}}};
  static cpu_bench::Compiled copy = cpu_bench::compile(p);
  std::vector<void*> bufs = {a.data, b.data};
  for (auto _ : state) {
    copy.run(bufs);
    benchmark::DoNotOptimize(b.data);
  }
}

BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_Decode)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Prefill)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Mlp)
    ->Arg(1)
    ->Arg(32)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

double torch_ms(const std::string& out, const std::string& name) {
  auto pos = out.find("\n" + name + " median_ms=");
  if (pos == std::string::npos) return 0;
  return std::atof(out.c_str() + pos + 1 + name.size() + 11);
}

// First compile of the decode block into an empty cache folder (runs the C compiler),
// then the same compile through a fresh JIT instance that finds it on disk.
void compile_latency() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("luminal-model-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  lm::Graph g;
  model_bench::build_decode(g, kLlama, 512);
  lm::CompileOptions o;
  o.cache_dir = dir.string();
  // CPU seconds too: on a shared, loaded machine wall time says little.
  auto cpu_s = [](int who) {
    rusage u{};
    ::getrusage(who, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  const double self0 = cpu_s(RUSAGE_SELF), kids0 = cpu_s(RUSAGE_CHILDREN);
  auto t0 = std::chrono::steady_clock::now();
  lm::Callable a = lm::compile(g, lm::Target::cpu(), o);
  const double cold = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double self1 = cpu_s(RUSAGE_SELF), kids1 = cpu_s(RUSAGE_CHILDREN);
  o.cache_dir = (dir / ".").string();  // another JIT instance (no memory cache), same folder
  t0 = std::chrono::steady_clock::now();
  lm::Callable b = lm::compile(g, lm::Target::cpu(), o);
  const double warm = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double self2 = cpu_s(RUSAGE_SELF);
  std::printf(
      "compile latency (decode block): first compile %.2f s (codegen incl. cc %.2f s); from the disk cache "
      "%.3f s (codegen %.1f ms; the rest is the e-graph search)\n",
      cold, a.report().codegen_seconds, warm, b.report().codegen_seconds * 1e3);
  std::printf(
      "  CPU time: first compile %.2f s in Luminal + %.2f s in the C compiler; from the disk cache %.3f s\n",
      self1 - self0, kids1 - kids0, self2 - self1);
  fs::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  compile_latency();
  cpu_bench::RecordingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  auto sec = [&](const std::string& n) {
    auto it = rep.seconds.find(n + "/repeats:5/real_time_median");
    return it == rep.seconds.end() ? 0.0 : it->second;
  };
  const double copy = sec("BM_Copy"), dec = sec("BM_Decode"), pre = sec("BM_Prefill");
  const double m1 = sec("BM_Mlp/1"), m32 = sec("BM_Mlp/32");
  std::printf("\nLuminal (cpu target, medians):\n");
  const double copy_gbs = copy > 0 ? 2.0 * (64 << 20) * 4 / copy / 1e9 : 0;
  if (copy > 0) std::printf("  plain parallel copy: %.1f GB/s\n", copy_gbs);
  if (dec > 0) {
    const double gbs = kLlama.weight_bytes() / dec / 1e9;
    std::printf("  decode step:  %8.2f ms  (weights %.0f MB -> %.1f GB/s = %.0f%% of the copy bandwidth)\n",
                dec * 1e3, kLlama.weight_bytes() / 1e6, gbs, copy_gbs > 0 ? 100 * gbs / copy_gbs : 0.0);
  }
  if (pre > 0) std::printf("  prefill 128:  %8.2f ms\n", pre * 1e3);
  if (m1 > 0)
    std::printf("  mlp batch 1:  %8.2f ms  (%.1f GB/s of weights)\n", m1 * 1e3,
                kMlp.weight_bytes() / m1 / 1e9);
  if (m32 > 0) std::printf("  mlp batch 32: %8.2f ms\n", m32 * 1e3);
  if (!std::getenv("LUMINAL_BENCH_NO_TORCH")) {
    // PyTorch runs the workloads measured here (all of them without a filter).
    std::string only;
    for (auto [name, t] :
         {std::pair<const char*, double>{"decode", dec}, {"prefill", pre}, {"mlp_b1", m1}, {"mlp_b32", m32}})
      if (t > 0) only += (only.empty() ? "" : ",") + std::string(name);
    std::string cmd = "/usr/bin/python3 " LUMINAL_BENCH_CPU_DIR "/torch_models.py 15 " + only + " 2>&1";
    std::string out = "\n";
    if (FILE* f = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f)) out += buf;
      ::pclose(f);
    }
    std::printf("PyTorch eager (%s):%s", cmd.c_str(), out.c_str());
    auto ratio = [&](const char* name, const char* label, double ours) {
      const double t = torch_ms(out, name);
      if (t > 0 && ours > 0)
        std::printf("  %-13s PyTorch %8.2f ms / Luminal %8.2f ms = %.2fx\n", label, t, ours * 1e3,
                    t / (ours * 1e3));
    };
    ratio("decode", "decode step:", dec);
    ratio("prefill", "prefill 128:", pre);
    ratio("mlp_b1", "mlp batch 1:", m1);
    ratio("mlp_b32", "mlp batch 32:", m32);
  }
  benchmark::Shutdown();
  return 0;
}
