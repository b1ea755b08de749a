// The Gemm kind: recognize_gemm's plan -> a strided GEMM with its epilogue.
#include "ir/kernel_body.hpp"
#include "ir/unit_reshape.hpp"
#include "cost/gpu_launch.hpp"
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

// The emitter of recognize_gemm's plan: x and y (the product's operands) as strided
// loads at the reduction's input index, the axes sorted into m, n and batch, operands
// that are not strided loads copied first, the tile from the spec, the tail as the
// epilogue. Returns false (the body then lowers as generic loops) where the operands
// do not fit a GEMM.

// The product's input index: one loop variable per non-unit axis (variable i = axis i).
struct GemmFrame {
  std::vector<Index> idx;  // the reduction's input index
  const std::vector<Index>* dims = nullptr;
  size_t rank = 0, ax = 0;  // ax: the summed axis
  VarSet interest;          // the variables whose strides a view needs
};

namespace {

struct GemmAxes {
  int m = -1, n = -1;  // input axes (= variables); -1: absent (size 1)
  std::vector<int> batch;
};

// m: read by x only, n: read by y only, batch: read by both; nullopt when two axes
// would be m (or n).
std::optional<GemmAxes> gemm_axes(const Expr& x, const Expr& y, const GemmFrame& f) {
  GemmAxes a;
  for (size_t i = 0; i < f.rank; ++i) {
    if (i == f.ax || f.idx[i].as_constant()) continue;
    const int v = static_cast<int>(i);
    const bool cx = expr_uses_var(x, v), cy = expr_uses_var(y, v);
    if (cx && !cy) {
      if (a.m >= 0) return std::nullopt;
      a.m = v;
    } else if (cy && !cx) {
      if (a.n >= 0) return std::nullopt;
      a.n = v;
    } else {
      a.batch.push_back(v);
    }
  }
  return a;
}

// The half type a GEMM operand is cast from (f32 when it is not a cast of a half value).
DType half_source(const Expr& e) {
  if (e.op() != kernel::ExprOp::Cast || e.dtype() != DType::f32 || e.node().args.size() != 1) return DType::f32;
  const DType in = e.node().args[0].dtype();
  return in == DType::f16 || in == DType::bf16 ? in : DType::f32;
}

}  // namespace

bool plain_f32_load(const Expr& e) {
  return e.op() == kernel::ExprOp::Load && e.dtype() == DType::f32 && !e.node().valid;
}

// An operand as an affine view; one that is not a plain strided load (a
// permuted-then-merged view, a computed prologue) is first copied into a contiguous
// buffer by its own kernel, over every axis but `other_axis` (the other operand's).
// A weight stored as f16/bf16 and read through a cast to f32 (linear(x, cast(w, f32)))
// is B as it is: the generated GEMM converts it while packing, so the weight is read at
// half the bytes and never copied to f32 whole on each call.
std::optional<Expr> half_weight(const Expr& e) {
  if (e.op() != kernel::ExprOp::Cast || e.dtype() != DType::f32 || e.node().args.size() != 1)
    return std::nullopt;
  const Expr& in = e.node().args[0];
  if (in.op() == kernel::ExprOp::Load && (in.dtype() == DType::f16 || in.dtype() == DType::bf16) &&
      !in.node().valid)
    return in;
  return std::nullopt;
}

std::optional<Expr> stored_load(const Expr& e) {
  if (plain_f32_load(e)) return e;
  return half_weight(e);
}

Affine Lowerer::gemm_operand(Expr& e, uint32_t node, int other_axis, const GemmFrame& f, bool b_side,
                             bool half) {
  if (plain_f32_load(e))
    if (auto a = affine(e.node().index, f.interest)) return *a;
  if (b_side || half)
    if (auto h = half_weight(e))
      if (auto a = affine(h->node().index, f.interest)) {
        e = *h;
        return *a;
      }
  std::vector<int> keep;
  std::vector<Index> dims, at;
  for (size_t i = 0; i < f.rank; ++i)
    if (static_cast<int>(i) != other_axis && !f.idx[i].as_constant()) {
      keep.push_back(static_cast<int>(i));
      dims.push_back((*f.dims)[i]);
      at.push_back(f.idx[i]);
    }
  const int buf = materialize_operand(node, keep, dims, f.rank, half);
  e = kernel::load(buf, prog_.buffers[static_cast<size_t>(buf)].dtype, kernel::row_major(at, dims));
  return *affine(e.node().index, f.interest);
}

// B as a concat of stored tensors (ir::stored_concat: sibling products merged by
// matmul-siblings), read where each piece lies: every piece is emitted at the product's
// index with the concat axis at the n variable, so its load's affine form is the
// segment's own strided view from its first column. nullopt (B is then copied whole)
// when the views between the product and the concat do more than broadcast, permute
// or insert/remove unit dims, or a piece is not a strided load (of f32, or of f16/bf16
// widened to f32; one type for all).
std::optional<std::vector<kernel::GemmSegment>> Lowerer::gemm_b_segments(uint32_t node, int n_axis,
                                                                         const GemmFrame& f) {
  if (!(opt_.segmented_b || (opt_.segmented_b_skinny && detail::skinny_launch(spec_.launch))))
    return std::nullopt;
  return b_segments(node, n_axis, f, nullptr);
}

std::optional<std::vector<kernel::GemmSegment>> Lowerer::b_segments(uint32_t node, int n_axis,
                                                                    const GemmFrame& f, uint32_t* cat_node) {
  if (n_axis < 0) return std::nullopt;
  // Down the first inputs to the concat (an add); ir::segment_views says whether the
  // views on the way may be read through, the loop below maps the index down them.
  uint32_t cur = node;
  for (int depth = 0; body_.nodes[cur].op != PrimOp::Add; ++depth) {
    if (depth > 16 || body_.nodes[cur].inputs.empty()) return std::nullopt;
    cur = body_.nodes[cur].inputs[0];
  }
  if (!ir::segment_views(body_, node, cur)) return std::nullopt;
  auto unit = [](const Dim& d) { return d.as_constant() == int64_t{1}; };
  std::vector<Index> idx = f.idx;
  for (uint32_t x = node; x != cur; x = body_.nodes[x].inputs[0]) {
    const Node& n = body_.nodes[x];
    const Node& in = body_.nodes[n.inputs[0]];
    std::vector<Index> next(in.shape.size(), Index(0));
    if (n.op == PrimOp::Expand) {
      for (size_t i = 0; i < in.shape.size(); ++i) next[i] = unit(in.shape[i]) ? Index(0) : idx[i];
    } else if (n.op == PrimOp::Permute) {
      for (size_t i = 0; i < n.perm.size(); ++i) next[static_cast<size_t>(n.perm[i])] = idx[i];
    } else {  // a reshape inserting or removing unit dims (segment_views checked it)
      const std::vector<int> of = *ir::unit_reshape_axes(n.shape, in.shape);
      for (size_t i = 0; i < of.size(); ++i)
        if (of[i] >= 0) next[static_cast<size_t>(of[i])] = idx[i];
    }
    idx = std::move(next);
  }
  const auto cat = ir::stored_concat(body_, cur);
  if (!cat || cat->pads.size() > kernel::kMaxGemmSegments) return std::nullopt;
  if (cat_node) *cat_node = cur;
  const auto ax = static_cast<size_t>(cat->axis);
  if (idx[ax].op() != IndexOp::Var || idx[ax].node().value != n_axis) return std::nullopt;
  std::vector<kernel::GemmSegment> segs;
  Index n0(0);
  for (uint32_t pad : cat->pads) {
    const uint32_t piece = body_.nodes[pad].inputs[0];
    Expr e = emit(piece, idx, std::nullopt);
    if (speculation_failed()) return std::nullopt;
    // A half weight widened to f32 is read as stored: the driver converts as it packs.
    if (!plain_f32_load(e)) {
      auto h = half_weight(e);
      if (!h) return std::nullopt;
      e = *h;
    }
    if (e.dtype() != cat->stored) return std::nullopt;
    auto a = affine(e.node().index, f.interest);
    if (!a) return std::nullopt;
    kernel::GemmSegment sg;
    sg.b.buffer = e.node().buffer;
    sg.b.offset = a->base;
    sg.b.col_stride = coef_of(*a, n_axis);
    sg.b.row_stride = coef_of(*a, static_cast<int>(f.ax));
    sg.n0 = n0;
    n0 = simp(n0 + shapes_[piece][ax]);
    segs.push_back(std::move(sg));
  }
  return segs;
}

// An operand as the params it concatenates along its own axis `axis` (B's columns, A's
// rows) stored one after another: the pieces' views must be one view of them laid end to
// end -- the same strides, each from its buffer's start, each buffer exactly its part --
// which ir::stacked_params (what the cost model priced) promises; checked again on the
// affine forms. As B: (row, col) strides (k, axis); as A: (axis, k).
std::optional<kernel::MatrixView> Lowerer::gemm_packed(uint32_t node, int axis, const GemmFrame& f, bool as_a,
                                                       bool halves) {
  if (!opt_.pack_params) return std::nullopt;
  uint32_t cat_node = 0;
  const auto segs = b_segments(node, axis, f, &cat_node);
  if (!segs || segs->size() < 2 || speculation_failed()) return std::nullopt;
  const auto cat = ir::stored_concat(body_, cat_node);
  auto is_param = [&](const Node& leaf) {  // (a body's Input is a slot)
    const int b = slot_buffer(leaf);
    const kernel::Buffer& buf = prog_.buffers[static_cast<size_t>(b)];
    return buf.role == kernel::BufferRole::Param && buf.elements.as_constant() && !prog_.block(b);
  };
  if (!cat || (cat->stored != DType::f32 && !halves) || !ir::stacked_params(body_, *cat, is_param))
    return std::nullopt;
  const auto cs = segs->front().b.col_stride.as_constant(), rs = segs->front().b.row_stride.as_constant();
  if (!cs || !rs) return std::nullopt;
  std::vector<int> members;
  for (size_t i = 0; i < segs->size(); ++i) {
    const kernel::GemmSegment& sg = (*segs)[i];
    const Index end =
        i + 1 < segs->size() ? (*segs)[i + 1].n0 : shapes_[cat_node][static_cast<size_t>(cat->axis)];
    const auto width = simp(end - sg.n0).as_constant();
    const auto elements = prog_.buffers[static_cast<size_t>(sg.b.buffer)].elements.as_constant();
    if (sg.b.offset.as_constant() != int64_t{0} || sg.b.col_stride.as_constant() != cs ||
        sg.b.row_stride.as_constant() != rs || !width || !elements || *elements != *width * *cs)
      return std::nullopt;
    members.push_back(sg.b.buffer);
  }
  const int pack = param_pack(members);
  if (pack < 0) return std::nullopt;
  // (cs: the stride along `axis`, rs: along k)
  return as_a ? kernel::MatrixView{pack, Index(0), Index(*cs), Index(*rs)}
              : kernel::MatrixView{pack, Index(0), Index(*rs), Index(*cs)};
}

int Lowerer::param_pack(const std::vector<int>& members) {
  for (const kernel::ParamPack& p : prog_.packs)
    if (p.members == members) return p.buffer;
  for (size_t i = 0; i < members.size(); ++i) {
    if (prog_.pack_holding(members[i])) return -1;
    for (size_t j = 0; j < i; ++j)
      if (members[j] == members[i]) return -1;
  }
  kernel::Buffer b;
  b.name = name_ + "_pack";
  b.dtype = prog_.buffers[static_cast<size_t>(members.front())].dtype;
  int64_t elements = 0;
  for (int m : members) elements += *prog_.buffers[static_cast<size_t>(m)].elements.as_constant();
  b.elements = Index(elements);
  b.role = kernel::BufferRole::Param;
  prog_.buffers.push_back(std::move(b));
  const int id = static_cast<int>(prog_.buffers.size()) - 1;
  prog_.packs.push_back(kernel::ParamPack{id, members});
  return id;
}

bool Lowerer::emit_gemm(const GemmBody& plan, int result) {
  const int red = static_cast<int>(plan.reduce);
  const Node& rn = body_.nodes[plan.reduce];
  const Node& mul = body_.nodes[plan.mul];
  const auto& in_dims = shapes_[plan.mul];
  GemmFrame f;
  f.dims = &in_dims;
  f.rank = in_dims.size();
  f.ax = static_cast<size_t>(rn.axis);
  const size_t rank = f.rank, ax = f.ax;

  Ctx saved = std::move(ctx_);
  ctx_ = Ctx{};
  auto restore = [&] { ctx_ = std::move(saved); };
  for (size_t i = 0; i < rank; ++i) {
    const bool unit = in_dims[i].as_constant() == int64_t{1};
    f.idx.push_back(unit ? Index(0) : Index::var(static_cast<int>(i)));
    if (!unit) ctx_.extents[static_cast<int>(i)] = in_dims[i];
  }
  ctx_.next_var = static_cast<int>(rank) + 2;
  // A row prologue (ir::row_prologue): its operand is emitted with the statistic as acc(),
  // the indices acc() stood for kept to check below that it is one value per row of A.
  std::optional<ir::RowPrologue> rp;
  if (opt_.gemm_row_prologue && !no_row_prologue_)
    if (auto r = ir::row_prologue(body_, spec_.launch); r && r->contraction == plan.reduce) rp = r;
  std::vector<std::vector<Index>> stat_at;
  auto emit_operand = [&](uint32_t in) {
    if (!rp || in != rp->operand || rp->stat == ir::RowPrologue::kNone) return emit(in, f.idx, std::nullopt);
    ctx_.acc_node = static_cast<int>(rp->stat);
    ctx_.acc_key.clear();
    ctx_.acc_seen.clear();
    Expr e = emit(in, f.idx, std::nullopt);
    stat_at = std::move(ctx_.acc_seen);
    ctx_.acc_node = -1;
    ctx_.acc_seen.clear();
    ctx_.memo.clear();  // (its expressions hold acc(): nothing else may reuse them)
    return e;
  };
  const size_t materialized_before = materialized_.size();
  Expr x = emit_operand(mul.inputs[0]);
  Expr y = emit_operand(mul.inputs[1]);
  if (speculation_failed()) {
    restore();
    return false;
  }
  auto axes = gemm_axes(x, y, f);
  if (!axes) {
    restore();
    return false;
  }
  int m_axis = axes->m, n_axis = axes->n;
  const std::vector<int>& batch = axes->batch;
  // output index of the reduction: rank-1 dims, row-major
  std::vector<Index> out_dims;
  std::vector<int> out_axis;  // input axis of each output axis
  for (size_t i = 0; i < rank; ++i)
    if (i != ax) {
      out_dims.push_back(in_dims[i]);
      out_axis.push_back(static_cast<int>(i));
    }
  std::vector<Index> stride(out_dims.size(), Index(1));
  for (size_t i = out_dims.size(); i-- > 1;) stride[i - 1] = stride[i] * out_dims[i];
  auto out_stride = [&](int axis) {
    for (size_t i = 0; i < out_axis.size(); ++i)
      if (out_axis[i] == axis) return stride[i];
    return Index(0);
  };
  auto unit_stride = [&](int axis) { return axis >= 0 && out_stride(axis).as_constant() == int64_t{1}; };
  // C's columns must be contiguous: the operand whose own axis is the output's last
  // one is B (y^T x^T = (x y)^T in index form)
  Expr X = x, Y = y;
  uint32_t xin = mul.inputs[0], yin = mul.inputs[1];
  if (!unit_stride(n_axis) && unit_stride(m_axis)) {
    std::swap(m_axis, n_axis);
    std::swap(X, Y);
    std::swap(xin, yin);
  }
  if (n_axis >= 0 && !unit_stride(n_axis)) {
    restore();
    return false;
  }
  f.interest = {static_cast<int>(ax)};
  if (m_axis >= 0) f.interest.push_back(m_axis);
  if (n_axis >= 0) f.interest.push_back(n_axis);
  // M == 1 (decode): a dot-product reduction kernel streams the other operand once,
  // where a packed GEMM would copy it first and pay a parallel region per batch (16
  // heads x 1 row in attention). Only a large operand read across its rows (x @ W with
  // W [K, N]) stays a GEMM: there a dot product would stride through memory.
  // B a concat of stored tensors: segments read in place (a GEMM also at M == 1: the
  // few-rows path streams each segment once).
  std::optional<std::vector<kernel::GemmSegment>> segments = gemm_b_segments(yin, n_axis, f);
  // Both operands cast from the same half type (a concat of widened halves is one), for a
  // renderer that takes half operands (GPU tensor cores, f16 in / f32 accumulate as
  // PyTorch computes an f16 matmul): both stay halves, so the product reads half the
  // bytes and can run on tensor cores.
  DType xh = half_source(X), yh = half_source(Y);
  if (xh == DType::f32) xh = ir::half_concat(body_, xin);
  if (yh == DType::f32) yh = ir::half_concat(body_, yin);
  const bool pair = opt_.half_operands && xh != DType::f32 && xh == yh;
  // Else B as params stored packed, where the renderer would copy the concat; A too (a
  // transposed twin of the product reads the concat there). A pack of halves only serves
  // a product of halves.
  std::optional<kernel::MatrixView> packed, packed_a;
  if (!segments) packed = gemm_packed(yin, n_axis, f, false, pair);
  if (!rp) packed_a = gemm_packed(xin, m_axis, f, true, pair);
  // That choice is the CPU's. A GPU launch of the few-rows engine (GpuGemmEngine::Skinny,
  // what the cost model priced, with its row prologue) streams B once whatever its type,
  // so it stays a GEMM: generic loops would price as one kernel and run as two, a
  // statistic kernel and a block per output without the prologue.
  if (m_axis < 0 && !segments && !packed && !detail::skinny_launch(spec_.launch)) {
    bool strided_big = false;
    if (plain_f32_load(Y))
      if (auto ay = affine(Y.node().index, f.interest)) {
        auto kn =
            (in_dims[ax] * (n_axis >= 0 ? in_dims[static_cast<size_t>(n_axis)] : Index(1))).as_constant();
        strided_big =
            coef_of(*ay, static_cast<int>(ax)).as_constant() != int64_t{1} && kn && *kn >= (int64_t{1} << 20);
      }
    // An f16/bf16 weight read along k (x @ W^T, every decode projection) goes to the
    // GEMM's few-rows path, whose dot products convert 16 halves per instruction
    // (vcvtph2ps); the generic dot-product loop converts with ~8 integer ops per vector
    // and made f16 decode compute-bound.
    bool half_dot = false;
    if (n_axis >= 0)
      if (auto h = half_weight(Y))
        if (auto ay = affine(h->node().index, f.interest))
          half_dot = coef_of(*ay, static_cast<int>(ax)).as_constant() == int64_t{1};
    if (!strided_big && !half_dot) {
      restore();
      return false;
    }
  }
  const bool half = pair && !segments;
  // The prologue is A's, its statistic one value per row of A: the same index wherever A
  // reads it, free of the K and N variables, never computed into a buffer of its own.
  std::optional<kernel::GemmRowPrologue> prologue;
  if (rp && rp->stat == ir::RowPrologue::kNone) {
    // Elementwise: A's expression as emitted, which must not read the column variable (an
    // operand along the output's columns is B's, not a prologue) nor anything the emission
    // staged into a kernel of its own (priced as none: the staged twin prices those).
    if (xin != rp->operand || (n_axis >= 0 && expr_uses_var(X, n_axis)) || X.dtype() != DType::f32 ||
        materialized_.size() != materialized_before || speculation_failed()) {
      retry_without_prologue_ = true;
      restore();
      return true;
    }
    prologue.emplace();
    prologue->a = X;
    prologue->depth_var = static_cast<int>(ax);
  } else if (rp) {
    bool ok = xin == rp->operand && !stat_at.empty() && !materialized_.count(rp->stat);
    for (const auto& idx : stat_at) {
      ok = ok && key(rp->stat, idx, std::nullopt) == key(rp->stat, stat_at[0], std::nullopt);
      for (const Index& i : idx)
        ok = ok && !uses_var(i, static_cast<int>(ax)) && !(n_axis >= 0 && uses_var(i, n_axis));
    }
    if (!ok) {
      retry_without_prologue_ = true;
      restore();
      return true;
    }
    const Node& st = body_.nodes[rp->stat];
    const int sv = new_var();
    std::vector<Index> in_idx = stat_at[0];
    in_idx.insert(in_idx.begin() + st.axis, Index::var(sv));
    kernel::Loop l;
    l.var = sv;
    l.extent = shapes_[st.inputs[0]][static_cast<size_t>(st.axis)];
    ctx_.extents[sv] = l.extent;
    prologue.emplace();
    prologue->stat.op = st.op == PrimOp::SumReduce ? kernel::ReduceOp::Sum : kernel::ReduceOp::Max;
    prologue->stat.loops = {l};
    prologue->stat.value = emit(st.inputs[0], in_idx, std::nullopt);
    prologue->a = X;
    prologue->depth_var = static_cast<int>(ax);
    if (prologue->stat.value.dtype() != DType::f32 || X.dtype() != DType::f32 || speculation_failed()) {
      retry_without_prologue_ = true;
      restore();
      return true;
    }
    ctx_.memo.clear();
  }
  Affine ax_ = prologue || packed_a ? Affine{} : gemm_operand(X, xin, n_axis, f, false, half);
  Affine ay = segments || packed ? Affine{} : gemm_operand(Y, yin, m_axis, f, true, half);

  kernel::Gemm g;
  const int rv = static_cast<int>(rank), cv = static_cast<int>(rank) + 1;  // unused ids when absent
  g.row_var = m_axis >= 0 ? m_axis : rv;
  g.col_var = n_axis >= 0 ? n_axis : cv;
  g.m = m_axis >= 0 ? in_dims[static_cast<size_t>(m_axis)] : Index(1);
  g.n = n_axis >= 0 ? in_dims[static_cast<size_t>(n_axis)] : Index(1);
  g.k = in_dims[ax];
  const int kv = static_cast<int>(ax);
  auto view = [&](const Expr& e, const Affine& a, int row, int col) {
    kernel::MatrixView mv;
    mv.buffer = e.node().buffer;
    mv.offset = a.base;                                     // batch variables stay inside the base
    mv.col_stride = col >= 0 ? coef_of(a, col) : Index(1);  // any stride for a unit dim
    mv.row_stride = row >= 0 ? coef_of(a, row) : mv.col_stride * (col == kv ? g.k : g.n);
    return mv;
  };
  if (prologue) {
    g.a = kernel::MatrixView{-1, Index(0), Index(0), Index(0)};
    g.a_prologue = std::move(prologue);
  } else if (packed_a) {
    g.a = *packed_a;
  } else {
    g.a = view(X, ax_, m_axis, kv);
  }
  if (segments) {
    g.b = segments->front().b;
    g.b_segments = std::move(*segments);
  } else if (packed) {
    g.b = *packed;
  } else {
    g.b = view(Y, ay, kv, n_axis);
  }
  g.c.buffer = result;
  {
    Index off(0);
    for (int b : batch) off = off + out_stride(b) * Index::var(b);
    g.c.offset = off;
    g.c.row_stride = m_axis >= 0 ? out_stride(m_axis) : g.n;  // any stride when M == 1
    g.c.col_stride = Index(1);
  }
  // The tile comes from the spec alone (the backend says what its launch parameters
  // mean); the implementation from its kind unless the caller forces one.
  g.tile = opt_.gemm_tile ? opt_.gemm_tile(spec_) : kernel::GemmTile{};
  g.impl = opt_.gemm == GemmChoice::Library            ? kernel::GemmImpl::Library
           : opt_.gemm == GemmChoice::Generated        ? kernel::GemmImpl::Generated
           : spec_.kind == ir::KernelKind::LibraryGemm ? kernel::GemmImpl::Library
                                                       : kernel::GemmImpl::Generated;

  // epilogue: the root at the index whose row-major position equals the reduction's
  ctx_.memo.clear();
  ctx_.acc_node = red;
  ctx_.acc_dtype = DType::f32;
  kernel::Kernel k;
  k.kind = kernel::KernelKind::Gemm;
  for (int b : batch) {
    kernel::Loop l;
    l.var = b;
    l.extent = in_dims[static_cast<size_t>(b)];
    k.loops.push_back(l);
  }
  if (static_cast<int>(root_) != red) {
    std::vector<Index> rvars;
    for (int a : out_axis)
      rvars.push_back(a == m_axis   ? Index::var(g.row_var)
                      : a == n_axis ? Index::var(g.col_var)
                                    : f.idx[static_cast<size_t>(a)]);
    std::vector<Index> root_idx;
    bool same = body_.nodes[root_].shape.size() == rvars.size();
    for (size_t i = 0; same && i < rvars.size(); ++i) same = body_.nodes[root_].shape[i].same_as(rn.shape[i]);
    root_idx = same ? rvars : delinearize(kernel::row_major(rvars, out_dims), shapes_[root_]);
    g.epilogue = emit(root_, root_idx, std::nullopt);
    if (speculation_failed()) {
      restore();
      return false;
    }
  }
  if (stopped()) {  // an operand copy could not be lowered: the whole body cannot
    restore();
    return true;
  }
  k.gemm = std::move(g);
  k.name = kernel_name();
  kernels.push_back(std::move(k));
  restore();
  return true;
}

}  // namespace luminal::kernel::lower
