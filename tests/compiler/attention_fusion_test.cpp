// Attention found by the search: matmul, masked softmax, matmul become one Attention
// kernel, whose body the matcher (ir/attention_match.hpp) takes apart; every compiled
// program is validated against direct interpretation.
#include <catch2/catch.hpp>
#include <cstdio>

#include "ir/attention_match.hpp"
#include "translation_models.hpp"

using namespace luminal;

namespace {

int count_kind(const compiler::CompiledProgram& p, ir::KernelKind k) {
  int n = 0;
  for (const auto& st : p.plan->steps) n += st.spec->kind == k ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("scaled_dot_product_attention compiles to one attention kernel", "[compiler][fusion][attention]") {
  for (bool causal : {true, false}) {
    for (int64_t s : {1, 5, 16}) {
      Graph g;
      Tensor q = g.input("q", {4, s, 8}), k = g.input("k", {4, s + 3, 8}), v = g.input("v", {4, s + 3, 8});
      g.output("y", scaled_dot_product_attention(q, k, v, causal));
      auto val = test::validate(g);
      INFO("causal " << causal << " S " << s << "\n" << val.program.report.to_string() << "\n" << val.program.dot);
      CHECK(val.error <= 1.0);
      CHECK(val.program.report.kernels == 1);
      CHECK(count_kind(val.program, ir::KernelKind::Attention) == 1);
      for (const auto& st : val.program.plan->steps)
        if (st.spec->kind == ir::KernelKind::Attention) CHECK(ir::match_attention(*st.spec->body));
    }
  }
}
