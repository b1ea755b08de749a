// Building blocks shared by the high-level ops (lib/graph/ops_*.cpp): argument checks
// that throw MLX-style errors, NumPy broadcasting, dtype promotion, scalar constants,
// and thin broadcasting wrappers over the primitives. Nothing here promotes dtypes
// implicitly except `promote_*`; the internal builders require equal dtypes.
#pragma once

#include <cstdint>
#include "luminal/source_location.hpp"
#include <string>
#include <string_view>
#include <vector>

#include "graph/diagnostics.hpp"
#include "graph/primitives.hpp"
#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/error.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "luminal/tensor.hpp"

namespace luminal::detail {

/// The user-facing op name and call site every node and error of one op carries.
struct Ctx {
  std::string_view op;
  Loc loc;
};

template <class E>
[[noreturn]] inline void raise(const Ctx& c, const std::string& msg) {
  fail<E>(c.op, msg, c.loc);
}

// ---- graph access (ops_graph_access.cpp)
/// A Graph handle sharing t's node store.
Graph graph_of(const Tensor& t, const Ctx& c);
/// The graph that graph-less creation ops (constant, arange, ...) add nodes to.
Graph current_graph(const Ctx& c);

// ---- checks
/// Throws ShapeError when t is a null handle; `role` names the argument ("lhs", "x").
void need(const Tensor& t, const Ctx& c, std::string_view role);
/// Normalizes a possibly negative axis of a rank-`rank` tensor; ShapeError when out of range.
int norm_axis(int axis, int64_t rank, const Tensor& x, const Ctx& c);
/// Normalized, sorted, duplicate-free axes (all axes when `axes` is empty).
std::vector<int> norm_axes(const Axes& axes, const Tensor& x, const Ctx& c);
/// "f32 tensor (B, 8)" for messages.
std::string describe(const Tensor& t);
std::string dim_list(const std::vector<int>& v);

// ---- dtypes
enum class Category : uint8_t { boolean = 0, integer = 1, floating = 2 };
Category category(DType t);
/// PyTorch promotion of two tensor dtypes.
DType promote(DType a, DType b);
/// The dtype a result is computed in: f16/bf16 -> f32, everything else unchanged.
DType compute_dtype(DType t);
/// Casts when dtypes differ.
Tensor to(const Tensor& t, DType dt, const Ctx& c);
/// f16/bf16/i32/bool inputs to f32 (for float-only math).
Tensor to_f32(const Tensor& t, const Ctx& c);

// ---- shapes
std::vector<Dim> broadcast_shape(const std::vector<Dim>& a, const std::vector<Dim>& b, const Ctx& c,
                                 std::string_view what = "operands");
/// NumPy broadcast of t to `shape` (rank may grow on the left).
Tensor broadcast_to(const Tensor& t, const std::vector<Dim>& shape, const Ctx& c);
bool is_one(const Dim& d);
Dim product(const std::vector<Dim>& dims, size_t begin = 0, size_t end = SIZE_MAX);
std::vector<Dim> with_ones(const std::vector<Dim>& shape, const std::vector<int>& axes);

// ---- constants
/// Scalar constant (shape {}) in t's graph.
Tensor scalar_like(const Tensor& t, double value, DType dt, const Ctx& c);
/// Constant of `shape` in t's graph.
Tensor fill_like(const Tensor& t, double value, DType dt, const std::vector<Dim>& shape, const Ctx& c);
/// Scalar tensor holding the value of a (possibly symbolic) dim, in dtype dt.
Tensor dim_value(const Tensor& t, const Dim& d, DType dt, const Ctx& c);
/// i32 [n] 0..n-1 in t's graph.
Tensor iota_like(const Tensor& t, const Dim& n, const Ctx& c);
/// boolean [n, m], true where j <= i + offset (ops_creation.cpp).
Tensor tril_like(const Tensor& t, const Dim& n, const Dim& m, const Dim& offset, const Ctx& c);

// ---- builders over equal dtypes (operands broadcast; scalars take the tensor's dtype)
Tensor bin(PrimOp op, const Tensor& a, const Tensor& b, const Ctx& c);
Tensor bin(PrimOp op, const Tensor& a, double b, const Ctx& c);
Tensor un(PrimOp op, const Tensor& x, const Ctx& c);
Tensor add_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor add_(const Tensor& a, double b, const Ctx& c);
Tensor sub_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor sub_(const Tensor& a, double b, const Ctx& c);
Tensor sub_(double a, const Tensor& b, const Ctx& c);
Tensor mul_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor mul_(const Tensor& a, double b, const Ctx& c);
/// a * recip(b): float only.
Tensor div_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor max_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor min_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor neg_(const Tensor& x, const Ctx& c);
Tensor lt_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor lt_(const Tensor& a, double b, const Ctx& c);
Tensor gt_(const Tensor& a, double b, const Ctx& c);
Tensor eq_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor eq_(const Tensor& a, double b, const Ctx& c);
Tensor not_(const Tensor& x, const Ctx& c);
Tensor and_(const Tensor& a, const Tensor& b, const Ctx& c);
Tensor or_(const Tensor& a, const Tensor& b, const Ctx& c);
/// cond boolean; a and b equal dtype; all broadcast.
Tensor where_(const Tensor& cond, const Tensor& a, const Tensor& b, const Ctx& c);
Tensor where_(const Tensor& cond, const Tensor& a, double b, const Ctx& c);
Tensor where_(const Tensor& cond, double a, const Tensor& b, const Ctx& c);
Tensor reshape_(const Tensor& x, const std::vector<Dim>& shape, const Ctx& c);
Tensor permute_(const Tensor& x, const std::vector<int>& perm, const Ctx& c);
/// Moves `axis` to the last position.
Tensor move_to_last(const Tensor& x, int axis, const Ctx& c);
/// Inverse of move_to_last for a tensor of the same rank.
Tensor move_from_last(const Tensor& x, int axis, const Ctx& c);
Tensor slice_(const Tensor& x, int axis, const Dim& start, const Dim& end, int64_t step, const Ctx& c);

// ---- reductions in the compute dtype (sorted axes; keepdim re-inserts size-1 dims)
Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c);
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c);
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c);
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c);

// ---- f32 math shared by several ops (input and output f32)
Tensor exp_f(const Tensor& x, const Ctx& c);
Tensor log_f(const Tensor& x, const Ctx& c);
Tensor sigmoid_f(const Tensor& x, const Ctx& c);
Tensor tanh_f(const Tensor& x, const Ctx& c);
Tensor cos_f(const Tensor& x, const Ctx& c);
/// cos with an absolute error ~1e-7 and no more (RoPE: a rotation needs no more, and
/// cos_f's exact argument reduction would be recomputed inside attention kernels).
Tensor cos_abs_f(const Tensor& x, const Ctx& c);
Tensor erfc_abs_f(const Tensor& x, const Ctx& c);                // erfc(|x|)
Tensor matmul_(const Tensor& a, const Tensor& b, const Ctx& c);  // equal dtypes, no casts
Tensor softmax_f(const Tensor& x, int axis, const Ctx& c);
Tensor concat_(const std::vector<Tensor>& xs, int axis, const Ctx& c);  // equal dtypes

}  // namespace luminal::detail
