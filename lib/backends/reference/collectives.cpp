#include "backends/reference/collectives.hpp"

#include <cstring>
#include <string>

#include "luminal/error.hpp"

namespace luminal::detail::reference {

void concat_blocks(const std::vector<const std::byte*>& blocks, const std::vector<int64_t>& in_shape, int axis,
                   std::size_t elem_size, std::byte* out) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) {
    if (static_cast<int>(i) < axis) outer *= in_shape[i];
    if (static_cast<int>(i) >= axis) inner *= in_shape[i];  // the axis itself and below
  }
  const std::size_t row = static_cast<std::size_t>(inner) * elem_size;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t q = 0; q < blocks.size(); ++q)
      if (row) std::memcpy(out + (static_cast<std::size_t>(o) * blocks.size() + q) * row,
                           blocks[q] + static_cast<std::size_t>(o) * row, row);
}

void sum_in_rank_order(DType dt, const std::vector<const std::byte*>& blocks, int64_t n, std::byte* dst) {
  if (dt == DType::f32) {
    auto* d = reinterpret_cast<float*>(dst);
    if (n > 0) std::memmove(d, blocks[0], static_cast<std::size_t>(n) * 4);  // empty: blocks may be null
    for (size_t q = 1; q < blocks.size(); ++q) {
      const auto* s = reinterpret_cast<const float*>(blocks[q]);
      for (int64_t i = 0; i < n; ++i) d[i] += s[i];
    }
  } else if (dt == DType::i32) {
    auto* d = reinterpret_cast<uint32_t*>(dst);  // unsigned: i32 sums wrap
    if (n > 0) std::memmove(d, blocks[0], static_cast<std::size_t>(n) * 4);  // empty: blocks may be null
    for (size_t q = 1; q < blocks.size(); ++q) {
      const auto* s = reinterpret_cast<const uint32_t*>(blocks[q]);
      for (int64_t i = 0; i < n; ++i) d[i] += s[i];
    }
  } else {
    throw InternalError(std::string("[collective] a sum over ranks of ") + std::string(dtype_name(dt)));
  }
}

std::vector<View> collective(PrimOp op, int axis, const std::vector<const View*>& x) {
  const size_t world = x.size();
  if (world == 0) throw InternalError("[collective] no ranks");
  const View& x0 = *x[0];
  const std::size_t es = dtype_size(x0.dtype);
  // Every rank's operand as contiguous bytes.
  std::vector<std::vector<std::byte>> dense(world);
  std::vector<const std::byte*> blocks(world);
  for (size_t r = 0; r < world; ++r) {
    if (x[r]->shape != x0.shape || x[r]->dtype != x0.dtype)
      throw InternalError("[collective] ranks disagree on the operand's shape or dtype");
    dense[r].resize(static_cast<std::size_t>(x[r]->numel()) * es);
    copy_out(*x[r], dense[r].data());
    blocks[r] = dense[r].data();
  }
  std::vector<View> out(world);
  if (op == PrimOp::AllGather) {
    std::vector<int64_t> shape = x0.shape;
    shape.at(static_cast<size_t>(axis)) *= static_cast<int64_t>(world);
    std::byte* data = nullptr;
    View v = allocate(x0.dtype, shape, &data);
    concat_blocks(blocks, x0.shape, axis, es, data);
    out.assign(world, v);  // the same (immutable) value on every rank
    return out;
  }
  std::byte* sum = nullptr;
  View total = allocate(x0.dtype, x0.shape, &sum);
  sum_in_rank_order(x0.dtype, blocks, x0.numel(), sum);
  if (op == PrimOp::AllReduce) {
    out.assign(world, total);
    return out;
  }
  if (op != PrimOp::ReduceScatter) throw InternalError("[collective] not a collective op");
  const int64_t d = x0.shape.at(static_cast<size_t>(axis));
  const int64_t block = d / static_cast<int64_t>(world);
  if (block * static_cast<int64_t>(world) != d)
    throw RuntimeError("[reduce_scatter] axis " + std::to_string(axis) + " (" + std::to_string(d) +
                       ") is not a multiple of the " + std::to_string(world) + " ranks");
  Stats st;
  for (size_t r = 0; r < world; ++r) {
    const int64_t s = static_cast<int64_t>(r) * block;
    out[r] = contiguous(slice_view(total, axis, s, s + block, 1), st);
  }
  return out;
}

}  // namespace luminal::detail::reference
