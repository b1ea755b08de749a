// Reductions: sum mean max min prod var over any set of axes, argmax/argmin, cumsum.
#include <limits>

#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

/// Axes up to this length use the masked O(n^2) cumsum (sequential order, one kernel).
constexpr int64_t kCumsumMaskedMax = 64;

/// Input of a reduction in its compute dtype: f16/bf16 -> f32, bool -> i32.
Tensor reduction_input(const Tensor& x, const Ctx& c) {
  need(x, c, "x");
  DType comp = compute_dtype(x.dtype());
  return to(x, comp == boolean ? i32 : comp, c);
}

/// Result dtype: f16/bf16 come back; bool sums/products are i32 (torch: int64).
DType reduction_result(DType in, bool keep_bool) {
  if (in == boolean) return keep_bool ? boolean : i32;
  return in;
}

void need_float_operand(const Tensor& x, const Ctx& c) {
  need(x, c, "x");
  if (!is_float(x.dtype())) {
    raise<DTypeError>(c, "needs a floating-point tensor, got " + describe(x) + " (cast it to f32 first)");
  }
}

/// Product along one axis as a balanced tree of multiplies: exact zeros and signs, and
/// only log2(n) roundings along any path.
Tensor prod_axis(const Tensor& x0, int axis, bool keepdim, const Ctx& c) {
  Tensor x = x0;
  Dim n = x.shape()[static_cast<size_t>(axis)];
  if (!n.is_constant()) {
    // Pad with ones up to the dim's upper bound so the tree has a constant shape.
    Dim ub(n.upper_bound());
    x = prim_pad(x, axis, Dim(0), ub - n, 1.0, c.op, c.loc);
    n = ub;
  }
  int64_t len = *n.as_constant();
  if (len == 0) {
    std::vector<Dim> s = x.shape();
    s[static_cast<size_t>(axis)] = Dim(1);
    x = fill_like(x, 1.0, x.dtype(), s, c);
    len = 1;
  }
  while (len > 1) {
    if (len % 2 == 1) {
      x = prim_pad(x, axis, Dim(0), Dim(1), 1.0, c.op, c.loc);
      ++len;
    }
    Tensor lo = slice_(x, axis, Dim(0), Dim(len / 2), 1, c);
    Tensor hi = slice_(x, axis, Dim(len / 2), Dim(len), 1, c);
    x = prim_binary(PrimOp::Mul, lo, hi, c.op, c.loc);
    len /= 2;
  }
  if (keepdim) return x;
  std::vector<Dim> s = x.shape();
  s.erase(s.begin() + axis);
  return prim_reshape(x, s, c.op, c.loc);
}

/// Index of the first maximum (`largest`) or minimum along axis; NaN counts as extreme.
Tensor arg_extreme(const Tensor& x0, int axis, bool keepdim, bool largest, const Ctx& c) {
  Tensor x = reduction_input(x0, c);
  int ax = norm_axis(axis, x.rank(), x0, c);
  Tensor m = largest ? reduce_max(x, {ax}, true, c) : reduce_min(x, {ax}, true, c);
  Tensor hit = or_(eq_(x, m, c), not_(eq_(x, x, c), c), c);
  const Dim n = x.shape()[static_cast<size_t>(ax)];
  std::vector<Dim> ishape(x.shape().size(), Dim(1));
  ishape[static_cast<size_t>(ax)] = n;
  Tensor idx = prim_reshape(iota_like(x, n, c), ishape, c.op, c.loc);
  // max over -index of the hits = -(first hit)
  Tensor cand = where_(hit, neg_(idx, c), static_cast<double>(std::numeric_limits<int32_t>::min() + 1), c);
  return neg_(reduce_max(cand, {ax}, keepdim, c), c);
}

}  // namespace

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) {
  Ctx c{"sum", loc};
  Tensor t = reduction_input(x, c);
  return to(reduce_sum(t, norm_axes(axes, x, c), keepdim, c), reduction_result(x.dtype(), false), c);
}

Tensor mean(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) {
  Ctx c{"mean", loc};
  need_float_operand(x, c);
  return to(reduce_mean(to_f32(x, c), norm_axes(axes, x, c), keepdim, c), x.dtype(), c);
}

Tensor max(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) {
  Ctx c{"max", loc};
  Tensor t = reduction_input(x, c);
  return to(reduce_max(t, norm_axes(axes, x, c), keepdim, c), x.dtype(), c);
}

Tensor min(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) {
  Ctx c{"min", loc};
  Tensor t = reduction_input(x, c);
  return to(reduce_min(t, norm_axes(axes, x, c), keepdim, c), x.dtype(), c);
}

Tensor prod(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) {
  Ctx c{"prod", loc};
  Tensor t = reduction_input(x, c);
  std::vector<int> ax = norm_axes(axes, x, c);
  for (auto it = ax.rbegin(); it != ax.rend(); ++it) t = prod_axis(t, *it, keepdim, c);
  return to(t, reduction_result(x.dtype(), false), c);
}

Tensor var(const Tensor& x, const Axes& axes, bool keepdim, bool unbiased, Loc loc) {
  Ctx c{"var", loc};
  need_float_operand(x, c);
  Tensor t = to_f32(x, c);
  std::vector<int> ax = norm_axes(axes, x, c);
  Tensor d = sub_(t, reduce_mean(t, ax, true, c), c);
  Tensor ss = reduce_sum(mul_(d, d, c), ax, keepdim, c);
  Dim n(1);
  for (int a : ax) n = n * x.shape()[static_cast<size_t>(a)];
  if (unbiased) n = n - 1;
  Tensor r;
  if (auto v = n.as_constant()) {
    // n == 0 gives inf, and 0 * inf = NaN as torch (var of one element, unbiased).
    r = mul_(ss, *v == 0 ? std::numeric_limits<double>::infinity() : 1.0 / static_cast<double>(*v), c);
  } else {
    r = div_(ss, dim_value(t, n, f32, c), c);
  }
  return to(r, x.dtype(), c);
}

Tensor argmax(const Tensor& x, int axis, bool keepdim, Loc loc) {
  Ctx c{"argmax", loc};
  return arg_extreme(x, axis, keepdim, true, c);
}

Tensor argmin(const Tensor& x, int axis, bool keepdim, Loc loc) {
  Ctx c{"argmin", loc};
  return arg_extreme(x, axis, keepdim, false, c);
}

Tensor cumsum(const Tensor& x, int axis, Loc loc) {
  Ctx c{"cumsum", loc};
  Tensor t = reduction_input(x, c);
  int ax = norm_axis(axis, t.rank(), x, c);
  Tensor last = move_to_last(t, ax, c);
  const Dim n = last.shape().back();
  const int la = static_cast<int>(last.rank() - 1);
  Tensor s;
  if (n.is_constant() && *n.as_constant() <= kCumsumMaskedMax) {
    // Short axes: out[..., i] = sum_j where(j <= i, x[..., j], 0), one masked row per
    // output element summed in index order, like torch's sequential loop. A where (not a
    // multiply by 0/1) keeps inf and NaN where they are.
    std::vector<Dim> rows = last.shape();
    rows.insert(rows.end() - 1, Dim(1));
    std::vector<Dim> square = last.shape();
    square.insert(square.end() - 1, n);
    Tensor xe = broadcast_to(prim_reshape(last, rows, c.op, c.loc), square, c);
    Tensor masked = where_(tril_like(t, n, n, Dim(0), c), xe, 0.0, c);
    s = prim_reduce(PrimOp::SumReduce, masked, static_cast<int>(square.size() - 1), c.op, c.loc);
  } else {
    // Long or symbolic axes: Hillis-Steele scan, log2(n) steps of s += s shifted right by
    // k (zero-filled), O(n log n) work instead of O(n^2). Shifting is pad-then-slice, so
    // it stays valid for any run-time n.
    s = last;
    for (int64_t k = 1; k < n.upper_bound(); k *= 2) {
      Tensor shifted = slice_(prim_pad(s, la, Dim(k), Dim(0), 0.0, c.op, c.loc), la, Dim(0), n, 1, c);
      s = add_(s, shifted, c);
    }
  }
  return to(move_from_last(s, ax, c), reduction_result(x.dtype(), false), c);
}

}  // namespace luminal
