// The integer algebra both symbolic simplifiers share (graph/int_poly.hpp), on exact
// known values; the dims (dim_test.cpp) and kernel indices (cpu index_simplify_test.cpp)
// test it through their own front ends.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "graph/int_poly.hpp"

using namespace luminal::detail::poly;

namespace {
Poly x() { return atom("x"); }
Poly y() { return atom("y"); }
}  // namespace

TEST_CASE("int_poly: normal form merges like terms and drops zeros", "[dim][poly]") {
  const Poly p = add(add(scale(x(), 3), mul(x(), y())), add(scale(x(), -3), constant(5)));
  CHECK(p == add(mul(y(), x()), constant(5)));  // xy + 5: the atoms sorted, 3x - 3x gone
  CHECK(const_value(add(x(), x(), -1)) == int64_t{0});
  CHECK(mul(add(x(), constant(1)), add(x(), constant(-1))) == add(mul(x(), x()), constant(-1)));
}

TEST_CASE("int_poly: split collects the multiples of a monomial", "[dim][poly]") {
  // 6x + 4xy + 7 = 2*(3x + 2xy + 3) + 1 with the constant floored...
  const Poly a = add(add(scale(x(), 6), scale(mul(x(), y()), 4)), constant(7));
  Poly q, r;
  split(a, constant(2), q, r, /*floor_constant=*/true);
  CHECK(q == add(add(scale(x(), 3), scale(mul(x(), y()), 2)), constant(3)));
  CHECK(r == constant(1));
  // ...and kept whole without it; -7 floors to -4*2 + 1.
  split(a, constant(2), q, r);
  CHECK(r == constant(7));
  split(constant(-7), constant(2), q, r, true);
  CHECK((q == constant(-4) && r == constant(1)));
  // by the monomial 2x: 6x + 4xy -> 3 + 2y, the constant stays
  split(a, scale(x(), 2), q, r);
  CHECK(q == add(constant(3), scale(y(), 2)));
  CHECK(r == constant(7));
}

TEST_CASE("int_poly: exact quotients", "[dim][poly]") {
  const Poly b = add(x(), constant(3));
  CHECK(exact_quotient(scale(b, -4), b) == constant(-4));
  CHECK(!exact_quotient(add(scale(x(), 4), constant(11)), b));
  CHECK(exact_quotient(mul(x(), y()), y()) == x());
  CHECK(!exact_quotient(add(mul(x(), y()), constant(1)), y()));
}

TEST_CASE("int_poly: divmod applies the range identity only where it holds", "[dim][poly]") {
  // a = 4x + r: (4x + r) // 4 = x + r // 4; r = 3 is in [0, 4), r = 5 is not
  auto in_range = [](const Poly& r, const Poly& b) {
    auto c = const_value(r), d = const_value(b);
    return c && d && *c >= 0 && *c < *d;
  };
  DivMod d = divmod(add(scale(x(), 4), constant(3)), constant(4), in_range);
  CHECK(d.q == x());
  CHECK(d.r_in_range);
  d = divmod(add(scale(x(), 4), constant(5)), constant(4), in_range);
  CHECK_FALSE(d.r_in_range);
}

TEST_CASE("int_poly: overflowing coefficients throw", "[dim][poly]") {
  const int64_t big = std::numeric_limits<int64_t>::max() / 2 + 1;
  CHECK_THROWS_AS(add(scale(x(), big), scale(x(), big)), PolyOverflow);
  CHECK_THROWS_AS(mul(scale(x(), big), constant(2)), PolyOverflow);
  CHECK(floor_div(-7, 2) == -4);
  CHECK(floor_mod(-7, 2) == 1);
}
