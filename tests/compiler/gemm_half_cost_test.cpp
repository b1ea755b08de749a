// The cost of a generated GEMM over an f16/bf16 weight: its B operand (the one along the
// output's columns) is converted while it is packed or streamed (cpu/gemm_codegen.hpp),
// so the cast costs no round trip through scratch; a half A operand is packed from f32
// and does. Mispricing B made decode's x @ W^T as a GEMM look 4.5x dearer than the same
// product as a row-dot reduction, and the extraction then kept Q's RoPE in nine kernels.
#include <catch2/catch.hpp>

#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;

namespace {

/// The one kernel computing `root`'s class with every computed operand inlined down to
/// the graph's inputs and params (what fusion reaches by absorbing producer after producer).
ir::Variant whole_kernel(ir::EGraph& g, ir::Id root) {
  auto first_math = [&](ir::Id cls) -> ir::Id {
    for (ir::Id nd : g.index().nodes(g.find(cls))) {
      const ir::Op op = g.node(nd).op;
      if (op != ir::Op::Input && op != ir::Op::Param && op != ir::Op::Kernel) return nd;
    }
    return egraph::kNoId;
  };
  auto v = ir::lower_node(g, first_math(root));
  REQUIRE(v);
  for (bool again = true; again;) {
    again = false;
    for (std::size_t s = 0; s < v->kids.size() && !again; ++s) {
      const ir::Id nd = first_math(v->kids[s]);
      if (nd == egraph::kNoId) continue;
      auto producer = ir::lower_node(g, nd);
      REQUIRE(producer);
      auto fused = ir::substitute(g, *v, s, *producer, 256);
      REQUIRE(fused);
      v = std::move(fused);
      again = true;
    }
  }
  return *v;
}

detail::KernelWork work_of(const Graph& graph) {
  ir::EGraph g;
  ir::Loaded l = ir::load_graph(g, *graph.impl());
  g.rebuild();
  const ir::Variant v = whole_kernel(g, l.outputs.at(0).second);
  REQUIRE(v.spec->kind == ir::KernelKind::Gemm);
  return ir::kernel_work(g, *v.spec, v.kids, {});
}

}  // namespace

TEST_CASE("a generated GEMM reads a half B in place and stages a half A", "[compiler][cost]") {
  const int64_t M = GENERATE(2, 64), K = 256, N = 512;  // (M = 1 loads as a row-dot Reduction)
  INFO("M = " << M);
  {  // x @ W^T, W [N, K] f16: every projection of an f16 checkpoint
    Graph gr;
    Tensor x = gr.input("x", {M, K});
    Tensor w = gr.param("w", {N, K}, f16);
    gr.output("y", linear(x, cast(w, f32)));
    const detail::KernelWork w16 = work_of(gr);
    CHECK(w16.bytes_scratch == 0);
    CHECK(w16.bytes_read == Approx(static_cast<double>(M * K * 4 + N * K * 2)));
  }
  {  // the half operand on the rows side: A = cast(x16) [M, K], B = W^T f32
    Graph gr;
    Tensor x = gr.input("x", {M, K}, bf16);
    Tensor w = gr.param("w", {N, K});
    gr.output("y", linear(cast(x, f32), w));
    CHECK(work_of(gr).bytes_scratch == Approx(static_cast<double>(2 * M * K * 4)));
  }
}
