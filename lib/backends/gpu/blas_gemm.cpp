#include "backends/gpu/blas_gemm.hpp"

#include <algorithm>

#include "luminal/error.hpp"

namespace luminal::gpu {

namespace {

using kernel::Index;
using kernel::IndexOp;

using kernel::uses_var;

// True when `i` is c0 + c1 * var with c0, c1 free of var (sums, differences and products
// by var-free factors only): its value at var = 1 minus its value at 0 is the stride.
bool affine_in(const Index& i, int var) {
  if (!uses_var(i, var)) return true;
  const kernel::IndexNode& n = i.node();
  switch (n.op) {
    case IndexOp::Var:
      return true;
    case IndexOp::Add:
    case IndexOp::Sub:
      return std::all_of(n.args.begin(), n.args.end(), [&](const Index& a) { return affine_in(a, var); });
    case IndexOp::Mul: {
      int with = 0;
      for (const Index& a : n.args) {
        if (!uses_var(a, var)) continue;
        if (++with > 1 || !affine_in(a, var)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

bool float_type(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// A BLAS operand from a row-major view of `rows` x `cols`, read as its transpose (the
// call multiplies transposes): stored as it is where the view's column stride is 1 (its
// row stride the leading dimension), transposed where its row stride is 1. A stride may
// be anything along an axis of one element.
struct Operand {
  bool trans = false;
  Index ld;
};
std::optional<Operand> operand(const kernel::MatrixView& v, const Index& rows, const Index& cols) {
  auto is = [](const Index& i, int64_t c) { return i.as_constant() == c; };
  // A constant stride of 0 along an axis of more than one element is a broadcast: no
  // leading dimension describes it.
  auto broadcast = [&](const Index& stride, const Index& extent) { return is(stride, 0) && !is(extent, 1); };
  if ((is(v.col_stride, 1) || is(cols, 1)) && !broadcast(v.row_stride, rows))
    return Operand{false, v.row_stride};
  if ((is(v.row_stride, 1) || is(rows, 1)) && !broadcast(v.col_stride, cols))
    return Operand{true, v.col_stride};
  return std::nullopt;
}

}  // namespace

std::optional<BlasKernel> blas_kernel(const kernel::Program& p, const kernel::Kernel& k, std::string* why) {
  auto no = [&](const char* reason) -> std::optional<BlasKernel> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (k.kind != kernel::KernelKind::Gemm || !k.gemm) return no("not a GEMM");
  const kernel::Gemm& g = *k.gemm;
  if (g.impl != kernel::GemmImpl::Library) return no("a generated GEMM");
  if (!g.b_segments.empty()) return no("B is read in segments");
  if (g.a_prologue) return no("A is computed by a row prologue");
  const DType ta = p.buffers.at(static_cast<size_t>(g.a.buffer)).dtype;
  const DType tb = p.buffers.at(static_cast<size_t>(g.b.buffer)).dtype;
  const DType tc = p.buffers.at(static_cast<size_t>(g.c.buffer)).dtype;
  if (ta != tb || !float_type(ta)) return no("operands of different or non-float types");
  if (!float_type(tc)) return no("a non-float result");
  if (g.epilogue.valid()) {
    const kernel::Expr& e = g.epilogue;
    const bool rounding = e.op() == kernel::ExprOp::Cast && e.dtype() == tc && e.node().args.size() == 1 &&
                          e.node().args[0].op() == kernel::ExprOp::Acc;
    if (!rounding) return no("an epilogue");
  }
  // K a positive constant: a library call of an empty K would have to clear C itself.
  const auto kc = g.k.as_constant();
  if (!kc || *kc <= 0) return no("K is not a positive constant");
  if (g.c.col_stride.as_constant() != 1) return no("C's columns are not contiguous");
  // C^T = B^T * A^T: the BLAS A is the IR's B (n x k), its B the IR's A (k x m).
  const auto a = operand(g.b, g.k, g.n);
  const auto b = operand(g.a, g.m, g.k);
  if (!a || !b) return no("an operand view with no unit stride");
  BlasKernel bk;
  bk.a = g.b.buffer;
  bk.b = g.a.buffer;
  bk.d = g.c.buffer;
  bk.ab = ta;
  bk.d_type = tc;
  // The IR's B (k x n) row-major with unit columns is a column-major n x k: BLAS A as it
  // is (trans_a false), leading dimension its row stride; with unit rows, the transpose
  // of a column-major k x n. Likewise the IR's A for BLAS B.
  bk.trans_a = a->trans;
  bk.lda = a->ld;
  bk.trans_b = b->trans;
  bk.ldb = b->ld;
  bk.m = g.n;
  bk.n = g.m;
  bk.k = g.k;
  bk.ldd = g.c.row_stride;
  bk.off_a = g.b.offset;
  bk.off_b = g.a.offset;
  bk.off_d = g.c.offset;
  bk.loops = k.loops;
  for (int i = static_cast<int>(k.loops.size()) - 1; i >= 0; --i) {
    const int v = k.loops[static_cast<size_t>(i)].var;
    // (C must move with it: a loop that rewrites one C is no batch)
    if (uses_var(bk.off_d, v) && affine_in(bk.off_a, v) && affine_in(bk.off_b, v) && affine_in(bk.off_d, v)) {
      bk.strided = i;
      break;
    }
  }
  return bk;
}

std::vector<BlasCall> blas_calls(const BlasKernel& bk, const std::map<std::string, int64_t>& syms) {
  int max_var = 0;
  for (const auto& l : bk.loops) max_var = std::max(max_var, l.var);
  std::vector<int64_t> vars(static_cast<size_t>(max_var) + 1, 0);
  BlasCall c;
  c.ab = bk.ab;
  c.d = bk.d_type;
  c.trans_a = bk.trans_a;
  c.trans_b = bk.trans_b;
  c.m = bk.m.evaluate(vars, syms);
  c.n = bk.n.evaluate(vars, syms);
  c.k = bk.k.evaluate(vars, syms);
  c.lda = bk.lda.evaluate(vars, syms);
  c.ldb = bk.ldb.evaluate(vars, syms);
  c.ldd = bk.ldd.evaluate(vars, syms);
  std::vector<BlasCall> out;
  if (c.m <= 0 || c.n <= 0) return out;
  // Leading dimensions: a matrix of one column may declare any stride (the library is
  // given the smallest it accepts); otherwise the stride must cover the rows.
  auto leading = [](int64_t& ld, int64_t rows, int64_t cols, const char* what) {
    if (cols <= 1) {
      ld = min_leading(rows);
    } else if (ld < min_leading(rows)) {
      throw RuntimeError(std::string("[blas] ") + what + ": leading dimension " + std::to_string(ld) +
                         " is smaller than the " + std::to_string(rows) + " rows it strides over");
    }
  };
  leading(c.lda, c.trans_a ? c.k : c.m, c.trans_a ? c.m : c.k, "A");
  leading(c.ldb, c.trans_b ? c.n : c.k, c.trans_b ? c.k : c.n, "B");
  leading(c.ldd, c.m, c.n, "D");
  std::vector<int64_t> extent(bk.loops.size());
  for (size_t i = 0; i < bk.loops.size(); ++i) {
    extent[i] = bk.loops[i].extent.evaluate(vars, syms);
    if (extent[i] <= 0) return out;
  }
  // Walk every loop but the strided one; at each point the strided loop is one call.
  std::vector<int64_t> at(bk.loops.size(), 0);
  for (;;) {
    for (size_t i = 0; i < bk.loops.size(); ++i) vars[static_cast<size_t>(bk.loops[i].var)] = at[i];
    BlasCall call = c;
    call.off_a = bk.off_a.evaluate(vars, syms);
    call.off_b = bk.off_b.evaluate(vars, syms);
    call.off_d = bk.off_d.evaluate(vars, syms);
    if (bk.strided >= 0) {
      const auto s = static_cast<size_t>(bk.strided);
      call.batch = extent[s];
      vars[static_cast<size_t>(bk.loops[s].var)] = 1;
      call.stride_a = bk.off_a.evaluate(vars, syms) - call.off_a;
      call.stride_b = bk.off_b.evaluate(vars, syms) - call.off_b;
      call.stride_d = bk.off_d.evaluate(vars, syms) - call.off_d;
      vars[static_cast<size_t>(bk.loops[s].var)] = 0;
    }
    out.push_back(call);
    // The next point, the strided loop held at 0.
    bool done = true;
    for (size_t i = bk.loops.size(); i-- > 0;) {
      if (static_cast<int>(i) == bk.strided) continue;
      if (++at[i] < extent[i]) {
        done = false;
        break;
      }
      at[i] = 0;
    }
    if (done) break;
  }
  return out;
}

}  // namespace luminal::gpu
