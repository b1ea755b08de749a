#include "ir/build.hpp"

#include <unordered_map>

#include "luminal/egraph/extract.hpp"
#include "luminal/error.hpp"

namespace luminal::ir {

namespace {
Id add1(EGraph& g, Op op, const Attr& at, std::initializer_list<Id> kids) {
  return g.add(op, g.analysis().attrs().intern(at), kids);
}
}  // namespace

Id add_input(EGraph& g, Op op, const std::string& name, const std::vector<Dim>& shape, DType dt) {
  Attr a;
  a.name = name;
  a.shape = shape;
  a.dtype = dt;
  return add1(g, op, a, {});
}
Id add_constant(EGraph& g, double value, DType dt) {
  Attr a;
  a.value = value;
  a.dtype = dt;
  return add1(g, Op::Constant, a, {});
}
Id add_iota(EGraph& g, const Dim& n) {
  Attr a;
  a.shape = {n};
  a.dtype = DType::i32;
  return add1(g, Op::Iota, a, {});
}
Id add_plain(EGraph& g, Op op, const std::vector<Id>& kids) {
  return g.add(op, 0u, std::span<const Id>(kids));
}
Id add_cast(EGraph& g, Id x, DType to) {
  Attr a;
  a.dtype = to;
  return add1(g, Op::Cast, a, {x});
}
Id add_reduce(EGraph& g, Op op, Id x, int axis) {
  Attr a;
  a.axis = axis;
  return add1(g, op, a, {x});
}
Id add_reshape(EGraph& g, Id x, const std::vector<Dim>& shape) {
  Attr a;
  a.shape = shape;
  return add1(g, Op::Reshape, a, {x});
}
Id add_permute(EGraph& g, Id x, const std::vector<int>& perm) {
  Attr a;
  a.perm = perm;
  return add1(g, Op::Permute, a, {x});
}
Id add_expand(EGraph& g, Id x, const std::vector<Dim>& shape) {
  Attr a;
  a.shape = shape;
  return add1(g, Op::Expand, a, {x});
}
Id add_collective(EGraph& g, Op op, Id x, int axis, int64_t world) {
  Attr a;
  a.axis = op == Op::AllReduce ? 0 : axis;
  a.step = world;
  return g.add(op, g.analysis().attrs().intern(a), std::span<const Id>(&x, 1));
}

Id add_slice(EGraph& g, Id x, int axis, const Dim& start, const Dim& end, int64_t step) {
  Attr a;
  a.axis = axis;
  a.a = start;
  a.b = end;
  a.step = step;
  return add1(g, Op::Slice, a, {x});
}
Id add_pad(EGraph& g, Id x, int axis, const Dim& lo, const Dim& hi, double value) {
  Attr a;
  a.axis = axis;
  a.a = lo;
  a.b = hi;
  a.value = value;
  return add1(g, Op::Pad, a, {x});
}
Id add_kernel(EGraph& g, std::shared_ptr<const KernelSpec> spec, const std::vector<Id>& kids) {
  Attr a;
  a.kernel = std::move(spec);
  return g.add(Op::Kernel, g.analysis().attrs().intern(a), std::span<const Id>(kids));
}

Attr attr_of(const detail::Node& n) {
  Attr a;
  switch (n.op) {
    case PrimOp::Input:
    case PrimOp::Param:
      a.name = n.name;
      a.shape = n.shape;
      a.dtype = n.dtype;
      break;
    case PrimOp::Constant:
      a.value = n.value;
      a.dtype = n.dtype;
      break;
    case PrimOp::Iota:
      a.shape = n.shape;
      a.dtype = DType::i32;
      break;
    case PrimOp::Cast:
      a.dtype = n.dtype;
      break;
    case PrimOp::SumReduce:
    case PrimOp::MaxReduce:
      a.axis = n.axis;
      break;
    case PrimOp::Reshape:
    case PrimOp::Expand:
      a.shape = n.shape;
      break;
    case PrimOp::Permute:
      a.perm = n.perm;
      break;
    case PrimOp::Slice:
      a.axis = n.axis;
      a.a = n.start;
      a.b = n.end;
      a.step = n.step;
      break;
    case PrimOp::Pad:
      a.axis = n.axis;
      a.a = n.start;
      a.b = n.end;
      a.value = n.value;
      break;
    case PrimOp::Gather:
      a.name = n.op_name;  // a bad id is reported under the user's op ("embedding")
      break;
    case PrimOp::AllReduce:
    case PrimOp::AllGather:
    case PrimOp::ReduceScatter:
      a.axis = n.axis;
      a.step = n.step;  // the number of ranks
      break;
    default:
      break;
  }
  return a;
}

Loaded load_graph(EGraph& g, const detail::GraphImpl& graph) {
  Loaded L;
  L.cls.assign(graph.nodes.size(), egraph::kNoId);
  std::vector<Id> kids;
  for (uint32_t id : detail::live_nodes(graph)) {
    const detail::Node& n = graph.nodes[id];
    kids.clear();
    for (uint32_t in : n.inputs) kids.push_back(L.cls[in]);
    L.cls[id] = g.add(to_op(n.op), g.analysis().attrs().intern(attr_of(n)), std::span<const Id>(kids));
  }
  for (const auto& [name, id] : graph.outputs) L.outputs.emplace_back(name, L.cls[id]);
  return L;
}

uint32_t emit(detail::GraphImpl& out, Op op, const Attr& at, const std::vector<uint32_t>& kids) {
  if (op == Op::Kernel) {
    const detail::GraphImpl& body = *at.kernel->body;
    std::vector<uint32_t> map(body.nodes.size());
    for (uint32_t i = 0; i < body.nodes.size(); ++i) {
      const detail::Node& bn = body.nodes[i];
      if (bn.op == PrimOp::Input && bn.name.starts_with('%')) {
        map[i] = kids.at(static_cast<size_t>(std::stoul(bn.name.substr(1))));
        continue;
      }
      detail::Node n = bn;
      for (uint32_t& x : n.inputs) x = map[x];
      map[i] = out.add(std::move(n));
    }
    return map[body.outputs.at(0).second];
  }
  if (op == Op::MatMul) {
    // a [..., m, k] x b [..., k, n]: sum over k of a[..., m, k, 1] * b[..., 1, k, n].
    const std::vector<Dim> as = out.nodes[kids[0]].shape, bs = out.nodes[kids[1]].shape;
    const size_t r = as.size();
    std::vector<Dim> a1(as), b1(bs), full(as);
    a1.push_back(Dim(1));
    b1.insert(b1.end() - 2, Dim(1));
    full.push_back(bs.back());
    Attr ra, rb, ea;
    ra.shape = a1;
    rb.shape = b1;
    ea.shape = full;
    uint32_t x = emit(out, Op::Expand, ea, {emit(out, Op::Reshape, ra, {kids[0]})});
    uint32_t y = emit(out, Op::Expand, ea, {emit(out, Op::Reshape, rb, {kids[1]})});
    Attr sa;
    sa.axis = static_cast<int>(r) - 1;
    return emit(out, Op::SumReduce, sa, {emit(out, Op::Mul, Attr{}, {x, y})});
  }
  std::vector<ClassData> kd(kids.size());
  std::vector<const ClassData*> kp;
  for (size_t i = 0; i < kids.size(); ++i) {
    kd[i].shape = out.nodes[kids[i]].shape;
    kd[i].dtype = out.nodes[kids[i]].dtype;
    kd[i].valid = true;
    kp.push_back(&kd[i]);
  }
  ClassData d = TensorAnalysis::infer(op, at, kp);
  detail::Node n;
  n.op = to_prim(op);
  n.inputs = kids;
  n.shape = d.shape;
  n.dtype = d.dtype;
  n.op_name = "compiled";
  switch (op) {
    case Op::Input:
    case Op::Param:
      n.name = at.name;
      break;
    case Op::Gather:
      if (!at.name.empty()) n.op_name = at.name;
      break;
    case Op::Constant:
      n.value = at.value;
      break;
    case Op::SumReduce:
    case Op::MaxReduce:
      n.axis = at.axis;
      break;
    case Op::Permute:
      n.perm = at.perm;
      break;
    case Op::Slice:
      n.axis = at.axis;
      n.start = at.a;
      n.end = at.b;
      n.step = at.step;
      break;
    case Op::Pad:
      n.axis = at.axis;
      n.start = at.a;
      n.end = at.b;
      n.value = at.value;
      break;
    case Op::AllReduce:
    case Op::AllGather:
    case Op::ReduceScatter:
      n.axis = at.axis;
      n.step = at.step;
      break;
    default:
      break;
  }
  uint32_t id = out.add(std::move(n));
  if (op == Op::Input) out.inputs.push_back(id);
  if (op == Op::Param) out.params.push_back(id);
  return id;
}

std::shared_ptr<detail::GraphImpl> node_to_graph(const EGraph& g, Id node, const std::vector<Id>& choice) {
  auto out = std::make_shared<detail::GraphImpl>();
  std::unordered_map<Id, uint32_t> done;  // class -> node of `out`
  // Iterative post-order over (class, chosen node); the root is `node` itself.
  std::function<uint32_t(Id)> build = [&](Id nid) -> uint32_t {
    NodeView v = g.node(nid);
    std::vector<uint32_t> kids;
    for (Id k : v.kids) {
      Id c = g.find(k);
      auto it = done.find(c);
      if (it != done.end()) {
        kids.push_back(it->second);
        continue;
      }
      if (c >= choice.size() || choice[c] == egraph::kNoId)
        throw InternalError("[ir] node_to_graph: no chosen node for class " + std::to_string(c));
      uint32_t x = build(choice[c]);
      done.emplace(c, x);
      kids.push_back(x);
    }
    return emit(*out, v.op, g.analysis().attrs().get(v.payload), kids);
  };
  uint32_t root = build(node);
  out->outputs.emplace_back("out", root);
  return out;
}

std::vector<Id> math_choice(EGraph& g) {
  auto cost = [](const NodeView& v, std::span<const double> kc) {
    double s = v.op == Op::Kernel ? 1e6 : 1.0;
    for (double c : kc) s += c;
    return s;
  };
  egraph::GreedyExtractor<TensorLang, TensorAnalysis, decltype(cost)> ex(g, cost);
  return ex.choices();
}

}  // namespace luminal::ir
