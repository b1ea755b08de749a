// Lowering rules: a kernel node beside every math node, computing it from its direct
// inputs (docs/design.md "From graph to kernels"). Complete for the program as loaded, so
// every class it needs has an executable node whatever the budgets did.
#include <chrono>
#include <vector>

#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "rules/kernel_twins.hpp"
#include "rules/registry.hpp"

namespace luminal::rules {
using egraph::Id;
namespace {

// The program as loaded (ctx.spine) is always lowered, so every class it uses has a kernel
// and extraction always finds a program; every other math node is lowered until
// ctx.deadline (a cyclic fast-math e-graph can hold 10^5 math nodes, ~50 us each).
std::size_t lower_math_nodes(EGraph& g, const PassContext& ctx) {
  if (!g.is_clean()) g.rebuild();
  KernelsToAdd todo;
  for (Id nd : ctx.spine)
    if (auto v = ir::lower_node(g, nd)) todo.emplace_back(g.find(nd), std::move(*v));
  const auto& ix = g.index();
  const bool timed = ctx.deadline != std::chrono::steady_clock::time_point::max();
  std::size_t seen = 0;
  for (Id cls : ix.classes()) {
    if (timed && (++seen & 15) == 0 && std::chrono::steady_clock::now() >= ctx.deadline) break;
    for (Id nd : ix.nodes(cls))
      if (auto v = ir::lower_node(g, nd)) todo.emplace_back(cls, std::move(*v));
  }
  return merge_kernels(g, todo);
}

// A BLAS GEMM beside every generated GEMM whose body is a bare contraction (a library
// call cannot run a prologue; an epilogue it cannot run either, so only plain GEMMs).
std::size_t library_gemm(EGraph& g, const PassContext& ctx) {
  if (!ctx.library_gemm) return 0;
  return add_kernel_twins(
      g, ir::KernelKind::Gemm,
      [](const ir::KernelSpec& spec) {
        std::vector<std::shared_ptr<ir::KernelSpec>> out;
        int arith = 0;
        for (const auto& n : spec.body->nodes)
          if (!(ir::is_view(ir::to_op(n.op)) || n.op == detail::PrimOp::Input)) ++arith;
        if (arith != 2) return out;  // mul + sum only
        out.push_back(std::make_shared<ir::KernelSpec>(spec));
        out.back()->kind = ir::KernelKind::LibraryGemm;
        return out;
      },
      ctx.node_limit, ctx.first_node);
}

}  // namespace

RuleSet lower_reference_rules() {
  return {"lower_reference",
          {pass_rule("lower-math-node", lower_math_nodes, Exact,
                     "x = kernel(body: op over slots of x's children)")}};
}

RuleSet lower_cpu_rules() {
  return {"lower_cpu",
          {pass_rule("library-gemm", library_gemm, Exact, "gemm kernel = BLAS call with the same body")}};
}

}  // namespace luminal::rules
