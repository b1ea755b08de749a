#include "dist/param_regions.hpp"

#include <algorithm>
#include <optional>

#include "ir/tensor_lang.hpp"

namespace luminal::dist {

using detail::PrimOp;

namespace {

// A strided index map onto a param's row-major elements: element (i_0, ..) of the view is
// param element offset + sum i_k * strides[k].
struct Map {
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
};

std::optional<std::vector<int64_t>> constant_shape(const std::vector<Dim>& dims) {
  std::vector<int64_t> out;
  for (const Dim& d : dims) {
    const auto c = d.as_constant();
    if (!c || *c < 0) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A reshape that keeps the map strided (no copy), as NumPy decides it: each group of old
// axes merged into new ones must be contiguous among themselves. Size-1 axes are dropped
// first and come back with stride 0.
std::optional<Map> reshape_map(const Map& m, const std::vector<int64_t>& to) {
  if (numel(m.shape) != numel(to)) return std::nullopt;
  std::vector<int64_t> od, os, nd;
  for (size_t i = 0; i < m.shape.size(); ++i)
    if (m.shape[i] != 1) {
      od.push_back(m.shape[i]);
      os.push_back(m.strides[i]);
    }
  for (int64_t d : to)
    if (d != 1) nd.push_back(d);
  std::vector<int64_t> ns(nd.size(), 0);
  size_t oi = 0, ni = 0;
  while (oi < od.size() && ni < nd.size()) {
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = od[oi], np = nd[ni];
    while (op != np) {
      if (np < op) {
        if (nj >= nd.size()) return std::nullopt;
        np *= nd[nj++];
      } else {
        if (oj >= od.size()) return std::nullopt;
        op *= od[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (os[k] != od[k + 1] * os[k + 1]) return std::nullopt;
    ns[nj - 1] = os[oj - 1];
    for (size_t k = nj - 1; k > ni; --k) ns[k - 1] = ns[k] * nd[k];
    oi = oj;
    ni = nj;
  }
  if (oi != od.size() || ni != nd.size()) return std::nullopt;
  Map r;
  r.offset = m.offset;
  r.shape = to;
  size_t k = 0;
  for (int64_t d : to) r.strides.push_back(d == 1 ? 0 : ns[k++]);
  return r;
}

// The view node `n` applied to `m`, or nullopt when it is not a view this walk follows.
std::optional<Map> apply_view(const Map& m, const detail::Node& n) {
  const auto out = constant_shape(n.shape);
  if (!out) return std::nullopt;
  switch (n.op) {
    case PrimOp::Permute: {
      if (n.perm.size() != m.shape.size()) return std::nullopt;
      Map r = m;
      for (size_t i = 0; i < n.perm.size(); ++i) {
        r.shape[i] = m.shape[static_cast<size_t>(n.perm[i])];
        r.strides[i] = m.strides[static_cast<size_t>(n.perm[i])];
      }
      return r;
    }
    case PrimOp::Slice: {
      const auto s = n.start.as_constant(), e = n.end.as_constant();
      const auto ax = static_cast<size_t>(n.axis);
      if (!s || !e || n.step < 1 || ax >= m.shape.size() || *s < 0) return std::nullopt;
      Map r = m;
      r.offset += *s * m.strides[ax];
      r.strides[ax] = m.strides[ax] * n.step;
      r.shape[ax] = (*out)[ax];
      if (r.shape[ax] > 0 && *s + (r.shape[ax] - 1) * n.step >= m.shape[ax]) return std::nullopt;
      return r;
    }
    case PrimOp::Expand: {
      if (out->size() < m.shape.size()) return std::nullopt;
      Map r;
      r.offset = m.offset;
      const size_t lead = out->size() - m.shape.size();
      for (size_t i = 0; i < out->size(); ++i) {
        const bool fresh = i < lead;
        const int64_t from = fresh ? 1 : m.shape[i - lead];
        if (from != 1 && from != (*out)[i]) return std::nullopt;
        r.shape.push_back((*out)[i]);
        r.strides.push_back(fresh || (from == 1 && (*out)[i] != 1) ? 0 : m.strides[i - lead]);
      }
      return r;
    }
    case PrimOp::Reshape:
      return reshape_map(m, *out);
    default:
      return std::nullopt;
  }
}

// The box of param elements `m` reaches, or the whole shape when its axes do not map onto
// the param's without carrying into the next axis.
Region box_of(const Map& m, const std::vector<int64_t>& dims) {
  Region whole{std::vector<int64_t>(dims.size(), 0), dims};
  if (numel(m.shape) == 0) return Region{dims, dims};  // reads nothing (an empty box)
  const auto strides = [&] {
    std::vector<int64_t> s(dims.size(), 1);
    for (size_t a = dims.size(); a-- > 1;) s[a - 1] = s[a] * dims[a];
    return s;
  }();
  std::vector<int64_t> lo(dims.size()), ext(dims.size(), 0);
  int64_t rest = m.offset;
  for (size_t a = 0; a < dims.size(); ++a) {
    lo[a] = rest / strides[a];
    rest %= strides[a];
  }
  for (size_t k = 0; k < m.shape.size(); ++k) {
    if (m.shape[k] <= 1 || m.strides[k] == 0) continue;
    if (m.strides[k] < 0) return whole;
    size_t a = 0;
    while (a < dims.size() && m.strides[k] % strides[a] != 0) ++a;
    if (a == dims.size()) return whole;
    ext[a] += (m.shape[k] - 1) * (m.strides[k] / strides[a]);
  }
  Region r;
  for (size_t a = 0; a < dims.size(); ++a) {
    if (lo[a] + ext[a] >= dims[a]) return whole;
    r.start.push_back(lo[a]);
    r.end.push_back(lo[a] + ext[a] + 1);
  }
  return r;
}

void unite(std::optional<Region>& acc, const Region& r) {
  bool empty = false;
  for (size_t a = 0; a < r.start.size(); ++a) empty = empty || r.start[a] >= r.end[a];
  if (empty) return;
  if (!acc) {
    acc = r;
    return;
  }
  for (size_t a = 0; a < r.start.size(); ++a) {
    acc->start[a] = std::min(acc->start[a], r.start[a]);
    acc->end[a] = std::max(acc->end[a], r.end[a]);
  }
}

// Every read of body node `x` (a view of the param as `m`): followed through views, the
// box of each place the walk stops at joins `acc`.
void walk(const detail::GraphImpl& body, uint32_t x, const Map& m, const std::vector<int64_t>& dims,
          std::optional<Region>& acc, int depth) {
  bool used = false;
  for (const auto& [name, o] : body.outputs) used = used || o == x;
  for (uint32_t u = x + 1; u < body.nodes.size(); ++u) {
    const detail::Node& n = body.nodes[u];
    if (std::find(n.inputs.begin(), n.inputs.end(), x) == n.inputs.end()) continue;
    std::optional<Map> next;
    if (n.inputs.size() == 1 && depth < 64) next = apply_view(m, n);
    if (next)
      walk(body, u, *next, dims, acc, depth + 1);
    else
      used = true;  // a kernel reads the view as it is
  }
  if (used) unite(acc, box_of(m, dims));
}

}  // namespace

std::map<std::string, Region> param_regions(const compiler::KernelPlan& plan,
                                            const detail::GraphImpl& graph) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (uint32_t id : graph.params)
    if (auto s = constant_shape(graph.nodes[id].shape)) shapes.emplace(graph.nodes[id].name, *s);
  std::map<std::string, std::optional<Region>> acc;
  for (const auto& st : plan.steps) {
    const detail::GraphImpl& body = *st.spec->body;
    for (size_t k = 0; k < st.args.size(); ++k) {
      const uint32_t v = st.args[k];
      if (v >= plan.leaf_is_param.size() || !plan.leaf_is_param[v]) continue;
      auto sh = shapes.find(plan.leaf_name[v]);
      if (sh == shapes.end()) continue;
      const std::string slot = ir::slot_name(static_cast<uint32_t>(k));
      for (uint32_t i = 0; i < body.nodes.size(); ++i) {
        const detail::Node& n = body.nodes[i];
        if (n.op != PrimOp::Input || n.name != slot) continue;
        Map m;
        m.shape = sh->second;
        m.strides.assign(m.shape.size(), 1);
        for (size_t a = m.shape.size(); a-- > 1;) m.strides[a - 1] = m.strides[a] * m.shape[a];
        walk(body, i, m, sh->second, acc[sh->first], 0);
      }
    }
  }
  // A param that is an output as it is (a leaf the plan returns) is read whole.
  for (const auto& [name, v] : plan.outputs)
    if (v < plan.leaf_is_param.size() && plan.leaf_is_param[v]) {
      auto sh = shapes.find(plan.leaf_name[v]);
      if (sh != shapes.end()) acc[sh->first] = Region{std::vector<int64_t>(sh->second.size(), 0), sh->second};
    }
  std::map<std::string, Region> out;
  for (auto& [name, r] : acc) {
    if (!r) continue;
    const auto& dims = shapes.at(name);
    bool whole = true;
    for (size_t a = 0; a < dims.size(); ++a) whole = whole && r->start[a] == 0 && r->end[a] == dims[a];
    if (!whole) out.emplace(name, std::move(*r));
  }
  return out;
}

}  // namespace luminal::dist
