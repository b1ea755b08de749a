// Every primitive through the reference interpreter, with exact expected values.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core_test_util.hpp"

using namespace luminal;
using namespace luminal::detail;
using luminal::test::run1;

TEST_CASE("unary primitives compute float math", "[interp]") {
  Graph g;
  Tensor x = g.input("x", {4});
  const std::vector<float> xs{0.0f, 1.0f, 2.0f, 0.25f};
  auto check = [&](PrimOp op, auto f) {
    Graph gg;
    Tensor xx = gg.input("x", {4});
    gg.output("y", prim_unary(op, xx, "t", Loc::current()));
    const HostTensor yt = run1(gg, {{"x", HostTensor::from(xs, {4})}});
    auto y = yt.values<float>();
    for (size_t i = 0; i < 4; ++i) CHECK(y[i] == f(xs[i]));
  };
  check(PrimOp::Exp2, [](float v) { return std::exp2(v); });
  check(PrimOp::Log2, [](float v) { return std::log2(v); });
  check(PrimOp::Sin, [](float v) { return std::sin(v); });
  check(PrimOp::Sqrt, [](float v) { return std::sqrt(v); });
  check(PrimOp::Recip, [](float v) { return 1.0f / v; });
  check(PrimOp::Neg, [](float v) { return -v; });
  (void)x;
}

TEST_CASE("binary primitives on f32, i32 and bool", "[interp]") {
  Graph g;
  Tensor a = g.input("a", {5});
  Tensor b = g.input("b", {5});
  g.output("add", prim_binary(PrimOp::Add, a, b, "t", Loc::current()));
  g.output("mul", prim_binary(PrimOp::Mul, a, b, "t", Loc::current()));
  g.output("mod", prim_binary(PrimOp::Mod, a, b, "t", Loc::current()));
  g.output("max", prim_binary(PrimOp::Max, a, b, "t", Loc::current()));
  g.output("lt", prim_binary(PrimOp::LessThan, a, b, "t", Loc::current()));
  g.output("eq", prim_binary(PrimOp::Equal, a, b, "t", Loc::current()));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = luminal::test::run(g, {{"a", HostTensor::from(std::vector<float>{1, -7, 5.5f, nan, 2}, {5})},
                                    {"b", HostTensor::from(std::vector<float>{2, 3, -2, 1, 2}, {5})}});
  auto add = out.at("add").values<float>();
  CHECK(add[0] == 3);
  CHECK(add[1] == -4);
  auto mod = out.at("mod").values<float>();
  CHECK(mod[1] == -1.0f);  // fmod: sign of the dividend
  CHECK(mod[2] == 1.5f);
  auto mx = out.at("max").values<float>();
  CHECK(mx[0] == 2);
  CHECK(std::isnan(mx[3]));  // NaN propagates
  auto lt = out.at("lt").values<bool>();
  CHECK(lt[0]);
  CHECK(!lt[3]);
  CHECK(!lt[4]);
  auto eq = out.at("eq").values<bool>();
  CHECK(eq[4]);
  CHECK(!eq[3]);

  Graph gi;
  Tensor ia = gi.input("a", {4}, i32);
  Tensor ib = gi.input("b", {4}, i32);
  gi.output("mod", prim_binary(PrimOp::Mod, ia, ib, "t", Loc::current()));
  gi.output("add", prim_binary(PrimOp::Add, ia, ib, "t", Loc::current()));
  gi.output("mul", prim_binary(PrimOp::Mul, ia, ib, "t", Loc::current()));
  auto oi = luminal::test::run(gi, {{"a", HostTensor::from(std::vector<int32_t>{-7, 7, 5, 2147483647}, {4})},
                                    {"b", HostTensor::from(std::vector<int32_t>{3, -3, 0, 1}, {4})}});
  auto m = oi.at("mod").values<int32_t>();
  CHECK(m[0] == -1);
  CHECK(m[1] == 1);
  CHECK(m[2] == 0);                                                                 // defined: x % 0 == 0
  CHECK(oi.at("add").values<int32_t>()[3] == std::numeric_limits<int32_t>::min());  // wraps
  CHECK(oi.at("mul").values<int32_t>()[0] == -21);
}

TEST_CASE("reductions accumulate in order; empty sum is 0 and empty max is -inf", "[interp]") {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  g.output("s0", prim_reduce(PrimOp::SumReduce, x, 0, "t", Loc::current()));
  g.output("s1", prim_reduce(PrimOp::SumReduce, x, 1, "t", Loc::current()));
  g.output("m1", prim_reduce(PrimOp::MaxReduce, x, 1, "t", Loc::current()));
  auto out = luminal::test::run(g, {{"x", HostTensor::from(std::vector<float>{1, 2, 3, 4, -5, 6}, {2, 3})}});
  CHECK(luminal::test::f32(out.at("s0")) == std::vector<float>{5, -3, 9});
  CHECK(luminal::test::f32(out.at("s1")) == std::vector<float>{6, 5});
  CHECK(luminal::test::f32(out.at("m1")) == std::vector<float>{3, 6});
  // Order matters in float: 1e8 + 1 - 1e8 is 0 in order, not 1.
  Graph go;
  Tensor y = go.input("y", {3});
  go.output("s", prim_reduce(PrimOp::SumReduce, y, 0, "t", Loc::current()));
  CHECK(run1(go, {{"y", HostTensor::from(std::vector<float>{1e8f, 1.0f, -1e8f}, {3})}}).values<float>()[0] ==
        0.0f);

  Graph ge;
  Tensor z = ge.input("z", {2, 0});
  ge.output("s", prim_reduce(PrimOp::SumReduce, z, 1, "t", Loc::current()));
  ge.output("m", prim_reduce(PrimOp::MaxReduce, z, 1, "t", Loc::current()));
  auto oe = luminal::test::run(ge, {{"z", HostTensor(f32, {2, 0})}});
  CHECK(luminal::test::f32(oe.at("s")) == std::vector<float>{0, 0});
  CHECK(oe.at("m").values<float>()[0] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("matmul as sum(mul(expand a, expand b)) is exact on small integers", "[interp]") {
  const int M = 3, K = 4, N = 5;
  Graph g;
  Tensor a = g.input("a", {M, K});
  Tensor b = g.input("b", {K, N});
  Tensor ae = prim_expand(prim_reshape(a, {M, 1, K}, "mm", Loc::current()), {M, N, K}, "mm", Loc::current());
  Tensor bt = prim_permute(b, {1, 0}, "mm", Loc::current());
  Tensor be = prim_expand(prim_reshape(bt, {1, N, K}, "mm", Loc::current()), {M, N, K}, "mm", Loc::current());
  g.output("c", prim_reduce(PrimOp::SumReduce, prim_binary(PrimOp::Mul, ae, be, "mm", Loc::current()), 2,
                            "mm", Loc::current()));
  std::vector<float> av(M * K), bv(K * N);
  for (int i = 0; i < M * K; ++i) av[i] = static_cast<float>(i % 7 - 3);
  for (int i = 0; i < K * N; ++i) bv[i] = static_cast<float>(i % 5 - 2);
  auto c = run1(g, {{"a", HostTensor::from(av, {M, K})}, {"b", HostTensor::from(bv, {K, N})}});
  REQUIRE(c.shape() == std::vector<int64_t>{M, N});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = 0;
      for (int k = 0; k < K; ++k) acc += av[i * K + k] * bv[k * N + j];
      CHECK(c.values<float>()[i * N + j] == acc);
    }
}

TEST_CASE("where, cast, iota, constant, gather", "[interp]") {
  Graph g;
  Tensor c = g.input("c", {3}, boolean);
  Tensor a = g.input("a", {3});
  Tensor b = g.input("b", {3});
  g.output("w", prim_where(c, a, b, "t", Loc::current()));
  g.output("ci", prim_cast(a, i32, "t", Loc::current()));
  g.output("cb", prim_cast(a, boolean, "t", Loc::current()));
  g.output("ch", prim_cast(a, f16, "t", Loc::current()));
  g.output("io", prim_iota(g, 4, "t", Loc::current()));
  g.output("k", prim_expand(
                    prim_reshape(prim_constant(g, 2.5, f32, "t", Loc::current()), {1}, "t", Loc::current()),
                    {3}, "t", Loc::current()));
  auto out = luminal::test::run(g, {{"c", HostTensor::from(std::vector<bool>{true, false, true}, {3})},
                                    {"a", HostTensor::from(std::vector<float>{-1.7f, 0.0f, 2.9f}, {3})},
                                    {"b", HostTensor::from(std::vector<float>{10, 20, 30}, {3})}});
  CHECK(luminal::test::f32(out.at("w")) == std::vector<float>{-1.7f, 20, 2.9f});
  auto ci = out.at("ci").values<int32_t>();
  CHECK(std::vector<int32_t>(ci.begin(), ci.end()) == std::vector<int32_t>{-1, 0, 2});
  auto cb = out.at("cb").values<bool>();
  CHECK(cb[0]);
  CHECK(!cb[1]);
  CHECK(out.at("ch").dtype() == f16);
  CHECK(out.at("ch").to_f32()[2] == 2.900390625f);  // nearest f16 to 2.9
  auto io = out.at("io").values<int32_t>();
  CHECK(std::vector<int32_t>(io.begin(), io.end()) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(luminal::test::f32(out.at("k")) == std::vector<float>{2.5f, 2.5f, 2.5f});

  Graph gg;
  Tensor table = gg.input("t", {3, 2});
  Tensor ids = gg.input("ids", {2, 2}, i32);
  gg.output("y", prim_gather(table, ids, "embedding", Loc::current()));
  const HostTensor tv = HostTensor::from(std::vector<float>{0, 1, 10, 11, 20, 21}, {3, 2});
  auto y = run1(gg, {{"t", tv}, {"ids", HostTensor::from(std::vector<int32_t>{2, 0, 1, 1}, {2, 2})}});
  CHECK(y.shape() == std::vector<int64_t>{2, 2, 2});
  CHECK(luminal::test::f32(y) == std::vector<float>{20, 21, 0, 1, 10, 11, 10, 11});
  auto fn = [&](const std::map<std::string, HostTensor>& in) { return luminal::test::run(gg, in); };
  CHECK_THROWS_AS(fn({{"t", tv}, {"ids", HostTensor::from(std::vector<int32_t>{0, 1, 3, 0}, {2, 2})}}),
                  RuntimeError);
  CHECK_THROWS_WITH(fn({{"t", tv}, {"ids", HostTensor::from(std::vector<int32_t>{0, -1, 0, 0}, {2, 2})}}),
                    Catch::Contains("[embedding]") && Catch::Contains("-1"));
}

TEST_CASE("views: slice with step, pad, permute, expand compose", "[interp]") {
  Graph g;
  Tensor x = g.input("x", {2, 5});
  Tensor s = prim_slice(x, 1, 1, 5, 2, "t", Loc::current());   // cols 1, 3
  Tensor p = prim_pad(s, 0, 1, 0, -1.0, "t", Loc::current());  // row of -1 before
  Tensor q = prim_permute(p, {1, 0}, "t", Loc::current());     // [2, 3]
  g.output("y", q);
  auto y = run1(g, {{"x", HostTensor::from(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5})}});
  CHECK(y.shape() == std::vector<int64_t>{2, 3});
  CHECK(luminal::test::f32(y) == std::vector<float>{-1, 1, 6, -1, 3, 8});
}

TEST_CASE("a fused mul+sum is bit-identical to the materialized product summed", "[interp]") {
  // Output the product too in one graph, so that there it is materialized.
  for (int axis = 0; axis < 3; ++axis) {
    Graph fused, plain;
    for (Graph* g : {&fused, &plain}) {
      Tensor a = g->input("a", {5, 7, 33});
      Tensor b = g->input("b", {7, 33});
      Tensor be =
          prim_expand(prim_reshape(b, {1, 7, 33}, "t", Loc::current()), {5, 7, 33}, "t", Loc::current());
      Tensor p = prim_binary(PrimOp::Mul, a, be, "t", Loc::current());
      g->output("s", prim_reduce(PrimOp::SumReduce, p, axis, "t", Loc::current()));
      if (g == &plain) g->output("p", p);
    }
    std::vector<float> av(5 * 7 * 33), bv(7 * 33);
    uint32_t seed = 12345;
    auto rnd = [&] {
      seed = seed * 1664525u + 1013904223u;
      return static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
    };
    for (float& v : av) v = rnd();
    for (float& v : bv) v = rnd() * 1000.0f;
    std::map<std::string, HostTensor> in{{"a", HostTensor::from(av, {5, 7, 33})},
                                         {"b", HostTensor::from(bv, {7, 33})}};
    const auto x = luminal::test::run(fused, in).at("s").to_f32();
    const auto y = luminal::test::run(plain, in).at("s").to_f32();
    INFO("axis " << axis);
    CHECK(x == y);
  }
}
