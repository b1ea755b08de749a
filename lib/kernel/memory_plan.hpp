// Liveness-based memory planning: every intermediate buffer of a program gets a fixed,
// aligned offset in one arena, and two buffers share bytes only when their lifetimes
// (kernel steps from first write to last read, inclusive) do not overlap.
//
// Algorithm: greedy by size with best fit (largest buffers first; each one goes into
// the smallest gap between already placed, lifetime-overlapping buffers that holds it,
// else above them). Deterministic: ties break by first use, then by input order. For
// dynamic shapes the caller plans once at the dims' upper bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel {

struct BufferLifetime {
  size_t bytes = 0;
  int first_def = 0;  // step (kernel index) of the first write
  int last_use = 0;   // step of the last read (>= first_def)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // per input buffer, multiples of `alignment`
  size_t arena_bytes = 0;       // arena size needed
  size_t total_bytes = 0;       // sum of the (aligned) buffer sizes: the no-reuse cost
  /// "arena 12.0 MiB for 40.0 MiB of intermediates (30%)"
  std::string summary() const;
};

/// Throws InternalError when a lifetime is inverted or the alignment is not a power of 2.
MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, size_t alignment = 64);

/// Lifetimes of the Intermediate buffers of `p` (in buffer order, with their buffer
/// ids in `ids`), sizes evaluated under `bindings` (use the dims' upper bounds).
std::vector<BufferLifetime> intermediate_lifetimes(const Program& p,
                                                   const std::map<std::string, int64_t>& bindings,
                                                   std::vector<int>* ids = nullptr);

}  // namespace luminal::kernel
