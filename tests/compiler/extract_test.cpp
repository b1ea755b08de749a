// Extraction: the kernel plan is acyclic (every argument is produced before it is read),
// reads only leaves and kernel results, and every kernel body is a legal kernel.
#include <catch2/catch.hpp>

#include "ir/kernel_body.hpp"
#include "translation_models.hpp"

using namespace luminal;

namespace {
void check_plan(const compiler::KernelPlan& p) {
  std::vector<bool> ready(p.leaf_name.size(), false);
  for (size_t v = 0; v < p.leaf_name.size(); ++v) ready[v] = !p.leaf_name[v].empty();
  for (const auto& st : p.steps) {
    for (uint32_t a : st.args) CHECK(ready.at(a));
    CHECK(!ready.at(st.result));  // produced once
    ready[st.result] = true;
    CHECK(st.args.size() == st.spec->slots);
    auto kind = ir::classify(*st.spec->body);
    REQUIRE(kind.has_value());
    // A library GEMM has a generated GEMM's body; a streaming attention kernel (the
    // online-softmax rule's) the two-pass body it replaces.
    CHECK((*kind == st.spec->kind || st.spec->kind == ir::KernelKind::LibraryGemm ||
           (st.spec->kind == ir::KernelKind::Attention && *kind == ir::KernelKind::AttentionTwoPass)));
  }
  for (const auto& [name, v] : p.outputs) CHECK(ready.at(v));
}
}  // namespace

TEST_CASE("extracted plans are acyclic and legal", "[compiler][extract]") {
  {
    Graph g;
    test::build_mlp(g, 4, 16, 32);
    check_plan(*test::validate(g).program.plan);
  }
  {
    Graph g;
    test::BlockConfig c;
    c.seq = 4;
    c.d_model = 32;
    c.ffn = 48;
    test::build_model(g, c, 3);
    check_plan(*test::validate(g).program.plan);
  }
}
