// Elementwise ops through the reference interpreter, against hand-computed values.
#include <cmath>
#include <limits>

#include "core/ops_test_util.hpp"

using namespace ops_test;
namespace lm = luminal;

TEST_CASE("add broadcasts like NumPy and takes scalars on either side", "[ops][elementwise]") {
  lm::Graph g;
  auto a = g.input("a", {2, 1});
  auto b = g.input("b", {3});
  auto y = (a + b) * 2.0f - 1.0f + (1.0f - a) / 2.0f;
  REQUIRE(y.shape().size() == 2);
  auto out = eval(g, y, {{"a", f32({1, 2}, {2, 1})}, {"b", f32({10, 20, 30}, {3})}});
  CHECK(out.shape() == std::vector<int64_t>{2, 3});
  // (a+b)*2-1 + (1-a)/2
  check_exact(out, {21, 41, 61, 22.5, 42.5, 62.5});
}

TEST_CASE("unary minus and neg on f32 and i32", "[ops][elementwise]") {
  lm::Graph g;
  auto x = g.input("x", {3});
  auto n = g.input("n", {3}, lm::i32);
  g.output("a", -x);
  g.output("b", lm::neg(n));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, -2, 0}, {3})}, {"n", i32({4, -5, 0}, {3})}});
  check_exact(out.at("a"), {-1, 2, 0});
  CHECK(out.at("b").dtype() == lm::i32);
  check_exact(out.at("b"), {-4, 5, 0});
}

TEST_CASE("dtype promotion follows PyTorch", "[ops][elementwise]") {
  lm::Graph g;
  auto n = g.input("n", {2}, lm::i32);
  auto x = g.input("x", {2});
  auto h = g.input("h", {2}, lm::f16);
  CHECK((n + 1).dtype() == lm::i32);     // int scalar keeps i32
  CHECK((n + 0.5f).dtype() == lm::f32);  // float scalar lifts the category
  CHECK((n + x).dtype() == lm::f32);
  CHECK((h * 2.0f).dtype() == lm::f16);  // float scalar keeps f16
  CHECK((h + x).dtype() == lm::f32);
  CHECK(lm::div(n, n).dtype() == lm::f32);  // true division
  CHECK(lm::less(n, x).dtype() == lm::boolean);
  g.output("int_plus", n + 1);
  g.output("half", n / 2);
  g.output("h2", h * 3.0f);
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"n", i32({3, -3}, {2})},
                 {"x", f32({0, 0}, {2})},
                 {"h", lm::HostTensor::from_f32(std::vector<float>{1.5f, -0.25f}, {2}, lm::f16)}});
  check_exact(out.at("int_plus"), {4, -2});
  check_exact(out.at("half"), {1.5, -1.5});
  CHECK(out.at("h2").dtype() == lm::f16);
  check_exact(out.at("h2"), {4.5, -0.75});
}

TEST_CASE("mod is torch.remainder: the sign of the divisor", "[ops][elementwise]") {
  lm::Graph g;
  auto a = g.input("a", {6});
  auto b = g.input("b", {6});
  auto n = g.input("n", {4}, lm::i32);
  g.output("f", lm::mod(a, b));
  g.output("i", lm::mod(n, 3));
  g.output("s", lm::mod(a, 2.0f));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"a", f32({-3, 3, 5.5f, -5.5f, 4, -4}, {6})},
                 {"b", f32({2, -2, 2, 2, 2, -2}, {6})},
                 {"n", i32({-7, 7, -6, 0}, {4})}});
  check_exact(out.at("f"), {1, -1, 1.5, 0.5, 0, 0});
  check_exact(out.at("i"), {2, 1, 0, 0});
  check_exact(out.at("s"), {1, 1, 1.5, 0.5, 0, 0});
}

TEST_CASE("pow handles zero, negative bases and special exponents", "[ops][elementwise]") {
  lm::Graph g;
  auto a = g.input("a", {9});
  auto b = g.input("b", {9});
  g.output("p", lm::pow(a, b));
  g.output("sq", lm::pow(a, 2.0f));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"a", f32({-2, -2, -2, 0, 0, 0, 2, 9, std::nanf("")}, {9})},
                 {"b", f32({3, 2, 0.5f, 0, 2, -1, -1, 0.5f, 0}, {9})}});
  check_close(out.at("p").to_f32(), {-8, 4, kNaN, 1, 0, kInf, 0.5, 3, 1}, 1e-6, 1e-6);
  check_close(out.at("sq").to_f32(), {4, 4, 4, 0, 0, 0, 4, 81, kNaN});
}

TEST_CASE("pow with small integer scalar exponents multiplies", "[ops][elementwise]") {
  lm::Graph g;
  auto x = g.input("x", {4});
  auto n = g.input("n", {3}, lm::i32);
  g.output("p5", lm::pow(x, 5.0f));
  g.output("m2", lm::pow(x, -2));
  g.output("p0", lm::pow(x, 0.0f));
  g.output("i7", lm::pow(n, 7));
  g.output("frac", lm::pow(x, 1.5f));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-2, 0.5f, 0, 3}, {4})}, {"n", i32({-3, 2, 5}, {3})}});
  check_exact(out.at("p5"), {-32, 0.03125, 0, 243});
  check_close(out.at("m2").to_f32(), {0.25, 4, kInf, 1.0 / 9.0}, 0, 1e-7);
  check_exact(out.at("p0"), {1, 1, 1, 1});
  CHECK(out.at("i7").dtype() == lm::i32);
  check_exact(out.at("i7"), {-2187, 128, 78125});
  check_close(out.at("frac").to_f32(), {kNaN, std::pow(0.5, 1.5), 0, std::pow(3.0, 1.5)}, 1e-7, 1e-6);
}

TEST_CASE("comparisons and logical ops give bool, NaN compares false", "[ops][elementwise]") {
  lm::Graph g;
  auto a = g.input("a", {4});
  auto b = g.input("b", {4});
  g.output("lt", lm::less(a, b));
  g.output("le", lm::less_equal(a, b));
  g.output("gt", lm::greater(a, b));
  g.output("ge", lm::greater_equal(a, b));
  g.output("eq", lm::equal(a, b));
  g.output("ne", lm::not_equal(a, b));
  g.output("and", lm::logical_and(lm::less(a, b), lm::less(a, 2.5f)));
  g.output("or", lm::logical_or(lm::greater(a, b), lm::equal(a, 1.0f)));
  g.output("not", lm::logical_not(lm::less(a, b)));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"a", f32({1, 2, 3, std::nanf("")}, {4})}, {"b", f32({2, 2, 1, 0}, {4})}});
  CHECK(out.at("lt").dtype() == lm::boolean);
  check_exact(out.at("lt"), {1, 0, 0, 0});
  check_exact(out.at("le"), {1, 1, 0, 0});
  check_exact(out.at("gt"), {0, 0, 1, 0});
  check_exact(out.at("ge"), {0, 1, 1, 0});
  check_exact(out.at("eq"), {0, 1, 0, 0});
  check_exact(out.at("ne"), {1, 0, 1, 1});
  check_exact(out.at("and"), {1, 0, 0, 0});
  check_exact(out.at("or"), {1, 0, 1, 0});
  check_exact(out.at("not"), {0, 1, 1, 1});
}

TEST_CASE("where and clamp with scalar operands", "[ops][elementwise]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  auto c = lm::greater(x, 0.0f);
  g.output("w1", lm::where(c, x, 0.0f));
  g.output("w2", lm::where(c, 1.0f, -1.0f));
  g.output("w3", lm::where(lm::less(x, 0.0f), 7, x));
  g.output("cl", lm::clamp(x, -1.0f, 1.5f));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-2, -0.5f, 0, 0.5f, 1, 3}, {2, 3})}});
  check_exact(out.at("w1"), {0, 0, 0, 0.5, 1, 3});
  CHECK(out.at("w2").shape() == std::vector<int64_t>{2, 3});
  check_exact(out.at("w2"), {-1, -1, -1, 1, 1, 1});
  check_exact(out.at("w3"), {7, 7, 0, 0.5, 1, 3});
  check_exact(out.at("cl"), {-1, -0.5, 0, 0.5, 1, 1.5});
}

TEST_CASE("maximum, minimum, abs, sign, relu, square", "[ops][elementwise]") {
  lm::Graph g;
  auto x = g.input("x", {5});
  auto n = g.input("n", {3}, lm::i32);
  g.output("max", lm::maximum(x, 0.5f));
  g.output("min", lm::minimum(x, 0.5f));
  g.output("abs", lm::abs(x));
  g.output("sign", lm::sign(x));
  g.output("relu", lm::relu(x));
  g.output("sq", lm::square(x));
  g.output("iabs", lm::abs(n));
  g.output("isign", lm::sign(n));
  g.output("imin", lm::minimum(n, 1));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-2, -0.0f, 0, 3, std::nanf("")}, {5})}, {"n", i32({-4, 0, 9}, {3})}});
  check_close(out.at("max").to_f32(), {0.5, 0.5, 0.5, 3, kNaN});
  check_close(out.at("min").to_f32(), {-2, 0, 0, 0.5, kNaN});
  check_close(out.at("abs").to_f32(), {2, 0, 0, 3, kNaN});
  check_close(out.at("sign").to_f32(), {-1, 0, 0, 1, 0});  // torch.sign(nan) == 0 on this torch
  check_close(out.at("relu").to_f32(), {0, 0, 0, 3, kNaN});
  check_close(out.at("sq").to_f32(), {4, 0, 0, 9, kNaN});
  CHECK(out.at("iabs").dtype() == lm::i32);
  check_exact(out.at("iabs"), {4, 0, 9});
  check_exact(out.at("isign"), {-1, 0, 1});
  check_exact(out.at("imin"), {-4, 0, 1});
}

TEST_CASE("transcendental ops match libm in double", "[ops][elementwise]") {
  std::vector<float> xs = {-30, -5, -1, -1e-4f, 0, 1e-4f, 0.3f, 1, 2.5f, 7, 30, 100};
  const int64_t n = static_cast<int64_t>(xs.size());
  lm::Graph g;
  auto x = g.input("x", {n});
  g.output("exp", lm::exp(x * 0.1f));
  g.output("sin", lm::sin(x));
  g.output("cos", lm::cos(x));
  g.output("tanh", lm::tanh(x));
  g.output("sigmoid", lm::sigmoid(x));
  g.output("silu", lm::silu(x));
  g.output("gelu", lm::gelu(x));
  g.output("gelu_erf", lm::gelu_erf(x));
  g.output("erf", lm::erf(x));
  g.output("sqrt", lm::sqrt(lm::abs(x)));
  g.output("rsqrt", lm::rsqrt(lm::abs(x) + 1.0f));
  g.output("recip", lm::recip(x + 0.5f));
  g.output("log", lm::log(lm::abs(x) + 1.0f));
  g.output("log2", lm::log2(lm::abs(x) + 1.0f));
  g.output("exp2", lm::exp2(x * 0.1f));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32(xs, {n})}});
  auto ref = [&](auto f) {
    std::vector<double> r;
    for (float v : xs) r.push_back(f(static_cast<double>(v)));
    return r;
  };
  const double pi = 3.14159265358979323846;
  check_close(out.at("exp").to_f32(),
              ref([](double v) { return std::exp(static_cast<double>(static_cast<float>(v * 0.1))); }), 1e-7,
              2e-6);
  check_close(out.at("sin").to_f32(), ref([](double v) { return std::sin(v); }), 2e-7, 1e-6);
  check_close(out.at("cos").to_f32(), ref([](double v) { return std::cos(v); }), 5e-7, 1e-6);
  check_close(out.at("tanh").to_f32(), ref([](double v) { return std::tanh(v); }), 0,
              5e-7);  // relative, even at 1e-4
  check_close(out.at("sigmoid").to_f32(), ref([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-7, 1e-6);
  check_close(out.at("silu").to_f32(), ref([](double v) { return v / (1 + std::exp(-v)); }), 1e-7, 1e-6);
  check_close(out.at("gelu").to_f32(), ref([&](double v) {
                return 0.5 * v * (1 + std::tanh(std::sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
              }),
              1e-7, 1e-6);
  check_close(out.at("gelu_erf").to_f32(),
              ref([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 1e-7, 1e-6);
  check_close(out.at("erf").to_f32(), ref([](double v) { return std::erf(v); }), 2e-7, 1e-6);
  check_close(out.at("sqrt").to_f32(), ref([](double v) { return std::sqrt(std::abs(v)); }), 0, 1e-6);
  check_close(out.at("rsqrt").to_f32(), ref([](double v) { return 1 / std::sqrt(std::abs(v) + 1); }), 0,
              1e-6);
  check_close(out.at("recip").to_f32(), ref([](double v) { return 1 / (v + 0.5); }), 0, 1e-6);
  check_close(out.at("log").to_f32(),
              ref([](double v) { return std::log(static_cast<float>(std::abs(v) + 1)); }), 1e-7, 1e-6);
  check_close(out.at("log2").to_f32(),
              ref([](double v) { return std::log2(static_cast<float>(std::abs(v) + 1)); }), 1e-7, 1e-6);
  check_close(out.at("exp2").to_f32(),
              ref([](double v) { return std::exp2(static_cast<double>(static_cast<float>(v * 0.1))); }), 1e-7,
              1e-6);
}

TEST_CASE("extreme inputs: sigmoid and tanh saturate, gelu_erf keeps tails", "[ops][elementwise]") {
  lm::Graph g;
  auto x = g.input("x", {4});
  g.output("sig", lm::sigmoid(x));
  g.output("tanh", lm::tanh(x));
  g.output("ge", lm::gelu_erf(x));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-200, 200, -6, 1e30f}, {4})}});
  check_close(out.at("sig").to_f32(), {0, 1, 1 / (1 + std::exp(6.0)), 1}, 1e-9, 1e-6);
  check_close(out.at("tanh").to_f32(), {-1, 1, std::tanh(-6.0), 1}, 1e-7);
  check_close(out.at("ge").to_f32(), {0, 200, 0.5 * -6 * std::erfc(6 / std::sqrt(2.0)), 1e30}, 1e-12, 1e-5);
}

TEST_CASE("f16 and bf16 inputs compute in f32 and round once", "[ops][elementwise]") {
  lm::Graph g;
  auto h = g.input("h", {3}, lm::bf16);
  auto y = lm::exp(h);
  CHECK(y.dtype() == lm::bf16);
  auto out = eval(g, y, {{"h", lm::HostTensor::from_f32(std::vector<float>{0, 1, -1}, {3}, lm::bf16)}});
  CHECK(out.dtype() == lm::bf16);
  // bf16 has 8 significant bits: e rounds to 2.71875, 1/e to 0.3671875.
  check_exact(out, {1, 2.71875, 0.3671875});
}

TEST_CASE("operators on a symbolic batch", "[ops][elementwise]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 8);
  auto x = g.input("x", {B, 2});
  auto bias = g.param("bias", {2});
  auto y = x * x + bias;
  g.output("y", y);
  auto fn = lm::compile(g, lm::Target::reference());
  fn.bind("bias", f32({1, -1}, {2}));
  check_exact(fn({{"x", f32({1, 2, 3, 4, 5, 6}, {3, 2})}}).at("y"), {2, 3, 10, 15, 26, 35});
  check_exact(fn({{"x", f32({2, 2}, {1, 2})}}).at("y"), {5, 3});
}
