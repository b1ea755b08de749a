// GPU figures (issue 11) on a machine without a GPU:
//  * measured: compile of the Llama-3-8B-sized decoder block (seq 128) for sm_90 with
//    NVRTC, cold (empty disk cache, nothing in memory) and from the disk cache;
//  * estimated by the cost model (CompileReport::estimated_seconds, H200 figures via
//    LUMINAL_GPU_MODEL=H200): f16 GEMM 4096^3 against a cuBLAS estimate (the library's
//    efficiency on the f16 tensor-core peak), as the program the search builds (cuBLASLt
//    is one of its candidates) and as the best generated kernel; a 10-op elementwise chain over 256M halves
//    (exact, and with fast_math) against a device-to-device copy, one decode step at Llama-3-8B sizes (4096
//    past, f16) against its bandwidth roofline, and a 128-token f16 prefill of that block;
//  * on a machine with a CUDA GPU (tests/gpu/run.sh), the same workloads timed on the device
//    through Callable::run_device, each against its baseline in the same run: the GEMM
//    against cuBLASLt's own choice for it, the chain against a device-to-device copy, the
//    decode step against its bytes at the copy's bandwidth. Elsewhere that part says why it
//    is skipped.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/gpu/blas_gemm.hpp"
#include "backends/gpu/module_cache.hpp"
#include "compiler/translation_models.hpp"
#include "cost/target_desc.hpp"
#include "luminal/luminal.hpp"
#include "runtime/plan_cache.hpp"

namespace lm = luminal;
namespace fs = std::filesystem;

namespace {

lm::CompileReport estimate(const lm::Graph& g, std::vector<std::string> skip_rules = {},
                           bool fast_math = false) {
  lm::CompileOptions o;
  o.compile_only = true;
  o.skip_rules = std::move(skip_rules);
  o.fast_math = fast_math;
  return lm::compile(g, lm::Target::parse("cuda:sm_90"), o).report();
}

// The workloads, shared by the estimates and the device timings.
// f16 GEMM n x n x n: input a, param b.
void gemm_graph(lm::Graph& g, int64_t n) {
  g.output("c", lm::matmul(g.input("a", {n, n}, lm::f16), g.param("b", {n, n}, lm::f16)));
}
// (relu(sigmoid(tanh(exp(sin x) * y)) - 0.5) * 2 + x) * y over n halves.
void chain_graph(lm::Graph& g, int64_t n) {
  lm::Tensor x = g.input("x", {n}, lm::f16), y = g.input("y", {n}, lm::f16);
  lm::Tensor v = lm::sin(x);
  v = lm::exp(v) * y;
  v = lm::sigmoid(lm::tanh(v));
  v = (lm::relu(v - 0.5f) * 2.0f + x) * y;
  g.output("out", v);
}
// The bytes a Llama-3-8B decode step must read: its f16 weights and a KV cache of `past`.
double decode_step_bytes(int64_t past) {
  const double weights = 2.0 * (4096.0 * 4096 * 2 + 2.0 * 1024 * 4096 + 3.0 * 14336 * 4096 + 2 * 4096);
  return weights + 2.0 * 2 * 8 * static_cast<double>(past) * 128;
}

void print_estimates() {
  setenv("LUMINAL_GPU_MODEL", "H200", 1);
  const lm::detail::TargetDesc t = lm::detail::describe_gpu_model("H200");
  std::printf("cost-model estimates on %s (%.0f SMs, %.1f TB/s, %.0f TFLOP/s f16 tensor, %.0f f32)\n",
              t.model.c_str(), double(t.compute_units), t.mem_bandwidth / 1e12, t.peak_flops_f16 / 1e12,
              t.peak_flops_f32 / 1e12);
  {
    lm::Graph g;
    const int64_t n = 4096;
    gemm_graph(g, n);
    const double flops = 2.0 * n * n * n;
    const double cublas = flops / (t.peak_flops_f16 * t.library_gemm_efficiency);
    // The program the search builds (cuBLASLt is a candidate), and the best generated
    // kernel (the library rule skipped).
    const lm::CompileReport r = estimate(g), gen = estimate(g, {"gpu-library-gemm"});
    std::printf(
        "  f16 GEMM 4096^3: program %.3f ms (%s, %.0f TFLOP/s), cuBLAS estimate %.3f ms: %.2fx cuBLAS\n",
        r.estimated_seconds * 1e3, r.codegen.find("cuBLASLt") != std::string::npos ? "cuBLASLt" : "generated",
        flops / r.estimated_seconds / 1e12, cublas * 1e3, cublas / r.estimated_seconds);
    std::printf("  f16 GEMM 4096^3, generated kernel only: %.3f ms (%.0f TFLOP/s): %.2fx cuBLAS\n",
                gen.estimated_seconds * 1e3, flops / gen.estimated_seconds / 1e12,
                cublas / gen.estimated_seconds);
  }
  {
    lm::Graph g;
    const int64_t n = int64_t{256} << 20;
    chain_graph(g, n);
    const double copy = 2.0 * 2 * n / t.mem_bandwidth;  // read + write of n halves
    const double bytes = 3.0 * 2 * n;
    // Exact, then with fast_math (the special function units: gpu_prelude.cpp).
    for (bool fast : {false, true}) {
      const lm::CompileReport r = estimate(g, {}, fast);
      std::printf(
          "  10-op chain over 256M halves%s: %.3f ms, %zu kernel(s), %.0f GB/s = %.0f%% of copy bandwidth\n",
          fast ? ", fast_math" : "", r.estimated_seconds * 1e3, size_t(r.kernels),
          bytes / r.estimated_seconds / 1e9, 100.0 * (bytes / r.estimated_seconds) / (2.0 * 2 * n / copy));
    }
  }
  {
    lm::Graph g;
    const int64_t past = 4096;
    lm::test::build_decode_block_f16(g, past);
    const lm::CompileReport r = estimate(g);
    const double bytes = decode_step_bytes(past);
    const double roofline = bytes / t.mem_bandwidth;
    std::printf(
        "  decode step (Llama-3-8B block, 4096 past, f16): %.1f us, %zu kernels; bandwidth roofline "
        "%.1f us (%.0f MB): %.0f%% of roofline\n",
        r.estimated_seconds * 1e6, size_t(r.kernels), roofline * 1e6, bytes / 1e6,
        100.0 * roofline / r.estimated_seconds);
  }
  {
    // A prefill of 128 tokens through the same block in f16: its roofline is the weights
    // at memory bandwidth or the products at the f16 tensor-core peak, whichever is longer.
    lm::Graph g;
    const int64_t S = 128;
    lm::test::build_prefill_block_f16(g, S);
    const lm::CompileReport r = estimate(g);
    const double matrix = 4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3.0 * 14336 * 4096;
    const double flops = 2.0 * S * matrix + 2.0 * 32 * S * S * 128;  // (causal: half the scores)
    const double roofline = std::max(2.0 * matrix / t.mem_bandwidth, flops / t.peak_flops_f16);
    std::printf(
        "  prefill (Llama-3-8B block, 128 tokens, f16): %.1f us, %zu kernels; roofline %.1f us: %.0f%% of "
        "roofline\n",
        r.estimated_seconds * 1e6, size_t(r.kernels), roofline * 1e6, 100.0 * roofline / r.estimated_seconds);
  }
  unsetenv("LUMINAL_GPU_MODEL");
}

lm::Graph& block() {
  static lm::Graph g = [] {
    lm::Graph x;
    lm::test::build_model(x, lm::test::BlockConfig::llama_4096(), 1);
    return x;
  }();
  return g;
}

// Compile of the block for sm_90 with NVRTC, nothing cached (a fresh disk cache folder,
// the in-memory plans and modules dropped): the search, lowering, rendering and NVRTC.
void BM_CompileBlockSm90Cold(benchmark::State& state) {
  int i = 0;
  double codegen = 0, plan_hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path dir = fs::temp_directory_path() / ("luminal-gpu-bench-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(i++));
    fs::remove_all(dir);
    lm::gpu::clear_module_memory_cache();
    lm::detail::PlanCache::clear_memory();
    lm::CompileOptions o;
    o.compile_only = true;
    o.cache_dir = dir.string();
    state.ResumeTiming();
    lm::Callable f = lm::compile(block(), lm::Target::parse("cuda:sm_90"), o);
    state.PauseTiming();
    codegen += f.report().codegen_seconds;
    plan_hits += f.report().plan_cached;
    fs::remove_all(dir);
    state.ResumeTiming();
  }
  state.counters["codegen_s"] = codegen / static_cast<double>(state.iterations());
  state.counters["plan_cached"] = plan_hits / static_cast<double>(state.iterations());
}
BENCHMARK(BM_CompileBlockSm90Cold)->Unit(benchmark::kMillisecond)->Iterations(3)->Repetitions(3)->ReportAggregatesOnly();

// The same compile with the plan and the module on disk (as in a new process: nothing in
// memory): the plan cache skips the search, the module cache NVRTC.
void BM_CompileBlockSm90DiskCache(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / ("luminal-gpu-bench-disk-" + std::to_string(::getpid()));
  lm::CompileOptions o;
  o.compile_only = true;
  o.cache_dir = dir.string();
  // Fills the disk cache: from nothing in memory either, or a memory hit left by an earlier
  // benchmark would leave this folder empty.
  lm::gpu::clear_module_memory_cache();
  lm::detail::PlanCache::clear_memory();
  lm::compile(block(), lm::Target::parse("cuda:sm_90"), o);
  double codegen = 0, plan_hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    lm::gpu::clear_module_memory_cache();
    lm::detail::PlanCache::clear_memory();
    state.ResumeTiming();
    lm::Callable f = lm::compile(block(), lm::Target::parse("cuda:sm_90"), o);
    codegen += f.report().codegen_seconds;
    plan_hits += f.report().plan_cached;
  }
  state.counters["codegen_s"] = codegen / static_cast<double>(state.iterations());
  state.counters["plan_cached"] = plan_hits / static_cast<double>(state.iterations());
  fs::remove_all(dir);
}
BENCHMARK(BM_CompileBlockSm90DiskCache)->Unit(benchmark::kMillisecond)->Iterations(5)->Repetitions(3)->ReportAggregatesOnly();

// ---- on the device (tests/gpu/run.sh) --------------------------------------------------

// The driver's memory and one stream of the bench's own; everything allocated is freed.
class DeviceBench {
 public:
  explicit DeviceBench(const lm::cuda::Driver& d) : d_(d) {
    d_.make_current(0);
    stream_ = d_.create_stream();
  }
  ~DeviceBench() {
    for (std::uint64_t a : owned_) d_.free(a);
    d_.destroy_stream(stream_);
  }
  DeviceBench(const DeviceBench&) = delete;
  DeviceBench& operator=(const DeviceBench&) = delete;

  const lm::cuda::Driver& driver() const { return d_; }
  void* stream() const { return stream_; }
  std::uint64_t alloc(size_t bytes) {
    owned_.push_back(d_.alloc(std::max<size_t>(bytes, 1)));
    return owned_.back();
  }
  std::uint64_t upload(const lm::HostTensor& t) {
    const std::uint64_t a = alloc(t.nbytes());
    d_.copy_in(a, t.data(), t.nbytes(), stream_);
    return a;
  }
  /// Seconds of one `enqueue`: the median of 5 rounds of `iters` queued back to back on
  /// the stream, after one warm-up (the host waits for the stream around each round).
  double time(const std::function<void()>& enqueue, int iters) {
    enqueue();
    d_.synchronize(stream_, "the bench's stream");
    std::vector<double> r;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) enqueue();
      d_.synchronize(stream_, "the bench's stream");
      r.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters);
    }
    std::sort(r.begin(), r.end());
    return r[2];
  }
  /// `fn` on device memory: `in` uploaded once, the outputs allocated as a host call of
  /// `fn` gives them (that call also uploads the params), then timed.
  double time_callable(const lm::Callable& fn, const std::map<std::string, lm::HostTensor>& in, int iters) {
    const std::map<std::string, lm::HostTensor> out = fn(in);
    std::map<std::string, lm::DeviceTensor> din, dout;
    for (const auto& [name, t] : in) din[name] = lm::DeviceTensor{t.dtype(), t.shape(), upload(t)};
    for (const auto& [name, t] : out) dout[name] = lm::DeviceTensor{t.dtype(), t.shape(), alloc(t.nbytes())};
    return time(
        [&] {
          const lm::Status s = fn.run_device(din, dout, stream_);
          if (!s) throw std::runtime_error(s.message);
        },
        iters);
  }

 private:
  const lm::cuda::Driver& d_;
  void* stream_ = nullptr;
  std::vector<std::uint64_t> owned_;
};

// A compiled graph's inputs (random, test::random_inputs) with its params bound.
std::map<std::string, lm::HostTensor> bind_random(lm::Callable& fn, const lm::Graph& g, uint64_t seed) {
  std::map<std::string, lm::HostTensor> data = lm::test::random_inputs(*g.impl(), seed), in;
  for (const std::string& p : fn.param_names()) fn.bind(p, data.at(p));
  for (const std::string& i : fn.input_names()) in.emplace(i, data.at(i));
  return in;
}

void device_timings() {
  const lm::Target t = lm::Target::cuda();
  if (!t.is_available()) {
    std::printf("device timings: skipped, no CUDA device (%s)\n", t.unavailable_reason().c_str());
    return;
  }
  std::string why;
  const lm::cuda::Driver* d = lm::cuda::Driver::get(&why);
  if (!d) {
    std::printf("device timings: skipped (%s)\n", why.c_str());
    return;
  }
  DeviceBench b(*d);
  std::printf("device timings on %s (%s), medians of 5 rounds:\n", d->arch(0).c_str(), t.to_string().c_str());

  // A device-to-device copy of 256M halves: the bandwidth reference.
  const int64_t n = int64_t{256} << 20;
  const size_t half_bytes = static_cast<size_t>(n) * 2;
  const std::uint64_t src = b.alloc(half_bytes), dst = b.alloc(half_bytes);
  const double copy_s = b.time([&] { d->copy_device(dst, src, half_bytes, b.stream()); }, 10);
  const double copy_bw = 2.0 * static_cast<double>(half_bytes) / copy_s;
  std::printf("  device-to-device copy of 256M halves: %.3f ms, %.0f GB/s\n", copy_s * 1e3, copy_bw / 1e9);

  {  // f16 GEMM 4096^3: the program, the best generated kernel, cuBLASLt's own choice
    const int64_t m = 4096;
    lm::Graph g;
    gemm_graph(g, m);
    const double flops = 2.0 * m * m * m;
    lm::gpu::BlasCall c;
    c.ab = c.d = lm::f16;
    c.m = c.n = c.k = m;
    c.lda = c.ldb = c.ldd = m;
    const size_t bytes = static_cast<size_t>(m * m) * 2;
    const auto data = lm::test::random_inputs(*g.impl(), 1);  // the program's operands below
    const std::uint64_t A = b.upload(data.at("a")), B = b.upload(data.at("b")), D = b.alloc(bytes),
                        ws = b.alloc(d->blas_workspace());
    const double lib_s = b.time([&] { d->blas_gemm(0, c, A, B, D, ws, b.stream()); }, 20);
    std::printf("  f16 GEMM 4096^3, cuBLASLt (its heuristic's first algorithm): %.3f ms, %.0f TFLOP/s\n",
                lib_s * 1e3, flops / lib_s / 1e12);
    for (const bool generated : {false, true}) {
      lm::CompileOptions o;
      if (generated) o.skip_rules = {"gpu-library-gemm"};
      lm::Callable fn = lm::compile(g, t, o);
      const double s = b.time_callable(fn, bind_random(fn, g, 1), 20);
      std::printf("  f16 GEMM 4096^3, %s (%s): %.3f ms, %.0f TFLOP/s: %.2fx cuBLASLt\n",
                  generated ? "generated kernel only" : "the program", fn.report().codegen.c_str(), s * 1e3,
                  flops / s / 1e12, lib_s / s);
    }
  }
  {  // the 10-op chain, exact and with fast math, against the copy
    lm::Graph g;
    chain_graph(g, n);
    for (const bool fast : {false, true}) {
      lm::CompileOptions o;
      o.fast_math = fast;
      lm::Callable fn = lm::compile(g, t, o);
      const double s = b.time_callable(fn, bind_random(fn, g, 2), 10);
      const double bw = 3.0 * static_cast<double>(half_bytes) / s;
      std::printf("  10-op chain over 256M halves%s: %.3f ms, %.0f GB/s = %.0f%% of the copy's bandwidth\n",
                  fast ? ", fast_math" : "", s * 1e3, bw / 1e9, 100.0 * bw / copy_bw);
    }
  }
  {  // one decode step at Llama-3-8B sizes, 4096 past, against its bytes at the copy's bandwidth
    lm::Graph g;
    const int64_t past = 4096;
    lm::test::build_decode_block_f16(g, past);
    lm::Callable fn = lm::compile(g, t);
    const double s = b.time_callable(fn, bind_random(fn, g, 3), 200);
    const double bytes = decode_step_bytes(past);
    std::printf(
        "  decode step (Llama-3-8B block, 4096 past, f16): %.1f us, %lld kernels; its %.0f MB at the "
        "copy's bandwidth %.1f us: %.0f%% of roofline\n",
        s * 1e6, static_cast<long long>(fn.report().kernels), bytes / 1e6, bytes / copy_bw * 1e6,
        100.0 * bytes / copy_bw / s);
  }
  {  // a 128-token prefill of that block
    lm::Graph g;
    lm::test::build_prefill_block_f16(g, 128);
    lm::Callable fn = lm::compile(g, t);
    const double s = b.time_callable(fn, bind_random(fn, g, 4), 50);
    std::printf("  prefill (Llama-3-8B block, 128 tokens, f16): %.1f us, %lld kernels\n", s * 1e6,
                static_cast<long long>(fn.report().kernels));
  }
}

}  // namespace

int main(int argc, char** argv) {
  print_estimates();
  try {
    device_timings();
  } catch (const std::exception& e) {
    std::printf("device timings: failed: %s\n", e.what());
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
