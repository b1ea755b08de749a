// The scratch memory of calls: each call takes an arena (the intermediates, the threads'
// GEMM packing scratch, the pointer and symbol tables handed to the kernels) and gives it
// back, so concurrent calls never share scratch and a steady-state call allocates nothing.
//
// Bounded: the bytes of all arenas together (in use and idle) stay under a cap when one
// is set -- a call that would pass it first frees idle arenas, then waits for a running
// call to give one back (until its deadline or cancellation) -- and arenas idle longer
// than a limit are freed: by the pool's own next acquire or release, or by a worker of a
// thread pool that has been idle (trim_idle_arenas).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/call_control.hpp"

namespace luminal::cpu {

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};

/// Scratch of one call.
struct Arena {
  std::unique_ptr<std::byte, AlignedFree> mem;
  size_t capacity = 0;
  std::vector<void*> ptrs;    // per buffer
  std::vector<int64_t> syms;  // per symbol
  std::vector<int64_t> key;   // per symbol (the layout cache key)
  std::chrono::steady_clock::time_point released{};
};

struct ArenaLimits {
  size_t max_bytes = 0;  ///< cap on the bytes of all arenas; 0: none
  std::chrono::steady_clock::duration idle = std::chrono::seconds(10);
};

class ArenaPool {
 public:
  ArenaPool(size_t buffers, size_t symbols, ArenaLimits limits);
  ~ArenaPool();
  ArenaPool(const ArenaPool&) = delete;
  ArenaPool& operator=(const ArenaPool&) = delete;

  /// An arena of at least `bytes` (64-byte aligned), with its tables sized. Waits while
  /// the cap is reached (honouring `ctl`'s deadline and cancel token). Throws
  /// RuntimeError when `bytes` alone pass the cap or the memory cannot be had.
  Arena* acquire(size_t bytes, const detail::CallControl& ctl);
  void release(Arena* a);

  /// Bytes of all arenas (in use and idle).
  size_t bytes_held() const;
  /// Frees idle arenas: all of them, or those idle longer than the limit.
  void trim(bool all_idle);

 private:
  void trim_locked(std::chrono::steady_clock::time_point now, bool all_idle);
  void free_arena_locked(Arena* a);

  size_t buffers_, symbols_;
  ArenaLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable released_;
  std::vector<Arena*> free_;
  std::vector<std::unique_ptr<Arena>> all_;
  size_t held_ = 0;
};

/// Frees the arenas idle past their limit in every ArenaPool of the process.
void trim_idle_arenas();

/// Returns the arena to its pool at the end of a scope.
class ArenaLease {
 public:
  ArenaLease(ArenaPool& pool, Arena* a) : pool_(pool), a_(a) {}
  ~ArenaLease() { pool_.release(a_); }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
  Arena* operator->() const { return a_; }
  Arena& operator*() const { return *a_; }

 private:
  ArenaPool& pool_;
  Arena* a_;
};

}  // namespace luminal::cpu
