// Movement and creation ops through the reference interpreter.
#include "core/ops_test_util.hpp"
#include "graph/primitives.hpp"

using namespace ops_test;
namespace lm = luminal;

namespace {
const std::vector<float> k6 = {0, 1, 2, 3, 4, 5};  // a [2, 3] input
}

TEST_CASE("reshape infers -1 and stays symbolic", "[ops][movement]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 8);
  auto x = g.input("x", {B, 4});
  auto r = lm::reshape(x, {-1, 2});
  REQUIRE(r.shape().size() == 2);
  CHECK(lm::detail::dims_provably_equal(r.shape()[0], B * 2));
  auto back = lm::reshape(r, {B, 4});
  CHECK(back.shape()[0].same_as(B));
  g.output("y", lm::reshape(x, {B, 2, -1}));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4})}}).at("y");
  CHECK(out.shape() == std::vector<int64_t>{2, 2, 2});
  check_exact(out, {0, 1, 2, 3, 4, 5, 6, 7});
}

TEST_CASE("permute, transpose, flatten", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("p", lm::permute(x, {1, 0}));
  g.output("t", lm::transpose(x, -1, 0));
  g.output("f", lm::flatten(lm::unsqueeze(x, 1)));
  g.output("f1", lm::flatten(lm::reshape(x, {1, 2, 3}), 1));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32(k6, {2, 3})}});
  check_exact(out.at("p"), {0, 3, 1, 4, 2, 5});
  check_exact(out.at("t"), {0, 3, 1, 4, 2, 5});
  CHECK(out.at("f").shape() == std::vector<int64_t>{6});
  CHECK(out.at("f1").shape() == std::vector<int64_t>{1, 6});
}

TEST_CASE("expand keeps -1 dims and adds leading dims; squeeze is a no-op on non-1", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {3, 1});
  auto e = lm::expand(x, {2, -1, 2});
  CHECK(e.rank() == 3);
  g.output("e", e);
  g.output("s", lm::squeeze(x, 1));
  g.output("s0", lm::squeeze(x, 0));
  g.output("u", lm::unsqueeze(x, -1));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1, 2, 3}, {3, 1})}});
  CHECK(out.at("e").shape() == std::vector<int64_t>{2, 3, 2});
  check_exact(out.at("e"), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(out.at("s").shape() == std::vector<int64_t>{3});
  CHECK(out.at("s0").shape() == std::vector<int64_t>{3, 1});
  CHECK(out.at("u").shape() == std::vector<int64_t>{3, 1, 1});
}

TEST_CASE("slice clamps like Python and steps", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {6});
  g.output("a", lm::slice(x, 0, 1, 4));
  g.output("b", lm::slice(x, 0, -2, 100));
  g.output("c", lm::slice(x, -1, 0, 6, 2));
  g.output("d", lm::slice(x, 0, 4, 2));
  g.output("e", lm::slice(x, 0, -100, -3, 2));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({0, 1, 2, 3, 4, 5}, {6})}});
  check_exact(out.at("a"), {1, 2, 3});
  check_exact(out.at("b"), {4, 5});
  check_exact(out.at("c"), {0, 2, 4});
  CHECK(out.at("d").shape() == std::vector<int64_t>{0});
  check_exact(out.at("e"), {0, 2});
}

TEST_CASE("slice of a symbolic dim", "[ops][movement]") {
  lm::Graph g;
  lm::Dim S = g.dim("S", 2, 10);
  auto x = g.input("x", {S});
  g.output("y", lm::slice(x, 0, 1, S - 1));
  g.output("z", lm::slice(x, 0, -2, S));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({0, 1, 2, 3, 4}, {5})}});
  check_exact(out.at("y"), {1, 2, 3});
  check_exact(out.at("z"), {3, 4});
}

TEST_CASE("pad from axis 0 with a value; negative amounts crop", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("p", lm::pad(x, {{0, 1}, {1, 0}}, -1.0f));
  g.output("p0", lm::pad(x, {{1, 0}}));
  g.output("crop", lm::pad(x, {{0, 0}, {-1, 1}}));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32(k6, {2, 3})}});
  CHECK(out.at("p").shape() == std::vector<int64_t>{3, 4});
  check_exact(out.at("p"), {-1, 0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1});
  check_exact(out.at("p0"), {0, 0, 0, 0, 1, 2, 3, 4, 5});
  check_exact(out.at("crop"), {1, 2, 0, 4, 5, 0});
}

TEST_CASE("concat along any axis, booleans too, with promotion", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  auto y = g.input("y", {2, 1});
  auto n = g.input("n", {1, 3}, lm::i32);
  g.output("c1", lm::concat({x, y}, -1));
  g.output("c0", lm::concat({x, n, x}, 0));
  g.output("cb", lm::concat({lm::greater(x, 2.0f), lm::less(y, 5.0f)}, 1));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32(k6, {2, 3})}, {"y", f32({9, 8}, {2, 1})}, {"n", i32({7, 7, 7}, {1, 3})}});
  check_exact(out.at("c1"), {0, 1, 2, 9, 3, 4, 5, 8});
  CHECK(out.at("c0").dtype() == lm::f32);
  CHECK(out.at("c0").shape() == std::vector<int64_t>{5, 3});
  check_exact(out.at("c0"), {0, 1, 2, 3, 4, 5, 7, 7, 7, 0, 1, 2, 3, 4, 5});
  CHECK(out.at("cb").dtype() == lm::boolean);
  check_exact(out.at("cb"), {0, 0, 0, 0, 1, 1, 1, 0});
}

TEST_CASE("repeat tiles like torch Tensor.repeat", "[ops][movement]") {
  lm::Graph g;
  auto x = g.input("x", {2, 3});
  g.output("r", lm::repeat(x, {2, 1}));
  g.output("r3", lm::repeat(x, {2, 1, 2}));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32(k6, {2, 3})}});
  check_exact(out.at("r"), {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  CHECK(out.at("r3").shape() == std::vector<int64_t>{2, 2, 6});
  check_exact(out.at("r3"), {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
}

TEST_CASE("creation ops: constant, full, *_like, arange, tril_mask, cast", "[ops][creation]") {
  lm::Graph g;
  lm::Dim B = g.dim("B", 1, 4);
  auto x = g.input("x", {B, 2});
  auto c = lm::constant(1.5f, {2, 3});
  CHECK(c.shape().size() == 2);
  g.output("c", c);
  g.output("full", lm::full({2}, 2.0f, lm::i32));
  g.output("z", lm::zeros_like(x));
  g.output("o", lm::ones_like(x) + x);
  g.output("ar", lm::arange(B));
  g.output("tri", lm::tril_mask(2, 3));
  g.output("cast", lm::cast(x, lm::i32));
  g.output("bf", lm::cast(x, lm::bf16));
  g.output("mix", lm::where(lm::tril_mask(B, B), 1.0f, 0.0f) + lm::cast(lm::arange(B), lm::f32));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({1.7f, -2.5f, 3, 1.00390625f}, {2, 2})}});
  check_exact(out.at("c"), {1.5, 1.5, 1.5, 1.5, 1.5, 1.5});
  CHECK(out.at("full").dtype() == lm::i32);
  check_exact(out.at("full"), {2, 2});
  check_exact(out.at("z"), {0, 0, 0, 0});
  check_close(out.at("o").to_f32(), {2.7, -1.5, 4, 2.00390625}, 1e-6);
  CHECK(out.at("ar").dtype() == lm::i32);
  check_exact(out.at("ar"), {0, 1});
  CHECK(out.at("tri").dtype() == lm::boolean);
  check_exact(out.at("tri"), {1, 0, 0, 1, 1, 0});
  check_exact(out.at("cast"), {1, -2, 3, 1});
  CHECK(out.at("bf").dtype() == lm::bf16);
  check_exact(out.at("bf"), {1.703125, -2.5, 3, 1});
  check_exact(out.at("mix"), {1, 1, 1, 2});
}

TEST_CASE("qualified lm::min / lm::max on Dims sit beside the reductions", "[ops][movement]") {
  lm::Graph g;
  lm::Dim S = g.dim("S", 1, 10);
  auto x = g.input("x", {S});
  lm::Dim first = lm::min(S, 3);
  CHECK(first.upper_bound() == 3);
  CHECK(lm::max(S, lm::Dim(4)).lower_bound() == 4);
  g.output("head", lm::slice(x, 0, 0, first));
  g.output("m", lm::max(x, 0));
  auto fn = lm::compile(g, lm::Target::reference());
  auto out = fn({{"x", f32({5, 1, 7, 2, 9}, {5})}});
  check_exact(out.at("head"), {5, 1, 7});
  check_exact(out.at("m"), {9});
  check_exact(fn({{"x", f32({4, 8}, {2})}}).at("head"), {4, 8});
}
