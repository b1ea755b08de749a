// Building tensor-language terms: e-graph nodes with correctly filled attributes, graphs
// into the e-graph, and single e-graph nodes back into primitive graphs the reference
// interpreter runs (how the rule checker and the reference target evaluate any node,
// kernel nodes included: a kernel's body is inlined over its children).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor_lang.hpp"

namespace luminal::ir {

// ------------------------------------------------------------------ e-graph nodes
Id add_input(EGraph& g, Op input_or_param, const std::string& name, const std::vector<Dim>& shape, DType dt);
Id add_constant(EGraph& g, double value, DType dt);
Id add_iota(EGraph& g, const Dim& n);
/// Unary, binary, Where, Gather, MatMul: ops without attributes (payload 0).
Id add_plain(EGraph& g, Op op, const std::vector<Id>& kids);
Id add_cast(EGraph& g, Id x, DType to);
Id add_reduce(EGraph& g, Op sum_or_max, Id x, int axis);
Id add_reshape(EGraph& g, Id x, const std::vector<Dim>& shape);
Id add_permute(EGraph& g, Id x, const std::vector<int>& perm);
Id add_expand(EGraph& g, Id x, const std::vector<Dim>& shape);
Id add_slice(EGraph& g, Id x, int axis, const Dim& start, const Dim& end, int64_t step);
Id add_pad(EGraph& g, Id x, int axis, const Dim& lo, const Dim& hi, double value);
/// AllReduce (axis ignored), AllGather or ReduceScatter over `world` ranks.
Id add_collective(EGraph& g, Op op, Id x, int axis, int64_t world);
Id add_kernel(EGraph& g, std::shared_ptr<const KernelSpec> spec, const std::vector<Id>& kids);

/// The attributes of a graph node (what its e-graph node's payload interns).
Attr attr_of(const detail::Node& n);

// ------------------------------------------------------------------ graphs <-> e-graph
struct Loaded {
  std::vector<Id> cls;                              ///< per graph node: its class (kNoId if not live)
  std::vector<std::pair<std::string, Id>> outputs;  ///< output name -> class
};
/// Adds every live node of `graph` to `g`.
Loaded load_graph(EGraph& g, const detail::GraphImpl& graph);

/// Appends a primitive node computing `op` (attributes `at`) over nodes `kids` of `out`,
/// inferring its shape and dtype; MatMul becomes its primitive expansion. Returns its index.
uint32_t emit(detail::GraphImpl& out, Op op, const Attr& at, const std::vector<uint32_t>& kids);

/// A graph whose output "out" computes e-graph node `node`: its children's classes are
/// computed by `choice[class]` (a node id per canonical class, e.g. from math_choice),
/// kernel nodes by inlining their bodies. Input/Param leaves keep their names and are
/// registered in `inputs`/`params`.
std::shared_ptr<detail::GraphImpl> node_to_graph(const EGraph& g, Id node, const std::vector<Id>& choice);

/// One math node per class (smallest term, kernel nodes excluded where possible): the
/// "original program" against which the checker compares every other node.
std::vector<Id> math_choice(EGraph& g);

}  // namespace luminal::ir
