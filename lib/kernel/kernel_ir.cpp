#include "kernel/kernel_ir.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

#include "luminal/error.hpp"

namespace luminal::kernel {

// ------------------------------------------------------------------ Index
namespace {
int64_t floordiv_i(int64_t a, int64_t b) {
  // b == 0 (a symbolic divisor bound to 0) and INT64_MIN / -1 would trap.
  if (b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min()))
    throw RuntimeError("[kernel] index division " + std::to_string(a) + " / " + std::to_string(b) +
                       " is undefined: the dims are out of range");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floormod_i(int64_t a, int64_t b) { return a - floordiv_i(a, b) * b; }

std::shared_ptr<IndexNode> leaf(IndexOp op) {
  auto n = std::make_shared<IndexNode>();
  n->op = op;
  return n;
}
}  // namespace

Index::Index(int64_t c) {
  auto n = leaf(IndexOp::Const);
  n->value = c;
  node_ = std::move(n);
}

Index Index::var(int id) {
  auto n = leaf(IndexOp::Var);
  n->value = id;
  return Index(std::shared_ptr<const IndexNode>(std::move(n)));
}

Index Index::sym(const std::string& name) {
  auto n = leaf(IndexOp::Sym);
  n->name = name;
  return Index(std::shared_ptr<const IndexNode>(std::move(n)));
}

IndexOp Index::op() const { return node_->op; }

std::optional<int64_t> Index::as_constant() const {
  if (node_->op == IndexOp::Const) return node_->value;
  return std::nullopt;
}

bool Index::non_negative() const {
  const auto& n = *node_;
  switch (n.op) {
    case IndexOp::Const:
      return n.value >= 0;
    case IndexOp::Var:
    case IndexOp::Sym:
      return true;
    case IndexOp::Lt:
    case IndexOp::Le:
    case IndexOp::Eq:
    case IndexOp::And:
      return true;
    case IndexOp::Sub:
      return false;
    case IndexOp::Select:
      return n.args[1].non_negative() && n.args[2].non_negative();
    case IndexOp::Min:
      return n.args[0].non_negative() && n.args[1].non_negative();
    case IndexOp::Max:
      return n.args[0].non_negative() || n.args[1].non_negative();
    default:
      return n.args[0].non_negative() && n.args[1].non_negative();
  }
}

int64_t Index::evaluate(const std::vector<int64_t>& vars, const std::map<std::string, int64_t>& syms) const {
  const auto& n = *node_;
  auto arg = [&](int i) { return n.args[static_cast<size_t>(i)].evaluate(vars, syms); };
  switch (n.op) {
    case IndexOp::Const:
      return n.value;
    case IndexOp::Var:
      if (n.value < 0 || static_cast<size_t>(n.value) >= vars.size())
        throw InternalError("[kernel] index variable v" + std::to_string(n.value) + " is not bound");
      return vars[static_cast<size_t>(n.value)];
    case IndexOp::Sym: {
      auto it = syms.find(n.name);
      if (it == syms.end()) throw InternalError("[kernel] symbol '" + n.name + "' is not bound");
      return it->second;
    }
    // Sizes and offsets of huge symbolic dims (P = 2^31, a P x P buffer in bytes) must
    // not wrap: an overflow is the caller's dims being too large, never a wild index.
    case IndexOp::Add:
    case IndexOp::Sub:
    case IndexOp::Mul: {
      const int64_t a = arg(0), b = arg(1);
      int64_t r = 0;
      const bool over = n.op == IndexOp::Add   ? __builtin_add_overflow(a, b, &r)
                        : n.op == IndexOp::Sub ? __builtin_sub_overflow(a, b, &r)
                                               : __builtin_mul_overflow(a, b, &r);
      if (over)
        throw RuntimeError("[kernel] index arithmetic overflows 64 bits (" + std::to_string(a) +
                           (n.op == IndexOp::Add ? " + " : n.op == IndexOp::Sub ? " - " : " * ") +
                           std::to_string(b) + "): the dims are too large");
      return r;
    }
    case IndexOp::FloorDiv:
      return floordiv_i(arg(0), arg(1));
    case IndexOp::Mod:
      return floormod_i(arg(0), arg(1));
    case IndexOp::Min:
      return std::min(arg(0), arg(1));
    case IndexOp::Max:
      return std::max(arg(0), arg(1));
    case IndexOp::Lt:
      return arg(0) < arg(1);
    case IndexOp::Le:
      return arg(0) <= arg(1);
    case IndexOp::Eq:
      return arg(0) == arg(1);
    case IndexOp::And:
      return arg(0) != 0 && arg(1) != 0;
    case IndexOp::Select:
      return arg(0) != 0 ? arg(1) : arg(2);
  }
  return 0;
}

std::string Index::to_string() const {
  const auto& n = *node_;
  // Built with append: GCC 12 warns falsely (-Wrestrict) on "(" + std::string&&.
  auto bin = [&](const char* op) {
    std::string s = "(";
    s.append(n.args[0].to_string())
        .append(" ")
        .append(op)
        .append(" ")
        .append(n.args[1].to_string())
        .append(")");
    return s;
  };
  auto fn = [&](const char* f) {
    std::string s = f;
    s += "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) s += ", ";
      s += n.args[i].to_string();
    }
    return s + ")";
  };
  switch (n.op) {
    case IndexOp::Const:
      return std::to_string(n.value);
    case IndexOp::Var:
      return "v" + std::to_string(n.value);
    case IndexOp::Sym:
      return n.name;
    case IndexOp::Add:
      return bin("+");
    case IndexOp::Sub:
      return bin("-");
    case IndexOp::Mul:
      return bin("*");
    case IndexOp::FloorDiv:
      return bin("//");
    case IndexOp::Mod:
      return bin("%");
    case IndexOp::Min:
      return fn("min");
    case IndexOp::Max:
      return fn("max");
    case IndexOp::Lt:
      return bin("<");
    case IndexOp::Le:
      return bin("<=");
    case IndexOp::Eq:
      return bin("==");
    case IndexOp::And:
      return bin("&&");
    case IndexOp::Select:
      return fn("select");
  }
  return "?";
}

Index make_index(IndexOp op, std::vector<Index> args) {
  // Constant folding: every argument constant -> evaluate now.
  bool all_const =
      std::all_of(args.begin(), args.end(), [](const Index& a) { return a.as_constant().has_value(); });
  auto n = leaf(op);
  n->args = std::move(args);
  Index out{std::shared_ptr<const IndexNode>(std::move(n))};
  if (all_const) {
    const auto& a = out.node().args;
    bool div_by_zero = (op == IndexOp::FloorDiv || op == IndexOp::Mod) && *a[1].as_constant() == 0;
    if (!div_by_zero) {
      try {
        return Index(out.evaluate({}, {}));
      } catch (const RuntimeError&) {
        // overflows 64 bits: left unfolded; evaluating it at call time reports it
      }
    }
  }
  return out;
}

namespace {
bool is_const(const Index& i, int64_t v) { return i.as_constant() == v; }
}  // namespace

Index operator+(const Index& a, const Index& b) {
  if (is_const(a, 0)) return b;
  if (is_const(b, 0)) return a;
  return make_index(IndexOp::Add, {a, b});
}
Index operator-(const Index& a, const Index& b) {
  if (is_const(b, 0)) return a;
  return make_index(IndexOp::Sub, {a, b});
}
Index operator*(const Index& a, const Index& b) {
  if (is_const(a, 0) || is_const(b, 0)) return Index(0);
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  return make_index(IndexOp::Mul, {a, b});
}
Index floordiv(const Index& a, const Index& b) {
  if (is_const(b, 1)) return a;
  return make_index(IndexOp::FloorDiv, {a, b});
}
Index mod(const Index& a, const Index& b) {
  if (is_const(b, 1)) return Index(0);
  return make_index(IndexOp::Mod, {a, b});
}
Index min(const Index& a, const Index& b) { return make_index(IndexOp::Min, {a, b}); }
Index max(const Index& a, const Index& b) { return make_index(IndexOp::Max, {a, b}); }
Index lt(const Index& a, const Index& b) { return make_index(IndexOp::Lt, {a, b}); }
Index le(const Index& a, const Index& b) { return make_index(IndexOp::Le, {a, b}); }
Index eq(const Index& a, const Index& b) { return make_index(IndexOp::Eq, {a, b}); }
Index land(const Index& a, const Index& b) {
  if (is_const(a, 1)) return b;
  if (is_const(b, 1)) return a;
  return make_index(IndexOp::And, {a, b});
}
Index select(const Index& c, const Index& a, const Index& b) {
  if (auto v = c.as_constant()) return *v ? a : b;
  return make_index(IndexOp::Select, {c, a, b});
}

Index row_major(const std::vector<Index>& vars, const std::vector<Index>& dims) {
  if (vars.size() != dims.size()) throw InternalError("[kernel] row_major: rank mismatch");
  Index out(0);
  for (size_t i = 0; i < vars.size(); ++i) out = out * dims[i] + vars[i];
  return out;
}

std::vector<Accumulator> accumulators(const Reduction& r) {
  std::vector<Accumulator> all{{r.op, r.value, r.acc_dtype}};
  all.insert(all.end(), r.more.begin(), r.more.end());
  return all;
}

bool uses_var(const Index& i, int64_t var) {
  const IndexNode& n = i.node();
  if (n.op == IndexOp::Var && (var < 0 || n.value == var)) return true;
  for (const auto& a : n.args)
    if (uses_var(a, var)) return true;
  return false;
}

std::optional<int64_t> var_stride(const Index& i, int64_t var) {
  if (!uses_var(i, var)) return int64_t{0};
  const IndexNode& n = i.node();
  switch (n.op) {
    case IndexOp::Var:
      return int64_t{1};
    case IndexOp::Add:
    case IndexOp::Sub: {
      auto a = var_stride(n.args[0], var), b = var_stride(n.args[1], var);
      if (!a || !b) return std::nullopt;
      return n.op == IndexOp::Add ? *a + *b : *a - *b;
    }
    case IndexOp::Mul:
      for (size_t c = 0; c < 2; ++c)
        if (auto k = n.args[c].as_constant())
          if (auto t = var_stride(n.args[1 - c], var)) return *k * *t;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// ------------------------------------------------------------------ Expr
Expr make_expr(ExprNode n) { return Expr(std::make_shared<const ExprNode>(std::move(n))); }

DType Expr::dtype() const { return node_->dtype; }
ExprOp Expr::op() const { return node_->op; }

std::string_view op_name(UnaryOp op) {
  if (auto p = prim_of(op)) return detail::prim_name(*p);
  return op == UnaryOp::Exp ? "exp" : "not";
}
std::string_view op_name(BinaryOp op) {
  static constexpr std::string_view names[] = {
#define LUMINAL_KERNEL_BINARY_NAME(e, name) name,
      LUMINAL_KERNEL_BINARY_OPS(LUMINAL_KERNEL_BINARY_NAME)
#undef LUMINAL_KERNEL_BINARY_NAME
  };
  static_assert(std::size(names) == kNumBinaryOps);
  return names[static_cast<int>(op)];
}

namespace {
std::string unary_name(UnaryOp op) { return std::string(op_name(op)); }
std::string binary_name(BinaryOp op) { return std::string(op_name(op)); }
}  // namespace

std::string Expr::to_string() const {
  if (!node_) return "<none>";
  const auto& n = *node_;
  std::ostringstream s;
  switch (n.op) {
    case ExprOp::Const:
      s << n.constant << ":" << dtype_name(n.dtype);
      break;
    case ExprOp::Load:
      s << "b" << n.buffer << "[" << n.index.to_string() << "]";
      if (n.valid) s << " if " << n.valid->to_string() << " else " << n.fill;
      break;
    case ExprOp::Acc:
      s << "acc";
      if (n.slot) s << n.slot;
      break;
    case ExprOp::IndexValue:
      s << "idx(" << n.index.to_string() << ")";
      break;
    case ExprOp::Unary:
      s << unary_name(n.unary) << "(" << n.args[0].to_string() << ")";
      break;
    case ExprOp::Binary:
      s << binary_name(n.binary) << "(" << n.args[0].to_string() << ", " << n.args[1].to_string() << ")";
      break;
    case ExprOp::Where:
      s << "where(" << n.args[0].to_string() << ", " << n.args[1].to_string() << ", " << n.args[2].to_string()
        << ")";
      break;
    case ExprOp::Cast:
      s << "cast<" << dtype_name(n.dtype) << ">(" << n.args[0].to_string() << ")";
      break;
  }
  return s.str();
}

Expr constant(double v, DType dt) {
  ExprNode n;
  n.op = ExprOp::Const;
  n.dtype = dt;
  n.constant = v;
  return make_expr(std::move(n));
}

Expr load(int buffer, DType dt, Index index) {
  ExprNode n;
  n.op = ExprOp::Load;
  n.dtype = dt;
  n.buffer = buffer;
  n.index = std::move(index);
  return make_expr(std::move(n));
}

Expr load_padded(int buffer, DType dt, Index index, Index valid, double fill) {
  ExprNode n;
  n.op = ExprOp::Load;
  n.dtype = dt;
  n.buffer = buffer;
  n.index = std::move(index);
  if (valid.as_constant() != 1) n.valid = std::move(valid);
  n.fill = fill;
  return make_expr(std::move(n));
}

Expr acc(DType dt, int slot) {
  ExprNode n;
  n.op = ExprOp::Acc;
  n.dtype = dt;
  n.slot = slot;
  return make_expr(std::move(n));
}

Expr index_value(Index i) {
  ExprNode n;
  n.op = ExprOp::IndexValue;
  n.dtype = DType::i32;
  n.index = std::move(i);
  return make_expr(std::move(n));
}

Expr unary(UnaryOp op, Expr a) {
  if (!a.valid())
    throw InternalError("[kernel] unary " + std::string(unary_name(op)) + " of an empty expression");
  const auto prim = prim_of(op);
  const bool ok = prim ? detail::accepts_dtype(*prim, a.dtype())
                       : a.dtype() == (op == UnaryOp::Exp ? DType::f32 : DType::boolean);
  if (!ok)
    throw InternalError("[kernel] unary " + std::string(unary_name(op)) + " does not accept " +
                        std::string(dtype_name(a.dtype())));
  ExprNode n;
  n.op = ExprOp::Unary;
  n.unary = op;
  n.dtype = a.dtype();
  n.args = {std::move(a)};
  return make_expr(std::move(n));
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  if (!a.valid() || !b.valid())
    throw InternalError("[kernel] binary " + std::string(binary_name(op)) + " of an empty expression");
  if (a.dtype() != b.dtype())
    throw InternalError("[kernel] binary " + std::string(binary_name(op)) + " of " +
                        std::string(dtype_name(a.dtype())) + " and " + std::string(dtype_name(b.dtype())));
  ExprNode n;
  n.op = ExprOp::Binary;
  n.binary = op;
  n.dtype = (op == BinaryOp::LessThan || op == BinaryOp::Equal) ? DType::boolean : a.dtype();
  n.args = {std::move(a), std::move(b)};
  return make_expr(std::move(n));
}

Expr where(Expr cond, Expr a, Expr b) {
  if (cond.dtype() != DType::boolean || a.dtype() != b.dtype())
    throw InternalError("[kernel] where(" + std::string(dtype_name(cond.dtype())) + ", " +
                        std::string(dtype_name(a.dtype())) + ", " + std::string(dtype_name(b.dtype())) +
                        "): condition must be bool and branches the same dtype");
  ExprNode n;
  n.op = ExprOp::Where;
  n.dtype = a.dtype();
  n.args = {std::move(cond), std::move(a), std::move(b)};
  return make_expr(std::move(n));
}

Expr cast(Expr a, DType to) {
  if (a.dtype() == to) return a;
  ExprNode n;
  n.op = ExprOp::Cast;
  n.dtype = to;
  n.args = {std::move(a)};
  return make_expr(std::move(n));
}

// ------------------------------------------------------------------ validation
namespace {

struct Checker {
  const Program& p;
  const Kernel* k = nullptr;
  std::set<int> scope;  // loop vars visible here

  [[noreturn]] void fail(const std::string& msg) const {
    throw InternalError("[kernel] " + (k ? "kernel '" + k->name + "': " : std::string()) + msg);
  }
  void index(const Index& i) const {
    const auto& n = i.node();
    if (n.op == IndexOp::Var && !scope.count(static_cast<int>(n.value)))
      fail("index uses v" + std::to_string(n.value) + " outside its loop");
    if (n.op == IndexOp::Sym && std::find(p.symbols.begin(), p.symbols.end(), n.name) == p.symbols.end())
      fail("index uses undeclared symbol '" + n.name + "'");
    for (const auto& a : n.args) index(a);
  }
  void buffer(int b) const {
    if (b < 0 || static_cast<size_t>(b) >= p.buffers.size())
      fail("buffer id " + std::to_string(b) + " out of range");
  }
  // `accs`: the accumulators the expression may read (acc slots 0 .. accs - 1).
  void expr(const Expr& e, int accs) const {
    if (!e.valid()) fail("empty expression");
    const auto& n = e.node();
    if (n.op == ExprOp::Load) {
      buffer(n.buffer);
      if (p.buffers[static_cast<size_t>(n.buffer)].dtype != n.dtype)
        fail("load of buffer '" + p.buffers[static_cast<size_t>(n.buffer)].name + "' as " +
             std::string(dtype_name(n.dtype)));
      index(n.index);
      if (n.valid) index(*n.valid);
    }
    if (n.op == ExprOp::IndexValue) index(n.index);
    if (n.op == ExprOp::Acc && accs == 0) fail("acc() used outside a reduction/GEMM epilogue");
    if (n.op == ExprOp::Acc && (n.slot < 0 || n.slot >= accs))
      fail("acc" + std::to_string(n.slot) + " read where the kernel has " + std::to_string(accs) +
           " accumulator(s)");
    for (const auto& a : n.args) expr(a, accs);
  }
  void loops(const std::vector<Loop>& ls) {
    for (const auto& l : ls) {
      index(l.extent);
      // Rectangular nests only: renderers collapse and reorder loops freely.
      if (uses_var(l.extent)) fail("loop extent " + l.extent.to_string() + " uses a loop variable");
      if (!scope.insert(l.var).second) fail("loop variable v" + std::to_string(l.var) + " declared twice");
    }
  }
};

}  // namespace

Index attention_splits(const Index& n) {
  return min(Index(kAttentionMaxSplits),
             max(Index(1), floordiv(n + Index(kAttentionSplitKeys - 1), Index(kAttentionSplitKeys))));
}

Index attention_chunk(const Index& n) {
  const Index s = attention_splits(n);
  return floordiv(n + s - Index(1), s);
}

Kernel make_counted_split_attention(const Kernel& k, int partial, int counter) {
  Kernel a = k;
  a.attention->split = Attention::Split{partial, counter};
  a.name = k.name + "_split";
  return a;
}

Index split_attention_rows(const Kernel& k) {
  Index rows = k.attention->m;
  for (const Loop& l : k.loops) rows = rows * l.extent;
  return rows;
}

Index split_attention_partial_elements(const Kernel& k) {
  return split_attention_rows(k) * Index(kAttentionMaxSplits) * (k.attention->dv + Index(2));
}

std::vector<KeySegment> value_segments(const Attention& a) {
  std::vector<KeySegment> segs{{a.v, Index(0)}};
  segs.insert(segs.end(), a.v_more.begin(), a.v_more.end());
  return segs;
}

std::vector<KeyExprSegment> key_segments(const Attention& a) {
  std::vector<KeyExprSegment> segs{{a.k, Index(0)}};
  segs.insert(segs.end(), a.k_more.begin(), a.k_more.end());
  return segs;
}

std::string gather_id_error(const std::string& op_name, int64_t id, int64_t position, int64_t rows) {
  return "[" + op_name + "] id " + std::to_string(id) + " at position " + std::to_string(position) +
         " is outside [0, " + std::to_string(rows) + ")";
}

void validate(const Program& p) {
  std::set<std::string> names;
  // Every kernel and every kernel's side and tail work, each checked as a kernel of its own.
  std::vector<const Kernel*> all;
  for (const auto& k : p.kernels) {
    auto fail = [&](const std::string& why) {
      throw InternalError("kernel IR: kernel " + k.name + ": " + why);
    };
    all.push_back(&k);
    for (const auto* list : {&k.side, &k.tail})
      for (const Kernel& w : *list) {
        if (w.kind != KernelKind::Elementwise || !w.side.empty() || !w.tail.empty())
          fail("its side and tail work must be elementwise kernels without side or tail work: " + w.name);
        all.push_back(&w);
      }
    if (!k.side.empty() && k.kind == KernelKind::Gemm) fail("a GEMM takes no side work");
    if (k.tail.empty() != (k.tail_counter < 0)) fail("tail work and a tail counter go together");
    if (k.tail_counter >= 0) {
      if (static_cast<size_t>(k.tail_counter) >= p.buffers.size()) fail("tail counter out of range");
      const Buffer& b = p.buffers[static_cast<size_t>(k.tail_counter)];
      if (b.role != BufferRole::State || b.dtype != DType::i32 || b.elements.as_constant() != 1)
        fail("the tail counter must be a State buffer of one i32");
      if (k.gemm && k.gemm->impl == GemmImpl::Library) fail("a library GEMM runs no tail work");
    }
  }
  for (const Kernel* kp : all) {
    const Kernel& k = *kp;
    Checker c{p, &k, {}};
    if (k.name.empty() || !names.insert(k.name).second) c.fail("kernel names must be unique and non-empty");
    c.loops(k.loops);
    switch (k.kind) {
      case KernelKind::Elementwise:
        c.buffer(k.store.buffer);
        c.index(k.store.index);
        c.expr(k.store.value, 0);
        break;
      case KernelKind::Reduction: {
        if (!k.reduce) c.fail("reduction kernel without a Reduction");
        Checker inner = c;
        inner.loops(k.reduce->loops);
        inner.expr(k.reduce->value, 0);
        if (k.reduce->more.size() >= kMaxAccumulators) c.fail("more than kMaxAccumulators accumulators");
        for (const Accumulator& m : k.reduce->more) inner.expr(m.value, 0);
        c.buffer(k.store.buffer);
        c.index(k.store.index);
        c.expr(k.store.value, 1 + static_cast<int>(k.reduce->more.size()));
        break;
      }
      case KernelKind::Gemm: {
        if (!k.gemm) c.fail("gemm kernel without a Gemm");
        const Gemm& g = *k.gemm;
        for (const auto* v : {&g.a, &g.b, &g.c})
          if (v != &g.a || !g.a_prologue) c.buffer(v->buffer);
        if (g.a_prologue) {
          const GemmRowPrologue& pr = *g.a_prologue;
          if (g.a.buffer != -1) c.fail("a GEMM with a row prologue reads no A buffer");
          const bool stat = !pr.stat.loops.empty();
          if (!pr.stat.more.empty() || pr.stat.loops.size() > 1 || stat != pr.stat.value.valid())
            c.fail("a GEMM row prologue's statistic has one loop and one accumulator, or none of either");
          if (pr.stat.acc_dtype != DType::f32 || (stat && pr.stat.value.dtype() != DType::f32) ||
              pr.a.dtype() != DType::f32)
            c.fail("a GEMM row prologue is f32");
          if (stat) {
            Checker st = c;
            st.scope.insert(g.row_var);
            st.loops(pr.stat.loops);
            st.expr(pr.stat.value, 0);
          }
          Checker pa = c;
          pa.scope.insert(g.row_var);
          if (!pa.scope.insert(pr.depth_var).second) c.fail("a GEMM row prologue's depth variable is in use");
          pa.expr(pr.a, stat ? 1 : 0);
        }
        // Both operands f32, f16 or bf16 (GPU tensor cores), or an f32 A with an f16/bf16
        // B (a half-precision weight the CPU GEMM converts as it packs).
        const DType da = g.a_prologue ? DType::f32 : p.buffers[static_cast<size_t>(g.a.buffer)].dtype;
        const DType db = p.buffers[static_cast<size_t>(g.b.buffer)].dtype;
        const bool half_b = db == DType::f16 || db == DType::bf16;
        if (!((da == db && (da == DType::f32 || half_b)) || (da == DType::f32 && half_b)))
          c.fail("GEMM operands must both be f32, f16 or bf16 (or an f32 A with an f16/bf16 B)");
        // C f32, or f16/bf16 rounded by the epilogue (GPU renderers, lower::Options::half_results).
        const DType dc = p.buffers[static_cast<size_t>(g.c.buffer)].dtype;
        if (dc != DType::f32 && dc != DType::f16 && dc != DType::bf16) c.fail("GEMM output must be f32, f16 or bf16");
        for (const auto* v : {&g.a, &g.b, &g.c}) {
          c.index(v->offset);
          c.index(v->row_stride);
          c.index(v->col_stride);
        }
        if (g.c.col_stride.as_constant() != 1) c.fail("GEMM output must have column stride 1");
        if (!g.b_segments.empty()) {
          if (g.b_segments.size() < 2 || g.b_segments.size() > kMaxGemmSegments)
            c.fail("a segmented GEMM B needs 2 to " + std::to_string(kMaxGemmSegments) + " segments");
          if (g.b_segments[0].n0.as_constant() != 0) c.fail("GEMM B segment 0 must start at column 0");
          if (g.b_segments[0].b.buffer != g.b.buffer) c.fail("GEMM B segment 0 must be B");
          for (const GemmSegment& sg : g.b_segments) {
            c.buffer(sg.b.buffer);
            if (p.buffers[static_cast<size_t>(sg.b.buffer)].dtype != p.buffers[static_cast<size_t>(g.b.buffer)].dtype)
              c.fail("GEMM B segments must all have B's dtype");
            c.index(sg.n0);
            c.index(sg.b.offset);
            c.index(sg.b.row_stride);
            c.index(sg.b.col_stride);
          }
        }
        c.index(g.m);
        c.index(g.n);
        c.index(g.k);
        if (g.epilogue.valid()) {
          Checker epi = c;
          epi.scope.insert(g.row_var);
          epi.scope.insert(g.col_var);
          epi.expr(g.epilogue, 1);
        }
        const GemmTile& t = g.tile;
        if (t.mr <= 0 || t.nr <= 0 || t.mc % t.mr != 0 || t.nc % t.nr != 0 || t.kc <= 0)
          c.fail("GEMM tile: mc must be a multiple of mr and nc of nr");
        break;
      }
      case KernelKind::Attention: {
        if (!k.attention) c.fail("attention kernel without an Attention");
        const Attention& a = *k.attention;
        for (const auto* v : {&a.v, &a.out}) {
          c.buffer(v->buffer);
          const DType dt = p.buffers[static_cast<size_t>(v->buffer)].dtype;
          if (dt != DType::f32 && dt != DType::f16 && dt != DType::bf16)
            c.fail("attention values and output must be f32, f16 or bf16");
          c.index(v->offset);
          c.index(v->row_stride);
          c.index(v->col_stride);
        }
        if (a.out.col_stride.as_constant() != 1) c.fail("attention output must have column stride 1");
        if (a.split) {
          c.buffer(a.split->partial);
          if (p.buffers[static_cast<size_t>(a.split->partial)].dtype != DType::f32)
            c.fail("a split attention's partial states are f32");
          c.buffer(a.split->counter);
          const Buffer& cb = p.buffers[static_cast<size_t>(a.split->counter)];
          if (cb.dtype != DType::i32 || cb.role != BufferRole::State)
            c.fail("a split attention counts its ranges in an i32 state buffer");
        }
        if (a.v_more.size() + 1 > kMaxKeySegments)
          c.fail("a segmented attention V has at most " + std::to_string(kMaxKeySegments) + " segments");
        for (size_t i = 1; i < a.v_more.size(); ++i) {
          auto lo = a.v_more[i - 1].j0.as_constant(), hi = a.v_more[i].j0.as_constant();
          if (lo && hi && *hi <= *lo) c.fail("attention V segments must start at increasing keys");
        }
        for (const KeySegment& sg : a.v_more) {
          c.buffer(sg.v.buffer);
          if (p.buffers[static_cast<size_t>(sg.v.buffer)].dtype != p.buffers[static_cast<size_t>(a.v.buffer)].dtype)
            c.fail("attention V segments must all have V's dtype");
          // The renderers walk a row's columns with one stride for every segment.
          if (sg.v.col_stride.to_string() != a.v.col_stride.to_string())
            c.fail("attention V segments must all have V's column stride");
          c.index(sg.j0);
          if (uses_var(sg.j0)) c.fail("an attention V segment's first key must not use loop variables");
          if (auto j0 = sg.j0.as_constant(); j0 && *j0 < 1) c.fail("attention V segments after the first start past key 0");
          c.index(sg.v.offset);
          c.index(sg.v.row_stride);
          c.index(sg.v.col_stride);
        }
        for (const Index* x : {&a.m, &a.n, &a.dk, &a.dv}) {
          c.index(*x);
          if (uses_var(*x)) c.fail("attention sizes must not use loop variables");
        }
        if (!(a.exp2_scale > 0)) c.fail("attention exp2_scale must be positive");
        std::set<int> own{a.row_var, a.key_var, a.col_var, a.depth_var};
        if (own.size() != 4) c.fail("attention row, key, column and depth variables must differ");
        for (int v : own)
          if (c.scope.count(v)) c.fail("attention variable v" + std::to_string(v) + " shadows a loop");
        {
          Checker qc = c;
          qc.scope.insert(a.row_var);
          qc.scope.insert(a.depth_var);
          qc.expr(a.q, 0);
          Checker kc = c;
          kc.scope.insert(a.key_var);
          kc.scope.insert(a.depth_var);
          kc.expr(a.k, 0);
          if (a.q.dtype() != DType::f32 || a.k.dtype() != DType::f32) c.fail("attention q and k must be f32");
          if (a.k_more.size() + 1 > kMaxKeySegments)
            c.fail("a segmented attention K has at most " + std::to_string(kMaxKeySegments) + " segments");
          for (size_t i = 0; i < a.k_more.size(); ++i) {
            const KeyExprSegment& sg = a.k_more[i];
            kc.expr(sg.k, 0);
            if (sg.k.dtype() != DType::f32) c.fail("attention K segments must be f32");
            c.index(sg.j0);
            if (uses_var(sg.j0)) c.fail("an attention K segment's first key must not use loop variables");
            auto j0 = sg.j0.as_constant();
            if (j0 && *j0 < 1) c.fail("attention K segments after the first start past key 0");
            if (i > 0)
              if (auto lo = a.k_more[i - 1].j0.as_constant(); lo && j0 && *j0 <= *lo)
                c.fail("attention K segments must start at increasing keys");
          }
        }
        if (a.score.valid()) {
          Checker sc = c;
          sc.scope.insert(a.row_var);
          sc.scope.insert(a.key_var);
          sc.expr(a.score, 1);
          if (a.score.dtype() != DType::f32) c.fail("attention score must be f32");
        }
        if (a.key_end) {
          Checker ke = c;
          ke.scope.insert(a.row_var);
          ke.index(*a.key_end);
        }
        if (a.epilogue.valid()) {
          Checker epi = c;
          epi.scope.insert(a.row_var);
          epi.scope.insert(a.col_var);
          epi.expr(a.epilogue, 1);
        }
        // The output is stored as the epilogue computes it (acc itself: f32).
        if ((a.epilogue.valid() ? a.epilogue.dtype() : DType::f32) != p.buffers[static_cast<size_t>(a.out.buffer)].dtype)
          c.fail("attention epilogue and output buffer must have one dtype");
        break;
      }
      case KernelKind::Gather: {
        if (!k.gather) c.fail("gather kernel without a Gather");
        if (!k.loops.empty()) c.fail("a gather kernel has no loops");
        const Gather& g = *k.gather;
        for (int b : {g.table, g.ids, g.out}) c.buffer(b);
        if (p.buffers[static_cast<size_t>(g.ids)].dtype != DType::i32) c.fail("gather ids must be i32");
        if (p.buffers[static_cast<size_t>(g.table)].dtype != p.buffers[static_cast<size_t>(g.out)].dtype)
          c.fail("gather copies rows: table and out must have one dtype");
        c.index(g.count);
        c.index(g.rows);
        c.index(g.row);
        break;
      }
    }
    if (k.kind != KernelKind::Gemm && k.kind != KernelKind::Gather && k.kind != KernelKind::Attention) {
      const auto& b = p.buffers[static_cast<size_t>(k.store.buffer)];
      if (b.dtype != k.store.value.dtype())
        c.fail("stores " + std::string(dtype_name(k.store.value.dtype())) + " into " +
               std::string(dtype_name(b.dtype)) + " buffer '" + b.name + "'");
    }
  }
  // Param packs: params of the pack's dtype and fixed sizes that fill it exactly, each in
  // one pack, never written by a kernel (the pack is their copy).
  std::set<int> packed;
  auto bad = [&](const std::string& why) { throw InternalError("kernel IR: param pack: " + why); };
  auto in_range = [&](int b) { return b >= 0 && static_cast<size_t>(b) < p.buffers.size(); };
  for (const ParamPack& pk : p.packs) {
    if (!in_range(pk.buffer) || pk.members.empty()) bad("a buffer out of range, or no members");
    const Buffer& pb = p.buffers[static_cast<size_t>(pk.buffer)];
    int64_t sum = 0;
    for (int m : pk.members) {
      if (!in_range(m) || m == pk.buffer) bad("member " + std::to_string(m) + " of '" + pb.name + "'");
      const Buffer& mb = p.buffers[static_cast<size_t>(m)];
      const auto n = mb.elements.as_constant();
      if (mb.role != BufferRole::Param || mb.dtype != pb.dtype || !n || p.block(m))
        bad("member '" + mb.name + "' of '" + pb.name +
            "' is not a whole param of its dtype with a fixed size");
      if (!packed.insert(m).second) bad("param '" + mb.name + "' is in two packs");
      sum += *n;
    }
    if (pb.elements.as_constant() != sum) bad("'" + pb.name + "' is not its members' size");
  }
  for (const Kernel* k : all) {
    const int written = k->gemm        ? k->gemm->c.buffer
                        : k->gather    ? k->gather->out
                        : k->attention ? k->attention->out.buffer
                                       : k->store.buffer;
    if (p.pack(written) || packed.count(written)) bad("kernel " + k->name + " writes a packed param");
  }
}

std::string to_string(const Program& p) {
  std::ostringstream s;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const auto& b = p.buffers[i];
    static const char* roles[] = {"input", "param", "output", "intermediate", "state"};
    s << "b" << i << " " << b.name << ": " << dtype_name(b.dtype) << "[" << b.elements.to_string() << "] "
      << roles[static_cast<int>(b.role)] << "\n";
  }
  for (const ParamPack& pk : p.packs) {
    s << "pack b" << pk.buffer << " =";
    for (int m : pk.members) s << " b" << m;
    s << "\n";
  }
  auto one = [&](const Kernel& k, const std::string& head) {
    static const char* kinds[] = {"elementwise", "reduction", "gemm", "gather", "attention"};
    s << head << "kernel " << k.name << " (" << kinds[static_cast<int>(k.kind)] << ")\n";
    std::string ind = "  ";
    auto loop = [&](const Loop& l) {
      s << ind << "for v" << l.var << " in 0.." << l.extent.to_string() << (l.parallel ? " parallel" : "")
        << (l.vectorize ? " vectorize" : "") << "\n";
      ind += "  ";
    };
    for (const auto& l : k.loops) loop(l);
    if (k.kind == KernelKind::Gather) {
      const Gather& g = *k.gather;
      s << ind << "b" << g.out << "[" << g.count.to_string() << " x " << g.row.to_string() << "] = rows of b"
        << g.table << "[" << g.rows.to_string() << " x " << g.row.to_string() << "] at ids b" << g.ids
        << "\n";
      return;
    }
    if (k.kind == KernelKind::Attention) {
      const Attention& a = *k.attention;
      s << ind << "b" << a.out.buffer << "[" << a.m.to_string() << " x " << a.dv.to_string()
        << "] = attention(v b" << a.v.buffer;
      for (const KeySegment& sg : a.v_more) s << " | b" << sg.v.buffer << " from key " << sg.j0.to_string();
      s << ", keys=" << a.n.to_string() << ", depth=" << a.dk.to_string();
      if (a.split) s << ", key ranges: states b" << a.split->partial << ", counts b" << a.split->counter;
      s << ") rows v" << a.row_var << " keys v" << a.key_var << " cols v" << a.col_var << " depth v"
        << a.depth_var << "\n"
        << ind << "  q " << a.q.to_string() << "\n"
        << ind << "  k " << a.k.to_string() << "\n";
      for (const KeyExprSegment& sg : a.k_more)
        s << ind << "  k from key " << sg.j0.to_string() << " " << sg.k.to_string() << "\n";
      s
        << ind << "  score " << (a.score.valid() ? a.score.to_string() : "acc") << ", exp2 scale "
        << a.exp2_scale << (a.key_end ? ", keys below " + a.key_end->to_string() : std::string())
        << "\n" << ind << "  epilogue " << (a.epilogue.valid() ? a.epilogue.to_string() : "acc") << "\n";
      return;
    }
    if (k.kind == KernelKind::Gemm) {
      const Gemm& g = *k.gemm;
      s << ind << "b" << g.c.buffer << "[" << g.m.to_string() << " x " << g.n.to_string() << "] = gemm(b"
        << g.a.buffer << ", b" << g.b.buffer;
      for (size_t i = 1; i < g.b_segments.size(); ++i)
        s << " | b" << g.b_segments[i].b.buffer << " from column " << g.b_segments[i].n0.to_string();
      s << ", k=" << g.k.to_string() << ") epilogue "
        << (g.epilogue.valid() ? g.epilogue.to_string() : "acc") << "\n";
      if (g.a_prologue) {
        const GemmRowPrologue& pr = *g.a_prologue;
        s << ind << "  A(v" << g.row_var << ", v" << pr.depth_var << ") = " << pr.a.to_string();
        if (!pr.stat.loops.empty())
          s << ", acc = " << (pr.stat.op == ReduceOp::Sum ? "sum" : "max") << " over v"
            << pr.stat.loops[0].var << " < " << pr.stat.loops[0].extent.to_string() << " of "
            << pr.stat.value.to_string();
        s << "\n";
      }
      return;
    }
    if (k.reduce) {
      s << ind << "acc = " << (k.reduce->op == ReduceOp::Sum ? "0" : "-inf") << "\n";
      std::string save = ind;
      for (const auto& l : k.reduce->loops) loop(l);
      s << ind << "acc " << (k.reduce->op == ReduceOp::Sum ? "+=" : "max=") << " "
        << k.reduce->value.to_string() << "\n";
      for (size_t i = 0; i < k.reduce->more.size(); ++i)
        s << ind << "acc" << i + 1 << " " << (k.reduce->more[i].op == ReduceOp::Sum ? "+=" : "max=") << " "
          << k.reduce->more[i].value.to_string() << "\n";
      ind = save;
    }
    s << ind << "b" << k.store.buffer << "[" << k.store.index.to_string()
      << "] = " << k.store.value.to_string() << "\n";
  };
  for (const auto& k : p.kernels) {
    one(k, "");
    for (const Kernel& sd : k.side) one(sd, "  side work of " + k.name + ": ");
    for (const Kernel& tl : k.tail)
      one(tl, "  tail work of " + k.name + " (counted in b" + std::to_string(k.tail_counter) + "): ");
  }
  return s.str();
}

}  // namespace luminal::kernel
