// Recycled storage for the outputs the convenience call (Callable::operator()) hands back.
//
// A fresh HostTensor for every output costs a page fault per 4 KiB on first touch: a
// 16M-float output took ~28 ms of faults per call against a 6 ms kernel. The pool gives
// each output storage that, once the caller drops the tensor, goes back to the pool for
// the next call of the same Callable, already mapped. Blocks of 2 MiB and more are 2 MiB
// aligned and advised as transparent huge pages, so even the first call faults once per
// 2 MiB instead of once per 4 KiB. Contents are not zeroed: the kernels write every
// element of an output they write in place.
//
// Thread-safe. The pool keeps at most `max_cached_bytes` of free blocks (and at most 4 per
// size); a block freed beyond that, or after the pool itself is gone, is returned to the
// system. Tensors handed out stay valid after the pool (and its Callable) are destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "luminal/host_tensor.hpp"

namespace luminal::detail {

class OutputPool : public std::enable_shared_from_this<OutputPool> {
 public:
  static std::shared_ptr<OutputPool> create(size_t max_cached_bytes = size_t{1} << 30);
  /// An owning, writable tensor with uninitialized contents.
  HostTensor take(DType dtype, std::vector<int64_t> shape);

  struct Stats {
    uint64_t allocations = 0;  ///< blocks obtained from the system
    uint64_t reuses = 0;       ///< tensors served from a recycled block
    size_t cached_bytes = 0;   ///< free blocks held now
  };
  Stats stats() const;

  ~OutputPool();

 private:
  explicit OutputPool(size_t max_cached) : max_cached_(max_cached) {}
  void give_back(std::byte* p, size_t bytes);
  static std::byte* allocate(size_t bytes);
  static void release(std::byte* p, size_t bytes);

  size_t max_cached_;
  mutable std::mutex mu_;
  std::multimap<size_t, std::byte*> free_;  // capacity -> block
  Stats stats_;
};

}  // namespace luminal::detail
