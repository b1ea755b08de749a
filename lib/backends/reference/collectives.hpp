// The meaning of the collectives (graph/primitives.hpp, "SPMD semantics"): each rank's
// result from every rank's operand. The interpreter's SPMD mode, the rule checker and
// the distributed runtime (lib/dist) all compute through these, so a sum over ranks is
// added in the same order -- rank 0 first -- everywhere, and the result is bit-identical
// on every rank and to the simulation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/reference/view.hpp"
#include "graph/op_table.hpp"

namespace luminal::detail::reference {

/// `x[r]` is rank r's operand (any views, equal shapes and dtypes); returns rank r's
/// result at index r. `op` is AllReduce, AllGather or ReduceScatter; `axis` as the node's.
std::vector<View> collective(PrimOp op, int axis, const std::vector<const View*>& x);

/// all_gather's layout: `world` contiguous row-major blocks (block q from rank q) of shape
/// `in_shape`, concatenated along `axis`, into `out` (contiguous). Also the runtime's.
void concat_blocks(const std::vector<const std::byte*>& blocks, const std::vector<int64_t>& in_shape, int axis,
                   std::size_t elem_size, std::byte* out);

/// dst[i] = blocks[0][i] + blocks[1][i] + ... in rank order (f32 or i32, wrapping), `n`
/// elements. The runtime's all_reduce and reduce_scatter add through this.
void sum_in_rank_order(DType dt, const std::vector<const std::byte*>& blocks, int64_t n, std::byte* dst);

}  // namespace luminal::detail::reference
