// The allocation-free call check behind Callable::run: when every declared input/param
// dim is a constant or a plain variable, a call is validated and its dims bound straight
// from the tensors' shapes (ranges, divisibility, the graph's guards), without the maps
// and strings of the full validator. Anything unusual is "not fast": the caller then runs
// the full validation, which produces the exact error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/plan.hpp"
#include "graph/dim_vars.hpp"
#include "graph/graph_impl.hpp"
#include "kernel/kernel_ir.hpp"
#include "luminal/host_tensor.hpp"

namespace luminal::cpu {

/// Value of `d` with variables from (names, values), without allocating; false when a
/// variable is unknown or a division by zero would occur.
bool eval_dim(const Dim& d, const std::vector<std::string>& names, const int64_t* values, int64_t& out);

class CallBinding {
 public:
  /// `graph` may be null (no fast path). `generated_only`: every step is generated code
  /// (an interpreted step needs the full DimBindings).
  CallBinding(const detail::GraphImpl* graph, const compiler::KernelPlan& plan, const kernel::Program& prog,
              bool generated_only);

  /// Every dim variable the program needs, sorted by name.
  const std::vector<std::string>& var_names() const { return var_names_; }
  /// prog.symbols[i] -> index into var_names() (-1 when not a graph variable).
  const std::vector<int>& symbol_var() const { return sym_var_; }
  /// The declared leaf node (input or param) named `name`, or null.
  const detail::Node* leaf_node(const std::string& name) const;

  /// Checks the call and binds: `vals` (per var_names()) and `leaf` (per plan value: the
  /// data of inputs and params). False, having bound nothing usable, when the call is not
  /// of the simple form or is invalid in any way.
  bool bind(const std::map<std::string, HostTensor>& inputs,
            const std::map<std::string, std::shared_ptr<const HostTensor>>& params, int64_t* vals,
            const std::byte** leaf) const;

 private:
  struct Leaf {
    const detail::Node* node = nullptr;
    bool param = false;
    int value = -1;             // plan value, -1 when the plan does not read it
    std::vector<int> axis_var;  // per axis: index into var_names_, -1 for a constant dim
    std::vector<int64_t> block;  // a param stored as a block (kernel::Program::blocks): its shape
  };
  const detail::GraphImpl* graph_;
  std::vector<Leaf> leaves_;  // graph inputs then params
  size_t n_inputs_ = 0;
  std::vector<std::string> var_names_;
  std::vector<detail::VarRange> var_range_;
  std::vector<int> sym_var_;
  bool fast_ok_ = false;
};

}  // namespace luminal::cpu
