// Kernel read/write sets and the waits between kernels (see the header).
#include "backends/cpu/kernel_deps.hpp"

#include <algorithm>

#include "kernel/buffer_access.hpp"

namespace luminal::cpu {

namespace {

bool overlap(const BufferSpan& a, const BufferSpan& b) {
  return a.arena == b.arena && a.lo < b.hi && b.lo < a.hi;
}

}  // namespace

std::vector<KernelAccess> kernel_accesses(const kernel::Program& prog) {
  std::vector<KernelAccess> out;
  for (const auto& k : prog.kernels) {
    KernelAccess a;
    auto [reads, writes] = kernel::buffer_access(k);
    a.reads = std::move(reads);
    a.writes = std::move(writes);
    std::sort(a.reads.begin(), a.reads.end());
    a.reads.erase(std::unique(a.reads.begin(), a.reads.end()), a.reads.end());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<uint8_t> wait_before(const std::vector<KernelAccess>& access,
                                 const std::vector<BufferSpan>& span) {
  std::vector<uint8_t> wait(access.size(), 0);
  std::vector<BufferSpan> read, written;  // by kernels issued since the last wait
  auto hits = [&](int b, const std::vector<BufferSpan>& set) {
    const BufferSpan& s = span[static_cast<size_t>(b)];
    if (s.lo == s.hi) return false;  // empty
    for (const auto& x : set)
      if (overlap(s, x)) return true;
    return false;
  };
  for (size_t k = 0; k < access.size(); ++k) {
    bool w = false;
    for (int b : access[k].reads) w = w || hits(b, written);
    for (int b : access[k].writes) w = w || hits(b, written) || hits(b, read);
    if (w) {
      wait[k] = 1;
      read.clear();
      written.clear();
    }
    for (int b : access[k].reads) read.push_back(span[static_cast<size_t>(b)]);
    for (int b : access[k].writes) written.push_back(span[static_cast<size_t>(b)]);
  }
  return wait;
}

}  // namespace luminal::cpu
