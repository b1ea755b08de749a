// Randomized congruence closure: random terms and unions, then rebuild; the e-graph's
// partition must equal a naive congruence-closure oracle's, and every invariant must hold
// (canonical hashcons, no duplicate canonical nodes, analysis data joined).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include "check.hpp"
#include "egraph/math_lang.hpp"

using namespace luminal::egraph;
using namespace mathlang;

namespace {

// Analysis: the smallest symbol id in the class's terms (a join: min).
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

struct TermNode {
  Op op;
  std::int64_t payload;
  std::vector<std::size_t> kids;
};

// Naive congruence closure over explicit term nodes.
struct Oracle {
  std::vector<TermNode> terms;
  std::vector<std::size_t> uf;
  std::size_t find(std::size_t i) {
    while (uf[i] != i) i = uf[i] = uf[uf[i]];
    return i;
  }
  void unite(std::size_t a, std::size_t b) { uf[find(a)] = find(b); }
  void close() {
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < terms.size(); ++i)
        for (std::size_t j = i + 1; j < terms.size(); ++j) {
          if (find(i) == find(j)) continue;
          const TermNode &a = terms[i], &b = terms[j];
          if (a.op != b.op || a.payload != b.payload || a.kids.size() != b.kids.size()) continue;
          bool same = true;
          for (std::size_t k = 0; k < a.kids.size() && same; ++k) same = find(a.kids[k]) == find(b.kids[k]);
          if (same) {
            unite(i, j);
            changed = true;
          }
        }
    }
  }
};

}  // namespace

TEST_CASE("random terms and unions agree with a naive congruence closure", "[egraph][random]") {
  std::mt19937 rng(12345);
  for (int round = 0; round < 60; ++round) {
    INFO("round " << round);
    EGraph<Math, MinSym> g;
    Oracle o;
    std::vector<Id> cls;  // e-graph class of each oracle term
    auto add_random = [&] {
      TermNode t;
      int pick = static_cast<int>(rng() % 10);
      if (o.terms.empty() || pick < 3) {
        t.op = Op::Sym;
        t.payload = static_cast<std::int64_t>(rng() % 4);
      } else if (pick < 6) {
        t.op = pick < 5 ? Op::F : Op::G;
        t.payload = 0;
        t.kids = {rng() % o.terms.size()};
      } else {
        t.op = pick < 8 ? Op::Add : Op::Mul;
        t.payload = 0;
        t.kids = {rng() % o.terms.size(), rng() % o.terms.size()};
      }
      std::vector<Id> kids;
      for (std::size_t k : t.kids) kids.push_back(cls[k]);
      cls.push_back(g.add(t.op, t.payload, std::span<const Id>(kids)));
      o.terms.push_back(t);
      o.uf.push_back(o.uf.size());
    };
    const int nterms = 20 + static_cast<int>(rng() % 100);
    for (int i = 0; i < nterms; ++i) add_random();
    const int nunions = 1 + static_cast<int>(rng() % 12);
    for (int u = 0; u < nunions; ++u) {
      std::size_t a = rng() % o.terms.size(), b = rng() % o.terms.size();
      g.merge(cls[a], cls[b]);
      o.unite(a, b);
      // Sometimes add terms between unions and a rebuild (stale hashcons keys).
      if (rng() % 3 == 0) add_random();
      if (rng() % 4 == 0) g.rebuild();
    }
    g.rebuild();
    o.close();
    for (std::size_t i = 0; i < o.terms.size(); ++i)
      for (std::size_t j = 0; j < o.terms.size(); ++j)
        REQUIRE((o.find(i) == o.find(j)) == (g.find(cls[i]) == g.find(cls[j])));
    REQUIRE(egtest::check_invariants(g) == "");
    // Analysis joined: each class's data is the join of make over its nodes.
    const auto& ix = g.index();
    for (Id c : ix.classes()) {
      std::int64_t m = 1 << 30;
      for (Id n : ix.nodes(c)) m = std::min(m, g.analysis().make(g, g.node(n)));
      REQUIRE(g.data(c) == m);
    }
  }
}
