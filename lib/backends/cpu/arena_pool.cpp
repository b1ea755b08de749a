// Arena pool (see the header).
#include "backends/cpu/arena_pool.hpp"

#include <algorithm>
#include <string>

#include "backends/cpu/arena_layout.hpp"
#include "luminal/error.hpp"
#include "runtime/thread_pool.hpp"

namespace luminal::cpu {

namespace {

// Every ArenaPool of the process, for trim_idle_arenas (idle pool workers call it).
std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
std::vector<ArenaPool*>& registry() {
  static auto* pools = new std::vector<ArenaPool*>();  // never destroyed: workers may trim at exit
  return *pools;
}

}  // namespace

ArenaPool::ArenaPool(size_t buffers, size_t symbols, ArenaLimits limits)
    : buffers_(buffers), symbols_(symbols), limits_(limits) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
  static const bool hooked = (detail::WorkerPool::set_idle_hook(&trim_idle_arenas), true);
  (void)hooked;
}

ArenaPool::~ArenaPool() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void trim_idle_arenas() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (ArenaPool* p : registry()) p->trim(false);
}

size_t ArenaPool::bytes_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

void ArenaPool::trim(bool all_idle) {
  std::lock_guard<std::mutex> lock(mu_);
  trim_locked(std::chrono::steady_clock::now(), all_idle);
}

void ArenaPool::free_arena_locked(Arena* a) {
  held_ -= a->capacity;
  a->mem.reset();
  a->capacity = 0;
}

void ArenaPool::trim_locked(std::chrono::steady_clock::time_point now, bool all_idle) {
  for (Arena* a : free_)
    if (a->capacity && (all_idle || now - a->released >= limits_.idle)) free_arena_locked(a);
}

Arena* ArenaPool::acquire(size_t bytes, const detail::CallControl& ctl) {
  const size_t need = (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  if (limits_.max_bytes && need > limits_.max_bytes)
    throw RuntimeError("[call] this call needs " + std::to_string(need) +
                       " bytes of scratch, more than the Callable's cap of " +
                       std::to_string(limits_.max_bytes) + " (CompileOptions::max_arena_bytes)");
  std::unique_lock<std::mutex> lock(mu_);
  trim_locked(std::chrono::steady_clock::now(), false);
  for (;;) {
    // The smallest idle arena that is large enough; else the largest idle one, to grow.
    Arena *fit = nullptr, *best = nullptr;
    for (Arena* a : free_) {
      if (a->capacity >= need && (!fit || a->capacity < fit->capacity)) fit = a;
      if (!best || a->capacity > best->capacity) best = a;
    }
    if (fit) {
      free_.erase(std::find(free_.begin(), free_.end(), fit));
      return fit;
    }
    const size_t grow = need - (best ? best->capacity : 0);
    if (!limits_.max_bytes || held_ + grow <= limits_.max_bytes) {
      // Grown geometrically: a decode step's arena grows with the cache length, and an
      // exact fit reallocated (and page-faulted) the whole arena on every step. Exact
      // when half again would pass the cap.
      size_t cap = need;
      if (best) {
        const size_t want = (best->capacity + best->capacity / 2 + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
        if (want > need && (!limits_.max_bytes || held_ - best->capacity + want <= limits_.max_bytes)) cap = want;
      }
      Arena* a = best;
      if (a) {
        free_.erase(std::find(free_.begin(), free_.end(), a));
        free_arena_locked(a);
      } else {
        all_.push_back(std::make_unique<Arena>());
        a = all_.back().get();
        free_.reserve(all_.size());  // release() never allocates
        a->ptrs.resize(buffers_);
        a->syms.resize(symbols_);
        a->key.resize(symbols_);
      }
      void* p = std::aligned_alloc(kArenaAlign, cap);
      if (!p) {
        free_.push_back(a);
        throw RuntimeError("[call] cannot allocate " + std::to_string(cap) + " bytes of scratch");
      }
      a->mem.reset(static_cast<std::byte*>(p));
      a->capacity = cap;
      held_ += cap;
      return a;
    }
    // Over the cap: idle arenas (all too small) make room first, then wait for a call.
    bool freed = false;
    for (Arena* a : free_)
      if (a->capacity && held_ + need - (best ? best->capacity : 0) > limits_.max_bytes) {
        free_arena_locked(a);
        freed = true;
      }
    if (freed) continue;
    ctl.check("waiting for scratch memory (the Callable's max_arena_bytes is reached)");
    const auto slice = std::chrono::steady_clock::now() + std::chrono::milliseconds(ctl.cancel ? 10 : 100);
    released_.wait_until(lock, std::min(slice, ctl.deadline));
  }
}

void ArenaPool::release(Arena* a) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    a->released = std::chrono::steady_clock::now();
    free_.push_back(a);
    trim_locked(a->released, false);
  }
  released_.notify_all();
}

}  // namespace luminal::cpu
