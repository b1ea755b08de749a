// Walks the live nodes in creation order (a topological order), keeping each value as a
// View and dropping it after its last use.
#include "backends/reference/interpreter.hpp"

#include <optional>

#include "backends/reference/kernels.hpp"
#include "graph/diagnostics.hpp"

namespace luminal::detail::reference {

namespace {

std::vector<int64_t> concrete(const std::vector<Dim>& shape, const DimBindings& dims) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const Dim& d : shape) out.push_back(d.evaluate(dims));
  return out;
}

View leaf(const Node& n, const std::vector<int64_t>& shape,
          const std::map<std::string, const HostTensor*>& tensors) {
  auto it = tensors.find(n.name);
  if (it == tensors.end() || it->second == nullptr)
    throw RuntimeError("[reference] no data for " + std::string(prim_name(n.op)) + " '" + n.name + "'");
  const HostTensor& t = *it->second;
  if (t.shape() != shape || t.dtype() != n.dtype)
    throw InternalError("[reference] data for '" + n.name + "' does not match its declaration");
  View v;
  v.dtype = n.dtype;
  v.base = t.data();
  v.shape = shape;
  v.strides = row_major_strides(shape);
  return v;
}

}  // namespace

std::map<std::string, HostTensor> run(const GraphImpl& g, const DimBindings& dims,
                                      const std::map<std::string, const HostTensor*>& tensors,
                                      Stats* stats_out) {
  Stats stats;
  const std::vector<uint32_t> order = live_nodes(g);
  std::vector<int32_t> uses(g.nodes.size(), 0);
  for (uint32_t id : order)
    for (uint32_t in : g.nodes[id].inputs) ++uses[in];
  for (const auto& [name, id] : g.outputs) ++uses[id];  // outputs stay alive to the end

  // An f32 mul whose only user is a sum_reduce is not materialized: the reduce
  // multiplies as it accumulates (the matmul pattern; O(output) memory instead of
  // O(M*N*K)).
  std::vector<uint8_t> fuse(g.nodes.size(), 0);
  for (uint32_t id : order) {
    const Node& n = g.nodes[id];
    if (n.op != PrimOp::SumReduce) continue;
    const Node& m = g.nodes[n.inputs[0]];
    if (m.op == PrimOp::Mul && m.dtype == DType::f32 && uses[n.inputs[0]] == 1) fuse[n.inputs[0]] = 1;
  }
  std::vector<std::pair<View, View>> deferred(g.nodes.size());

  std::vector<std::optional<View>> val(g.nodes.size());
  auto in = [&](const Node& n, size_t i) -> const View& { return *val[n.inputs[i]]; };
  // A masked operand of a kernel is materialized once and the result kept for the
  // node's other users.
  auto dense = [&](const Node& n, size_t i) -> const View& {
    std::optional<View>& v = val[n.inputs[i]];
    if (v->masked()) v = contiguous(*v, stats);
    return *v;
  };

  for (uint32_t id : order) {
    const Node& n = g.nodes[id];
    const std::vector<int64_t> shape = concrete(n.shape, dims);
    View v;
    switch (n.op) {
      case PrimOp::Input:
      case PrimOp::Param:
        v = leaf(n, shape, tensors);
        break;
      case PrimOp::Constant:
        v = constant(n.value, n.dtype);
        break;
      case PrimOp::Iota:
        v = iota(shape[0]);
        break;
        LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_PRIMOP)
        v = unary(n.op, dense(n, 0));
        break;
      case PrimOp::Add:
      case PrimOp::Mul:
      case PrimOp::Mod:
      case PrimOp::Max:
      case PrimOp::LessThan:
      case PrimOp::Equal:
        if (fuse[id]) {
          deferred[id] = {dense(n, 0), dense(n, 1)};
          for (uint32_t x : n.inputs)
            if (--uses[x] == 0) val[x].reset();
          continue;
        }
        v = binary(n.op, dense(n, 0), dense(n, 1));
        break;
      case PrimOp::Where:
        v = where(dense(n, 0), dense(n, 1), dense(n, 2));
        break;
      case PrimOp::Cast:
        v = cast(dense(n, 0), n.dtype);
        break;
      case PrimOp::SumReduce:
      case PrimOp::MaxReduce:
        if (fuse[n.inputs[0]]) {
          auto& [a, b] = deferred[n.inputs[0]];
          v = sum_of_products(a, b, n.axis);
          a = View();
          b = View();
        } else {
          v = reduce(n.op, dense(n, 0), n.axis);
        }
        break;
      case PrimOp::Gather:
        v = gather(in(n, 0), in(n, 1), n.op_name, stats);
        break;
      case PrimOp::Reshape: {
        const View& x = in(n, 0);
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        if (count != x.numel())
          throw RuntimeError("[" + n.op_name + "] cannot reshape " + std::to_string(x.numel()) +
                             " elements to " + shape_string(n.shape) + " (" + std::to_string(count) +
                             " elements) (at " + where_string(n.loc) + ")");
        v = reshape_view(x, shape, stats);
        break;
      }
      case PrimOp::Permute:
        v = permute_view(in(n, 0), n.perm);
        break;
      case PrimOp::Expand:
        v = expand_view(in(n, 0), shape);
        break;
      case PrimOp::Slice:
        v = slice_view(in(n, 0), n.axis, n.start.evaluate(dims), n.end.evaluate(dims), n.step);
        break;
      case PrimOp::Pad:
        v = pad_view(in(n, 0), n.axis, n.start.evaluate(dims), n.end.evaluate(dims), n.value, stats);
        break;
    }
    if (v.shape != shape)
      throw InternalError("[reference] " + std::string(prim_name(n.op)) +
                          " produced a shape that differs from " + shape_string(n.shape));
    val[id] = std::move(v);
    for (uint32_t x : n.inputs)
      if (--uses[x] == 0) val[x].reset();
  }

  std::map<std::string, HostTensor> out;
  for (const auto& [name, id] : g.outputs) {
    const View& v = *val[id];
    HostTensor t(v.dtype, v.shape);
    copy_out(v, t.mutable_data());
    out.emplace(name, std::move(t));
  }
  if (stats_out) *stats_out = stats;
  return out;
}

}  // namespace luminal::detail::reference
