// Translation validation: compiled programs (e-graph, rules, fusion, extraction, kernel
// plan) against direct interpretation of the same graph on random inputs.
#include <catch2/catch.hpp>
#include <functional>

#include "compiler/validate.hpp"
#include "translation_models.hpp"

using namespace luminal;
using luminal::test::validate;

namespace {

struct Case {
  const char* name;
  std::function<void(Graph&)> build;
};

std::vector<Case> cases() {
  return {
      {"elementwise chain",
       [](Graph& g) {
         Tensor x = g.input("x", {4, 6});
         g.output("y", sigmoid(exp(x) * 0.5f + sin(x) - sqrt(abs(x) + 1.f)) / (tanh(x) + 2.f));
       }},
      {"gelu and silu",
       [](Graph& g) {
         Tensor x = g.input("x", {3, 5});
         g.output("a", gelu(x));
         g.output("b", silu(x) + gelu_erf(x));
       }},
      {"reductions over axes",
       [](Graph& g) {
         Tensor x = g.input("x", {3, 4, 5});
         g.output("s", sum(x, 1));
         g.output("m", max(x, {0, 2}));
         g.output("mean", mean(x, -1, true) * 2.f);
         g.output("var", var(x, 2));
       }},
      {"softmax / log_softmax / layer_norm",
       [](Graph& g) {
         Tensor x = g.input("x", {4, 7});
         g.output("sm", softmax(x));
         g.output("lsm", log_softmax(x, 0));
         g.output("ln", layer_norm(x, g.param("w", {7}), g.param("b", {7})));
       }},
      {"matmul batched and transposed",
       [](Graph& g) {
         Tensor a = g.input("a", {2, 3, 4});
         Tensor b = g.input("b", {2, 5, 4});
         g.output("c", matmul(a, transpose(b, 1, 2)));
         g.output("d", matmul(g.input("v", {4}), g.param("w", {4, 6})));
       }},
      {"movement",
       [](Graph& g) {
         Tensor x = g.input("x", {2, 3, 4});
         Tensor y = concat({slice(x, 2, 1, 4), permute(pad(x, {{0, 0}, {0, 0}, {1, 1}}), {0, 1, 2})}, 2);
         g.output("y", y * 2.f);
         g.output("t", flatten(transpose(x, 0, 2)) + 1.f);
         g.output("e", expand(reshape(sum(x, 2), {2, 3, 1}), {2, 3, 5}) - 1.f);
       }},
      {"comparisons, where, casts",
       [](Graph& g) {
         Tensor x = g.input("x", {5, 4});
         Tensor y = g.input("y", {5, 4});
         g.output("lt", less(x, y));
         g.output("w", where(greater_equal(x, 0.f), x, y * 3.f));
         g.output("i", argmax(x, 1));
         g.output("h", cast(cast(x, f16) * 2.f, f32));
       }},
      {"embedding, cumsum, clamp",
       [](Graph& g) {
         Tensor t = g.param("table", {10, 4});
         Tensor ids = g.input("ids", {3, 2}, i32);
         g.output("e", embedding(t, ids) * 2.f);
         g.output("c", cumsum(g.input("x", {3, 5}), 1));
         g.output("k", clamp(g.input("z", {6}), -0.5f, 0.25f));
       }},
      {"conv2d and pooling",
       [](Graph& g) {
         Tensor x = g.input("x", {1, 2, 6, 6});
         Tensor y = conv2d(x, g.param("w", {3, 2, 3, 3}), g.param("b", {3}), {1, 1}, {1, 1});
         g.output("y", relu(y));
         g.output("p", max_pool2d(x, {2, 2}));
       }},
  };
}

}  // namespace

TEST_CASE("compiled graphs match the interpreter: a range of ops", "[compiler][translation]") {
  for (const Case& c : cases()) {
    Graph g;
    c.build(g);
    auto v = validate(g);
    INFO(c.name << ": " << v.program.report.to_string());
    CHECK(v.error <= 1.0);
    CHECK(v.program.report.kernels >= 1);
  }
}

TEST_CASE("compiled MLP linear->gelu->linear matches the interpreter", "[compiler][translation]") {
  Graph g;
  test::build_mlp(g, 4, 16, 32);
  auto v = validate(g);
  INFO(v.program.report.to_string());
  CHECK(v.error <= 1.0);
}

TEST_CASE("compiled Llama-style decoder block matches the interpreter", "[compiler][translation]") {
  Graph g;
  test::BlockConfig c;
  test::build_model(g, c, 1);
  auto v = validate(g);
  INFO(v.program.report.to_string());
  CHECK(v.error <= 1.0);
}

TEST_CASE("compiled stack of decoder blocks (searched once, replayed) matches the interpreter",
          "[compiler][translation]") {
  Graph g;
  test::BlockConfig c;
  c.seq = 4;
  c.d_model = 32;
  c.ffn = 48;
  test::build_model(g, c, 4);
  auto v = validate(g);
  INFO(v.program.report.to_string());
  CHECK(v.error <= 1.0);
  CHECK(v.program.blocks >= 4);
  CHECK(v.program.searches < v.program.blocks);
}

TEST_CASE("graphs with symbolic dims compile and match the interpreter", "[compiler][translation]") {
  Graph g;
  Dim B = g.dim("B", 1, 16);
  Tensor x = g.input("x", {B, 8});
  Tensor h = softmax(linear(x, g.param("w", {6, 8}), g.param("b", {6})));
  g.output("y", h * sum(x, 1, true));
  g.output("t", transpose(x, 0, 1) * 2.f);
  auto p = compiler::compile_graph(*g.impl(), Target::reference(), {});
  INFO(p.report.to_string());
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto r = compiler::validate_program(*g.impl(), *p.exe, seed);
    INFO(r.message);
    CHECK(r.ok);
  }
}
