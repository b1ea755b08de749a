// Which kernels of a call must wait for the ones before them. The team does not wait
// for a kernel's parallel loop to finish before the next kernel starts (runtime/
// thread_pool.hpp); a kernel that reads what an unfinished kernel writes, or writes what
// it reads or writes, must wait. Buffers are compared by the memory they occupy in one
// layout: arena buffers by their byte ranges (the planner reuses bytes between buffers
// whose lifetimes do not overlap, which is exactly a write-after-read hazard), the
// caller's tensors (inputs, params, outputs) by identity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::cpu {

/// The buffers one kernel reads and writes.
struct KernelAccess {
  std::vector<int> reads, writes;
};

std::vector<KernelAccess> kernel_accesses(const kernel::Program& prog);

/// Where buffer b lives: arena bytes [lo, hi), or (arena == false) buffer identity.
struct BufferSpan {
  bool arena = false;
  size_t lo = 0, hi = 0;
};

/// Per kernel: 1 when every kernel issued before it must be complete first. Greedy in
/// program order: the set of unfinished accesses is cleared at each wait.
std::vector<uint8_t> wait_before(const std::vector<KernelAccess>& access,
                                 const std::vector<BufferSpan>& span);

}  // namespace luminal::cpu
