// The CUDA runtime (driver API through dlopen): a kernel plan lowered to kernel IR,
// rendered, NVRTC-compiled for the device's architecture (CUBIN; PTX for the newest
// architecture NVRTC knows when the device is newer than NVRTC) and run on one stream.
//
//  * Memory: per binding of the dynamic dims, one device arena laid out by the memory
//    planner (kernel/memory_plan.hpp: intermediates share space by liveness; inputs,
//    params and outputs live for the whole program) and one pinned host staging buffer.
//  * The whole program -- host-to-device copies of the inputs from the pinned staging,
//    every kernel, device-to-host copies of the outputs -- is captured once per binding as
//    a CUDA Graph and replayed by every later call with the same dims.
//  * Calls are serialized (one stream per executable); gather ids that come from the
//    caller are checked on the host first, as on the CPU.
// It cannot run on the machines that build Luminal's CI: tests/gpu/run.sh exercises it
// on a machine with a GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "luminal/callable.hpp"
#include "luminal/compile.hpp"
#include "runtime/executable.hpp"

namespace luminal::cuda {

class CudaExecutable final : public detail::Executable {
 public:
  /// Throws CompileError (no driver, a step that cannot be generated, NVRTC failure).
  CudaExecutable(std::shared_ptr<const compiler::KernelPlan> plan, std::shared_ptr<const detail::GraphImpl> graph,
                 const Target& target, const CompileOptions& options);
  ~CudaExecutable() override;

  std::map<std::string, HostTensor> run(const DimBindings& dims,
                                        const std::map<std::string, const HostTensor*>& tensors) const override;

  const std::string& codegen() const;
  const std::vector<KernelResources>& resources() const;
  int64_t kernels() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminal::cuda
