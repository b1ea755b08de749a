// Attention found by the search: matmul, masked softmax, matmul become one Attention
// kernel, whose body the matcher (ir/attention_match.hpp) takes apart; every compiled
// program is validated against direct interpretation.
#include <catch2/catch.hpp>
#include <cstdio>

#include "ir/attention_match.hpp"
#include "kernel/lower/lower_spec.hpp"
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

namespace {

// Lowers `spec` (kernel/lower/lower_spec.hpp) into a program whose slot buffers have
// the body's slot dtypes, as every backend does before rendering.
kernel::Program lowered(const ir::KernelSpec& spec) {
  kernel::Program prog;
  const auto& body = *spec.body;
  auto elements = [&](uint32_t node) {
    kernel::Index n(1);
    for (const auto& d : body.nodes[node].shape) n = n * kernel::lower::dim_index(d, prog);
    return n;
  };
  std::vector<int> args;
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    args.push_back(static_cast<int>(i));
    prog.buffers.push_back({"in" + std::to_string(i), body.nodes[body.inputs[i]].dtype, elements(body.inputs[i]),
                            kernel::BufferRole::Input});
  }
  const uint32_t root = body.outputs.at(0).second;
  prog.buffers.push_back({"out", body.nodes[root].dtype, elements(root), kernel::BufferRole::Output});
  auto failed = kernel::lower::lower_spec(spec, args, static_cast<int>(args.size()), "k", prog);
  INFO((failed ? failed->why : std::string()));
  CHECK_FALSE(failed);
  return prog;
}

}  // namespace

// Real models run attention on f16/bf16 q, k, v with f32 arithmetic: the op casts the
// operands up and the result down. The online-softmax rule applies as for f32 (the
// casts are the body's prologue and epilogue), and the lowering keeps the halves: Q and
// K widened as the kernel stages them, V read in place as halves, the output stored as
// halves -- one Attention kernel, no widened copy of any operand.
TEST_CASE("f16 and bf16 attention compiles to one attention kernel that reads and writes halves",
          "[compiler][fusion][attention][half]") {
  struct Shape {
    int64_t heads, kv_heads, s, sk, d, dv;
    bool causal;
  };
  // Grouped heads; a query block longer than the keys (causal: the first rows see no
  // key and give NaN, as the interpreter); a decode step (one query row); no mask.
  const Shape shapes[] = {{4, 2, 6, 9, 8, 8, true}, {4, 2, 6, 4, 8, 5, true}, {8, 2, 1, 7, 16, 16, true},
                          {2, 1, 5, 5, 4, 6, false}};
  for (DType dt : {f16, bf16}) {
    for (const Shape& c : shapes) {
      Graph g;
      const int64_t G = c.heads / c.kv_heads;
      Tensor q = g.input("q", {c.heads, c.s, c.d}, dt), k = g.input("k", {c.kv_heads, c.sk, c.d}, dt),
             v = g.input("v", {c.kv_heads, c.sk, c.dv}, dt);
      auto rep = [&](const Tensor& t, int64_t w) {
        return reshape(expand(reshape(t, {c.kv_heads, 1, c.sk, w}), {c.kv_heads, G, c.sk, w}),
                       {c.heads, c.sk, w});
      };
      g.output("y", scaled_dot_product_attention(q, rep(k, c.d), rep(v, c.dv), c.causal));
      auto val = test::validate(g);
      INFO(dtype_name(dt) << " heads " << c.heads << "/" << c.kv_heads << " S " << c.s << " keys " << c.sk
                          << " causal " << c.causal << "\n"
                          << val.program.report.to_string());
      CHECK(val.program.report.kernels == 1);
      REQUIRE(count_kind(val.program, ir::KernelKind::Attention) == 1);
      for (const auto& st : val.program.plan->steps) {
        if (st.spec->kind != ir::KernelKind::Attention) continue;
        kernel::Program p = lowered(*st.spec);
        REQUIRE(p.kernels.size() == 1);
        CHECK(p.kernels[0].kind == kernel::KernelKind::Attention);
        const kernel::Attention& a = *p.kernels[0].attention;
        CHECK(p.buffers[static_cast<size_t>(a.v.buffer)].dtype == dt);
        CHECK(p.buffers[static_cast<size_t>(a.out.buffer)].dtype == dt);
        CHECK(p.buffers.size() == 4);  // q, k, v, out: nothing materialized
      }
      // The reference target runs the plan's bodies; the output is rounded to halves.
      CHECK(val.error <= 1.0);
    }
  }
}
