// Graph traversals: liveness from the outputs, and copying a constant-only subgraph into
// another graph (how tensors made without a graph -- constant(), arange() -- join one).
#include <unordered_map>

#include "graph/graph_impl.hpp"

namespace luminal::detail {

uint32_t import_node(GraphImpl& dst, const GraphImpl& src, uint32_t node) {
  std::unordered_map<uint32_t, uint32_t> map;
  // Nodes only point at earlier nodes, so one pass in index order over the ancestors
  // copies every input before its user.
  std::vector<bool> need(node + 1, false);
  need[node] = true;
  for (uint32_t i = node + 1; i-- > 0;) {
    if (!need[i]) continue;
    for (uint32_t in : src.nodes[i].inputs) need[in] = true;
  }
  for (uint32_t i = 0; i <= node; ++i) {
    if (!need[i]) continue;
    Node n = src.nodes[i];
    for (uint32_t& in : n.inputs) in = map.at(in);
    map[i] = dst.add(std::move(n));
  }
  // Facts the source graph could not decide still have to be checked.
  dst.guards.insert(dst.guards.end(), src.guards.begin(), src.guards.end());
  return map.at(node);
}

std::vector<uint32_t> live_nodes(const GraphImpl& g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (const auto& [name, id] : g.outputs) live[id] = true;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (uint32_t in : g.nodes[i].inputs) live[in] = true;
  }
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < g.nodes.size(); ++i)
    if (live[i]) out.push_back(i);
  return out;
}

}  // namespace luminal::detail
