// The shared lowering's recognisers (kernel/lower/recognize.hpp) and its failures as
// values: which bodies are GEMMs and gathers, where a GEMM's tile and implementation come
// from, and the reason a body that cannot be lowered reports (the program left as it was).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ir/tensor_lang.hpp"
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
