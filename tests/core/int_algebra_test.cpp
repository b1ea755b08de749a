// The one integer algebra (graph/int_poly.hpp) seen from both of its clients: symbolic
// dims (graph/dim_arith.cpp, ranges from declared variable ranges) and kernel index
// simplification (kernel/index_simplify.cpp, ranges from loop extents and symbol minima).
// The same expression is built on both sides and must come out as the same normal form
// and the same value at every binding; then the int64 edges of both.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "graph/dim_expr.hpp"
#include "graph/int_poly.hpp"
#include "kernel/index_simplify.hpp"
#include "kernel/lower/lower_spec.hpp"
#include "luminal/dim.hpp"
#include "luminal/error.hpp"

using luminal::Dim;
using luminal::ShapeError;
using luminal::kernel::Index;

namespace {
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// B >= 1 and C >= 1 are symbols on both sides; V is a dim in [0, 15] and, on the index
// side, loop variable v0 of extent 16.
struct DimSide {
  Dim B = Dim::variable("B", 1, 64), C = Dim::variable("C", 1, 8), V = Dim::variable("V", 0, 15);
  static Dim div(const Dim& a, const Dim& b) { return a / b; }
  static Dim rem(const Dim& a, const Dim& b) { return a % b; }
  static Dim k(int64_t c) { return Dim(c); }
};
struct IndexSide {
  Index B = Index::sym("B"), C = Index::sym("C"), V = Index::var(0);
  static Index div(const Index& a, const Index& b) { return luminal::kernel::floordiv(a, b); }
  static Index rem(const Index& a, const Index& b) { return luminal::kernel::mod(a, b); }
  static Index k(int64_t c) { return Index(c); }
};

// Each case once, for either side.
template <class S>
auto cases(const S& s) {
  using T = decltype(s.B);
  const T &B = s.B, &C = s.C, &V = s.V;
  return std::vector<T>{
      S::div(B * 4 + 3, S::k(4)),                    // (q*c + r)/c = q + r/c, 0 <= r < c
      S::rem(B * 4 + 3, S::k(4)),                    // (q*c + r)%c = r
      S::div(B * C, C),                              // (a*b)/b = a
      S::rem(B * C, C),                              // (a*b)%b = 0
      S::div(B * 6 + C * 4, S::k(2)),                // every term a multiple
      S::div(S::div(B * 8 + 5, S::k(2)), S::k(4)),   // floor division composes
      S::rem(V + B * 16, S::k(16)),                  // r%c = r by V's range
      S::div(V + B * 16, S::k(16)),                  // r/c = 0 by V's range
      (B + C) * (B - C) - B * B + C * C + V - V,     // the normal form cancels to 0
      S::div(S::div(B + V * 64, S::k(2)), S::k(4)),  // (x // 2) // 4 = x // 8
  };
}
}  // namespace

TEST_CASE("int algebra: dims and kernel indices reach the same normal form", "[dim][poly][index]") {
  DimSide ds;
  IndexSide is;
  const std::vector<Dim> dims = cases(ds);
  const std::vector<Index> raw = cases(is);
  const luminal::kernel::VarExtents ext{{0, Index(16)}};
  const luminal::kernel::SymbolMins mins{{"B", 1}, {"C", 1}};
  // Exact known normal forms, printed each side's way.
  const std::vector<std::pair<std::string, std::string>> expect{
      {"B", "B"}, {"3", "3"},  {"B", "B"}, {"0", "0"}, {"B*3 + C*2", "((B * 3) + (C * 2))"},
      {"B", "B"}, {"V", "v0"}, {"B", "B"}, {"0", "0"}, {"B/8 + V*8", "((v0 * 8) + (B // 8))"},
  };
  REQUIRE(dims.size() == expect.size());
  REQUIRE(raw.size() == expect.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const Index simple = luminal::kernel::simplify(raw[i], ext, mins);
    INFO("case " << i << ": dim " << dims[i].to_string() << ", index " << raw[i].to_string() << " -> "
                 << simple.to_string());
    CHECK(dims[i].to_string() == expect[i].first);
    CHECK(simple.to_string() == expect[i].second);
    // and the value: the raw index, the simplified one and the dim agree everywhere
    for (int64_t b = 1; b <= 9; b += 2)
      for (int64_t c = 1; c <= 8; c += 3)
        for (int64_t v = 0; v < 16; v += 5) {
          const std::map<std::string, int64_t> syms{{"B", b}, {"C", c}};
          const int64_t want = raw[i].evaluate({v}, syms);
          REQUIRE(simple.evaluate({v}, syms) == want);
          REQUIRE(dims[i].evaluate({{"B", b}, {"C", c}, {"V", v}}) == want);
        }
  }
}

TEST_CASE("int algebra: a dim lowered to an index keeps its normal form", "[dim][poly][index]") {
  // dim_index turns a dim's polynomial into an index; the index simplifier, on the same
  // algebra, leaves a normal form as it is (no identity fires twice or differently).
  const Dim B = Dim::variable("B", 1, 64), C = Dim::variable("C", 1, 8);
  for (const Dim& d : {B * 3 + C * 2 - 5, (B + 1) * (C + 2), (B * 6) / 4, (B + 5) / 4, B % 8 + C}) {
    luminal::kernel::Program prog;
    const Index i = luminal::kernel::lower::dim_index(d, prog);
    const Index s = luminal::kernel::simplify(i, {}, {{"B", 1}, {"C", 1}});
    INFO(d.to_string() << " -> " << i.to_string() << " -> " << s.to_string());
    for (int64_t b = 1; b <= 64; b += 9)
      for (int64_t c = 1; c <= 8; c += 2) {
        const int64_t want = d.evaluate({{"B", b}, {"C", c}});
        REQUIRE(i.evaluate({}, {{"B", b}, {"C", c}}) == want);
        REQUIRE(s.evaluate({}, {{"B", b}, {"C", c}}) == want);
      }
  }
}

TEST_CASE("int algebra: comparisons decided by the range of the difference, both sides",
          "[dim][poly][index]") {
  const Dim B = Dim::variable("B", 1, 64), V = Dim::variable("V", 0, 15);
  // dims: min/max
  CHECK(min(B, B + 1).to_string() == "B");
  CHECK(max(V, V * 2).to_string() == "V*2");           // V >= 0
  CHECK(min(V + 16, B * 0 + 16).to_string() == "16");  // V + 16 >= 16
  CHECK(min(B, V).to_string() == "min(B, V)");         // undecided
  // indices: lt / le folded to 1 or 0 by the same decision
  using namespace luminal::kernel;
  const Index b = Index::sym("B"), v = Index::var(0);
  const VarExtents ext{{0, Index(16)}};
  CHECK(simplify(lt(b, b + 1), ext).to_string() == "1");
  CHECK(simplify(le(v * 2, v), ext).to_string() == "((v0 * 2) <= v0)");  // true only at v0 = 0: undecided
  CHECK(simplify(lt(v, Index(16)), ext).to_string() == "1");
  CHECK(simplify(lt(v + 16, Index(16)), ext).to_string() == "0");
}

TEST_CASE("int algebra: bounds of signed ranges are interval arithmetic", "[dim][poly]") {
  const Dim X = Dim::variable("X", -3, 2);
  CHECK((X * X).lower_bound() == -6);  // [-3, 2]^2 as intervals: -3*2 .. -3*-3
  CHECK((X * X).upper_bound() == 9);
  CHECK((X * -2 + 1).lower_bound() == -3);
  CHECK((X * -2 + 1).upper_bound() == 7);
  CHECK((X % 4).to_string() == "X%4");  // X may be negative: not in [0, 4)
  for (int64_t x = -3; x <= 2; ++x) CHECK((X % 4).evaluate({{"X", x}}) == ((x % 4) + 4) % 4);
}

TEST_CASE("int algebra: int64 edges", "[dim][poly][index]") {
  namespace poly = luminal::detail::poly;
  CHECK(poly::floor_div(kMin, -1) == kMax);  // saturates: 2^63 does not fit
  CHECK(poly::floor_mod(kMin, -1) == 0);
  CHECK(poly::floor_div(-7, 2) == -4);
  CHECK(poly::floor_mod(-7, 2) == 1);
  CHECK(poly::floor_mod(7, -2) == -1);

  const Dim B = Dim::variable("B", 1, 64);
  const int64_t half = kMax / 2 + 1;  // 2^62
  CHECK_THROWS_AS(B * half + B * half, ShapeError);
  CHECK_THROWS_AS(B * half * 2, ShapeError);
  CHECK_THROWS_AS(B * kMin, ShapeError);  // a coefficient that cannot be negated to print
  CHECK_THROWS_AS(Dim(kMax) + 1, ShapeError);
  CHECK((B * kMax - B * kMax).to_string() == "0");

  // Bounds that do not fit int64 are the int64 extremes, not an error.
  const Dim H = Dim::variable("H", 0, kMax);
  CHECK((H + 1).upper_bound() == kMax);
  CHECK((H + 1).lower_bound() == 1);
  CHECK((H * 2).upper_bound() == kMax);
  CHECK((H * -1).lower_bound() == -kMax);
  CHECK((H - 1).upper_bound() == kMax - 1);
  // A difference that overflows leaves min/max undecided rather than failing.
  const Dim big = H * half, neg = H * -half;
  CHECK_NOTHROW(min(big, neg));
  CHECK(min(big, neg).to_string().rfind("min(", 0) == 0);

  // The index side leaves an index whose coefficients would overflow unchanged.
  using namespace luminal::kernel;
  const Index v = Index::var(0);
  const Index over = floordiv(v * Index(half) + v * Index(half), Index(2));
  CHECK(simplify(over, {{0, Index(4)}}).to_string() == over.to_string());
}
