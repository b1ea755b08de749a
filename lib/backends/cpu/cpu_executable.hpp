// The CPU target's executable: a kernel plan lowered to kernel IR (kernel/lower/),
// rendered as one C translation unit, JIT-compiled and dlopen'ed.
//
//  * Every step of the plan becomes one or more generated C kernels, called in plan order.
//    A step whose body cannot be lowered (gather) runs with the reference interpreter;
//    such steps are counted in `info().interpreted` and named in the compile report.
//  * Intermediates (step results that are not outputs, and the temporaries of multi-pass
//    kernels) live in one arena at fixed offsets from the liveness planner
//    (kernel/memory_plan.hpp), planned per distinct binding of the dynamic dims and cached.
//  * Threads: each call borrows idle workers of its pool for its whole duration (runtime/
//    thread_pool.hpp); kernels hand their parallel loops to that team, and a kernel waits
//    for unfinished ones only when it touches their memory (kernel_deps.hpp). Every job
//    is done before the call returns. Deadlines and cancel tokens are checked between
//    kernels (runtime/call_control.hpp).
//  * Thread safety: the object is immutable after construction; each call takes an arena
//    (with its pointer and symbol tables and its threads' GEMM scratch) from a bounded pool
//    and returns it, so concurrent calls never share scratch memory, and a steady-state
//    call allocates nothing.
//  * Outputs may be written straight into caller memory (run_into).
// The parts, each in its own file: cpu_program (plan -> kernel IR), arena_layout,
// arena_pool, call_binding (the allocation-free call check), cpu_env, kernel_deps,
// kernel_call (what generated code sees of the call).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/arena_pool.hpp"
#include "backends/cpu/c_renderer.hpp"
#include "backends/cpu/cpu_program.hpp"
#include "backends/cpu/jit.hpp"
#include "compiler/plan.hpp"
#include "kernel/lower/lower_spec.hpp"
#include "runtime/call_control.hpp"
#include "luminal/communicator.hpp"
#include "runtime/executable.hpp"
#include "runtime/thread_pool.hpp"

namespace luminal::cpu {

struct CpuBuildInfo {
  int64_t generated_kernels = 0;   ///< C kernels in the translation unit
  int64_t interpreted = 0;         ///< plan steps run by the interpreter (not lowerable)
  std::string interpreted_why;     ///< "k3: gather kernel (...)" ...
  int64_t arena_bytes = 0;         ///< arena at the dims' planning values (upper bounds)
  int64_t intermediate_bytes = 0;  ///< sum of the intermediates' sizes (no reuse)
  double jit_seconds = 0;          ///< render + compile (or cache load)
  std::string source_hash;         ///< hash_hex of the C source
  /// The params stored as blocks of their declared shape (CpuBuildOptions::param_blocks,
  /// less any an interpreted step reads): bound as that block, or whole (copied out per call).
  ParamBlocks param_blocks;
};

struct CpuBuildOptions {
  std::string cache_dir;  ///< JIT disk cache; "" = Jit::global()'s (LUMINAL_CACHE_DIR)
  /// A prebuilt shared object for exactly this plan (luminal::load): no compiler runs.
  /// Must come with the source hash it was built from; a mismatch is a CompileError.
  std::string prebuilt_so_path;
  std::string prebuilt_source_hash;
  /// The prebuilt object's bytes instead of a path: loaded from an anonymous memory
  /// file (JitLibrary::open_bytes), never from a name in the file system.
  std::string prebuilt_so_bytes;
  /// Another code generator behind the same executable (the GPU emulator, which runs the
  /// GPU kernel source on the host): renders the lowered program into one translation
  /// unit whose entries have the KernelFn ABI, one per kernel in program order, compiled
  /// by `jit`. Unset: render_c and the C JIT.
  std::function<CProgram(const kernel::Program&)> render;
  Jit* jit = nullptr;
  /// The lowering options that renderer takes (the GPU renderers: half GEMM operands).
  kernel::lower::Options render_lower;
  /// Workers the calls borrow (null: detail::WorkerPool::shared()) and the threads of a
  /// call that does not say (0: all of the pool's workers plus the caller).
  std::shared_ptr<detail::WorkerPool> pool;
  int threads = 0;
  /// Bounds of the calls' scratch memory.
  ArenaLimits arena_limits;
  /// The ranks' communicator when the plan has collectives (lib/dist): their steps call it.
  std::shared_ptr<Communicator> communicator;
  /// Params to store as a block of their declared shape (a rank's weight shards,
  /// dist::param_regions): the kernels index the block, so a rank holds only its shard.
  ParamBlocks param_blocks;
};

class CpuExecutable final : public detail::Executable {
 public:
  CpuExecutable(std::shared_ptr<const compiler::KernelPlan> plan,
                std::shared_ptr<const detail::GraphImpl> graph, const CpuBuildOptions& opt);
  ~CpuExecutable() override;

  std::map<std::string, HostTensor> run(
      const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const override;
  /// Runs into `outputs`: an entry with the output's dtype and shape that is writable is
  /// written in place (no copy), any other entry is replaced by a fresh tensor.
  void run_into(const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
                std::map<std::string, HostTensor>& outputs, const detail::CallControl& ctl = {}) const;

  /// The allocation-free call behind Callable::run: validates the call itself when every
  /// declared input/param dim is a constant or a plain variable, binds the dims, runs.
  /// Returns false, having done nothing, when the call is not of that simple form or is
  /// invalid in any way: the caller then runs the full validation (which produces the
  /// exact error) and run_into. `params` must not change during the call (the Callable
  /// passes an immutable snapshot).
  bool try_run_fast(const std::map<std::string, HostTensor>& inputs,
                    const std::map<std::string, std::shared_ptr<const HostTensor>>& params,
                    std::map<std::string, HostTensor>& outputs, const detail::CallControl& ctl = {}) const;

  /// Scratch bytes held for calls, and freeing what no call uses now.
  size_t memory_held() const;
  void trim_memory() const;

  const CpuBuildInfo& info() const { return info_; }
  const std::shared_ptr<const compiler::KernelPlan>& plan() const { return plan_; }
  const std::string& c_source() const { return source_; }
  /// Path of the loaded shared object (a JIT cache entry or the unpacked saved file).
  std::string library_path() const;
  /// The loaded shared object's bytes ("" when the program has no kernels).
  std::string library_bytes() const;

 private:
  struct Impl;
  void execute(const int64_t* var_values, const std::byte* const* leaf_data, const DimBindings* dims,
               std::map<std::string, HostTensor>& outputs, const detail::CallControl& ctl) const;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const compiler::KernelPlan> plan_;
  CpuBuildInfo info_;
  std::string source_;
};

}  // namespace luminal::cpu
