// compile(): snapshots the graph and picks the executable for the target. Until the
// compiler and the CPU/GPU backends exist, every runnable target executes the graph with
// the reference interpreter, and the report says so.
#include "luminal/compile.hpp"

#include <chrono>

#include "backends/reference/interpreter.hpp"
#include "runtime/executable.hpp"

namespace luminal {

using namespace detail;

namespace {

class ReferenceExecutable final : public Executable {
 public:
  explicit ReferenceExecutable(std::shared_ptr<const GraphImpl> g) : graph_(std::move(g)) {}
  std::map<std::string, HostTensor> run(const DimBindings& dims,
                                        const std::map<std::string, const HostTensor*>& tensors) const override {
    return reference::run(*graph_, dims, tensors);
  }

 private:
  std::shared_ptr<const GraphImpl> graph_;
};

bool is_view_or_leaf(PrimOp op) {
  switch (op) {
    case PrimOp::Input: case PrimOp::Param: case PrimOp::Constant: case PrimOp::Reshape: case PrimOp::Permute:
    case PrimOp::Expand: case PrimOp::Slice: case PrimOp::Pad:
      return true;
    default: return false;
  }
}

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

  const std::vector<uint32_t> live = live_nodes(*state->graph);
  CompileReport& rep = state->report;
  rep.target = target.to_string();
  rep.primitive_ops = static_cast<int64_t>(live.size());
  for (uint32_t id : live) rep.kernels += is_view_or_leaf(state->graph->nodes[id].op) ? 0 : 1;

  const bool gpu = target.kind() == Target::Kind::cuda || target.kind() == Target::Kind::hip;
  const bool available = target.is_available();
  if (!available && !options.compile_only)
    throw RuntimeError("[compile] target " + target.to_string() +
                       " is not available on this machine (no driver or no such device); use compile_only to "
                       "compile without running, or another target");
  if (options.compile_only) {
    state->not_runnable = "this Callable was compiled with compile_only for " + target.to_string() +
                          ": it has a report but cannot be called";
    rep.stop_reason = "no compiler yet: compile_only, nothing generated";
  } else {
    state->exe = make_reference_executable(state->graph);
    rep.stop_reason = gpu ? "no compiler yet: interpreted on the host by the reference backend"
                          : "no compiler yet: interpreted";
  }
  rep.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Callable(std::move(state));
}

}  // namespace luminal
