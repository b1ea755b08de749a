#include "ir/kernel_body.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "cost/gpu_launch.hpp"
#include "ir/attention_match.hpp"
#include "ir/build.hpp"
#include "ir/unit_reshape.hpp"
#include "luminal/error.hpp"

namespace luminal::ir {

namespace {

bool is_slot(const detail::Node& n) { return n.op == PrimOp::Input && n.name.starts_with('%'); }

bool same_dims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].same_as(b[i])) return false;
  return true;
}

double numel_of(const std::vector<Dim>& shape, const DimGuess& dims) {
  double n = 1;
  for (const Dim& d : shape) {
    double v;
    try {
      v = static_cast<double>(d.evaluate(dims));
    } catch (const Error&) {
      v = static_cast<double>(std::min<int64_t>(d.upper_bound(), 1024));
    }
    n *= std::max(v, 0.0);
  }
  return n;
}

// An expand that repeats elements: some input dim is 1 where the output's is not.
bool broadcasts(const detail::Node& expand, const detail::Node& input) {
  for (size_t i = 0; i < expand.shape.size() && i < input.shape.size(); ++i) {
    auto in = input.shape[i].as_constant();
    auto out = expand.shape[i].as_constant();
    if (in && *in == 1 && !(out && *out == 1)) return true;
  }
  return false;
}

// Every body node `from` reaches through its inputs, `from` included: a byte per node.
std::vector<uint8_t> nodes_below(const detail::GraphImpl& b, uint32_t from) {
  std::vector<uint8_t> seen(b.nodes.size(), 0);
  std::vector<uint32_t> todo{from};
  while (!todo.empty()) {
    const uint32_t x = todo.back();
    todo.pop_back();
    if (seen[x]) continue;
    seen[x] = 1;
    for (uint32_t in : b.nodes[x].inputs) todo.push_back(in);
  }
  return seen;
}

// A GEMM as the graph spells it: a sum over the product of two broadcasts.
bool is_broadcast_contraction(const detail::GraphImpl& b, const detail::Node& n) {
  if (n.op != PrimOp::SumReduce) return false;
  const detail::Node& m = b.nodes[n.inputs[0]];
  return m.op == PrimOp::Mul && b.nodes[m.inputs[0]].op == PrimOp::Expand &&
         b.nodes[m.inputs[1]].op == PrimOp::Expand;
}

}  // namespace

bool segment_views(const detail::GraphImpl& b, uint32_t top, uint32_t bottom) {
  for (uint32_t x = top; x != bottom; x = b.nodes[x].inputs[0]) {
    const detail::Node& n = b.nodes[x];
    if (n.inputs.empty()) return false;  // a leaf before `bottom`: not its view
    if (n.op == PrimOp::Expand || n.op == PrimOp::Permute) continue;
    if (n.op != PrimOp::Reshape || !unit_reshape_axes(n.shape, b.nodes[n.inputs[0]].shape)) return false;
  }
  return true;
}

EpilogueReduction epilogue_reduction(const detail::GraphImpl& body, uint32_t root) {
  auto passes_epilogue = [](const detail::Node& n) {
    return is_elementwise(to_op(n.op)) || n.op == PrimOp::Reshape;
  };
  // The one sum_reduce the root reaches through elementwise ops and reshapes.
  int red = -1;
  std::function<bool(uint32_t)> walk = [&](uint32_t id) -> bool {
    const detail::Node& n = body.nodes[id];
    if (n.op == PrimOp::SumReduce) {
      if (red >= 0 && red != static_cast<int>(id)) return false;
      red = static_cast<int>(id);
      return true;
    }
    if (n.op == PrimOp::MaxReduce) return false;
    if (passes_epilogue(n))
      for (uint32_t k : n.inputs)
        if (!walk(k)) return false;
    return true;
  };
  if (!walk(root)) return {std::nullopt, "a max reduction or a second sum reduction in the tail"};
  if (red < 0) return {std::nullopt, "no sum reduction"};
  // Every path from the root to the reduction must be elementwise/reshape: the epilogue
  // replaces the reduction by the accumulator at the output position.
  std::map<uint32_t, bool> reach;
  std::function<bool(uint32_t)> reaches = [&](uint32_t id) -> bool {
    if (static_cast<int>(id) == red) return true;
    if (auto it = reach.find(id); it != reach.end()) return it->second;
    bool r = false;
    for (uint32_t k : body.nodes[id].inputs) r = reaches(k) || r;
    reach[id] = r;
    return r;
  };
  reaches(root);
  for (const auto& [id, r] : reach)
    if (r && !passes_epilogue(body.nodes[id])) return {std::nullopt, "the reduction is read through a view"};
  return {static_cast<uint32_t>(red), ""};
}

std::vector<uint32_t> row_accumulators(const detail::GraphImpl& b, uint32_t root) {
  // Depth first, inputs in order, each node once: the order the lowering's row-reduction
  // recogniser meets reductions in (kernel/lower/recognize.cpp), so the first is its pick.
  std::vector<uint32_t> found;
  std::vector<uint8_t> seen(b.nodes.size(), 0);
  std::function<void(uint32_t)> walk = [&](uint32_t id) {
    if (seen[id]) return;
    seen[id] = 1;
    const detail::Node& n = b.nodes[id];
    if (n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce) {
      found.push_back(id);
      return;
    }
    // (A reshape that only inserts or removes unit dims keeps every element's row-major
    // position: a product's kept unit axis dropped on the way to the root.)
    if (is_elementwise(to_op(n.op)) ||
        (n.op == PrimOp::Reshape && unit_reshape_axes(n.shape, b.nodes[n.inputs[0]].shape)))
      for (uint32_t k : n.inputs) walk(k);
  };
  walk(root);
  if (found.size() <= 1) return found;
  // One walk of the row computes them all, so none may need another's total first (a
  // reduction over a value normalized by another): each joins only if it lies under none
  // of those taken and none of them under it.
  const detail::Node& first = b.nodes[found[0]];
  std::vector<uint32_t> accs{found[0]};
  std::vector<uint8_t> under = nodes_below(b, first.inputs[0]);
  for (size_t i = 1; i < found.size() && accs.size() < kMaxRowAccumulators; ++i) {
    const detail::Node& n = b.nodes[found[i]];
    if (n.axis != first.axis || !same_dims(b.nodes[n.inputs[0]].shape, b.nodes[first.inputs[0]].shape) ||
        under[found[i]])
      continue;
    const std::vector<uint8_t> below = nodes_below(b, n.inputs[0]);
    if (std::any_of(accs.begin(), accs.end(), [&](uint32_t r) { return below[r] != 0; })) continue;
    accs.push_back(found[i]);
    for (size_t x = 0; x < below.size(); ++x) under[x] |= below[x];
  }
  return accs;
}

std::shared_ptr<const detail::GraphImpl> rows_as_gemm_body(const detail::GraphImpl& b) {
  const auto& nodes = b.nodes;
  if (b.outputs.size() != 1) return nullptr;
  // The one sum over a product with exactly one operand an expand.
  std::optional<uint32_t> sum;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const PrimOp o = nodes[i].op;
    if (o == PrimOp::MaxReduce || o == PrimOp::Gather || is_collective(to_op(o))) return nullptr;
    if (o != PrimOp::SumReduce) continue;
    if (sum) return nullptr;
    sum = i;
  }
  if (!sum) return nullptr;
  const detail::Node& mul = nodes[nodes[*sum].inputs[0]];
  if (mul.op != PrimOp::Mul) return nullptr;
  const bool e0 = nodes[mul.inputs[0]].op == PrimOp::Expand, e1 = nodes[mul.inputs[1]].op == PrimOp::Expand;
  if (e0 == e1) return nullptr;
  const uint32_t bare = mul.inputs[e0 ? 1 : 0];
  const uint32_t mul_id = nodes[*sum].inputs[0];
  // Copy, inserting expand(bare) right after `bare` (ids stay topological) and pointing
  // the product at it.
  auto out = std::make_shared<detail::GraphImpl>(b);
  auto& nn = out->nodes;
  nn.clear();
  std::vector<uint32_t> map(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    detail::Node n = nodes[i];
    for (uint32_t& x : n.inputs) x = map[x];
    map[i] = static_cast<uint32_t>(nn.size());
    nn.push_back(std::move(n));
    if (i == bare) {
      detail::Node e;
      e.op = PrimOp::Expand;
      e.inputs = {map[i]};
      e.shape = nodes[i].shape;
      e.dtype = nodes[i].dtype;
      e.op_name = nodes[i].op_name;
      e.loc = nodes[i].loc;
      nn.push_back(std::move(e));
    }
  }
  for (uint32_t& x : nn[map[mul_id]].inputs)
    if (x == map[bare]) x = map[bare] + 1;
  for (auto& o : out->outputs) o.second = map[o.second];
  if (classify(*out) != KernelKind::Gemm || !gemm_as_rows(*out)) return nullptr;
  return out;
}

std::optional<RowPrologue> row_prologue(const detail::GraphImpl& b, const std::vector<int64_t>& launch) {
  const detail::GpuGemmLaunch L = detail::GpuGemmLaunch::from(launch);
  if (L.engine != detail::GpuGemmEngine::Skinny || L.bk == detail::kSkinnyStaged) return std::nullopt;
  const auto& nodes = b.nodes;
  std::optional<uint32_t> top;
  for (uint32_t i = 0; i < nodes.size(); ++i)
    if (is_broadcast_contraction(b, nodes[i])) {
      if (top) return std::nullopt;
      top = i;
    }
  if (!top) return std::nullopt;
  const detail::Node& sum = nodes[*top];
  const detail::Node& mul = nodes[sum.inputs[0]];
  const auto k = nodes[sum.inputs[0]].shape.at(static_cast<size_t>(sum.axis)).as_constant();
  if (!k || *k < 1) return std::nullopt;
  // The reductions under each operand (all of them: one below another counts too).
  auto reductions_under = [&](uint32_t from) {
    std::vector<uint32_t> found;
    const std::vector<uint8_t> under = nodes_below(b, from);
    for (uint32_t x = 0; x < nodes.size(); ++x)
      if (under[x] && (nodes[x].op == PrimOp::SumReduce || nodes[x].op == PrimOp::MaxReduce))
        found.push_back(x);
    return found;
  };
  std::optional<RowPrologue> r;
  for (uint32_t side : {0u, 1u}) {
    const std::vector<uint32_t> red = reductions_under(mul.inputs[side]);
    if (red.empty()) continue;
    if (r || red.size() != 1 || is_broadcast_contraction(b, nodes[red[0]])) return std::nullopt;
    // One statistic a row of A: no more values than A has rows (a reduction over a unit
    // axis that A then reads along K is not one, and the lowering would stage it).
    const detail::Node& operand = nodes[mul.inputs[side]];
    const std::vector<Dim>& a_shape =
        operand.op == PrimOp::Expand ? nodes[operand.inputs[0]].shape : operand.shape;
    if (guessed_numel(nodes[red[0]].shape, {}) * static_cast<double>(*k) > guessed_numel(a_shape, {}))
      return std::nullopt;
    r = RowPrologue{*top, mul.inputs[side], red[0]};
  }
  if (r) return r;
  // No statistic: an operand broadcast along the other's columns that computes something,
  // the smaller one (the other, a weight, is streamed).
  auto pre_expand = [&](uint32_t side) -> const detail::Node& {
    const detail::Node& e = nodes[mul.inputs[side]];
    return e.op == PrimOp::Expand ? nodes[e.inputs[0]] : e;
  };
  for (uint32_t side : {0u, 1u}) {
    const detail::Node& operand = nodes[mul.inputs[side]];
    if (operand.op != PrimOp::Expand || !broadcasts(operand, nodes[operand.inputs[0]])) continue;
    if (guessed_numel(pre_expand(side).shape, {}) >= guessed_numel(pre_expand(1 - side).shape, {})) continue;
    const std::vector<uint8_t> under = nodes_below(b, operand.inputs[0]);
    bool computes = false, gathers = false;
    for (uint32_t x = 0; x < nodes.size(); ++x) {
      if (!under[x]) continue;
      const PrimOp o = nodes[x].op;
      gathers = gathers || o == PrimOp::Gather;
      computes = computes || (!is_leaf(to_op(o)) && !is_view(to_op(o)) && o != PrimOp::Cast);
    }
    if (computes && !gathers) return RowPrologue{*top, mul.inputs[side], RowPrologue::kNone};
  }
  return std::nullopt;
}

bool causal_mask(const detail::GraphImpl& b, uint32_t score) {
  // where(cond, s, -inf) in the score's epilogue with cond computed from indices only.
  std::vector<uint32_t> todo{score};
  std::vector<uint8_t> seen(b.nodes.size(), 0);
  while (!todo.empty()) {
    const uint32_t x = todo.back();
    todo.pop_back();
    if (seen[x]) continue;
    seen[x] = 1;
    const detail::Node& n = b.nodes[x];
    if (n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce) continue;
    if (n.op == PrimOp::Where) {
      uint32_t f = n.inputs[2];
      while (is_view(to_op(b.nodes[f].op))) f = b.nodes[f].inputs[0];
      if (b.nodes[f].op == PrimOp::Constant && std::isinf(b.nodes[f].value) && b.nodes[f].value < 0) {
        // the condition reads no slot
        std::vector<uint32_t> c{n.inputs[0]};
        bool index_only = true;
        while (!c.empty() && index_only) {
          const uint32_t y = c.back();
          c.pop_back();
          index_only = !is_slot(b.nodes[y]) && !is_reduce(to_op(b.nodes[y].op));
          for (uint32_t k : b.nodes[y].inputs) c.push_back(k);
        }
        if (index_only) return true;
      }
    }
    for (uint32_t k : n.inputs) todo.push_back(k);
  }
  return false;
}

bool hoists_broadcast(const detail::GraphImpl& body, uint32_t id) {
  const detail::Node& n = body.nodes[id];
  if (n.op != PrimOp::Expand || !broadcasts(n, body.nodes[n.inputs[0]])) return false;
  std::vector<uint32_t> todo{n.inputs[0]};
  std::vector<uint8_t> seen(body.nodes.size(), 0);
  while (!todo.empty()) {
    const uint32_t x = todo.back();
    todo.pop_back();
    if (seen[x]) continue;
    seen[x] = 1;
    const PrimOp o = body.nodes[x].op;
    if (o == PrimOp::SumReduce || o == PrimOp::MaxReduce || o == PrimOp::Gather) return false;
    if (detail::is_transcendental(o)) return true;
    for (uint32_t k : body.nodes[x].inputs) todo.push_back(k);
  }
  return false;
}

namespace {
// An add tree of pads joining consecutive pieces along one axis; `stored`: each piece a
// stored tensor (under views, maybe a widening cast), all of one dtype.
std::optional<StoredConcat> concat_tree(const detail::GraphImpl& body, uint32_t id, bool stored) {
  const auto& nodes = body.nodes;
  if (nodes[id].op != PrimOp::Add || nodes[id].dtype != DType::f32) return std::nullopt;
  StoredConcat c;
  // The add tree's leaves, left to right.
  std::vector<uint32_t> stack{id};
  while (!stack.empty()) {
    const uint32_t x = stack.back();
    stack.pop_back();
    if (nodes[x].op == PrimOp::Add) {
      c.adds.push_back(x);
      stack.push_back(nodes[x].inputs[1]);
      stack.push_back(nodes[x].inputs[0]);
    } else {
      c.pads.push_back(x);
    }
  }
  if (c.pads.size() < 2 || c.pads.size() > 8) return std::nullopt;
  // Pads of -0 only: x + -0 is x for every x, so each element is its piece's, read where
  // the piece lies. (Padded with +0 a piece's -0 sums to +0, which a read in place would
  // not give: ops' concat and matmul-siblings pad with -0.)
  for (uint32_t x : c.pads)
    if (nodes[x].op != PrimOp::Pad || nodes[x].value != 0.0 || !std::signbit(nodes[x].value))
      return std::nullopt;
  c.axis = nodes[c.pads[0]].axis;
  const auto ax = static_cast<size_t>(c.axis);
  // The add is commutative (and the algebra reorders it): the pieces are taken in the
  // order of their starts along the axis, each starting where the one before ends.
  const std::vector<uint32_t> leaves = std::move(c.pads);
  c.pads.clear();
  Dim end(0);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto next = std::find_if(leaves.begin(), leaves.end(), [&](uint32_t x) {
      return nodes[x].axis == c.axis && nodes[x].start.same_as(end) &&
             std::find(c.pads.begin(), c.pads.end(), x) == c.pads.end();
    });
    if (next == leaves.end()) return std::nullopt;
    c.pads.push_back(*next);
    const detail::Node& p = nodes[*next];
    uint32_t below = p.inputs[0];
    while (is_view(to_op(nodes[below].op))) below = nodes[below].inputs[0];
    // An f16/bf16 weight widened to f32: the GEMM converts the segment as it reads it.
    if (stored && nodes[below].op == PrimOp::Cast) {
      const DType from = nodes[nodes[below].inputs[0]].dtype;
      if (from != DType::f16 && from != DType::bf16) return std::nullopt;
      below = nodes[below].inputs[0];
      while (is_view(to_op(nodes[below].op))) below = nodes[below].inputs[0];
    }
    // One storage type for every piece (the GEMM driver reads one element type).
    if (i == 0) c.stored = nodes[below].dtype;
    if (stored && (nodes[below].op != PrimOp::Input || nodes[below].dtype != c.stored)) return std::nullopt;
    end = end + nodes[p.inputs[0]].shape[ax];
    if (!(end + p.end).same_as(nodes[id].shape[ax])) return std::nullopt;
  }
  return c;
}
}  // namespace

namespace {
// The strides in elements of node `top` over the first node below it that is neither a
// view nor a cast (a cast is elementwise: the layout passes through), as the lowering's
// index arithmetic finds them: per axis its stride, or nullopt where a reshape merges
// axes whose strides do not nest (the index then needs a division or a remainder, and
// a GEMM reading the value copies it first). Size-1 axes have stride 0.
std::vector<std::optional<Dim>> view_strides(const detail::GraphImpl& body, uint32_t top) {
  std::vector<uint32_t> chain;
  uint32_t x = top;
  while (is_view(to_op(body.nodes[x].op)) || body.nodes[x].op == PrimOp::Cast) {
    chain.push_back(x);
    x = body.nodes[x].inputs[0];
  }
  auto unit = [](const Dim& d) { return d.as_constant() == int64_t{1}; };
  const auto& base = body.nodes[x].shape;
  std::vector<std::optional<Dim>> st(base.size());
  Dim run(1);
  for (size_t i = base.size(); i-- > 0;) {
    st[i] = unit(base[i]) ? Dim(0) : run;
    run = run * base[i];
  }
  for (size_t c = chain.size(); c-- > 0;) {
    const detail::Node& n = body.nodes[chain[c]];
    const auto& in = body.nodes[n.inputs[0]].shape;
    std::vector<std::optional<Dim>> out(n.shape.size(), Dim(0));
    switch (n.op) {
      case PrimOp::Cast:
        out = st;
        break;
      case PrimOp::Permute:
        for (size_t i = 0; i < n.perm.size(); ++i) out[i] = st[static_cast<size_t>(n.perm[i])];
        break;
      case PrimOp::Expand:
        for (size_t i = 0; i < n.shape.size(); ++i) out[i] = unit(in[i]) ? std::optional<Dim>(Dim(0)) : st[i];
        break;
      case PrimOp::Slice: {
        out = st;
        auto& a = out[static_cast<size_t>(n.axis)];
        if (a) a = *a * Dim(n.step);
        break;
      }
      case PrimOp::Reshape: {
        // Groups of input and output axes with equal products (unit axes aside); a group
        // of several input axes keeps strides only if they nest.
        std::vector<size_t> ia, oa;
        for (size_t i = 0; i < in.size(); ++i)
          if (!unit(in[i])) ia.push_back(i);
        for (size_t j = 0; j < n.shape.size(); ++j)
          if (!unit(n.shape[j])) oa.push_back(j);
        size_t i = 0, j = 0;
        while (i < ia.size() && j < oa.size()) {
          const size_t i0 = i, j0 = j;
          Dim pi = in[ia[i++]], po = n.shape[oa[j++]];
          bool met = true;
          while (met && !pi.same_as(po)) {
            const auto a = pi.as_constant(), b = po.as_constant();
            if (a && b && *a < *b && i < ia.size()) {
              pi = pi * in[ia[i++]];
            } else if (a && b && *b < *a && j < oa.size()) {
              po = po * n.shape[oa[j++]];
            } else {
              met = false;  // symbolic sizes that do not pair up: give up on the rest
            }
          }
          if (!met) {
            j = j0;
            break;
          }
          bool nests = true;
          for (size_t t = i0; nests && t + 1 < i; ++t) {
            const auto &hi = st[ia[t]], &lo = st[ia[t + 1]];
            nests = hi && lo && hi->same_as(*lo * in[ia[t + 1]]);
          }
          if (nests && i - i0 == 1 && !st[ia[i0]]) nests = false;
          if (!nests) {
            for (size_t t = j0; t < j; ++t) out[oa[t]] = std::nullopt;
            continue;
          }
          Dim r = *st[ia[i - 1]];
          for (size_t t = j; t-- > j0;) {
            out[oa[t]] = r;
            r = r * n.shape[oa[t]];
          }
        }
        for (; j < oa.size(); ++j) out[oa[j]] = std::nullopt;
        break;
      }
      default:  // Pad: a guarded load, which no GEMM reads in place
        out.assign(n.shape.size(), std::nullopt);
        break;
    }
    st = std::move(out);
  }
  return st;
}
}  // namespace

bool strided_operand(const detail::GraphImpl& body, uint32_t contraction, int side) {
  const detail::Node& red = body.nodes[contraction];
  const detail::Node& mul = body.nodes[red.inputs[0]];
  const uint32_t e = mul.inputs[static_cast<size_t>(side)], o = mul.inputs[static_cast<size_t>(1 - side)];
  auto bcast = [&](uint32_t x, size_t t) {
    const detail::Node& n = body.nodes[x];
    if (n.op != PrimOp::Expand) return false;
    const auto& in = body.nodes[n.inputs[0]].shape;
    return in[t].as_constant() == int64_t{1} && n.shape[t].as_constant() != int64_t{1};
  };
  const auto st = view_strides(body, e);
  for (size_t t = 0; t < st.size(); ++t) {
    // The contraction's axis and this side's own axis (the other side broadcast along
    // it) are the matrix's; the rest are batch points, which may index anyhow.
    const bool matrix = static_cast<int>(t) == red.axis || (!bcast(e, t) && bcast(o, t));
    if (matrix && !st[t]) return false;
  }
  return true;
}

double guessed_numel(const std::vector<Dim>& shape, const DimGuess& dims) { return numel_of(shape, dims); }

bool is_leaf_class(const EGraph& g, Id cls) {
  for (const AttrNode& a : g.data(g.find(cls)).attributed)
    if (a.op == Op::Input || a.op == Op::Param) return true;
  return false;
}

bool is_param_class(const EGraph& g, Id cls) {
  for (const AttrNode& a : g.data(g.find(cls)).attributed)
    if (a.op == Op::Param) return true;
  return false;
}

std::optional<StoredConcat> stored_concat(const detail::GraphImpl& body, uint32_t id) {
  return concat_tree(body, id, true);
}

DType half_concat(const detail::GraphImpl& body, uint32_t id) {
  for (int depth = 0; is_view(to_op(body.nodes[id].op)); ++depth) {
    if (depth > 16) return DType::f32;
    id = body.nodes[id].inputs[0];
  }
  if (body.nodes[id].op != PrimOp::Add) return DType::f32;
  const auto cat = stored_concat(body, id);
  return cat && (cat->stored == DType::f16 || cat->stored == DType::bf16) ? cat->stored : DType::f32;
}

bool stacked_params(const detail::GraphImpl& body, const StoredConcat& cat,
                    const std::function<bool(const detail::Node& leaf)>& is_param) {
  // Each piece's views as (op, axis map), compared between pieces: the same views over
  // the packed buffer are then the concat.
  std::vector<std::pair<PrimOp, std::vector<int>>> first;
  for (size_t i = 0; i < cat.pads.size(); ++i) {
    std::vector<std::pair<PrimOp, std::vector<int>>> views;
    uint32_t x = body.nodes[cat.pads[i]].inputs[0];
    int axis = cat.axis;
    while (body.nodes[x].op != PrimOp::Input) {
      const detail::Node& n = body.nodes[x];
      if (views.size() > 16 || n.inputs.empty()) return false;
      const detail::Node& in = body.nodes[n.inputs[0]];
      if (n.op == PrimOp::Permute) {
        views.emplace_back(n.op, n.perm);
        axis = n.perm[static_cast<size_t>(axis)];
      } else if (n.op == PrimOp::Reshape) {
        const auto of = unit_reshape_axes(n.shape, in.shape);
        if (!of || (*of)[static_cast<size_t>(axis)] < 0) return false;
        views.emplace_back(n.op, *of);
        axis = (*of)[static_cast<size_t>(axis)];
      } else if (n.op == PrimOp::Cast && n.dtype == DType::f32 && in.dtype == cat.stored &&
                 cat.stored != DType::f32) {
        views.emplace_back(n.op, std::vector<int>{});  // a half weight widened: stored as the half
      } else {
        return false;  // a slice, a broadcast, arithmetic: not the param itself
      }
      x = n.inputs[0];
    }
    const detail::Node& leaf = body.nodes[x];
    if (axis != 0 || leaf.dtype != cat.stored || !is_param(leaf)) return false;
    if (i == 0)
      first = std::move(views);
    else if (views != first)
      return false;
  }
  return !cat.pads.empty();
}

std::optional<KeyConcat> key_concat(const detail::GraphImpl& body, uint32_t operand) {
  KeyConcat k;
  uint32_t x = operand;
  for (int depth = 0; body.nodes[x].op != PrimOp::Add; ++depth) {
    const PrimOp o = body.nodes[x].op;
    if (depth > 16 || (o != PrimOp::Reshape && o != PrimOp::Permute && o != PrimOp::Expand)) return std::nullopt;
    k.views.push_back(x);
    x = body.nodes[x].inputs[0];
  }
  auto c = concat_tree(body, x, false);
  if (!c || c->pads.size() > kMaxKeyConcatPieces) return std::nullopt;
  k.concat = x;
  k.pieces = *c;
  return k;
}

uint32_t BodyBuilder::slot(Id cls) {
  cls = g_.find(cls);
  auto it = slot_of_.find(cls);
  if (it != slot_of_.end()) return it->second;
  const ClassData& d = g_.data(cls);
  detail::Node n;
  n.op = PrimOp::Input;
  n.name = slot_name(static_cast<uint32_t>(slots_.size()));
  n.shape = d.shape;
  n.dtype = d.dtype;
  n.op_name = "slot";
  uint32_t id = body_.add(std::move(n));
  body_.inputs.push_back(id);
  slots_.push_back(cls);
  slot_of_.emplace(cls, id);
  return id;
}

std::optional<uint32_t> BodyBuilder::find(uint64_t h, const detail::Node& n,
                                          std::span<const uint32_t> inputs) const {
  auto [b, e] = memo_.equal_range(h);
  for (auto it = b; it != e; ++it)
    if (same_body_node(body_.nodes[it->second], n, inputs)) return it->second;
  return std::nullopt;
}

uint32_t BodyBuilder::add(detail::Node n) {
  const uint64_t h = hash_body_node(n);
  if (auto found = find(h, n, n.inputs)) return *found;
  uint32_t id = body_.add(std::move(n));
  memo_.emplace(h, id);
  return id;
}

uint32_t BodyBuilder::copy(const detail::GraphImpl& body, const std::vector<Id>& kids, int subst_slot,
                           uint32_t subst_value) {
  std::vector<uint32_t> map(body.nodes.size()), inputs;
  for (uint32_t i = 0; i < body.nodes.size(); ++i) {
    const detail::Node& bn = body.nodes[i];
    if (is_slot(bn)) {
      const int j = std::stoi(bn.name.substr(1));
      map[i] = j == subst_slot ? subst_value : slot(kids.at(static_cast<size_t>(j)));
      continue;
    }
    // Looked up before it is copied: most of a fused body's nodes are already here.
    inputs.clear();
    for (uint32_t x : bn.inputs) inputs.push_back(map[x]);
    const uint64_t h = hash_body_node(bn, inputs);
    if (auto found = find(h, bn, inputs)) {
      map[i] = *found;
      continue;
    }
    detail::Node n = bn;
    n.inputs = inputs;
    map[i] = body_.add(std::move(n));
    memo_.emplace(h, map[i]);
  }
  return map[body.outputs.at(0).second];
}

uint32_t BodyBuilder::rewire(uint32_t root, uint32_t node, Id cls) {
  const uint32_t s = slot(cls);
  std::vector<uint32_t> map(root + 1);
  for (uint32_t i = 0; i <= root; ++i) map[i] = i;
  map[node] = s;
  for (uint32_t i = node + 1; i <= root; ++i) {
    detail::Node n = body_.nodes[i];
    bool changed = false;
    for (uint32_t& x : n.inputs) {
      changed = changed || map[x] != x;
      x = map[x];
    }
    if (changed) map[i] = add(std::move(n));
  }
  return map[root];
}

bool BodyBuilder::reaches(uint32_t root, uint32_t node) const {
  if (node > root) return false;
  std::vector<bool> live(root + 1, false);
  live[root] = true;
  for (uint32_t i = root + 1; i-- > node;)
    if (live[i]) {
      if (i == node) return true;
      for (uint32_t x : body_.nodes[i].inputs) live[x] = true;
    }
  return false;
}

uint32_t BodyBuilder::emit_op(Op op, const Attr& at, const std::vector<uint32_t>& kids) {
  const size_t before = body_.nodes.size();
  uint32_t id = emit(body_, op, at, kids);
  if (body_.nodes.size() == before + 1) {
    detail::Node n = body_.nodes.back();
    body_.nodes.pop_back();
    return add(std::move(n));
  }
  for (size_t i = before; i < body_.nodes.size(); ++i)
    memo_.emplace(hash_body_node(body_.nodes[i]), static_cast<uint32_t>(i));
  return id;
}

std::optional<Variant> BodyBuilder::finish(uint32_t root, std::size_t max_nodes, bool classify_body) {
  // Keep what the root needs, renumbering slots in order of appearance.
  std::vector<bool> live(body_.nodes.size(), false);
  live[root] = true;
  for (size_t i = root + 1; i-- > 0;)
    if (live[i])
      for (uint32_t x : body_.nodes[i].inputs) live[x] = true;
  auto out = std::make_shared<detail::GraphImpl>();
  std::vector<uint32_t> map(body_.nodes.size(), 0);
  Variant v;
  // The builder is spent: its nodes move into the kernel's body, not copied (a fusion
  // pass builds thousands of bodies; copying each node's vectors and strings twice was
  // a tenth of a GPU block's compile).
  memo_.clear();
  for (uint32_t i = 0; i <= root; ++i) {
    if (!live[i]) continue;
    detail::Node n = std::move(body_.nodes[i]);
    if (is_slot(n)) {
      const size_t old = static_cast<size_t>(std::stoul(n.name.substr(1)));
      n.name = slot_name(static_cast<uint32_t>(v.kids.size()));
      v.kids.push_back(slots_[old]);
      map[i] = out->add(std::move(n));
      out->inputs.push_back(map[i]);
      continue;
    }
    for (uint32_t& x : n.inputs) x = map[x];
    map[i] = out->add(std::move(n));
  }
  out->outputs.emplace_back("out", map[root]);
  body_ = detail::GraphImpl{};
  if (out->nodes.size() > max_nodes) return std::nullopt;
  const std::optional<KernelKind> kind =
      classify_body ? classify(*out) : std::optional(KernelKind::Elementwise);
  if (!kind) return std::nullopt;
  auto spec = std::make_shared<KernelSpec>();
  spec->kind = *kind;
  spec->slots = static_cast<uint32_t>(v.kids.size());
  spec->body = std::move(out);
  spec->finalize();
  v.spec = std::move(spec);
  return v;
}

namespace {

// A contraction one of whose operands' expand adds nothing (its input has its shape): each
// output element one row of the matrix against the vector, a matrix-vector product.
bool vector_product(const detail::GraphImpl& b, const detail::Node& n) {
  if (!is_broadcast_contraction(b, n)) return false;
  const detail::Node& m = b.nodes[n.inputs[0]];
  for (uint32_t x : m.inputs) {
    const detail::Node& e = b.nodes[x];
    if (same_dims(b.nodes[e.inputs[0]].shape, e.shape)) return true;
  }
  return false;
}

// The row kind: reductions sharing one input shape and axis, each reached from the root
// along row-safe edges (`bad_row`: the nodes that are not).
std::optional<KernelKind> row_reduction(const detail::GraphImpl& b, const std::vector<uint32_t>& reduces,
                                        const std::vector<uint8_t>& bad_row) {
  const auto& nodes = b.nodes;
  const detail::Node& first = nodes[reduces[0]];
  for (uint32_t r : reduces) {
    const detail::Node& n = nodes[r];
    if (bad_row[r] || n.axis != first.axis ||
        !same_dims(nodes[n.inputs[0]].shape, nodes[first.inputs[0]].shape))
      return std::nullopt;
  }
  return KernelKind::Reduction;
}

// Whether a broadcast larger than one row of the product lies under its matrix operand
// `e` (through views and elementwise ops): a batch of tokens each times one weight,
// spelled as products of one row each, reads the weight once per token as rows. A row
// kernel would read it again for each (the cost model does not charge that re-read), where
// a GEMM reads it once per tile. A vector broadcast over the rows (a norm's weight) is not.
bool matrix_broadcast_below(const detail::GraphImpl& b, uint32_t e, const Dim& k) {
  const auto row = k.as_constant();
  std::vector<uint32_t> todo{e};
  std::vector<uint8_t> seen(b.nodes.size(), 0);
  while (!todo.empty()) {
    const uint32_t x = todo.back();
    todo.pop_back();
    if (seen[x]) continue;
    seen[x] = 1;
    const detail::Node& n = b.nodes[x];
    if (!is_view(to_op(n.op)) && !is_elementwise(to_op(n.op))) continue;
    if (n.op == PrimOp::Expand && broadcasts(n, b.nodes[n.inputs[0]])) {
      double elements = 1;
      for (const Dim& d : b.nodes[n.inputs[0]].shape) {
        const auto c = d.as_constant();
        if (!c) return true;
        elements *= static_cast<double>(*c);
      }
      if (!row || elements > static_cast<double>(*row)) return true;
    }
    for (uint32_t i : n.inputs) todo.push_back(i);
  }
  return false;
}
}  // namespace

bool gemm_as_rows(const detail::GraphImpl& b) {
  const auto& nodes = b.nodes;
  if (b.outputs.empty()) return false;
  const uint32_t root = b.outputs.at(0).second;
  std::vector<uint32_t> reduces;
  bool contraction = false;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const detail::Node& n = nodes[i];
    if (n.op == PrimOp::Gather || is_collective(to_op(n.op))) return false;
    if (n.op != PrimOp::SumReduce && n.op != PrimOp::MaxReduce) continue;
    reduces.push_back(i);
    if (is_broadcast_contraction(b, n)) {
      if (!vector_product(b, n)) return false;
      const detail::Node& m = b.nodes[n.inputs[0]];
      const Dim& k = b.nodes[n.inputs[0]].shape[static_cast<size_t>(n.axis)];
      for (uint32_t e : m.inputs)
        if (same_dims(b.nodes[b.nodes[e].inputs[0]].shape, b.nodes[e].shape) &&
            matrix_broadcast_below(b, e, k))
          return false;
      contraction = true;
    }
  }
  if (!contraction) return false;
  std::vector<uint8_t> bad_row(nodes.size(), 0);
  for (size_t i = root + 1; i-- > 0;) {
    const detail::Node& n = nodes[i];
    const bool row_ok = is_elementwise(to_op(n.op)) || n.op == PrimOp::Reshape || n.op == PrimOp::Expand ||
                        n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce;
    for (uint32_t x : n.inputs) bad_row[x] |= static_cast<uint8_t>(bad_row[i] || !row_ok);
  }
  return row_reduction(b, reduces, bad_row).has_value();
}

std::optional<KernelKind> classify(const detail::GraphImpl& b) {
  const auto& nodes = b.nodes;
  const uint32_t root = b.outputs.at(0).second;
  std::vector<uint32_t> reduces;
  bool gather = false, collective = false;
  size_t slots = 0;
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    const detail::Node& n = nodes[i];
    if (n.op == PrimOp::Gather) gather = true;
    if (is_collective(to_op(n.op))) collective = true;
    if (n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce) reduces.push_back(i);
    if (is_slot(n)) ++slots;
  }
  // A collective is a host step of its own: it reads one whole buffer and writes one;
  // nothing is fused into it or around it.
  if (collective) {
    if (is_collective(to_op(nodes[root].op)) && nodes.size() == 2 && slots == 1) return KernelKind::Collective;
    return std::nullopt;
  }
  if (gather) {
    if (nodes[root].op == PrimOp::Gather && nodes.size() == slots + 1) return KernelKind::Gather;
    return std::nullopt;
  }
  if (reduces.empty()) return KernelKind::Elementwise;
  // Which nodes are reached from the root only along epilogue-safe edges.
  std::vector<uint8_t> bad_row(nodes.size(), 0), bad_gemm(nodes.size(), 0);
  for (size_t i = root + 1; i-- > 0;) {
    const detail::Node& n = nodes[i];
    const bool ew = is_elementwise(to_op(n.op));
    const bool row_ok = ew || n.op == PrimOp::Reshape || n.op == PrimOp::Expand ||
                        n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce;
    const bool gemm_ok = ew || n.op == PrimOp::Reshape;
    for (uint32_t x : n.inputs) {
      bad_row[x] |= static_cast<uint8_t>(bad_row[i] || !row_ok);
      bad_gemm[x] |= static_cast<uint8_t>(bad_gemm[i] || !gemm_ok);
    }
  }
  bool any_gemm = false;
  for (uint32_t r : reduces) any_gemm = any_gemm || is_broadcast_contraction(b, nodes[r]);
  // Attention as the math defines it; the streaming kernel is the online-softmax rule's.
  if (reduces.size() == 4 && match_attention(b)) return KernelKind::AttentionTwoPass;
  if (any_gemm) {
    // The contraction: the one reduction the root reaches along epilogue-safe edges.
    // Every other reduction must lie inside its operands (a prologue: RMSNorm's row
    // statistic, computed once per operand row before the tiles) and not be a second
    // contraction; nothing but the contraction may be reached from the root directly.
    int top = -1;
    bool several = false;
    for (uint32_t r : reduces)
      if (!bad_gemm[r] && is_broadcast_contraction(b, nodes[r])) {
        several = several || top >= 0;
        top = static_cast<int>(r);
      }
    // Several products of one vector (each a row of one operand against the other, whose
    // expand adds no axis: a decode step's gate and up, both over its x) are row
    // reductions side by side, the kind below; no GEMM holds two.
    if (several) {
      if (!std::all_of(reduces.begin(), reduces.end(),
                       [&](uint32_t r) { return vector_product(b, nodes[r]); }))
        return std::nullopt;
      return row_reduction(b, reduces, bad_row);
    }
    if (top < 0) return std::nullopt;
    // Nodes reached from the root without passing through the contraction.
    std::vector<uint8_t> outside(nodes.size(), 0);
    outside[root] = 1;
    for (size_t i = root + 1; i-- > 0;)
      if (outside[i] && static_cast<int>(i) != top)
        for (uint32_t x : nodes[i].inputs) outside[x] = 1;
    // No prologue reduction is a dot product against a broadcast operand (one query row's
    // scores): the operand's preparation would recompute what feeds it for every element
    // of the broadcast (attention in an output projection's prologue); attention is its
    // own kind, and a row statistic (RMSNorm, a softmax over stored scores) stays allowed.
    // (A broadcast by a few -- a grouped-query head repeat -- is cheap to recompute.)
    auto broadcast_product = [&](const detail::Node& n) {
      if (n.op != PrimOp::SumReduce || nodes[n.inputs[0]].op != PrimOp::Mul) return false;
      for (uint32_t x : nodes[n.inputs[0]].inputs) {
        const detail::Node& e = nodes[x];
        if (e.op != PrimOp::Expand) continue;
        const detail::Node& in = nodes[e.inputs[0]];
        double factor = 1;
        for (size_t i = 0; i < e.shape.size() && i < in.shape.size(); ++i) {
          auto a = in.shape[i].as_constant(), o = e.shape[i].as_constant();
          if (a && *a == 1 && !(o && *o == 1)) factor *= o ? static_cast<double>(*o) : 1e9;
        }
        if (factor > 8) return true;
      }
      return false;
    };
    for (uint32_t r : reduces) {
      if (static_cast<int>(r) == top) continue;
      if (outside[r] || is_broadcast_contraction(b, nodes[r]) || broadcast_product(nodes[r]))
        return std::nullopt;
    }
    return KernelKind::Gemm;
  }
  return row_reduction(b, reduces, bad_row);
}

std::optional<Variant> lower_node(const EGraph& g, Id node) {
  NodeView v = g.node(node);
  if (v.op == Op::Input || v.op == Op::Param || v.op == Op::Kernel) return std::nullopt;
  BodyBuilder b(g);
  std::vector<uint32_t> kids;
  for (Id k : v.kids) {
    const ClassData& d = g.data(k);
    // Scalar constants and index ramps are cheaper inline than read from a buffer.
    if (d.constant && d.shape.empty()) {
      Attr c;
      c.value = *d.constant;
      c.dtype = d.dtype;
      kids.push_back(b.emit_op(Op::Constant, c, {}));
      continue;
    }
    const AttrNode* iota = nullptr;
    for (const AttrNode& an : d.attributed)
      if (an.op == Op::Iota) iota = &an;
    if (iota) {
      kids.push_back(b.emit_op(Op::Iota, g.analysis().attrs().get(iota->payload), {}));
      continue;
    }
    kids.push_back(b.slot(k));
  }
  uint32_t root = b.emit_op(v.op, g.analysis().attrs().get(v.payload), kids);
  return b.finish(root, 1u << 20);
}

std::optional<Variant> substitute(const EGraph& g, const Variant& consumer, std::size_t slot,
                                  const Variant& producer, std::size_t max_nodes) {
  BodyBuilder b(g);
  uint32_t p = b.copy(*producer.spec->body, producer.kids);
  uint32_t root = b.copy(*consumer.spec->body, consumer.kids, static_cast<int>(slot), p);
  return b.finish(root, max_nodes);
}

std::optional<Variant> read_computed(const EGraph& g, const Variant& consumer, Id cls,
                                     const Variant& computed, std::size_t max_nodes) {
  BodyBuilder b(g);
  // Copied into one builder, equal nodes over the same slots are one node: the consumer's
  // copy reaches `y` exactly when its body computes what `computed` does.
  const detail::GraphImpl& cb = *computed.spec->body;
  if (is_slot(cb.nodes.at(cb.outputs.at(0).second))) return std::nullopt;  // (a copy of a slot)
  const uint32_t y = b.copy(cb, computed.kids);
  const uint32_t root = b.copy(*consumer.spec->body, consumer.kids);
  if (y == root || !b.reaches(root, y)) return std::nullopt;
  return b.finish(b.rewire(root, y, cls), max_nodes);
}

std::optional<Variant> nest(const EGraph& g, const Variant& producer, std::size_t slot, const Variant& inner,
                            std::size_t max_nodes) {
  BodyBuilder b(g);
  uint32_t p = b.copy(*inner.spec->body, inner.kids);
  uint32_t root = b.copy(*producer.spec->body, producer.kids, static_cast<int>(slot), p);
  return b.finish(root, max_nodes, false);
}

// Elements of slot `slot` the kernel reads: the whole buffer, unless every use reaches it
// through a slice (a shard of a weight, docs/distributed.md): then the largest slice
// (permutes and reshapes on the way keep the count).
static double read_elements(const detail::GraphImpl& body, uint32_t slot, const std::vector<double>& numel) {
  const auto& nodes = body.nodes;
  double most = 0;
  bool any = false;
  for (uint32_t u = slot + 1; u < nodes.size(); ++u) {
    const auto& in = nodes[u].inputs;
    if (std::find(in.begin(), in.end(), slot) == in.end()) continue;
    any = true;
    // Follow single-input views from this use down to a slice.
    uint32_t x = u;
    double seen = numel[slot];
    for (;;) {
      const PrimOp o = nodes[x].op;
      if (o == PrimOp::Slice) seen = std::min(seen, numel[x]);
      if (o != PrimOp::Slice && o != PrimOp::Permute && o != PrimOp::Reshape) break;
      uint32_t next = 0, users = 0;
      for (uint32_t v = x + 1; v < nodes.size(); ++v)
        for (uint32_t k : nodes[v].inputs)
          if (k == x) {
            next = v;
            ++users;
          }
      if (users != 1) break;
      x = next;
    }
    most = std::max(most, seen);
  }
  return any ? most : numel[slot];
}

// What one rank moves for a collective, as the runtime does it (lib/dist/collectives.cpp):
// all_reduce either gathers every rank's operand and adds them in rank order, or (launch
// {kAllReduceScatterGather}) exchanges blocks of ceil(n/P) elements all-to-all, adds its
// own block in rank order and all_gathers the sums -- both bit-identical on every rank;
// all_gather receives the other ranks' blocks; reduce_scatter exchanges blocks all-to-all
// and adds its own block in rank order.
static detail::KernelWork collective_work(const detail::Node& n, const detail::Node& in,
                                          const std::vector<int64_t>& launch, const DimGuess& dims) {
  detail::KernelWork w;
  w.engine = detail::KernelWork::Engine::Collective;
  const double p = static_cast<double>(std::max<int64_t>(n.step, 1));
  const double es = static_cast<double>(dtype_size(n.dtype));
  const double numel = numel_of(in.shape, dims);
  const double in_bytes = numel * es, out_bytes = numel_of(n.shape, dims) * es;
  w.bytes_written = out_bytes;
  w.link_steps = p - 1;
  switch (n.op) {
    case PrimOp::AllReduce:
      if (launch.size() == 1 && launch[0] == kAllReduceScatterGather) {
        const double block = std::ceil(numel / p), padded = block * p;
        w.link_steps = 2 * (p - 1);                // all_to_all, then all_gather
        w.link_bytes = 2 * (p - 1) * block * es;   // the other ranks' blocks, twice
        w.bytes_read = padded * es;                // the ordered sum of P received blocks
        w.bytes_written = block * es + out_bytes;  // this rank's sums, the gathered result
        if (padded != numel) {                     // P blocks padded in scratch, both ways
          w.bytes_read += 2 * in_bytes;
          w.bytes_written += 2 * in_bytes;
        }
        w.flops = (p - 1) * block;
        break;
      }
      w.link_bytes = (p - 1) * in_bytes;
      w.bytes_read = p * in_bytes;  // the ordered sum
      w.flops = (p - 1) * numel;
      break;
    case PrimOp::AllGather:
      w.link_bytes = (p - 1) * in_bytes;
      w.bytes_read = in_bytes;
      break;
    default:  // ReduceScatter
      w.link_bytes = (p - 1) / p * in_bytes;
      w.bytes_read = in_bytes;
      w.flops = (p - 1) * numel_of(n.shape, dims);
      break;
  }
  return w;
}

std::optional<uint32_t> attention_q_operand(const detail::GraphImpl& body, const AttentionMatch& att) {
  const detail::Node& r1 = body.nodes[att.score_reduce];
  const detail::Node& mul = body.nodes[r1.inputs[0]];
  // The key axis of S, in R1's output, then its input (R1 removes its summed axis).
  const int key_out = att.r1_axis_of.at(static_cast<size_t>(att.key_axis));
  const size_t key = static_cast<size_t>(key_out < r1.axis ? key_out : key_out + 1);
  std::optional<uint32_t> q;
  for (uint32_t e : mul.inputs) {
    const detail::Node& n = body.nodes[e];
    if (n.op != PrimOp::Expand || key >= n.shape.size()) continue;
    const detail::Node& in = body.nodes[n.inputs[0]];
    if (key < in.shape.size() && in.shape[key].as_constant() == int64_t{1} &&
        n.shape[key].as_constant() != int64_t{1}) {
      if (q) return std::nullopt;  // both broadcast along the keys: one key, no Q to tell
      q = e;
    }
  }
  return q;
}

std::vector<int64_t> body_launch_key(const KernelSpec& spec, const LoweringTraits& traits) {
  if (spec.kind == KernelKind::Collective) return spec.launch;  // collective_work reads it whole
  if (traits.gemm_row_prologue && spec.kind == KernelKind::Gemm) {
    // row_prologue reads the engine, the rows of a tile, clamped to 1..8, and whether the
    // operand is staged.
    const detail::GpuGemmLaunch L = detail::GpuGemmLaunch::from(spec.launch);
    if (L.engine == detail::GpuGemmEngine::Skinny)
      return {1, std::clamp<int64_t>(L.bm, 1, 8), L.bk == detail::kSkinnyStaged ? 1 : 0};
  }
  return {};
}

void add_launch_work(detail::KernelWork& w, const KernelSpec& spec) {
  w.launch = spec.launch;
  if (spec.kind != KernelKind::Gemm) return;
  if (spec.launch.size() < 2) {  // no tile chosen yet: assume half the tile is wasted
    w.engine_fraction = 0.5;
    w.tile_area = 0;
    return;
  }
  // Utilization of the tiles: the fraction of each tile that holds real output (the
  // cost model adds how much a smaller tile loses in reuse).
  const double m = w.gemm_m, n = w.gemm_n;
  const double tm = static_cast<double>(spec.launch[0]), tn = static_cast<double>(spec.launch[1]);
  w.engine_fraction = (m / (std::ceil(m / tm) * tm)) * (n / (std::ceil(n / tn) * tn));
  w.tile_area = tm * tn;
}

detail::KernelWork kernel_work(const EGraph& g, const KernelSpec& spec, const std::vector<Id>& kids,
                               const DimGuess& dims, const LoweringTraits& traits,
                               std::span<const uint8_t> param_slots) {
  detail::KernelWork w = body_work(g, spec, kids, dims, traits, param_slots);
  add_launch_work(w, spec);
  return w;
}

detail::KernelWork body_work(const EGraph& g, const KernelSpec& spec, const std::vector<Id>& kids,
                             const DimGuess& dims, const LoweringTraits& traits,
                             std::span<const uint8_t> param_slots) {
  // Slots whose class is an Input or Param of the program (its leaves).
  auto leaf_slot = [&](const detail::Node& slot) {
    if (kids.empty() || slot.name.size() < 2 || slot.name[0] != '%') return false;
    const auto j = static_cast<size_t>(std::stoul(slot.name.substr(1)));
    if (j >= kids.size()) return false;
    return is_leaf_class(g, kids[j]);
  };
  auto param_slot = [&](const detail::Node& slot) {
    if (slot.name.size() < 2 || slot.name[0] != '%') return false;
    const auto j = static_cast<size_t>(std::stoul(slot.name.substr(1)));
    if (!param_slots.empty()) return j < param_slots.size() && param_slots[j] != 0;
    return j < kids.size() && is_param_class(g, kids[j]);
  };
  const auto& nodes = spec.body->nodes;
  const uint32_t root = spec.body->outputs.at(0).second;
  std::vector<double> numel(nodes.size()), dom(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) numel[i] = numel_of(nodes[i].shape, dims);
  dom[root] = numel[root];
  // Axis `axis` of `bottom` is, at the product's operand `e` (views above it, up to e),
  // one of that operand's own axes: not the contraction `reduce`'s, and one the other
  // operand broadcasts along (a GEMM's M or N, not a batch axis).
  auto own_axis = [&](size_t reduce, uint32_t e, uint32_t bottom, int axis) {
    std::vector<uint32_t> chain;
    for (uint32_t x = e; x != bottom; x = nodes[x].inputs[0]) {
      if (chain.size() > 16 || nodes[x].inputs.empty()) return false;
      chain.push_back(x);
    }
    for (size_t c = chain.size(); c-- > 0;) {
      const detail::Node& n = nodes[chain[c]];
      if (n.op == PrimOp::Permute) {
        const auto it = std::find(n.perm.begin(), n.perm.end(), axis);
        if (it == n.perm.end()) return false;
        axis = static_cast<int>(it - n.perm.begin());
      } else if (n.op == PrimOp::Reshape) {
        const auto of = unit_reshape_axes(n.shape, nodes[n.inputs[0]].shape);
        if (!of) return false;
        const auto it = std::find(of->begin(), of->end(), axis);
        if (it == of->end()) return false;
        axis = static_cast<int>(it - of->begin());
      } else if (n.op != PrimOp::Expand) {
        return false;
      }
    }
    const detail::Node& mul = nodes[nodes[reduce].inputs[0]];
    if (axis == nodes[reduce].axis || mul.inputs.size() != 2) return false;
    const detail::Node& other = nodes[mul.inputs[mul.inputs[0] == e ? 1 : 0]];
    const auto t = static_cast<size_t>(axis);
    return other.op == PrimOp::Expand && t < other.shape.size() &&
           nodes[other.inputs[0]].shape[t].as_constant() == int64_t{1} &&
           other.shape[t].as_constant() != int64_t{1};
  };
  detail::KernelWork w;
  if (spec.kind == KernelKind::Collective)
    return collective_work(nodes[root], nodes[nodes[root].inputs[0]], spec.launch, dims);
  // A GEMM's operands are computed once into a packed (or contiguous) buffer before the
  // tile loops, not per multiply: below the broadcast that feeds the product, a prologue
  // runs over the operand's own elements, and its result makes one extra round trip.
  std::vector<uint8_t> operand_bcast(nodes.size(), 0);
  const bool attention = spec.kind == KernelKind::Attention;
  const bool gemm = spec.kind == KernelKind::Gemm || spec.kind == KernelKind::LibraryGemm || attention;
  // Attention: P (the softmax weights) is computed once per score inside the kernel and
  // never stored, so its operand makes no round trip; with a causal mask only the keys
  // a query may see are visited (kernel_ir.hpp, Attention::key_end).
  std::optional<AttentionMatch> att = attention ? match_attention(*spec.body) : std::nullopt;
  uint32_t p_operand = UINT32_MAX;
  if (att) p_operand = nodes[nodes[att->out_reduce].inputs[0]].inputs[static_cast<size_t>(att->p_side)];
  // A skinny GEMM computing an operand from its rows itself: no statistic kernel, no copy.
  // (Its operand as a plain id: GCC 12 thinks an optional's member may be uninitialized.)
  const std::optional<RowPrologue> rp = traits.gemm_row_prologue && spec.kind == KernelKind::Gemm
                                            ? row_prologue(*spec.body, spec.launch)
                                            : std::nullopt;
  const uint32_t prologue_operand = rp ? rp->operand : UINT32_MAX;
  const uint32_t prologue_stat = rp ? rp->stat : RowPrologue::kNone;
  // A GEMM operand that is a concat of stored tensors is read in place, segment by
  // segment: no round trip, and its adds are never computed.
  std::vector<uint8_t> free_add(nodes.size(), 0);
  // The stored f16/bf16 tensor a cast to f32 widens (through views), if that is all it is.
  auto half_leaf_under_cast = [&](uint32_t x) -> std::optional<uint32_t> {
    if (nodes[x].op != PrimOp::Cast || nodes[x].dtype != DType::f32) return std::nullopt;
    x = nodes[x].inputs[0];
    while (is_view(to_op(nodes[x].op))) x = nodes[x].inputs[0];
    if (is_leaf(to_op(nodes[x].op)) && (nodes[x].dtype == DType::f16 || nodes[x].dtype == DType::bf16)) return x;
    return std::nullopt;
  };
  // For a product of two operands that are (through views) casts to f32 from one half
  // type: operand e's half value (below its views), else nullopt.
  auto half_pair_value = [&](const detail::Node& reduce, uint32_t e) -> std::optional<uint32_t> {
    std::optional<uint32_t> mine;
    DType from = DType::f32;
    for (uint32_t x : nodes[reduce.inputs[0]].inputs) {
      uint32_t c = nodes[x].op == PrimOp::Expand ? nodes[x].inputs[0] : x;
      while (is_view(to_op(nodes[c].op))) c = nodes[c].inputs[0];
      // (a concat of widened halves is one too: its half copy or pack is read, not it)
      if (const DType hc = half_concat(*spec.body, c); hc != DType::f32) {
        if (from != DType::f32 && from != hc) return std::nullopt;
        from = hc;
        if (x == e) mine = c;
        continue;
      }
      if (nodes[c].op != PrimOp::Cast || nodes[c].dtype != DType::f32) return std::nullopt;
      const DType h = nodes[nodes[c].inputs[0]].dtype;
      if ((h != DType::f16 && h != DType::bf16) || (from != DType::f32 && from != h)) return std::nullopt;
      from = h;
      if (x == e) {
        uint32_t v = nodes[c].inputs[0];
        while (is_view(to_op(nodes[v].op))) v = nodes[v].inputs[0];
        mine = v;
      }
    }
    return mine;
  };
  // Whether a product's operand (an expand) varies along the reduction's last output
  // axis: the GEMM's B, whose columns the output's contiguous rows hold (emit_gemm.cpp).
  auto along_columns = [&](const detail::Node& reduce, uint32_t operand) {
    const detail::Node& op = nodes[operand];
    const detail::Node& in = nodes[op.inputs[0]];
    for (size_t i = op.shape.size(); i-- > 0;) {
      // (A unit axis carries no index: the lowering's columns are the last axis that has
      // one, emit_gemm.cpp.)
      if (static_cast<int>(i) == reduce.axis || op.shape[i].as_constant() == int64_t{1}) continue;
      if (op.op != PrimOp::Expand || i >= in.shape.size()) return true;
      return !(in.shape[i].as_constant() == int64_t{1} && op.shape[i].as_constant() != int64_t{1});
    }
    return false;
  };
  // Attention's K when it is a concat along the keys (a decode step's cache and new row):
  // each piece is read through its own expression, the views above it never hoisted.
  std::vector<uint8_t> no_hoist(nodes.size(), 0);
  // Q evaluated while its rows are staged (traits.attention_q_inline): nothing under it hoisted
  // -- but what K reads too (a RoPE table both use), which K's side hoists.
  if (att && traits.attention_q_inline)
    if (auto q = attention_q_operand(*spec.body, *att)) {
      const detail::Node& mul = nodes[nodes[att->score_reduce].inputs[0]];
      const std::vector<uint8_t> under_q = nodes_below(*spec.body, *q),
                                 under_k = nodes_below(*spec.body, mul.inputs[mul.inputs[0] == *q ? 1 : 0]);
      for (size_t i = 0; i < nodes.size(); ++i)
        no_hoist[i] |= static_cast<uint8_t>(under_q[i] && !under_k[i]);
    }
  if (gemm)
    for (size_t ni = 0; ni < nodes.size(); ++ni)
      if (is_broadcast_contraction(*spec.body, nodes[ni]) ||
          (att && (ni == att->score_reduce || ni == att->out_reduce)))
        for (uint32_t e : nodes[nodes[ni].inputs[0]].inputs) {
          if (att && ni == att->score_reduce)
            if (auto kc = key_concat(*spec.body, e)) {
              for (uint32_t x : kc->views) no_hoist[x] = 1;
              for (uint32_t x : kc->pieces.adds) free_add[x] = 1;  // each key reads its own piece
            }
          operand_bcast[e] = 1;
          // (an operand the product reads as it is -- a slot whose shape is the product's,
          // no expand above it -- is read once per element like any elementwise input)
          if (nodes[e].inputs.empty()) continue;
          const uint32_t src = nodes[e].inputs[0];
          uint32_t below = src;
          while (is_view(to_op(nodes[below].op))) below = nodes[below].inputs[0];
          // Attention stages Q and K through their expressions (a prologue computed
          // while staging) and never stores P: only a computed V makes a round trip.
          const bool staged = att && (ni == att->score_reduce || e == p_operand);
          // Attention reads a V that is one (a decode step's concat(v_cache, v_new)) in
          // place on every backend (kernel::Attention::v_more).
          std::optional<StoredConcat> cat = staged ? std::nullopt : stored_concat(*spec.body, below);
          // A GEMM reads the pieces in place only through views its segments can state
          // (kernel/lower/emit_gemm.cpp, gemm_b_segments): broadcasts, permutes, unit
          // dims in or out; a reshape merging axes (KV heads repeated over their query
          // heads, then merged) copies the concat whole.
          if (cat && !attention && !segment_views(*spec.body, e, below)) cat = std::nullopt;
          // Whole params stacked along their outermost axis: stored packed, the concat is
          // one buffer read like any stored operand (no copy), on a lowering that packs --
          // when the concat runs along the operand's own axis (B's columns, A's rows), the
          // one the lowering reads a pack along (emit_gemm.cpp, gemm_packed).
          if (cat && !attention && traits.packed_params && own_axis(ni, e, below, cat->axis) &&
              (cat->stored == DType::f32 || (traits.half_operands && half_pair_value(nodes[ni], e))) &&
              stacked_params(*spec.body, *cat, param_slot)) {
            for (uint32_t x : cat->adds) free_add[x] = 1;
            continue;
          }
          if (cat) {
            for (uint32_t x : cat->adds) free_add[x] = 1;
            if (!attention) w.bytes_concat += numel[below] * 4;
            continue;
          }
          // Attention reads a V widened from a stored half in place (the renderers
          // convert as they read): no round trip either.
          if (att && !staged)
            if (auto h = half_leaf_under_cast(below)) below = *h;
          // A generated GEMM gets an f16/bf16 B (the operand along the output's columns)
          // as the stored half buffer (emit_gemm.cpp, gemm_operand) and converts it as it
          // packs or streams it (cpu/gemm_codegen.hpp): no round trip. The library GEMM
          // takes f32 only, and a half A is staged as f32 unless both are halves.
          if (spec.kind == KernelKind::Gemm && !att && along_columns(nodes[ni], e))
            if (auto h = half_leaf_under_cast(below)) below = *h;
          // The GPU lowering keeps both operands of a product of casts from one half type
          // as halves (traits.half_operands), the library GEMM's too: the half value is
          // what is read in place, or copied (as halves).
          DType copy_dt = nodes[src].dtype;
          if (traits.half_operands && !att)
            if (auto h = half_pair_value(nodes[ni], e)) {
              below = *h;
              copy_dt = nodes[*h].dtype;
            }
          // A stored operand whose views a strided matrix cannot express (a reshape
          // merging permuted axes: attention's heads into the output projection's K)
          // is copied before the product, as one computed is.
          const bool copied = !is_leaf(to_op(nodes[below].op)) ||
                              !strided_operand(*spec.body, static_cast<uint32_t>(ni),
                                               nodes[nodes[ni].inputs[0]].inputs[0] == e ? 0 : 1);
          if (copied && !staged && e != prologue_operand) {
            w.bytes_scratch += 2 * numel[src] * static_cast<double>(dtype_size(copy_dt));
            w.staged_kernels += 1;
          }
        }
  // Nodes inside a GEMM operand; there a hoisted broadcast's input is computed once too.
  // Attention stages Q and K through their expressions, hoisting from the operand down:
  // the operand itself (K repeated over the query rows) is computed once when it hoists.
  std::vector<uint8_t> in_operand(nodes.size(), 0);
  if (att)
    for (uint32_t e : nodes[nodes[att->score_reduce].inputs[0]].inputs) in_operand[e] = 1;
  std::vector<uint8_t> hoisted(nodes.size(), 0);  // computed once into scratch (memoized by node)
  for (size_t i = root + 1; i-- > 0;) {
    const detail::Node& n = nodes[i];
    const bool red = n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce;
    bool once = red || operand_bcast[i];
    if (in_operand[i] && !no_hoist[i] && hoists_broadcast(*spec.body, static_cast<uint32_t>(i))) {
      once = true;
      const uint32_t x = n.inputs[0];
      if (!hoisted[x]) {
        hoisted[x] = 1;
        w.bytes_scratch += 2 * numel[x] * static_cast<double>(dtype_size(nodes[x].dtype));
        // (a hoisted reduction is the staged reduction counted below)
        if (nodes[x].op != PrimOp::SumReduce && nodes[x].op != PrimOp::MaxReduce) w.staged_kernels += 1;
      }
    }
    for (uint32_t x : n.inputs) {
      dom[x] = std::max(dom[x], once ? numel[x] : dom[i]);
      in_operand[x] |= static_cast<uint8_t>(in_operand[i] || operand_bcast[i]);
    }
    switch (n.op) {
      case PrimOp::Input: {
        const double b = read_elements(*spec.body, static_cast<uint32_t>(i), numel) *
                         static_cast<double>(dtype_size(n.dtype));
        w.bytes_read += b;
        w.read_buffers.push_back(b);
        if (leaf_slot(n)) w.bytes_leaf += b;
        break;
      }
      case PrimOp::Param:
      case PrimOp::Constant:
      case PrimOp::Iota:
      case PrimOp::Reshape:
      case PrimOp::Permute:
      case PrimOp::Expand:
      case PrimOp::Slice:
      case PrimOp::Pad:
        break;
      case PrimOp::SumReduce:
      case PrimOp::MaxReduce:
        w.flops += numel[n.inputs[0]];
        break;
      case PrimOp::Gather:
        w.bytes_read += numel[i] * static_cast<double>(dtype_size(n.dtype));
        break;
      default:  // elementwise: a transcendental is a call of the prelude's polynomials
        if (free_add[i]) break;
        if (detail::is_transcendental(n.op))
          w.transcendentals += dom[i];
        else
          w.flops += dom[i];
        if (n.op == PrimOp::Tanh) w.tanhs += dom[i];
        if ((n.op == PrimOp::Recip || n.op == PrimOp::Sqrt) && n.dtype == DType::f32)
          w.special_unary += dom[i];
        break;
    }
  }
  w.bytes_written = numel[root] * static_cast<double>(dtype_size(nodes[root].dtype));
  w.parallelism = std::max(1.0, numel[root]);
  if (att && causal_mask(*spec.body, att->score)) {
    // Bottom-right aligned causal: query i of Sq sees Sk - Sq + i + 1 keys.
    const auto& ss = nodes[att->score].shape;
    const double sq = ss.size() >= 2 ? numel_of({ss[ss.size() - 2]}, dims) : 1;
    const double sk = numel_of({ss[static_cast<size_t>(att->key_axis)]}, dims);
    if (sk >= sq && sk > 0) {
      const double seen = ((sk - sq) + (sq + 1) / 2) / sk;
      w.flops *= seen;
      w.transcendentals *= seen;
      w.tanhs *= seen;
      w.special_unary *= seen;
    }
  }
  // Every reduction but the kernel's accumulator is computed by a kernel of its own
  // first (attention's four are all the streaming kernel's; a GEMM's or a row
  // reduction's accumulator is the one its root reaches through elementwise ops).
  {
    const int reductions = count_reductions(spec);
    // (A row reduction whose root reaches it only through a view other than a reshape of
    // unit dims -- RMSNorm's normalization broadcasts its statistic -- has none: the
    // statistic is staged.)
    const std::vector<uint32_t> row = row_accumulators(*spec.body, root);
    int accumulators = attention ? reductions : spec.kind != KernelKind::Elementwise && !row.empty() ? 1 : 0;
    // A GEMM whose root reads its product through reshapes folds them into C's view
    // (ir::epilogue_reduction) -- except a vector times a matrix off the GPU's few-rows
    // engine, which the Gemm lowering leaves to generic loops on the CPU's terms
    // (emit_gemm.cpp): there the product is staged and the view is a copy.
    if (spec.kind == KernelKind::Gemm && accumulators == 0 && epilogue_reduction(*spec.body, root).reduce) {
      const auto& out = nodes[root].shape;
      const bool vector =
          out.size() < 2 || numel_of({out[out.size() - 2]}, dims) <= 1 || numel_of({out.back()}, dims) <= 1;
      if (!vector || detail::skinny_launch(spec.launch)) accumulators = 1;
    }
    if (accumulators == 1 && traits.row_accumulators && spec.kind == KernelKind::Reduction)
      accumulators = static_cast<int>(row.size());
    w.staged_kernels += reductions - accumulators - (prologue_stat != RowPrologue::kNone ? 1 : 0);
  }
  // What computing the prologue's operand once takes (each column block of the skinny GEMM
  // computes it again for its rows): its arithmetic and the bytes it reads.
  if (rp) {
    w.prologue = true;
    w.prologue_stat = prologue_stat != RowPrologue::kNone;
    const std::vector<uint8_t> under = nodes_below(*spec.body, nodes[prologue_operand].inputs[0]);
    for (uint32_t x = 0; x < nodes.size(); ++x) {
      if (!under[x]) continue;
      const detail::Node& n = nodes[x];
      if (n.op == PrimOp::Input) {
        w.prologue_bytes += read_elements(*spec.body, x, numel) * static_cast<double>(dtype_size(n.dtype));
      } else if (n.op == PrimOp::SumReduce || n.op == PrimOp::MaxReduce) {
        w.prologue_flops += numel[n.inputs[0]];
      } else if (!is_leaf(to_op(n.op)) && !is_view(to_op(n.op)) && n.op != PrimOp::Cast) {
        (detail::is_transcendental(n.op) ? w.prologue_transcendentals : w.prologue_flops) += numel[x];
      }
    }
  }
  // Shape facts for GPU launch costing (cost/gpu_cost.hpp); the launch's own in add_launch_work.
  if (att) {  // P V's reduction: its outputs are rows x dv, its length the keys
    const detail::Node& pv = nodes[att->out_reduce];
    const double out = std::max(1.0, numel[att->out_reduce]);
    w.attention_keys = numel[pv.inputs[0]] / out;
    // dv: the axes of the product P V that P is broadcast along (AttentionMatch::p_axis_of),
    // wherever the body's views put them -- not the output's last axis, which is a unit
    // axis when an absorbed reshape appended one (every element would then be a row).
    const std::vector<Dim>& prod = nodes[pv.inputs[0]].shape;
    std::vector<Dim> value;
    for (std::size_t a = 0; a < prod.size() && a < att->p_axis_of.size(); ++a)
      if (att->p_axis_of[a] < 0) value.push_back(prod[a]);
    w.attention_rows = out / std::max(1.0, numel_of(value, dims));
    w.attention_width = numel_of(value, dims);
    // q.k: R1's product has rows x keys x dk elements.
    const detail::Node& qk = nodes[nodes[att->score_reduce].inputs[0]];
    w.attention_depth = numel[nodes[att->score_reduce].inputs[0]] /
                        std::max(1.0, w.attention_rows * std::max(1.0, w.attention_keys));
    // How many query rows read each element of K: R1's product over K below its views
    // (the broadcast over a head's queries and a KV head's query heads) -- a decode
    // step's G query heads of a KV head (kernel/lower/group_heads.hpp). And the bytes an
    // element of K is stored in (the input under its views and casts).
    if (auto q = attention_q_operand(*spec.body, *att)) {
      uint32_t kx = qk.inputs[qk.inputs[0] == *q ? 1 : 0];
      while (is_view(to_op(nodes[kx].op)) && !nodes[kx].inputs.empty()) kx = nodes[kx].inputs[0];
      w.attention_sharing =
          std::max(1.0, std::round(numel[nodes[att->score_reduce].inputs[0]] / std::max(1.0, numel[kx])));
      uint32_t src = kx;
      while (!nodes[src].inputs.empty() &&
             (nodes[src].op == PrimOp::Cast || is_view(to_op(nodes[src].op)) || nodes[src].op == PrimOp::Add))
        src = nodes[src].inputs[0];
      w.attention_kv_bytes = static_cast<double>(dtype_size(nodes[src].dtype));
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const detail::Node& n = nodes[i];
    if (n.op != PrimOp::SumReduce && n.op != PrimOp::MaxReduce) continue;
    const double in = numel[n.inputs[0]], out = std::max(1.0, numel[i]);
    if (gemm && is_broadcast_contraction(*spec.body, n)) {
      w.gemm_k = in / out;
      // f16/bf16 operands (cast to f32 right before the product) can feed tensor cores.
      // Both from the same half type: the GPU lowering keeps such operands as halves.
      bool half = true;
      DType from = DType::f32;
      for (uint32_t e : nodes[n.inputs[0]].inputs) {
        uint32_t x = e;
        while (is_view(to_op(nodes[x].op))) x = nodes[x].inputs[0];
        const DType in =
            nodes[x].op == PrimOp::Cast ? nodes[nodes[x].inputs[0]].dtype : half_concat(*spec.body, x);
        half = half && (in == DType::f16 || in == DType::bf16) && (from == DType::f32 || from == in);
        from = in;
      }
      w.half_operands = half;
      w.bf16_operands = half && from == DType::bf16;
    } else if (w.rows == 0) {
      w.rows = out;
      w.row_length = in / out;
    }
  }
  switch (spec.kind) {
    case KernelKind::Elementwise:
    case KernelKind::Reduction:
    case KernelKind::Gather:
      w.engine = detail::KernelWork::Engine::Loops;
      break;
    case KernelKind::LibraryGemm: {
      w.engine = detail::KernelWork::Engine::LibraryGemm;
      const auto& out = nodes[root].shape;
      w.gemm_m = out.size() >= 2 ? numel_of({out[out.size() - 2]}, dims) : 1;
      w.gemm_n = out.empty() ? 1 : numel_of({out.back()}, dims);
      w.batches = std::max(1.0, numel[root] / std::max(1.0, w.gemm_m * w.gemm_n));
      break;
    }
    case KernelKind::Attention:
      w.engine = detail::KernelWork::Engine::Attention;
      break;
    case KernelKind::AttentionTwoPass:  // never run: the extractor's cost is infinite
      w.engine = detail::KernelWork::Engine::Loops;
      break;
    case KernelKind::Collective:
      break;  // returned above
    case KernelKind::Gemm: {
      w.engine = detail::KernelWork::Engine::GeneratedGemm;
      const auto& out = nodes[root].shape;
      double m = out.size() >= 2 ? numel_of({out[out.size() - 2]}, dims) : 1;
      double n = out.empty() ? 1 : numel_of({out.back()}, dims);
      // C's columns must be contiguous, so the lowering computes a column [M, 1] as the
      // row [1, M] (emit_gemm.cpp): its one row is the product's one column -- a vector
      // times a matrix whichever way the algebra spelled it (matmul-transpose).
      if (n == 1 && m > 1) std::swap(m, n);
      w.gemm_m = m;
      w.gemm_n = n;
      w.batches = std::max(1.0, numel[root] / std::max(1.0, m * n));
      break;  // the tiles' utilization: add_launch_work
    }
  }
  return w;
}

bool is_cheap(const KernelSpec& spec) {
  // Index-only values (masks from iota and constants) are cheaper to recompute than to
  // read, unless they need transcendentals.
  const bool index_only = spec.slots == 0;
  for (const detail::Node& n : spec.body->nodes) {
    const Op o = to_op(n.op);
    if (is_leaf(o) || is_view(o) || o == Op::Cast) continue;
    if (index_only && !is_reduce(o) && !detail::is_transcendental(n.op)) continue;
    return false;
  }
  return true;
}

int count_reductions(const KernelSpec& spec) {
  int r = 0;
  for (const detail::Node& n : spec.body->nodes) r += is_reduce(to_op(n.op)) ? 1 : 0;
  return r;
}

std::vector<bool> broadcast_slots(const KernelSpec& spec) {
  const auto& nodes = spec.body->nodes;
  const uint32_t root = spec.body->outputs.at(0).second;
  std::vector<uint8_t> ub(nodes.size(), 0);
  std::vector<bool> out(spec.slots, false);
  for (size_t i = root + 1; i-- > 0;) {
    const detail::Node& n = nodes[i];
    for (uint32_t x : n.inputs)
      ub[x] |= static_cast<uint8_t>(ub[i] || (n.op == PrimOp::Expand && broadcasts(n, nodes[x])));
    if (is_slot(n)) out[static_cast<size_t>(std::stoul(n.name.substr(1)))] = ub[i] != 0;
  }
  return out;
}

}  // namespace luminal::ir
