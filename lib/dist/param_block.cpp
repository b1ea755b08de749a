#include "dist/param_block.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>

#include "luminal/error.hpp"

namespace luminal::dist {

std::vector<int64_t> block_dims(const ParamRegion& r) {
  std::vector<int64_t> d;
  for (size_t a = 0; a < r.start.size() && a < r.end.size(); ++a) d.push_back(r.end[a] - r.start[a]);
  return d;
}

bool block_inside(const ParamRegion& r, const std::vector<int64_t>& shape) {
  if (r.start.size() != shape.size() || r.end.size() != shape.size()) return false;
  for (size_t a = 0; a < shape.size(); ++a)
    if (r.start[a] < 0 || r.start[a] >= r.end[a] || r.end[a] > shape[a]) return false;
  return true;
}

HostTensor copy_block(const HostTensor& whole, const ParamRegion& r) {
  const std::vector<int64_t>& dims = whole.shape();
  if (!block_inside(r, dims))
    throw InternalError("[copy_block] the block " + block_text(r, dims) + " is not inside the tensor");
  const std::vector<int64_t> bd = block_dims(r);
  const std::size_t es = dtype_size(whole.dtype());
  int64_t n = 1;
  for (int64_t d : bd) n *= d;
  // 64-byte aligned like the runtime's other buffers (the kernels do not rely on it).
  const std::size_t bytes = static_cast<std::size_t>(n) * es, alloc = (bytes + 63) / 64 * 64;
  void* mem = std::aligned_alloc(64, alloc ? alloc : 64);
  if (!mem) throw RuntimeError("[bind] cannot allocate " + std::to_string(bytes) + " bytes for a weight shard");
  // A view with its owner, not an owning tensor: copies of it share the block (a
  // model's prefill and decode programs bind one copy).
  std::shared_ptr<std::byte> storage(static_cast<std::byte*>(mem), [](std::byte* p) { std::free(p); });
  // Runs: the innermost axis the block does not cover whole, with everything inside it.
  const auto rank = static_cast<int>(dims.size());
  int q = rank - 1;
  while (q > 0 && r.start[static_cast<size_t>(q)] == 0 && r.end[static_cast<size_t>(q)] == dims[static_cast<size_t>(q)])
    --q;
  std::vector<int64_t> stride(dims.size(), 1);
  for (int a = rank - 1; a > 0; --a)
    stride[static_cast<size_t>(a - 1)] = stride[static_cast<size_t>(a)] * dims[static_cast<size_t>(a)];
  const auto* src = whole.data();
  auto* dst = storage.get();
  auto result = [&] {
    const std::byte* data = storage.get();
    return HostTensor::view(whole.dtype(), bd, data, std::shared_ptr<const void>(std::move(storage)));
  };
  if (rank == 0 || n == 0) return result();
  const auto qs = static_cast<size_t>(q);
  const std::size_t run = static_cast<std::size_t>((r.end[qs] - r.start[qs]) * stride[qs]) * es;
  std::vector<int64_t> idx(r.start.begin(), r.start.begin() + q);  // the outer axes' index
  for (;;) {
    int64_t off = r.start[qs] * stride[qs];
    for (size_t a = 0; a < qs; ++a) off += idx[a] * stride[a];
    std::memcpy(dst, src + static_cast<std::size_t>(off) * es, run);
    dst += run;
    int a = q - 1;
    for (; a >= 0; --a) {
      const auto as = static_cast<size_t>(a);
      if (++idx[as] < r.end[as]) break;
      idx[as] = r.start[as];
    }
    if (a < 0) break;
  }
  return result();
}

std::string block_text(const ParamRegion& r, const std::vector<int64_t>& whole) {
  auto ints = [](const std::vector<int64_t>& s) {
    std::string t = "(";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + ")";
  };
  std::string t = ints(block_dims(r)) + " -- elements [";
  for (size_t a = 0; a < r.start.size() && a < r.end.size(); ++a)
    t += (a ? ", " : "") + std::to_string(r.start[a]) + ":" + std::to_string(r.end[a]);
  return t + "] of " + ints(whole);
}

}  // namespace luminal::dist
