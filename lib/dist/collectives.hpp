// The distributed runtime's side of the collectives: one collective node of a plan run on
// this rank through a Communicator, and the plan specialised to this rank.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "ir/tensor_lang.hpp"
#include "luminal/communicator.hpp"

namespace luminal::dist {

/// Runs the collective kernel `spec` (AllReduce, AllGather or ReduceScatter over
/// comm.size() ranks) on this rank: `in` is the operand (contiguous, shape `in_shape`),
/// `out` the result (contiguous). The result is what the reference interpreter's SPMD
/// semantics give -- sums over ranks are added in rank order, element by element, so they
/// are bit-identical on every rank and to the simulation. An all_reduce runs as the
/// spec's launch says (ir::kAllReduceScatterGather: reduce-scatter then all_gather;
/// otherwise all_gather then the sum), the cost model's choice.
void run_collective(Communicator& comm, const ir::KernelSpec& spec, const std::vector<int64_t>& in_shape,
                    const void* in, void* out);

/// All-gathers every rank's `mine` and returns the ranks whose value is not rank 0's, as
/// "1, 3" ("" when all agree). Every rank must call it.
std::string ranks_differing_from_rank0(Communicator& comm, uint64_t mine);

/// A structural fingerprint of the plan (kernels, wiring, leaves, outputs): equal on two
/// ranks exactly when they compiled the same program. Deterministic across processes of
/// the same build (hashes of text and numbers only, no addresses).
uint64_t plan_fingerprint(const compiler::KernelPlan& plan);

/// Every rank must run the same plan (its collectives pair up with the others'). Rank 0
/// searches and sends its plan (shared_search.hpp); this last check exchanges the plans'
/// fingerprints and throws CompileError naming the ranks that differ (a plan edited on
/// one rank, a corrupted transfer) instead of letting their collectives mismatch at run
/// time.
void check_same_plan(Communicator& comm, const compiler::KernelPlan& plan);

/// `d` with the variable `name` replaced by `value`.
Dim substitute(const Dim& d, const std::string& name, int64_t value);

/// The plan with "%rank" replaced by `rank` in every kernel body (slice offsets of a
/// shard), so generated code sees constants. Throws CompileError when a collective's
/// number of ranks differs from `world`.
std::shared_ptr<const compiler::KernelPlan> specialize_rank(const compiler::KernelPlan& plan, int rank, int world);

}  // namespace luminal::dist
