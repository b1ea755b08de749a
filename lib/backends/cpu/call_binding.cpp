// The allocation-free call check (see the header).
#include "backends/cpu/call_binding.hpp"

#include <algorithm>

#include "graph/dim_expr.hpp"

namespace luminal::cpu {

bool eval_dim(const Dim& d, const std::vector<std::string>& names, const int64_t* values, int64_t& out) {
  const auto& e = *d.expr();
  int64_t acc = e.constant;
  for (const auto& t : e.terms) {
    int64_t prod = t.coeff;
    for (const auto& a : t.atoms) {
      int64_t v = 0;
      if (a->kind == detail::AtomKind::Var) {
        size_t i = 0;
        while (i < names.size() && names[i] != a->name) ++i;
        if (i == names.size()) return false;
        v = values[i];
      } else {
        int64_t x = 0, y = 0;
        if (!eval_dim(a->a, names, values, x) || !eval_dim(a->b, names, values, y)) return false;
        switch (a->kind) {
          case detail::AtomKind::Div:
            if (y == 0) return false;
            v = detail::floor_div(x, y);
            break;
          case detail::AtomKind::Mod:
            if (y == 0) return false;
            v = detail::floor_mod(x, y);
            break;
          case detail::AtomKind::Min:
            v = std::min(x, y);
            break;
          case detail::AtomKind::Max:
            v = std::max(x, y);
            break;
          default:
            break;
        }
      }
      prod *= v;
    }
    acc += prod;
  }
  out = acc;
  return true;
}

CallBinding::CallBinding(const detail::GraphImpl* graph, const compiler::KernelPlan& p,
                         const kernel::Program& prog, bool generated_only)
    : graph_(graph) {
  if (!graph_) return;
  const detail::GraphImpl& g = *graph_;
  std::map<std::string, detail::VarRange> vars;
  for (uint32_t id : detail::live_nodes(g)) {
    const detail::Node& n = g.nodes[id];
    for (const Dim& d : n.shape) detail::collect_vars(d, vars);
    if (n.op == detail::PrimOp::Slice || n.op == detail::PrimOp::Pad) {
      detail::collect_vars(n.start, vars);
      detail::collect_vars(n.end, vars);
    }
  }
  for (uint32_t id : g.inputs)
    for (const Dim& d : g.nodes[id].shape) detail::collect_vars(d, vars);
  for (uint32_t id : g.params)
    for (const Dim& d : g.nodes[id].shape) detail::collect_vars(d, vars);
  for (const auto& [name, r] : vars) {
    var_names_.push_back(name);
    var_range_.push_back(r);
  }
  auto add_leaf = [&](uint32_t id, bool param) {
    Leaf l;
    l.node = &g.nodes[id];
    l.param = param;
    for (size_t v = 0; v < p.leaf_name.size(); ++v)
      if (p.leaf_name[v] == l.node->name) l.value = static_cast<int>(v);
    if (const kernel::BufferBlock* b = prog.block(l.value)) l.block = b->dims;
    leaves_.push_back(l);
  };
  for (uint32_t id : g.inputs) add_leaf(id, false);
  n_inputs_ = leaves_.size();
  for (uint32_t id : g.params) add_leaf(id, true);
  // Plain: every declared dim is a constant or one variable, and every variable is fixed
  // by some leaf's shape.
  std::vector<bool> solvable(var_names_.size(), false);
  bool plain = true;
  for (auto& l : leaves_)
    for (const Dim& d : l.node->shape) {
      l.axis_var.push_back(-1);
      if (d.is_constant()) continue;
      const detail::Atom* a = detail::as_single_atom(d);
      if (!a || a->kind != detail::AtomKind::Var) {
        plain = false;
        continue;
      }
      for (size_t i = 0; i < var_names_.size(); ++i)
        if (var_names_[i] == a->name) {
          solvable[i] = true;
          l.axis_var.back() = static_cast<int>(i);
        }
    }
  for (bool b : solvable) plain = plain && b;
  for (const auto& sym : prog.symbols) {
    int vi = -1;
    for (size_t i = 0; i < var_names_.size(); ++i)
      if (var_names_[i] == sym) vi = static_cast<int>(i);
    if (vi < 0) plain = false;
    sym_var_.push_back(vi);
  }
  fast_ok_ = plain && generated_only;
}

const detail::Node* CallBinding::leaf_node(const std::string& name) const {
  for (const auto& l : leaves_)
    if (l.node->name == name) return l.node;
  return nullptr;
}

bool CallBinding::bind(const std::map<std::string, HostTensor>& inputs,
                       const std::map<std::string, std::shared_ptr<const HostTensor>>& params, int64_t* vals,
                       const std::byte** leaf) const {
  if (!fast_ok_ || inputs.size() != n_inputs_) return false;
  thread_local std::vector<uint8_t> bound;
  bound.assign(var_names_.size(), 0);
  for (const Leaf& l : leaves_) {
    const HostTensor* t = nullptr;
    if (!l.param) {
      auto it = inputs.find(l.node->name);
      if (it == inputs.end()) return false;
      t = &it->second;
    } else {
      auto it = params.find(l.node->name);
      if (it == params.end() || !it->second) return false;
      t = it->second.get();
    }
    if (t->dtype() != l.node->dtype || t->shape().size() != l.node->shape.size()) return false;
    if (!l.block.empty()) {  // constant: the block this rank stores
      if (t->shape() != l.block) return false;
      if (l.value >= 0) leaf[static_cast<size_t>(l.value)] = t->data();
      continue;
    }
    for (size_t a = 0; a < l.node->shape.size(); ++a) {
      const Dim& d = l.node->shape[a];
      const int64_t v = t->shape()[a];
      if (auto c = d.as_constant()) {
        if (*c != v) return false;
        continue;
      }
      if (l.axis_var[a] < 0) return false;
      const auto i = static_cast<size_t>(l.axis_var[a]);
      if (bound[i]) {
        if (vals[i] != v) return false;
        continue;
      }
      const detail::VarRange& r = var_range_[i];
      if (v < r.lo || v > r.hi || (r.multiple > 1 && v % r.multiple != 0)) return false;
      vals[i] = v;
      bound[i] = 1;
    }
    if (l.value >= 0) leaf[static_cast<size_t>(l.value)] = t->data();
  }
  for (uint8_t b : bound)
    if (!b) return false;
  for (const detail::Guard& gd : graph_->guards) {
    int64_t a = 0, b = 0;
    if (!eval_dim(gd.a, var_names_, vals, a) || !eval_dim(gd.b, var_names_, vals, b)) return false;
    if (gd.less_equal ? a > b : a != b) return false;
  }
  return true;
}

}  // namespace luminal::cpu
