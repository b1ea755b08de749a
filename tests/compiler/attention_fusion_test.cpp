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

using test::count_kind;

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
// Attention written by hand on f16/bf16 tensors (matmul, softmax, matmul): each op
// widens its operands and rounds its result, so the weights reach the second product
// rounded to the half. The streaming kernel cannot round weights it never finishes: the
// rule that streams these bodies (online-softmax-rounded-weights) is fast-math, so
// without fast_math the program keeps the rounding (no Attention kernel), with it the
// whole attention is one kernel, within the weights' rounding of the interpreter.
TEST_CASE("attention written on f16/bf16 tensors streams only under fast_math", "[compiler][fusion][attention][half]") {
  for (DType dt : {f16, bf16})
    for (bool causal : {true, false}) {
      Graph g;
      Tensor q = g.input("q", {3, 5, 8}, dt), k = g.input("k", {3, 7, 8}, dt), v = g.input("v", {3, 7, 6}, dt);
      Tensor sc = matmul(q, transpose(k, 1, 2)) * 0.35f;
      if (causal) sc = where(tril_mask(Dim(5), Dim(7)), sc, -INFINITY);
      g.output("y", matmul(softmax(sc, -1), v));
      INFO(dtype_name(dt) << " causal " << causal);
      auto exact = test::validate(g);
      CHECK(exact.error <= 1.0);
      CHECK(count_kind(exact.program, ir::KernelKind::Attention) == 0);
      CompileOptions fm;
      fm.fast_math = true;
      auto fast = test::validate(g, fm);
      INFO(fast.program.report.to_string());
      CHECK(fast.program.report.kernels == 1);
      REQUIRE(count_kind(fast.program, ir::KernelKind::Attention) == 1);
      for (const auto& st : fast.program.plan->steps) {
        kernel::Program p = lowered(*st.spec);
        REQUIRE(p.kernels.size() == 1);
        CHECK(p.kernels[0].kind == kernel::KernelKind::Attention);
      }
      // Within the weights' rounding (and the output's): against the interpreter.
      auto in = test::random_inputs(*g.impl(), 1);
      std::map<std::string, const HostTensor*> ptrs;
      for (const auto& [name, t] : in) ptrs.emplace(name, &t);
      const double tol = dt == f16 ? 4e-3 : 3e-2;
      CHECK(test::compare_outputs(fast.program.exe->run({}, ptrs), detail::reference::run(*g.impl(), {}, ptrs), tol,
                                  tol) <= 1.0);
    }
}
// At a Llama-3-8B layer's shapes (32 query heads, 8 KV heads, head dim 128): a decode
// step over 512 keys and a 128-token prefill are one Attention kernel for half q, k, v as
// for f32. (The cost model charged a V widened from halves a copy the lowering does not
// make, so the decode step took three kernels.)
TEST_CASE("f16/bf16 attention at Llama shapes is one kernel, decode and prefill", "[compiler][fusion][attention][half]") {
  for (DType dt : {f32, f16, bf16})
    for (auto [sq, sk] : {std::pair<int64_t, int64_t>{1, 512}, {128, 128}}) {
      Graph g;
      const int64_t H = 32, KV = 8, G = 4, hd = 128;
      Tensor q = g.input("q", {H, sq, hd}, dt), k = g.input("k", {KV, sk, hd}, dt), v = g.input("v", {KV, sk, hd}, dt);
      auto rep = [&, sk = sk](const Tensor& t) {  // a binding: by copy for clang < 16
        return reshape(expand(reshape(t, {KV, 1, sk, hd}), {KV, G, sk, hd}), {H, sk, hd});
      };
      g.output("y", scaled_dot_product_attention(q, rep(k), rep(v), sq > 1));
      auto p = compiler::compile_graph(*g.impl(), Target::cpu(), {});
      INFO(dtype_name(dt) << " Sq " << sq << " Sk " << sk << ": " << p.report.to_string());
      CHECK(p.report.kernels == 1);
      CHECK(count_kind(p, ir::KernelKind::Attention) == 1);
    }
}
