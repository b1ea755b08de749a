// Where a lowered program's intermediates live: one arena per call, at offsets from the
// liveness planner (kernel/memory_plan.hpp). Lifetimes are fixed at construction (plan-
// step granularity); the byte sizes, and so the offsets, depend on the dim binding, so a
// Layout is computed per binding of the program's symbols and cached (LRU-bounded).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cpu/kernel_deps.hpp"
#include "kernel/memory_plan.hpp"

namespace luminal::cpu {

constexpr size_t kNotInArena = std::numeric_limits<size_t>::max();
constexpr size_t kArenaAlign = 64;

/// Which buffers live in the arena and for which plan steps.
struct ArenaBuffers {
  std::vector<kernel::BufferLifetime> lifetimes;  // per buffer (bytes filled per layout)
  std::vector<uint8_t> in_arena;                  // per buffer
  std::vector<size_t> dtype_bytes;                // per buffer
};

/// Intermediates and temporaries are arena buffers; a step's temporaries and result
/// overlap everything the step touches; outputs read from the arena live to the end.
ArenaBuffers arena_buffers(const compiler::KernelPlan& plan, const LoweredPlan& lowered);

/// Everything about one binding of the symbols.
struct Layout {
  std::vector<size_t> offset;     // per buffer: arena offset, kNotInArena if not in the arena
  std::vector<int64_t> elements;  // per buffer
  size_t arena_bytes = 0;
  size_t total_bytes = 0;                           // the intermediates' sum (no reuse)
  std::vector<std::array<int64_t, 2>> gather_dims;  // per kernel: a Gather's {count, rows}
  /// Scratch each thread of a call needs (the generated GEMMs' packing buffers), a
  /// multiple of kArenaAlign; the call's arena holds one such region per thread after
  /// the intermediates.
  size_t scratch_per_thread = 0;
  /// Per kernel: wait for the unfinished kernels before it (kernel_deps.hpp).
  std::vector<uint8_t> wait_before;

  /// Arena bytes of a call on `threads` threads.
  size_t call_bytes(int threads) const {
    return arena_bytes + static_cast<size_t>(threads) * scratch_per_thread;
  }
};

/// `symbols[i]` is the value of prog.symbols[i]; `access` is kernel_accesses(prog).
Layout plan_layout(const kernel::Program& prog, const ArenaBuffers& ab,
                   const std::vector<KernelAccess>& access, const std::vector<int64_t>& symbols);

/// Layouts per binding, least recently used evicted beyond a bound: a server seeing every
/// (batch, sequence) pair must not grow without limit. Calls hold a shared_ptr, so an
/// evicted layout outlives the calls using it. Thread-safe.
class LayoutCache {
 public:
  static constexpr size_t kMaxLayouts = 256;
  LayoutCache(const kernel::Program& prog, const ArenaBuffers& ab)
      : prog_(prog), ab_(ab), access_(kernel_accesses(prog)) {}
  std::shared_ptr<const Layout> get(const std::vector<int64_t>& symbols) const;

 private:
  struct Entry {
    std::shared_ptr<const Layout> layout;
    uint64_t last_use = 0;
  };
  const kernel::Program& prog_;
  const ArenaBuffers& ab_;
  const std::vector<KernelAccess> access_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, Entry> layouts_;
  mutable uint64_t clock_ = 0;
};

}  // namespace luminal::cpu
