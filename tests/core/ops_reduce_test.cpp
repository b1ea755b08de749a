// Reductions through the reference interpreter, against hand-computed values.
#include <cmath>
#include <limits>

#include "core/ops_test_util.hpp"

using namespace ops_test;
namespace lm = luminal;

TEST_CASE("sum, mean, max, min over axes with keepdim and negative axes", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("s0", lm::sum(x, 0));
  g.output("s1k", lm::sum(x, -1, true));
  g.output("sall", lm::sum(x));
  g.output("m", lm::mean(x, {0, 1}));
  g.output("mx", lm::max(x, 1));
  g.output("mn", lm::min(x, -2, true));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, -2, 3, 4, 5, -6}, {2, 3})}});
  check_exact(out.at("s0"), {5, 3, -3});
  CHECK(out.at("s1k").shape() == std::vector<int64_t>{2, 1});
  check_exact(out.at("s1k"), {2, 3});
  CHECK(out.at("sall").shape().empty());
  check_exact(out.at("sall"), {5});
  check_close(out.at("m").to_f32(), {5.0 / 6}, 1e-7);
  check_exact(out.at("mx"), {3, 5});
  CHECK(out.at("mn").shape() == std::vector<int64_t>{1, 3});
  check_exact(out.at("mn"), {1, -2, -6});
}

TEST_CASE("integer and bool sums stay integral", "[ops][reduce]") {
  lm::Graph g;
  auto n = g.input("n", {4}, lm::i32);
  g.output("s", lm::sum(n));
  g.output("b", lm::sum(lm::greater(n, 0)));
  g.output("mx", lm::max(n));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"n", i32({3, -1, 7, 2}, {4})}});
  CHECK(out.at("s").dtype() == lm::i32);
  check_exact(out.at("s"), {11});
  CHECK(out.at("b").dtype() == lm::i32);
  check_exact(out.at("b"), {3});
  check_exact(out.at("mx"), {7});
}

TEST_CASE("mean over a symbolic dim divides by its bound value", "[ops][reduce]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 16);
  auto x = g.input("x", {B, 2});
  g.output("y", lm::mean(x, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  check_exact(fn({{"x", f32({1, 2, 3, 4, 5, 6}, {3, 2})}}).at("y"), {3, 4});
  check_exact(fn({{"x", f32({1, 2, 3, 6}, {2, 2})}}).at("y"), {2, 4});
}

TEST_CASE("prod is exact in sign and zero-ness", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {3, 5});
  g.output("p", lm::prod(x, 1));
  g.output("pk", lm::prod(x, 0, true));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({-1, 2, -3, 4, -5, 0, 1, 2, 3, 4, 1.5f, -2, 1, 1, 1}, {3, 5})}});
  check_exact(out.at("p"), {-120, 0, -3});
  CHECK(out.at("pk").shape() == std::vector<int64_t>{1, 5});
  check_exact(out.at("pk"), {-0.0, -4, -6, 12, -20});
}

TEST_CASE("prod over a symbolic dim pads with ones", "[ops][reduce]") {
  lm::Graph g;
  lm::Dim N = g.dim("N", 1, 7);
  auto x = g.input("x", {N});
  g.output("p", lm::prod(x, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  check_exact(fn({{"x", f32({2, -3, 0.5f}, {3})}}).at("p"), {-3});
  check_exact(fn({{"x", f32({2, -3, 0.5f, 2, 2, 2, 2}, {7})}}).at("p"), {-48});
}

TEST_CASE("var biased and unbiased", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {2, 4});
  g.output("u", lm::var(x, 1));
  g.output("b", lm::var(x, 1, true, false));
  g.output("one", lm::var(lm::slice(x, 1, 0, 1), 1));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, 2, 3, 4, 2, 2, 2, 2}, {2, 4})}});
  check_close(out.at("u").to_f32(), {5.0 / 3, 0}, 1e-6);
  check_close(out.at("b").to_f32(), {1.25, 0}, 1e-6);
  check_close(out.at("one").to_f32(), {kNaN, kNaN});  // one element, unbiased: NaN as torch
}

TEST_CASE("argmax and argmin return the first index on ties, as i32", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {2, 4});
  g.output("amax", lm::argmax(x, 1));
  g.output("amin", lm::argmin(x, -1, true));
  g.output("amax0", lm::argmax(x, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, 5, 5, -2, 3, -2, 3, -2}, {2, 4})}});
  CHECK(out.at("amax").dtype() == lm::i32);
  check_exact(out.at("amax"), {1, 0});
  CHECK(out.at("amin").shape() == std::vector<int64_t>{2, 1});
  check_exact(out.at("amin"), {3, 1});
  check_exact(out.at("amax0"), {1, 0, 0, 0});
}

TEST_CASE("argmax treats NaN as the maximum", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {4});
  g.output("a", lm::argmax(x, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  check_exact(fn({{"x", f32({1, std::nanf(""), 9, std::nanf("")}, {4})}}).at("a"), {1});
}

TEST_CASE("cumsum along either axis, inf stays local", "[ops][reduce]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("c1", lm::cumsum(x, 1));
  g.output("c0", lm::cumsum(x, 0));
  g.output("ci", lm::cumsum(lm::cast(x, lm::i32), -1));
  auto fn = lm::compile(g, lm::Target::reference());
  const float inf = std::numeric_limits<float>::infinity();
  auto out = fn({{"x", f32({1, 2, 3, 4, inf, 6}, {2, 3})}});
  check_exact(out.at("c1"), {1, 3, 6, 4, inf, inf});
  check_exact(out.at("c0"), {1, 2, 3, 5, inf, 9});
  CHECK(out.at("ci").dtype() == lm::i32);
}

TEST_CASE("cumsum of a long or symbolic axis uses a log-step scan", "[ops][reduce]") {
  lm::Graph g;
  lm::Dim N = g.dim("N", 1, 300);
  auto x = g.input("x", {2, 100});
  auto v = g.input("v", {N});
  g.output("long", lm::cumsum(x, 1));
  g.output("sym", lm::cumsum(v, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  std::vector<float> xs(200), vs(37);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  for (size_t i = 0; i < vs.size(); ++i) vs[i] = static_cast<float>(i);
  auto out = fn({{"x", f32(xs, {2, 100})}, {"v", f32(vs, {37})}});
  std::vector<double> want_long, want_sym;
  for (int r = 0; r < 2; ++r) {
    double acc = 0;
    for (int i = 0; i < 100; ++i) want_long.push_back(acc += xs[static_cast<size_t>(r * 100 + i)]);
  }
  double acc = 0;
  for (float f : vs) want_sym.push_back(acc += f);
  check_exact(out.at("long"), want_long);  // small integers: every order is exact
  CHECK(out.at("sym").shape() == std::vector<int64_t>{37});
  check_exact(out.at("sym"), want_sym);
}
