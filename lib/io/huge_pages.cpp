// Weights in transparent huge pages: load_safetensors(path, {.huge_pages = true}).
//
// Why: a decode step streams every weight once. Viewed through a file mapping, 200 MB of
// weights sit in 4 KiB pages -- ~50,000 TLB entries per step, missed one after another;
// in one anonymous allocation advised MADV_HUGEPAGE they take ~100 2 MiB pages. On the
// 2-core development VMs a decode step of the 110M f16 Llama ran ~13% faster that way
// (docs/llama.md, "Weights in huge pages"). File-backed mappings cannot get such pages
// here (no read-only THP for files: MADV_COLLAPSE fails with EINVAL), hence the copy.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include "luminal/error.hpp"
#include "luminal/safetensors.hpp"

namespace luminal {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kAlign = 64;  // each tensor's start: a cache line (and any dtype's alignment)

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/// One anonymous read-write region of `len` bytes starting on a 2 MiB boundary (so that
/// the kernel can back it with huge pages from its first byte), advised MADV_HUGEPAGE.
std::byte* map_aligned(size_t len) {
  void* raw = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw RuntimeError("[load_safetensors] cannot allocate " + std::to_string(len) +
                       " bytes for the weights in huge pages: " + std::strerror(errno));
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = round_up(start, kHugePage);
  // Give back the unaligned head and the tail beyond len.
  if (base > start) ::munmap(raw, base - start);
  const uintptr_t end = start + len + kHugePage;
  if (end > base + len) ::munmap(reinterpret_cast<void*>(base + len), end - (base + len));
#ifdef MADV_HUGEPAGE
  // Advice only: where transparent huge pages are off, the copy still works, in 4 KiB pages.
  ::madvise(reinterpret_cast<void*>(base), len, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<std::byte*>(base);
}

/// Drops the whole pages inside [p, p + n) of a private read-only file mapping from this
/// process's resident set (the page cache keeps them; reading them again would fault them
/// back in). Only for load_safetensors' own mappings: on anonymous memory MADV_DONTNEED
/// would zero the bytes.
void release_mapped(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = round_up(reinterpret_cast<uintptr_t>(p), page);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

/// The copy; `release_source`: the tensors with an owner are views of load_safetensors'
/// mappings, whose pages are released as soon as they are copied (so loading holds about
/// the weights once, not twice).
std::map<std::string, HostTensor> copy_tensors(const std::map<std::string, HostTensor>& tensors,
                                               bool release_source) {
  size_t total = 0;
  for (const auto& [name, t] : tensors) total += round_up(t.nbytes(), kAlign);
  if (total == 0) return tensors;
  const size_t len = round_up(total, kHugePage);
  std::byte* base = map_aligned(len);
  std::shared_ptr<const void> owner(base, [len](const void* p) { ::munmap(const_cast<void*>(p), len); });
  std::map<std::string, HostTensor> out;
  size_t off = 0;
  for (const auto& [name, t] : tensors) {
    if (t.nbytes()) std::memcpy(base + off, t.data(), t.nbytes());
    if (release_source && t.has_owner()) release_mapped(t.data(), t.nbytes());
    out.emplace(name, HostTensor::view(t.dtype(), t.shape(), base + off, owner));
    off += round_up(t.nbytes(), kAlign);
  }
  return out;
}

}  // namespace

std::map<std::string, HostTensor> copy_to_huge_pages(const std::map<std::string, HostTensor>& tensors) {
  return copy_tensors(tensors, false);
}

std::map<std::string, HostTensor> load_safetensors(const std::string& path, const LoadOptions& options) {
  std::map<std::string, HostTensor> mapped = load_safetensors(path);
  if (!options.huge_pages) return mapped;
  // The copies keep nothing of the file mapping: it is unmapped with `mapped`.
  return copy_tensors(mapped, true);
}

}  // namespace luminal
