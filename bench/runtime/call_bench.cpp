// The convenience call (operator(), fresh outputs handed back) against run() into
// caller-owned outputs, on one elementwise kernel with a 16M-float (64 MB) output. Before
// recycled output storage, each convenience call paid ~28 ms of page faults on a ~6 ms
// kernel; now it should cost what run() costs. BM_FreshOutput reproduces the old cost
// (run() into a fresh zero-filled tensor per call). Ratios printed at the end (medians).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <vector>

#include "luminal/luminal.hpp"

namespace {

namespace lm = luminal;
constexpr int64_t kN = int64_t{1} << 24;

struct Fixture {
  lm::Callable fn;
  lm::HostTensor x;
  Fixture() {
    lm::Graph g;
    g.output("y", g.input("x", {kN}) * 2.0f + 1.0f);
    fn = lm::compile(g, lm::Target::cpu());
    std::vector<float> xs(static_cast<size_t>(kN), 0.5f);
    x = lm::HostTensor::from(xs, {kN});
  }
};
Fixture& fixture() {
  static Fixture f;
  return f;
}

void BM_Convenience(benchmark::State& state) {
  Fixture& f = fixture();
  // The inputs built once, as for run(): a map built per call would deep-copy the 64 MB
  // input each time (a cost of the caller's map, not of the call; pass views to avoid it).
  const std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::view(lm::f32, {kN}, f.x.data())}};
  for (auto _ : state) {
    auto out = f.fn(in);
    benchmark::DoNotOptimize(out.at("y").data());
  }
}

void BM_Run(benchmark::State& state) {
  Fixture& f = fixture();
  std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::view(lm::f32, {kN}, f.x.data())}};
  std::map<std::string, lm::HostTensor> out{{"y", lm::HostTensor(lm::f32, {kN})}};
  for (auto _ : state) {
    const lm::Status s = f.fn.run(in, out);
    if (!s) state.SkipWithError(s.message.c_str());
    benchmark::DoNotOptimize(out.at("y").data());
  }
}

// What the convenience call did before recycling: a fresh zero-filled output per call.
void BM_FreshOutput(benchmark::State& state) {
  Fixture& f = fixture();
  std::map<std::string, lm::HostTensor> in{{"x", lm::HostTensor::view(lm::f32, {kN}, f.x.data())}};
  for (auto _ : state) {
    std::map<std::string, lm::HostTensor> out{{"y", lm::HostTensor(lm::f32, {kN})}};
    const lm::Status s = f.fn.run(in, out);
    if (!s) state.SkipWithError(s.message.c_str());
    benchmark::DoNotOptimize(out.at("y").data());
  }
}

BENCHMARK(BM_FreshOutput)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(7)->ReportAggregatesOnly(true);
BENCHMARK(BM_Convenience)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(7)->ReportAggregatesOnly(true);
BENCHMARK(BM_Run)->Unit(benchmark::kMillisecond)->UseRealTime()->Repetitions(7)->ReportAggregatesOnly(true);

class Ratio : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.aggregate_name == "median") {
        const std::string n = r.benchmark_name();
        (n.find("Convenience") != std::string::npos ? conv_ : n.find("Fresh") != std::string::npos ? fresh_ : run_) =
            r.GetAdjustedRealTime();
      }
    ConsoleReporter::ReportRuns(runs);
  }
  double conv_ = 0, run_ = 0, fresh_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  Ratio reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  if (reporter.conv_ > 0 && reporter.run_ > 0)
    std::printf("convenience call / run(): %.2f ms / %.2f ms = %.2fx (a fresh output per call: %.2f ms = %.2fx)\n",
                reporter.conv_, reporter.run_, reporter.conv_ / reporter.run_, reporter.fresh_,
                reporter.fresh_ / reporter.run_);
  benchmark::Shutdown();
}
