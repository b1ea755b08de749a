// bind_safetensors (include/luminal/safetensors.hpp): a rank binds only the block of each
// weight its program reads (dist/param_regions.hpp), copied from the file's mapping into a
// tensor of the block's shape where the program stores the param as its block (the CPU
// backend), and releases the file pages it read for it: the rank holds 1/P of a split
// weight, not the pages the block's rows happen to touch.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "dist/param_block.hpp"
#include "luminal/callable.hpp"
#include "luminal/error.hpp"
#include "luminal/safetensors.hpp"
#include "runtime/executable.hpp"

namespace luminal {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// `t` (a view of the file) with only the box `r` copied, into an anonymous mapping of
// t's size: the pages the box does not reach are reserved but never written, so they
// take no memory (and read as zeros). For programs that index the whole shape (the
// reference interpreter).
HostTensor copy_region(const HostTensor& t, const ParamRegion& r) {
  const std::size_t bytes = t.nbytes();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t len = (bytes + page - 1) / page * page;
  void* mem =
      ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    throw RuntimeError("[bind_safetensors] cannot reserve " + std::to_string(bytes) +
                       " bytes for a weight shard");
  std::shared_ptr<void> owner(mem, [len](void* p) { ::munmap(p, len); });
  // The block, then each of its runs moved to its place in the whole shape.
  const HostTensor block = dist::copy_block(t, r);
  const std::vector<int64_t>& dims = t.shape();
  const std::vector<int64_t> bd = dist::block_dims(r);
  const std::size_t es = dtype_size(t.dtype());
  const auto n = dims.size();
  std::vector<int64_t> stride(n, 1);
  for (size_t a = n; a-- > 1;) stride[a - 1] = stride[a] * dims[a];
  const std::size_t run = static_cast<std::size_t>(bd[n - 1]) * es;
  std::vector<int64_t> idx(n, 0);  // block index of the run's first element (last axis 0)
  const std::byte* src = block.data();
  for (;;) {
    int64_t off = 0;
    for (size_t a = 0; a < n; ++a) off += (r.start[a] + idx[a]) * stride[a];
    std::memcpy(static_cast<std::byte*>(mem) + static_cast<std::size_t>(off) * es, src, run);
    src += run;
    size_t a = n - 1;
    while (a-- > 0) {
      if (++idx[a] < bd[a]) break;
      idx[a] = 0;
    }
    if (a == SIZE_MAX) break;
  }
  return HostTensor::view(t.dtype(), dims, mem, std::shared_ptr<const void>(owner));
}

// The pages wholly inside `t` (a view of the read-only private mapping load_safetensors
// made) are dropped from this process: nothing here wrote them, so a later read maps the
// file's bytes again -- MADV_DONTNEED loses nothing. Views that bind whole params read
// through the same mapping and refault what they need.
void release_pages(const HostTensor& t) {
  if (!t.is_view() || t.is_writable()) return;  // an owning copy (unaligned data): keep
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<std::uintptr_t>(t.data());
  const std::uintptr_t lo = (b + page - 1) / page * page, hi = (b + t.nbytes()) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace

void bind_safetensors(std::span<Callable* const> fns, const std::string& path) {
  // Mapped, not read: only the header's pages and the ones copied or bound are touched.
  const std::map<std::string, HostTensor> file = load_safetensors(path);
  // One copy of each block, shared by the programs that read it (a model's prefill and
  // decode steps read the same shards).
  std::map<std::string, HostTensor> blocks;
  std::vector<const HostTensor*> copied;
  for (Callable* fn : fns) {
    std::map<std::string, HostTensor> bind;
    for (const std::string& name : fn->param_names()) {
      auto it = file.find(name);
      if (it == file.end())
        throw RuntimeError("[bind_safetensors] " + path + " has no tensor '" + name +
                           "' (a param of the program)");
      const HostTensor& t = it->second;
      const ParamRegion r = fn->param_region(name);
      bool whole = t.nbytes() == 0 || t.shape() == r.end;
      for (int64_t s : r.start) whole = whole && (t.nbytes() == 0 || s == 0);
      if (!whole && !dist::block_inside(r, t.shape()))
        throw RuntimeError("[bind_safetensors] '" + name + "' in " + path + " has shape " + shape_text(t.shape()) +
                           ", the program's param is " + shape_text(r.end));
      if (whole) {
        bind.insert_or_assign(name, t);  // validated by bind(): dtype and shape
        continue;
      }
      // A param the program stores as its block takes the block itself; other programs
      // (the reference interpreter) index the whole shape: the block in a reservation of it.
      const bool stored_as_block = fn->state()->param_blocks.count(name) > 0;
      // Built with append: GCC 12 warns falsely (-Wrestrict) on operator+ with a literal.
      std::string key = name;
      key.append(stored_as_block ? "|block" : "|whole");
      for (size_t a = 0; a < r.start.size(); ++a)
        key.append("|").append(std::to_string(r.start[a])).append(":").append(std::to_string(r.end[a]));
      auto b = blocks.find(key);
      if (b == blocks.end()) {
        b = blocks.emplace(key, stored_as_block ? dist::copy_block(t, r) : copy_region(t, r)).first;
        copied.push_back(&t);
      }
      bind.insert_or_assign(name, b->second);
    }
    fn->bind(bind);  // validates dtypes and shapes
  }
  for (const HostTensor* t : copied) release_pages(*t);
}

void bind_safetensors(Callable& fn, const std::string& path) {
  Callable* one[] = {&fn};
  bind_safetensors(std::span<Callable* const>(one), path);
}

}  // namespace luminal
