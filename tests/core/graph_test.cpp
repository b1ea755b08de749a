// Graph building: shape/dtype inference, symbolic reshapes, build-time errors and the
// guards left for call time.
#include <catch2/catch.hpp>

#include "core_test_util.hpp"
#include "graph/diagnostics.hpp"
#include "graph/dump.hpp"
#include "graph/graph_impl.hpp"

using namespace luminal;
using namespace luminal::detail;

namespace {
std::string str(const std::vector<Dim>& s) { return shape_string(s); }
}  // namespace

TEST_CASE("symbolic reshape {B,16} -> {B*4,4} and back stays symbolic with no guard", "[graph]") {
  Graph g;
  Dim B = g.dim("B", 1, 64);
  Tensor x = g.input("x", {B, 16});
  Tensor y = prim_reshape(x, {B * 4, 4}, "reshape", Loc::current());
  CHECK(str(y.shape()) == "(B*4, 4)");
  Tensor z = prim_reshape(y, {(B * 4 * 4) / 16, 16}, "reshape", Loc::current());
  CHECK(str(z.shape()) == "(B, 16)");
  CHECK(z.shape()[0].same_as(B));
  CHECK(g.impl()->guards.empty());
  CHECK(x.dtype() == f32);
  CHECK(x.rank() == 2);
}

TEST_CASE("a provable mismatch throws at build time, an undecidable one becomes a guard", "[graph]") {
  Graph g;
  Dim B = g.dim("B", 1, 64);
  Dim C = g.dim("C", 1, 64);
  Tensor x = g.input("x", {B, 16});
  Tensor y = g.input("y", {C, 16});
  Tensor w = g.input("w", {B, 8});
  CHECK_THROWS_AS(prim_binary(PrimOp::Add, x, w, "add", Loc::current()), ShapeError);
  CHECK_THROWS_WITH(prim_binary(PrimOp::Add, x, w, "add", Loc::current()),
                    Catch::StartsWith("[add]") && Catch::Contains("(B, 16)") && Catch::Contains("(B, 8)") &&
                        Catch::Contains("graph_test.cpp:"));
  CHECK_THROWS_AS(prim_reshape(x, {B, 15}, "reshape", Loc::current()), ShapeError);
  CHECK(g.impl()->guards.empty());
  Tensor s = prim_binary(PrimOp::Add, x, y, "add", Loc::current());  // B == C only at call time
  REQUIRE(g.impl()->guards.size() == 1);
  g.output("s", s);
  Callable fn = compile(g, Target::reference());
  HostTensor a(f32, {3, 16}), b(f32, {3, 16}), c(f32, {4, 16}), d(f32, {3, 8});
  CHECK(fn({{"x", a}, {"y", b}, {"w", d}}).at("s").shape() == std::vector<int64_t>{3, 16});
  CHECK_THROWS_AS(fn({{"x", a}, {"y", c}, {"w", d}}), RuntimeError);
  CHECK_THROWS_WITH(fn({{"x", a}, {"y", c}, {"w", d}}),
                    Catch::Contains("[add]") && Catch::Contains("B=3") && Catch::Contains("C=4"));
}

TEST_CASE("primitive operand checks: dtypes, axes, permutations, graphs", "[graph]") {
  Graph g;
  Tensor x = g.input("x", {2, 3});
  Tensor i = g.input("i", {2, 3}, i32);
  Tensor b = g.input("b", {2, 3}, boolean);
  CHECK_THROWS_AS(prim_binary(PrimOp::Add, x, i, "add", Loc::current()), DTypeError);
  CHECK_THROWS_AS(prim_unary(PrimOp::Exp2, i, "exp2", Loc::current()), DTypeError);
  CHECK_THROWS_AS(prim_binary(PrimOp::Add, b, b, "add", Loc::current()), DTypeError);
  CHECK_THROWS_AS(prim_where(x, x, x, "where", Loc::current()), DTypeError);
  CHECK_THROWS_AS(prim_reduce(PrimOp::SumReduce, x, 2, "sum", Loc::current()), ShapeError);
  CHECK_THROWS_AS(prim_permute(x, {0, 0}, "permute", Loc::current()), ShapeError);
  CHECK_THROWS_AS(prim_expand(x, {4, 3}, "expand", Loc::current()), ShapeError);
  CHECK_THROWS_AS(prim_slice(x, 1, 2, 4, 1, "slice", Loc::current()), ShapeError);
  CHECK_THROWS_AS(prim_gather(x, x, "embedding", Loc::current()), DTypeError);
  CHECK_THROWS_AS(prim_unary(PrimOp::Neg, Tensor(), "neg", Loc::current()), ShapeError);
  CHECK(prim_binary(PrimOp::LessThan, x, x, "less", Loc::current()).dtype() == boolean);
  CHECK(str(prim_slice(x, 1, 0, 3, 2, "slice", Loc::current()).shape()) == "(2, 2)");
  CHECK(str(prim_pad(x, 0, 1, 2, 0.0, "pad", Loc::current()).shape()) == "(5, 3)");
  CHECK(str(prim_gather(x, i, "embedding", Loc::current()).shape()) == "(2, 3, 3)");

  Graph other;
  Tensor o = other.input("o", {2, 3});
  CHECK_THROWS_WITH(prim_binary(PrimOp::Add, x, o, "add", Loc::current()), Catch::Contains("another graph"));
  CHECK_THROWS_AS(g.output("bad", o), ShapeError);
}

TEST_CASE("tensors of a constant-only graph join the graph they meet", "[graph]") {
  Graph g;
  Tensor x = g.input("x", {3});
  Graph scratch;  // what constant()/arange() build in
  Tensor k = prim_expand(
      prim_reshape(prim_constant(scratch, 2.0, f32, "constant", Loc::current()), {1}, "c", Loc::current()),
      {3}, "c", Loc::current());
  Tensor y = prim_binary(PrimOp::Mul, k, x, "mul", Loc::current());
  CHECK(y.graph_impl() == g.impl());
  g.output("y", y);
  Graph g2;
  Tensor io = prim_iota(scratch, 4, "arange", Loc::current());
  g2.output("io", io);  // a constant-only output is imported too
  auto out = luminal::test::run(g, {{"x", HostTensor::from(std::vector<float>{1, 2, 3}, {3})}});
  CHECK(out.at("y").to_f32() == std::vector<float>{2, 4, 6});
  CHECK(luminal::test::run(g2, {}).at("io").to_f32() == std::vector<float>{0, 1, 2, 3});
}

TEST_CASE("names: duplicates and empties are rejected where they are made", "[graph]") {
  Graph g;
  g.dim("B", 1, 8);
  CHECK_THROWS_AS(g.dim("B", 1, 8), ShapeError);
  CHECK_THROWS_AS(g.dim("E", 5, 4), ShapeError);
  Tensor x = g.input("x", {2});
  CHECK_THROWS_AS(g.input("x", {2}), ShapeError);
  CHECK_THROWS_WITH(g.param("x", {2}),
                    Catch::Contains("duplicate name 'x'") && Catch::Contains("graph_test.cpp:"));
  CHECK_THROWS_AS(g.input("", {2}), ShapeError);
  CHECK_THROWS_AS(g.input("neg", {Dim(-1)}), ShapeError);
  g.output("y", x);
  CHECK_THROWS_AS(g.output("y", x), ShapeError);
  CHECK_THROWS_AS(g.output("z", Tensor()), ShapeError);
  CHECK_THROWS_AS(Tensor().shape(), ShapeError);
}

TEST_CASE("shape strings and call sites", "[graph]") {
  const Dim B = Dim::variable("B", 1, 4);
  CHECK(shape_string({B, 512}) == "(B, 512)");
  CHECK(shape_string({}) == "()");
  CHECK(shape_string({4}) == "(4)");
  CHECK(where_string(luminal::Loc::current()).rfind("graph_test.cpp:", 0) == 0);
}

TEST_CASE("dump lists nodes, outputs and guards", "[graph]") {
  Graph g;
  Dim B = g.dim("B", 1, 4);
  Dim C = g.dim("C", 1, 4);
  Tensor x = g.input("x", {B, 2});
  Tensor y = g.input("y", {C, 2});
  g.output("s", prim_binary(PrimOp::Add, x, y, "add", Loc::current()));
  const std::string d = dump(*g.impl());
  CHECK(d.find("dim B in [1, 4]") != std::string::npos);
  CHECK(d.find("%0 = input(\"x\") : f32 (B, 2)") != std::string::npos);
  CHECK(d.find("%2 = add(%0, %1) : f32 (B, 2)   [add at graph_test.cpp:") != std::string::npos);
  CHECK(d.find("output s = %2") != std::string::npos);
  CHECK(d.find("guard B == C") != std::string::npos);
}
