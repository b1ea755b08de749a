// libFuzzer target: graph building from random op sequences (the differential test's
// generator, tests/reliability/random_program.hpp, driven by the input bytes). Each
// program either throws an lm::Error while it is built, or compiles and matches direct
// interpretation of the graph (reference::run). Every input that builds runs:
//  1. the CPU target's whole search (compiler::compile_graph: e-graph, the math, fusion
//     and CPU lowering rules, extraction) -> a kernel plan. Its node budget decides how
//     far fusion gets: 1-8 ops fuse completely (about 1.5 kernels per program) at 1000
//     nodes and more, hardly at 100 (about 15), and that search is most of an input's
//     cost (~4 ms against ~0.9 ms in a Release build). So the input's hash picks it: one
//     input in 8 searches with 5000 nodes, the others with 100 -- the budget only ever
//     stops rules early, and a stopped search must still give a right program;
//  2. that plan with each kernel body interpreted (checks the rewrites and extraction);
//  3. that plan lowered to kernel IR (cpu::lower_plan, shared by every backend) and run by
//     the in-process kernel-IR evaluator (tests/reliability/lowered_eval.hpp: checks the
//     lowering; every load and store bounds-checked, unwritten elements show as NaN);
//  4. for one input in 8 (by hash), 1-3 again for a GPU target (cuda:sm_90 or hip:gfx90a:
//     its schedule rules, the GPU backends' lowering options).
// Rendering C and compiling it (0.1-1 s per program) is what a whole compile costs; it
// runs for a deterministic sample only: LUMINAL_FUZZ_JIT_EVERY=K compiles one input in
// K (by hash) with lm::compile(Target::cpu()) (the public path: plan cache,
// C renderer, JIT, Callable) and compares those too (0 or unset: never; ctest sets 100).
// LUMINAL_FUZZ_STATS=1 prints at exit how many inputs reached each stage.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "reliability/lowered_eval.hpp"
#include "reliability/random_program.hpp"

namespace lm = luminal;

namespace {

struct Stats {
  uint64_t inputs = 0, built = 0, interpreted = 0, compiled = 0, full_budget = 0, gpu = 0, jit = 0,
           interpreted_steps = 0;
};
Stats stats;

void print_stats() {
  auto u = [](uint64_t x) { return static_cast<unsigned long long>(x); };
  std::fprintf(stderr,
               "fuzz_graph_build: %llu inputs, %llu built a program, %llu interpreted, %llu compiled and "
               "matched (plan + kernel IR; %llu searched with the full budget; %llu plan steps left to the "
               "interpreter), %llu also for a GPU target, %llu also through the C compiler\n",
               u(stats.inputs), u(stats.built), u(stats.interpreted), u(stats.compiled), u(stats.full_budget),
               u(stats.interpreted_steps), u(stats.gpu), u(stats.jit));
}

uint64_t env_u64(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : 0;
}

const uint64_t jit_every = env_u64("LUMINAL_FUZZ_JIT_EVERY");
const bool want_stats = [] {
  if (env_u64("LUMINAL_FUZZ_STATS")) std::atexit(print_stats);
  return true;
}();

uint64_t hash_bytes(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

bool close(const std::map<std::string, lm::HostTensor>& got,
           const std::map<std::string, lm::HostTensor>& want, bool half) {
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) return false;
    const lm::HostTensor& a = it->second;
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
      if (std::fabs(double(x[i]) - y[i]) > tol * (std::fabs(double(y[i])) + 1e-2 * scale + 1e-6))
        return false;
    }
  }
  return true;
}

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_graph_build: %s%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ++stats.inputs;
  lm::test::ByteChooser ch(data, size);
  lm::Graph g;
  lm::test::RandomProgram rp;
  try {
    rp = lm::test::build_random_program(g, ch, 1, 8);
  } catch (const lm::Error&) {
    return 0;
  }
  ++stats.built;
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
  ++stats.interpreted;
  const uint64_t hash = hash_bytes(data, size);
  lm::CompileOptions o;
  o.time_budget_seconds = 0.5;
  o.node_limit = hash % 8 == 0 ? 5000 : 100;
  o.iteration_limit = 6;
  stats.full_budget += o.node_limit == 5000;
  try {
    const lm::compiler::CompiledProgram c = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), o);
    if (!close(c.exe->run(dims, ptrs), want, rp.has_half))
      fail("the extracted plan (kernel bodies interpreted) differs from direct interpretation", "");
    int64_t left = 0;
    if (!close(lm::test::run_lowered(*c.plan, dims, ptrs, &left), want, rp.has_half))
      fail("the plan lowered to kernel IR (evaluated) differs from direct interpretation", "");
    stats.interpreted_steps += static_cast<uint64_t>(left);
    ++stats.compiled;
    if ((hash >> 20) % 8 == 0) {
      // A GPU target's search (its schedule rules) and the GPU backends' lowering: the
      // kernel IR their renderers and the emulator start from.
      const lm::Target gpu = lm::Target::parse((hash >> 23) % 2 ? "cuda:sm_90" : "hip:gfx90a");
      const lm::compiler::CompiledProgram cg = lm::compiler::compile_graph(*g.impl(), gpu, o);
      if (!close(cg.exe->run(dims, ptrs), want, rp.has_half))
        fail("the GPU target's plan (kernel bodies interpreted) differs from direct interpretation", "");
      if (!close(lm::test::run_lowered(*cg.plan, dims, ptrs, nullptr, {}), want, rp.has_half))
        fail("the GPU target's plan lowered to kernel IR (evaluated) differs from direct interpretation", "");
      ++stats.gpu;
    }
    if (jit_every && (hash >> 3) % jit_every == 0) {
      lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
      if (!close(f(in), want, rp.has_half))
        fail("the C-compiled program differs from direct interpretation", "");
      ++stats.jit;
    }
  } catch (const lm::Error& e) {
    fail("a graph that interprets failed to compile: ", e.what());
  }
  return 0;
}
