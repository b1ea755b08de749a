// A kernel plan lowered to one kernel IR program for a GPU target: a buffer per plan
// value (the same numbering the CPU executable uses), each step's kernels named
// k<step>_<n> by the shared lowering (cpu::lower_spec, moving to lib/kernel), and the
// launch alternative the search chose for each kernel.
#pragma once

#include <string>
#include <vector>

#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/plan.hpp"
#include "kernel/kernel_ir.hpp"

namespace luminal::gpu {

struct LoweredPlan {
  kernel::Program prog;
  int64_t interpreted = 0;      ///< steps the lowering could not express (they run on the interpreter)
  std::string interpreted_why;  ///< "step 3 (gather): ..."
};

LoweredPlan lower_plan(const compiler::KernelPlan& plan);

/// The spec launch parameters of kernel `k` of a program lowered from `plan` (by its
/// k<step>_ name).
ScheduleOf plan_schedules(const compiler::KernelPlan& plan);

}  // namespace luminal::gpu
