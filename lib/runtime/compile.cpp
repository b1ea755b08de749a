// compile(): snapshots the graph, runs the compiler pipeline (lib/compiler: e-graph,
// rules, cost model, extraction) and picks the executable for the target. The reference
// target executes the extracted kernel program with the interpreter, kernel by kernel.
#include "luminal/compile.hpp"

#include <malloc.h>

#include <chrono>

#include "backends/cpu/cpu_executable.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/reference/interpreter.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/validate.hpp"
#include "cost/gpu_cost.hpp"
#include "cost/target_desc.hpp"
#include "dist/collectives.hpp"
#include "dist/param_regions.hpp"
#include "dist/plan_summary.hpp"
#include "dist/shared_search.hpp"
#include "runtime/executable.hpp"
#include "runtime/plan_cache.hpp"

namespace luminal {

using namespace detail;

namespace {

class ReferenceExecutable final : public Executable {
 public:
  explicit ReferenceExecutable(std::shared_ptr<const GraphImpl> g) : graph_(std::move(g)) {}
  std::map<std::string, HostTensor> run(
      const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const override {
    return reference::run(*graph_, dims, tensors);
  }

 private:
  std::shared_ptr<const GraphImpl> graph_;
};

}  // namespace

namespace detail {
std::shared_ptr<const Executable> make_reference_executable(std::shared_ptr<const GraphImpl> graph) {
  return std::make_shared<ReferenceExecutable>(std::move(graph));
}
}  // namespace detail

Callable compile(const Graph& graph, Target target, CompileOptions options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!graph.impl() || graph.impl()->outputs.empty())
    throw CompileError("[compile] the graph has no outputs: mark results with Graph::output");
  auto state = std::make_shared<CallableState>();
  // The program is immutable: later edits of the Graph do not affect it.
  state->graph = std::make_shared<const GraphImpl>(*graph.impl());
  state->target = target;

  const bool gpu = target.kind() == Target::Kind::cuda || target.kind() == Target::Kind::hip;
  if (!target.is_available() && !options.compile_only)
    throw RuntimeError("[compile] target " + target.to_string() + " is not available on this machine (" +
                       target.unavailable_reason() + "); use compile_only to compile without running, " +
                       (gpu ? "the emulated target " + target.emulated().to_string() + ", " : std::string()) +
                       "or another target");

  const std::shared_ptr<Communicator>& comm = options.communicator;
  // A graph compiled before (same target, options and library build) skips the search.
  // The tests' plan hook edits the plan it is given, so a hooked compile neither reads
  // nor fills the cache; a sharded compile (communicator) is not cached either: its plan
  // depends on the world size.
  auto& hook = compiler::plan_hook_for_tests();
  const bool cacheable = !hook && !comm;
  const std::string key = cacheable ? PlanCache::key(*state->graph, target, options) : std::string();
  compiler::CompiledProgram program;
  std::shared_ptr<const CachedPlan> hit;
  if (cacheable) hit = PlanCache::find(key, options.cache_dir);
  if (hit) {
    program.plan = hit->plan;
    program.exe = compiler::make_plan_executable(hit->plan);
    program.report = hit->report;
    program.report.plan_cached = true;
  } else {
    // Tensor parallelism: rank 0 searches and every rank runs its plan.
    program = comm ? dist::search_once_for_all_ranks(*comm, *state->graph, target, options)
                   : compiler::compile_graph(*state->graph, target, options);
    // A search cut short by its wall-clock budget depends on how busy the machine was:
    // such a plan is correct but may be far from the best, so it is not kept (the next
    // compile searches again). Node and iteration limits are deterministic: cached.
    if (hook)
      hook(const_cast<compiler::KernelPlan&>(*program.plan));
    else if (cacheable && program.report.stop_reason.find("time-limit") == std::string::npos)
      PlanCache::store(key, options.cache_dir, CachedPlan{program.plan, program.report});
    // The search's e-graph (hundreds of MB for a large model) is freed by now; hand the
    // freed heap back to the system instead of keeping it resident beside the weights.
    ::malloc_trim(0);
  }
  state->report = program.report;
  CompileReport& rep = state->report;
  std::shared_ptr<const compiler::KernelPlan> plan = program.plan;
  if (comm) {
    // This rank's program: the search's plan with "%rank" fixed (shard offsets become
    // constants in the generated code).
    const int world = comm->size();
    dist::check_same_plan(*comm, *plan);
    const dist::PlanSummary sum =
        dist::summarize(*plan, *state->graph, world,
                        target.kind() == Target::Kind::reference ? std::string("?")
                                                                 : compiler::target_desc(target).link.name);
    rep.ranks = world;
    rep.collectives = sum.collectives;
    rep.comm_bytes = sum.comm_bytes;
    rep.sharding = sum.text;
    plan = dist::specialize_rank(*plan, comm->rank(), world);
    // The weights this rank reads only a block of (bind_safetensors reads only that).
    state->param_regions = dist::param_regions(*plan, *state->graph);
    program.exe = compiler::make_plan_executable(plan, comm);
  }
  rep.target = target.to_string();
  if (options.compile_only)
    state->not_runnable = "this Callable was compiled with compile_only for " + target.to_string() +
                          ": it has a report but cannot be called";
  if (target.kind() == Target::Kind::cpu) {
    // compile_only generates and JIT-compiles too (the report is the real one, and a C
    // compiler failure surfaces here); the program is kept so that it can be saved.
    // Generated C for every kernel that can be lowered; the rest on the interpreter,
    // counted and named in the report.
    cpu::CpuBuildOptions bo;
    bo.cache_dir = options.cache_dir;
    if (options.thread_pool) bo.pool = options.thread_pool->impl();
    bo.threads = options.threads;
    bo.arena_limits.max_bytes =
        options.max_arena_bytes > 0 ? static_cast<size_t>(options.max_arena_bytes) : 0;
    bo.arena_limits.idle = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(options.arena_idle_seconds > 0 ? options.arena_idle_seconds : 0));
    bo.communicator = comm;
    bo.param_blocks = state->param_regions;  // a rank stores only its shard of each weight
    auto exe = std::make_shared<const cpu::CpuExecutable>(plan, state->graph, bo);
    const cpu::CpuBuildInfo& info = exe->info();
    rep.generated_kernels = info.generated_kernels;
    rep.interpreted_kernels = info.interpreted;
    rep.arena_bytes = info.arena_bytes;
    rep.intermediate_bytes = info.intermediate_bytes;
    rep.codegen_seconds = info.jit_seconds;
    rep.codegen = "cc " + cpu::Jit::global().short_identity();
    state->param_blocks = info.param_blocks;
    if (info.interpreted > 0)
      rep.stop_reason +=
          "; " + std::to_string(info.interpreted) + " kernel(s) interpreted: " + info.interpreted_why;
    state->exe = std::move(exe);
  } else if (gpu) {
    // Generated GPU kernels: on the host emulator, or compiled for the device (NVRTC /
    // hipRTC) -- all a machine without the device can do (compile_only).
    // This rank's plan (`plan`), its collectives run with options.communicator.
    gpu::GpuBuild b = gpu::build_gpu(plan, state->graph, target, options, state->param_regions);
    rep.generated_kernels = b.generated_kernels;
    rep.interpreted_kernels = b.interpreted;
    rep.arena_bytes = b.arena_bytes;
    rep.intermediate_bytes = b.intermediate_bytes;
    rep.codegen_seconds = b.seconds;
    rep.codegen = b.codegen;
    rep.kernel_resources = b.resources;
    // The plan priced every kernel a launch of its own; side and tail work run inside
    // another kernel's (cost/gpu_cost.hpp).
    rep.estimated_seconds += detail::folded_launch_seconds(compiler::target_desc(target), b.folded);
    if (b.interpreted > 0)
      rep.stop_reason += "; " + std::to_string(b.interpreted) + " kernel(s) interpreted: " + b.interpreted_why;
    for (const KernelResources& k : b.resources)
      if (k.spill_bytes > 0)
        rep.stop_reason += "; kernel " + k.name + " spills " + std::to_string(k.spill_bytes) +
                           " bytes (a cost-model error: its schedule needs more registers than a thread has)";
    state->param_blocks = b.param_blocks;
    if (!options.compile_only) state->exe = std::move(b.exe);
  } else {
    if (!options.compile_only) state->exe = program.exe;
    rep.codegen = "interpreter";
  }
  // Translation validation: the compiled program once against the reference interpreter
  // on random inputs (compiler/validate.hpp); a disagreement is a compiler bug, reported
  // instead of returning a program that computes something else.
  if (options.validate && state->exe && state->not_runnable.empty()) {
    const compiler::ValidationResult v = compiler::validate_program(*state->graph, *state->exe);
    if (!v.ok)
      throw CompileError("[compile] validation: the program compiled for " + target.to_string() +
                         " disagrees with the reference interpreter: " + v.message);
  }
  rep.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Callable(std::move(state));
}

}  // namespace luminal
