// The one loop driver of the interpreter: a strided N-d iteration split into rows along
// the innermost axis, after merging axes that are contiguous for every operand and
// dropping size-1 axes, so inner loops are long and the compiler can vectorize them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace luminal::detail::reference {

/// Calls row(offsets, n, inner_strides) for every row: element i of the row lives at
/// offsets[k] + i * inner_strides[k] for operand k. Strides and offsets are in elements.
template <size_t K, class F>
void for_each_row(const std::vector<int64_t>& shape0,
                  const std::array<const std::vector<int64_t>*, K>& strides0,
                  const std::array<int64_t, K>& offsets, F&& row) {
  // Coalesce.
  std::vector<int64_t> shape;
  std::array<std::vector<int64_t>, K> st;
  for (size_t d = 0; d < shape0.size(); ++d) {
    if (shape0[d] == 0) return;
    if (shape0[d] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < K && merge; ++k) merge = st[k].back() == (*strides0[k])[d] * shape0[d];
    if (merge) {
      shape.back() *= shape0[d];
      for (size_t k = 0; k < K; ++k) st[k].back() = (*strides0[k])[d];
    } else {
      shape.push_back(shape0[d]);
      for (size_t k = 0; k < K; ++k) st[k].push_back((*strides0[k])[d]);
    }
  }
  std::array<int64_t, K> cur = offsets, inner{};
  if (shape.empty()) {
    row(cur, int64_t{1}, inner);
    return;
  }
  const size_t nd = shape.size();
  const int64_t n = shape[nd - 1];
  for (size_t k = 0; k < K; ++k) inner[k] = st[k][nd - 1];
  std::vector<int64_t> idx(nd, 0);
  while (true) {
    row(cur, n, inner);
    size_t d = nd - 1;
    while (true) {
      if (d == 0) return;
      --d;
      ++idx[d];
      for (size_t k = 0; k < K; ++k) cur[k] += st[k][d];
      if (idx[d] < shape[d]) break;
      for (size_t k = 0; k < K; ++k) cur[k] -= st[k][d] * shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace luminal::detail::reference
