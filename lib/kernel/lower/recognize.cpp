// The kernel-kind recognisers (see recognize.hpp).
#include "kernel/lower/recognize.hpp"

#include "ir/kernel_body.hpp"
#include "ir/tensor_lang.hpp"

namespace luminal::kernel::lower {

using detail::Node;
using detail::PrimOp;

Recognized<GemmBody> recognize_gemm(const detail::GraphImpl& body, uint32_t root, bool half_result) {
  const DType out = body.nodes[root].dtype;
  if (out != DType::f32 && !(half_result && (out == DType::f16 || out == DType::bf16)))
    return {std::nullopt, "the result is not f32"};
  const ir::EpilogueReduction e = ir::epilogue_reduction(body, root);
  if (!e.reduce) return {std::nullopt, e.why};
  const uint32_t red = *e.reduce;
  const Node& rn = body.nodes[red];
  if (body.nodes[rn.inputs[0]].op != PrimOp::Mul || rn.dtype != DType::f32)
    return {std::nullopt, "the reduction does not sum an f32 product"};
  return {GemmBody{red, rn.inputs[0]}, {}};
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
