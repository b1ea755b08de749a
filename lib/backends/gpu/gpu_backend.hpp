// compile() for GPU targets: the extracted plan lowered to kernel IR, rendered as GPU
// source, and then either
//  * emulated ("cuda:sm_90+emu", "hip:gfx90a+emu"): the same kernel text compiled by the
//    host C++ compiler against the emulation header, run by the CPU executable's
//    machinery (arena, layouts, outputs, interpreter fallback) through host entries with
//    the CPU kernel ABI; or
//  * compiled for the device by NVRTC (CUDA) or hipRTC (HIP), every kernel of the program
//    in one module, cached in memory and on disk. Without a device that is all
//    compile_only does; the report carries each kernel's registers, shared memory and
//    spills.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/jit.hpp"
#include "compiler/plan.hpp"
#include "cost/gpu_cost.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/callable.hpp"
#include "luminal/compile.hpp"
#include "luminal/target.hpp"
#include "runtime/executable.hpp"

namespace luminal::gpu {

struct GpuBuild {
  std::shared_ptr<const detail::Executable> exe;  ///< the emulator's executable; null otherwise
  int64_t generated_kernels = 0;  ///< plan kernels (CompileReport::kernels) whose code was generated
  int64_t interpreted = 0;
  /// Kernels run inside other kernels' launches (kernel::Kernel::side, ::tail), which the
  /// plan priced a launch each (detail::folded_launch_seconds).
  detail::FoldedLaunches folded;
  std::string interpreted_why;
  int64_t arena_bytes = 0, intermediate_bytes = 0;
  double seconds = 0;
  std::string codegen;
  std::vector<KernelResources> resources;
  std::string source;  ///< the device source (what NVRTC / hipRTC compile)
  bool library_calls = false;  ///< some kernels are vendor BLAS calls (named in codegen)
  /// Params the emulator stores as a block (a rank's weight shards): see CpuBuildInfo.
  std::map<std::string, ParamRegion> param_blocks;
};

/// The JIT that compiles emulation translation units: the host C++ compiler (LUMINAL_CXX,
/// else c++, g++, clang++), the JIT cache's folder (`cache_dir`, or the default).
cpu::Jit& emulator_jit(const std::string& cache_dir = {});

/// `param_blocks`: the weights a rank of a sharded program stores only its block of
/// (dist::param_regions); the emulator and the device runtime store them so and run the
/// rank's collectives with options.communicator.
GpuBuild build_gpu(std::shared_ptr<const compiler::KernelPlan> plan,
                   std::shared_ptr<const detail::GraphImpl> graph, const Target& target,
                   const CompileOptions& options,
                   const std::map<std::string, ParamRegion>& param_blocks = {});

}  // namespace luminal::gpu
