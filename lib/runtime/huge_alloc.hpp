// Memory for large buffers that are streamed whole: on a 2 MiB boundary and advised
// MADV_HUGEPAGE, so that transparent huge pages can back it from its first byte (one TLB
// entry per 2 MiB instead of per 4 KiB). Used by the output pool (large outputs) and by
// load_safetensors' huge-page placement of weights.
#pragma once

#include <cstddef>

namespace luminal::detail {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// `bytes` (0 allowed) on a 2 MiB boundary, advised MADV_HUGEPAGE (advice only: where
/// transparent huge pages are off it is ordinary memory); free with std::free. Throws
/// std::bad_alloc.
std::byte* alloc_huge_aligned(std::size_t bytes);

}  // namespace luminal::detail
