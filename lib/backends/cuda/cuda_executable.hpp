// The CUDA runtime: the shared GPU runtime (gpu/device_executable.hpp) on the CUDA driver
// API (cuda_driver.hpp, through dlopen), with kernels compiled by NVRTC: CUBIN for the
// device's architecture, or PTX for the newest architecture NVRTC knows when the device is
// newer than NVRTC (the driver compiles it). The program is captured as a CUDA Graph per
// binding of the dims and replayed.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "backends/gpu/device_executable.hpp"

namespace luminal::cuda {

/// `param_blocks`: the weights a rank holds only a block of (DeviceExecutable).
/// Throws CompileError (no driver, a step that cannot be generated, NVRTC failure).
std::shared_ptr<const gpu::DeviceExecutable> make_executable(
    std::shared_ptr<const compiler::KernelPlan> plan, std::shared_ptr<const detail::GraphImpl> graph,
    const Target& target, const CompileOptions& options,
    const std::map<std::string, ParamRegion>& param_blocks = {});

}  // namespace luminal::cuda
