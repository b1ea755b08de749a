// The main() of a benchmark every MPI rank runs: each runs the same fixed iterations (the
// calls are collectives), and only rank 0 reports.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <vector>

namespace luminal::bench {

// Ranks other than 0 run the same iterations but print nothing.
class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

inline int run_on_every_rank(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (r && std::atoi(r) != 0) {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace luminal::bench
