// Creation and type ops: constant full zeros_like ones_like arange tril_mask cast.
#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

void check_shape(const std::vector<Dim>& shape, const Ctx& c) {
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].upper_bound() < 0) {
      raise<ShapeError>(c,
                        "shape " + shape_string(shape) + " has a negative dim at axis " + std::to_string(i));
    }
  }
}

/// A constant of any dtype: f16/bf16 are made in f32 and cast, so rounding is a node.
Tensor make_constant(Graph& g, double value, const std::vector<Dim>& shape, DType dt, const Ctx& c) {
  check_shape(shape, c);
  Tensor s = prim_constant(g, value, compute_dtype(dt), c.op, c.loc);
  return to(broadcast_to(s, shape, c), dt, c);
}

Tensor tril_in(Graph& g, const Dim& n, const Dim& m, const Dim& offset, const Ctx& c) {
  // true where j <= i + offset, i.e. j < i + offset + 1, in i32.
  Tensor i = prim_reshape(prim_iota(g, n, c.op, c.loc), {n, Dim(1)}, c.op, c.loc);
  Tensor j = prim_reshape(prim_iota(g, m, c.op, c.loc), {Dim(1), m}, c.op, c.loc);
  const Dim lim = offset + 1;
  Tensor bound = lim.is_constant() ? add_(i, static_cast<double>(*lim.as_constant()), c)
                                   : add_(i, dim_value(i, lim, i32, c), c);
  return lt_(j, bound, c);
}

}  // namespace

namespace detail {
Tensor tril_like(const Tensor& t, const Dim& n, const Dim& m, const Dim& offset, const Ctx& c) {
  Graph g = graph_of(t, c);
  return tril_in(g, n, m, offset, c);
}
}  // namespace detail

Tensor constant(float value, const std::vector<Dim>& shape, DType dtype, Loc loc) {
  Ctx c{"constant", loc};
  Graph g = current_graph(c);
  return make_constant(g, static_cast<double>(value), shape, dtype, c);
}

Tensor full(const std::vector<Dim>& shape, float value, DType dtype, Loc loc) {
  Ctx c{"full", loc};
  Graph g = current_graph(c);
  return make_constant(g, static_cast<double>(value), shape, dtype, c);
}

Tensor zeros_like(const Tensor& x, Loc loc) {
  Ctx c{"zeros_like", loc};
  Graph g = graph_of(x, c);
  return make_constant(g, 0.0, x.shape(), x.dtype(), c);
}

Tensor ones_like(const Tensor& x, Loc loc) {
  Ctx c{"ones_like", loc};
  Graph g = graph_of(x, c);
  return make_constant(g, 1.0, x.shape(), x.dtype(), c);
}

Tensor arange(Dim n, Loc loc) {
  Ctx c{"arange", loc};
  if (n.upper_bound() < 0) raise<ShapeError>(c, "length " + n.to_string() + " is negative");
  Graph g = current_graph(c);
  return prim_iota(g, n, c.op, c.loc);
}

Tensor tril_mask(Dim n, Dim m, Loc loc) {
  Ctx c{"tril_mask", loc};
  if (n.upper_bound() < 0 || m.upper_bound() < 0) {
    raise<ShapeError>(c, "sizes " + n.to_string() + " x " + m.to_string() + " must be >= 0");
  }
  Graph g = current_graph(c);
  return tril_in(g, n, m, Dim(0), c);
}

Tensor cast(const Tensor& x, DType dtype, Loc loc) {
  Ctx c{"cast", loc};
  need(x, c, "x");
  return to(x, dtype, c);
}

}  // namespace luminal
