// The launch alternative the search chose for each kernel of a plan lowered for a GPU
// (cpu::lower_plan: the same kernel IR for every backend; kernels of step s are named
// k<s>_<n>).
#pragma once

#include <string>

#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/plan.hpp"
#include "kernel/lower/lower_spec.hpp"

namespace luminal::gpu {

/// The spec launch parameters of kernel `k` of a program lowered from `plan`, by its
/// k<step>_ name ({} when it has none).
ScheduleOf plan_schedules(const compiler::KernelPlan& plan);

/// How the GPU backends lower a plan: the kernel IR every backend takes, with f16/bf16
/// GEMM operands kept as halves (tensor cores; the FMA tiles convert while staging).
kernel::lower::Options gpu_lower_options();

/// Writes `device_source` to the file LUMINAL_DUMP_GPU names, if it is set: every GPU
/// compile (compile_only, emulated, the device backends) calls it with what it renders.
void dump_device_source(const std::string& device_source);

}  // namespace luminal::gpu
