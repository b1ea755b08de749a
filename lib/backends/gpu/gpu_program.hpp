// The launch alternative the search chose for each kernel of a plan lowered for a GPU
// (cpu::lower_plan: the same kernel IR for every backend; kernels of step s are named
// k<s>_<n>).
#pragma once

#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/plan.hpp"

namespace luminal::gpu {

/// The spec launch parameters of kernel `k` of a program lowered from `plan`, by its
/// k<step>_ name ({} when it has none).
ScheduleOf plan_schedules(const compiler::KernelPlan& plan);

}  // namespace luminal::gpu
