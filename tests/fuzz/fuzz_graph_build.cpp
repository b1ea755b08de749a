// libFuzzer target: graph building from random op sequences (the differential test's
// generator, tests/reliability/random_program.hpp, driven by the input bytes). Each
// program either throws an lm::Error while it is built, or compiles (the whole search:
// e-graph, rules, extraction; reference target) and matches direct interpretation.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backends/reference/interpreter.hpp"
#include "reliability/random_program.hpp"

namespace lm = luminal;

namespace {
bool close(const std::map<std::string, lm::HostTensor>& got, const std::map<std::string, lm::HostTensor>& want,
           bool half) {
  for (const auto& [name, w] : want) {
    const lm::HostTensor& a = got.at(name);
    if (a.shape() != w.shape() || a.dtype() != w.dtype()) return false;
    const auto x = a.to_f32(), y = w.to_f32();
    double scale = 0;
    for (float v : y)
      if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(y[i]) || std::isnan(x[i]) || std::isinf(y[i]) || std::isinf(x[i])) {
        if (std::isnan(y[i]) != std::isnan(x[i]) || (!std::isnan(y[i]) && x[i] != y[i])) return false;
        continue;
      }
      const double tol = half ? 3e-2 : 2e-3;
      if (std::fabs(double(x[i]) - y[i]) > tol * (std::fabs(double(y[i])) + 1e-2 * scale + 1e-6)) return false;
    }
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lm::test::ByteChooser ch(data, size);
  lm::Graph g;
  lm::test::RandomProgram rp;
  try {
    rp = lm::test::build_random_program(g, ch, 1, 8);
  } catch (const lm::Error&) {
    return 0;
  }
  const lm::DimBindings dims{{"B", 1 + static_cast<int64_t>(ch.pick(4))}};
  std::map<std::string, lm::HostTensor> in;
  uint32_t salt = 1;
  for (uint32_t id : g.impl()->inputs) {
    const auto& n = g.impl()->nodes[id];
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (const lm::Dim& d : n.shape) {
      shape.push_back(d.evaluate(dims));
      count *= shape.back();
    }
    std::vector<float> v(static_cast<size_t>(count));
    for (float& f : v) f = static_cast<float>((salt = salt * 1103515245u + 12345u) % 4001) / 1000.0f - 2.0f;
    in.emplace(n.name, lm::HostTensor::from(v, shape));
  }
  std::map<std::string, const lm::HostTensor*> ptrs;
  for (const auto& [k, t] : in) ptrs.emplace(k, &t);
  std::map<std::string, lm::HostTensor> want;
  try {
    want = lm::detail::reference::run(*g.impl(), dims, ptrs);
  } catch (const lm::Error&) {
    return 0;
  }
  lm::CompileOptions o;
  o.time_budget_seconds = 0.5;
  o.node_limit = 5000;
  o.iteration_limit = 6;
  try {
    lm::Callable f = lm::compile(g, lm::Target::reference(), o);
    if (!close(f(in), want, rp.has_half)) {
      std::fprintf(stderr, "mismatch between the compiled program and direct interpretation\n");
      std::abort();
    }
  } catch (const lm::Error& e) {
    std::fprintf(stderr, "a graph that interprets failed to compile: %s\n", e.what());
    std::abort();
  }
  return 0;
}
