// Translation validation (docs/design.md, docs/rules.md): run a compiled program and the reference
// interpreter on the same random inputs and compare. For CompileOptions::validate and tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "compiler/plan.hpp"
#include "graph/graph_impl.hpp"
#include "runtime/executable.hpp"

namespace luminal::compiler {

struct ValidationResult {
  bool ok = true;
  double worst = 0;     ///< largest |got - want| / (atol + rtol |want|); <= 1 passes
  std::string message;  ///< the first mismatch: output, index, values
};

/// Binds every dim variable of `g` to a small value in its range (min(hi, max(lo, 3))),
/// fills every input and param with random data (floats in [-1, 1], i32 in [0, 4), bools),
/// runs `exe` and the interpreter, and compares every output (f32 atol = rtol = 1e-4,
/// f16/bf16 1e-2; integers and booleans exactly; NaN must match NaN).
ValidationResult validate_program(const detail::GraphImpl& g, const detail::Executable& exe,
                                  uint64_t seed = 1);

/// Test-only: when set, compile() hands it every kernel plan before building the
/// executable, so a test can break a compiled program on purpose and see
/// CompileOptions::validate catch it. Not thread-safe; never set outside tests.
std::function<void(KernelPlan&)>& plan_hook_for_tests();

}  // namespace luminal::compiler
