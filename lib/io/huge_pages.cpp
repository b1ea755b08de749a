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

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "luminal/error.hpp"
#include "luminal/safetensors.hpp"
#include "runtime/huge_alloc.hpp"

namespace luminal {

namespace {

constexpr size_t kAlign = 64;  // each tensor's start: a cache line (and any dtype's alignment)

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

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
  std::byte* base = nullptr;
  try {
    base = detail::alloc_huge_aligned(total);
  } catch (const std::bad_alloc&) {
    throw RuntimeError("[load_safetensors] cannot allocate " + std::to_string(total) +
                       " bytes for the tensors in huge pages");
  }
  std::shared_ptr<const void> owner(base, [](const void* p) { std::free(const_cast<void*>(p)); });
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
