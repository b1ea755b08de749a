// The distributed runtime's side of the collectives: one collective node of a plan run on
// this rank through a Communicator, and the plan specialised to this rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "ir/tensor_lang.hpp"
#include "luminal/communicator.hpp"

namespace luminal::dist {

/// The local steps of a collective -- scratch, the ordered sum of the ranks' blocks, row
/// copies (packing, interleaving, zero padding) -- on the memory the communicator's buffers
/// live in: host memory (host_local_ops), or a GPU's for a communicator whose buffers are
/// device memory (NCCL), where they are device kernels (gpu/device_collectives.hpp). One
/// collective algorithm drives either, so both give the same bits.
class LocalOps {
 public:
  virtual ~LocalOps() = default;
  /// At least `bytes` of scratch in that memory, valid until the next call.
  virtual std::byte* scratch(std::size_t bytes) = 0;
  /// dst[i] = b_0[i] + b_1[i] + ... + b_{world-1}[i], in rank order (f32; i32 wrapping),
  /// where b_q, n elements, starts at blocks + q * n elements.
  virtual void sum_in_rank_order(DType dt, const std::byte* blocks, std::size_t world, int64_t n,
                                 std::byte* dst) = 0;
  /// For every q < world and o < outer: `row` bytes from src + q * sq + o * so to
  /// dst + q * dq + o * dout (src null: zeros).
  virtual void copy_rows(std::byte* dst, const std::byte* src, std::size_t row, std::size_t outer,
                         std::size_t world, std::size_t dq, std::size_t dout, std::size_t sq,
                         std::size_t so) = 0;
  /// Before each communicator call: what the steps before it wrote must be visible to it.
  virtual void before_communicator() {}
};

/// The local steps on host memory (per-thread scratch: a steady-state call allocates
/// nothing).
LocalOps& host_local_ops();

/// Runs the collective kernel `spec` (AllReduce, AllGather or ReduceScatter over
/// comm.size() ranks) on this rank: `in` is the operand (contiguous, shape `in_shape`),
/// `out` the result (contiguous). The result is what the reference interpreter's SPMD
/// semantics give -- sums over ranks are added in rank order, element by element, so they
/// are bit-identical on every rank and to the simulation. An all_reduce runs as the
/// spec's launch says (ir::kAllReduceScatterGather: reduce-scatter then all_gather;
/// otherwise all_gather then the sum), the cost model's choice.
void run_collective(Communicator& comm, const ir::KernelSpec& spec, const std::vector<int64_t>& in_shape,
                    const void* in, void* out);
/// The same with the local steps on `ops`'s memory (`in`, `out` there too).
void run_collective(Communicator& comm, const ir::KernelSpec& spec, const std::vector<int64_t>& in_shape,
                    const void* in, void* out, LocalOps& ops);

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
