// Serving figures of the CPU target (docs/serving.md), in one run:
//  * a decode step of bench/cpu/model_bench's decoder block (d 2048, 16 heads, 4 KV heads,
//    FFN 5632, 512 past) on 2 threads, with no environment variable: quiet, beside one
//    process spinning on a core, beside two; ratios to quiet;
//  * request threads each calling one shared Callable with 1 thread (a small MLP whose
//    weights stay in cache, so the cores are what is shared): aggregate throughput of 8
//    request threads vs 1, and the process's threads during the run;
//  * a 10-kernel program of 4 KB tensors: time per call.
// Usage: cpu_serving_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "graph/graph_impl.hpp"
#include "model_models.hpp"

namespace lm = luminal;

namespace {

using cpu_bench::rand_tensor;

struct Model {
  lm::Graph g;
  lm::Callable f;
  std::map<std::string, lm::HostTensor> in;
};

// Compiles with `o`, binds random params (norm weights near 1), makes the inputs.
void prepare(Model& m, const lm::CompileOptions& o,
             const std::map<std::string, std::vector<int64_t>>& inputs) {
  m.f = lm::compile(m.g, lm::Target::cpu(), o);
  std::mt19937_64 rng(42);
  const auto& gi = *m.g.impl();
  for (uint32_t id : gi.params) {
    const auto& n = gi.nodes[id];
    std::vector<int64_t> shape;
    for (const auto& d : n.shape) shape.push_back(*d.as_constant());
    m.f.bind(n.name, rand_tensor(shape, rng, 0.05f, n.name.find("norm") != std::string::npos ? 1.f : 0.f));
  }
  for (const auto& [name, shape] : inputs) {
    if (name == "pos") {
      m.in.insert_or_assign(name, lm::HostTensor::from(std::vector<int32_t>{512}, shape));
    } else {
      m.in.insert_or_assign(name, rand_tensor(shape, rng, 1.f));
    }
  }
}

int process_threads() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// Processes that each keep a core busy while they live (the other tenants of a server).
class Spinners {
 public:
  explicit Spinners(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;
      }
      if (p > 0) pids_.push_back(p);
    }
  }
  ~Spinners() {
    for (pid_t p : pids_) ::kill(p, SIGKILL);
    for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

Model& decode() {
  static Model m = [] {
    Model x;
    model_bench::build_decode(x.g, model_bench::Llama{}, 512);
    lm::CompileOptions o;
    o.threads = 2;
    prepare(x, o, {{"x", {1, 2048}}, {"pos", {1}}, {"k_cache", {4, 512, 128}}, {"v_cache", {4, 512, 128}}});
    return x;
  }();
  return m;
}

void BM_DecodeBeside(benchmark::State& state) {
  Model& m = decode();
  std::map<std::string, lm::HostTensor> out;
  if (!m.f.run(m.in, out)) state.SkipWithError("decode failed");
  Spinners spin(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    lm::Status s = m.f.run(m.in, out);
    if (!s) state.SkipWithError(s.message.c_str());
  }
}

// A request: a 2-layer MLP 256 -> 1024 -> 256 at batch 8 (2 MB of weights).
Model& request_model() {
  static Model m = [] {
    Model x;
    lm::Tensor in = x.g.input("x", {8, 256});
    lm::Tensor h = lm::gelu(lm::linear(in, x.g.param("w1", {1024, 256}), x.g.param("b1", {1024})));
    x.g.output("y", lm::linear(h, x.g.param("w2", {256, 1024}), x.g.param("b2", {256})));
    lm::CompileOptions o;
    o.threads = 1;
    prepare(x, o, {{"x", {8, 256}}});
    return x;
  }();
  return m;
}

std::atomic<int> g_most_threads{0};

void BM_Requests(benchmark::State& state) {
  Model& m = request_model();
  std::map<std::string, lm::HostTensor> out;
  if (!m.f.run(m.in, out)) state.SkipWithError("request failed");
  for (auto _ : state) {
    lm::Status s = m.f.run(m.in, out);
    if (!s) state.SkipWithError(s.message.c_str());
  }
  const int n = process_threads();
  int most = g_most_threads.load();
  while (n > most && !g_most_threads.compare_exchange_weak(most, n)) {
  }
  state.SetItemsProcessed(state.iterations());
}

// Small kernels over 4 KB tensors: x [32, 32] normalized five times along alternating
// axes, t / sum(t * t + 1): each a reduction and an elementwise kernel.
Model& small_program() {
  static Model m = [] {
    Model x;
    lm::Tensor t = x.g.input("x", {32, 32});
    for (int i = 0; i < 5; ++i) t = t / lm::sum(t * t + 1.f, {i % 2}, true);
    x.g.output("y", t);
    prepare(x, {}, {{"x", {32, 32}}});
    return x;
  }();
  return m;
}

// Arg: threads per call (0: the default, all of the pool).
void BM_SmallProgram(benchmark::State& state) {
  Model& m = small_program();
  lm::CallOptions call;
  call.threads = static_cast<int>(state.range(0));
  std::map<std::string, lm::HostTensor> out;
  if (!m.f.run(m.in, out, call)) state.SkipWithError("small program failed");
  for (auto _ : state) {
    lm::Status s = m.f.run(m.in, out, call);
    if (!s) state.SkipWithError(s.message.c_str());
  }
  state.counters["kernels"] = static_cast<double>(m.f.report().generated_kernels);
}

BENCHMARK(BM_DecodeBeside)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_Requests)
    ->Threads(1)
    ->Threads(8)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);
BENCHMARK(BM_SmallProgram)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const int threads_before = process_threads();
  cpu_bench::RecordingReporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  auto sec = [&](const std::string& n) {
    auto it = rep.seconds.find(n + "/repeats:5/real_time_median");
    return it == rep.seconds.end() ? 0.0 : it->second;
  };
  const double q = sec("BM_DecodeBeside/0"), s1 = sec("BM_DecodeBeside/1"), s2 = sec("BM_DecodeBeside/2");
  std::printf("\nServing figures (medians):\n");
  if (q > 0) {
    std::printf("  decode step, 2 threads: quiet %.2f ms", q * 1e3);
    if (s1 > 0) std::printf("; beside 1 spinning process %.2f ms (%.2fx)", s1 * 1e3, s1 / q);
    if (s2 > 0) std::printf("; beside 2 %.2f ms (%.2fx)", s2 * 1e3, s2 / q);
    std::printf("\n");
  }
  // Google Benchmark's per-iteration real time of a threaded run is the run's wall time
  // over the iterations of all its threads (its items_per_second is the inverse): the
  // aggregate throughput is 1 / that.
  auto req = [&](int threads) {
    auto it = rep.seconds.find("BM_Requests/repeats:5/real_time/threads:" + std::to_string(threads) + "_median");
    return it == rep.seconds.end() ? 0.0 : it->second;
  };
  const double r1 = req(1), r8 = req(8);
  if (r1 > 0 && r8 > 0)
    std::printf(
        "  requests, 1 thread per call: 1 request thread %.0f calls/s, 8 request threads %.0f calls/s "
        "(%.2fx); "
        "threads of the process: %d before, at most %d during (pool workers + callers)\n",
        1 / r1, 1 / r8, r1 / r8, threads_before, g_most_threads.load());
  const double sp = sec("BM_SmallProgram/0"), sp1 = sec("BM_SmallProgram/1");
  if (sp > 0)
    std::printf("  %lld-kernel program of 4 KB tensors: %.2f us per call (all threads), %.2f us (1 thread)\n",
                static_cast<long long>(small_program().f.report().generated_kernels), sp * 1e6, sp1 * 1e6);
  benchmark::Shutdown();
  return 0;
}
