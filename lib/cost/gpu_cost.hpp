// The GPU cost of a kernel launch (docs/cost-model.md, "GPU launches"): the roofline of
// cost_model.hpp refined by what decides GPU run time beyond bytes and FLOPs --
//  * occupancy: blocks resident per SM (CU) from registers, shared memory (LDS), threads
//    and the block limit; a schedule that does not fit at all costs +inf;
//  * waves: the grid's blocks over SMs x resident blocks, the last wave partly idle;
//  * latency hiding: fewer than 8 resident warps per SM leave the pipelines waiting;
//  * coalescing: a row per thread over long rows reads one element per memory sector;
//  * tensor cores: f16/bf16 GEMM operands on an architecture with them run at the f16
//    peak (times TargetDesc::matrix_sync_ratio: mma.sync on Hopper), everything else at
//    the f32 peak; pipelined (cp.async ring) tiles hide the load latency they cover;
//  * one launch overhead per kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "cost/cost_model.hpp"
#include "cost/gpu_launch.hpp"
#include "cost/target_desc.hpp"

namespace luminal::detail {

/// Resources of one block of a schedule, estimated before any compiler sees it.
struct GpuBlock {
  int threads = 256;
  int registers = 32;  // per thread
  int shared_bytes = 0;
};

/// Blocks of `b` resident on one SM (CU) of `t`; 0 when one block does not fit.
int resident_blocks(const TargetDesc& t, const GpuBlock& b);

/// The block a generated GEMM tile {bm, bn, bk} needs: 256 threads, (bm*bn/256)
/// accumulators + fragments + addressing per thread, (bm + bn) * bk f32 of shared tiles.
GpuBlock gemm_block(int64_t bm, int64_t bn, int64_t bk);

/// The block a matrix-engine GEMM tile {bm, bn} (bk = 32; mma.sync, MFMA or WMMA by
/// TargetDesc::matrix_engine) needs on `t`: threads, registers a thread, shared tiles.
GpuBlock matrix_gemm_block(const TargetDesc& t, int64_t bm, int64_t bn);

/// The block of a ldmatrix + cp.async ring launch (GpuGemmEngine::MmaAsync): its warps'
/// threads, the registers ptxas gives such kernels, its shared ring.
GpuBlock mma_async_block(const GpuGemmLaunch& L);

double gpu_kernel_seconds(const TargetDesc& t, const KernelWork& w);

/// Kernels a GPU program runs inside other kernels' launches (kernel::Kernel::side and
/// ::tail), which the plan priced a launch each.
struct FoldedLaunches {
  int64_t side_kernels = 0;  ///< run by extra blocks of a later kernel's launch
  int64_t tail_hosts = 0;    ///< launches whose last block runs tail work
  /// One tail kernel: a thread's trips (unrolled, each stored as computed), the block's
  /// warps, the operations of one element (plain ones, and transcendental calls), and
  /// whether its trips run one after another: a conditional load (padded, around a
  /// branch) between them, a loop that is not unrolled, or a stored buffer the launch also
  /// reads (not __restrict__: no later load moves above a store).
  struct Tail {
    int64_t trips = 1, warps = 1, ops = 0, transcendentals = 0;
    bool serial = false;
  };
  std::vector<Tail> tails;
};

/// What they change in the program's estimate: a launch overhead fewer each. A tail's
/// work waits for its host's last block and an L2 round trip for the count; then each
/// tail kernel an L2 round trip for its loads and its element operations as a dependent
/// chain (4 cycles each, at the clock the f32 peak implies) -- once where its trips are
/// straight-line code (one basic block: a later trip's loads may issue before an earlier
/// trip's arithmetic and store, and the independent chains overlap), once a trip where
/// they are serial (Tail::serial) -- or the block's warps' instructions at an SM's 4 a
/// cycle, whichever is longer.
double folded_launch_seconds(const TargetDesc& t, const FoldedLaunches& f);

}  // namespace luminal::detail
