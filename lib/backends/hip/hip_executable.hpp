// The HIP runtime: the shared GPU runtime (gpu/device_executable.hpp) on the HIP runtime
// API (hip_driver.hpp, through dlopen), with kernels compiled by hipRTC for the device's
// architecture (checked against comgr's ISA list first, like every HIP compile).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backends/gpu/device_executable.hpp"

namespace luminal::hip {

/// `param_blocks`: the weights a rank holds only a block of (DeviceExecutable).
/// Throws CompileError (no runtime or device, an architecture this ROCm does not know, a
/// step that cannot be generated, a hipRTC failure).
std::shared_ptr<const gpu::DeviceExecutable> make_executable(
    std::shared_ptr<const compiler::KernelPlan> plan, std::shared_ptr<const detail::GraphImpl> graph,
    const Target& target, const CompileOptions& options,
    const std::map<std::string, ParamRegion>& param_blocks = {});

}  // namespace luminal::hip
