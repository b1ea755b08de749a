// libFuzzer target: the e-graph. The input bytes add random terms (symbols, unary and
// binary nodes over earlier terms), union classes and rebuild, in any order; after the
// final rebuild the partition must equal a naive congruence closure's, every invariant of
// tests/egraph/check.hpp must hold, and each class's analysis datum must be the join of
// its nodes' (as tests/egraph/test_random_oracle.cpp checks for fixed seeds).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "egraph/check.hpp"
#include "egraph/math_lang.hpp"

using namespace luminal::egraph;
using namespace mathlang;

namespace {

struct MinSym {
  using Data = std::int64_t;
  template <class G>
  Data make(const G& g, const NodeView<Math>& n) const {
    if (n.op == Op::Sym) return n.payload;
    Data m = 1 << 30;
    for (Id k : n.kids) m = std::min(m, g.data(k));
    return m;
  }
  DidMerge merge(Data& a, Data b) const {
    if (b < a) {
      a = b;
      return {true, false};
    }
    return {false, b != a};
  }
};

struct Term {
  Op op;
  std::int64_t payload;
  std::vector<std::size_t> kids;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  EGraph<Math, MinSym> g;
  std::vector<Term> terms;
  std::vector<std::size_t> uf;
  std::vector<Id> cls;
  auto find = [&](std::size_t i) {
    while (uf[i] != i) i = uf[i] = uf[uf[i]];
    return i;
  };
  size_t pos = 0;
  auto next = [&]() -> uint32_t { return pos < size ? data[pos++] : 0; };
  while (pos < size && terms.size() < 64) {
    const uint32_t cmd = next();
    if (terms.empty() || cmd < 64) {  // a symbol
      Term t{Op::Sym, static_cast<std::int64_t>(cmd % 5), {}};
      cls.push_back(g.add(t.op, t.payload, std::span<const Id>()));
      terms.push_back(t);
      uf.push_back(uf.size());
    } else if (cmd < 160) {  // a unary or binary node over earlier terms
      Term t{cmd < 112 ? (cmd & 1 ? Op::F : Op::G) : (cmd & 1 ? Op::Add : Op::Mul), 0, {}};
      const int arity = cmd < 112 ? 1 : 2;
      Id kids[2] = {};  // (an array, not a vector: GCC 12's -Warray-bounds misreads the inlined copy)
      for (int k = 0; k < arity; ++k) {
        t.kids.push_back(next() % terms.size());
        kids[k] = cls[t.kids.back()];
      }
      cls.push_back(g.add(t.op, t.payload, std::span<const Id>(kids, static_cast<size_t>(arity))));
      terms.push_back(t);
      uf.push_back(uf.size());
    } else if (cmd < 240) {  // a union
      const size_t a = next() % terms.size(), b = next() % terms.size();
      g.merge(cls[a], cls[b]);
      uf[find(a)] = find(b);
    } else {
      g.rebuild();
    }
  }
  g.rebuild();
  // The oracle: close under congruence.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < terms.size(); ++i)
      for (size_t j = i + 1; j < terms.size(); ++j) {
        if (find(i) == find(j)) continue;
        const Term &a = terms[i], &b = terms[j];
        if (a.op != b.op || a.payload != b.payload || a.kids.size() != b.kids.size()) continue;
        bool same = true;
        for (size_t k = 0; k < a.kids.size() && same; ++k) same = find(a.kids[k]) == find(b.kids[k]);
        if (same) {
          uf[find(i)] = find(j);
          changed = true;
        }
      }
  }
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t j = 0; j < terms.size(); ++j)
      if ((find(i) == find(j)) != (g.find(cls[i]) == g.find(cls[j]))) std::abort();
  if (!egtest::check_invariants(g).empty()) std::abort();
  const auto& ix = g.index();
  for (Id c : ix.classes()) {
    std::int64_t m = 1 << 30;
    for (Id n : ix.nodes(c)) m = std::min(m, g.analysis().make(g, g.node(n)));
    if (g.data(c) != m) std::abort();
  }
  return 0;
}
