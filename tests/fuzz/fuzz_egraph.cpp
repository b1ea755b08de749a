// libFuzzer target: the e-graph. The input bytes add random terms (symbols, unary and
// binary nodes over earlier terms), union classes and rebuild, in any order; after the
// final rebuild the partition must equal a naive congruence closure's, every invariant of
// tests/egraph/check.hpp must hold, and each class's analysis datum must be the join of
// its nodes' (as tests/egraph/test_random_oracle.cpp checks for fixed seeds).
#include <cstdint>
#include <cstdlib>

#include "egraph/congruence_oracle.hpp"

using namespace luminal::egraph;
using namespace mathlang;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using G = EGraph<Math, egtest::MinSym>;
  G g;
  egtest::CongruenceOracle<G> o;
  size_t pos = 0;
  auto next = [&]() -> uint32_t { return pos < size ? data[pos++] : 0; };
  while (pos < size && o.size() < 64) {
    const uint32_t cmd = next();
    if (o.size() == 0 || cmd < 64) {  // a symbol
      o.add(g, Op::Sym, static_cast<std::int64_t>(cmd % 5), {});
    } else if (cmd < 160) {  // a unary or binary node over earlier terms
      const Op op = cmd < 112 ? (cmd & 1 ? Op::F : Op::G) : (cmd & 1 ? Op::Add : Op::Mul);
      std::vector<std::size_t> kids;
      for (int k = 0, arity = cmd < 112 ? 1 : 2; k < arity; ++k) kids.push_back(next() % o.size());
      o.add(g, op, 0, std::move(kids));
    } else if (cmd < 240) {  // a union
      const size_t a = next() % o.size(), b = next() % o.size();
      o.unite(g, a, b);
    } else {
      g.rebuild();
    }
  }
  if (!o.check(g).empty()) std::abort();
  return 0;
}
