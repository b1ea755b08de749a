// A merge of two classes whose shapes or dtypes differ is a wrong rule: an InternalError
// in strict mode (debug builds), counted and described otherwise (release builds, where
// the compiler names the count in CompileReport::stop_reason).
#include <catch2/catch.hpp>

#include "ir/build.hpp"
#include "luminal/error.hpp"

namespace {

using namespace luminal;

egraph::Id input(ir::EGraph& g, const char* name, std::vector<Dim> shape, DType dt) {
  ir::Attr a;
  a.name = name;
  a.shape = std::move(shape);
  a.dtype = dt;
  return g.add(ir::Op::Input, g.analysis().attrs().intern(a), {});
}

}  // namespace

TEST_CASE("merging classes of different shapes or dtypes is never silent", "[compiler][analysis]") {
  {
    ir::EGraph g;
    g.analysis().set_strict_merges(true);
    egraph::Id x = input(g, "x", {Dim(2), Dim(3)}, DType::f32);
    egraph::Id y = input(g, "y", {Dim(3), Dim(2)}, DType::f32);
    CHECK_THROWS_AS(g.merge(x, y), InternalError);
  }
  {
    ir::EGraph g;
    g.analysis().set_strict_merges(false);
    egraph::Id x = input(g, "x", {Dim(2), Dim(3)}, DType::f32);
    egraph::Id y = input(g, "y", {Dim(2), Dim(3)}, DType::i32);
    egraph::Id z = input(g, "z", {Dim(2), Dim(3)}, DType::f32);
    g.merge(x, z);  // same shape and dtype: a merge a rule may make
    CHECK(g.analysis().wrong_merges() == 0);
    g.merge(x, y);
    g.rebuild();
    CHECK(g.analysis().wrong_merges() == 1);
    CHECK_THAT(g.analysis().first_wrong_merge(), Catch::Contains("(2, 3) f32") && Catch::Contains("(2, 3) i32"));
  }
}
