#include "kernel/memory_plan.hpp"

#include "kernel/buffer_access.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "luminal/error.hpp"

namespace luminal::kernel {

namespace {
size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }
bool overlaps(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_def <= b.last_use && b.first_def <= a.last_use;
}
}  // namespace

std::string MemoryPlan::summary() const {
  char buf[160];
  const double mib = 1024.0 * 1024.0;
  std::snprintf(
      buf, sizeof buf, "arena %.2f MiB for %.2f MiB of intermediates (%.0f%%)", arena_bytes / mib,
      total_bytes / mib,
      total_bytes ? 100.0 * static_cast<double>(arena_bytes) / static_cast<double>(total_bytes) : 100.0);
  return buf;
}

MemoryPlan plan_memory(const std::vector<BufferLifetime>& buffers, size_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw InternalError("[memory plan] alignment " + std::to_string(alignment) + " is not a power of two");
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].first_def > buffers[i].last_use)
      throw InternalError("[memory plan] buffer " + std::to_string(i) + " is last used at step " +
                          std::to_string(buffers[i].last_use) + " before its first write at step " +
                          std::to_string(buffers[i].first_def));
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first_def < buffers[b].first_def;
  });
  struct Placed {
    size_t offset, size, index;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const size_t size = round_up(buffers[idx].bytes, alignment);
    plan.total_bytes += size;
    if (size == 0) continue;
    // Byte ranges taken, during this buffer's lifetime, by buffers already placed.
    std::vector<Placed> live;
    for (const auto& p : placed)
      if (overlaps(buffers[p.index], buffers[idx])) live.push_back(p);
    std::sort(live.begin(), live.end(), [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& p : live) {
      if (p.offset > cursor) {
        size_t gap = p.offset - cursor;
        if (gap >= size && gap < best_gap) best = cursor, best_gap = gap;
      }
      cursor = std::max(cursor, p.offset + p.size);
    }
    if (best == SIZE_MAX) best = cursor;  // above everything live
    plan.offsets[idx] = best;
    placed.push_back({best, size, idx});
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
  }
  return plan;
}

std::vector<BufferLifetime> intermediate_lifetimes(const Program& p,
                                                   const std::map<std::string, int64_t>& bindings,
                                                   std::vector<int>* ids) {
  const int n = static_cast<int>(p.buffers.size());
  std::vector<int> first(static_cast<size_t>(n), -1), last(static_cast<size_t>(n), -1);
  for (int step = 0; step < static_cast<int>(p.kernels.size()); ++step) {
    const Kernel& k = p.kernels[static_cast<size_t>(step)];
    const auto [reads, writes] = buffer_access(k);
    for (int w : writes)
      if (first[static_cast<size_t>(w)] < 0) first[static_cast<size_t>(w)] = step;
    for (int r : reads) last[static_cast<size_t>(r)] = step;
  }
  std::vector<BufferLifetime> out;
  if (ids) ids->clear();
  for (int b = 0; b < n; ++b) {
    const Buffer& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.role != BufferRole::Intermediate) continue;
    if (first[static_cast<size_t>(b)] < 0)
      throw InternalError("[memory plan] intermediate '" + buf.name + "' is never written");
    int64_t elems = buf.elements.evaluate({}, bindings);
    BufferLifetime lt;
    lt.bytes = static_cast<size_t>(elems) * dtype_size(buf.dtype);
    lt.first_def = first[static_cast<size_t>(b)];
    lt.last_use = std::max(first[static_cast<size_t>(b)], last[static_cast<size_t>(b)]);
    out.push_back(lt);
    if (ids) ids->push_back(b);
  }
  return out;
}

}  // namespace luminal::kernel
