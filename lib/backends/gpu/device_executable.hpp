// The GPU runtime shared by CUDA and HIP: a kernel plan lowered to kernel IR, rendered,
// compiled by the backend (NVRTC, hipRTC) for the device's architecture and run on one
// stream through a DeviceApi (the driver, loaded with dlopen).
//
//  * Memory: per binding of the dynamic dims, one device arena laid out by the memory
//    planner (kernel/memory_plan.hpp: intermediates share space by liveness; inputs and
//    outputs live for the whole program) and one pinned host staging buffer. Params live
//    on the device in their own allocations, uploaded by the first call after a bind
//    (the Callable's handle of a param is immutable until bind() replaces it).
//  * run_device: inputs and outputs in the caller's device memory, the program ordered
//    on the caller's stream by two events (the executable's stream waits for the
//    caller's, the caller's for the program) and captured per set of addresses.
//  * The whole program -- host-to-device copies of the inputs from the pinned staging,
//    every kernel, device-to-host copies of the outputs -- is queued in that order. Where
//    the API can capture (CUDA Graphs) it is captured once per binding and replayed by
//    every later call with the same dims; otherwise it is queued anew on each call.
//  * Calls are serialized (one stream per executable); gather ids that come from the
//    caller are checked on the host first, as on the CPU.
//  * A rank's collectives (a sharded program, lib/dist) run between kernels. With a
//    host-memory communicator (MPI, local ranks) the stream is drained, the operand copied
//    out, the communicator called, the result copied back; with a device-memory one
//    (NCCL) the communicator works on the arena and the local steps (ordered sums, row
//    copies) are device kernels on the stream. A program with collectives is not captured.
// tests/gpu "[runtime]" runs it on the host through a DeviceApi whose device is the
// process (tests/gpu/host_device_api.hpp); tests/gpu/run.sh on a machine with a GPU.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/gpu/device_api.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/plan.hpp"
#include "luminal/callable.hpp"
#include "luminal/communicator.hpp"
#include "luminal/compile.hpp"
#include "runtime/executable.hpp"

namespace luminal::gpu {

/// What a backend hands the runtime for one program: the rendered source (its launch
/// shapes) and the device image compiled from it.
struct DeviceBuild {
  GpuSource src;
  std::string image;
  std::string codegen;                     ///< "nvrtc 13.0 cubin sm_90"
  std::vector<KernelResources> resources;  ///< in launch order
};

/// Renders and compiles the lowered program for the device's architecture (which the
/// backend may map, e.g. to PTX for the newest architecture its compiler knows).
using DeviceBuildFn =
    std::function<DeviceBuild(const kernel::Program&, const compiler::KernelPlan&, const std::string& device_arch)>;

class DeviceExecutable final : public detail::Executable {
 public:
  /// Throws CompileError (a step that cannot be generated for the GPU, an explicit target
  /// arch that is not the device's, a compile failure, collectives without a
  /// communicator) or RuntimeError (the driver). `comm`: the rank's communicator when the
  /// plan has collectives, on host memory (MPI, local ranks) or device memory (NCCL:
  /// Communicator::device_buffers; the collectives' local steps then run as device
  /// kernels, gpu/device_collectives.hpp). `param_blocks`: the weights a rank reads only a
  /// block of (dist::param_regions), held on the device as that block (param_blocks()
  /// says which are; they are passed to run() in the block's shape).
  DeviceExecutable(const DeviceApi& api, std::shared_ptr<const compiler::KernelPlan> plan,
                   std::shared_ptr<const detail::GraphImpl> graph, const Target& target,
                   const DeviceBuildFn& build, std::shared_ptr<Communicator> comm = nullptr,
                   const std::map<std::string, ParamRegion>& param_blocks = {});
  ~DeviceExecutable() override;

  /// Inputs and params from the host, outputs to it; every param uploaded again.
  std::map<std::string, HostTensor> run(const DimBindings& dims,
                                        const std::map<std::string, const HostTensor*>& tensors) const override;
  /// The same with the params resident: uploaded only when a handle changed.
  std::map<std::string, HostTensor> run_with_params(const DimBindings& dims,
                                                    const std::map<std::string, const HostTensor*>& tensors,
                                                    const detail::ParamMap& params) const override;
  /// Inputs and outputs in device memory, ordered on the caller's stream (see
  /// Callable::run_device).
  void run_device(const DimBindings& dims, const std::map<std::string, DeviceTensor>& inputs,
                  const detail::ParamMap& params, const std::map<std::string, DeviceTensor>& outputs,
                  void* stream) const override;

  const std::string& codegen() const;
  const std::vector<KernelResources>& resources() const;
  int64_t kernels() const;
  /// The kernels it runs inside other kernels' launches.
  detail::FoldedLaunches folded() const;
  /// The params held as a block of their declared shape (a rank's weight shards).
  const std::map<std::string, ParamRegion>& param_blocks() const;

 private:
  std::map<std::string, HostTensor> run_host(const DimBindings& dims,
                                             const std::map<std::string, const HostTensor*>& tensors,
                                             const detail::ParamMap* params) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace luminal::gpu
