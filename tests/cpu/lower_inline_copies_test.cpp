// Regression test for the CPU lowering's bound on inlined copies: bodies whose views read
// one computed node at many indices (balanced product trees, log-step scans) used to be
// inlined into one expression with a copy per index -- 4096 loads per element for prod
// over one symbolic axis (padded to its bound), 4096^2 over two, until the process ran
// out of memory. Such nodes are now computed once into a buffer by their own kernel.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "kernel/lower/lower_spec.hpp"
#include "ir/tensor_lang.hpp"
#include "kernel/kernel_eval.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;
namespace kn = luminal::kernel;

namespace {

// Distinct expression nodes reachable from `e` (the kernel's size as the renderer sees it).
void count_nodes(const kn::Expr& e, std::set<const kn::ExprNode*>& seen) {
  if (!seen.insert(&e.node()).second) return;
  for (const auto& a : e.node().args) count_nodes(a, seen);
}

// A one-kernel body of `g` (its input named "%0", its output "out"), lowered alone.
kn::Program lower_graph(const lm::Graph& g, int* kernels_out = nullptr) {
  lm::ir::KernelSpec spec;
  spec.kind = lm::ir::KernelKind::Elementwise;
  spec.body = g.impl();
  spec.slots = 1;
  kn::Program prog;
  const auto& body = *g.impl();
  auto elements = [&](uint32_t node) {
    kn::Index n(1);
    for (const auto& d : body.nodes[node].shape) n = n * lm::kernel::lower::dim_index(d, prog);
    return n;
  };
  prog.buffers.push_back({"x", lm::f32, elements(body.inputs.at(0)), kn::BufferRole::Input});
  prog.buffers.push_back({"out", lm::f32, elements(body.outputs.at(0).second), kn::BufferRole::Output});
  const auto failed = lm::kernel::lower::lower_spec(spec, {0}, 1, "k", prog);
  const bool ok = !failed;
  INFO((failed ? failed->why : std::string()));
  REQUIRE(ok);
  if (kernels_out) *kernels_out = static_cast<int>(prog.kernels.size());
  return prog;
}

}  // namespace

TEST_CASE("lowering: prod over two symbolic axes stays small and exact", "[cpu][lower]") {
  lm::Graph g;
  const lm::Dim n = g.dim("n", 1, 4096), m = g.dim("m", 1, 4096);
  lm::Tensor x = g.input("%0", {n, m, 3});
  g.output("out", lm::prod(x, {0, 1}));
  kn::Program prog = lower_graph(g);
  kn::validate(prog);
  // Every kernel is a small expression: no computed node is inlined more than a few
  // times (before: a 4096^2-leaf tree in one kernel).
  for (const auto& k : prog.kernels) {
    std::set<const kn::ExprNode*> seen;
    count_nodes(k.store.value, seen);
    INFO(k.name);
    CHECK(seen.size() < 400);
  }
  CHECK(prog.kernels.size() < 40);

  // Exact values at a few run-time sizes, through the IR evaluator.
  for (auto [nv, mv] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {2, 7}}) {
    std::vector<float> xs(static_cast<size_t>(nv * mv * 3));
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = (i % 5 == 0 ? -1.f : 1.f) * (0.5f + 0.25f * (i % 4));
    std::vector<std::vector<float>> storage(prog.buffers.size());
    std::vector<void*> ptrs;
    const std::map<std::string, int64_t> syms{{"n", nv}, {"m", mv}};
    for (size_t b = 0; b < prog.buffers.size(); ++b) {
      storage[b].resize(static_cast<size_t>(prog.buffers[b].elements.evaluate({}, syms)));
      ptrs.push_back(storage[b].data());
    }
    storage[0] = xs;
    ptrs[0] = storage[0].data();
    kn::evaluate(prog, ptrs, syms);
    for (int64_t c = 0; c < 3; ++c) {
      double want = 1;
      for (int64_t i = 0; i < nv * mv; ++i) want *= xs[static_cast<size_t>(i * 3 + c)];
      INFO("n=" << nv << " m=" << mv << " c=" << c);
      CHECK(storage[1][static_cast<size_t>(c)] == Approx(want).epsilon(1e-5));
    }
  }
}

TEST_CASE("lowering: a log-step scan body is not inlined exponentially", "[cpu][lower]") {
  // Hillis-Steele scan over a symbolic axis, as one body: s += shift(s) twelve times.
  lm::Graph g;
  const lm::Dim n = g.dim("n", 1, 4096);
  lm::Tensor s = g.input("%0", {2, n});
  for (int64_t k = 1; k < 4096; k *= 2) s = s + lm::slice(lm::pad(s, {{0, 0}, {k, 0}}), 1, 0, n);
  g.output("out", s);
  kn::Program prog = lower_graph(g);
  kn::validate(prog);
  for (const auto& k : prog.kernels) {
    std::set<const kn::ExprNode*> seen;
    count_nodes(k.store.value, seen);
    CHECK(seen.size() < 400);
  }
}

TEST_CASE("CPU target: prod and cumsum over symbolic dims run as generated code", "[cpu][e2e]") {
  lm::Graph g;
  const lm::Dim n = g.dim("n", 1, 4096), m = g.dim("m", 1, 4096);
  lm::Tensor x = g.input("x", {n, m});
  g.output("p", lm::prod(x, {0, 1}));
  g.output("c", lm::cumsum(x, 1));
  lm::Callable fn = lm::compile(g, lm::Target::cpu());
  CHECK(fn.report().interpreted_kernels == 0);
  const std::vector<float> xs{1.5f, -2.f, 0.5f, 3.f, -1.f, 2.f};
  const auto out = fn({{"x", lm::HostTensor::from(xs, {2, 3})}});
  CHECK(out.at("p").to_f32().at(0) == Approx(1.5 * -2 * 0.5 * 3 * -1 * 2));
  const std::vector<float> want{1.5f, -0.5f, 0.f, 3.f, 2.f, 4.f};
  const auto got = out.at("c").to_f32();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]));
}
