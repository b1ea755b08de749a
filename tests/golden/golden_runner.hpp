// Builds golden cases as graphs with the public API, compiles them for a target, runs
// them and compares every output with PyTorch's.
#pragma once

#include <string>
#include <vector>

#include "golden/golden_data.hpp"
#include "luminal/luminal.hpp"

namespace golden {

struct CaseResult {
  const Case* c = nullptr;
  bool ok = false;
  std::string message;      // why it failed
  bool symbolic = false;    // at least one input dim was declared symbolic
  std::string stop_reason;  // the CompileReport's, to show how the target ran the case
};

/// Runs `cases` as ONE graph (each case its own inputs and output) on `target`: one
/// compile for many cases keeps JIT targets fast. If building, compiling or running the
/// group throws, each case is rerun alone so a failure names exactly one case.
///
/// With `symbolic`, every input extent > 1 is declared as a symbolic dim (one named dim
/// per distinct extent, "n4" for 4, range [2, 4096]) instead of a constant, so shapes are
/// inferred symbolically and bound from the fed tensors at call time.
///
/// With `members`, the op is built through its Tensor member form (golden_ops.hpp).
///
/// With `compile_only`, the group is compiled with CompileOptions::compile_only (a GPU
/// target without its device: every kernel generated and compiled by NVRTC / hipRTC)
/// and a case passes when the report says every kernel was generated
/// (generated_kernels == kernels, interpreted_kernels == 0) and none spills.
struct RunOptions {
  bool symbolic = false;
  bool members = false;
  bool compile_only = false;
};
std::vector<CaseResult> run_cases(const std::vector<const Case*>& cases, const luminal::Target& target,
                                  RunOptions options = {});

}  // namespace golden
