// The shared lowering's recognisers (kernel/lower/recognize.hpp) and its failures as
// values: which bodies are GEMMs and gathers, where a GEMM's tile and implementation come
// from, and the reason a body that cannot be lowered reports (the program left as it was).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/kernel_body.hpp"
#include "ir/tensor_lang.hpp"
#include "kernel/kernel_eval.hpp"
#include "kernel/lower/lower_spec.hpp"
#include "kernel/lower/recognize.hpp"
#include "luminal/luminal.hpp"

namespace lm = luminal;
namespace kn = luminal::kernel;
namespace kl = luminal::kernel::lower;

namespace {

uint32_t root_of(const lm::Graph& g) { return g.impl()->outputs.at(0).second; }

lm::ir::KernelSpec spec_of(const lm::Graph& g, lm::ir::KernelKind kind, int slots) {
  lm::ir::KernelSpec spec;
  spec.kind = kind;
  spec.body = g.impl();
  spec.slots = slots;
  return spec;
}

// One buffer per slot ("%0", "%1", ...) and one for the result; returns the program.
kn::Program buffers_for(const lm::Graph& g, int slots) {
  kn::Program prog;
  const auto& body = *g.impl();
  auto elements = [&](uint32_t node) {
    kn::Index n(1);
    for (const auto& d : body.nodes[node].shape) n = n * kl::dim_index(d, prog);
    return n;
  };
  for (int i = 0; i < slots; ++i)
    prog.buffers.push_back({"in" + std::to_string(i),
                            body.nodes[body.inputs.at(static_cast<size_t>(i))].dtype,
                            elements(body.inputs.at(static_cast<size_t>(i))), kn::BufferRole::Input});
  prog.buffers.push_back({"out", body.nodes[root_of(g)].dtype, elements(root_of(g)), kn::BufferRole::Output});
  return prog;
}

}  // namespace

TEST_CASE("recognize_gemm: a product with an elementwise tail, and what is not one", "[cpu][lower]") {
  lm::Graph g;
  g.output("out", lm::relu(lm::matmul(g.input("%0", {4, 8}), g.input("%1", {8, 5}))));
  auto m = kl::recognize_gemm(*g.impl(), root_of(g));
  REQUIRE(m.plan);
  CHECK(g.impl()->nodes[m.plan->reduce].op == lm::detail::PrimOp::SumReduce);
  CHECK(g.impl()->nodes[m.plan->mul].op == lm::detail::PrimOp::Mul);

  lm::Graph h;
  h.output("out", lm::max(h.input("%0", {4, 8}) * 2.0f, {1}));
  auto n = kl::recognize_gemm(*h.impl(), root_of(h));
  CHECK_FALSE(n.plan);
  CHECK(!n.why.empty());
}

TEST_CASE("a GEMM's tile comes from the spec, its implementation from the kind or an option",
          "[cpu][lower]") {
  lm::Graph g;
  g.output("out", lm::matmul(g.input("%0", {16, 32}), g.input("%1", {32, 24})));
  lm::ir::KernelSpec spec = spec_of(g, lm::ir::KernelKind::Gemm, 2);
  spec.launch = {4, 16, 128};
  kl::Options opt;
  opt.gemm_tile = [](const lm::ir::KernelSpec& s) {
    kn::GemmTile t;
    t.mr = static_cast<int>(s.launch.at(0));
    t.nr = static_cast<int>(s.launch.at(1));
    t.kc = static_cast<int>(s.launch.at(2));
    return t;
  };
  kn::Program prog = buffers_for(g, 2);
  REQUIRE_FALSE(kl::lower_spec(spec, {0, 1}, 2, "k", prog, opt));
  REQUIRE(prog.kernels.size() == 1);
  const kn::Kernel& k = prog.kernels[0];
  REQUIRE(k.kind == kn::KernelKind::Gemm);
  CHECK(k.gemm->tile.mr == 4);
  CHECK(k.gemm->tile.nr == 16);
  CHECK(k.gemm->tile.kc == 128);
  CHECK(k.gemm->impl == kn::GemmImpl::Generated);
  kn::validate(prog);

  opt.gemm = kl::GemmChoice::Library;
  kn::Program lib = buffers_for(g, 2);
  REQUIRE_FALSE(kl::lower_spec(spec, {0, 1}, 2, "k", lib, opt));
  CHECK(lib.kernels.at(0).gemm->impl == kn::GemmImpl::Library);
}

TEST_CASE("recognize_gather takes a bare gather only", "[cpu][lower]") {
  lm::Graph g;
  lm::Tensor table = g.input("%0", {10, 4});
  lm::Tensor ids = g.input("%1", {3}, lm::i32);
  g.output("out", lm::embedding(table, ids));
  auto m = kl::recognize_gather(*g.impl(), root_of(g));
  REQUIRE(m.plan);
  CHECK(m.plan->table == g.impl()->inputs.at(0));

  lm::Graph h;
  h.output("out", h.input("%0", {4}) * 2.0f);
  CHECK_FALSE(kl::recognize_gather(*h.impl(), root_of(h)).plan);
}

TEST_CASE("a body that cannot be lowered is a Failure with its reason; the program is unchanged",
          "[cpu][lower]") {
  lm::Graph g;
  lm::Tensor table = g.input("%0", {10, 4});
  lm::Tensor ids = g.input("%1", {3}, lm::i32);
  g.output("out", lm::embedding(table, ids) * 2.0f);  // a gather fused with other ops
  kn::Program prog = buffers_for(g, 2);
  const size_t buffers = prog.buffers.size();
  auto failed = kl::lower_spec(spec_of(g, lm::ir::KernelKind::Elementwise, 2), {0, 1}, 2, "k", prog);
  REQUIRE(failed);
  CHECK(failed->why.find("gather fused with other ops") != std::string::npos);
  CHECK(prog.kernels.empty());
  CHECK(prog.buffers.size() == buffers);
}

TEST_CASE("recognize_row_reduction: the reduction behind an elementwise tail", "[cpu][lower]") {
  lm::Graph g;
  lm::Tensor x = g.input("%0", {4, 8});
  g.output("out", lm::sqrt(lm::sum(x * x, {1}) + 1.0f));  // a norm row: sum, then its epilogue
  auto m = kl::recognize_row_reduction(*g.impl(), root_of(g));
  REQUIRE(m.plan);
  CHECK(g.impl()->nodes[m.plan->reduce].op == lm::detail::PrimOp::SumReduce);

  lm::Graph h;
  h.output("out", lm::exp(h.input("%0", {4, 8})));
  auto n = kl::recognize_row_reduction(*h.impl(), root_of(h));
  CHECK_FALSE(n.plan);
  CHECK(!n.why.empty());
}

TEST_CASE("lowering: unit axes get no loop, so the contiguous axis is the innermost one", "[cpu][lower]") {
  // A decode step's P.V per head, as the model writes it: o[h, 0, d, 0] = sum_k p[h, 0, k, 0]
  // * v[k, h, d] with keepdim-style unit axes around it. With a loop per unit axis the
  // innermost loop had extent 1 and the renderers vectorized nothing along d (V was read
  // with a stride of H * D along the keys, one lane per cache line).
  const int64_t H = 3, K = 7, D = 5;
  lm::Graph g;
  lm::Tensor p = g.input("%0", {H, 1, K, 1});
  lm::Tensor v = g.input("%1", {K, H, D});
  lm::Tensor vt = lm::reshape(lm::permute(v, {1, 0, 2}), {H, 1, K, D});
  g.output("out", lm::reshape(lm::sum(lm::expand(p, {H, 1, K, D}) * vt, {2}), {H, 1, D, 1}));
  kn::Program prog = buffers_for(g, 2);
  const auto failed = kl::lower_spec(spec_of(g, lm::ir::KernelKind::Elementwise, 2), {0, 1}, 2, "k", prog);
  REQUIRE_FALSE(failed);
  kn::validate(prog);
  bool found = false;
  for (const auto& k : prog.kernels) {
    for (const auto& l : k.loops) CHECK_FALSE(l.extent.as_constant() == int64_t{1});
    if (k.reduce) {
      REQUIRE_FALSE(k.loops.empty());
      CHECK(k.loops.back().extent.as_constant() == D);
      found = true;
    }
  }
  CHECK(found);
  // The values, against the sum written out.
  std::vector<float> ps(H * K), vs(K * H * D), out(H * D, -1.f);
  for (size_t i = 0; i < ps.size(); ++i) ps[i] = 0.25f * static_cast<float>(i % 9) - 1.f;
  for (size_t i = 0; i < vs.size(); ++i) vs[i] = 0.5f * static_cast<float>(i % 7) - 1.5f;
  std::vector<std::vector<float>> scratch(prog.buffers.size());
  std::vector<void*> ptrs{ps.data(), vs.data(), out.data()};
  for (size_t b = 3; b < prog.buffers.size(); ++b) {
    scratch[b].resize(static_cast<size_t>(prog.buffers[b].elements.evaluate({}, {})));
    ptrs.push_back(scratch[b].data());
  }
  kn::evaluate(prog, ptrs, {});
  for (int64_t h = 0; h < H; ++h)
    for (int64_t d = 0; d < D; ++d) {
      float want = 0;
      for (int64_t k = 0; k < K; ++k)
        want += ps[static_cast<size_t>(h * K + k)] * vs[static_cast<size_t>((k * H + h) * D + d)];
      CHECK(out[static_cast<size_t>(h * D + d)] == Approx(want).epsilon(1e-6));
    }
}

TEST_CASE("row_accumulators: a row's sibling reductions in one walk, none needing another's total",
          "[cpu][lower]") {
  // out = sum(x w1) * max(x w2) + sum(x * a): a (the first sum) lies under the third, which
  // needs a's total before its walk, so it stays a kernel of its own; the max joins.
  const int64_t R = 3, L = 8;
  lm::Graph g;
  lm::Tensor x = g.input("%0", {R, L}), w1 = g.input("%1", {R, L}), w2 = g.input("%2", {R, L});
  lm::Tensor a = lm::sum(x * w1, {1}), b = lm::max(x * w2, {1});
  lm::Tensor c = lm::sum(x * lm::expand(lm::unsqueeze(a, 1), {R, L}), {1});
  g.output("out", a * b + c);
  const auto& body = *g.impl();
  const std::vector<uint32_t> accs = lm::ir::row_accumulators(body, root_of(g));
  REQUIRE(accs.size() == 2);
  CHECK(accs[0] == kl::recognize_row_reduction(body, root_of(g)).plan->reduce);
  CHECK(body.nodes[accs[0]].op == lm::detail::PrimOp::SumReduce);
  CHECK(body.nodes[accs[1]].op == lm::detail::PrimOp::MaxReduce);

  // Lowered with several accumulators (the GPU renderers' option) and without (the CPU's):
  // the same values; the root's kernel holds the max as its second accumulator.
  std::vector<float> xs(R * L), w1s(R * L), w2s(R * L);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = 0.25f * static_cast<float>(i % 9) - 1.f;
    w1s[i] = 0.5f * static_cast<float>(i % 5) - 1.f;
    w2s[i] = 0.125f * static_cast<float>(i % 11) - 0.5f;
  }
  auto run = [&](bool several, size_t& launches, size_t& more) {
    kl::Options opt;
    opt.row_accumulators = several;
    kn::Program prog = buffers_for(g, 3);
    REQUIRE_FALSE(kl::lower_spec(spec_of(g, lm::ir::KernelKind::Reduction, 3), {0, 1, 2}, 3, "k", prog, opt));
    kn::validate(prog);
    launches = prog.kernels.size();
    more = prog.kernels.back().reduce ? prog.kernels.back().reduce->more.size() : 0;
    std::vector<float> out(R, -1.f);
    std::vector<std::vector<float>> scratch(prog.buffers.size());
    std::vector<void*> ptrs{xs.data(), w1s.data(), w2s.data(), out.data()};
    for (size_t i = 4; i < prog.buffers.size(); ++i) {
      scratch[i].resize(static_cast<size_t>(prog.buffers[i].elements.evaluate({}, {})));
      ptrs.push_back(scratch[i].data());
    }
    kn::evaluate(prog, ptrs, {});
    return out;
  };
  size_t n1 = 0, m1 = 0, n2 = 0, m2 = 0;
  const std::vector<float> one = run(true, n1, m1), separate = run(false, n2, m2);
  CHECK(m1 == 1);
  CHECK(m2 == 0);
  CHECK(n1 + 1 == n2);  // the max's own kernel is gone
  for (int64_t r = 0; r < R; ++r) {
    float sa = 0, mb = -INFINITY, sc = 0;
    for (int64_t j = 0; j < L; ++j) {
      const size_t i = static_cast<size_t>(r * L + j);
      sa += xs[i] * w1s[i];
      mb = std::max(mb, xs[i] * w2s[i]);
    }
    for (int64_t j = 0; j < L; ++j) sc += xs[static_cast<size_t>(r * L + j)] * sa;
    CHECK(one[static_cast<size_t>(r)] == separate[static_cast<size_t>(r)]);
    CHECK(one[static_cast<size_t>(r)] == Approx(sa * mb + sc).epsilon(1e-5));
  }
}
