// A naive congruence-closure oracle for the e-graph tests and the e-graph fuzzer: the same
// terms are added to an EGraph and to a flat term list, the same unions applied to both,
// and after a rebuild the e-graph's partition must equal the oracle's fixpoint.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "egraph/check.hpp"
#include "egraph/math_lang.hpp"

namespace egtest {

/// Analysis: the smallest symbol id among a class's terms (a join: min), so a merge that
/// forgets to join analysis data shows up as a class whose datum is not its nodes' min.
struct MinSym {
  using Data = std::int64_t;
  template <class G>
  Data make(const G& g, const luminal::egraph::NodeView<mathlang::Math>& n) const {
    if (n.op == mathlang::Op::Sym) return n.payload;
    Data m = 1 << 30;
    for (Id k : n.kids) m = std::min(m, g.data(k));
    return m;
  }
  luminal::egraph::DidMerge merge(Data& a, Data b) const {
    if (b < a) {
      a = b;
      return {true, false};
    }
    return {false, b != a};
  }
};

/// Terms mirrored into an e-graph and a union-find closed by brute force.
template <class G>
struct CongruenceOracle {
  struct Term {
    mathlang::Op op;
    std::int64_t payload;
    std::vector<std::size_t> kids;  // indices of earlier terms
  };
  std::vector<Term> terms;
  std::vector<std::size_t> uf;
  std::vector<Id> cls;  // the e-graph class of each term

  std::size_t size() const { return terms.size(); }
  std::size_t find(std::size_t i) {
    while (uf[i] != i) i = uf[i] = uf[uf[i]];
    return i;
  }
  /// Adds a term over earlier terms to both sides.
  void add(G& g, mathlang::Op op, std::int64_t payload, std::vector<std::size_t> kids) {
    Id ids[2] = {};  // math_lang's arity is at most 2 (an array: GCC 12's -Warray-bounds misreads a vector copy)
    for (std::size_t k = 0; k < kids.size(); ++k) ids[k] = cls[kids[k]];
    cls.push_back(g.add(op, payload, std::span<const Id>(ids, kids.size())));
    terms.push_back({op, payload, std::move(kids)});
    uf.push_back(uf.size());
  }
  /// Unites two terms on both sides.
  void unite(G& g, std::size_t a, std::size_t b) {
    g.merge(cls[a], cls[b]);
    uf[find(a)] = find(b);
  }
  /// Rebuilds the e-graph, closes the oracle under congruence, and returns the first
  /// disagreement (partition, invariants, analysis join), or "" when all hold.
  std::string check(G& g) {
    g.rebuild();
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < terms.size(); ++i)
        for (std::size_t j = i + 1; j < terms.size(); ++j) {
          if (find(i) == find(j)) continue;
          const Term &a = terms[i], &b = terms[j];
          if (a.op != b.op || a.payload != b.payload || a.kids.size() != b.kids.size()) continue;
          bool same = true;
          for (std::size_t k = 0; k < a.kids.size() && same; ++k) same = find(a.kids[k]) == find(b.kids[k]);
          if (same) {
            uf[find(i)] = find(j);
            changed = true;
          }
        }
    }
    for (std::size_t i = 0; i < terms.size(); ++i)
      for (std::size_t j = 0; j < terms.size(); ++j)
        if ((find(i) == find(j)) != (g.find(cls[i]) == g.find(cls[j])))
          return "terms " + std::to_string(i) + " and " + std::to_string(j) + ": partition differs from the oracle";
    if (std::string bad = check_invariants(g); !bad.empty()) return bad;
    const auto& ix = g.index();
    for (Id c : ix.classes()) {
      std::int64_t m = 1 << 30;
      for (Id n : ix.nodes(c)) m = std::min(m, g.analysis().make(g, g.node(n)));
      if (g.data(c) != m) return "class " + std::to_string(c) + ": analysis datum is not its nodes' join";
    }
    return "";
  }
};

}  // namespace egtest
