// The primitive constructors: operand checks, shape/dtype inference, guards for the dim
// equalities that can only be decided at call time.
#include "graph/primitives.hpp"

#include <algorithm>

#include "graph/diagnostics.hpp"
#include "graph/graph_impl.hpp"

namespace luminal::detail {

std::string accepted_dtypes_text(PrimOp op) {
  std::string names[4];
  int n = 0;
  const uint8_t set = op_info(op).dtypes;
  if (set & kF32) names[n++] = "f32";
  if (set & kI32) names[n++] = "i32";
  if (set & kBool) names[n++] = "bool";
  if (set & kHalf) names[n++] = "f16/bf16";
  std::string s;
  for (int i = 0; i < n; ++i) s += (i == 0 ? "" : i + 1 == n ? " or " : ", ") + names[i];
  return s;
}

bool dims_provably_equal(const Dim& a, const Dim& b) {
  if (a.same_as(b)) return true;
  const Dim d = a - b;
  return d.lower_bound() == 0 && d.upper_bound() == 0;
}

bool dims_provably_different(const Dim& a, const Dim& b) {
  const Dim d = a - b;
  return d.lower_bound() > 0 || d.upper_bound() < 0;
}

namespace {

std::string dt(DType t) { return std::string(dtype_name(t)); }

// The graph the operands share. Operands of a constant-only graph (tensors made by
// constant()/arange() without a graph) are copied into it; any other mix is an error.
std::shared_ptr<GraphImpl> common_graph(std::vector<Tensor*> ts, std::string_view op, const Loc& loc) {
  std::shared_ptr<GraphImpl> g;
  for (Tensor* t : ts) {
    if (!t->valid()) fail<ShapeError>(op, "an operand is a null Tensor", loc);
    if (!g || (g->is_constant_only() && !t->graph_impl()->is_constant_only())) g = t->graph_impl();
  }
  for (Tensor* t : ts) {
    if (t->graph_impl() == g) continue;
    if (!t->graph_impl()->is_constant_only())
      fail<ShapeError>(
          op, "operands belong to another graph: " + shape_string(t->shape()) + " is from a different Graph",
          loc);
    *t = Tensor(g, import_node(*g, *t->graph_impl(), t->node()));
  }
  return g;
}

Tensor add_node(const std::shared_ptr<GraphImpl>& g, Node n, std::string_view name, const Loc& loc) {
  n.op_name = std::string(name);
  n.loc = loc;
  return Tensor(g, g->add(std::move(n)));
}

// Requires a == b: proven -> ok, disproven -> ShapeError(what), else a guard.
void require_equal(GraphImpl& g, const Dim& a, const Dim& b, std::string_view op, const std::string& what,
                   const Loc& loc) {
  if (dims_provably_equal(a, b)) return;
  if (dims_provably_different(a, b)) fail<ShapeError>(op, what, loc);
  g.guards.push_back(
      Guard{a, b, false, "[" + std::string(op) + "] " + what + " (at " + where_string(loc) + ")"});
}

// Requires a <= b likewise.
void require_le(GraphImpl& g, const Dim& a, const Dim& b, std::string_view op, const std::string& what,
                const Loc& loc) {
  const Dim d = b - a;
  if (d.lower_bound() >= 0) return;
  if (d.upper_bound() < 0) fail<ShapeError>(op, what, loc);
  g.guards.push_back(
      Guard{a, b, true, "[" + std::string(op) + "] " + what + " (at " + where_string(loc) + ")"});
}

void require_same_shape(GraphImpl& g, const std::vector<Dim>& a, const std::vector<Dim>& b,
                        std::string_view op, const Loc& loc) {
  if (a.size() != b.size())
    fail<ShapeError>(op, "operand shapes " + shape_string(a) + " and " + shape_string(b) + " differ in rank",
                     loc);
  for (size_t i = 0; i < a.size(); ++i)
    require_equal(g, a[i], b[i], op,
                  "operand shapes " + shape_string(a) + " and " + shape_string(b) + " differ at axis " +
                      std::to_string(i) + ": " + a[i].to_string() + " vs " + b[i].to_string(),
                  loc);
}

void check_axis(int axis, size_t rank, const std::vector<Dim>& shape, std::string_view op, const Loc& loc) {
  if (axis < 0 || static_cast<size_t>(axis) >= rank)
    fail<ShapeError>(op, "axis " + std::to_string(axis) + " is out of range for shape " + shape_string(shape),
                     loc);
}

Dim numel(const std::vector<Dim>& shape) {
  Dim n(1);
  for (const Dim& d : shape) n = n * d;
  return n;
}

}  // namespace

Tensor prim_constant(Graph& g, double value, DType dtype, std::string_view op, Loc loc) {
  Node n;
  n.op = PrimOp::Constant;
  n.dtype = dtype;
  n.value = value;
  return add_node(g.impl(), std::move(n), op, loc);
}

Tensor prim_iota(Graph& g, const Dim& len, std::string_view op, Loc loc) {
  if (len.upper_bound() < 0) fail<ShapeError>(op, "length " + len.to_string() + " is negative", loc);
  Node n;
  n.op = PrimOp::Iota;
  n.dtype = DType::i32;
  n.shape = {len};
  return add_node(g.impl(), std::move(n), op, loc);
}

Tensor prim_unary(PrimOp op, const Tensor& x0, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  if (!is_unary_math(op))
    throw InternalError("[" + std::string(name) + "] prim_unary given " + std::string(prim_name(op)));
  const DType t = x.dtype();
  if (!accepts_dtype(op, t))
    fail<DTypeError>(name,
                     std::string(prim_name(op)) + " needs " + accepted_dtypes_text(op) + ", got " + dt(t) +
                         " " + shape_string(x.shape()),
                     loc);
  Node n;
  n.op = op;
  n.inputs = {x.node()};
  n.shape = x.shape();
  n.dtype = t;
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_binary(PrimOp op, const Tensor& a0, const Tensor& b0, std::string_view name, Loc loc) {
  Tensor a = a0, b = b0;
  auto g = common_graph({&a, &b}, name, loc);
  const DType ta = a.dtype(), tb = b.dtype();
  if (ta != tb)
    fail<DTypeError>(name,
                     std::string(prim_name(op)) + " operands differ in dtype: " + dt(ta) + " " +
                         shape_string(a.shape()) + " and " + dt(tb) + " " + shape_string(b.shape()),
                     loc);
  if (op_info(op).cls != OpClass::Binary)
    throw InternalError("[" + std::string(name) + "] prim_binary given " + std::string(prim_name(op)));
  const bool ok = accepts_dtype(op, ta);
  if (!ok)
    fail<DTypeError>(
        name,
        std::string(prim_name(op)) + " does not accept " + dt(ta) + " operands " + shape_string(a.shape()),
        loc);
  require_same_shape(*g, a.shape(), b.shape(), name, loc);
  Node n;
  n.op = op;
  n.inputs = {a.node(), b.node()};
  n.shape = a.shape();
  n.dtype = result_dtype(op, ta);
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_where(const Tensor& c0, const Tensor& a0, const Tensor& b0, std::string_view name, Loc loc) {
  Tensor c = c0, a = a0, b = b0;
  auto g = common_graph({&c, &a, &b}, name, loc);
  if (c.dtype() != DType::boolean)
    fail<DTypeError>(name, "condition must be bool, got " + dt(c.dtype()) + " " + shape_string(c.shape()),
                     loc);
  if (a.dtype() != b.dtype())
    fail<DTypeError>(name, "branches differ in dtype: " + dt(a.dtype()) + " and " + dt(b.dtype()), loc);
  require_same_shape(*g, c.shape(), a.shape(), name, loc);
  require_same_shape(*g, a.shape(), b.shape(), name, loc);
  Node n;
  n.op = PrimOp::Where;
  n.inputs = {c.node(), a.node(), b.node()};
  n.shape = a.shape();
  n.dtype = a.dtype();
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_cast(const Tensor& x0, DType to, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  Node n;
  n.op = PrimOp::Cast;
  n.inputs = {x.node()};
  n.shape = x.shape();
  n.dtype = to;
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_reduce(PrimOp op, const Tensor& x0, int axis, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  if (op_info(op).cls != OpClass::Reduction)
    throw InternalError("[" + std::string(name) + "] prim_reduce given " + std::string(prim_name(op)));
  const auto& s = x.shape();
  check_axis(axis, s.size(), s, name, loc);
  if (!accepts_dtype(op, x.dtype()))
    fail<DTypeError>(name,
                     std::string(prim_name(op)) + " needs " + accepted_dtypes_text(op) + ", got " +
                         dt(x.dtype()) + " " + shape_string(s),
                     loc);
  Node n;
  n.op = op;
  n.inputs = {x.node()};
  n.shape = s;
  n.shape.erase(n.shape.begin() + axis);
  n.dtype = x.dtype();
  n.axis = axis;
  return add_node(g, std::move(n), name, loc);
}

Dim rank_dim(int64_t world) { return Dim::variable(std::string(kRankDim), 0, std::max<int64_t>(world, 1) - 1); }

Tensor prim_collective(PrimOp op, const Tensor& x0, int axis, int64_t world, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  if (op_info(op).cls != OpClass::Collective)
    throw InternalError("[" + std::string(name) + "] prim_collective given " + std::string(prim_name(op)));
  if (world < 1) fail<ShapeError>(name, "the number of ranks must be >= 1, got " + std::to_string(world), loc);
  if (!accepts_dtype(op, x.dtype()))
    fail<DTypeError>(name,
                     std::string(prim_name(op)) + " needs " + accepted_dtypes_text(op) + ", got " +
                         dt(x.dtype()) + " " + shape_string(x.shape()),
                     loc);
  const auto& s = x.shape();
  Node n;
  n.op = op;
  n.inputs = {x.node()};
  n.shape = s;
  n.dtype = x.dtype();
  n.step = world;
  if (op != PrimOp::AllReduce) {
    check_axis(axis, s.size(), s, name, loc);
    n.axis = axis;
    Dim& d = n.shape[static_cast<size_t>(axis)];
    if (op == PrimOp::AllGather) {
      d = d * Dim(world);
    } else {
      if (d.known_divisor() % world != 0)
        fail<ShapeError>(name,
                         "axis " + std::to_string(axis) + " of " + shape_string(s) + " is not a multiple of the " +
                             std::to_string(world) + " ranks",
                         loc);
      d = d / Dim(world);
    }
  }
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_gather(const Tensor& t0, const Tensor& i0, std::string_view name, Loc loc) {
  Tensor table = t0, ids = i0;
  auto g = common_graph({&table, &ids}, name, loc);
  if (ids.dtype() != DType::i32)
    fail<DTypeError>(name, "ids must be i32, got " + dt(ids.dtype()) + " " + shape_string(ids.shape()), loc);
  if (table.shape().empty()) fail<ShapeError>(name, "the table must have rank >= 1, got a scalar", loc);
  Node n;
  n.op = PrimOp::Gather;
  n.inputs = {table.node(), ids.node()};
  n.shape = ids.shape();
  n.shape.insert(n.shape.end(), table.shape().begin() + 1, table.shape().end());
  n.dtype = table.dtype();
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_reshape(const Tensor& x0, const std::vector<Dim>& shape, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i].upper_bound() < 0)
      fail<ShapeError>(
          name, "target shape " + shape_string(shape) + " has a negative dim at axis " + std::to_string(i),
          loc);
  const Dim from = numel(x.shape()), to = numel(shape);
  require_equal(*g, from, to, name,
                "cannot reshape " + shape_string(x.shape()) + " (" + from.to_string() + " elements) to " +
                    shape_string(shape) + " (" + to.to_string() + " elements)",
                loc);
  Node n;
  n.op = PrimOp::Reshape;
  n.inputs = {x.node()};
  n.shape = shape;
  n.dtype = x.dtype();
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_permute(const Tensor& x0, const std::vector<int>& perm, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  const auto& s = x.shape();
  std::vector<bool> seen(s.size(), false);
  auto perm_text = [&] {
    std::string t = "(";
    for (size_t i = 0; i < perm.size(); ++i) t += (i ? ", " : "") + std::to_string(perm[i]);
    return t + ")";
  };
  if (perm.size() != s.size())
    fail<ShapeError>(name, "permutation " + perm_text() + " does not match the rank of " + shape_string(s),
                     loc);
  for (int p : perm) {
    if (p < 0 || static_cast<size_t>(p) >= s.size() || seen[static_cast<size_t>(p)])
      fail<ShapeError>(
          name, "permutation " + perm_text() + " is not a permutation of the axes of " + shape_string(s),
          loc);
    seen[static_cast<size_t>(p)] = true;
  }
  Node n;
  n.op = PrimOp::Permute;
  n.inputs = {x.node()};
  for (int p : perm) n.shape.push_back(s[static_cast<size_t>(p)]);
  n.dtype = x.dtype();
  n.perm = perm;
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_expand(const Tensor& x0, const std::vector<Dim>& shape, std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  const auto& s = x.shape();
  if (s.size() != shape.size())
    fail<ShapeError>(
        name, "cannot expand " + shape_string(s) + " to " + shape_string(shape) + ": ranks differ", loc);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].is_constant() && *s[i].as_constant() == 1) continue;
    require_equal(*g, s[i], shape[i], name,
                  "cannot expand " + shape_string(s) + " to " + shape_string(shape) + ": axis " +
                      std::to_string(i) + " is " + s[i].to_string() + ", neither 1 nor " +
                      shape[i].to_string(),
                  loc);
  }
  Node n;
  n.op = PrimOp::Expand;
  n.inputs = {x.node()};
  n.shape = shape;
  n.dtype = x.dtype();
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_slice(const Tensor& x0, int axis, const Dim& start, const Dim& end, int64_t step,
                  std::string_view name, Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  const auto& s = x.shape();
  check_axis(axis, s.size(), s, name, loc);
  if (step < 1) fail<ShapeError>(name, "step must be >= 1, got " + std::to_string(step), loc);
  const Dim& d = s[static_cast<size_t>(axis)];
  const std::string what = "slice [" + start.to_string() + ", " + end.to_string() + ") of axis " +
                           std::to_string(axis) + " of " + shape_string(s);
  require_le(*g, Dim(0), start, name, what + ": start is negative", loc);
  require_le(*g, start, end, name, what + ": start > end", loc);
  require_le(*g, end, d, name, what + ": end > " + d.to_string(), loc);
  Node n;
  n.op = PrimOp::Slice;
  n.inputs = {x.node()};
  n.shape = s;
  n.shape[static_cast<size_t>(axis)] = (end - start + Dim(step - 1)) / Dim(step);
  n.dtype = x.dtype();
  n.axis = axis;
  n.start = start;
  n.end = end;
  n.step = step;
  return add_node(g, std::move(n), name, loc);
}

Tensor prim_pad(const Tensor& x0, int axis, const Dim& lo, const Dim& hi, double value, std::string_view name,
                Loc loc) {
  Tensor x = x0;
  auto g = common_graph({&x}, name, loc);
  const auto& s = x.shape();
  check_axis(axis, s.size(), s, name, loc);
  require_le(*g, Dim(0), lo, name,
             "pad before axis " + std::to_string(axis) + " is negative: " + lo.to_string(), loc);
  require_le(*g, Dim(0), hi, name,
             "pad after axis " + std::to_string(axis) + " is negative: " + hi.to_string(), loc);
  Node n;
  n.op = PrimOp::Pad;
  n.inputs = {x.node()};
  n.shape = s;
  n.shape[static_cast<size_t>(axis)] = s[static_cast<size_t>(axis)] + lo + hi;
  n.dtype = x.dtype();
  n.axis = axis;
  n.start = lo;
  n.end = hi;
  n.value = value;
  return add_node(g, std::move(n), name, loc);
}

}  // namespace luminal::detail
