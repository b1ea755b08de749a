// Elementwise and row-reduction kernels as loop nests (a body no specialised kind takes,
// and the temporaries other kernels read: materialized reductions, operand copies).
#include "ir/kernel_body.hpp"
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

static_assert(ir::kMaxRowAccumulators == kernel::kMaxAccumulators);

namespace {

bool worth_parallel(const std::vector<Index>& dims, int64_t inner_work = 1) {
  int64_t n = inner_work;
  for (const auto& d : dims) {
    auto c = d.as_constant();
    if (!c) return true;
    n *= *c;
  }
  return n >= 32768;
}

}  // namespace

std::vector<kernel::Loop> Lowerer::loops_over(const std::vector<Index>& dims, std::vector<Index>& vars,
                                              bool parallel) {
  std::vector<kernel::Loop> loops;
  for (const auto& d : dims) {
    // A unit axis needs no loop: its index is 0. A trailing one would otherwise be the
    // innermost loop, and every renderer takes the innermost loop for the vector lanes
    // (a [H, 1, D, 1] output reduced along keys got a one-lane "row" loop, so its
    // contiguous axis D was never vectorized).
    if (d.as_constant() == int64_t{1}) {
      vars.push_back(Index(0));
      continue;
    }
    kernel::Loop l;
    l.var = new_var();
    ctx_.extents[l.var] = d;
    l.extent = d;
    vars.push_back(Index::var(l.var));
    loops.push_back(l);
  }
  if (!loops.empty()) {
    for (auto& l : loops) l.parallel = parallel;
    loops.back().vectorize = true;
    // a vectorized innermost loop stays serial unless it is the only loop
    if (loops.size() > 1) loops.back().parallel = false;
  }
  return loops;
}

// One kernel computing body node `id` into buffer `out` (row-major over its shape).
void Lowerer::lower_generic(uint32_t id, int out) {
  Ctx saved = std::move(ctx_);
  ctx_ = Ctx{};
  ctx_.self = static_cast<int>(id);
  // Inside a GEMM operand's preparation a reduction materialized for it hoists its
  // broadcast transcendental values too (a softmax prologue over RoPE'd scores): the
  // cost model charges the operand that way (ir::hoists_broadcast).
  ctx_.hoist_broadcasts = saved.hoist_broadcasts;
  kernel::Kernel k;
  const auto row = recognize_row_reduction(body_, id);
  const int r = row.plan ? static_cast<int>(row.plan->reduce) : -1;
  std::vector<Index> vars;
  if (r >= 0) {
    const Node& rn = body_.nodes[static_cast<size_t>(r)];
    const auto& in_dims = shapes_[rn.inputs[0]];
    const auto red = in_dims[static_cast<size_t>(rn.axis)];
    auto rc = red.as_constant();
    k.loops = loops_over(shapes_[id], vars, false);
    const bool par = worth_parallel(shapes_[id], rc ? *rc : 1024);
    for (auto& l : k.loops) {
      l.vectorize = false;  // the reduce loop is the vector loop
      l.parallel = par;
    }
    kernel::Reduction red_ir;
    red_ir.op = rn.op == PrimOp::SumReduce ? kernel::ReduceOp::Sum : kernel::ReduceOp::Max;
    red_ir.acc_dtype = rn.dtype;
    kernel::Loop rl;
    rl.var = new_var();
    ctx_.extents[rl.var] = red;
    rl.extent = red;
    // OpenMP's max reduction combines partial results with '>', which drops NaN; the
    // prelude's lm_max propagates it (as max_reduce must), so f32 max stays serial.
    rl.vectorize = !(rn.op == PrimOp::MaxReduce && is_float(rn.dtype));
    red_ir.loops.push_back(rl);
    // The reduction's output index: the root's, or what it is through the unit-dim
    // reshapes between them (a product's kept unit axis dropped).
    auto at = [&](uint32_t reduce) {
      std::optional<std::vector<Index>> o = index_along(id, reduce, vars);
      return o ? *o : vars;
    };
    auto input_index = [&](uint32_t reduce, std::vector<Index> in) {
      in.insert(in.begin() + body_.nodes[reduce].axis, Index::var(rl.var));
      return in;
    };
    const std::vector<Index> r_at = at(static_cast<uint32_t>(r));
    red_ir.value = emit(rn.inputs[0], input_index(static_cast<uint32_t>(r), r_at), std::nullopt);
    // The root's other reductions over the same row, in the same walk (every value is
    // emitted before any accumulator stands for a reduction: none is under another).
    std::vector<uint32_t> more;
    if (opt_.row_accumulators && id == root_ && spec_.kind == ir::KernelKind::Reduction)
      more.assign(row.plan->accumulators.begin() + 1, row.plan->accumulators.end());
    std::vector<std::vector<Index>> more_at;
    for (uint32_t m : more) {
      const Node& mn = body_.nodes[m];
      more_at.push_back(at(m));
      red_ir.more.push_back({mn.op == PrimOp::SumReduce ? kernel::ReduceOp::Sum : kernel::ReduceOp::Max,
                             emit(mn.inputs[0], input_index(m, more_at.back()), std::nullopt), mn.dtype});
    }
    for (size_t i = 0; i < more.size(); ++i)
      ctx_.more_accs.push_back(
          {static_cast<int>(more[i]), body_.nodes[more[i]].dtype, key(more[i], more_at[i], std::nullopt)});
    ctx_.acc_node = r;
    ctx_.acc_dtype = rn.dtype;
    ctx_.acc_key = key(static_cast<uint32_t>(r), r_at, std::nullopt);
    k.kind = kernel::KernelKind::Reduction;
    k.reduce = std::move(red_ir);
  } else {
    k.loops = loops_over(shapes_[id], vars, worth_parallel(shapes_[id]));
    k.kind = kernel::KernelKind::Elementwise;
  }
  k.store.buffer = out;
  k.store.index = kernel::row_major(vars, shapes_[id]);
  k.store.value = emit(id, vars, std::nullopt);
  if (!stopped()) {
    k.name = kernel_name();
    kernels.push_back(std::move(k));
  }
  ctx_ = std::move(saved);
}

int Lowerer::temp_buffer(DType dtype, Index elements, kernel::BufferRole role) {
  kernel::Buffer b;
  b.name = name_ + "_t" + std::to_string(prog_.buffers.size());
  b.dtype = dtype;
  b.elements = std::move(elements);
  b.role = role;
  prog_.buffers.push_back(std::move(b));
  return static_cast<int>(prog_.buffers.size() - 1);
}

// A temporary buffer holding body node `id` (a reduction, or a hoisted broadcast value),
// computed by its own loop nest first.
int Lowerer::materialize(uint32_t id) {
  if (auto it = materialized_.find(id); it != materialized_.end()) return it->second;
  Index elements(1);
  for (const auto& d : shapes_[id]) elements = elements * d;
  const int buf = temp_buffer(body_.nodes[id].dtype, elements);
  lower_generic(id, buf);
  if (!stopped()) materialized_[id] = buf;
  return buf;
}

// A contiguous copy of body node `node` (rank `rank`) over the input axes `keep` (the
// others pinned to 0), computed by its own elementwise kernel; returns the buffer. Where
// the operand already lies row-major in a buffer of its own size -- a broadcast value
// hoisted into one as it was emitted (SwiGLU before the down projection) -- that buffer
// is the operand: copying it would be a launch the cost model never priced.
int Lowerer::materialize_operand(uint32_t node, const std::vector<int>& keep, const std::vector<Index>& dims,
                                 size_t rank, bool keep_half) {
  Ctx saved = std::move(ctx_);
  ctx_ = Ctx{};
  ctx_.hoist_broadcasts = true;
  kernel::Kernel k;
  std::vector<Index> vars;
  k.loops = loops_over(dims, vars, worth_parallel(dims));
  std::vector<Index> at(rank, Index(0));
  for (size_t i = 0; i < keep.size(); ++i) at[static_cast<size_t>(keep[i])] = vars[i];
  Index elements(1);
  for (const auto& d : dims) elements = elements * d;
  k.kind = kernel::KernelKind::Elementwise;
  k.store.index = kernel::row_major(vars, dims);
  k.store.value = emit(node, at, std::nullopt);
  DType dtype = DType::f32;
  if (const DType hc = keep_half ? ir::half_concat(body_, node) : DType::f32; hc != DType::f32) {
    // A concat of widened halves: every value a half (the pads' -0 too), stored as one.
    k.store.value = kernel::cast(k.store.value, hc);
    dtype = hc;
  } else if (keep_half && k.store.value.valid() && k.store.value.op() == kernel::ExprOp::Cast &&
             k.store.value.dtype() == DType::f32) {
    // f16/bf16 -> f32 is exact: storing the half value itself loses nothing.
    const Expr in = k.store.value.node().args[0];
    if (in.dtype() == DType::f16 || in.dtype() == DType::bf16) {
      k.store.value = in;
      dtype = in.dtype();
    }
  }
  if (const int in = contiguous_copy_of(k.store.value, k.store.index, elements); in >= 0) {
    ctx_ = std::move(saved);
    return in;
  }
  const int buf = temp_buffer(dtype, elements);
  k.store.buffer = buf;
  if (!stopped()) {
    k.name = kernel_name();
    kernels.push_back(std::move(k));
  }
  ctx_ = std::move(saved);
  return buf;
}

int Lowerer::contiguous_copy_of(const Expr& value, const Index& store_index, const Index& elements) const {
  if (stopped() || !value.valid() || value.op() != kernel::ExprOp::Load || value.node().valid) return -1;
  const int in = value.node().buffer;
  // Only a buffer this lowering made (a temporary): a stored leaf keeps its own layout
  // and lifetime, and a copy of one is what the caller asked for.
  if (in < first_temp_buffer_ || in >= static_cast<int>(prog_.buffers.size())) return -1;
  const kernel::Buffer& b = prog_.buffers[static_cast<size_t>(in)];
  auto same = [&](const Index& x, const Index& y) { return simp(x - y).as_constant() == int64_t{0}; };
  return b.dtype == value.dtype() && same(b.elements, elements) && same(value.node().index, store_index) ? in
                                                                                                         : -1;
}

}  // namespace luminal::kernel::lower
