// Network ops: softmax, log_softmax, layer_norm, rms_norm, embedding, rope, attention,
// conv1d/conv2d and 2-D pooling. All float math runs in f32 and rounds once at the end.
#include <cmath>
#include <limits>
#include <numbers>

#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

void need_float(const Tensor& x, const Ctx& c, std::string_view role = "x") {
  need(x, c, role);
  if (!is_float(x.dtype())) {
    raise<DTypeError>(c,
                      std::string(role) + " must be floating-point, got " + describe(x) + " (cast it first)");
  }
}

/// A per-feature vector ([D]) that must match the last dim of x.
void need_feature_vector(const Tensor& v, const Tensor& x, const Ctx& c, std::string_view role) {
  need_float(v, c, role);
  const Dim d = x.shape().back();
  if (v.rank() != 1 || dims_provably_different(v.shape()[0], d)) {
    raise<ShapeError>(c, std::string(role) + " " + shape_string(v.shape()) + " must be (" + d.to_string() +
                             ") to match x " + shape_string(x.shape()));
  }
}

Tensor transpose_last2(const Tensor& t, const Ctx& c) {
  std::vector<int> perm;
  int r = static_cast<int>(t.rank());
  for (int i = 0; i < r - 2; ++i) perm.push_back(i);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return prim_permute(t, perm, c.op, c.loc);
}

std::string pair_string(std::array<int, 2> p) {
  std::string s = "{";  // appended piecewise: GCC 12 warns (-Wrestrict) on "{" + std::string
  s += std::to_string(p[0]);
  s += ", ";
  s += std::to_string(p[1]);
  s += "}";
  return s;
}

/// [C, H, W] -> [1, C, H, W]; rank 4 unchanged; anything else is a ShapeError.
Tensor batched_image(const Tensor& x, const Ctx& c) {
  if (x.rank() == 4) return x;
  if (x.rank() == 3) {
    std::vector<Dim> s = x.shape();
    s.insert(s.begin(), Dim(1));
    return prim_reshape(x, s, c.op, c.loc);
  }
  raise<ShapeError>(c, "input must be [N, C, H, W] or [C, H, W], got " + describe(x));
}

/// Output length of a sliding window; ShapeError when the window does not fit.
Dim window_out(const Dim& in, int k_eff, int pad, int stride, const Tensor& x, const Ctx& c,
               std::string_view what) {
  Dim span = in + Dim(2 * pad) - Dim(k_eff);
  if (span.upper_bound() < 0) {
    raise<ShapeError>(c, std::string(what) + " (effective size " + std::to_string(k_eff) +
                             ") is larger than the padded input " + shape_string(x.shape()) + " + 2*" +
                             std::to_string(pad));
  }
  return span / Dim(stride) + Dim(1);
}

/// The window element at offset (kh, kw) of every output position: [N, C, Ho, Wo].
Tensor window_tap(const Tensor& xp, int kh, int kw, std::array<int, 2> stride, std::array<int, 2> dil,
                  const Dim& Ho, const Dim& Wo, const Ctx& c) {
  Dim h0(static_cast<int64_t>(kh) * dil[0]), w0(static_cast<int64_t>(kw) * dil[1]);
  Tensor t = slice_(xp, 2, h0, h0 + (Ho - 1) * Dim(stride[0]) + 1, stride[0], c);
  return slice_(t, 3, w0, w0 + (Wo - 1) * Dim(stride[1]) + 1, stride[1], c);
}

Tensor conv2d_impl(const Tensor& x0, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
                   std::array<int, 2> padding, std::array<int, 2> dilation, int groups, const Ctx& c) {
  need(x0, c, "input");
  need(w, c, "weight");
  DType r = promote(x0.dtype(), w.dtype());
  if (b.valid()) r = promote(r, b.dtype());
  if (!is_float(r))
    raise<DTypeError>(c,
                      "needs floating-point input and weight, got " + describe(x0) + " and " + describe(w));
  const bool unbatched = x0.rank() == 3;
  Tensor x = batched_image(x0, c);
  if (w.rank() != 4) raise<ShapeError>(c, "weight must be [out, in/groups, kH, kW], got " + describe(w));
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1) raise<ShapeError>(c, "stride " + pair_string(stride) + " must be >= 1");
    if (dilation[i] < 1) raise<ShapeError>(c, "dilation " + pair_string(dilation) + " must be >= 1");
    if (padding[i] < 0) raise<ShapeError>(c, "padding " + pair_string(padding) + " must be >= 0");
  }
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  auto KH = ws[2].as_constant(), KW = ws[3].as_constant(), O = ws[0].as_constant();
  if (!KH || !KW || !O)
    raise<ShapeError>(c, "weight " + shape_string(ws) + " must have constant out and kernel dims");
  if (groups < 1) raise<ShapeError>(c, "groups must be >= 1, got " + std::to_string(groups));
  const Dim C = xs[1];
  if (*O % groups != 0) {
    raise<ShapeError>(c, "groups " + std::to_string(groups) + " does not divide out channels " +
                             std::to_string(*O) + " of weight " + shape_string(ws));
  }
  if (auto cc = C.as_constant(); cc && *cc % groups != 0) {
    raise<ShapeError>(c, "groups " + std::to_string(groups) + " does not divide in channels " +
                             std::to_string(*cc) + " of input " + shape_string(x0.shape()));
  }
  if (dims_provably_different(ws[1] * Dim(groups), C)) {
    raise<ShapeError>(c, "input " + shape_string(x0.shape()) + " has " + C.to_string() +
                             " channels but weight " + shape_string(ws) + " expects " + ws[1].to_string() +
                             " x groups " + std::to_string(groups));
  }
  if (b.valid() && (b.rank() != 1 || dims_provably_different(b.shape()[0], ws[0]))) {
    raise<ShapeError>(c, "bias " + shape_string(b.shape()) + " must be (" + ws[0].to_string() + ")");
  }
  const int kh_n = static_cast<int>(*KH), kw_n = static_cast<int>(*KW);
  const Dim Ho =
      window_out(xs[2], dilation[0] * (kh_n - 1) + 1, padding[0], stride[0], x, c, "kernel height");
  const Dim Wo = window_out(xs[3], dilation[1] * (kw_n - 1) + 1, padding[1], stride[1], x, c, "kernel width");

  DType comp = compute_dtype(r);
  Tensor xc = to(x, comp, c);
  if (padding[0] > 0) xc = prim_pad(xc, 2, Dim(padding[0]), Dim(padding[0]), 0.0, c.op, c.loc);
  if (padding[1] > 0) xc = prim_pad(xc, 3, Dim(padding[1]), Dim(padding[1]), 0.0, c.op, c.loc);
  // im2col: one strided view per kernel tap, stacked on a new axis in (kh, kw) order so
  // that [C, kH*kW] lines up with the weight's [in, kH, kW] layout.
  const Dim N = xs[0];
  std::vector<Tensor> taps;
  for (int kh = 0; kh < kh_n; ++kh) {
    for (int kw = 0; kw < kw_n; ++kw) {
      Tensor t = window_tap(xc, kh, kw, stride, dilation, Ho, Wo, c);
      taps.push_back(prim_reshape(t, {N, C, Dim(1), Ho, Wo}, c.op, c.loc));
    }
  }
  const Dim KK(static_cast<int64_t>(kh_n) * kw_n);
  const Dim G(groups), Cg = ws[1], Og(*O / groups);
  Tensor cols = concat_(taps, 2, c);  // [N, C, KK, Ho, Wo]
  cols = prim_reshape(cols, {N, G, Cg * KK, Ho * Wo}, c.op, c.loc);
  Tensor wm = prim_reshape(to(w, comp, c), {G, Og, Cg * KK}, c.op, c.loc);
  Tensor y = matmul_(wm, cols, c);  // [N, G, Og, Ho*Wo]
  y = prim_reshape(y, {N, ws[0], Ho, Wo}, c.op, c.loc);
  if (b.valid()) y = add_(y, prim_reshape(to(b, comp, c), {Dim(1), ws[0], Dim(1), Dim(1)}, c.op, c.loc), c);
  if (unbatched) y = prim_reshape(y, {ws[0], Ho, Wo}, c.op, c.loc);
  return to(y, r, c);
}

Tensor pool2d(const Tensor& x0, std::array<int, 2> kernel, std::array<int, 2> stride,
              std::array<int, 2> padding, bool is_max, const Ctx& c) {
  need_float(x0, c, "input");
  const bool unbatched = x0.rank() == 3;
  Tensor x = batched_image(x0, c);
  for (int i = 0; i < 2; ++i) {
    if (stride[i] == 0) stride[i] = kernel[i];
    if (kernel[i] < 1) raise<ShapeError>(c, "kernel " + pair_string(kernel) + " must be >= 1");
    if (stride[i] < 1) raise<ShapeError>(c, "stride " + pair_string(stride) + " must be >= 1");
    if (padding[i] < 0 || 2 * padding[i] > kernel[i]) {
      raise<ShapeError>(c, "padding " + pair_string(padding) + " must be >= 0 and at most half the kernel " +
                               pair_string(kernel));
    }
  }
  const auto& xs = x.shape();
  const Dim Ho = window_out(xs[2], kernel[0], padding[0], stride[0], x0, c, "kernel " + pair_string(kernel));
  const Dim Wo = window_out(xs[3], kernel[1], padding[1], stride[1], x0, c, "kernel " + pair_string(kernel));
  Tensor xc = to_f32(x, c);
  const double fill = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  if (padding[0] > 0) xc = prim_pad(xc, 2, Dim(padding[0]), Dim(padding[0]), fill, c.op, c.loc);
  if (padding[1] > 0) xc = prim_pad(xc, 3, Dim(padding[1]), Dim(padding[1]), fill, c.op, c.loc);
  Tensor acc;
  for (int kh = 0; kh < kernel[0]; ++kh) {
    for (int kw = 0; kw < kernel[1]; ++kw) {
      Tensor t = window_tap(xc, kh, kw, stride, {1, 1}, Ho, Wo, c);
      acc = !acc.valid() ? t : is_max ? max_(acc, t, c) : add_(acc, t, c);
    }
  }
  if (!is_max) acc = mul_(acc, 1.0 / (static_cast<double>(kernel[0]) * kernel[1]), c);
  if (unbatched) acc = prim_reshape(acc, {xs[1], Ho, Wo}, c.op, c.loc);
  return to(acc, x0.dtype(), c);
}

}  // namespace

Tensor softmax(const Tensor& x, int axis, Loc loc) {
  Ctx c{"softmax", loc};
  need_float(x, c);
  int ax = norm_axis(axis, x.rank(), x, c);
  return to(softmax_f(to_f32(x, c), ax, c), x.dtype(), c);
}

Tensor log_softmax(const Tensor& x, int axis, Loc loc) {
  Ctx c{"log_softmax", loc};
  need_float(x, c);
  int ax = norm_axis(axis, x.rank(), x, c);
  Tensor t = to_f32(x, c);
  Tensor s = sub_(t, reduce_max(t, {ax}, true, c), c);
  Tensor lse = log_f(reduce_sum(exp_f(s, c), {ax}, true, c), c);
  return to(sub_(s, lse, c), x.dtype(), c);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Loc loc) {
  Ctx c{"layer_norm", loc};
  need_float(x, c);
  if (x.rank() == 0) raise<ShapeError>(c, "x must have at least one dim, got " + describe(x));
  if (weight.valid()) need_feature_vector(weight, x, c, "weight");
  if (bias.valid()) need_feature_vector(bias, x, c, "bias");
  const int last = static_cast<int>(x.rank() - 1);
  Tensor t = to_f32(x, c);
  Tensor d = sub_(t, reduce_mean(t, {last}, true, c), c);
  Tensor v = reduce_mean(mul_(d, d, c), {last}, true, c);
  Tensor y = mul_(d, un(PrimOp::Recip, un(PrimOp::Sqrt, add_(v, static_cast<double>(eps), c), c), c), c);
  if (weight.valid()) y = mul_(y, to_f32(weight, c), c);
  if (bias.valid()) y = add_(y, to_f32(bias, c), c);
  return to(y, x.dtype(), c);
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps, Loc loc) {
  Ctx c{"rms_norm", loc};
  need_float(x, c);
  if (x.rank() == 0) raise<ShapeError>(c, "x must have at least one dim, got " + describe(x));
  if (weight.valid()) need_feature_vector(weight, x, c, "weight");
  const int last = static_cast<int>(x.rank() - 1);
  Tensor t = to_f32(x, c);
  Tensor ms = reduce_mean(mul_(t, t, c), {last}, true, c);
  Tensor y = mul_(t, un(PrimOp::Recip, un(PrimOp::Sqrt, add_(ms, static_cast<double>(eps), c), c), c), c);
  if (weight.valid()) y = mul_(y, to_f32(weight, c), c);
  return to(y, x.dtype(), c);
}

Tensor embedding(const Tensor& table, const Tensor& ids, Loc loc) {
  Ctx c{"embedding", loc};
  need(table, c, "table");
  need(ids, c, "ids");
  if (ids.dtype() != i32) raise<DTypeError>(c, "ids must be i32, got " + describe(ids));
  if (table.rank() != 2) raise<ShapeError>(c, "table must be [V, D], got " + describe(table));
  return prim_gather(table, ids, c.op, c.loc);
}

Tensor rope(const Tensor& x, const Tensor& positions, float theta, Loc loc) {
  Ctx c{"rope", loc};
  need_float(x, c);
  need(positions, c, "positions");
  if (x.rank() < 2) raise<ShapeError>(c, "x must be [..., S, D], got " + describe(x));
  if (positions.dtype() != i32) raise<DTypeError>(c, "positions must be i32, got " + describe(positions));
  const Dim S = x.shape()[x.shape().size() - 2], D = x.shape().back();
  if (positions.rank() != 1 || dims_provably_different(positions.shape()[0], S)) {
    raise<ShapeError>(c, "positions " + shape_string(positions.shape()) + " must be (" + S.to_string() +
                             ") to match x " + shape_string(x.shape()));
  }
  auto dv = D.as_constant();
  if (!dv)
    raise<ShapeError>(c,
                      "head dim " + D.to_string() + " of x " + shape_string(x.shape()) + " must be constant");
  if (*dv % 2 != 0) {
    raise<ShapeError>(
        c, "head dim D = " + std::to_string(*dv) + " of x " + shape_string(x.shape()) + " must be even");
  }
  const Dim half(*dv / 2);
  Tensor t = to_f32(x, c);
  // inv_freq[i] = theta^(-2i/D) = exp2(i * (-2 log2(theta) / D)); angles [S, D/2].
  Tensor i = to_f32(iota_like(t, half, c), c);
  Tensor inv = un(PrimOp::Exp2,
                  mul_(i, -2.0 * std::log2(static_cast<double>(theta)) / static_cast<double>(*dv), c), c);
  Tensor pos = prim_reshape(to_f32(positions, c), {S, Dim(1)}, c.op, c.loc);
  Tensor ang = mul_(pos, prim_reshape(inv, {Dim(1), half}, c.op, c.loc), c);
  Tensor cos_h = cos_abs_f(ang, c), sin_h = un(PrimOp::Sin, ang, c);
  Tensor cosv = concat_({cos_h, cos_h}, 1, c), sinv = concat_({sin_h, sin_h}, 1, c);  // [S, D]
  const int last = static_cast<int>(t.rank() - 1);
  Tensor x1 = slice_(t, last, Dim(0), half, 1, c), x2 = slice_(t, last, half, D, 1, c);
  Tensor rot = concat_({neg_(x2, c), x1}, last, c);
  return to(add_(mul_(t, cosv, c), mul_(rot, sinv, c), c), x.dtype(), c);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Loc loc) {
  Ctx c{"scaled_dot_product_attention", loc};
  need_float(q, c, "q");
  need_float(k, c, "k");
  need_float(v, c, "v");
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2) {
    raise<ShapeError>(c, "q, k, v must be [..., S, D]; got q " + shape_string(q.shape()) + ", k " +
                             shape_string(k.shape()) + ", v " + shape_string(v.shape()));
  }
  const Dim Sq = q.shape()[q.shape().size() - 2], D = q.shape().back();
  const Dim Sk = k.shape()[k.shape().size() - 2];
  if (dims_provably_different(k.shape().back(), D)) {
    raise<ShapeError>(c, "q " + shape_string(q.shape()) + " and k " + shape_string(k.shape()) +
                             ": head dims differ (" + D.to_string() + " vs " + k.shape().back().to_string() +
                             ")");
  }
  if (dims_provably_different(v.shape()[v.shape().size() - 2], Sk)) {
    raise<ShapeError>(c, "k " + shape_string(k.shape()) + " and v " + shape_string(v.shape()) +
                             ": sequence lengths differ");
  }
  DType r = promote(promote(q.dtype(), k.dtype()), v.dtype());
  Tensor qf = to_f32(q, c), kf = to_f32(k, c), vf = to_f32(v, c);
  Tensor scores = matmul_(qf, transpose_last2(kf, c), c);
  if (auto dv = D.as_constant()) {
    scores = mul_(scores, 1.0 / std::sqrt(static_cast<double>(*dv)), c);
  } else {
    scores = mul_(scores, un(PrimOp::Recip, un(PrimOp::Sqrt, dim_value(qf, D, f32, c), c), c), c);
  }
  if (causal) {
    // Bottom-right aligned: query i sees keys j <= i + (Sk - Sq).
    Tensor allowed = tril_like(qf, Sq, Sk, Sk - Sq, c);
    scores = where_(allowed, scores, -std::numeric_limits<double>::infinity(), c);
  }
  const int last = static_cast<int>(scores.rank() - 1);
  return to(matmul_(softmax_f(scores, last, c), vf, c), r, c);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding, int dilation,
              int groups, Loc loc) {
  Ctx c{"conv1d", loc};
  need(x, c, "input");
  need(w, c, "weight");
  // A 1-D convolution is a 2-D one over a height-1 image.
  if (x.rank() != 3 && x.rank() != 2)
    raise<ShapeError>(c, "input must be [N, C, L] or [C, L], got " + describe(x));
  if (w.rank() != 3) raise<ShapeError>(c, "weight must be [out, in/groups, k], got " + describe(w));
  std::vector<Dim> xs = x.shape(), ws = w.shape();
  xs.insert(xs.end() - 1, Dim(1));
  ws.insert(ws.end() - 1, Dim(1));
  Tensor y = conv2d_impl(prim_reshape(x, xs, c.op, c.loc), prim_reshape(w, ws, c.op, c.loc), b, {1, stride},
                         {0, padding}, {1, dilation}, groups, c);
  std::vector<Dim> ys = y.shape();
  ys.erase(ys.end() - 2);
  return prim_reshape(y, ys, c.op, c.loc);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
              std::array<int, 2> padding, std::array<int, 2> dilation, int groups, Loc loc) {
  Ctx c{"conv2d", loc};
  return conv2d_impl(x, w, b, stride, padding, dilation, groups, c);
}

Tensor max_pool2d(const Tensor& x, std::array<int, 2> kernel, std::array<int, 2> stride,
                  std::array<int, 2> padding, Loc loc) {
  Ctx c{"max_pool2d", loc};
  return pool2d(x, kernel, stride, padding, true, c);
}

Tensor avg_pool2d(const Tensor& x, std::array<int, 2> kernel, std::array<int, 2> stride,
                  std::array<int, 2> padding, Loc loc) {
  Ctx c{"avg_pool2d", loc};
  return pool2d(x, kernel, stride, padding, false, c);
}

}  // namespace luminal
