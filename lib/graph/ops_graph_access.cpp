// How the high-level ops reach a Graph: the graph of an operand, or -- for creation ops
// that take no tensor (constant, arange, tril_mask) -- a fresh constant-only graph, whose
// nodes the graph core copies into the real graph when they meet one of its tensors.
#include "graph/ops_common.hpp"

namespace luminal::detail {

Graph graph_of(const Tensor& t, const Ctx& c) {
  need(t, c, "operand");
  return Graph(t.graph_impl());
}

Graph current_graph(const Ctx& /*c*/) { return Graph(); }

}  // namespace luminal::detail
