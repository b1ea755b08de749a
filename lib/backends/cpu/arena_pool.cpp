// Arena pool (see the header).
#include "backends/cpu/arena_pool.hpp"

#include <string>

#include "backends/cpu/arena_layout.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

Arena* ArenaPool::acquire(size_t bytes) {
  Arena* a = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      a = free_.back();
      free_.pop_back();
    } else {
      all_.push_back(std::make_unique<Arena>());
      a = all_.back().get();
      free_.reserve(all_.size());  // release() never allocates
      a->ptrs.resize(buffers_);
      a->syms.resize(symbols_);
      a->key.resize(symbols_);
    }
  }
  if (a->capacity < bytes) {
    const size_t cap = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
    void* p = std::aligned_alloc(kArenaAlign, cap);
    if (!p) {
      release(a);
      throw RuntimeError("[cpu] cannot allocate an arena of " + std::to_string(cap) + " bytes");
    }
    a->mem.reset(static_cast<std::byte*>(p));
    a->capacity = cap;
  }
  return a;
}

void ArenaPool::release(Arena* a) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(a);
}

}  // namespace luminal::cpu
