// The extracted kernel program and the reference target's executable for it: kernels in
// topological order, each evaluated from its body with the reference interpreter, every
// kernel's result a buffer (dropped after its last reader).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/tensor_lang.hpp"
#include "luminal/communicator.hpp"
#include "runtime/executable.hpp"

namespace luminal::compiler {

/// A kernel program. Values are numbered; a value is either a leaf (an Input/Param the
/// caller provides, by name) or the result of one step.
struct KernelPlan {
  struct Step {
    std::shared_ptr<const ir::KernelSpec> spec;
    std::vector<uint32_t> args;  ///< value per slot
    uint32_t result = 0;         ///< value it produces
    double est_seconds = 0;      ///< the cost model's estimate
    uint32_t eclass = 0;         ///< e-class it computes (for debugging dumps)
  };
  std::vector<std::string> leaf_name;  ///< per value; "" for a computed value
  std::vector<uint8_t> leaf_is_param;  ///< per value
  std::vector<Step> steps;             ///< topological order
  std::vector<std::pair<std::string, uint32_t>> outputs;
  /// Compiled with CompileOptions::fast_math: besides the fast-math rules the search may
  /// use, a backend may compute f32 transcendentals, reciprocals and square roots with
  /// its approximate instructions (CUDA: the special function units, docs/cuda.md).
  bool fast_math = false;

  uint32_t add_value(std::string leaf = {}, bool param = false) {
    leaf_name.push_back(std::move(leaf));
    leaf_is_param.push_back(param ? 1 : 0);
    return static_cast<uint32_t>(leaf_name.size() - 1);
  }
  /// The program as Graphviz DOT: kernels (kind, ops) as boxes, leaves as ellipses.
  std::string to_dot() const;
};

/// Runs `plan` with the reference interpreter, one kernel at a time; collective steps
/// call `comm` (lib/dist), which a plan with collectives needs.
std::shared_ptr<const detail::Executable> make_plan_executable(std::shared_ptr<const KernelPlan> plan,
                                                               std::shared_ptr<Communicator> comm = nullptr);

}  // namespace luminal::compiler
