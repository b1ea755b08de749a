// A value of the reference interpreter: a strided index map over a buffer, with an
// optional pad mask. reshape/permute/expand/slice/pad only rewrite the map; a copy is
// made (and counted) only when a map cannot express the result, or a kernel needs
// unmasked elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "luminal/dtype.hpp"

namespace luminal::detail::reference {

/// Copies made by the interpreter (outputs excluded): the "views are free" test reads it.
struct Stats {
  int64_t copies = 0;
  int64_t bytes_copied = 0;
};

struct View {
  DType dtype = DType::f32;
  std::shared_ptr<const std::byte[]> owner;  // keeps `base` alive; null for caller memory
  const std::byte* base = nullptr;
  std::vector<int64_t> shape, strides;  // strides in elements; 0 for a broadcast axis
  int64_t offset = 0;                   // element offset of index (0, ..., 0)
  // Pad mask: an element is real iff mlo[i] <= idx[i] < mhi[i] on every axis, else `pad`.
  std::vector<int64_t> mlo, mhi;
  double pad = 0;

  bool masked() const { return !mlo.empty(); }
  int64_t numel() const;
  bool contiguous() const;  // unmasked and row-major dense
};

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape);
/// A fresh contiguous buffer of `shape` (uninitialised); `data` receives its bytes.
View allocate(DType dtype, const std::vector<int64_t>& shape, std::byte** data);
/// `v` itself if contiguous, else a contiguous copy (pad mask applied).
View contiguous(const View& v, Stats& stats);
/// `v` itself if unmasked, else a contiguous copy.
View unmasked(const View& v, Stats& stats);
/// Copies every element of `v` row-major into `out` (numel * dtype_size bytes).
void copy_out(const View& v, std::byte* out);

View reshape_view(const View& v, const std::vector<int64_t>& shape, Stats& stats);
View permute_view(const View& v, const std::vector<int>& perm);
View expand_view(const View& v, const std::vector<int64_t>& shape);
View slice_view(const View& v, int axis, int64_t start, int64_t end, int64_t step);
View pad_view(const View& v, int axis, int64_t lo, int64_t hi, double value, Stats& stats);

/// Stores `value` converted to `dtype` (the rules of prim_cast/prim_constant) at `out`.
void store_scalar(DType dtype, double value, std::byte* out);
/// The element stored at `in` (of `dtype`), as a double: store_scalar's inverse.
double load_scalar(DType dtype, const std::byte* in);
/// Element `i` of `v`'s underlying storage (v.offset + i; no strides or pad mask), as a
/// double.
double storage_element(const View& v, int64_t i);

}  // namespace luminal::detail::reference
