// The Attention kind: ir::match_attention's plan -> a streaming (flash) attention kernel.
#include <cmath>

#include "ir/attention_match.hpp"
#include "ir/kernel_body.hpp"
#include "kernel/lower/group_heads.hpp"
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

namespace {
// Few rows (a decode step's heads) over many keys: worth the key ranges of flash-decoding.
bool splits_keys(const kernel::Kernel& k) {
  Index rows = k.attention->m;
  for (const kernel::Loop& l : k.loops) rows = rows * l.extent;
  const auto r = rows.as_constant();
  const auto n = k.attention->n.as_constant();
  return r && *r <= kSplitAttentionRows && (!n || *n > 2 * kernel::kAttentionSplitKeys);
}
}  // namespace

namespace {

// An index-valued scalar expression (iota arithmetic) as an Index, or nullopt.
std::optional<Index> as_index(const Expr& e) {
  const auto& n = e.node();
  switch (n.op) {
    case kernel::ExprOp::IndexValue:
      return n.index;
    case kernel::ExprOp::Const:
      if (n.dtype == DType::i32) return Index(static_cast<int64_t>(n.constant));
      return std::nullopt;
    case kernel::ExprOp::Binary: {
      if (n.dtype != DType::i32) return std::nullopt;
      auto a = as_index(n.args[0]), b = as_index(n.args[1]);
      if (!a || !b) return std::nullopt;
      if (n.binary == kernel::BinaryOp::Add) return *a + *b;
      if (n.binary == kernel::BinaryOp::Sub) return *a - *b;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// where(j + a < b, s, -inf) with b free of j: keys j >= b - a score -inf (a causal
// mask). The evaluator re-checks the claim on every key it visits.
std::optional<Index> causal_key_end(const Expr& score, int iv, int jv) {
  (void)iv;
  const auto& n = score.node();
  if (n.op != kernel::ExprOp::Where) return std::nullopt;
  const auto& f = n.args[2].node();
  if (f.op != kernel::ExprOp::Const || !(std::isinf(f.constant) && f.constant < 0)) return std::nullopt;
  const auto& c = n.args[0].node();
  if (c.op != kernel::ExprOp::Binary || c.binary != kernel::BinaryOp::LessThan) return std::nullopt;
  auto lhs = as_index(c.args[0]), rhs = as_index(c.args[1]);
  if (!lhs || !rhs || uses_var(*rhs, jv)) return std::nullopt;
  // lhs = j + a with a free of j: check by evaluating the slope symbolically.
  auto aff = affine(*lhs, {jv});
  if (!aff || coef_of(*aff, jv).as_constant() != int64_t{1} || !var_free(aff->base, {jv}))
    return std::nullopt;
  // Small constants only: index arithmetic is int64, the mask's i32; keep far from wrap.
  for (const Index* x : {&aff->base, &*rhs}) {
    int64_t budget = 64;
    if (too_large(*x, budget)) return std::nullopt;
  }
  return *rhs - aff->base;
}

}  // namespace

// ---------------------------------------------------------------- attention
std::optional<std::pair<uint32_t, std::vector<Index>>> Lowerer::down_views_to_add(uint32_t node,
                                                                                  std::vector<Index> idx) {
  auto unit = [](const Index& d) { return d.as_constant() == int64_t{1}; };
  uint32_t cur = node;
  for (int depth = 0; body_.nodes[cur].op != PrimOp::Add; ++depth) {
    const Node& n = body_.nodes[cur];
    if (depth > 16 || n.inputs.empty()) return std::nullopt;
    const uint32_t in = n.inputs[0];
    std::vector<Index> next;
    switch (n.op) {
      case PrimOp::Reshape:
        next = reshape_index(in, cur, idx);
        for (auto& i : next) i = simp(i);
        break;
      case PrimOp::Permute:
        next.assign(idx.size(), Index(0));
        for (size_t i = 0; i < n.perm.size(); ++i) next[static_cast<size_t>(n.perm[i])] = idx[i];
        break;
      case PrimOp::Expand:
        next = idx;
        for (size_t i = 0; i < shapes_[in].size(); ++i)
          if (unit(shapes_[in][i])) next[i] = Index(0);
        break;
      default:
        return std::nullopt;
    }
    idx = std::move(next);
    cur = in;
  }
  return std::make_pair(cur, std::move(idx));
}

std::optional<std::vector<kernel::KeyExprSegment>> Lowerer::attention_k_segments(uint32_t node, std::vector<Index> idx,
                                                                                 int jv) {
  const auto kc = ir::key_concat(body_, node);
  if (!kc) return std::nullopt;
  auto down = down_views_to_add(node, std::move(idx));
  if (!down || down->first != kc->concat) return std::nullopt;
  idx = std::move(down->second);
  const auto ax = static_cast<size_t>(kc->pieces.axis);
  if (idx[ax].op() != IndexOp::Var || idx[ax].node().value != jv) return std::nullopt;
  std::vector<kernel::KeyExprSegment> segs;
  for (uint32_t pad : kc->pieces.pads) {
    // Each piece at its own key index: the key variable counts from the segment's start.
    Expr e = emit(body_.nodes[pad].inputs[0], idx, std::nullopt);
    if (speculation_failed() || e.dtype() != DType::f32) return std::nullopt;
    segs.push_back({e, simp(dim_index(body_.nodes[pad].start, prog_))});
  }
  if (segs[0].j0.as_constant() != int64_t{0}) return std::nullopt;
  return segs;
}

std::optional<std::vector<kernel::KeySegment>> Lowerer::attention_v_segments(uint32_t node, std::vector<Index> idx,
                                                                             int jv, int dvar,
                                                                             const VarSet& interest) {
  // Down the views to the concat, carrying the index (the query heads' grouping of KV
  // heads is a reshape and an expand here).
  auto down = down_views_to_add(node, std::move(idx));
  if (!down) return std::nullopt;
  const uint32_t cur = down->first;
  idx = std::move(down->second);
  const auto cat = ir::stored_concat(body_, cur);
  if (!cat || cat->pads.size() > kernel::kMaxKeySegments) return std::nullopt;
  const auto ax = static_cast<size_t>(cat->axis);
  if (idx[ax].op() != IndexOp::Var || idx[ax].node().value != jv) return std::nullopt;
  std::vector<kernel::KeySegment> segs;
  for (uint32_t pad : cat->pads) {
    // Each piece at its own key index: the key variable counts from the segment's start.
    const uint32_t piece = body_.nodes[pad].inputs[0];
    Expr e = emit(piece, idx, std::nullopt);
    if (speculation_failed()) return std::nullopt;
    const std::optional<Expr> ld = stored_load(e);
    if (!ld || ld->dtype() != cat->stored) return std::nullopt;
    auto af = affine(ld->node().index, interest);
    if (!af) return std::nullopt;
    kernel::KeySegment sg;
    sg.v.buffer = ld->node().buffer;
    sg.v.offset = af->base;
    sg.v.row_stride = coef_of(*af, jv);
    sg.v.col_stride = coef_of(*af, dvar);
    sg.j0 = simp(dim_index(body_.nodes[pad].start, prog_));
    if (!segs.empty() && sg.v.col_stride.to_string() != segs[0].v.col_stride.to_string()) return std::nullopt;
    segs.push_back(std::move(sg));
  }
  if (segs.empty() || segs[0].j0.as_constant() != int64_t{0}) return std::nullopt;
  return segs;
}

// An Attention body (ir/attention_match.hpp) -> the Attention kind: Q and K from the
// score contraction R1 (views folded into strides; a prologue such as RoPE computed
// into a contiguous buffer first, as for a GEMM operand), the score epilogue over its
// accumulator, V from R2's other operand, the output epilogue over R2's accumulator.
// Returns false (the body then lowers as generic loops) when a piece does not fit.
bool Lowerer::try_attention(int result) {
  auto mt = ir::match_attention(body_);
  // The output may be stored as halves (f16/bf16 attention: the body's epilogue casts
  // the f32 result back); the epilogue then computes that dtype.
  const DType out_dt = body_.nodes[root_].dtype;
  if (!mt || (out_dt != DType::f32 && out_dt != DType::f16 && out_dt != DType::bf16)) return false;
  const Node& r1 = body_.nodes[mt->score_reduce];
  const Node& mul1 = body_.nodes[r1.inputs[0]];
  const Node& r2 = body_.nodes[mt->out_reduce];
  const Node& mul2 = body_.nodes[r2.inputs[0]];
  if (r1.dtype != DType::f32 || r2.dtype != DType::f32 || body_.nodes[mt->score].dtype != DType::f32)
    return false;
  const auto& in1 = shapes_[r1.inputs[0]];
  const size_t rank1 = in1.size(), ax1 = static_cast<size_t>(r1.axis);
  Ctx saved = std::move(ctx_);
  ctx_ = Ctx{};
  auto fail = [&] {
    ctx_ = std::move(saved);
    return false;
  };
  std::vector<Index> idx1;
  for (size_t i = 0; i < rank1; ++i) {
    const bool unit = in1[i].as_constant() == int64_t{1};
    idx1.push_back(unit ? Index(0) : Index::var(static_cast<int>(i)));
    if (!unit) ctx_.extents[static_cast<int>(i)] = in1[i];
  }
  const int fresh_col = static_cast<int>(rank1), fresh_row = static_cast<int>(rank1) + 1;
  ctx_.next_var = static_cast<int>(rank1) + 2;
  // R1's output axes (its input's without the summed one) index S: each axis of S is one
  // of them or a unit axis (AttentionMatch::r1_axis_of).
  std::vector<int> out1;  // input axis of each output axis
  for (size_t i = 0; i < rank1; ++i)
    if (i != ax1) out1.push_back(static_cast<int>(i));
  std::vector<Index> ridx, sidx;  // R1's output index; S's
  for (int ax : out1) ridx.push_back(idx1[static_cast<size_t>(ax)]);
  for (int r : mt->r1_axis_of) sidx.push_back(r >= 0 ? ridx.at(static_cast<size_t>(r)) : Index(0));
  const int key_axis1 = out1.at(static_cast<size_t>(mt->r1_axis_of.at(static_cast<size_t>(mt->key_axis))));
  if (idx1[static_cast<size_t>(key_axis1)].as_constant()) return fail();  // one key: no streaming
  const int jv = key_axis1;
  // Q and K are staged by the kernel through these expressions: a RoPE prologue is
  // computed there, its sin/cos table (broadcast over heads) computed once beforehand.
  ctx_.hoist_broadcasts = true;
  // A K that is a concat along the keys (a decode step's cache and its new row through
  // RoPE) is read segment by segment, each piece through its own expression: hoisted as a
  // whole (its new row has transcendentals under the repeat over query heads), the concat
  // would be computed into scratch, a copy of the cache every step.
  std::optional<std::vector<kernel::KeyExprSegment>> ksegs;
  int k_side = -1;
  for (int side = 0; side < 2 && k_side < 0; ++side)
    if ((ksegs = attention_k_segments(mul1.inputs[static_cast<size_t>(side)], idx1, jv))) k_side = side;
  if (speculation_failed()) return fail();
  // Q evaluated while the rows are staged (Options::attention_q_inline): emitted last,
  // without hoisting and without the K side's memo.
  const std::optional<uint32_t> q_in =
      opt_.attention_q_inline ? ir::attention_q_operand(body_, *mt) : std::nullopt;
  auto side_expr = [&](int side) {
    if (k_side == side) return (*ksegs)[0].k;
    const uint32_t in = mul1.inputs[static_cast<size_t>(side)];
    if (q_in && *q_in == in) return Expr{};
    return emit(in, idx1, std::nullopt);
  };
  Expr x = side_expr(0), y = side_expr(1);
  if (q_in) {
    ctx_.memo.clear();
    ctx_.hoist_broadcasts = false;
    (*q_in == mul1.inputs[0] ? x : y) = emit(*q_in, idx1, std::nullopt);
    ctx_.hoist_broadcasts = true;
  }
  if (speculation_failed()) return fail();
  // K is the operand indexed by the key variable; Q the one with the query axis.
  uint32_t qin = mul1.inputs[0], kin = mul1.inputs[1];
  if (k_side == 0 || (k_side < 0 && expr_uses_var(x, jv) && !expr_uses_var(y, jv))) {
    std::swap(x, y);
    std::swap(qin, kin);
  }
  if (expr_uses_var(x, jv) || (k_side < 0 && !expr_uses_var(y, jv))) return fail();
  int iv = -1;
  std::vector<int> batch;
  for (size_t i = 0; i < rank1; ++i) {
    const int v = static_cast<int>(i);
    if (v == jv || i == ax1 || idx1[i].as_constant()) continue;
    bool cy = expr_uses_var(y, v);
    if (ksegs)
      for (const kernel::KeyExprSegment& sg : *ksegs) cy = cy || expr_uses_var(sg.k, v);
    const bool cx = expr_uses_var(x, v);
    if (cx && !cy) {
      // Several axes only Q reads (one KV head for all query heads): the innermost is the
      // query row, the others batch loops over which K is broadcast.
      if (iv >= 0) batch.push_back(iv);
      iv = v;
    } else if (cy && !cx) {
      return fail();  // a second key-like axis
    } else {
      batch.push_back(v);
    }
  }
  VarSet interest{static_cast<int>(ax1), jv};
  if (iv >= 0) interest.push_back(iv);
  auto operand = [&](Expr& e, uint32_t node, int other_axis, const std::vector<Index>& idx,
                     const std::vector<Index>& dims_of, uint32_t owner) -> std::optional<Affine> {
    // Read in place where it is a stored load (an f16/bf16 one widened by a cast: the
    // renderers widen V as they read it).
    if (auto ld = stored_load(e))
      if (auto a = affine(ld->node().index, interest)) {
        e = *ld;
        return a;
      }
    std::vector<int> keep;
    std::vector<Index> dims, at;
    for (size_t i = 0; i < idx.size(); ++i)
      if (static_cast<int>(i) != other_axis && !idx[i].as_constant()) {
        keep.push_back(static_cast<int>(i));
        dims.push_back(dims_of[i]);
        at.push_back(idx[i]);
      }
    (void)owner;
    const int buf = materialize_operand(node, keep, dims, idx.size());
    e = kernel::load(buf, DType::f32, kernel::row_major(at, dims));
    return affine(e.node().index, interest);
  };
  (void)qin;
  (void)kin;
  ctx_.hoist_broadcasts = false;
  kernel::Attention a;
  a.row_var = iv >= 0 ? iv : fresh_row;
  a.key_var = jv;
  a.m = iv >= 0 ? in1[static_cast<size_t>(iv)] : Index(1);
  a.n = in1[static_cast<size_t>(jv)];
  a.dk = in1[ax1];
  const int pv = static_cast<int>(ax1);
  auto view = [&](const Expr& e, const Affine& af, int row, int col) {
    kernel::MatrixView mv;
    mv.buffer = e.node().buffer;
    mv.offset = af.base;
    mv.row_stride = row >= 0 ? coef_of(af, row) : Index(0);
    mv.col_stride = coef_of(af, col);
    return mv;
  };
  a.q = x;
  a.k = y;
  if (ksegs) a.k_more.assign(ksegs->begin() + 1, ksegs->end());
  a.depth_var = pv;
  if (a.q.dtype() != DType::f32 || a.k.dtype() != DType::f32) return fail();
  // The score: S at its index, R1 (at its output index) the accumulator.
  ctx_.memo.clear();
  ctx_.acc_node = static_cast<int>(mt->score_reduce);
  ctx_.acc_dtype = DType::f32;
  ctx_.acc_key = key(mt->score_reduce, ridx, std::nullopt);
  if (mt->score != mt->score_reduce) a.score = emit(mt->score, sidx, std::nullopt);
  if (speculation_failed()) return fail();
  if (a.score.valid() && expr_uses_var(a.score, pv)) return fail();
  // R2's index: the axes P reads get S's variables, the one P is broadcast along is d.
  const auto& in2 = shapes_[r2.inputs[0]];
  std::vector<Index> idx2(in2.size(), Index(0));
  int dvar = -1;
  for (size_t t = 0; t < in2.size(); ++t) {
    const int pa = mt->p_axis_of[t];
    if (pa >= 0) {
      idx2[t] = sidx[static_cast<size_t>(pa)];
    } else if (!(in2[t].as_constant() == int64_t{1})) {
      if (dvar >= 0) return fail();
      dvar = fresh_col;
      idx2[t] = Index::var(dvar);
      ctx_.extents[dvar] = in2[t];
      a.dv = in2[t];
    }
  }
  if (dvar < 0) {
    dvar = fresh_col;
    a.dv = Index(1);
  }
  a.col_var = dvar;
  interest = {jv, dvar};
  if (iv >= 0) interest.push_back(iv);
  const uint32_t vin = mul2.inputs[static_cast<size_t>(1 - mt->p_side)];
  ctx_.memo.clear();
  ctx_.acc_node = -1;
  Expr ve = emit(vin, idx2, std::nullopt);
  if (speculation_failed()) return fail();
  if (iv >= 0 && expr_uses_var(ve, iv)) return fail();
  const int r2_query_axis = [&] {
    for (size_t t = 0; t < idx2.size(); ++t)
      if (iv >= 0 && idx2[t].node().op == kernel::IndexOp::Var && idx2[t].node().value == iv)
        return static_cast<int>(t);
    return -1;
  }();
  if (auto segs = attention_v_segments(vin, idx2, jv, dvar, interest)) {
    // A decode step's concat(v_cache, v_new): read in place, segment by segment.
    a.v = (*segs)[0].v;
    a.v_more.assign(segs->begin() + 1, segs->end());
  } else {
    auto av = operand(ve, vin, r2_query_axis, idx2, in2, 0);
    if (!av) return fail();
    a.v = view(ve, *av, jv, dvar);
  }
  // The output: R2's output index, row-major into `result`, under the root's epilogue.
  std::vector<Index> out_dims, rvars;
  std::vector<int> out_var;  // variable of each output axis (-1: unit)
  for (size_t t = 0; t < in2.size(); ++t)
    if (static_cast<int>(t) != r2.axis) {
      out_dims.push_back(in2[t]);
      rvars.push_back(idx2[t]);
    }
  std::vector<Index> stride(out_dims.size(), Index(1));
  for (size_t t = out_dims.size(); t-- > 1;) stride[t - 1] = stride[t] * out_dims[t];
  auto out_stride = [&](int var) {
    for (size_t t = 0; t < rvars.size(); ++t)
      if (rvars[t].node().op == kernel::IndexOp::Var && rvars[t].node().value == var) return stride[t];
    return Index(0);
  };
  a.out.buffer = result;
  a.out.col_stride = Index(1);
  if (a.dv.as_constant() != int64_t{1} && out_stride(dvar).as_constant() != int64_t{1}) return fail();
  a.out.row_stride = iv >= 0 ? out_stride(iv) : Index(0);
  {
    Index off(0);
    for (int b : batch) off = off + out_stride(b) * Index::var(b);
    a.out.offset = off;
  }
  // Every output axis is the query, the value dim or a batch axis.
  for (const Index& rv : rvars) {
    if (rv.as_constant()) continue;
    const int v = static_cast<int>(rv.node().value);
    if (rv.node().op != kernel::IndexOp::Var ||
        (v != iv && v != dvar && std::find(batch.begin(), batch.end(), v) == batch.end()))
      return fail();
  }
  if (root_ != mt->out_reduce) {
    ctx_.memo.clear();
    ctx_.acc_node = static_cast<int>(mt->out_reduce);
    ctx_.acc_dtype = DType::f32;
    ctx_.acc_key = key(mt->out_reduce, rvars, std::nullopt);
    bool same = body_.nodes[root_].shape.size() == rvars.size();
    for (size_t t = 0; same && t < rvars.size(); ++t) same = body_.nodes[root_].shape[t].same_as(r2.shape[t]);
    std::vector<Index> root_idx =
        same ? rvars : delinearize(kernel::row_major(rvars, out_dims), shapes_[root_]);
    a.epilogue = emit(root_, root_idx, std::nullopt);
    if (speculation_failed()) return fail();
    if (expr_uses_var(a.epilogue, jv)) return fail();
  }
  // The renderer keeps a block's Q rows, a K tile and the partial outputs on the
  // stack: constant head dims of reasonable size only.
  for (const Index* d : {&a.dk, &a.dv}) {
    auto c = d->as_constant();
    if (!c || *c < 1 || *c > 1024) return fail();
  }
  a.exp2_scale = mt->exp2_scale;
  if (a.score.valid()) a.key_end = causal_key_end(a.score, a.row_var, jv);
  kernel::Kernel k;
  k.kind = kernel::KernelKind::Attention;
  for (int b : batch) {
    kernel::Loop l;
    l.var = b;
    l.extent = in1[static_cast<size_t>(b)];
    l.parallel = true;
    k.loops.push_back(l);
  }
  k.attention = std::move(a);
  group_query_heads(k, ctx_.extents, sym_min_, new_var());
  k.name = kernel_name();
  if (opt_.split_attention && splits_keys(k)) {
    const int partial = temp_buffer(DType::f32, kernel::split_attention_partial_elements(k));
    // One kernel: the last range block of each row merges it, counting in a state buffer
    // the runtime keeps zero between calls (Attention::Split::counter).
    const int counts = temp_buffer(DType::i32, kernel::split_attention_rows(k), kernel::BufferRole::State);
    kernels.push_back(kernel::make_counted_split_attention(k, partial, counts));
    ctx_ = std::move(saved);
    return true;
  }
  kernels.push_back(std::move(k));
  ctx_ = std::move(saved);
  return true;
}

}  // namespace luminal::kernel::lower
