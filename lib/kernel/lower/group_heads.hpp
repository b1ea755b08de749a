// Grouped-query attention as one task per KV head (emit_attention.cpp's last step).
//
// The graph repeats each KV head for its G query heads as views (reshape, expand): the
// lowered Attention kernel then has a batch loop h over the H query heads and reads K
// and V at h / G. Run as is, each query head streams its KV head's keys and values
// again: G times the traffic for a decode step, whose time is that traffic. Rewritten,
// the loop runs over the H / G KV heads and a task's query rows are its G heads' rows
// (row r = g * m + i: head h * G + g, query i), so K and V are read once per KV head and
// each K row feeds G dot products while it is in registers -- what the cost model
// already assumes (kernel_body.cpp counts each element of K and V once).
#pragma once

#include "kernel/index_simplify.hpp"
#include "kernel/kernel_ir.hpp"

namespace luminal::kernel::lower {

/// Rewrites Attention kernel `k` so that one task serves each KV head, when some batch
/// loop reaches K and V only through its floor division by a constant G > 1 and the
/// query rows are few (m constant, G * m <= kMaxGroupedRows). `fresh_var` is a loop
/// variable id the kernel does not use. Returns whether it did; on false `k` is unchanged.
bool group_query_heads(Kernel& k, const VarExtents& extents, const SymbolMins& sym_min, int fresh_var);

/// More grouped rows than one query block of the CPU renderer buys nothing: the K tile
/// is already shared by a block's rows.
inline constexpr int64_t kMaxGroupedRows = 64;

}  // namespace luminal::kernel::lower
