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
// One input in 16 (by hash) makes one of its ops invalid (random_program.hpp: invalid_op):
// building must then throw the lm::Error subclass the API defines for it (never another
// exception, an InternalError or a crash), or, for a size only a shape guard can check,
// build a program that the call's validation (the Callable's own) refuses with a
// RuntimeError unless the bound dims satisfy it. A valid op sequence must build and
// validate. LUMINAL_FUZZ_STATS=1 prints at exit how many inputs reached each stage and
// the CPU time of each stage.
#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <typeinfo>

#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "reliability/lowered_eval.hpp"
#include "reliability/random_program.hpp"
#include "runtime/executable.hpp"

namespace lm = luminal;

namespace {

struct Stats {
  uint64_t inputs = 0, built = 0, interpreted = 0, compiled = 0, full_budget = 0, gpu = 0, jit = 0,
           interpreted_steps = 0;
  uint64_t invalid = 0, shape_errors = 0, dtype_errors = 0, guarded = 0, refused_at_call = 0;
  // CPU seconds: building + validation + interpretation, the CPU search, the plan run,
  // the kernel-IR run, the GPU stage, the C compiler sample.
  double t_build = 0, t_search = 0, t_plan = 0, t_lowered = 0, t_gpu = 0, t_jit = 0;
};
Stats stats;

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Adds the CPU time since the last call to `slot`.
struct Lap {
  double t = cpu_now();
  void to(double& slot) {
    const double n = cpu_now();
    slot += n - t;
    t = n;
  }
};

void print_stats() {
  auto u = [](uint64_t x) { return static_cast<unsigned long long>(x); };
  std::fprintf(stderr,
               "fuzz_graph_build: %llu inputs (%llu with an invalid op: %llu ShapeError, %llu DTypeError, "
               "%llu built with a shape guard, %llu refused at the call by a guard), %llu built a program, "
               "%llu interpreted, %llu compiled and "
               "matched (plan + kernel IR; %llu searched with the full budget; %llu plan steps left to the "
               "interpreter), %llu also for a GPU target, %llu also through the C compiler\n",
               u(stats.inputs), u(stats.invalid), u(stats.shape_errors), u(stats.dtype_errors),
               u(stats.guarded), u(stats.refused_at_call), u(stats.built), u(stats.interpreted),
               u(stats.compiled), u(stats.full_budget), u(stats.interpreted_steps), u(stats.gpu),
               u(stats.jit));
  const double n = stats.inputs ? static_cast<double>(stats.inputs) : 1.0;
  std::fprintf(
      stderr,
      "fuzz_graph_build: CPU ms per input: build + validate + interpret %.3f, CPU search %.3f, plan run "
      "%.3f, kernel IR run %.3f, GPU stage %.3f, C compiler sample %.3f (its child processes not counted)\n",
      1e3 * stats.t_build / n, 1e3 * stats.t_search / n, 1e3 * stats.t_plan / n, 1e3 * stats.t_lowered / n,
      1e3 * stats.t_gpu / n, 1e3 * stats.t_jit / n);
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

// Building `rp` threw `e`: right only for an invalid op, with the subclass it expects.
void check_build_error(const lm::test::RandomProgram& rp, const lm::Error& e) {
  if (dynamic_cast<const lm::InternalError*>(&e)) fail("building threw an InternalError: ", e.what());
  if (rp.invalid.empty()) fail("a valid op sequence was refused: ", e.what());
  const bool shape = dynamic_cast<const lm::ShapeError*>(&e), dtype = dynamic_cast<const lm::DTypeError*>(&e);
  if (rp.expected_error) {
    const bool right = std::string(rp.expected_error) == "ShapeError" ? shape : dtype;
    if (!right)
      fail("an invalid op threw the wrong lm::Error subclass: ",
           rp.invalid + ": expected " + rp.expected_error + ", got " + typeid(e).name() + ": " + e.what());
  }
  stats.shape_errors += shape;
  stats.dtype_errors += dtype;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ++stats.inputs;
  Lap lap;
  const uint64_t hash = hash_bytes(data, size);
  lm::test::ByteChooser ch(data, size);
  lm::Graph g;
  lm::test::RandomProgram rp;
  // One input in 16 gets an invalid op at one of the first 8 steps (reached when the
  // program has that many ops). Decided by hash, so the other inputs keep their programs.
  const int invalid_at = (hash >> 40) % 16 == 5 ? static_cast<int>((hash >> 44) % 8) : -1;
  try {
    lm::test::build_random_program_into(rp, g, ch, 1, 8, "", invalid_at);
  } catch (const lm::Error& e) {
    ++stats.invalid;
    check_build_error(rp, e);
    lap.to(stats.t_build);
    return 0;
  } catch (const std::exception& e) {
    fail("building threw an exception that is not an lm::Error: ",
         std::string(typeid(e).name()) + ": " + e.what());
  } catch (...) {
    fail("building threw something that is not a std::exception", "");
  }
  if (rp.invalid_accepted) fail("an invalid op was accepted: ", rp.invalid);
  if (!rp.invalid.empty()) ++stats.invalid, ++stats.guarded;
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
  // The Callable's validation of these inputs (the interpreter assumes it was done): a
  // shape guard refuses dims that break it with a RuntimeError.
  try {
    (void)lm::detail::validate_call(*g.impl(), in, {});
  } catch (const lm::RuntimeError& e) {
    if (rp.invalid.empty()) fail("the inputs of a valid program were refused: ", e.what());
    ++stats.refused_at_call;
    lap.to(stats.t_build);
    return 0;
  } catch (const lm::Error& e) {
    fail("validating a call threw another lm::Error than RuntimeError: ", e.what());
  }
  std::map<std::string, const lm::HostTensor*> ptrs;
  for (const auto& [k, t] : in) ptrs.emplace(k, &t);
  std::map<std::string, lm::HostTensor> want;
  try {
    want = lm::detail::reference::run(*g.impl(), dims, ptrs);
  } catch (const lm::Error& e) {
    fail("direct interpretation of a validated call failed: ", e.what());
  }
  ++stats.interpreted;
  lap.to(stats.t_build);
  lm::CompileOptions o;
  o.time_budget_seconds = 0.5;
  o.node_limit = hash % 8 == 0 ? 5000 : 100;
  o.iteration_limit = 6;
  stats.full_budget += o.node_limit == 5000;
  try {
    const lm::compiler::CompiledProgram c = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), o);
    lap.to(stats.t_search);
    if (!close(c.exe->run(dims, ptrs), want, rp.has_half))
      fail("the extracted plan (kernel bodies interpreted) differs from direct interpretation", "");
    lap.to(stats.t_plan);
    int64_t left = 0;
    if (!close(lm::test::run_lowered(*c.plan, dims, ptrs, &left), want, rp.has_half))
      fail("the plan lowered to kernel IR (evaluated) differs from direct interpretation", "");
    lap.to(stats.t_lowered);
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
      lap.to(stats.t_gpu);
    }
    if (jit_every && (hash >> 3) % jit_every == 0) {
      lm::Callable f = lm::compile(g, lm::Target::cpu(), o);
      if (!close(f(in), want, rp.has_half))
        fail("the C-compiled program differs from direct interpretation", "");
      ++stats.jit;
      lap.to(stats.t_jit);
    }
  } catch (const lm::Error& e) {
    fail("a graph that interprets failed to compile: ", e.what());
  }
  return 0;
}
