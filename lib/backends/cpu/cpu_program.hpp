// A kernel plan lowered to the kernel IR: one kernel::Program whose first buffers are
// the plan's values (buffer v = plan value v), followed by the temporaries that multi-
// kernel steps create. Steps that cannot be lowered (reported by kernel::lower::lower_spec) are left to
// the interpreter and counted.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernel/lower/lower_spec.hpp"
#include "compiler/plan.hpp"
#include "kernel/kernel_ir.hpp"
#include "luminal/callable.hpp"

namespace luminal::cpu {

/// One plan step: generated kernels [k0, k1) of the program, or the interpreter.
struct PlanStep {
  int k0 = 0, k1 = 0;
  bool interpreted = false;
  bool collective = false;  ///< a host step calling the communicator (lib/dist)
};

struct LoweredPlan {
  kernel::Program prog;
  std::vector<PlanStep> steps;  // per plan step
  /// Per plan value: the index into plan.outputs that is written in place (the first
  /// output naming a computed value), or -1.
  std::vector<int> direct_output;
  /// Per plan value: its symbolic shape (empty for a leaf no step reads).
  std::vector<std::vector<Dim>> value_shape;
  /// Per buffer past the plan's values: the step that created it (a temporary).
  std::vector<int> temp_step;
  /// Per plan step: the step whose kernel runs it -- itself, or a later step whose
  /// kernel took it as side work (kernel::Kernel::side, lower::Options::side_work); its
  /// arguments live until then.
  std::vector<int> runs_at;
  int64_t side_kernels = 0;     ///< kernels run as another's side work (a launch each saved)
  int64_t tail_kernels = 0;     ///< kernels run as another's tail work (likewise)
  int64_t interpreted = 0;      ///< steps left to the interpreter
  std::string interpreted_why;  ///< "step 3 (gather): ..." per such step
};

/// The GEMM tile of a spec on this CPU: its launch parameters {mr, nr, kc} when the ISA's
/// registers hold that micro tile, else the ISA's default (kernel::lower::Options::gemm_tile).
kernel::GemmTile cpu_gemm_tile(const ir::KernelSpec& spec);

/// Params stored as a block of their declared shape (a rank's weight shards), by name.
using ParamBlocks = std::map<std::string, ParamRegion>;

/// Buffers for every plan value, then every step lowered in plan order (the CPU's GEMM
/// tiles unless `opt` gives its own). A param named in `blocks` is stored as that block
/// (kernel::Program::blocks) and its kernels index the block -- unless a step the
/// interpreter runs reads it: then it is stored whole.
LoweredPlan lower_plan(const compiler::KernelPlan& plan, kernel::lower::Options opt = {},
                       const ParamBlocks& blocks = {});
/// Moves small elementwise kernels into another kernel's launch -- the tail work of the
/// one before, or the side work of a later one -- where that changes no result (lower_plan
/// does it when its options ask for side_work).
void fold_side_work(LoweredPlan& lowered);
/// The params `prog` stores as blocks (what lower_plan kept of its `blocks`).
ParamBlocks stored_blocks(const kernel::Program& prog);
/// The options the CPU backend lowers with: its GEMM tiles, a segmented GEMM B (the GPU
/// backends, which share lower_plan, pass their own).
kernel::lower::Options cpu_lower_options();

}  // namespace luminal::cpu
