// kernel::simplify: the div/mod/comparison folds the CPU lowering relies on to keep
// composed view indices small, and a fuzz check that simplification never changes the
// value of an index for any binding in range.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernel/index_simplify.hpp"

using namespace luminal::kernel;

namespace {
const Index v0 = Index::var(0), v1 = Index::var(1), v2 = Index::var(2);
const Index N = Index::sym("N"), M = Index::sym("M");
}  // namespace

TEST_CASE("simplify: a row-major linearization splits back into its variables", "[cpu][index]") {
  const VarExtents ext{{0, M}, {1, N}};
  const Index lin = v0 * N + v1;
  CHECK(simplify(floordiv(lin, N), ext).to_string() == "v0");
  CHECK(simplify(mod(lin, N), ext).to_string() == "v1");
  // three levels, split by the product of the inner dims
  const VarExtents ext3{{0, 4}, {1, N}, {2, M}};
  const Index lin3 = (v0 * N + v1) * M + v2;
  CHECK(simplify(floordiv(lin3, N * M), ext3).to_string() == "v0");
  CHECK(simplify(floordiv(floordiv(lin3, M), N), ext3).to_string() == "v0");
  CHECK(simplify(mod(floordiv(lin3, M), N), ext3).to_string() == "v1");
  CHECK(simplify(mod(lin3, M), ext3).to_string() == "v2");
}

TEST_CASE("simplify: a split merged again is its source", "[cpu][index]") {
  // a reduce axis of 18 = 2*3*3 split into a weight's [2, 3, 3] and linearized again
  const Index w = floordiv(v0, Index(9)) * 9 + mod(floordiv(v0, Index(3)), Index(3)) * 3 + mod(v0, Index(3));
  CHECK(simplify(w, {{0, Index(18)}}).to_string() == "v0");
  CHECK(simplify(w + v1 * 18, {}).to_string() == "(v0 + (v1 * 18))");
  CHECK(simplify(floordiv(v0 + 1, N) * N + mod(v0 + 1, N), {}).to_string() == "(v0 + 1)");
}

TEST_CASE("simplify: divisors of several terms and symbols' least values", "[cpu][index]") {
  // a conv's im2col view: rows of (D - 1) * (N + 3) with D = (M + 1) // 2, M >= 3
  const Index D = floordiv(M + 1, Index(2));
  const Index row = (D - 1) * (N + 3);
  const VarExtents ext{{0, 5}, {1, row}};
  const SymbolMins mins{{"M", 3}, {"N", 1}};
  const Index lin = v0 * row + v1;
  CHECK(simplify(floordiv(floordiv(lin, N + 3), D - 1), ext, mins).to_string() == "v0");
  CHECK(simplify(mod(lin, N + 3), ext, mins).to_string() == "(v1 % (N + 3))");
  // v1 // (N + 3) < D - 1 since v1 < (D - 1) * (N + 3): the mod by D - 1 goes
  CHECK(simplify(mod(floordiv(v1, N + 3), D - 1), ext, mins).to_string() == "(v1 // (N + 3))");
  // max(N - 1, 3) >= 3 although N - 1 has no known least value: E - 1 > 0
  const Index E = max(N - 1, Index(3));
  CHECK(simplify(mod(v2, E - 1), {{2, E - 1}}).to_string() == "v2");
  // without the least value of M, D - 1 may be negative: the nested division stays
  CHECK(simplify(floordiv(floordiv(lin, N + 3), D - 1), ext).to_string() != "v0");
}

TEST_CASE("simplify: ranges decide comparisons and leave what they cannot decide", "[cpu][index]") {
  const VarExtents ext{{0, N}};
  CHECK(simplify(le(Index(0), v0), ext).as_constant() == 1);
  CHECK(simplify(lt(v0, N), ext).as_constant() == 1);
  CHECK(simplify(lt(v0 + 1, N), ext).to_string() == "((v0 + 1) < N)");
  CHECK(simplify(lt(N + v0, Index(0)), ext).as_constant() == 0);
  CHECK(simplify(land(le(Index(0), v0), lt(v0, M)), ext).to_string() == "(v0 < M)");
  // a variable without a known extent is only known to be non-negative
  CHECK(simplify(lt(v1, N), ext).to_string() == "(v1 < N)");
  CHECK(simplify(mod(v1, N), ext).to_string() == "(v1 % N)");
}

TEST_CASE("simplify: never changes an index's value in range (fuzz)", "[cpu][index]") {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::vector<Index> dims{Index(3), Index(4), N,     M,
                                N * 2,    N + 3,    N * M, floordiv(M + 1, Index(2))};
  const SymbolMins mins{{"N", 1}, {"M", 1}};
  for (int round = 0; round < 400; ++round) {
    VarExtents ext;
    std::vector<Index> extent(3);
    for (int v = 0; v < 3; ++v) ext[v] = extent[static_cast<size_t>(v)] = dims[static_cast<size_t>(pick(8))];
    // random index over the variables, shaped like composed views
    std::function<Index(int)> gen = [&](int depth) -> Index {
      if (depth == 0 || pick(4) == 0) {
        switch (pick(4)) {
          case 0:
            return Index(pick(7) - 2);
          case 1:
            return dims[static_cast<size_t>(pick(8))];
          default:
            return Index::var(pick(3));
        }
      }
      const Index a = gen(depth - 1), b = gen(depth - 1);
      const Index d = dims[static_cast<size_t>(pick(8))];
      switch (pick(10)) {
        case 0:
          return a + b;
        case 1:
          return a - b;
        case 2:
          return a * d;
        case 3:
          return floordiv(a, d);
        case 4:
          return mod(a, d);
        case 5:
          return a * d + b;
        case 6:
          return lt(a, b);
        case 7:
          return land(le(Index(0), a), lt(a, d));
        case 8:
          return floordiv(a, Index(3)) * 3 + mod(a, Index(3)) + floordiv(floordiv(a, Index(3)), d);
        default:
          return select(lt(a, d), a, b);
      }
    };
    const Index e = gen(4);
    const Index s = simplify(e, ext, mins);
    for (int trial = 0; trial < 8; ++trial) {
      std::map<std::string, int64_t> syms{{"N", 1 + pick(9)}, {"M", 1 + pick(9)}};
      std::vector<int64_t> vars(3);
      bool empty = false;
      for (size_t v = 0; v < 3; ++v) {
        const int64_t n = extent[v].evaluate({}, syms);
        if (n <= 0) empty = true;
        vars[v] = n > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(n)) : 0;
      }
      if (empty) continue;
      INFO(e.to_string() << "  ->  " << s.to_string());
      REQUIRE(s.evaluate(vars, syms) == e.evaluate(vars, syms));
    }
  }
}
