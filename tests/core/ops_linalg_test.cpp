// matmul (NumPy rules) and linear through the reference interpreter.
#include "core/ops_test_util.hpp"

using namespace ops_test;
namespace lm = luminal;

TEST_CASE("matmul 2-D", "[ops][linalg]") {
  lm::Graph g;
  auto a = g.input("a", {2, 3});
  auto b = g.input("b", {3, 2});
  auto out = eval(g, lm::matmul(a, b),
                  {{"a", f32({1, 2, 3, 4, 5, 6}, {2, 3})}, {"b", f32({1, 0, 0, 1, 1, 1}, {3, 2})}});
  CHECK(out.shape() == std::vector<int64_t>{2, 2});
  check_exact(out, {4, 5, 10, 11});
}

TEST_CASE("matmul with 1-D operands drops the promoted dims", "[ops][linalg]") {
  lm::Graph g;
  auto v = g.input("v", {3});
  auto m = g.input("m", {3, 2});
  auto w = g.input("w", {2});
  g.output("vm", lm::matmul(v, m));
  g.output("mw", lm::matmul(m, w));
  g.output("vv", lm::matmul(v, v));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out =
      fn({{"v", f32({1, 2, 3}, {3})}, {"m", f32({1, 2, 3, 4, 5, 6}, {3, 2})}, {"w", f32({1, -1}, {2})}});
  CHECK(out.at("vm").shape() == std::vector<int64_t>{2});
  check_exact(out.at("vm"), {22, 28});
  CHECK(out.at("mw").shape() == std::vector<int64_t>{3});
  check_exact(out.at("mw"), {-1, -1, -1});
  CHECK(out.at("vv").shape().empty());
  check_exact(out.at("vv"), {14});
}

TEST_CASE("batched matmul broadcasts batch dims", "[ops][linalg]") {
  lm::Graph g;
  auto a = g.input("a", {2, 1, 2, 2});
  auto b = g.input("b", {3, 2, 1});
  auto y = lm::matmul(a, b);
  REQUIRE(y.rank() == 4);
  auto out = eval(
      g, y, {{"a", f32({1, 0, 0, 1, 2, 0, 0, 2}, {2, 1, 2, 2})}, {"b", f32({1, 2, 3, 4, 5, 6}, {3, 2, 1})}});
  CHECK(out.shape() == std::vector<int64_t>{2, 3, 2, 1});
  check_exact(out, {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12});
}

TEST_CASE("matmul on a symbolic batch and on i32", "[ops][linalg]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 4);
  auto x = g.input("x", {B, 2});
  auto w = g.param("w", {2, 3});
  auto n = g.input("n", {2, 2}, lm::i32);
  g.output("y", lm::matmul(x, w));
  g.output("ni", lm::matmul(n, n));
  auto fn = lm::compile(g, lm::Target::reference());
  fn.bind("w", f32({1, 2, 3, 4, 5, 6}, {2, 3}));
  auto out = fn({{"x", f32({1, 1, 0, 2}, {2, 2})}, {"n", i32({1, 2, 3, 4}, {2, 2})}});
  check_exact(out.at("y"), {5, 7, 9, 8, 10, 12});
  CHECK(out.at("ni").dtype() == lm::i32);
  check_exact(out.at("ni"), {7, 10, 15, 22});
}

TEST_CASE("linear is x @ w^T + b", "[ops][linalg]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  auto w = g.input("w", {2, 3});
  auto b = g.input("b", {2});
  g.output("nb", lm::linear(x, w));
  g.output("wb", lm::linear(x, w, b));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, 2, 3, 4, 5, 6}, {2, 3})},
                 {"w", f32({1, 0, 0, 0, 1, 1}, {2, 3})},
                 {"b", f32({10, 20}, {2})}});
  check_exact(out.at("nb"), {1, 5, 4, 11});
  check_exact(out.at("wb"), {11, 25, 14, 31});
}

TEST_CASE("f16 matmul accumulates in f32 and rounds once", "[ops][linalg]") {
  lm::Graph g;
  auto a = g.input("a", {1, 4}, lm::f16);
  auto b = g.input("b", {4, 1}, lm::f16);
  auto y = lm::matmul(a, b);
  CHECK(y.dtype() == lm::f16);
  // 2048 + 1 + 1 + 1 = 2051: every partial sum above 2048 is odd, which f16 cannot hold
  // (spacing 2), but the f32 accumulator can; the result rounds once to 2052.
  auto out = eval(g, y,
                  {{"a", lm::HostTensor::from_f32(std::vector<float>{2048, 1, 1, 1}, {1, 4}, lm::f16)},
                   {"b", lm::HostTensor::from_f32(std::vector<float>{1, 1, 1, 1}, {4, 1}, lm::f16)}});
  check_exact(out, {2052});
}
