// Linear algebra: matmul (NumPy rules) and linear, built as sum(mul(expand a, expand b)).
#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

/// Common compute dtype of two matmul operands: numbers only, f16/bf16 -> f32.
DType matmul_dtype(const Tensor& a, const Tensor& b, const Ctx& c) {
  need(a, c, "lhs");
  need(b, c, "rhs");
  DType r = promote(a.dtype(), b.dtype());
  if (r == boolean) {
    raise<DTypeError>(c,
                      "lhs " + describe(a) + " and rhs " + describe(b) + ": bool operands need a cast first");
  }
  return r;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Loc loc) {
  Ctx c{"matmul", loc};
  DType r = matmul_dtype(a, b, c);
  DType comp = compute_dtype(r);
  return to(matmul_(to(a, comp, c), to(b, comp, c), c), r, c);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, Loc loc) {
  Ctx c{"linear", loc};
  DType r = matmul_dtype(x, w, c);
  if (w.rank() != 2) raise<ShapeError>(c, "weight must be [out, in], got " + describe(w));
  if (x.rank() == 0) raise<ShapeError>(c, "x must have at least one dim, got " + describe(x));
  const Dim in = w.shape()[1];
  if (dims_provably_different(x.shape().back(), in)) {
    raise<ShapeError>(c, "x " + shape_string(x.shape()) + " and weight " + shape_string(w.shape()) +
                             ": in features differ (" + x.shape().back().to_string() + " vs " +
                             in.to_string() + ")");
  }
  if (b.valid()) {
    r = promote(r, b.dtype());
    if (b.rank() > 1 ||
        (b.rank() == 1 && dims_provably_different(b.shape()[0], w.shape()[0]) && !is_one(b.shape()[0]))) {
      raise<ShapeError>(c, "bias " + shape_string(b.shape()) + " does not match weight " +
                               shape_string(w.shape()) + " (expected (" + w.shape()[0].to_string() + "))");
    }
  }
  DType comp = compute_dtype(r);
  Tensor y = matmul_(to(x, comp, c), prim_permute(to(w, comp, c), {1, 0}, c.op, c.loc), c);
  if (b.valid()) y = add_(y, to(b, comp, c), c);
  return to(y, r, c);
}

}  // namespace luminal
