// Output storage recycling (see output_pool.hpp).
#include "runtime/output_pool.hpp"
#include "runtime/huge_alloc.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace luminal::detail {

namespace {
constexpr size_t kHuge = kHugePageBytes;
constexpr size_t kMaxPerSize = 4;

size_t capacity_for(size_t bytes) {
  if (bytes >= kHuge) return (bytes + kHuge - 1) / kHuge * kHuge;
  return (bytes + 63) / 64 * 64;
}
}  // namespace

std::shared_ptr<OutputPool> OutputPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<OutputPool>(new OutputPool(max_cached_bytes));
}

OutputPool::~OutputPool() {
  for (auto& [cap, p] : free_) release(p, cap);
}

std::byte* alloc_huge_aligned(size_t bytes) {
  // Whole huge pages (aligned_alloc wants a multiple of the alignment), at least one.
  const size_t n = std::max<size_t>(1, (bytes + kHugePageBytes - 1) / kHugePageBytes) * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, n);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  ::madvise(p, n, MADV_HUGEPAGE);  // advice only: failure is harmless
#endif
  return static_cast<std::byte*>(p);
}

std::byte* OutputPool::allocate(size_t cap) {
  if (cap >= kHuge) return alloc_huge_aligned(cap);
  void* p = std::aligned_alloc(64, cap == 0 ? 64 : cap);
  if (!p) throw std::bad_alloc();
  return static_cast<std::byte*>(p);
}

void OutputPool::release(std::byte* p, size_t) { std::free(p); }

HostTensor OutputPool::take(DType dtype, std::vector<int64_t> shape) {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d < 0 ? 0 : d);
  const size_t cap = capacity_for(n);
  std::byte* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cap);
    if (it != free_.end()) {
      block = it->second;
      free_.erase(it);
      stats_.cached_bytes -= cap;
      ++stats_.reuses;
    } else {
      ++stats_.allocations;
    }
  }
  if (!block) block = allocate(cap);
  std::weak_ptr<OutputPool> home = weak_from_this();
  std::shared_ptr<std::byte> storage(block, [home, cap](std::byte* p) {
    if (auto pool = home.lock())
      pool->give_back(p, cap);
    else
      release(p, cap);
  });
  return HostTensor::adopt(dtype, std::move(shape), std::move(storage));
}

void OutputPool::give_back(std::byte* p, size_t cap) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.cached_bytes + cap <= max_cached_ && free_.count(cap) < kMaxPerSize) {
      free_.emplace(cap, p);
      stats_.cached_bytes += cap;
      return;
    }
  }
  release(p, cap);
}

OutputPool::Stats OutputPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace luminal::detail
