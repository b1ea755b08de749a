// Shared helpers of the CPU benchmarks: compile a kernel IR program through the real
// renderer + JIT, aligned buffers, and a reporter that keeps each benchmark's median time
// so main() can print ratios measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/c_renderer.hpp"
#include "backends/cpu/jit.hpp"
#include "backends/cpu/kernel_call.hpp"
#include "kernel/kernel_ir.hpp"
#include "luminal/luminal.hpp"

namespace cpu_bench {

/// A tensor of `shape` with values uniform in [offset - scale, offset + scale).
inline luminal::HostTensor rand_tensor(const std::vector<int64_t>& shape, std::mt19937_64& rng, float scale,
                                       float offset = 0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng) + offset;
  return luminal::HostTensor::from(v, shape);
}

struct Compiled {
  std::shared_ptr<const luminal::cpu::JitLibrary> lib;
  luminal::cpu::KernelFn entry = nullptr;
  /// Runs on `threads` threads of the shared pool (0: all of them).
  void run(std::vector<void*>& bufs, const std::vector<int64_t>& syms = {}, int threads = 0) const {
    luminal::cpu::run_generated(entry, bufs.data(), syms.data(), threads);
  }
};

inline Compiled compile(const luminal::kernel::Program& p, luminal::cpu::RenderOptions opt = {}) {
  luminal::cpu::CProgram c = luminal::cpu::render_c(p, opt);
  // LUMINAL_DUMP_C=path: the translation unit, as the executable path does (appended, so
  // a benchmark that compiles several programs keeps all of them).
  if (const char* dump = std::getenv("LUMINAL_DUMP_C"); dump && *dump)
    if (std::FILE* f = std::fopen(dump, "a")) {
      std::fputs(c.source.c_str(), f);
      std::fclose(f);
    }
  Compiled out;
  out.lib = luminal::cpu::Jit::global().compile(c.source);
  out.entry = out.lib->function<luminal::cpu::KernelFn>(c.entry);
  return out;
}

struct AlignedFloats {
  float* data = nullptr;
  size_t n = 0;
  explicit AlignedFloats(size_t count) : n(count) {
    data = static_cast<float*>(std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
  }
  ~AlignedFloats() { std::free(data); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
};

/// Console output as usual, plus the per-iteration real time (seconds) of each run,
/// keyed by benchmark name ("BM_x/512"); aggregates (median...) are kept as "name_median".
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      std::string name = r.benchmark_name();
      if (r.iterations > 0) seconds[name] = r.GetAdjustedRealTime() / 1e9 * time_unit_scale(r.time_unit);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> seconds;

 private:
  static double time_unit_scale(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond:
        return 1;
      case benchmark::kMicrosecond:
        return 1e3;
      case benchmark::kMillisecond:
        return 1e6;
      case benchmark::kSecond:
        return 1e9;
    }
    return 1;
  }
};

}  // namespace cpu_bench
