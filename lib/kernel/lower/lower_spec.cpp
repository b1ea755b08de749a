// Kernel body -> kernel IR (see lower_spec.hpp).
#include "kernel/lower/lower_spec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "ir/attention_match.hpp"
#include "ir/kernel_body.hpp"
#include "graph/dim_expr.hpp"
#include "graph/natural_exp.hpp"
#include "kernel/index_simplify.hpp"
#include "kernel/lower/recognize.hpp"
#include "luminal/error.hpp"

namespace luminal::kernel::lower {

using detail::Node;
using detail::PrimOp;
using kernel::Expr;
using kernel::Index;

kernel::Index dim_index(const Dim& d, kernel::Program& prog) {
  const auto& e = *d.expr();
  Index out(e.constant);
  for (const auto& t : e.terms) {
    Index term(t.coeff);
    for (const auto& a : t.atoms) {
      Index x;
      switch (a->kind) {
        case detail::AtomKind::Var:
          if (std::find(prog.symbols.begin(), prog.symbols.end(), a->name) == prog.symbols.end())
            prog.symbols.push_back(a->name);
          x = Index::sym(a->name);
          break;
        case detail::AtomKind::Div:
          x = kernel::floordiv(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Mod:
          x = kernel::mod(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Min:
          x = kernel::min(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
        case detail::AtomKind::Max:
          x = kernel::max(dim_index(a->a, prog), dim_index(a->b, prog));
          break;
      }
      term = term * x;
    }
    out = out + term;
  }
  return out;
}

namespace {

// The declared least value of every dim variable in `d` (for index simplification).
void collect_sym_mins(const Dim& d, kernel::SymbolMins& out) {
  if (!d.expr()) return;
  for (const auto& t : d.expr()->terms)
    for (const auto& a : t.atoms) {
      if (a->kind == detail::AtomKind::Var) {
        out[a->name] = a->lo;
      } else {
        collect_sym_mins(a->a, out);
        collect_sym_mins(a->b, out);
      }
    }
}

bool is_one(const Dim& d) { return d.as_constant() == int64_t{1}; }

/// An affine form sum(coef[var] * var) + base, coefficients free of loop variables.
struct Affine {
  std::map<int, Index> coef;
  Index base;
};

// Loop variables of interest: an affine form is taken in these only; every other
// variable (a batch loop) counts as a constant, so a batch offset may be any index
// expression (e.g. h / G for grouped-query attention).
using VarSet = std::vector<int>;

bool uses_var(const Index& i, int v) {
  const auto& n = i.node();
  if (n.op == kernel::IndexOp::Var) return n.value == v;
  return std::any_of(n.args.begin(), n.args.end(), [&](const Index& a) { return uses_var(a, v); });
}

bool var_free(const Index& i, const VarSet& vars) {
  return std::none_of(vars.begin(), vars.end(), [&](int v) { return uses_var(i, v); });
}

std::optional<Affine> affine(const Index& i, const VarSet& vars) {
  const auto& n = i.node();
  if (var_free(i, vars)) return Affine{{}, i};
  switch (n.op) {
    case kernel::IndexOp::Var: {
      Affine a;
      a.coef[static_cast<int>(n.value)] = Index(1);
      return a;
    }
    case kernel::IndexOp::Add:
    case kernel::IndexOp::Sub: {
      auto x = affine(n.args[0], vars), y = affine(n.args[1], vars);
      if (!x || !y) return std::nullopt;
      const bool sub = n.op == kernel::IndexOp::Sub;
      for (auto& [v, c] : y->coef) {
        auto it = x->coef.find(v);
        Index base = it == x->coef.end() ? Index(0) : it->second;
        x->coef[v] = sub ? base - c : base + c;
      }
      x->base = sub ? x->base - y->base : x->base + y->base;
      return x;
    }
    case kernel::IndexOp::Mul: {
      const bool f0 = var_free(n.args[0], vars), f1 = var_free(n.args[1], vars);
      if (!f0 && !f1) return std::nullopt;
      const size_t vf = f0 ? 0 : 1;
      auto x = affine(n.args[1 - vf], vars);
      if (!x) return std::nullopt;
      const Index& sc = n.args[vf];
      for (auto& [v, c] : x->coef) c = c * sc;
      x->base = x->base * sc;
      return x;
    }
    default:
      return std::nullopt;
  }
}

Index coef_of(const Affine& a, int var) {
  auto it = a.coef.find(var);
  return it == a.coef.end() ? Index(0) : it->second;
}

// Inlining a body node re-computes it at every index it is read at. Views that read one
// node at several indices (a balanced product tree: mul(x[:n/2], x[n/2:]) per level)
// multiply those indices level by level, so an inlined body can grow exponentially (prod
// over a padded symbolic axis: 4096 loads per element, and 4096^2 over two axes). A
// computed node read at more than kMaxInlineCopies distinct indices within one kernel is
// therefore computed once into a buffer by its own kernel and loaded from there; the
// lowering starts over with that node marked (Lowerer::remat_), so no kernel ever holds
// more than that many copies of any computed node.
constexpr int kMaxInlineCopies = 16;
// Safety net behind that bound: a kernel whose body expression still exceeds this many
// node emissions is left to the interpreter rather than handed to the C compiler.
constexpr int64_t kMaxKernelEmits = 200000;

// Nodes whose inlined copies cost computation (not views, leaves or reductions, which
// are loads, index arithmetic or materialized already).
bool is_computed(PrimOp op) { return ir::is_elementwise(ir::to_op(op)); }

class Lowerer {
 public:
  Lowerer(const ir::KernelSpec& spec, const std::vector<int>& args, const std::string& name,
          kernel::Program& prog, const Options& opt)
      : body_(*spec.body), spec_(spec), args_(args), name_(name), prog_(prog), opt_(opt) {
    shapes_.resize(body_.nodes.size());
    for (size_t i = 0; i < body_.nodes.size(); ++i) {
      const Node& n = body_.nodes[i];
      for (const Dim& d : n.shape) {
        shapes_[i].push_back(dim_index(d, prog_));
        collect_sym_mins(d, sym_min_);
      }
      collect_sym_mins(n.start, sym_min_);
      collect_sym_mins(n.end, sym_min_);
    }
  }

  /// Lowers the body into `kernels`; the reason when it cannot be expressed.
  std::optional<Failure> lower(int result) {
    root_ = body_.outputs.at(0).second;
    const size_t buffers0 = prog_.buffers.size();
    for (;;) {
      lower_once(result);
      if (failure_) return Failure{*failure_};
      if (!remat_) return std::nullopt;
      // Start over with node *remat_ computed into its own buffer (see kMaxInlineCopies).
      const uint32_t node = *remat_;
      remat_.reset();
      if (!shared_.insert(node).second) return Failure{"internal: node rematerialized twice"};
      kernels.clear();
      materialized_.clear();
      prog_.buffers.resize(buffers0);
      counter_ = 0;
      ctx_ = Ctx{};
    }
  }

  std::vector<kernel::Kernel> kernels;

 private:
  // Each kernel kind: a recogniser (recognize.hpp: match the body, return a plan or why
  // not) and an emitter here; a body no specialised form takes is generic loops.
  void lower_once(int result) {
    const bool gemm = spec_.kind == ir::KernelKind::Gemm || spec_.kind == ir::KernelKind::LibraryGemm;
    if (gemm)
      if (auto m = recognize_gemm(body_, root_); m.plan && emit_gemm(*m.plan, result)) return;
    if (stopped()) return;
    if (spec_.kind == ir::KernelKind::Attention && try_attention(result)) return;
    if (stopped()) return;
    if (spec_.kind == ir::KernelKind::Gather) {
      auto m = recognize_gather(body_, root_);
      if (!m.plan) return void(unsupported(m.why, body_.nodes[root_].dtype));
      return emit_gather(*m.plan, result);
    }
    lower_generic(root_, result);
  }

  // ---------------------------------------------------------------- failures as values
  // Emission that meets what cannot be expressed records why (the first reason) and
  // carries on with a placeholder of the right dtype, so expression building stays
  // well-typed; every kernel-producing step checks stopped() before keeping its kernel.
  // A computed node inlined too often asks for a fresh start instead (remat_).
  std::optional<std::string> failure_;
  std::optional<uint32_t> remat_;
  bool stopped() const { return failure_.has_value() || remat_.has_value(); }
  Expr unsupported(const std::string& why, DType dt) {
    if (!failure_) failure_ = why;
    return kernel::constant(0, dt);
  }
  // After a speculative emission (a specialised kernel form): true when it failed, and the
  // failure is forgotten -- the caller falls back to another form. A pending fresh start
  // stays pending: the whole lowering starts over anyway.
  bool speculation_failed() {
    if (remat_) return true;
    if (!failure_) return false;
    failure_.reset();
    return true;
  }

  // ---------------------------------------------------------------- per-kernel context
  struct Ctx {
    int acc_node = -1;
    DType acc_dtype = DType::f32;
    std::string acc_key;  // index at which acc() is the reduce node's value ("": any)
    std::map<std::string, Expr> memo;
    int next_var = 0;
    bool hoist_broadcasts = false;   // preparing a GEMM operand (see ir::hoists_broadcast)
    int self = -1;                   // the node this kernel computes (never loaded from itself)
    std::map<uint32_t, int> copies;  // distinct indices each computed node was inlined at
    int64_t emits = 0;               // nodes emitted into this kernel (kMaxKernelEmits)
    kernel::VarExtents extents;      // loop variable -> extent, for index simplification
  };

  // Index arithmetic of views composed and reduced with the loops' ranges (floor div and
  // mod of a row-major linearization fold back to the loop variables).
  Index simp(const Index& i) const { return kernel::simplify(i, ctx_.extents, sym_min_); }

  int new_var() { return ctx_.next_var++; }
  std::string kernel_name() { return name_ + "_" + std::to_string(counter_++); }

  static std::string key(uint32_t n, const std::vector<Index>& idx, const std::optional<Index>& valid) {
    // Built with append: GCC 12 warns falsely (-Wrestrict) on operator+ with a literal.
    std::string k = std::to_string(n);
    for (const auto& i : idx) k.append("|").append(i.to_string());
    if (valid) k.append("?").append(valid->to_string());
    return k;
  }

  int slot_buffer(const Node& n) {
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
  std::vector<Index> reshape_index(uint32_t in, uint32_t out, const std::vector<Index>& idx) {
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
  std::vector<Index> reshape_linear(uint32_t in, uint32_t out, const std::vector<Index>& idx) {
    Index lin = kernel::row_major(idx, shapes_[out]);
    return delinearize(lin, shapes_[in]);
  }
  static std::vector<Index> delinearize(Index lin, const std::vector<Index>& dims) {
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

  // ---------------------------------------------------------------- expressions
  // Index trees are DAGs printed as trees; deep view chains with symbolic dims (e.g. a
  // log-step scan over a symbolic axis) can grow them exponentially. Past a size the body
  // is left to the interpreter (counted in the report) instead of exhausting memory.
  static bool too_large(const Index& i, int64_t& budget) {
    if (--budget < 0) return true;
    for (const auto& a : i.node().args)
      if (too_large(a, budget)) return true;
    return false;
  }

  Expr emit(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) {
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
  Expr load_node(int b, uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) const {
    const DType dt = body_.nodes[id].dtype;
    Index lin = simp(kernel::row_major(idx, shapes_[id]));
    if (valid && valid->as_constant() != int64_t{1}) {
      if (valid->as_constant() == int64_t{0}) return kernel::constant(0, dt);
      return kernel::load_padded(b, dt, kernel::select(*valid, lin, Index(0)), *valid, 0);
    }
    return kernel::load(b, dt, lin);
  }

  Expr emit_raw(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) {
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
      case PrimOp::Input:
        return load_node(slot_buffer(n), id, idx, valid);
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
        return cast(kid(0), n.dtype);
      case PrimOp::SumReduce:
      case PrimOp::MaxReduce: {
        if (static_cast<int>(id) == ctx_.acc_node && !valid &&
            (ctx_.acc_key.empty() || ctx_.acc_key == key(id, idx, std::nullopt)))
          return kernel::acc(ctx_.acc_dtype);
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

  // mod is C's truncated remainder (sign of the dividend); the IR's Mod floors (sign of
  // the divisor): they differ by b exactly when the remainder is non-zero and the signs
  // of a and b differ.
  static Expr truncated_mod(Expr a, Expr b, DType dt) {
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
  static Expr cast(Expr x, DType to) {
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

  // ---------------------------------------------------------------- kernels
  std::vector<kernel::Loop> loops_over(const std::vector<Index>& dims, std::vector<Index>& vars,
                                       bool parallel) {
    std::vector<kernel::Loop> loops;
    for (const auto& d : dims) {
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

  static bool worth_parallel(const std::vector<Index>& dims, int64_t inner_work = 1) {
    int64_t n = inner_work;
    for (const auto& d : dims) {
      auto c = d.as_constant();
      if (!c) return true;
      n *= *c;
    }
    return n >= 32768;
  }

  // A bare gather (the only body a Gather kernel has): row copies, ids checked by the
  // host before the call.
  void emit_gather(const GatherBody& m, int result) {
    const Node& n = body_.nodes[m.gather];
    const uint32_t table = m.table, ids = m.ids;
    kernel::Gather g;
    g.table = slot_buffer(body_.nodes[table]);
    g.ids = slot_buffer(body_.nodes[ids]);
    g.out = result;
    g.count = Index(1);
    for (const Index& d : shapes_[ids]) g.count = g.count * d;
    const auto& ts = shapes_[table];
    if (ts.empty()) return void(unsupported("gather from a rank-0 table", n.dtype));
    if (stopped()) return;
    g.rows = ts[0];
    g.row = Index(1);
    for (size_t i = 1; i < ts.size(); ++i) g.row = g.row * ts[i];
    if (!n.op_name.empty()) g.op_name = n.op_name;
    kernel::Kernel k;
    k.name = kernel_name();
    k.kind = kernel::KernelKind::Gather;
    k.gather = std::move(g);
    kernels.push_back(std::move(k));
  }

  // One kernel computing body node `id` into buffer `out` (row-major over its shape).
  void lower_generic(uint32_t id, int out) {
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
      std::vector<Index> in_idx = vars;  // the reduction's output index == the root's
      in_idx.insert(in_idx.begin() + rn.axis, Index::var(rl.var));
      red_ir.value = emit(rn.inputs[0], in_idx, std::nullopt);
      ctx_.acc_node = r;
      ctx_.acc_dtype = rn.dtype;
      ctx_.acc_key = key(static_cast<uint32_t>(r), vars, std::nullopt);
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

  // A temporary buffer holding body node `id` (a reduction, or a hoisted broadcast value),
  // computed by its own loop nest first.
  int materialize(uint32_t id) {
    if (auto it = materialized_.find(id); it != materialized_.end()) return it->second;
    kernel::Buffer b;
    b.name = name_ + "_t" + std::to_string(prog_.buffers.size());
    b.dtype = body_.nodes[id].dtype;
    b.elements = Index(1);
    for (const auto& d : shapes_[id]) b.elements = b.elements * d;
    b.role = kernel::BufferRole::Intermediate;
    prog_.buffers.push_back(b);
    const int buf = static_cast<int>(prog_.buffers.size() - 1);
    lower_generic(id, buf);
    if (!stopped()) materialized_[id] = buf;
    return buf;
  }

  // A contiguous copy of body node `node` (rank `rank`) over the input axes `keep` (the
  // others pinned to 0), computed by its own elementwise kernel; returns the buffer.
  int materialize_operand(uint32_t node, const std::vector<int>& keep, const std::vector<Index>& dims,
                          size_t rank) {
    Ctx saved = std::move(ctx_);
    ctx_ = Ctx{};
    ctx_.hoist_broadcasts = true;
    kernel::Kernel k;
    std::vector<Index> vars;
    k.loops = loops_over(dims, vars, worth_parallel(dims));
    std::vector<Index> at(rank, Index(0));
    for (size_t i = 0; i < keep.size(); ++i) at[static_cast<size_t>(keep[i])] = vars[i];
    kernel::Buffer b;
    b.name = name_ + "_t" + std::to_string(prog_.buffers.size());
    b.dtype = DType::f32;
    b.elements = Index(1);
    for (const auto& d : dims) b.elements = b.elements * d;
    prog_.buffers.push_back(b);
    const int buf = static_cast<int>(prog_.buffers.size() - 1);
    k.kind = kernel::KernelKind::Elementwise;
    k.store.buffer = buf;
    k.store.index = kernel::row_major(vars, dims);
    k.store.value = emit(node, at, std::nullopt);
    if (!stopped()) {
      k.name = kernel_name();
      kernels.push_back(std::move(k));
    }
    ctx_ = std::move(saved);
    return buf;
  }

  static bool expr_uses_var(const Expr& e, int v) {
    const auto& n = e.node();
    if ((n.op == kernel::ExprOp::Load || n.op == kernel::ExprOp::IndexValue) && uses_var(n.index, v))
      return true;
    if (n.valid && uses_var(*n.valid, v)) return true;
    return std::any_of(n.args.begin(), n.args.end(), [&](const Expr& a) { return expr_uses_var(a, v); });
  }

  // ---------------------------------------------------------------- GEMM
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
  struct GemmAxes {
    int m = -1, n = -1;  // input axes (= variables); -1: absent (size 1)
    std::vector<int> batch;
  };

  // m: read by x only, n: read by y only, batch: read by both; nullopt when two axes
  // would be m (or n).
  static std::optional<GemmAxes> gemm_axes(const Expr& x, const Expr& y, const GemmFrame& f) {
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

  static bool plain_f32_load(const Expr& e) {
    return e.op() == kernel::ExprOp::Load && e.dtype() == DType::f32 && !e.node().valid;
  }

  // An operand as an affine view; one that is not a plain strided load (a
  // permuted-then-merged view, a computed prologue) is first copied into a contiguous
  // buffer by its own kernel, over every axis but `other_axis` (the other operand's).
  // A weight stored as f16/bf16 and read through a cast to f32 (linear(x, cast(w, f32)))
  // is B as it is: the generated GEMM converts it while packing, so the weight is read at
  // half the bytes and never copied to f32 whole on each call.
  static std::optional<Expr> half_weight(const Expr& e) {
    if (e.op() != kernel::ExprOp::Cast || e.dtype() != DType::f32 || e.node().args.size() != 1)
      return std::nullopt;
    const Expr& in = e.node().args[0];
    if (in.op() == kernel::ExprOp::Load && (in.dtype() == DType::f16 || in.dtype() == DType::bf16) &&
        !in.node().valid)
      return in;
    return std::nullopt;
  }

  Affine gemm_operand(Expr& e, uint32_t node, int other_axis, const GemmFrame& f, bool b_side) {
    if (plain_f32_load(e))
      if (auto a = affine(e.node().index, f.interest)) return *a;
    if (b_side)
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
    const int buf = materialize_operand(node, keep, dims, f.rank);
    e = kernel::load(buf, DType::f32, kernel::row_major(at, dims));
    return *affine(e.node().index, f.interest);
  }

  bool emit_gemm(const GemmBody& plan, int result) {
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
    Expr x = emit(mul.inputs[0], f.idx, std::nullopt);
    Expr y = emit(mul.inputs[1], f.idx, std::nullopt);
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
    if (m_axis < 0) {
      bool strided_big = false;
      if (plain_f32_load(Y))
        if (auto ay = affine(Y.node().index, f.interest)) {
          auto kn =
              (in_dims[ax] * (n_axis >= 0 ? in_dims[static_cast<size_t>(n_axis)] : Index(1))).as_constant();
          strided_big = coef_of(*ay, static_cast<int>(ax)).as_constant() != int64_t{1} && kn &&
                        *kn >= (int64_t{1} << 20);
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
    Affine ax_ = gemm_operand(X, xin, n_axis, f, false);
    Affine ay = gemm_operand(Y, yin, m_axis, f, true);

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
    g.a = view(X, ax_, m_axis, kv);
    g.b = view(Y, ay, kv, n_axis);
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
      for (size_t i = 0; same && i < rvars.size(); ++i)
        same = body_.nodes[root_].shape[i].same_as(rn.shape[i]);
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

  // ---------------------------------------------------------------- attention
  // An Attention body (ir/attention_match.hpp) -> the Attention kind: Q and K from the
  // score contraction R1 (views folded into strides; a prologue such as RoPE computed
  // into a contiguous buffer first, as for a GEMM operand), the score epilogue over its
  // accumulator, V from R2's other operand, the output epilogue over R2's accumulator.
  // Returns false (the body then lowers as generic loops) when a piece does not fit.
  bool try_attention(int result) {
    auto mt = ir::match_attention(body_);
    if (!mt || body_.nodes[root_].dtype != DType::f32) return false;
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
    // R1's output axes (its input's without the summed one) index S directly.
    std::vector<int> out1;  // input axis of each output axis
    for (size_t i = 0; i < rank1; ++i)
      if (i != ax1) out1.push_back(static_cast<int>(i));
    const auto& sshape = body_.nodes[mt->score].shape;
    if (sshape.size() != out1.size()) return fail();
    for (size_t t = 0; t < out1.size(); ++t)
      if (!sshape[t].same_as(body_.nodes[mt->score_reduce].shape[t])) return fail();
    const int key_axis1 = out1[static_cast<size_t>(mt->key_axis)];
    if (idx1[static_cast<size_t>(key_axis1)].as_constant()) return fail();  // one key: no streaming
    const int jv = key_axis1;
    // Q and K are staged by the kernel through these expressions: a RoPE prologue is
    // computed there, its sin/cos table (broadcast over heads) computed once beforehand.
    ctx_.hoist_broadcasts = true;
    Expr x = emit(mul1.inputs[0], idx1, std::nullopt);
    Expr y = emit(mul1.inputs[1], idx1, std::nullopt);
    if (speculation_failed()) return fail();
    // K is the operand indexed by the key variable; Q the one with the query axis.
    uint32_t qin = mul1.inputs[0], kin = mul1.inputs[1];
    if (expr_uses_var(x, jv) && !expr_uses_var(y, jv)) {
      std::swap(x, y);
      std::swap(qin, kin);
    }
    if (expr_uses_var(x, jv) || !expr_uses_var(y, jv)) return fail();
    int iv = -1;
    std::vector<int> batch;
    for (size_t i = 0; i < rank1; ++i) {
      const int v = static_cast<int>(i);
      if (v == jv || i == ax1 || idx1[i].as_constant()) continue;
      const bool cx = expr_uses_var(x, v), cy = expr_uses_var(y, v);
      if (cx && !cy) {
        if (iv >= 0) return fail();
        iv = v;
      } else if (cy && !cx) {
        return fail();  // a second key-like axis
      } else {
        batch.push_back(v);
      }
    }
    auto plain = [](const Expr& e) {
      return e.op() == kernel::ExprOp::Load && e.dtype() == DType::f32 && !e.node().valid;
    };
    VarSet interest{static_cast<int>(ax1), jv};
    if (iv >= 0) interest.push_back(iv);
    auto operand = [&](Expr& e, uint32_t node, int other_axis, const std::vector<Index>& idx,
                       const std::vector<Index>& dims_of, uint32_t owner) -> std::optional<Affine> {
      if (plain(e))
        if (auto a = affine(e.node().index, interest)) return a;
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
    a.depth_var = pv;
    if (a.q.dtype() != DType::f32 || a.k.dtype() != DType::f32) return fail();
    // The score: S at R1's output index, R1 itself the accumulator.
    std::vector<Index> sidx;
    for (int ax : out1) sidx.push_back(idx1[static_cast<size_t>(ax)]);
    ctx_.memo.clear();
    ctx_.acc_node = static_cast<int>(mt->score_reduce);
    ctx_.acc_dtype = DType::f32;
    ctx_.acc_key = key(mt->score_reduce, sidx, std::nullopt);
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
    auto av = operand(ve, vin, r2_query_axis, idx2, in2, 0);
    if (!av) return fail();
    a.v = view(ve, *av, jv, dvar);
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
      for (size_t t = 0; same && t < rvars.size(); ++t)
        same = body_.nodes[root_].shape[t].same_as(r2.shape[t]);
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
    k.name = kernel_name();
    kernels.push_back(std::move(k));
    ctx_ = std::move(saved);
    return true;
  }

  // An index-valued scalar expression (iota arithmetic) as an Index, or nullopt.
  static std::optional<Index> as_index(const Expr& e) {
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
  static std::optional<Index> causal_key_end(const Expr& score, int iv, int jv) {
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

  const detail::GraphImpl& body_;
  const ir::KernelSpec& spec_;
  const std::vector<int>& args_;
  std::string name_;
  kernel::Program& prog_;
  const Options& opt_;
  std::vector<std::vector<Index>> shapes_;
  kernel::SymbolMins sym_min_;  // least value of each dim variable
  std::map<uint32_t, int> materialized_;
  std::set<uint32_t> shared_;  // computed nodes read from a buffer (kMaxInlineCopies)
  uint32_t root_ = 0;
  Ctx ctx_;
  int counter_ = 0;  // kernel name suffix
};

}  // namespace

std::optional<Failure> lower_spec(const ir::KernelSpec& spec, const std::vector<int>& args, int result,
                                  const std::string& name, kernel::Program& prog, const Options& opt) {
  // Lowering only appends symbols and buffers (kernels are added on success), so undoing
  // a failed attempt is a truncation: copying the whole program per step made lowering a
  // 12-layer model quadratic in its kernel count.
  const size_t nbuffers = prog.buffers.size(), nsymbols = prog.symbols.size();
  Lowerer l(spec, args, name, prog, opt);
  if (auto failed = l.lower(result)) {
    prog.buffers.resize(nbuffers);
    prog.symbols.resize(nsymbols);
    return failed;
  }
  for (auto& k : l.kernels) prog.kernels.push_back(std::move(k));
  return std::nullopt;
}

}  // namespace luminal::kernel::lower
