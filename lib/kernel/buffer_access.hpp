// The buffers one kernel of the kernel IR reads and writes: the one answer the memory
// planner (lifetimes), the CPU executable (which kernels must wait for which) and the GPU
// renderer (a kernel's parameters) share, so a new field of a kernel kind -- a GEMM's row
// prologue, a split attention's partial states -- is read in one place.
#pragma once

#include <vector>

#include "kernel/kernel_ir.hpp"

namespace luminal::kernel {

struct BufferAccess {
  std::vector<int> reads;  ///< in the order met, duplicates possible
  std::vector<int> writes;
};

/// What `k` reads (its views' buffers and every load of its expressions) and writes.
BufferAccess buffer_access(const Kernel& k);

}  // namespace luminal::kernel
