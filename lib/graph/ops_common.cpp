// Shared building blocks of the high-level ops; see ops_common.hpp.
#include "graph/ops_common.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace luminal::detail {

// ------------------------------------------------------------------ checks
void need(const Tensor& t, const Ctx& c, std::string_view role) {
  if (!t.valid()) raise<ShapeError>(c, std::string(role) + " is a null Tensor");
}

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + " tensor " + shape_string(t.shape());
}

std::string dim_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

int norm_axis(int axis, int64_t rank, const Tensor& x, const Ctx& c) {
  if (axis < -rank || axis >= rank) {
    raise<ShapeError>(c, "axis " + std::to_string(axis) + " is out of range for " + describe(x) +
                             " of rank " + std::to_string(rank));
  }
  return axis < 0 ? static_cast<int>(axis + rank) : axis;
}

std::vector<int> norm_axes(const Axes& axes, const Tensor& x, const Ctx& c) {
  std::vector<int> out;
  if (axes.all()) {
    for (int i = 0; i < x.rank(); ++i) out.push_back(i);
    return out;
  }
  for (int a : axes.list()) out.push_back(norm_axis(a, x.rank(), x, c));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    raise<ShapeError>(c, "axes " + dim_list(axes.list()) + " repeat an axis of " + describe(x));
  }
  return out;
}

// ------------------------------------------------------------------ dtypes
Category category(DType t) {
  if (t == boolean) return Category::boolean;
  if (t == i32) return Category::integer;
  return Category::floating;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  Category ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  return f32;  // two different float types (f16 + bf16, f16 + f32, ...) meet in f32, as torch
}

DType compute_dtype(DType t) { return is_float(t) ? f32 : t; }

Tensor to(const Tensor& t, DType dt, const Ctx& c) {
  if (t.dtype() == dt) return t;
  return prim_cast(t, dt, c.op, c.loc);
}

Tensor to_f32(const Tensor& t, const Ctx& c) { return to(t, f32, c); }

// ------------------------------------------------------------------ shapes
bool is_one(const Dim& d) {
  auto v = d.as_constant();
  return v && *v == 1;
}

Dim product(const std::vector<Dim>& dims, size_t begin, size_t end) {
  Dim p(1);
  for (size_t i = begin; i < dims.size() && i < end; ++i) p = p * dims[i];
  return p;
}

std::vector<Dim> with_ones(const std::vector<Dim>& shape, const std::vector<int>& axes) {
  std::vector<Dim> out = shape;
  for (int a : axes) out[static_cast<size_t>(a)] = Dim(1);
  return out;
}

std::vector<Dim> broadcast_shape(const std::vector<Dim>& a, const std::vector<Dim>& b, const Ctx& c,
                                 std::string_view what) {
  size_t r = std::max(a.size(), b.size());
  std::vector<Dim> out(r);
  for (size_t i = 0; i < r; ++i) {
    bool has_a = i < a.size(), has_b = i < b.size();
    const Dim da = has_a ? a[a.size() - 1 - i] : Dim(1);
    const Dim db = has_b ? b[b.size() - 1 - i] : Dim(1);
    Dim d;
    if (is_one(da)) {
      d = db;
    } else if (is_one(db) || dims_provably_equal(da, db)) {
      d = da;
    } else if (!dims_provably_different(da, db)) {
      // Symbolic dims that may be equal: they must be (a guard checks it at call time,
      // recorded by the primitives that combine them). A symbolic dim is never taken to
      // broadcast as 1; keep the constant side when there is one.
      d = db.is_constant() ? db : da;
    } else {
      raise<ShapeError>(c, "cannot broadcast " + std::string(what) + " " + shape_string(a) + " and " +
                               shape_string(b) + ": dim " + da.to_string() + " vs " + db.to_string() +
                               " at axis -" + std::to_string(i + 1));
    }
    out[r - 1 - i] = d;
  }
  return out;
}

Tensor broadcast_to(const Tensor& t, const std::vector<Dim>& shape, const Ctx& c) {
  const auto& s = t.shape();
  if (s.size() > shape.size()) {
    raise<ShapeError>(c, "cannot broadcast " + shape_string(s) + " to " + shape_string(shape));
  }
  Tensor x = t;
  if (s.size() < shape.size()) {
    std::vector<Dim> padded(shape.size() - s.size(), Dim(1));
    padded.insert(padded.end(), s.begin(), s.end());
    x = prim_reshape(x, padded, c.op, c.loc);
  }
  const auto& xs = x.shape();
  bool same = true;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (dims_provably_equal(xs[i], shape[i])) continue;
    // Not provably equal but possibly so: prim_expand records the guard xs[i] == shape[i].
    if (!is_one(xs[i]) && dims_provably_different(xs[i], shape[i])) {
      raise<ShapeError>(c, "cannot broadcast " + shape_string(s) + " to " + shape_string(shape) + ": dim " +
                               xs[i].to_string() + " vs " + shape[i].to_string());
    }
    same = false;
  }
  return same ? x : prim_expand(x, shape, c.op, c.loc);
}

// ------------------------------------------------------------------ constants
Tensor scalar_like(const Tensor& t, double value, DType dt, const Ctx& c) {
  Graph g = graph_of(t, c);
  return prim_constant(g, value, dt, c.op, c.loc);
}

Tensor fill_like(const Tensor& t, double value, DType dt, const std::vector<Dim>& shape, const Ctx& c) {
  return broadcast_to(scalar_like(t, value, dt, c), shape, c);
}

Tensor iota_like(const Tensor& t, const Dim& n, const Ctx& c) {
  Graph g = graph_of(t, c);
  return prim_iota(g, n, c.op, c.loc);
}

Tensor dim_value(const Tensor& t, const Dim& d, DType dt, const Ctx& c) {
  if (auto v = d.as_constant()) return scalar_like(t, static_cast<double>(*v), dt, c);
  // The last element of iota(d + 1) is d: a symbolic dim becomes a value without a
  // dedicated primitive.
  Tensor last = prim_slice(iota_like(t, d + 1, c), 0, d, d + 1, 1, c.op, c.loc);
  return to(prim_reshape(last, {}, c.op, c.loc), dt, c);
}

// ------------------------------------------------------------------ builders
Tensor bin(PrimOp op, const Tensor& a, const Tensor& b, const Ctx& c) {
  auto shape = broadcast_shape(a.shape(), b.shape(), c);
  return prim_binary(op, broadcast_to(a, shape, c), broadcast_to(b, shape, c), c.op, c.loc);
}

Tensor bin(PrimOp op, const Tensor& a, double b, const Ctx& c) {
  return bin(op, a, scalar_like(a, b, a.dtype(), c), c);
}

Tensor un(PrimOp op, const Tensor& x, const Ctx& c) { return prim_unary(op, x, c.op, c.loc); }

Tensor add_(const Tensor& a, const Tensor& b, const Ctx& c) { return bin(PrimOp::Add, a, b, c); }
Tensor add_(const Tensor& a, double b, const Ctx& c) { return bin(PrimOp::Add, a, b, c); }
Tensor mul_(const Tensor& a, const Tensor& b, const Ctx& c) { return bin(PrimOp::Mul, a, b, c); }
Tensor mul_(const Tensor& a, double b, const Ctx& c) { return bin(PrimOp::Mul, a, b, c); }

Tensor neg_(const Tensor& x, const Ctx& c) {
  if (x.dtype() == f32) return un(PrimOp::Neg, x, c);
  return mul_(x, -1.0, c);  // i32: neg is a float primitive
}

Tensor sub_(const Tensor& a, const Tensor& b, const Ctx& c) { return add_(a, neg_(b, c), c); }
Tensor sub_(const Tensor& a, double b, const Ctx& c) { return add_(a, -b, c); }
Tensor sub_(double a, const Tensor& b, const Ctx& c) { return add_(neg_(b, c), a, c); }

Tensor div_(const Tensor& a, const Tensor& b, const Ctx& c) { return mul_(a, un(PrimOp::Recip, b, c), c); }

Tensor max_(const Tensor& a, const Tensor& b, const Ctx& c) { return bin(PrimOp::Max, a, b, c); }
Tensor min_(const Tensor& a, const Tensor& b, const Ctx& c) {
  return neg_(max_(neg_(a, c), neg_(b, c), c), c);
}

Tensor lt_(const Tensor& a, const Tensor& b, const Ctx& c) { return bin(PrimOp::LessThan, a, b, c); }
Tensor lt_(const Tensor& a, double b, const Ctx& c) { return bin(PrimOp::LessThan, a, b, c); }
Tensor gt_(const Tensor& a, double b, const Ctx& c) {
  return bin(PrimOp::LessThan, scalar_like(a, b, a.dtype(), c), a, c);
}
Tensor eq_(const Tensor& a, const Tensor& b, const Ctx& c) { return bin(PrimOp::Equal, a, b, c); }
Tensor eq_(const Tensor& a, double b, const Ctx& c) { return bin(PrimOp::Equal, a, b, c); }

Tensor not_(const Tensor& x, const Ctx& c) { return eq_(x, 0.0, c); }

Tensor where_(const Tensor& cond, const Tensor& a, const Tensor& b, const Ctx& c) {
  auto shape = broadcast_shape(broadcast_shape(cond.shape(), a.shape(), c), b.shape(), c);
  return prim_where(broadcast_to(cond, shape, c), broadcast_to(a, shape, c), broadcast_to(b, shape, c), c.op,
                    c.loc);
}
Tensor where_(const Tensor& cond, const Tensor& a, double b, const Ctx& c) {
  return where_(cond, a, scalar_like(a, b, a.dtype(), c), c);
}
Tensor where_(const Tensor& cond, double a, const Tensor& b, const Ctx& c) {
  return where_(cond, scalar_like(b, a, b.dtype(), c), b, c);
}

Tensor and_(const Tensor& a, const Tensor& b, const Ctx& c) { return where_(a, b, 0.0, c); }
Tensor or_(const Tensor& a, const Tensor& b, const Ctx& c) { return where_(a, 1.0, b, c); }

Tensor reshape_(const Tensor& x, const std::vector<Dim>& shape, const Ctx& c) {
  const auto& s = x.shape();
  if (s.size() == shape.size() && std::equal(s.begin(), s.end(), shape.begin(),
                                             [](const Dim& p, const Dim& q) { return p.same_as(q); })) {
    return x;
  }
  return prim_reshape(x, shape, c.op, c.loc);
}

Tensor permute_(const Tensor& x, const std::vector<int>& perm, const Ctx& c) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int>(i);
  return identity ? x : prim_permute(x, perm, c.op, c.loc);
}

Tensor move_to_last(const Tensor& x, int axis, const Ctx& c) {
  std::vector<int> perm;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != axis) perm.push_back(i);
  }
  perm.push_back(axis);
  return permute_(x, perm, c);
}

Tensor move_from_last(const Tensor& x, int axis, const Ctx& c) {
  int r = static_cast<int>(x.rank());
  std::vector<int> perm;
  for (int i = 0; i < r; ++i) perm.push_back(i < axis ? i : i == axis ? r - 1 : i - 1);
  return permute_(x, perm, c);
}

Tensor slice_(const Tensor& x, int axis, const Dim& start, const Dim& end, int64_t step, const Ctx& c) {
  return prim_slice(x, axis, start, end, step, c.op, c.loc);
}

// ------------------------------------------------------------------ reductions
namespace {
Tensor reduce_with(PrimOp op, const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c) {
  Tensor t = x;
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) t = prim_reduce(op, t, *it, c.op, c.loc);
  if (keepdim && !axes.empty()) t = prim_reshape(t, with_ones(x.shape(), axes), c.op, c.loc);
  return t;
}
}  // namespace

Tensor reduce_sum(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c) {
  return reduce_with(PrimOp::SumReduce, x, axes, keepdim, c);
}
Tensor reduce_max(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c) {
  return reduce_with(PrimOp::MaxReduce, x, axes, keepdim, c);
}
Tensor reduce_min(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c) {
  return neg_(reduce_max(neg_(x, c), axes, keepdim, c), c);
}
Tensor reduce_mean(const Tensor& x, const std::vector<int>& axes, bool keepdim, const Ctx& c) {
  Tensor s = reduce_sum(x, axes, keepdim, c);
  Dim n(1);
  for (int a : axes) n = n * x.shape()[static_cast<size_t>(a)];
  if (auto v = n.as_constant(); v && *v > 0) return mul_(s, 1.0 / static_cast<double>(*v), c);
  return div_(s, dim_value(x, n, f32, c), c);
}

// ------------------------------------------------------------------ f32 math
Tensor exp_f(const Tensor& x, const Ctx& c) { return un(PrimOp::Exp2, mul_(x, std::numbers::log2e, c), c); }

Tensor log_f(const Tensor& x, const Ctx& c) { return mul_(un(PrimOp::Log2, x, c), std::numbers::ln2, c); }

Tensor sigmoid_f(const Tensor& x, const Ctx& c) {
  // 1 / (1 + e^-x): e^-x overflows to inf for very negative x and the result is 0.
  Tensor e = un(PrimOp::Exp2, mul_(x, -std::numbers::log2e, c), c);
  return un(PrimOp::Recip, add_(e, 1.0, c), c);
}

Tensor tanh_f(const Tensor& x, const Ctx& c) {
  // A primitive, not a composition: as sign(x) (1 - e) / (1 + e) with e = exp(-2|x|) and a
  // Taylor polynomial below |x| = 1/2 (where 1 - e cancels), it was ~35 primitives -- a
  // third of a 10-op chain's work -- where the backends' lm_tanh (3 ulp, docs/ops.md) is
  // one call (37 PTX instructions) and fast math's 16 and two special-function ops.
  return un(PrimOp::Tanh, x, c);
}

Tensor cos_abs_f(const Tensor& x, const Ctx& c) {
  // 1 - 2 sin^2(x/2): x/2 is exact, so the absolute error stays ~1e-7 at any |x|; relative
  // accuracy is lost next to the zeros of cos (cos_f keeps it, at ~25 more ops).
  Tensor h = un(PrimOp::Sin, mul_(x, 0.5, c), c);
  return sub_(1.0, mul_(mul_(h, h, c), 2.0, c), c);
}

Tensor cos_f(const Tensor& x, const Ctx& c) {
  // cos x = cos a = -(-1)^f sin(y), a = |x|, y = a - m pi/2, m = 2f + 1, f = floor(a / pi):
  // y is the distance to the nearest zero of cos, taken in four exact steps (Cody-Waite:
  // pi/2 = A + B + C + D, A..C of 11 bits so m A, m B, m C are exact for m < 2^13), so the
  // result keeps its relative accuracy next to the zeros, where 1 - 2 sin^2(x/2) lost it
  // all (166000 ulp at x = 1.5708). Beyond a = 8192 (m >= 2^13) the products are no longer
  // exact and 1 - 2 sin^2(x/2) (x/2 exact, absolute error ~1e-7) takes over. One Sin serves
  // both (its argument is selected): cos sits in RoPE, inside attention kernels.
  constexpr double A = 1.5703125, B = 0.0004837512969970703, C = 7.549533620476723e-08,
                   D = 2.5633440682570896e-12;
  Tensor a = where_(lt_(x, 0.0, c), neg_(x, c), x, c);
  Tensor fi = to(mul_(a, 1.0 / std::numbers::pi, c), DType::i32, c);  // floor: a >= 0
  Tensor m = add_(mul_(to(fi, DType::f32, c), 2.0, c), 1.0, c);
  Tensor y = sub_(a, mul_(m, A, c), c);
  y = sub_(y, mul_(m, B, c), c);
  y = sub_(y, mul_(m, C, c), c);
  y = sub_(y, mul_(m, D, c), c);
  Tensor near_range = lt_(a, 8192.0, c);
  Tensor s = un(PrimOp::Sin, where_(near_range, y, mul_(x, 0.5, c), c), c);
  Tensor even = eq_(bin(PrimOp::Mod, fi, 2.0, c), 0.0, c);
  Tensor near = where_(even, neg_(s, c), s, c);
  Tensor far = sub_(1.0, mul_(mul_(s, s, c), 2.0, c), c);
  return where_(near_range, near, far, c);
}

Tensor erfc_abs_f(const Tensor& x, const Ctx& c) {
  // erfc(z), z = |x|, by the Chebyshev-fitted form t exp(-z^2 + P(t)), t = 1/(1 + z/2)
  // (Numerical Recipes "erfcc"): relative error < 1.2e-7 for every z >= 0.
  static constexpr double coef[] = {-1.26551223, 1.00002368,  0.37409196, 0.09678418,  -0.18628806,
                                    0.27886807,  -1.13520398, 1.48851587, -0.82215223, 0.17087277};
  Tensor z = where_(lt_(x, 0.0, c), neg_(x, c), x, c);
  Tensor t = un(PrimOp::Recip, add_(mul_(z, 0.5, c), 1.0, c), c);
  Tensor p = scalar_like(x, coef[9], f32, c);
  for (int i = 8; i >= 0; --i) p = add_(mul_(t, p, c), coef[i], c);
  Tensor arg = sub_(p, mul_(z, z, c), c);
  return mul_(t, exp_f(arg, c), c);
}

Tensor matmul_(const Tensor& a0, const Tensor& b0, const Ctx& c) {
  if (a0.rank() == 0 || b0.rank() == 0) {
    raise<ShapeError>(c, "lhs " + shape_string(a0.shape()) + " and rhs " + shape_string(b0.shape()) +
                             ": both operands need at least one dim");
  }
  const bool a_vec = a0.rank() == 1, b_vec = b0.rank() == 1;
  Tensor a = a_vec ? prim_reshape(a0, {Dim(1), a0.shape()[0]}, c.op, c.loc) : a0;
  Tensor b = b_vec ? prim_reshape(b0, {b0.shape()[0], Dim(1)}, c.op, c.loc) : b0;
  const auto& as = a.shape();
  const auto& bs = b.shape();
  const Dim M = as[as.size() - 2], K = as[as.size() - 1];
  const Dim Kb = bs[bs.size() - 2], N = bs[bs.size() - 1];
  if (dims_provably_different(K, Kb)) {
    raise<ShapeError>(c, "lhs " + shape_string(a0.shape()) + " and rhs " + shape_string(b0.shape()) +
                             ": inner dims differ (" + K.to_string() + " vs " + Kb.to_string() + ")");
  }
  std::vector<Dim> abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  std::vector<Dim> batch = broadcast_shape(abatch, bbatch, c, "batch dims of");
  // a [..., M, K] -> [..., M, 1, K]; b [..., K, N] -> [..., 1, N, K]; multiply and sum
  // over the trailing K axis.
  std::vector<Dim> full = batch;
  full.insert(full.end(), {M, N, K});
  std::vector<Dim> a4 = abatch;
  a4.insert(a4.end(), {M, Dim(1), K});
  Tensor ae = broadcast_to(prim_reshape(a, a4, c.op, c.loc), full, c);
  std::vector<int> perm;
  for (size_t i = 0; i < bbatch.size(); ++i) perm.push_back(static_cast<int>(i));
  perm.push_back(static_cast<int>(bbatch.size() + 1));
  perm.push_back(static_cast<int>(bbatch.size()));
  Tensor bt = prim_permute(b, perm, c.op, c.loc);
  std::vector<Dim> b4 = bbatch;
  b4.insert(b4.end(), {Dim(1), N, K});
  Tensor be = broadcast_to(prim_reshape(bt, b4, c.op, c.loc), full, c);
  Tensor out = prim_reduce(PrimOp::SumReduce, prim_binary(PrimOp::Mul, ae, be, c.op, c.loc),
                           static_cast<int>(full.size() - 1), c.op, c.loc);
  // out: batch + [M, N]; drop the dims that 1-D operands introduced.
  std::vector<Dim> final_shape = batch;
  if (!a_vec) final_shape.push_back(M);
  if (!b_vec) final_shape.push_back(N);
  return (a_vec || b_vec) ? prim_reshape(out, final_shape, c.op, c.loc) : out;
}

Tensor softmax_f(const Tensor& x, int axis, const Ctx& c) {
  Tensor m = reduce_max(x, {axis}, true, c);
  Tensor e = exp_f(sub_(x, m, c), c);
  return div_(e, reduce_sum(e, {axis}, true, c), c);
}

Tensor concat_(const std::vector<Tensor>& xs, int axis, const Ctx& c) {
  if (xs.size() == 1) return xs[0];
  Dim total(0);
  for (const auto& t : xs) total = total + t.shape()[static_cast<size_t>(axis)];
  // Each piece is padded to the full length at its offset, and the pieces are summed (or
  // or-ed for booleans): exactly one piece is non-padding at every index. The padding is
  // -0, the one value adding which changes nothing (x + -0 = x for every x, -0 and NaN
  // included; x + +0 turns a piece's -0 into +0, where torch.cat copies it).
  Tensor acc;
  Dim offset(0);
  for (const auto& t : xs) {
    const Dim n = t.shape()[static_cast<size_t>(axis)];
    Tensor p = prim_pad(t, axis, offset, total - offset - n, is_float(t.dtype()) ? -0.0 : 0.0, c.op, c.loc);
    offset = offset + n;
    if (!acc.valid()) {
      acc = p;
    } else {
      acc = t.dtype() == boolean ? or_(acc, p, c) : add_(acc, p, c);
    }
  }
  return acc;
}

}  // namespace luminal::detail
