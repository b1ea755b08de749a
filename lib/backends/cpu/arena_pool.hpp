// The scratch memory of calls: each call takes an arena (the intermediates plus the
// pointer and symbol tables handed to the kernels) and gives it back, so concurrent calls
// never share scratch and a steady-state call allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

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
};

class ArenaPool {
 public:
  ArenaPool(size_t buffers, size_t symbols) : buffers_(buffers), symbols_(symbols) {}
  /// An arena of at least `bytes` (64-byte aligned), with its tables sized. Throws
  /// RuntimeError when the memory cannot be had.
  Arena* acquire(size_t bytes);
  void release(Arena* a);

 private:
  size_t buffers_, symbols_;
  std::mutex mu_;
  std::vector<Arena*> free_;
  std::vector<std::unique_ptr<Arena>> all_;
};

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
