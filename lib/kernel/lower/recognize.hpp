// Recognisers of the kernel kinds: each looks at a kernel body (ir::KernelSpec::body, a
// primitive DAG over input slots) and returns a plan -- which nodes play which part -- or
// why the body is not of that kind. They read the body only (no kernel IR is built), so
// the CPU lowering (emit_*.cpp, whose emitters turn a plan into kernel IR) and the GPU
// renderers share them. A body no specialised kind takes lowers as generic loops.
//   GEMM             recognize_gemm
//   row reduction    recognize_row_reduction (softmax/norm rows: a reduction with its epilogue)
//   gather           recognize_gather
//   attention        ir::match_attention (ir/attention_match.hpp)
//   elementwise      whatever is left: loops over the result's shape
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph_impl.hpp"

namespace luminal::kernel::lower {

/// A plan, or the reason there is none.
template <class Plan>
struct Recognized {
  std::optional<Plan> plan;
  std::string why;  ///< when !plan
};

/// root -> (elementwise | reshape)* -> sum_reduce(mul(x, y)), all f32: a contraction with
/// its elementwise tail (the epilogue). Every path from the root to the reduction passes
/// elementwise ops and reshapes only, so the epilogue reads the accumulator at the output
/// position; whether x and y are strided loads is for the emitter to find out. With
/// `half_result` the root may also be f16/bf16 (the epilogue rounds to it: a GPU GEMM
/// stores C in any float type; the CPU's stores f32).
struct GemmBody {
  uint32_t reduce = 0;  ///< the sum_reduce node
  uint32_t mul = 0;     ///< its operand, mul(x, y)
};
Recognized<GemmBody> recognize_gemm(const detail::GraphImpl& body, uint32_t root, bool half_result = false);

/// The reduction `node` reaches through elementwise ops only: the kernel computing `node`
/// accumulates it and applies the elementwise tail as its epilogue. (Where the node
/// reaches several, the first found; the others are materialized by their own kernels.)
struct RowReduction {
  uint32_t reduce = 0;
  std::vector<uint32_t> accumulators;  ///< ir::row_accumulators: `reduce` first
};
Recognized<RowReduction> recognize_row_reduction(const detail::GraphImpl& body, uint32_t node);

/// A bare gather(table, ids): the only body a Gather kernel has.
struct GatherBody {
  uint32_t gather = 0, table = 0, ids = 0;
};
Recognized<GatherBody> recognize_gather(const detail::GraphImpl& body, uint32_t root);

}  // namespace luminal::kernel::lower
