// Symbolic dims: canonical forms (exact strings), simplification, bounds, evaluation.
#include <catch2/catch.hpp>

#include "graph/primitives.hpp"
#include "luminal/luminal.hpp"

using namespace luminal;

namespace {
std::string s(const Dim& d) { return d.to_string(); }
}  // namespace

TEST_CASE("constants fold and identities vanish", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  CHECK(s(Dim(3) + 4) == "7");
  CHECK(s(Dim(3) * 4 - 20) == "-8");
  CHECK(s(Dim(7) / 2) == "3");
  CHECK(s(Dim(-7) / 2) == "-4");  // floor division
  CHECK(s(Dim(-7) % 2) == "1");   // floor modulo
  CHECK(s(B * 1) == "B");
  CHECK(s(B + 0) == "B");
  CHECK(s(B * 0) == "0");
  CHECK(s(B - B) == "0");
  CHECK(s(B / 1) == "B");
  CHECK(s(B % 1) == "0");
  CHECK(*(B - B).as_constant() == 0);
}

TEST_CASE("sums of products are canonical", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  const Dim S = Dim::variable("S", 1, 128);
  CHECK(s(B * 4 + 1) == "B*4 + 1");
  CHECK(s(1 + 4 * B) == "B*4 + 1");
  CHECK(s(B + B) == "B*2");
  CHECK(s(S * B) == "B*S");
  CHECK((S * B).same_as(B * S));
  CHECK(s((B + 1) * (B + 1)) == "B*2 + B*B + 1");
  CHECK(s(B * 2 - S - 3) == "B*2 - S - 3");
  CHECK(s(Dim(0) - B) == "-B");
  CHECK(s((B + S) * 2 - S) == "B*2 + S");
  CHECK((B * 2 + 1).hash() == (1 + B + B).hash());
  CHECK((B * 2 + 1).same_as(1 + B + B));
  CHECK_FALSE((B * 2).same_as(B * 3));
}

TEST_CASE("division and modulo simplify", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  const Dim C = Dim::variable("C", 1, 8);
  CHECK(s((B * C) / C) == "B");  // (a*b)/b -> a
  CHECK(s((B * 16) / 16) == "B");
  CHECK(s((B * 4) / 2) == "B*2");
  CHECK(s((B * 4) % 4) == "0");
  CHECK(s((B * 16) / (B * 4)) == "4");
  CHECK(s((B * 4 + 2) / 2) == "B*2 + 1");
  CHECK(s((B * 4 + 1) / 2) == "B*2");  // 1/2 floors away
  CHECK(s((B * 6) / 4) == "(B*3)/2");  // gcd divided out
  CHECK(s(B / 2) == "B/2");
  CHECK(s((B + 1) / 4) == "(B + 1)/4");
  CHECK(s((B + 5) / 4) == "(B + 1)/4 + 1");
  CHECK(((B + 5) / 4).same_as((B + 1) / 4 + 1));
  CHECK(s(B % 4) == "B%4");
  CHECK(s((B * 5 + 6) % 4) == "(B + 2)%4");
  CHECK(s(C % 16) == "C");  // C < 16 always
  CHECK(s(C / 16) == "0");
  CHECK(s(B / B) == "1");
  CHECK(s((B / 2) * 3) == "(B/2)*3");
  CHECK(s((B / 2) / 4) == "B/8");
  CHECK(s((B % 8) % 4) == "B%4");
  CHECK(s((B % 6) % 4) == "(B%6)%4");
  CHECK_THROWS_AS(B / 0, ShapeError);
  const std::vector<int> v{1, 2, 3};
  CHECK(s(B * v.size()) == "B*3");  // any integer type converts
}

TEST_CASE("min and max are decided from ranges when they can be", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  const Dim C = Dim::variable("C", 1, 8);
  CHECK(s(min(B, 128)) == "B");
  CHECK(s(max(B, 0)) == "B");
  CHECK(s(min(B, B + 1)) == "B");
  CHECK(s(max(B, B + 1)) == "B + 1");
  CHECK(s(min(B, 16)) == "min(B, 16)");
  CHECK(min(B, 16).same_as(min(16, B)));
  CHECK(s(max(B, C)) == "max(B, C)");
  CHECK(min(B, 16).upper_bound() == 16);
  CHECK(min(B, 16).lower_bound() == 1);
}

TEST_CASE("bounds follow the variables' ranges", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  const Dim S = Dim::variable("S", 2, 10);
  CHECK((B * 4 + 1).lower_bound() == 5);
  CHECK((B * 4 + 1).upper_bound() == 257);
  CHECK((B - S).lower_bound() == -9);
  CHECK((B - S).upper_bound() == 62);
  CHECK((B * S).upper_bound() == 640);
  CHECK((B % 8).upper_bound() == 7);
  CHECK((B / 8).upper_bound() == 8);
  CHECK(Dim(5).lower_bound() == 5);
}

TEST_CASE("evaluate binds variables, and names an unbound one", "[dim]") {
  const Dim B = Dim::variable("B", 1, 64);
  const Dim S = Dim::variable("S", 1, 64);
  CHECK((B * S + 3).evaluate({{"B", 4}, {"S", 5}}) == 23);
  CHECK(((B + 5) / 4).evaluate({{"B", 7}}) == 3);
  CHECK(min(B, 16).evaluate({{"B", 40}}) == 16);
  CHECK((B % 4).evaluate({{"B", 7}}) == 3);
  CHECK_THROWS_WITH(B.evaluate({}), Catch::Contains("'B'"));
  CHECK_THROWS_AS(B.evaluate({}), RuntimeError);
}

TEST_CASE("provable equality and difference", "[dim]") {
  using luminal::detail::dims_provably_different;
  using luminal::detail::dims_provably_equal;
  const Dim B = Dim::variable("B", 1, 64);
  const Dim C = Dim::variable("C", 1, 64);
  CHECK(dims_provably_equal(B * 4 / 4, B));
  CHECK(dims_provably_equal(B * 16, (B * 4) * 4));
  CHECK_FALSE(dims_provably_equal(B, C));
  CHECK_FALSE(dims_provably_different(B, C));
  CHECK(dims_provably_different(B, B + 1));
  CHECK(dims_provably_different(B, 0));
  CHECK(dims_provably_different(Dim(3), Dim(4)));
}

TEST_CASE("divisibility facts: declared multiples simplify modulo and tighten ranges", "[dim]") {
  const Dim T = Dim::variable("T", 1, 100, 16);
  CHECK(T.lower_bound() == 16);
  CHECK(T.upper_bound() == 96);
  CHECK(T.known_divisor() == 16);
  CHECK((T * 3 + 8).known_divisor() == 8);
  CHECK(Dim(0).known_divisor() == 0);
  CHECK(s(T % 16) == "0");
  CHECK(s(T % 8) == "0");
  CHECK(s((T + 3) % 16) == "3");
  CHECK(s(T % 32) == "T%32");
  CHECK_THROWS_AS(Dim::variable("U", 1, 7, 8), ShapeError);
  CHECK_THROWS_AS(Dim::variable("U", 1, 7, 0), ShapeError);
}
