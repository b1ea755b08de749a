#include "backends/cuda/cuda_executable.hpp"

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/device_collectives.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

std::shared_ptr<const gpu::DeviceExecutable> make_executable(
    std::shared_ptr<const compiler::KernelPlan> plan, std::shared_ptr<const detail::GraphImpl> graph,
    const Target& target, const CompileOptions& options,
    const std::map<std::string, ParamRegion>& param_blocks) {
  std::string why;
  const Driver* d = Driver::get(&why);
  if (!d) throw CompileError("[cuda] " + why);
  const Nvrtc* nv = Nvrtc::get(&why);
  if (!nv) throw CompileError("[cuda] " + why);
  const std::string cache_dir = options.cache_dir;
  auto build = [nv, cache_dir](const kernel::Program& prog, const compiler::KernelPlan& p,
                               const std::string& device_arch) {
    // CUBIN for the device; a device newer than NVRTC gets PTX for the newest
    // architecture NVRTC knows, which the driver compiles.
    std::string arch = device_arch;
    const bool cubin = nv->supports(arch);
    if (!cubin) arch = "sm_90";
    const gpu::GpuArch ga = gpu::arch_for(Target::cuda(0).with_arch(arch));
    gpu::DeviceBuild out;
    out.src = gpu::render_gpu(prog, ga, gpu::plan_schedules(p));
    if (gpu::has_collectives(p)) gpu::add_collective_kernels(out.src);  // for device-memory communicators
    gpu::dump_device_source(out.src.device_source());
    CudaModule mod = compile_module(out.src.device_source(), arch, cubin, cache_dir);
    out.image = std::move(mod.image);
    out.codegen = mod.codegen;
    out.resources = gpu::in_launch_order(out.src, mod.resources);
    return out;
  };
  return std::make_shared<const gpu::DeviceExecutable>(*d, std::move(plan), std::move(graph), target, build,
                                                       options.communicator, param_blocks);
}

}  // namespace luminal::cuda
