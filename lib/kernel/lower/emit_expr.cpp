// Element expressions: body node `id` at a multi-index as a kernel-IR expression, views
// folded into the index, pads into validity predicates, reductions read from the
// accumulator or a temporary (see lower_spec.hpp for the scheme).
#include <cstdlib>
#include <functional>

#include "graph/natural_exp.hpp"
#include "ir/kernel_body.hpp"
#include "ir/unit_reshape.hpp"
#include "kernel/lower/lowerer.hpp"

namespace luminal::kernel::lower {

namespace {

bool is_one(const Dim& d) { return d.as_constant() == int64_t{1}; }

// Nodes whose inlined copies cost computation (not views, leaves or reductions, which
// are loads, index arithmetic or materialized already).
bool is_computed(PrimOp op) { return ir::is_elementwise(ir::to_op(op)); }

// mod is C's truncated remainder (sign of the dividend); the IR's Mod floors (sign of
// the divisor): they differ by b exactly when the remainder is non-zero and the signs
// of a and b differ.
Expr truncated_mod(Expr a, Expr b, DType dt) {
  using kernel::BinaryOp;
  Expr r = kernel::binary(BinaryOp::Mod, a, b);
  Expr zero = kernel::constant(0, dt);
  Expr nz = kernel::unary(kernel::UnaryOp::Not, kernel::binary(BinaryOp::Equal, r, zero));
  Expr differ = kernel::unary(kernel::UnaryOp::Not,
                              kernel::binary(BinaryOp::Equal, kernel::binary(BinaryOp::LessThan, a, zero),
                                             kernel::binary(BinaryOp::LessThan, b, zero)));
  return kernel::where(kernel::binary(BinaryOp::And, nz, differ), kernel::binary(BinaryOp::Sub, r, b), r);
}

// f32 -> i32 as prim_cast defines it: truncate, NaN -> 0, saturate (a C cast would be
// undefined out of range).
Expr saturating_cast(Expr x, DType to) {
  using kernel::BinaryOp;
  if (to != DType::i32 || !is_float(x.dtype())) return kernel::cast(x, to);
  Expr f = x.dtype() == DType::f32 ? x : kernel::cast(x, DType::f32);
  Expr not_nan = kernel::binary(BinaryOp::Equal, f, f);
  Expr y = kernel::where(not_nan, f, kernel::constant(0));
  Expr clamped =
      kernel::binary(BinaryOp::Max, kernel::binary(BinaryOp::Min, y, kernel::constant(2147483520.0)),
                     kernel::constant(-2147483648.0));
  Expr fits = kernel::binary(BinaryOp::LessThan, y, kernel::constant(2147483648.0));
  return kernel::where(fits, kernel::cast(clamped, DType::i32), kernel::constant(2147483647.0, DType::i32));
}

}  // namespace

std::string Lowerer::key(uint32_t n, const std::vector<Index>& idx, const std::optional<Index>& valid) {
  // Built with append: GCC 12 warns falsely (-Wrestrict) on operator+ with a literal.
  std::string k = std::to_string(n);
  for (const auto& i : idx) k.append("|").append(i.to_string());
  if (valid) k.append("?").append(valid->to_string());
  return k;
}

int Lowerer::slot_buffer(const Node& n) {
  if (n.name.size() < 2 || n.name[0] != '%') {
    unsupported("input node '" + n.name + "' is not a slot", n.dtype);
    return 0;
  }
  const size_t s = static_cast<size_t>(std::strtoul(n.name.c_str() + 1, nullptr, 10));
  if (s >= args_.size()) {
    unsupported("slot " + n.name + " without an argument", n.dtype);
    return 0;
  }
  return args_[s];
}

// Index of the input element that reshape output element `idx` reads. Dims are grouped
// where products match so a pure unsqueeze/merge/split needs no div/mod per element.
std::vector<Index> Lowerer::reshape_index(uint32_t in, uint32_t out, const std::vector<Index>& idx) {
  const auto& is = body_.nodes[in].shape;
  const auto& os = body_.nodes[out].shape;
  std::vector<Index> r(is.size(), Index(0));
  size_t i = 0, o = 0;
  while (i < is.size() || o < os.size()) {
    // size-1 dims on either side carry no index
    if (i < is.size() && is_one(is[i])) {
      ++i;
      continue;
    }
    if (o < os.size() && is_one(os[o])) {
      ++o;
      continue;
    }
    if (i >= is.size() || o >= os.size()) break;
    // smallest groups [i, i2) and [o, o2) with equal (constant or identical) products
    size_t i2 = i + 1, o2 = o + 1;
    Dim pi = is[i], po = os[o];
    bool found = false;
    for (int guard = 0; guard < 64; ++guard) {
      if (pi.same_as(po)) {
        found = true;
        break;
      }
      auto ci = pi.as_constant(), co = po.as_constant();
      if (!ci || !co) break;
      if (*ci < *co) {
        if (i2 >= is.size()) break;
        pi = pi * is[i2++];
      } else {
        if (o2 >= os.size()) break;
        po = po * os[o2++];
      }
    }
    if (!found) return reshape_linear(in, out, idx);
    // linear position within the group (output side), then split over the input side
    std::vector<Index> ov, od;
    for (size_t k = o; k < o2; ++k) {
      ov.push_back(idx[k]);
      od.push_back(shapes_[out][k]);
    }
    Index lin = kernel::row_major(ov, od);
    for (size_t k = i2; k-- > i;) {
      if (k == i) {
        r[k] = lin;
        break;
      }
      r[k] = kernel::mod(lin, shapes_[in][k]);
      lin = kernel::floordiv(lin, shapes_[in][k]);
    }
    i = i2;
    o = o2;
  }
  return r;
}

std::optional<std::vector<Index>> Lowerer::index_along(uint32_t from, uint32_t target,
                                                       const std::vector<Index>& idx) {
  // Depth first; a node the target is not below is not walked twice (a diamond of
  // elementwise ops, SiLU's x read twice, would double the walk at each).
  std::vector<uint8_t> dead(body_.nodes.size(), 0);
  std::function<std::optional<std::vector<Index>>(uint32_t, const std::vector<Index>&)> walk =
      [&](uint32_t at, const std::vector<Index>& i) -> std::optional<std::vector<Index>> {
    if (at == target) return i;
    if (dead[at]) return std::nullopt;
    const Node& n = body_.nodes[at];
    std::optional<std::vector<Index>> found;
    if (n.op == PrimOp::Reshape && ir::unit_reshape_axes(n.shape, body_.nodes[n.inputs[0]].shape)) {
      std::vector<Index> in = reshape_index(n.inputs[0], at, i);
      for (auto& x : in) x = simp(x);  // as emit() does
      found = walk(n.inputs[0], in);
    } else if (is_computed(n.op)) {
      for (uint32_t k : n.inputs)
        if ((found = walk(k, i))) break;
    }
    if (!found) dead[at] = 1;
    return found;
  };
  return walk(from, idx);
}

std::vector<Index> Lowerer::reshape_linear(uint32_t in, uint32_t out, const std::vector<Index>& idx) {
  Index lin = kernel::row_major(idx, shapes_[out]);
  return delinearize(lin, shapes_[in]);
}

std::vector<Index> Lowerer::delinearize(Index lin, const std::vector<Index>& dims) {
  std::vector<Index> r(dims.size(), Index(0));
  for (size_t k = dims.size(); k-- > 0;) {
    if (k == 0) {
      r[k] = lin;
      break;
    }
    r[k] = kernel::mod(lin, dims[k]);
    lin = kernel::floordiv(lin, dims[k]);
  }
  return r;
}

// Index trees are DAGs printed as trees; deep view chains with symbolic dims (e.g. a
// log-step scan over a symbolic axis) can grow them exponentially. Past a size the body
// is left to the interpreter (counted in the report) instead of exhausting memory.
bool too_large(const Index& i, int64_t& budget) {
  if (--budget < 0) return true;
  for (const auto& a : i.node().args)
    if (too_large(a, budget)) return true;
  return false;
}

Expr Lowerer::emit(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) {
  const DType dt = body_.nodes[id].dtype;
  if (stopped()) return kernel::constant(0, dt);
  int64_t budget = 20000;
  for (const auto& i : idx)
    if (too_large(i, budget))
      return unsupported("index expression too large (deep views over symbolic dims)", dt);
  if (valid && too_large(*valid, budget))
    return unsupported("index expression too large (deep views over symbolic dims)", dt);
  const std::string k = key(id, idx, valid);
  if (auto it = ctx_.memo.find(k); it != ctx_.memo.end()) return it->second;
  if (++ctx_.emits > kMaxKernelEmits)
    return unsupported(
        "kernel expression too large (over " + std::to_string(kMaxKernelEmits) + " nodes inlined)", dt);
  Expr e;
  if (static_cast<int>(id) != ctx_.self && shared_.count(id)) {
    e = load_node(materialize(id), id, idx, valid);
  } else {
    if (static_cast<int>(id) != ctx_.self && is_computed(body_.nodes[id].op) &&
        ++ctx_.copies[id] > kMaxInlineCopies) {
      remat_ = id;
      return kernel::constant(0, dt);
    }
    e = emit_raw(id, idx, valid);
  }
  if (!stopped()) ctx_.memo.emplace(k, e);
  return e;
}

// Element `idx` of body node `id`, read from buffer `b` that holds it row-major.
Expr Lowerer::load_node(int b, uint32_t id, const std::vector<Index>& idx,
                        const std::optional<Index>& valid) const {
  const DType dt = body_.nodes[id].dtype;
  Index lin = simp(kernel::row_major(idx, shapes_[id]));
  if (valid && valid->as_constant() != int64_t{1}) {
    if (valid->as_constant() == int64_t{0}) return kernel::constant(0, dt);
    return kernel::load_padded(b, dt, kernel::select(*valid, lin, Index(0)), *valid, 0);
  }
  return kernel::load(b, dt, lin);
}

// Element `idx` of a param stored as a block of its declared shape (Program::blocks): the
// same element at its place in the block. The views above it read only inside the block
// (dist::param_regions found the block from them), so the shifted index is in range.
Expr Lowerer::load_block(int b, uint32_t id, const std::vector<Index>& idx,
                         const std::optional<Index>& valid) const {
  const kernel::BufferBlock& blk = *prog_.block(b);
  const DType dt = body_.nodes[id].dtype;
  if (idx.size() != blk.dims.size()) return kernel::constant(0, dt);  // not reached: shapes agree
  std::vector<Index> at, dims;
  for (size_t a = 0; a < idx.size(); ++a) {
    at.push_back(idx[a] - Index(blk.start[a]));
    dims.push_back(Index(blk.dims[a]));
  }
  Index lin = simp(kernel::row_major(at, dims));
  if (valid && valid->as_constant() != int64_t{1}) {
    if (valid->as_constant() == int64_t{0}) return kernel::constant(0, dt);
    return kernel::load_padded(b, dt, kernel::select(*valid, lin, Index(0)), *valid, 0);
  }
  return kernel::load(b, dt, lin);
}

Expr Lowerer::emit_raw(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) {
  const Node& n = body_.nodes[id];
  auto kid = [&](size_t j) { return emit(n.inputs[j], idx, valid); };
  using kernel::BinaryOp;
  using kernel::UnaryOp;
  // exp2(x * k log2 e) is e^(k x), the product unrounded (graph/natural_exp.hpp).
  if (auto ne = detail::natural_exp(body_, id)) {
    Expr x = emit(ne->operand, idx, valid);
    if (ne->k == -1)
      x = kernel::unary(UnaryOp::Neg, x);
    else if (ne->k != 1)
      x = kernel::binary(BinaryOp::Mul, x, kernel::constant(ne->k, DType::f32));  // exact: k = +-2^j
    return kernel::unary(UnaryOp::Exp, x);
  }
  switch (n.op) {
    case PrimOp::Input: {
      const int b = slot_buffer(n);
      if (stopped()) return kernel::constant(0, n.dtype);
      if (!prog_.block(b)) return load_node(b, id, idx, valid);
      return load_block(b, id, idx, valid);
    }
    case PrimOp::Param:
      return unsupported("param leaf inside a kernel body", n.dtype);
    case PrimOp::Constant:
      return kernel::constant(n.value, n.dtype);
    case PrimOp::Iota:
      return kernel::index_value(simp(idx.at(0)));
#define LUMINAL_LOWER_UNARY(e, ...) case PrimOp::e:
      LUMINAL_PRIM_UNARY_OPS(LUMINAL_LOWER_UNARY)  // unary math: the kernel-IR op of the same name
#undef LUMINAL_LOWER_UNARY
      return kernel::unary(kernel::unary_of(n.op), kid(0));
    case PrimOp::Add:
      return kernel::binary(BinaryOp::Add, kid(0), kid(1));
    case PrimOp::Mul:
      return kernel::binary(n.dtype == DType::boolean ? BinaryOp::And : BinaryOp::Mul, kid(0), kid(1));
    case PrimOp::Max:
      return kernel::binary(n.dtype == DType::boolean ? BinaryOp::Or : BinaryOp::Max, kid(0), kid(1));
    case PrimOp::Mod:
      return truncated_mod(kid(0), kid(1), n.dtype);
    case PrimOp::LessThan:
      return kernel::binary(BinaryOp::LessThan, kid(0), kid(1));
    case PrimOp::Equal:
      return kernel::binary(BinaryOp::Equal, kid(0), kid(1));
    case PrimOp::Where:
      return kernel::where(kid(0), kid(1), kid(2));
    case PrimOp::Cast:
      return saturating_cast(kid(0), n.dtype);
    case PrimOp::SumReduce:
    case PrimOp::MaxReduce: {
      if (static_cast<int>(id) == ctx_.acc_node && !valid &&
          (ctx_.acc_key.empty() || ctx_.acc_key == key(id, idx, std::nullopt))) {
        ctx_.acc_seen.push_back(idx);
        return kernel::acc(ctx_.acc_dtype);
      }
      for (size_t i = 0; i < ctx_.more_accs.size(); ++i)
        if (static_cast<int>(id) == ctx_.more_accs[i].node && !valid &&
            ctx_.more_accs[i].key == key(id, idx, std::nullopt))
          return kernel::acc(ctx_.more_accs[i].dtype, static_cast<int>(i) + 1);
      return load_node(materialize(id), id, idx, valid);
    }
    case PrimOp::Gather:
      return unsupported("gather fused with other ops (only a bare gather kernel is generated)", n.dtype);
    case PrimOp::AllReduce:
    case PrimOp::AllGather:
    case PrimOp::ReduceScatter:
      return unsupported("a collective is a host step (lib/dist), not a generated kernel", n.dtype);
    case PrimOp::Reshape: {
      std::vector<Index> in = reshape_index(n.inputs[0], id, idx);
      for (auto& i : in) i = simp(i);
      return emit(n.inputs[0], in, valid);
    }
    case PrimOp::Permute: {
      std::vector<Index> in(idx.size());
      for (size_t i = 0; i < n.perm.size(); ++i) in[static_cast<size_t>(n.perm[i])] = idx[i];
      return emit(n.inputs[0], in, valid);
    }
    case PrimOp::Expand: {
      const auto& is = body_.nodes[n.inputs[0]].shape;
      std::vector<Index> in = idx;
      for (size_t i = 0; i < is.size(); ++i)
        if (is_one(is[i])) in[i] = Index(0);
      if (ctx_.hoist_broadcasts && ir::hoists_broadcast(body_, id)) {
        // Computed once over its own shape, then read at each repetition (the cost
        // model charges it the same way).
        return load_node(materialize(n.inputs[0]), n.inputs[0], in, valid);
      }
      return emit(n.inputs[0], in, valid);
    }
    case PrimOp::Slice: {
      std::vector<Index> in = idx;
      const size_t a = static_cast<size_t>(n.axis);
      in[a] = simp(dim_index(n.start, prog_) + idx[a] * Index(n.step));
      return emit(n.inputs[0], in, valid);
    }
    case PrimOp::Pad: {
      std::vector<Index> in = idx;
      const size_t a = static_cast<size_t>(n.axis);
      const Index lo = dim_index(n.start, prog_);
      in[a] = simp(idx[a] - lo);
      const Index inside =
          simp(kernel::land(kernel::le(lo, idx[a]), kernel::lt(idx[a], lo + shapes_[n.inputs[0]][a])));
      // the ranges may decide it: all inside (a pad the index never reaches) or all fill
      if (inside.as_constant() == int64_t{1}) return emit(n.inputs[0], in, valid);
      if (inside.as_constant() == int64_t{0}) return kernel::constant(n.value, n.dtype);
      const Index v = valid ? simp(kernel::land(*valid, inside)) : inside;
      Expr inner = emit(n.inputs[0], in, v);
      Expr cond = kernel::cast(kernel::index_value(inside), DType::boolean);
      return kernel::where(cond, inner, kernel::constant(n.value, n.dtype));
    }
  }
  return unsupported("unknown primitive", n.dtype);
}

}  // namespace luminal::kernel::lower
