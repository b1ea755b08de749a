// The roofline cost of one kernel: the slower of its arithmetic and its memory traffic,
// plus a launch. Fusing two kernels wins exactly when it saves bytes and launches; the
// model, not a pass order, decides. See docs/cost-model.md.
#pragma once

#include "cost/target_desc.hpp"

namespace luminal::detail {

/// What a kernel does, counted by whoever builds the kernel node.
struct KernelWork {
  double flops = 0;            // adds, multiplies, compares (an FMA counts 2)
  double transcendentals = 0;  // exp/log/sin/tanh... evaluations
  double bytes_read = 0;       // from buffers the kernel reads (each element once)
  double bytes_written = 0;
  double parallelism = 1e9;  // independent output elements (limits core/SM usage)
  /// Fraction of peak FLOP/s this kernel's code reaches: about 0.8 for a tuned GEMM,
  /// 0.35 for a generated GEMM tile that is too small, 0.25 for scalar loops.
  double compute_efficiency = 0.5;
};

/// Estimated seconds for one execution of a kernel on `t`.
double kernel_seconds(const TargetDesc& t, const KernelWork& w);

}  // namespace luminal::detail
