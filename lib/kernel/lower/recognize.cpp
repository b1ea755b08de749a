// The kernel-kind recognisers (see recognize.hpp).
#include "kernel/lower/recognize.hpp"

#include <functional>
#include <map>

#include "ir/kernel_body.hpp"
#include "ir/tensor_lang.hpp"

namespace luminal::kernel::lower {

using detail::Node;
using detail::PrimOp;

namespace {

bool passes_epilogue(const Node& n) { return ir::is_elementwise(ir::to_op(n.op)) || n.op == PrimOp::Reshape; }

}  // namespace

Recognized<GemmBody> recognize_gemm(const detail::GraphImpl& body, uint32_t root, bool half_result) {
  const DType out = body.nodes[root].dtype;
  if (out != DType::f32 && !(half_result && (out == DType::f16 || out == DType::bf16)))
    return {std::nullopt, "the result is not f32"};
  // The one sum_reduce the root reaches through elementwise ops and reshapes.
  int red = -1;
  std::function<bool(uint32_t)> walk = [&](uint32_t id) -> bool {
    const Node& n = body.nodes[id];
    if (n.op == PrimOp::SumReduce) {
      if (red >= 0 && red != static_cast<int>(id)) return false;
      red = static_cast<int>(id);
      return true;
    }
    if (n.op == PrimOp::MaxReduce) return false;
    if (passes_epilogue(n))
      for (uint32_t k : n.inputs)
        if (!walk(k)) return false;
    return true;
  };
  if (!walk(root)) return {std::nullopt, "a max reduction or a second sum reduction in the tail"};
  if (red < 0) return {std::nullopt, "no sum reduction"};
  // Every path from the root to the reduction must be elementwise/reshape: the epilogue
  // replaces the reduction by the accumulator at the output position.
  std::map<uint32_t, bool> reach;
  std::function<bool(uint32_t)> reaches = [&](uint32_t id) -> bool {
    if (static_cast<int>(id) == red) return true;
    if (auto it = reach.find(id); it != reach.end()) return it->second;
    bool r = false;
    for (uint32_t k : body.nodes[id].inputs) r = reaches(k) || r;
    reach[id] = r;
    return r;
  };
  reaches(root);
  for (const auto& [id, r] : reach)
    if (r && !passes_epilogue(body.nodes[id])) return {std::nullopt, "the reduction is read through a view"};
  const Node& rn = body.nodes[static_cast<size_t>(red)];
  if (body.nodes[rn.inputs[0]].op != PrimOp::Mul || rn.dtype != DType::f32)
    return {std::nullopt, "the reduction does not sum an f32 product"};
  return {GemmBody{static_cast<uint32_t>(red), rn.inputs[0]}, {}};
}

Recognized<RowReduction> recognize_row_reduction(const detail::GraphImpl& body, uint32_t node) {
  // The first reduction of ir::row_accumulators' walk: the accumulator the cost model's
  // predicate starts from is this one.
  const std::vector<uint32_t> accs = ir::row_accumulators(body, node);
  if (accs.empty()) return {std::nullopt, "no reduction reached through elementwise ops"};
  return {RowReduction{accs[0], accs}, {}};
}

Recognized<GatherBody> recognize_gather(const detail::GraphImpl& body, uint32_t root) {
  const Node& n = body.nodes[root];
  if (n.op != PrimOp::Gather) return {std::nullopt, "gather kernel whose root is not a gather"};
  return {GatherBody{root, n.inputs[0], n.inputs[1]}, {}};
}

}  // namespace luminal::kernel::lower
