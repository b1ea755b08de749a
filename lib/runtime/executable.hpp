// The seam between the Callable and the backends: a compiled program that runs with
// concrete dims. The reference interpreter implements it today; the compiler's CPU,
// CUDA and HIP programs implement it later. The Callable validates every call before
// run() sees it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "graph/graph_impl.hpp"
#include "luminal/callable.hpp"
#include "luminal/dim.hpp"
#include "luminal/host_tensor.hpp"
#include "luminal/target.hpp"

namespace luminal::detail {

/// The params a call runs with, as the Callable holds them: each immutable until the next
/// bind() replaces it.
using ParamMap = std::map<std::string, std::shared_ptr<const HostTensor>>;

class Executable {
 public:
  virtual ~Executable() = default;
  /// `dims` binds every dim variable of the graph; `tensors` holds every input and param
  /// by name with the declared dtype and the shape the dims imply. Returns every output.
  /// Must be safe to call from several threads at once.
  virtual std::map<std::string, HostTensor> run(
      const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors) const = 0;
  /// run() given the params' handles too: a backend may keep its own copy of a param
  /// while the handle is the same (a GPU holds them in device memory, uploaded once per
  /// bind). `tensors` still holds every input and param.
  virtual std::map<std::string, HostTensor> run_with_params(
      const DimBindings& dims, const std::map<std::string, const HostTensor*>& tensors,
      const ParamMap& params) const {
    (void)params;
    return run(dims, tensors);
  }
  /// Callable::run_device, validated: `inputs` and `outputs` are device memory with the
  /// shapes `dims` imply. Only a device runtime has it; others throw RuntimeError.
  virtual void run_device(const DimBindings& dims, const std::map<std::string, DeviceTensor>& inputs,
                          const ParamMap& params, const std::map<std::string, DeviceTensor>& outputs,
                          void* stream) const;
};

/// Executes the graph with the reference interpreter.
std::shared_ptr<const Executable> make_reference_executable(std::shared_ptr<const GraphImpl> graph);

/// What a Callable handle points at.
struct CallableState {
  std::shared_ptr<const GraphImpl> graph;  // snapshot taken by compile()
  std::shared_ptr<const Executable> exe;   // the program (kept by compile_only on the CPU, for save())
  std::string not_runnable;                // non-empty: calls throw RuntimeError with this text
  CompileReport report;
  Target target = Target::reference();
  /// Params a rank's program reads only part of (dist::param_regions); absent: whole.
  std::map<std::string, ParamRegion> param_regions;
  /// Of those, the params the program stores as their block (the CPU backend): bound with
  /// the block's shape (bind() copies the block out of a whole weight).
  std::map<std::string, ParamRegion> param_blocks;

  using ParamMap = detail::ParamMap;
  mutable std::mutex mu;  // guards params and published
  ParamMap params;        // the bound params (bind() and load() write it)
  /// What calls read: an immutable copy of `params`, replaced (never changed) by bind(),
  /// so a running call keeps the weights it started with while bind() swaps them.
  mutable std::shared_ptr<const ParamMap> published;

  /// The params a call starts with (one lock, one reference count).
  std::shared_ptr<const ParamMap> params_for_call() const {
    std::lock_guard<std::mutex> lock(mu);
    if (!published) published = std::make_shared<const ParamMap>(params);
    return published;
  }
};

/// Validates a call (see Callable::operator()) and returns the dim bindings.
/// `blocks`: params stored as a block (CallableState::param_blocks), bound with its shape.
DimBindings validate_call(const GraphImpl& g, const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, std::shared_ptr<const HostTensor>>& params,
                          const std::map<std::string, ParamRegion>& blocks = {});

}  // namespace luminal::detail
