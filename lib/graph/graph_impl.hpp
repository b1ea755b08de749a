// The node store behind Graph and Tensor. Nodes are appended, never changed or removed;
// a std::deque keeps references to a node's shape valid while the graph grows.
#pragma once

#include <cstdint>
#include <deque>
#include "luminal/source_location.hpp"
#include <string>
#include <vector>

#include "graph/primitives.hpp"
#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"

namespace luminal::detail {

struct Node {
  PrimOp op = PrimOp::Constant;
  std::vector<uint32_t> inputs;
  std::vector<Dim> shape;
  DType dtype = DType::f32;
  // Payload; which fields matter depends on op.
  double value = 0;       // Constant: the value; Pad: the fill value
  int axis = 0;           // SumReduce/MaxReduce/Slice/Pad/AllGather/ReduceScatter
  std::vector<int> perm;  // Permute
  Dim start, end;         // Slice: [start, end); Pad: lo (start) and hi (end)
  int64_t step = 1;       // Slice; collectives: the number of ranks
  std::string name;       // Input/Param: the user's name
  std::string op_name;    // the user-facing op that created the node ("matmul", ...)
  Loc loc;
};

/// A named dim declared with Graph::dim.
struct DimDecl {
  std::string name;
  int64_t lo = 0, hi = 0;
  int64_t multiple = 1;
  Dim dim;
};

/// A fact about dims that could not be decided when the graph was built: a == b, or
/// a <= b when `less_equal`. The Callable checks it once the dims are bound and throws
/// RuntimeError(message) if it is false.
struct Guard {
  Dim a, b;
  bool less_equal = false;
  std::string message;
};

struct GraphImpl {
  std::deque<Node> nodes;
  std::vector<DimDecl> dims;
  std::vector<uint32_t> inputs;  // Input nodes, in declaration order
  std::vector<uint32_t> params;  // Param nodes, in declaration order
  std::vector<std::pair<std::string, uint32_t>> outputs;
  std::vector<Guard> guards;

  uint32_t add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<uint32_t>(nodes.size() - 1);
  }
  /// Inputs and params only: such a graph holds nothing but constants, and its nodes may
  /// be copied into another graph when a tensor of it meets one of that graph.
  bool is_constant_only() const { return inputs.empty() && params.empty(); }
};

/// Copies `node` of `src` and everything it depends on into `dst` (constant-only
/// graphs only); returns the new index.
uint32_t import_node(GraphImpl& dst, const GraphImpl& src, uint32_t node);

/// Every node reachable from the outputs, in topological (creation) order.
std::vector<uint32_t> live_nodes(const GraphImpl& g);

}  // namespace luminal::detail
