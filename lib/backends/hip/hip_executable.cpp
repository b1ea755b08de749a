#include "backends/hip/hip_executable.hpp"

#include "backends/gpu/device_collectives.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/hip/hip_driver.hpp"
#include "backends/hip/hip_module.hpp"
#include "luminal/error.hpp"

namespace luminal::hip {

std::shared_ptr<const gpu::DeviceExecutable> make_executable(
    std::shared_ptr<const compiler::KernelPlan> plan, std::shared_ptr<const detail::GraphImpl> graph,
    const Target& target, const CompileOptions& options,
    const std::map<std::string, ParamRegion>& param_blocks) {
  std::string why;
  const Driver* d = Driver::get(&why);
  if (!d) throw CompileError("[hip] " + why);
  const std::string cache_dir = options.cache_dir;
  auto build = [cache_dir](const kernel::Program& prog, const compiler::KernelPlan& p, const std::string& device_arch) {
    const gpu::GpuArch ga = gpu::arch_for(Target::hip(0).with_arch(device_arch));
    gpu::DeviceBuild out;
    out.src = gpu::render_gpu(prog, ga, gpu::plan_schedules(p));
    if (gpu::has_collectives(p)) gpu::add_collective_kernels(out.src);  // for device-memory communicators
    gpu::dump_device_source(out.src.device_source());
    HipModule mod = compile_module(out.src.device_source(), device_arch, cache_dir);
    out.image = std::move(mod.image);
    out.codegen = mod.codegen;
    out.resources = gpu::in_launch_order(out.src, mod.resources);
    return out;
  };
  return std::make_shared<const gpu::DeviceExecutable>(*d, std::move(plan), std::move(graph), target, build,
                                                       options.communicator, param_blocks);
}

}  // namespace luminal::hip
