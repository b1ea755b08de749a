// Walks the live nodes in creation order (a topological order), keeping each value as a
// View and dropping it after its last use.
#include "backends/reference/interpreter.hpp"

#include <optional>

#include "backends/reference/collectives.hpp"
#include "backends/reference/kernels.hpp"
#include "graph/diagnostics.hpp"
#include "graph/natural_exp.hpp"

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
  const int64_t world = collective_world(g);
  if (world > 1)
    throw RuntimeError("[reference] the program has collectives over " + std::to_string(world) +
                       " ranks: it runs with a communicator of that size, or simulated with run_spmd");
  return std::move(run_spmd(g, 1, dims, {tensors}, stats_out).at(0));
}

int64_t collective_world(const GraphImpl& g) {
  int64_t world = 1;
  for (uint32_t id : live_nodes(g)) {
    const Node& n = g.nodes[id];
    if (op_info(n.op).cls != OpClass::Collective || n.step == 1) continue;
    if (world != 1 && world != n.step)
      throw InternalError("[reference] collectives over " + std::to_string(world) + " and " +
                          std::to_string(n.step) + " ranks in one program");
    world = n.step;
  }
  return world;
}

std::vector<std::map<std::string, HostTensor>> run_spmd(
    const GraphImpl& g, int64_t world, const DimBindings& dims,
    const std::vector<std::map<std::string, const HostTensor*>>& tensors, Stats* stats_out) {
  if (world < 1 || (tensors.size() != 1 && tensors.size() != static_cast<size_t>(world)))
    throw InternalError("[reference] run_spmd: " + std::to_string(world) + " ranks, " +
                        std::to_string(tensors.size()) + " leaf maps");
  const int64_t needed = collective_world(g);
  if (needed != 1 && needed != world)
    throw RuntimeError("[reference] the program has collectives over " + std::to_string(needed) +
                       " ranks, run with " + std::to_string(world));
  const size_t R = static_cast<size_t>(world);
  // Rank r's dims: "%rank" bound to r (a single rank keeps a caller's binding: one rank
  // of a real distributed run evaluates its kernels with its own rank).
  std::vector<DimBindings> rdims(R, dims);
  for (size_t r = 0; r < R; ++r)
    if (R > 1 || !rdims[r].count(std::string(kRankDim))) rdims[r][std::string(kRankDim)] = static_cast<int64_t>(r);
  Stats stats;
  const std::vector<uint32_t> order = live_nodes(g);
  std::vector<int32_t> uses0(g.nodes.size(), 0);
  for (uint32_t id : order)
    for (uint32_t in : g.nodes[id].inputs) ++uses0[in];
  for (const auto& [name, id] : g.outputs) ++uses0[id];  // outputs stay alive to the end

  // An f32 mul whose only user is a sum_reduce is not materialized: the reduce
  // multiplies as it accumulates (the matmul pattern; O(output) memory instead of
  // O(M*N*K)).
  std::vector<uint8_t> fuse(g.nodes.size(), 0);
  for (uint32_t id : order) {
    const Node& n = g.nodes[id];
    if (n.op != PrimOp::SumReduce) continue;
    const Node& m = g.nodes[n.inputs[0]];
    if (m.op == PrimOp::Mul && m.dtype == DType::f32 && uses0[n.inputs[0]] == 1) fuse[n.inputs[0]] = 1;
  }
  // exp2(x * k log2 e) is e^(k x) with the product unrounded (graph/natural_exp.hpp): x
  // is kept alive (one more use) until the exp2 reads it.
  std::vector<std::optional<NaturalExp>> nat(g.nodes.size());
  for (uint32_t id : order)
    if ((nat[id] = natural_exp(g, id))) ++uses0[nat[id]->operand];
  // Per rank: values, remaining uses, deferred products.
  std::vector<std::vector<std::optional<View>>> vals(R, std::vector<std::optional<View>>(g.nodes.size()));
  std::vector<std::vector<int32_t>> uses(R, uses0);
  std::vector<std::vector<std::pair<View, View>>> deferreds(R, std::vector<std::pair<View, View>>(g.nodes.size()));

  for (uint32_t id : order) {
    const Node& n = g.nodes[id];
    if (op_info(n.op).cls == OpClass::Collective) {
      std::vector<const View*> xs(R);
      for (size_t r = 0; r < R; ++r) {
        std::optional<View>& x = vals[r][n.inputs[0]];
        if (x->masked()) x = contiguous(*x, stats);
        xs[r] = &*x;
      }
      if (n.step != 1 && n.step != world)
        throw InternalError("[reference] a collective over " + std::to_string(n.step) + " ranks run by " +
                            std::to_string(world));
      std::vector<View> res = n.step == 1 ? std::vector<View>{*xs[0]} : collective(n.op, n.axis, xs);
      for (size_t r = 0; r < R; ++r) {
        if (res[r].shape != concrete(n.shape, rdims[r]))
          throw InternalError("[reference] " + std::string(prim_name(n.op)) + " produced a shape that differs from " +
                              shape_string(n.shape));
        vals[r][id] = std::move(res[r]);
        if (--uses[r][n.inputs[0]] == 0) vals[r][n.inputs[0]].reset();
      }
      continue;
    }
    for (size_t r = 0; r < R; ++r) {
      std::vector<std::optional<View>>& val = vals[r];
      std::vector<std::pair<View, View>>& deferred = deferreds[r];
      const DimBindings& dims_r = rdims[r];
      const std::map<std::string, const HostTensor*>& leaves = tensors.size() == 1 ? tensors[0] : tensors[r];
      auto in = [&](const Node& nd, size_t i) -> const View& { return *val[nd.inputs[i]]; };
      // A masked operand of a kernel is materialized once and the result kept for the
      // node's other users.
      auto dense = [&](const Node& nd, size_t i) -> const View& {
        std::optional<View>& v = val[nd.inputs[i]];
        if (v->masked()) v = contiguous(*v, stats);
        return *v;
      };
      const std::vector<int64_t> shape = concrete(n.shape, dims_r);
      View v;
      bool deferred_product = false;
      if (nat[id]) {  // e^(k x), see above
        std::optional<View>& x = val[nat[id]->operand];
        if (x->masked()) x = contiguous(*x, stats);
        v = natural_exp(*x, nat[id]->k);
        if (--uses[r][nat[id]->operand] == 0) x.reset();
      } else switch (n.op) {
        case PrimOp::Input:
        case PrimOp::Param:
          v = leaf(n, shape, leaves);
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
          LUMINAL_PRIM_BINARY_OPS(LUMINAL_CASE_PRIMOP)
          if (fuse[id]) {
            deferred[id] = {dense(n, 0), dense(n, 1)};
            deferred_product = true;
            break;
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
        case PrimOp::AllReduce:
        case PrimOp::AllGather:
        case PrimOp::ReduceScatter:
          throw InternalError("[reference] collective outside the SPMD step");
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
          v = slice_view(in(n, 0), n.axis, n.start.evaluate(dims_r), n.end.evaluate(dims_r), n.step);
          break;
        case PrimOp::Pad:
          v = pad_view(in(n, 0), n.axis, n.start.evaluate(dims_r), n.end.evaluate(dims_r), n.value, stats);
          break;
      }
      if (!deferred_product) {
        if (v.shape != shape)
          throw InternalError("[reference] " + std::string(prim_name(n.op)) +
                              " produced a shape that differs from " + shape_string(n.shape));
        val[id] = std::move(v);
      }
      for (uint32_t x : n.inputs)
        if (--uses[r][x] == 0) val[x].reset();
    }
  }

  std::vector<std::map<std::string, HostTensor>> outs(R);
  for (size_t r = 0; r < R; ++r)
    for (const auto& [name, id] : g.outputs) {
      const View& v = *vals[r][id];
      HostTensor t(v.dtype, v.shape);
      copy_out(v, t.mutable_data());
      outs[r].emplace(name, std::move(t));
    }
  if (stats_out) *stats_out = stats;
  return outs;
}

}  // namespace luminal::detail::reference
