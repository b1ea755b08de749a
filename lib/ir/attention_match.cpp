#include "ir/attention_match.hpp"

#include <algorithm>

#include "ir/tensor_lang.hpp"
#include "ir/unit_reshape.hpp"

namespace luminal::ir {

namespace {

using detail::GraphImpl;
using detail::Node;
using detail::PrimOp;

bool is_one(const Dim& d) { return d.as_constant() == int64_t{1}; }
// The op table's classes (graph/op_table.hpp), so a new primitive is classified here too.
bool is_reduce(PrimOp o) { return ir::is_reduce(ir::to_op(o)); }
bool is_view(PrimOp o) { return ir::is_view(ir::to_op(o)); }
bool is_elementwise(PrimOp o) { return ir::is_elementwise(ir::to_op(o)); }

// A contraction: a sum over a product. (Usually of two broadcasts; with one query row
// the algebra may have removed a unit broadcast, so any product counts.)
bool is_contraction(const GraphImpl& b, const Node& n) {
  return n.op == PrimOp::SumReduce && b.nodes[n.inputs[0]].op == PrimOp::Mul;
}

// Follows views (and, if `through_unary`, one elementwise unary op of that kind) down
// from `n`, carrying for each axis of the current node a label (the axis of the starting
// node it is indexed by, or -1 for a constant-0 index). Reshapes may only insert or drop
// unit dims; slices and pads stop the walk. Returns the first node that is not a view,
// with `labels` describing its axes.
std::optional<uint32_t> strip_views(const GraphImpl& b, uint32_t n, std::vector<int>& labels) {
  for (;;) {
    const Node& v = b.nodes[n];
    if (!is_view(v.op)) return n;
    const Node& in = b.nodes[v.inputs[0]];
    std::vector<int> next(in.shape.size(), -1);
    switch (v.op) {
      case PrimOp::Permute:
        for (size_t i = 0; i < v.perm.size(); ++i) next[static_cast<size_t>(v.perm[i])] = labels[i];
        break;
      case PrimOp::Expand:
        for (size_t i = 0; i < in.shape.size(); ++i) next[i] = is_one(in.shape[i]) ? -1 : labels[i];
        break;
      case PrimOp::Reshape: {
        const auto of = unit_reshape_axes(v.shape, in.shape);
        if (!of) return std::nullopt;
        for (size_t k = 0; k < of->size(); ++k)
          if ((*of)[k] >= 0) next[static_cast<size_t>((*of)[k])] = labels[k];
        break;
      }
      default:
        return std::nullopt;
    }
    labels = std::move(next);
    n = v.inputs[0];
  }
}

std::vector<int> iota_labels(size_t n) {
  std::vector<int> l(n);
  for (size_t i = 0; i < n; ++i) l[i] = static_cast<int>(i);
  return l;
}

// `labels` index a node of `full_rank` axes with axis `axis` removed: a row statistic
// read back broadcast along that axis (keepdim + expand), in the same axis order.
// (A unit axis carries no index, so its label may have been dropped.)
bool is_row_broadcast(const std::vector<int>& labels, const std::vector<Dim>& stat_shape, size_t full_rank,
                      int axis) {
  if (labels.size() + 1 != full_rank || stat_shape.size() != labels.size()) return false;
  size_t k = 0;
  for (size_t t = 0; t < full_rank; ++t) {
    if (static_cast<int>(t) == axis) continue;
    const bool ok = labels[k] == static_cast<int>(t) || (labels[k] == -1 && is_one(stat_shape[k]));
    ++k;
    if (!ok) return false;
  }
  return true;
}

// A row statistic `stat` (a reduction over `axis` of a node shaped like P) read through
// views, optionally under one unary op `wrap` (recip for L, neg for M), at P's index.
// Returns the reduction node.
std::optional<uint32_t> row_stat(const GraphImpl& b, uint32_t use, size_t rank, PrimOp wrap, PrimOp red) {
  std::vector<int> labels = iota_labels(rank);
  auto n = strip_views(b, use, labels);
  if (!n) return std::nullopt;
  if (b.nodes[*n].op != wrap) return std::nullopt;
  n = strip_views(b, b.nodes[*n].inputs[0], labels);
  if (!n) return std::nullopt;
  const Node& r = b.nodes[*n];
  if (r.op != red || !is_row_broadcast(labels, r.shape, rank, r.axis)) return std::nullopt;
  return *n;
}

// For each axis of `score`: the axis of `r1` it is (-1: a unit axis), when every node
// between them -- on a path from `score` down to `r1` -- is elementwise or a reshape that
// only inserts or removes unit dims; nullopt otherwise.
std::optional<std::vector<int>> score_axes(const GraphImpl& b, uint32_t score, uint32_t r1) {
  // Bodies are topologically ordered: a node reaches r1 when one of its inputs does.
  std::vector<uint8_t> reaches(b.nodes.size(), 0);
  reaches[r1] = 1;
  for (uint32_t i = r1 + 1; i <= score; ++i)
    for (uint32_t x : b.nodes[i].inputs) reaches[i] |= reaches[x];
  if (!reaches[score]) return std::nullopt;
  for (uint32_t i = r1 + 1; i <= score; ++i) {
    if (!reaches[i]) continue;
    const Node& n = b.nodes[i];
    if (is_elementwise(n.op)) continue;
    if (n.op != PrimOp::Reshape || !unit_reshape_axes(n.shape, b.nodes[n.inputs[0]].shape))
      return std::nullopt;
  }
  const std::vector<Dim>& ss = b.nodes[score].shape;
  auto out = unit_reshape_axes(ss, b.nodes[r1].shape);
  if (!out) return std::nullopt;
  // A unit axis of both, at the same place (the scores' row of one query): keep it.
  if (ss.size() == b.nodes[r1].shape.size())
    for (size_t t = 0; t < ss.size(); ++t)
      if ((*out)[t] < 0) (*out)[t] = static_cast<int>(t);
  return out;
}

// Every reduction reachable from `n` (`stop` excluded and not walked through).
void reductions_below(const GraphImpl& b, uint32_t n, int stop, std::vector<uint32_t>& out,
                      std::vector<uint8_t>& seen) {
  if (seen[n] || static_cast<int>(n) == stop) return;
  seen[n] = 1;
  if (is_reduce(b.nodes[n].op)) out.push_back(n);
  for (uint32_t x : b.nodes[n].inputs) reductions_below(b, x, stop, out, seen);
}

}  // namespace

std::optional<AttentionMatch> match_attention(const GraphImpl& b) {
  const auto& nodes = b.nodes;
  if (b.outputs.empty()) return std::nullopt;
  const uint32_t root = b.outputs.at(0).second;
  int reductions = 0;
  for (const Node& n : nodes) reductions += is_reduce(n.op) ? 1 : 0;
  if (reductions != 4) return std::nullopt;
  AttentionMatch m;
  // R2: the reduction the root reaches through elementwise ops and reshapes.
  {
    std::vector<uint32_t> todo{root};
    int found = -1;
    std::vector<uint8_t> seen(nodes.size(), 0);
    while (!todo.empty()) {
      const uint32_t x = todo.back();
      todo.pop_back();
      if (seen[x]) continue;
      seen[x] = 1;
      const Node& n = nodes[x];
      if (is_reduce(n.op)) {
        if (found >= 0 && found != static_cast<int>(x)) return std::nullopt;
        found = static_cast<int>(x);
        continue;
      }
      if (is_elementwise(n.op) || n.op == PrimOp::Reshape)
        for (uint32_t k : n.inputs) todo.push_back(k);
    }
    if (found < 0 || !is_contraction(b, nodes[static_cast<size_t>(found)])) return std::nullopt;
    m.out_reduce = static_cast<uint32_t>(found);
  }
  const Node& r2 = nodes[m.out_reduce];
  const Node& mul2 = nodes[r2.inputs[0]];
  const size_t rank2 = mul2.shape.size();
  // The P side: the operand whose views lead to P = E * bcast(recip(L)).
  bool found_p = false;
  for (int side = 0; side < 2 && !found_p; ++side) {
    std::vector<int> labels = iota_labels(rank2);
    auto p = strip_views(b, mul2.inputs[static_cast<size_t>(side)], labels);
    // Weights rounded to a half and widened back (casts are elementwise: the labels
    // carry through them).
    int64_t rounded = -1;
    DType rounded_to = DType::f32;
    if (p && nodes[*p].op == PrimOp::Cast && nodes[*p].dtype == DType::f32) {
      const uint32_t outer = *p;
      auto inner = strip_views(b, nodes[outer].inputs[0], labels);
      if (inner && nodes[*inner].op == PrimOp::Cast &&
          (nodes[*inner].dtype == DType::f16 || nodes[*inner].dtype == DType::bf16)) {
        auto w = strip_views(b, nodes[*inner].inputs[0], labels);
        if (w && nodes[*w].dtype == DType::f32) {
          p = w;
          rounded = outer;
          rounded_to = nodes[*inner].dtype;
        }
      }
    }
    if (!p || nodes[*p].op != PrimOp::Mul) continue;
    const Node& pn = nodes[*p];
    const size_t prank = pn.shape.size();
    for (int e_in = 0; e_in < 2 && !found_p; ++e_in) {
      const uint32_t e = pn.inputs[static_cast<size_t>(e_in)];
      if (nodes[e].op != PrimOp::Exp2) continue;
      auto l = row_stat(b, pn.inputs[static_cast<size_t>(1 - e_in)], prank, PrimOp::Recip, PrimOp::SumReduce);
      if (!l || nodes[*l].inputs[0] != e) continue;
      // p_axis_of: the labels inverted (P axis -> R2 axis).
      std::vector<int> axis_of(rank2, -1);
      bool mapped = true;
      for (size_t t = 0; t < labels.size() && mapped; ++t) {
        if (labels[t] < 0) {
          mapped = is_one(pn.shape[t]);
          continue;
        }
        if (axis_of[static_cast<size_t>(labels[t])] >= 0) mapped = false;
        else axis_of[static_cast<size_t>(labels[t])] = static_cast<int>(t);
      }
      if (!mapped) continue;
      m.p_side = side;
      m.prob = *p;
      m.rounded = rounded;
      m.rounded_to = rounded_to;
      m.expo = e;
      m.row_sum = *l;
      m.key_axis = nodes[*l].axis;
      m.p_axis_of = std::move(axis_of);
      found_p = true;
    }
  }
  if (!found_p) return std::nullopt;
  // The key axis of P is R2's summed axis.
  if (m.p_axis_of[static_cast<size_t>(r2.axis)] != m.key_axis) return std::nullopt;
  // E = exp2((S - M) * c): add(S, neg M) in either order, times a positive constant.
  const Node& prod = nodes[nodes[m.expo].inputs[0]];
  if (prod.op != PrimOp::Mul) return std::nullopt;
  const size_t prank = nodes[m.prob].shape.size();
  bool ok = false;
  for (int c_in = 0; c_in < 2 && !ok; ++c_in) {
    std::vector<int> cl = iota_labels(prank);
    auto c = strip_views(b, prod.inputs[static_cast<size_t>(c_in)], cl);
    if (!c || nodes[*c].op != PrimOp::Constant || !(nodes[*c].value > 0)) continue;
    const Node& diff = nodes[prod.inputs[static_cast<size_t>(1 - c_in)]];
    if (diff.op != PrimOp::Add) continue;
    for (int s_in = 0; s_in < 2 && !ok; ++s_in) {
      const uint32_t s = diff.inputs[static_cast<size_t>(s_in)];
      auto mx = row_stat(b, diff.inputs[static_cast<size_t>(1 - s_in)], prank, PrimOp::Neg, PrimOp::MaxReduce);
      if (!mx || nodes[*mx].inputs[0] != s || nodes[*mx].axis != m.key_axis) continue;
      m.score = s;
      m.row_max = *mx;
      m.exp2_scale = nodes[*c].value;
      ok = true;
    }
  }
  if (!ok) return std::nullopt;
  // R1: the one reduction below S, a contraction whose operands reduce nothing.
  std::vector<uint32_t> below;
  std::vector<uint8_t> seen(nodes.size(), 0);
  reductions_below(b, m.score, -1, below, seen);
  if (below.size() != 1 || !is_contraction(b, nodes[below[0]])) return std::nullopt;
  m.score_reduce = below[0];
  // S is R1's result under elementwise ops and reshapes that only insert or remove unit
  // dims: the streaming kernel indexes S by R1's output axes (r1_axis_of;
  // kernel/lower/emit_attention.cpp). Any other view between them (scores reshaped
  // across heads) leaves the body to generic loops, which the model must not price as
  // this kernel.
  {
    auto r1_axes = score_axes(b, m.score, m.score_reduce);
    if (!r1_axes || (*r1_axes)[static_cast<size_t>(m.key_axis)] < 0) return std::nullopt;
    m.r1_axis_of = std::move(*r1_axes);
  }
  // The V side and the epilogue of R2 reduce nothing: the four reductions are all.
  std::vector<uint32_t> v_red;
  std::vector<uint8_t> seen2(nodes.size(), 0);
  reductions_below(b, mul2.inputs[static_cast<size_t>(1 - m.p_side)], -1, v_red, seen2);
  if (!v_red.empty()) return std::nullopt;
  std::vector<uint32_t> top;
  std::vector<uint8_t> seen3(nodes.size(), 0);
  reductions_below(b, root, static_cast<int>(m.out_reduce), top, seen3);
  if (!top.empty()) return std::nullopt;
  return m;
}

bool attention_output_contiguous(const GraphImpl& b, const AttentionMatch& m) {
  const Node& r2 = b.nodes[m.out_reduce];
  const std::vector<Dim>& in2 = b.nodes[r2.inputs[0]].shape;
  auto unit = [](const Dim& d) { return d.as_constant() == int64_t{1}; };
  int dv = -1;
  for (size_t t = 0; t < in2.size(); ++t)
    if (m.p_axis_of[t] < 0 && !unit(in2[t])) {
      if (dv >= 0) return false;  // two value axes
      dv = static_cast<int>(t);
    }
  for (size_t t = static_cast<size_t>(dv + 1); dv >= 0 && t < in2.size(); ++t)
    if (static_cast<int64_t>(t) != r2.axis && !unit(in2[t])) return false;
  return true;
}

}  // namespace luminal::ir
