// Invariant checks shared by the e-graph tests.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "luminal/egraph/egraph.hpp"

namespace egtest {

using luminal::egraph::Id;

/// Checks, on a rebuilt e-graph: every live node has canonical children and the hashcons
/// maps it to its own class; no two live nodes are equal; node and class counts agree
/// with the index. Returns a description of the first violation, or "" when all hold.
template <class G>
std::string check_invariants(G& g) {
  if (!g.is_clean()) return "not rebuilt";
  const auto& ix = g.index();
  using Key = std::tuple<std::size_t, std::int64_t, std::vector<Id>>;
  std::map<Key, Id> seen;
  std::size_t nodes = 0;
  for (Id c : ix.classes()) {
    if (g.find(c) != c) return "index lists a non-canonical class";
    for (Id n : ix.nodes(c)) {
      ++nodes;
      auto v = g.node(n);
      std::vector<Id> kids(v.kids.begin(), v.kids.end());
      for (Id k : kids)
        if (g.find(k) != k) return "node with a non-canonical child";
      if (g.class_of_node(n) != c) return "node indexed under the wrong class";
      if (g.lookup(v.op, v.payload, v.kids) != c) return "hashcons does not map a node to its class";
      Key key{static_cast<std::size_t>(v.op), static_cast<std::int64_t>(v.payload), kids};
      if (!seen.emplace(key, c).second) return "two equal canonical nodes";
    }
  }
  if (nodes != g.num_nodes()) return "node count disagrees with the index";
  if (ix.classes().size() != g.num_classes()) return "class count disagrees with the index";
  return "";
}

}  // namespace egtest
