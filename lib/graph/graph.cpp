// Graph and Tensor: declaring dims, inputs, params and outputs; reading a node's shape.
#include "graph/diagnostics.hpp"
#include "graph/dim_expr.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/graph.hpp"

namespace luminal {

using namespace detail;

namespace {
void check_name(const GraphImpl& g, const std::string& name, std::string_view op,
                const Loc& loc) {
  if (name.empty()) fail<ShapeError>(op, "a name must not be empty", loc);
  auto clash = [&](const std::vector<uint32_t>& ids, const char* kind) {
    for (uint32_t id : ids)
      if (g.nodes[id].name == name)
        fail<ShapeError>(op,
                         "duplicate name '" + name + "': already " + kind + " declared at " +
                             where_string(g.nodes[id].loc),
                         loc);
  };
  clash(g.inputs, "an input");
  clash(g.params, "a param");
}

void check_shape(const std::vector<Dim>& shape, const std::string& name, std::string_view op,
                 const Loc& loc) {
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i].lower_bound() < 0)
      fail<ShapeError>(op,
                       "'" + name + "' has shape " + shape_string(shape) + ": dim " + std::to_string(i) +
                           " (" + shape[i].to_string() + ") can be negative",
                       loc);
}

Tensor leaf(const std::shared_ptr<GraphImpl>& g, PrimOp op, const std::string& name,
            const std::vector<Dim>& shape, DType dtype, const Loc& loc) {
  const std::string_view opname = op == PrimOp::Input ? "input" : "param";
  check_name(*g, name, opname, loc);
  check_shape(shape, name, opname, loc);
  Node n;
  n.op = op;
  n.shape = shape;
  n.dtype = dtype;
  n.name = name;
  n.op_name = std::string(opname);
  n.loc = loc;
  const uint32_t id = g->add(std::move(n));
  (op == PrimOp::Input ? g->inputs : g->params).push_back(id);
  return Tensor(g, id);
}
}  // namespace

Graph::Graph() : impl_(std::make_shared<GraphImpl>()) {}

Graph::Graph(std::shared_ptr<detail::GraphImpl> impl) : impl_(std::move(impl)) {
  if (!impl_) impl_ = std::make_shared<GraphImpl>();
}

Dim Graph::dim(const std::string& name, int64_t lo, int64_t hi, Loc loc) {
  return dim(name, lo, hi, 1, loc);
}

Dim Graph::dim(const std::string& name, int64_t lo, int64_t hi, int64_t multiple_of,
               Loc loc) {
  if (name.empty()) fail<ShapeError>("dim", "a dim name must not be empty", loc);
  if (multiple_of < 1)
    fail<ShapeError>(
        "dim",
        "dim '" + name + "' must be a multiple of a positive number, got " + std::to_string(multiple_of),
        loc);
  for (const DimDecl& d : impl_->dims)
    if (d.name == name) fail<ShapeError>("dim", "duplicate dim name '" + name + "'", loc);
  if (lo < 0 || lo > hi)
    fail<ShapeError>("dim",
                     "dim '" + name + "' has range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "]; need 0 <= lo <= hi",
                     loc);
  if (floor_div(hi, multiple_of) * multiple_of < lo)
    fail<ShapeError>("dim",
                     "dim '" + name + "' has no multiple of " + std::to_string(multiple_of) + " in [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]",
                     loc);
  Dim d = Dim::variable(name, lo, hi, multiple_of);
  impl_->dims.push_back(DimDecl{name, lo, hi, multiple_of, d});
  return d;
}

Tensor Graph::input(const std::string& name, const std::vector<Dim>& shape, DType dtype,
                    Loc loc) {
  return leaf(impl_, PrimOp::Input, name, shape, dtype, loc);
}

Tensor Graph::param(const std::string& name, const std::vector<Dim>& shape, DType dtype,
                    Loc loc) {
  return leaf(impl_, PrimOp::Param, name, shape, dtype, loc);
}

void Graph::output(const std::string& name, const Tensor& t, Loc loc) {
  if (name.empty()) fail<ShapeError>("output", "an output name must not be empty", loc);
  if (!t.valid()) fail<ShapeError>("output", "output '" + name + "' is a null Tensor", loc);
  for (const auto& [n, id] : impl_->outputs)
    if (n == name) fail<ShapeError>("output", "duplicate output name '" + name + "'", loc);
  uint32_t node = t.node();
  if (t.graph_impl() != impl_) {
    if (!t.graph_impl()->is_constant_only())
      fail<ShapeError>("output", "output '" + name + "' is a tensor of another graph", loc);
    node = import_node(*impl_, *t.graph_impl(), node);
  }
  impl_->outputs.emplace_back(name, node);
}

const std::vector<Dim>& Tensor::shape() const {
  if (!graph_) throw ShapeError("[tensor] shape() of a null Tensor");
  return graph_->nodes[node_].shape;
}

DType Tensor::dtype() const {
  if (!graph_) throw ShapeError("[tensor] dtype() of a null Tensor");
  return graph_->nodes[node_].dtype;
}

}  // namespace luminal
