// bind_safetensors (include/luminal/safetensors.hpp): a rank binds only the block of each
// weight its program reads (dist/param_regions.hpp), copied from the file's mapping --
// the file's other pages are never touched by this process.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "luminal/callable.hpp"
#include "luminal/error.hpp"
#include "luminal/safetensors.hpp"

namespace luminal {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// `t` (a view of the file) with only the box `r` copied, into an anonymous mapping of
// t's size: the pages the box does not reach are reserved but never written, so they
// take no memory (and read as zeros).
HostTensor copy_region(const HostTensor& t, const ParamRegion& r) {
  const std::vector<int64_t>& dims = t.shape();
  const std::size_t es = dtype_size(t.dtype()), bytes = t.nbytes();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t len = (bytes + page - 1) / page * page;
  void* mem =
      ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    throw RuntimeError("[bind_safetensors] cannot reserve " + std::to_string(bytes) +
                       " bytes for a weight shard");
  std::shared_ptr<void> owner(mem, [len](void* p) { ::munmap(p, len); });
  // Runs: the innermost axis the box does not cover whole, with everything inside it.
  const auto n = static_cast<int>(dims.size());
  int q = n - 1;
  while (q > 0 && r.start[static_cast<size_t>(q)] == 0 &&
         r.end[static_cast<size_t>(q)] == dims[static_cast<size_t>(q)])
    --q;
  std::vector<int64_t> stride(dims.size(), 1);
  for (int a = n - 1; a > 0; --a)
    stride[static_cast<size_t>(a - 1)] = stride[static_cast<size_t>(a)] * dims[static_cast<size_t>(a)];
  const auto qs = static_cast<size_t>(q);
  const std::size_t run = static_cast<std::size_t>((r.end[qs] - r.start[qs]) * stride[qs]) * es;
  std::vector<int64_t> idx(r.start.begin(), r.start.begin() + q);  // the outer axes' index
  const auto* src = static_cast<const std::byte*>(t.data());
  auto* dst = static_cast<std::byte*>(mem);
  for (;;) {
    int64_t off = r.start[qs] * stride[qs];
    for (size_t a = 0; a < qs; ++a) off += idx[a] * stride[a];
    std::memcpy(dst + static_cast<std::size_t>(off) * es, src + static_cast<std::size_t>(off) * es, run);
    int a = q - 1;
    for (; a >= 0; --a) {
      const auto as = static_cast<size_t>(a);
      if (++idx[as] < r.end[as]) break;
      idx[as] = r.start[as];
    }
    if (a < 0) break;
  }
  return HostTensor::view(t.dtype(), dims, mem, std::shared_ptr<const void>(owner));
}

}  // namespace

void bind_safetensors(Callable& fn, const std::string& path) {
  // Mapped, not read: only the header's pages and the ones copied or bound are touched.
  const std::map<std::string, HostTensor> file = load_safetensors(path);
  std::map<std::string, HostTensor> bind;
  for (const std::string& name : fn.param_names()) {
    auto it = file.find(name);
    if (it == file.end())
      throw RuntimeError("[bind_safetensors] " + path + " has no tensor '" + name +
                         "' (a param of the program)");
    const HostTensor& t = it->second;
    const ParamRegion r = fn.param_region(name);
    if (r.end != t.shape()) {
      bool inside = r.start.size() == t.shape().size();
      for (size_t a = 0; inside && a < r.start.size(); ++a)
        inside = r.start[a] >= 0 && r.start[a] < r.end[a] && r.end[a] <= t.shape()[a];
      if (!inside)
        throw RuntimeError("[bind_safetensors] '" + name + "' in " + path + " has shape " +
                           shape_text(t.shape()) + ", the program's param is " + shape_text(r.end));
    }
    bool whole = t.nbytes() == 0;
    if (!whole) {
      whole = true;
      for (size_t a = 0; a < r.start.size(); ++a)
        whole = whole && r.start[a] == 0 && r.end[a] == t.shape()[a];
    }
    bind.insert_or_assign(name, whole ? t : copy_region(t, r));
  }
  fn.bind(bind);  // validates dtypes and shapes
}

}  // namespace luminal
