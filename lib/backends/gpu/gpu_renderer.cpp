#include "backends/gpu/gpu_renderer.hpp"

#include "backends/gpu/device_collectives.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "backends/gpu/emu_header.hpp"
#include "backends/gpu/gpu_prelude.hpp"
#include "cost/gpu_launch.hpp"
#include "kernel/buffer_access.hpp"
#include "kernel/kernel_eval.hpp"
#include "kernel/op_spelling.hpp"
#include "luminal/error.hpp"

namespace luminal::gpu {

using namespace luminal::kernel;

namespace {

constexpr int kThreads = 256;  // threads per block of every schedule (a multiple of 64)
// A tail kernel's trips a thread at most in a counted loop (tail_loop); more: a loop.
constexpr int64_t kMaxTailTrips = 16;
// Padded loads of at most this many addresses an element are rendered unconditionally
// (unconditional_pad): a RoPE's partner element and position, not an im2col's taps.
constexpr std::size_t kMaxUnconditionalPads = 4;
constexpr int64_t kMaxCachedDepth = 1024;  // attention: q rows up to this depth kept in shared memory
constexpr int64_t kMaxQRegisters = 32;     // attention: a lane's q values of its rows, at most
constexpr std::size_t kLightKeyNodes = 8;  // attention: a K segment this small is unrolled (a load, its cast)

// ---- how the GPU renderer spells each kernel-IR scalar op ("{0}", "{1}": operands).
// i32 arithmetic goes through the wrapping helpers (gpu_prelude.hpp): no signed-overflow
// UB, the two's complement results PyTorch gives. `fast`: the f32 spelling of a program
// compiled with fast_math (Program::approximate_math; "" = the exact one), the prelude's
// special-function-unit helpers (gpu_prelude.cpp, "fast math").
struct GpuUnary {
  std::string_view f32, i32, other, fast;
};
constexpr std::array<OpRow<UnaryOp, GpuUnary>, kNumUnaryOps> kGpuUnary = {{
    {UnaryOp::Exp2, {"lm_exp2({0})", "lm_exp2({0})", "lm_exp2({0})", "lm_fast_exp2({0})"}},
    {UnaryOp::Log2, {"lm_log2({0})", "lm_log2({0})", "lm_log2({0})", "lm_fast_log2({0})"}},
    {UnaryOp::Sin, {"lm_sin({0})", "lm_sin({0})", "lm_sin({0})", "lm_fast_sin({0})"}},
    {UnaryOp::Tanh, {"lm_tanh({0})", "lm_tanh({0})", "lm_tanh({0})", "lm_fast_tanh({0})"}},
    {UnaryOp::Sqrt, {"lm_sqrt({0})", "lm_sqrt({0})", "lm_sqrt({0})", "lm_fast_sqrt({0})"}},
    {UnaryOp::Recip, {"1.0f / {0}", "1.0f / {0}", "1.0f / {0}", "lm_fast_rcp({0})"}},
    {UnaryOp::Neg, {"-{0}", "lm_ineg({0})", "-{0}", ""}},
    {UnaryOp::Not, {"(uint8_t)!{0}", "(uint8_t)!{0}", "(uint8_t)!{0}", ""}},
    {UnaryOp::Exp, {"lm_exp({0})", "lm_exp({0})", "lm_exp({0})", "lm_fast_exp({0})"}},
}};
static_assert(covers_every_op(kGpuUnary), "the GPU renderer spells every kernel-IR unary op, in enum order");

struct GpuBinary {
  std::string_view f32, i32, other;  // other: bool (f16/bf16 bits are only read by casts)
};
constexpr std::array<OpRow<BinaryOp, GpuBinary>, kNumBinaryOps> kGpuBinary = {{
    {BinaryOp::Add, {"{0} + {1}", "lm_iadd({0}, {1})", "{0} + {1}"}},
    {BinaryOp::Sub, {"{0} - {1}", "lm_isub({0}, {1})", "{0} - {1}"}},
    {BinaryOp::Mul, {"{0} * {1}", "lm_imul({0}, {1})", "{0} * {1}"}},
    {BinaryOp::Max, {"lm_max({0}, {1})", "({0} > {1} ? {0} : {1})", "({0} > {1} ? {0} : {1})"}},
    {BinaryOp::Min, {"lm_min({0}, {1})", "({0} < {1} ? {0} : {1})", "({0} < {1} ? {0} : {1})"}},
    {BinaryOp::Mod, {"lm_fmod_floor({0}, {1})", "lm_imod({0}, {1})", "lm_imod({0}, {1})"}},
    {BinaryOp::LessThan, {"(uint8_t)({0} < {1})", "(uint8_t)({0} < {1})", "(uint8_t)({0} < {1})"}},
    {BinaryOp::Equal, {"(uint8_t)({0} == {1})", "(uint8_t)({0} == {1})", "(uint8_t)({0} == {1})"}},
    {BinaryOp::And, {"(uint8_t)({0} && {1})", "(uint8_t)({0} && {1})", "(uint8_t)({0} && {1})"}},
    {BinaryOp::Or, {"(uint8_t)({0} || {1})", "(uint8_t)({0} || {1})", "(uint8_t)({0} || {1})"}},
}};
static_assert(covers_every_op(kGpuBinary), "the GPU renderer spells every kernel-IR binary op, in enum order");

std::string c_type(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
    case DType::bf16:
      return "uint16_t";
    case DType::i32:
      return "int32_t";
    case DType::boolean:
      return "uint8_t";
  }
  return "void";
}

std::string float_literal(double v) {
  const float f = static_cast<float>(v);
  if (std::isnan(f)) return "lm_u2f(0x7fc00000u)";
  if (std::isinf(f)) return f > 0 ? "lm_u2f(0x7f800000u)" : "lm_u2f(0xff800000u)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  s += "f";
  return std::signbit(f) ? "(" + s + ")" : s;
}

std::string literal(double v, DType t) {
  switch (t) {
    case DType::f32:
      return float_literal(v);
    case DType::f16:
      return "((uint16_t)" + std::to_string(f32_to_f16_bits(static_cast<float>(v))) + "u)";
    case DType::bf16:
      return "((uint16_t)" + std::to_string(f32_to_bf16_bits(static_cast<float>(v))) + "u)";
    case DType::i32: {
      const auto i = static_cast<int64_t>(v);
      if (i == INT32_MIN) return "(-2147483647 - 1)";
      return i < 0 ? "(" + std::to_string(i) + ")" : std::to_string(i);
    }
    case DType::boolean:
      return v != 0 ? "((uint8_t)1)" : "((uint8_t)0)";
  }
  return "0";
}

std::string convert(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  auto as_f32 = [&]() -> std::string {
    switch (from) {
      case DType::f16:
        return "lm_f16_to_f32(" + x + ")";
      case DType::bf16:
        return "lm_bf16_to_f32(" + x + ")";
      case DType::f32:
        return x;
      default:
        return "((float)" + x + ")";
    }
  };
  switch (to) {
    case DType::f32:
      return as_f32();
    case DType::f16:
      return "lm_f32_to_f16(" + as_f32() + ")";
    case DType::bf16:
      return "lm_f32_to_bf16(" + as_f32() + ")";
    case DType::i32:
      return is_float(from) ? "lm_f2i(" + as_f32() + ")" : "((int32_t)" + x + ")";
    case DType::boolean:
      return is_float(from) ? "((uint8_t)(" + as_f32() + " != 0.0f))" : "((uint8_t)(" + x + " != 0))";
  }
  return x;
}

std::string index_expr(const Index& i, const std::map<std::string, int>& sym_ids) {
  const auto& n = i.node();
  auto a = [&](int j) { return index_expr(n.args[static_cast<size_t>(j)], sym_ids); };
  auto bin = [&](const char* op) {
    std::string s = "(";
    s.append(a(0)).append(" ").append(op).append(" ").append(a(1)).append(")");
    return s;
  };
  auto simple_div = [&] {
    auto d = n.args[1].as_constant();
    return n.args[0].non_negative() && d && *d > 0;
  };
  switch (n.op) {
    case IndexOp::Const:
      return n.value < 0 ? "((int64_t)(" + std::to_string(n.value) + "))" : "((int64_t)" + std::to_string(n.value) + ")";
    case IndexOp::Var:
      return "v" + std::to_string(n.value);
    case IndexOp::Sym: {
      auto it = sym_ids.find(n.name);
      if (it == sym_ids.end()) throw InternalError("[gpu] symbol '" + n.name + "' is not declared by the program");
      return "s" + std::to_string(it->second);
    }
    case IndexOp::Add:
      return bin("+");
    case IndexOp::Sub:
      return bin("-");
    case IndexOp::Mul:
      return bin("*");
    case IndexOp::FloorDiv:
      return simple_div() ? bin("/") : "lm_fdiv(" + a(0) + ", " + a(1) + ")";
    case IndexOp::Mod:
      return simple_div() ? bin("%") : "lm_fmod_i(" + a(0) + ", " + a(1) + ")";
    case IndexOp::Min:
      return "lm_imin(" + a(0) + ", " + a(1) + ")";
    case IndexOp::Max:
      return "lm_imax(" + a(0) + ", " + a(1) + ")";
    case IndexOp::Lt:
      return "(int64_t)" + bin("<");
    case IndexOp::Le:
      return "(int64_t)" + bin("<=");
    case IndexOp::Eq:
      return "(int64_t)" + bin("==");
    case IndexOp::And:
      return "(int64_t)" + bin("&&");
    case IndexOp::Select:
      return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
  }
  return "0";
}

Index ceil_div(const Index& a, int64_t b) { return floordiv(a + Index(b - 1), Index(b)); }

Index product(const std::vector<Loop>& loops) {
  Index n(1);
  for (const auto& l : loops) n = n * l.extent;
  return n;
}

// One kernel's source.
class Writer {
 public:
  Writer(const Program& p, const Kernel& k, const GpuArch& arch, std::vector<int64_t> launch)
      : p_(p), k_(k), arch_(arch), launch_(std::move(launch)) {
    for (size_t i = 0; i < p.symbols.size(); ++i) sym_ids_[p.symbols[i]] = static_cast<int>(i);
  }

  std::string render(LaunchShape& shape) {
    shape.name = k_.name;
    collect_buffers();
    shape.buffers.assign(touched_.begin(), touched_.end());
    std::ostringstream body;
    switch (k_.kind) {
      case KernelKind::Elementwise:
        elementwise(body, shape);
        break;
      case KernelKind::Reduction:
        reduction(body, shape);
        break;
      case KernelKind::Gemm:
        gemm(body, shape);
        break;
      case KernelKind::Gather:
        gather(body, shape);
        break;
      case KernelKind::Attention:
        attention(body, shape);
        break;
    }
    // A kernel with tail work launches at least one block of its own even when it has
    // nothing to do (an empty axis): the tail still runs, by that block.
    if (!k_.tail.empty())
      for (auto& g : shape.grid) g = kernel::max(g, Index(1));
    const std::string side = side_work(shape), tail = tail_work(shape);
    std::ostringstream s;
    s << "/* " << k_.name << ": " << shape.schedule << " */\n";
    s << "extern \"C\" __global__ void __launch_bounds__(" << shape.block[0] * shape.block[1] * shape.block[2]
      << ", " << shape.min_blocks << ") " << k_.name << "(";
    bool first = true;
    for (int b : touched_) {
      const std::string t = c_type(p_.buffers[static_cast<size_t>(b)].dtype);
      const bool w = writes_.count(b) > 0, both = w && reads_.count(b) > 0;
      s << (first ? "" : ", ") << (w ? "" : "const ") << t << "* " << (both ? "" : "__restrict__ ") << "b" << b;
      first = false;
    }
    for (size_t i = 0; i < p_.symbols.size(); ++i) {
      s << (first ? "" : ", ") << "int64_t s" << i;
      first = false;
    }
    s << ") {\n";
    for (size_t i = 0; i < p_.symbols.size(); ++i) s << "  (void)s" << i << ";\n";
    s << side << body.str() << tail << "}\n\n";
    return s.str();
  }

 private:
  std::string ix(const Index& i) const { return index_expr(i, sym_ids_); }

  void collect_buffers() {
    const kernel::BufferAccess a = kernel::buffer_access(k_);
    reads_.insert(a.reads.begin(), a.reads.end());
    writes_.insert(a.writes.begin(), a.writes.end());
    touched_ = reads_;
    touched_.insert(writes_.begin(), writes_.end());
  }

  // SSA temporaries for `e`, memoized per node; returns the value's C expression.
  std::string value(const Expr& e, std::map<const ExprNode*, std::string>& memo, std::ostringstream& out,
                    const std::string& ind) {
    const ExprNode& n = e.node();
    if (n.op == ExprOp::Const) return literal(n.constant, n.dtype);
    if (n.op == ExprOp::Acc) return n.slot ? "acc" + std::to_string(n.slot) : std::string("acc");
    if (auto it = memo.find(&n); it != memo.end()) return it->second;
    std::vector<std::string> a;
    for (const auto& arg : n.args) a.push_back(value(arg, memo, out, ind));
    std::string name = "t" + std::to_string(tmp_++);
    if (n.op == ExprOp::Load && n.valid && unconditional_pad(n)) {
      // A padded load from a buffer that always has elements: the load unconditional, at
      // element 0 where invalid, then a select -- straight-line code, where `valid ?
      // b[i] : fill` is a branch around the load (its loads then issue one after another's
      // arithmetic, PTX sm_90; a tail's trips did).
      const std::string v = ix(*n.valid);
      out << ind << "const " << c_type(n.dtype) << " " << name << "_ld = b" << n.buffer << "[(" << v << ") ? "
          << ix(n.index) << " : 0];\n";
      out << ind << "const " << c_type(n.dtype) << " " << name << " = (" << v << ") ? " << name
          << "_ld : " << literal(n.fill, n.dtype) << ";\n";
      memo[&n] = name;
      return name;
    }
    out << ind << "const " << c_type(n.dtype) << " " << name << " = " << rhs_of(n, a) << ";\n";
    memo[&n] = name;
    return name;
  }

  // Whether a tail kernel's `trips` are unrolled (tail_loop): at most 4 of them, whose
  // element index splits into the loop variables by shifts and masks (power-of-two
  // extents) and which reads few padded addresses. Unrolled trips run in the host's
  // registers side by side: 7 trips of 64-bit divisions by 18, 16 and 3, and 2 of an
  // im2col's 9 padded taps, each spilled a 64-register reduction host (the golden conv2d
  // cases with a short search); rolled, a trip needs what the kernel alone would.
  bool light_trips(int64_t trips) const {
    if (trips > 4 || padded_addresses() > kMaxUnconditionalPads) return false;
    for (const Loop& l : k_.loops) {
      const std::optional<int64_t> e = l.extent.as_constant();
      if (!e || *e <= 0 || (*e & (*e - 1)) != 0) return false;
    }
    return true;
  }

  // A padded load rendered as an unconditional load of a clamped address and a select
  // (straight-line code, no branch around the load): where its buffer always has
  // elements, and the kernel's element reads few padded addresses -- each such load keeps
  // its address and predicate live until its select, and an im2col's 9 taps a trip, as a
  // tail of a 64-register host, spilled where branches around the loads did not.
  bool unconditional_pad(const ExprNode& n) const {
    const auto elements = p_.buffers[static_cast<size_t>(n.buffer)].elements.as_constant();
    return elements && *elements > 0 && padded_addresses() <= kMaxUnconditionalPads;
  }

  // The distinct addresses (buffer and index) of the padded loads in the kernel's stored
  // value and its reduction's value.
  std::size_t padded_addresses() const {
    if (padded_addresses_) return *padded_addresses_;
    std::set<std::pair<int, std::string>> at;
    std::set<const ExprNode*> seen;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      if (!e.valid() || !seen.insert(&e.node()).second) return;
      const ExprNode& x = e.node();
      if (x.op == ExprOp::Load && x.valid) at.emplace(x.buffer, x.index.to_string());
      for (const Expr& a : x.args) walk(a);
    };
    walk(k_.store.value);
    if (k_.reduce) walk(k_.reduce->value);
    padded_addresses_ = at.size();
    return at.size();
  }

  std::string rhs_of(const ExprNode& n, const std::vector<std::string>& a) const {
    switch (n.op) {
      case ExprOp::Load: {
        // A padded load never touches memory outside its validity predicate.
        const std::string ld = "b" + std::to_string(n.buffer) + "[" + ix(n.index) + "]";
        if (!n.valid) return ld;
        return "(" + ix(*n.valid) + ") ? " + ld + " : " + literal(n.fill, n.dtype);
      }
      case ExprOp::IndexValue:
        return "(int32_t)" + ix(n.index);
      case ExprOp::Cast:
        return convert(a[0], n.args[0].dtype(), n.dtype);
      case ExprOp::Where:
        return a[0] + " ? " + a[1] + " : " + a[2];
      case ExprOp::Unary:
        return unary(n.unary, n.dtype, a[0], p_.approximate_math);
      case ExprOp::Binary:
        return binary(n.binary, n.args[0].dtype(), a[0], a[1]);
      default:
        return "0";
    }
  }

  static std::string unary(UnaryOp op, DType t, const std::string& x, bool fast) {
    const GpuUnary& u = row_of(kGpuUnary, op).spelling;
    if (t == DType::f32 && fast && !u.fast.empty()) return fill_template(u.fast, {x});
    return fill_template(t == DType::f32 ? u.f32 : t == DType::i32 ? u.i32 : u.other, {x});
  }
  // The online softmax's exp2 (attention kernels), as the program's Exp2 nodes.
  std::string exp2_of(const std::string& x) const {
    return unary(UnaryOp::Exp2, DType::f32, x, p_.approximate_math);
  }

  static std::string binary(BinaryOp op, DType t, const std::string& x, const std::string& y) {
    const GpuBinary& b = row_of(kGpuBinary, op).spelling;
    return fill_template(t == DType::f32 ? b.f32 : t == DType::i32 ? b.i32 : b.other, {x, y});
  }

  // Declares the loop variables of `loops` from the linear position `lin` (innermost
  // fastest), as `const int64_t v<id>`.
  void delinearize(std::ostringstream& s, const std::string& ind, const std::vector<Loop>& loops,
                   const std::string& lin) {
    if (loops.empty()) return;
    if (loops.size() == 1) {
      s << ind << "const int64_t v" << loops[0].var << " = " << lin << ";\n";
      return;
    }
    const std::string r = "lm_r" + std::to_string(tmp_++);
    s << ind << "int64_t " << r << " = " << lin << ";\n";
    for (size_t i = loops.size(); i-- > 0;) {
      if (i == 0) {
        s << ind << "const int64_t v" << loops[i].var << " = " << r << ";\n";
        break;
      }
      const std::string e = ix(loops[i].extent);
      s << ind << "const int64_t v" << loops[i].var << " = " << r << " % " << e << ";\n";
      s << ind << r << " /= " << e << ";\n";
    }
  }

  void store(std::ostringstream& s, const std::string& ind) {
    std::map<const ExprNode*, std::string> memo;
    const std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n";
  }

  static Index capped(const Index& blocks, int64_t cap) { return kernel::min(blocks, Index(cap)); }

  // ---------------------------------------------------------------- elementwise
  void elementwise(std::ostringstream& s, LaunchShape& shape) {
    shape.schedule = "elementwise, a thread per element";
    shape.grid[0] = elementwise_grid();
    elementwise_loop(s, "  ", "(int64_t)blockIdx.x", "lm_gx", kThreads);
  }
  Index elementwise_grid() const { return capped(ceil_div(product(k_.loops), kThreads), int64_t{1} << 20); }
  // The grid-stride loop over the elements, `block` of `grid` blocks of `threads` (the
  // launch's own; a side work's range of a host's extra blocks; a tail's one block).
  void elementwise_loop(std::ostringstream& s, const std::string& ind, const std::string& block,
                        const std::string& grid, int threads) {
    s << ind << "const int64_t lm_n = " << ix(product(k_.loops)) << ";\n";
    s << ind << "for (int64_t lm_i = " << block << " * " << threads
      << " + threadIdx.x; lm_i < lm_n; lm_i += " << grid << " * " << threads << ") {\n";
    delinearize(s, ind + "  ", k_.loops, "lm_i");
    store(s, ind + "  ");
    s << ind << "}\n";
  }

  // A tail kernel's `n` elements by one block: `trips` elements a thread, each stored as
  // it is computed; unrolled where light_trips says so. Only a last, partial trip is
  // guarded (the unrolled trips' `lm_t < full` is known at compile time): a guard around
  // every trip made each a branch of its own. Unrolled, the trips are one basic block,
  // whose scheduler may start a later trip's loads before an earlier trip's store where
  // the stored buffer is __restrict__ (the cost model prices the trips as overlapping
  // then, tail_work); rolled, one after another.
  void tail_loop(std::ostringstream& s, const std::string& ind, int threads, int64_t n, int64_t trips,
                 bool unroll) {
    const std::string t = std::to_string(trips), full = std::to_string(n / threads);
    s << ind << "const int64_t lm_n = " << n << ";\n";
    s << ind << (unroll ? "#pragma unroll\n" : "#pragma unroll 1\n");
    s << ind << "for (int lm_t = 0; lm_t < " << t << "; ++lm_t) {\n";
    s << ind << "  const int64_t lm_i = (int64_t)lm_t * " << threads << " + threadIdx.x;\n";
    s << ind << "  if (lm_t < " << full << " || lm_i < lm_n) {\n";
    delinearize(s, ind + "    ", k_.loops, "lm_i");
    store(s, ind + "    ");
    s << ind << "  }\n";
    s << ind << "}\n";
  }

  // Side work (Kernel::side) ahead of the host's body: the launch's blocks past the host's
  // own grid run the side kernels, a range of blocks each, and return -- block-uniform, so
  // the host's barriers and warp operations stay in uniform control flow. The host's body
  // strides over its own blocks (lm_gx), not the launch's.
  std::string side_work(LaunchShape& shape) {
    if (k_.side.empty()) return k_.kind == KernelKind::Gemm ? "" : "  const int64_t lm_gx = gridDim.x;\n";
    if (k_.kind == KernelKind::Gemm || shape.block[0] != kThreads || shape.block[1] != 1 ||
        shape.block[2] != 1 || shape.grid[1].as_constant() != 1 || shape.grid[2].as_constant() != 1)
      throw InternalError("[gpu] kernel " + k_.name +
                          " cannot host side work: its launch is not one-dimensional");
    std::ostringstream s;
    s << "  const int64_t lm_gx = " << ix(shape.grid[0]) << ";\n";
    s << "  if ((int64_t)blockIdx.x >= lm_gx) { /* side work: " << k_.side.size() << " kernel(s) */\n";
    s << "    int64_t lm_sb = (int64_t)blockIdx.x - lm_gx;\n";
    Index total = shape.grid[0];
    for (const Kernel& sd : k_.side) {
      Writer w(p_, sd, arch_, {});
      const Index g = w.elementwise_grid();
      const std::string gs = ix(g);
      s << "    if (lm_sb < " << gs << ") { /* " << sd.name << " */\n";
      w.elementwise_loop(s, "      ", "lm_sb", gs, kThreads);
      s << "      return;\n    }\n";
      s << "    lm_sb -= " << gs << ";\n";
      total = total + g;
    }
    s << "    return;\n  }\n";
    shape.grid[0] = total;
    shape.side_kernels = static_cast<int>(k_.side.size());
    shape.schedule += ", " + std::to_string(k_.side.size()) + " side kernel(s) in extra blocks";
    return s.str();
  }

  // Tail work (Kernel::tail) after the host's body, which every thread of every block
  // reaches (the bodies return nowhere else): each of the host's blocks fences its stores
  // and one thread counts the block; the block that completes the count runs the tail
  // kernels in order (a barrier between: one may read another's result) and sets the count
  // back to zero for the next call -- the split attention's merge, for any kernel.
  std::string tail_work(LaunchShape& shape) {
    if (k_.tail.empty()) return "";
    const int threads = shape.block[0];
    if (shape.block[1] != 1 || shape.block[2] != 1 || k_.tail_counter < 0)
      throw InternalError("[gpu] kernel " + k_.name +
                          " cannot run tail work: its blocks are not one-dimensional");
    const std::string cnt = "b" + std::to_string(k_.tail_counter) + "[0]";
    const std::string blocks =
        k_.kind == KernelKind::Gemm ? "(int64_t)gridDim.x * gridDim.y * gridDim.z" : std::string("lm_gx");
    std::ostringstream s;
    s << "  { /* tail work: " << k_.tail.size() << " kernel(s), by the last block to finish */\n";
    s << "    __shared__ int lm_tail_last;\n";
    s << "    lm_threadfence();\n";
    s << "    lm_sync();\n";
    s << "    if (threadIdx.x == 0) lm_tail_last = (int64_t)lm_atomic_add_i32(&" << cnt
      << ", 1) == " << blocks << " - 1;\n";
    s << "    lm_sync();\n";
    s << "    if (lm_tail_last) {\n";
    s << "      lm_threadfence();\n";
    for (size_t i = 0; i < k_.tail.size(); ++i) {
      if (i) s << "      lm_sync();\n";
      Writer w(p_, k_.tail[i], arch_, {});
      s << "      { /* " << k_.tail[i].name << " */\n";
      const auto n = product(k_.tail[i].loops).as_constant();
      detail::FoldedLaunches::Tail cost;
      cost.warps = (threads + arch_.warp - 1) / arch_.warp;
      if (n && *n <= kMaxTailTrips * threads) {
        cost.trips = std::max<int64_t>(1, (*n + threads - 1) / threads);
        const bool unroll = w.light_trips(cost.trips);
        w.tail_loop(s, "        ", threads, *n, cost.trips, unroll);
        cost.serial = !unroll;
      } else {
        w.elementwise_loop(s, "        ", "0", "1", threads);
        cost.trips = n ? (*n + threads - 1) / threads : 1;
        cost.serial = true;  // a loop's iterations
      }
      // A stored buffer the launch also reads is not __restrict__: no later trip's load
      // moves above an earlier trip's store.
      if (reads_.count(k_.tail[i].store.buffer) > 0) cost.serial = true;
      s << "      }\n";
      std::set<const ExprNode*> seen;
      std::function<void(const Expr&)> count = [&](const Expr& e) {
        const ExprNode& x = e.node();
        if (!seen.insert(&x).second) return;
        if (x.op != ExprOp::Const && x.op != ExprOp::IndexValue) ++cost.ops;
        if (x.op == ExprOp::Unary && kernel::is_transcendental(x.unary)) ++cost.transcendentals;
        // (value() computes a select's operands before it: only a padded load it cannot
        // make unconditional is a branch.)
        if (x.op == ExprOp::Load && x.valid && !w.unconditional_pad(x)) cost.serial = true;
        for (const Expr& a : x.args) count(a);
      };
      count(k_.tail[i].store.value);
      shape.tails.push_back(cost);
    }
    s << "      if (threadIdx.x == 0) " << cnt << " = 0;\n";
    s << "    }\n";
    s << "  }\n";
    shape.sync = true;
    shape.static_shared += 4;
    shape.schedule += ", " + std::to_string(k_.tail.size()) + " tail kernel(s) by its last block";
    return s.str();
  }

  // ---------------------------------------------------------------- gather
  void gather(std::ostringstream& s, LaunchShape& shape) {
    const Gather& g = *k_.gather;
    const Index n = g.count * g.row;
    shape.schedule = "gather, a thread per element";
    shape.grid[0] = capped(ceil_div(n, kThreads), int64_t{1} << 20);
    s << "  const int64_t lm_n = " << ix(n) << ", lm_row = " << ix(g.row) << ", lm_rows = " << ix(g.rows) << ";\n";
    s << "  for (int64_t lm_i = (int64_t)blockIdx.x * " << kThreads << " + threadIdx.x; lm_i < lm_n; lm_i += "
      << "lm_gx * " << kThreads << ") {\n";
    s << "    const int64_t i = lm_i / lm_row, j = lm_i % lm_row;\n";
    s << "    int64_t id = b" << g.ids << "[i];\n";
    s << "    id = id < 0 ? 0 : id >= lm_rows ? lm_rows - 1 : id; /* checked on the host before the launch */\n";
    s << "    b" << g.out << "[lm_i] = b" << g.table << "[id * lm_row + j];\n";
    s << "  }\n";
  }

  // ---------------------------------------------------------------- reduction
  // A row walked 128 bits at a time by the threads sharing it: each takes `group`
  // consecutive elements a step and reads every load that walks the row with stride 1
  // (f32, f16, bf16; no pad predicate) as lm_ld128 vectors, the other loads as they are --
  // a weight row of halves in 16-byte loads instead of 2-byte ones, what the memory system
  // needs to stream at bandwidth. nullopt (the scalar walk) when a load walks the row
  // otherwise or none is contiguous.
  struct RowVectors {
    int group = 4;                       // elements a thread takes a step: 4 (f32 only) or 8
    std::vector<const ExprNode*> loads;  // read as vectors, in first-use order
  };
  static std::optional<RowVectors> row_vectors(const Reduction& r, const std::vector<Accumulator>& accs) {
    if (r.loops.size() != 1) return std::nullopt;
    const int64_t j = r.loops[0].var;
    RowVectors v;
    std::set<const ExprNode*> seen;
    bool ok = true;
    std::function<void(const Expr&)> walk = [&](const Expr& e) {
      const ExprNode& n = e.node();
      if (!seen.insert(&n).second) return;
      if (n.op == ExprOp::Load && uses_var(n.index, j)) {
        const bool half = n.dtype == DType::f16 || n.dtype == DType::bf16;
        if (var_stride(n.index, j) != int64_t{1} || n.valid || !(half || n.dtype == DType::f32)) ok = false;
        v.loads.push_back(&n);
        if (half) v.group = 8;
      }
      for (const Expr& a : n.args) walk(a);
    };
    for (const Accumulator& a : accs) walk(a.value);
    if (!ok || v.loads.empty()) return std::nullopt;
    return v;
  }

  // A row's accumulators (accumulator 0 the Reduction itself, then its `more`) share one
  // walk of the row: every value is computed at each point, common subexpressions once
  // (SwiGLU's gate and up products read the same normalized x), each then reduced across
  // the row's threads.
  void reduction(std::ostringstream& s, LaunchShape& shape) {
    const Reduction& r = *k_.reduce;
    const Index rows = product(k_.loops), len = product(r.loops);
    const std::vector<Accumulator> accs = accumulators(r);
    auto name = [](size_t i) { return i ? "lm_acc" + std::to_string(i) : std::string("lm_acc"); };
    auto type = [](const Accumulator& a) { return a.acc_dtype == DType::f32 ? "float" : "int32_t"; };
    auto suffix = [](const Accumulator& a) {
      return std::string(a.op == ReduceOp::Sum ? "sum" : "max") +
             (a.acc_dtype == DType::f32 ? "_f32" : "_i32");
    };
    auto ident = [](const Accumulator& a) -> std::string {
      const bool f = a.acc_dtype == DType::f32;
      if (a.op == ReduceOp::Sum) return f ? "0.0f" : "0";
      return f ? "lm_u2f(0xff800000u)" : "(-2147483647 - 1)";
    };
    auto combine = [](const Accumulator& a, const std::string& x, const std::string& v) {
      const bool f = a.acc_dtype == DType::f32;
      if (a.op == ReduceOp::Sum) return f ? x + " + " + v : "lm_iadd(" + x + ", " + v + ")";
      return f ? "lm_max(" + x + ", " + v + ")" : "(" + v + " > " + x + " ? " + v + " : " + x + ")";
    };
    // Which threads share a row: the search's alternative when it made one, else by length.
    std::string per = "warp";
    const auto c = len.as_constant();
    if (c && *c <= 16)
      per = "thread";
    else if (c && *c > 2048)
      per = "block";
    if (launch_.size() == 1) per = launch_[0] == 1 ? "thread" : launch_[0] == 2 ? "block" : "warp";
    const int warp = arch_.warp;
    const std::optional<RowVectors> vec = per == "thread" ? std::nullopt : row_vectors(r, accs);
    s << "  const int64_t lm_rows = " << ix(rows) << ", lm_len = " << ix(len) << ";\n";
    // Every accumulator's value at the point the loop variables name, combined into it;
    // `memo` may bind loads to their elements of the vectors already loaded.
    auto step_values = [&](const std::string& ind, std::map<const ExprNode*, std::string> memo) {
      for (size_t i = 0; i < accs.size(); ++i) {
        std::string v = value(accs[i].value, memo, s, ind);
        if (accs[i].value.dtype() != accs[i].acc_dtype)
          v = convert(v, accs[i].value.dtype(), accs[i].acc_dtype);
        s << ind << name(i) << " = " << combine(accs[i], name(i), v) << ";\n";
      }
    };
    // The row from `start`, `step` elements apart, element by element.
    auto scalar_walk = [&](const std::string& ind, const std::string& start, const std::string& step) {
      s << ind << "for (int64_t lm_j = " << start << "; lm_j < lm_len; lm_j += " << step << ") {\n";
      delinearize(s, ind + "  ", r.loops, "lm_j");
      step_values(ind + "  ", {});
      s << ind << "}\n";
    };
    // Thread `tid` of the `threads` sharing the row.
    auto accumulate = [&](const std::string& ind, const std::string& tid, const std::string& threads) {
      for (size_t i = 0; i < accs.size(); ++i)
        s << ind << type(accs[i]) << " " << name(i) << " = " << ident(accs[i]) << ";\n";
      if (!vec) return scalar_walk(ind, tid, threads);
      // The vectors' addresses at the row's start decide (the same for every thread of the
      // row): all 16-byte aligned -> whole groups as vectors, the rest element by element.
      const int64_t g = vec->group, jv = r.loops[0].var;
      const std::string in = ind + "  ";
      s << ind << "int64_t lm_vn = lm_len - lm_len % " << g << ";\n";
      s << ind << "{\n" << in << "const int64_t v" << jv << " = 0;\n";
      for (const ExprNode* ld : vec->loads)
        s << in << "if (!lm_aligned16(b" << ld->buffer << " + " << ix(ld->index) << ")) lm_vn = 0;\n";
      s << ind << "}\n";
      s << ind << "for (int64_t lm_j0 = (int64_t)(" << tid << ") * " << g
        << "; lm_j0 < lm_vn; lm_j0 += (int64_t)(" << threads << ") * " << g << ") {\n";
      std::vector<std::string> vname;
      s << in << "const int64_t v" << jv << " = lm_j0;\n";
      for (size_t q = 0; q < vec->loads.size(); ++q) {
        const ExprNode* ld = vec->loads[q];
        const int64_t per_vec = ld->dtype == DType::f32 ? 4 : 8;
        vname.push_back("lm_w" + std::to_string(q));
        s << in << "lm_u32x4 " << vname.back() << "[" << g / per_vec << "];\n";
        for (int64_t h = 0; h < g / per_vec; ++h)
          s << in << vname.back() << "[" << h << "] = lm_ld128(b" << ld->buffer << " + " << ix(ld->index)
            << " + " << h * per_vec << ");\n";
      }
      static constexpr const char* kField[] = {"x", "y", "z", "w"};
      for (int64_t e = 0; e < g; ++e) {
        s << in << "{\n" << in << "  const int64_t v" << jv << " = lm_j0 + " << e << ";\n";
        std::map<const ExprNode*, std::string> memo;
        for (size_t q = 0; q < vec->loads.size(); ++q) {
          const ExprNode* ld = vec->loads[q];
          if (ld->dtype == DType::f32)
            memo[ld] = "lm_u2f(" + vname[q] + "[" + std::to_string(e / 4) + "]." + kField[e % 4] + ")";
          else
            memo[ld] = "((uint16_t)(" + vname[q] + "[" + std::to_string(e / 8) + "]." + kField[(e / 2) % 4] +
                       " >> " + std::to_string(16 * (e % 2)) + "))";
        }
        step_values(in + "  ", std::move(memo));
        s << in << "}\n";
      }
      s << ind << "}\n";
      scalar_walk(ind, "lm_vn + " + tid, threads);
    };
    auto finish = [&](const std::string& ind) {
      for (size_t i = 0; i < accs.size(); ++i)
        s << ind << "const " << type(accs[i]) << " acc" << (i ? std::to_string(i) : "") << " = " << name(i)
          << ";\n";
      store(s, ind);
    };
    const std::string many = (accs.size() > 1 ? ", " + std::to_string(accs.size()) + " accumulators" : "") +
                             (vec ? ", 128-bit loads" : "");
    if (per == "thread") {
      shape.schedule = "reduction, a row per thread" + many;
      shape.grid[0] = capped(ceil_div(rows, kThreads), int64_t{1} << 20);
      s << "  for (int64_t lm_row = (int64_t)blockIdx.x * " << kThreads
        << " + threadIdx.x; lm_row < lm_rows; lm_row += lm_gx * " << kThreads << ") {\n";
      delinearize(s, "    ", k_.loops, "lm_row");
      accumulate("    ", "0", "1");
      finish("    ");
      s << "  }\n";
      return;
    }
    shape.sync = true;
    if (per == "warp") {
      const int rows_per_block = kThreads / warp;
      shape.schedule = "reduction, a row per warp (" + std::to_string(warp) + " lanes, shuffle tree)" + many;
      shape.grid[0] = capped(ceil_div(rows, rows_per_block), int64_t{1} << 20);
      s << "  const unsigned int lm_lane = threadIdx.x % LM_WARP;\n";
      s << "  /* the row is the same for every lane of a warp: warp operations stay uniform */\n";
      s << "  for (int64_t lm_row = (int64_t)blockIdx.x * " << rows_per_block
        << " + threadIdx.x / LM_WARP; lm_row < lm_rows; lm_row += lm_gx * " << rows_per_block << ") {\n";
      delinearize(s, "    ", k_.loops, "lm_row");
      accumulate("    ", "lm_lane", "LM_WARP");
      for (size_t i = 0; i < accs.size(); ++i)
        s << "    " << name(i) << " = lm_warp_" << suffix(accs[i]) << "(" << name(i) << ");\n";
      s << "    if (lm_lane == 0) {\n";
      finish("      ");
      s << "    }\n  }\n";
      return;
    }
    shape.schedule =
        "reduction, a row per block (" + std::to_string(kThreads) + " threads, shuffles + shared)" + many;
    shape.grid[0] = capped(rows, int64_t{1} << 20);
    shape.static_shared = static_cast<int>(accs.size()) * (kThreads / warp) * 4;
    for (size_t i = 0; i < accs.size(); ++i)
      s << "  __shared__ " << type(accs[i]) << " lm_part" << (i ? std::to_string(i) : "") << "["
        << kThreads / warp << "];\n";
    s << "  /* the row is the same for every thread of the block: barriers stay uniform */\n";
    s << "  for (int64_t lm_row = blockIdx.x; lm_row < lm_rows; lm_row += lm_gx) {\n";
    delinearize(s, "    ", k_.loops, "lm_row");
    accumulate("    ", "threadIdx.x", std::to_string(kThreads));
    for (size_t i = 0; i < accs.size(); ++i)
      s << "    " << name(i) << " = lm_block_" << suffix(accs[i]) << "(" << name(i) << ", lm_part"
        << (i ? std::to_string(i) : "") << ");\n";
    s << "    if (threadIdx.x == 0) {\n";
    finish("      ");
    s << "    }\n  }\n";
  }

  // ---------------------------------------------------------------- GEMM
  // The head every GEMM form shares: the loop over batch points (blockIdx.z, uniform),
  // the batch variables, and the views' offsets and strides at that point (lm_oa/lm_ra/
  // lm_ca for A, lm_ob/... for B unless `with_b` is false -- the skinny form picks B's
  // view per column segment -- and lm_oc/lm_rc for C). Leaves the batch loop open.
  void gemm_batch_head(std::ostringstream& s, const Gemm& g, bool with_b) {
    s << "  for (int64_t lm_b = blockIdx.z; lm_b < lm_batches; lm_b += gridDim.z) {\n";
    delinearize(s, "    ", k_.loops, "lm_b");
    s << "    const int64_t lm_oa = " << ix(g.a.offset) << ", lm_ra = " << ix(g.a.row_stride)
      << ", lm_ca = " << ix(g.a.col_stride) << ";\n";
    if (with_b)
      s << "    const int64_t lm_ob = " << ix(g.b.offset) << ", lm_rb = " << ix(g.b.row_stride)
        << ", lm_cb = " << ix(g.b.col_stride) << ";\n";
    s << "    const int64_t lm_oc = " << ix(g.c.offset) << ", lm_rc = " << ix(g.c.row_stride) << ";\n";
  }

  void gemm(std::ostringstream& s, LaunchShape& shape) {
    const Gemm& g = *k_.gemm;
    // The search's alternative (cost/gpu_launch.hpp); without one the 64 x 64 x 16 FMA tile.
    const detail::GpuGemmLaunch L = detail::GpuGemmLaunch::from(launch_);
    // Only the skinny GEMM reads a segmented B (the GPU lowering asks for one only there:
    // lower::Options::segmented_b_skinny); the tiles would stage it from several buffers.
    if (!g.b_segments.empty() && L.engine != detail::GpuGemmEngine::Skinny)
      throw InternalError("[gpu] kernel " + k_.name + ": a segmented GEMM B outside the skinny GEMM");
    int64_t bm = L.bm, bn = L.bn, bk = L.bk;
    if (L.engine == detail::GpuGemmEngine::Skinny) return gemm_skinny(s, shape, L);
    // Likewise the row prologue (lower::Options::gemm_row_prologue).
    if (g.a_prologue)
      throw InternalError("[gpu] kernel " + k_.name + ": a GEMM row prologue outside the skinny GEMM");
    const DType dt = p_.buffers[static_cast<size_t>(g.a.buffer)].dtype;
    const DType dtb = p_.buffers[static_cast<size_t>(g.b.buffer)].dtype;
    // ldmatrix + cp.async where the target has them and the warps tile the block (the rules
    // make MmaAsync alternatives with such tiles); otherwise the same tile as plain Mma.
    if (L.engine == detail::GpuGemmEngine::MmaAsync && dt != DType::f32 && dt == dtb &&
        arch_.dialect == Dialect::Cuda && arch_.async_copy && L.wm % 16 == 0 && L.wn % 16 == 0 && L.wm > 0 &&
        L.wn > 0 && bm % L.wm == 0 && bn % L.wn == 0 && (bm / L.wm) * (bn / L.wn) <= 32 && bm % 32 == 0 &&
        bn % 32 == 0 && detail::mma_async_shared_bytes(L) <= arch_.max_static_shared)
      return gemm_mma_async(s, shape, L, dt);
    // Tensor cores where the alternative asks for them and they can run it: both operands
    // the same half type, mma.sync on the target, tile sides multiples of 32; otherwise
    // the FMA tile of the same size (the rules make Mma alternatives only where it holds).
    const bool mma = L.engine == detail::GpuGemmEngine::Mma || L.engine == detail::GpuGemmEngine::MmaAsync;
    if (mma && dt != DType::f32 && dt == dtb && arch_.dialect == Dialect::Cuda && arch_.mma_m16n8k16 &&
        bm % 32 == 0 && bn % 32 == 0)
      return gemm_matrix(s, shape, bm, bn, dt, L.vec > 1, MatrixIsa::MmaSync);
    if (mma && dt != DType::f32 && dt == dtb && arch_.dialect == Dialect::Hip &&
        (dt == DType::f16 ? arch_.mfma_f16 : arch_.mfma_bf16) && arch_.warp == 64 && bm % 32 == 0 &&
        bn % 32 == 0)
      return gemm_matrix(s, shape, bm, bn, dt, L.vec > 1, MatrixIsa::Mfma);
    if (mma && dt != DType::f32 && dt == dtb && arch_.dialect == Dialect::Hip && arch_.wmma &&
        arch_.warp == 32 && bm % 32 == 0 && bn % 32 == 0)
      return gemm_matrix(s, shape, bm, bn, dt, L.vec > 1, MatrixIsa::Wmma);
    // 16 x 16 threads, each a (bm/16) x (bn/16) micro tile.
    bm = std::max<int64_t>(16, bm / 16 * 16);
    bn = std::max<int64_t>(16, bn / 16 * 16);
    bk = std::max<int64_t>(1, bk);
    while ((bm + bn) * bk * 4 > arch_.max_static_shared) bk = std::max<int64_t>(1, bk / 2);
    const int64_t tm = bm / 16, tn = bn / 16;
    const Index batches = product(k_.loops);
    shape.sync = true;
    // tm x tn accumulators + the a/b fragments + addressing: one block per SM leaves 255
    // registers per thread, two leave 128.
    shape.min_blocks = tm * tn > 16 ? 1 : 2;
    shape.static_shared = static_cast<int>((bm + bn) * bk * 4);
    shape.schedule = "gemm, shared-memory tiles " + std::to_string(bm) + "x" + std::to_string(bn) + "x" +
                     std::to_string(bk) + ", " + std::to_string(tm) + "x" + std::to_string(tn) +
                     " per thread, f32 FMA" + (L.vec > 1 && bk % 4 == 0 ? ", 128-bit loads" : "");
    shape.grid[0] = ceil_div(g.n, bn);
    shape.grid[1] = capped(ceil_div(g.m, bm), 65535);
    shape.grid[2] = capped(batches, 65535);
    const bool a_k_contig = g.a.col_stride.as_constant() == int64_t{1};
    const bool b_n_contig = g.b.col_stride.as_constant() == int64_t{1};
    s << "  __shared__ float lm_as[" << bk * bm << "];  /* [k][m] */\n";
    s << "  __shared__ float lm_bs[" << bk * bn << "];  /* [k][n] */\n";
    s << "  const int64_t lm_m = " << ix(g.m) << ", lm_n = " << ix(g.n) << ", lm_k = " << ix(g.k)
      << ", lm_batches = " << ix(batches) << ";\n";
    s << "  const int lm_tx = threadIdx.x % 16, lm_ty = threadIdx.x / 16;\n";
    s << "  /* every loop bound below depends on block indices only: barriers stay uniform */\n";
    gemm_batch_head(s, g, true);
    s << "    for (int64_t lm_ti = blockIdx.y; lm_ti * " << bm << " < lm_m; lm_ti += gridDim.y) {\n";
    s << "      const int64_t lm_i0 = lm_ti * " << bm << ", lm_j0 = (int64_t)blockIdx.x * " << bn << ";\n";
    s << "      float lm_c[" << tm << "][" << tn << "];\n";
    s << "#pragma unroll\n";
    s << "      for (int i = 0; i < " << tm << "; ++i)\n";
    s << "#pragma unroll\n";
    s << "        for (int j = 0; j < " << tn << "; ++j) lm_c[i][j] = 0.0f;\n";
    s << "      for (int64_t lm_k0 = 0; lm_k0 < lm_k; lm_k0 += " << bk << ") {\n";
    // Loads: consecutive threads read consecutive addresses of whichever side is contiguous;
    // with 128-bit loads (f32 operands, vec > 1) 4 elements along that side per load.
    const bool v128 = L.vec > 1 && bk % 4 == 0;
    auto stage = [&](const std::string& ind, bool a_side, bool vector) {
      const bool contig = a_side ? a_k_contig : !b_n_contig;  // true: along k
      const int64_t rows = a_side ? bm : bn;
      const std::string sh = a_side ? "lm_as" : "lm_bs", r0 = a_side ? "lm_i0" : "lm_j0",
                        lim = a_side ? "lm_m" : "lm_n";
      auto addr = [&](const std::string& r, const std::string& k) {
        return a_side ? "lm_oa + (" + r + ") * lm_ra + (" + k + ") * lm_ca"
                      : "lm_ob + (" + k + ") * lm_rb + (" + r + ") * lm_cb";
      };
      const int buffer = a_side ? g.a.buffer : g.b.buffer;
      auto elem = [&](const std::string& r, const std::string& k) {
        return "(" + r + " < " + lim + " && " + k + " < lm_k) ? " + operand(buffer, addr(r, k)) + " : 0.0f";
      };
      if (!vector) {
        s << ind << "for (int lm_e = threadIdx.x; lm_e < " << rows * bk << "; lm_e += " << kThreads << ") {\n";
        if (contig)
          s << ind << "  const int r = lm_e / " << bk << ", kk = lm_e % " << bk << ";\n";
        else
          s << ind << "  const int r = lm_e % " << rows << ", kk = lm_e / " << rows << ";\n";
        s << ind << "  const int64_t gr = " << r0 << " + r, gk = lm_k0 + kk;\n";
        s << ind << "  " << sh << "[kk * " << rows << " + r] = " << elem("gr", "gk") << ";\n";
        s << ind << "}\n";
        return;
      }
      // 4 consecutive elements along the contiguous side (k or the rows) per lm_ld128
      s << ind << "for (int lm_e = threadIdx.x; lm_e < " << rows * bk / 4 << "; lm_e += " << kThreads << ") {\n";
      if (contig)
        s << ind << "  const int r = lm_e / " << bk / 4 << ", kk = 4 * (lm_e % " << bk / 4 << ");\n";
      else
        s << ind << "  const int r = 4 * (lm_e % " << rows / 4 << "), kk = lm_e / " << rows / 4 << ";\n";
      s << ind << "  const int64_t gr = " << r0 << " + r, gk = lm_k0 + kk;\n";
      if (contig) {
        s << ind << "  if (gr < " << lim << " && gk + 4 <= lm_k) {\n";
        s << ind << "    const lm_u32x4 v = lm_ld128(b" << buffer << " + " << addr("gr", "gk") << ");\n";
        s << ind << "    " << sh << "[kk * " << rows << " + r] = lm_u2f(v.x);\n";
        s << ind << "    " << sh << "[(kk + 1) * " << rows << " + r] = lm_u2f(v.y);\n";
        s << ind << "    " << sh << "[(kk + 2) * " << rows << " + r] = lm_u2f(v.z);\n";
        s << ind << "    " << sh << "[(kk + 3) * " << rows << " + r] = lm_u2f(v.w);\n";
        s << ind << "  } else {\n";
        s << ind << "    for (int q = 0; q < 4; ++q) " << sh << "[(kk + q) * " << rows << " + r] = "
          << elem("gr", "gk + q") << ";\n";
      } else {
        s << ind << "  if (gr + 4 <= " << lim << " && gk < lm_k) {\n";
        s << ind << "    const lm_u32x4 v = lm_ld128(b" << buffer << " + " << addr("gr", "gk") << ");\n";
        s << ind << "    " << sh << "[kk * " << rows << " + r] = lm_u2f(v.x);\n";
        s << ind << "    " << sh << "[kk * " << rows << " + r + 1] = lm_u2f(v.y);\n";
        s << ind << "    " << sh << "[kk * " << rows << " + r + 2] = lm_u2f(v.z);\n";
        s << ind << "    " << sh << "[kk * " << rows << " + r + 3] = lm_u2f(v.w);\n";
        s << ind << "  } else {\n";
        s << ind << "    for (int q = 0; q < 4; ++q) " << sh << "[kk * " << rows << " + r + q] = "
          << elem("gr + q", "gk") << ";\n";
      }
      s << ind << "  }\n";
      s << ind << "}\n";
    };
    for (bool a_side : {true, false}) {
      const DType od = a_side ? dt : dtb;
      // a vector is 16 bytes of f32 along the contiguous side; the other stride and the
      // block's base keep every vector aligned (checked per tile, uniform)
      const bool contig_k = a_side ? a_k_contig : !b_n_contig;
      const bool has_contig = a_side ? (a_k_contig || g.a.row_stride.as_constant() == int64_t{1})
                                     : (b_n_contig || g.b.row_stride.as_constant() == int64_t{1});
      const int64_t rows = a_side ? bm : bn;
      if (v128 && od == DType::f32 && has_contig && rows % 4 == 0) {
        const std::string other = a_side ? (contig_k ? "lm_ra" : "lm_ca") : (contig_k ? "lm_cb" : "lm_rb");
        const std::string base = a_side ? "lm_oa" : "lm_ob";
        s << "        if (lm_aligned16(b" << (a_side ? g.a.buffer : g.b.buffer) << " + " << base << ") && " << other
          << " % 4 == 0) {\n";
        stage("          ", a_side, true);
        s << "        } else {\n";
        stage("          ", a_side, false);
        s << "        }\n";
      } else {
        stage("        ", a_side, false);
      }
    }
    s << "        lm_sync();\n";
    s << "#pragma unroll 4\n";
    s << "        for (int kk = 0; kk < " << bk << "; ++kk) {\n";
    s << "          float a[" << tm << "], b[" << tn << "];\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << tm << "; ++i) a[i] = lm_as[kk * " << bm << " + lm_ty + 16 * i];\n";
    s << "#pragma unroll\n";
    s << "          for (int j = 0; j < " << tn << "; ++j) b[j] = lm_bs[kk * " << bn << " + lm_tx + 16 * j];\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << tm << "; ++i)\n";
    s << "#pragma unroll\n";
    s << "            for (int j = 0; j < " << tn << "; ++j) lm_c[i][j] = LM_FMA(a[i], b[j], lm_c[i][j]);\n";
    s << "        }\n";
    s << "        lm_sync();\n";
    s << "      }\n";
    epilogue(s, "      ", "lm_c[i][j]", "lm_i0 + lm_ty + 16 * i", "lm_j0 + lm_tx + 16 * j", tm, tn);
    s << "    }\n  }\n";
  }

  // ---------------------------------------------------------------- attention
  // One block per (batch point, query rows), streaming the keys in chunks of kThreads with
  // the online softmax. The rows' q is computed once into shared memory; each chunk's
  // q.k dots are a group of lanes' per key -- lanes across keys, a row of K read whole by
  // G lanes in vector loads, or a warp with its lanes across the depth (K read coalesced,
  // a warp sum) --, then each thread owns one key: the chunk's scores reduce to a running max m
  // (NaN propagates), the chunk's weights go through shared memory to the threads that
  // own the output columns. The partial output is kept normalised, a convex combination of
  // values as the two-pass sum of P_j V_j is (ir/online_softmax.hpp): the old part is
  // scaled by l_old * alpha / l_new, the chunk's weights by 1 / l_new (alpha =
  // exp2((m_old - m_new) c)), so values near FLT_MAX overflow only where the definition
  // does -- "sum e V, divide by l at the end" overflows for values within a factor n of
  // FLT_MAX. Every key is visited (key_end is only an optimization, and visiting keeps
  // 0 * inf = NaN). A row whose keys are all masked ends with l = 0 and yields NaN, as the
  // body does; no keys at all give +0 (the sum over nothing).
  //
  // A block takes R rows (block_rows): with R > 1, rows of one batch point that read the
  // same K and V, each K element a lane loads feeds R dot products and each V element R
  // sums. Every row's arithmetic is the same sequence of operations as with R = 1.
  void attention(std::ostringstream& s, LaunchShape& shape) {
    const Attention& a = *k_.attention;
    // Split (flash-decoding, Attention::Split): a block per (rows, range of keys), storing
    // the range's softmax state; otherwise a block per rows over every key.
    const bool split = a.split.has_value();
    const Index batches = product(k_.loops);
    // q cached in shared memory when its depth is a known, modest size.
    const std::optional<int64_t> dk_const = a.dk.as_constant();
    const bool q_cached = dk_const && *dk_const > 0 && *dk_const <= kMaxCachedDepth;
    const int R = block_rows(a, q_cached);
    const Index groups = R > 1 ? floordiv(a.m, Index(R)) : a.m;
    shape.sync = true;
    shape.schedule = std::string("attention, a block per ") +
                     (R > 1 ? std::to_string(R) + " query rows sharing K and V" : "query row") +
                     ", keys streamed " + std::to_string(kThreads) +
                     " at a time (a key's dot by a group of lanes, online softmax)";
    shape.grid[0] = capped(batches * groups * (split ? attention_splits(a.n) : Index(1)), int64_t{1} << 20);
    if (split) shape.schedule += ", keys in ranges (flash-decoding), the last range block merging";
    // The output columns a pass takes (DVB) and the key groups that share them (KG): a
    // value width of at most half the block leaves the other threads to other keys.
    const std::optional<int64_t> dv_const = a.dv.as_constant();
    const int warp = arch_.warp;
    const int64_t dvb = dv_const && *dv_const > 0 && *dv_const < kThreads
                            ? std::min<int64_t>(kThreads, (*dv_const + warp - 1) / warp * warp)
                            : kThreads;
    const int64_t kg = kThreads / dvb;
    const int64_t other_shared =
        (detail::attention_softmax_scratch(R, kThreads, warp) + (q_cached ? R * *dk_const : 0)) * 4;
    const int64_t C = value_columns(a, dv_const, dvb, R, other_shared);
    shape.static_shared = static_cast<int>(R * kThreads * C * 4 + other_shared);
    shape.min_blocks = 2;  // the score expression and the online-softmax state: up to 128 registers
    auto ld = [&](const MatrixView& v, const std::string& idx) {
      const DType dt = p_.buffers[static_cast<size_t>(v.buffer)].dtype;
      // Built with append: GCC 12 warns falsely (-Wrestrict) on operator+ chains here.
      std::string x = "b";
      x.append(std::to_string(v.buffer)).append("[").append(idx).append("]");
      return convert(x, dt, DType::f32);
    };
    // Per-row names (row r of the block): lm_mx0, lm_l0, lm_o0, ...
    auto nm = [](const char* base, int r) { return std::string(base) + std::to_string(r); };
    const std::string i = "v" + std::to_string(a.row_var), j = "v" + std::to_string(a.key_var),
                      d = "v" + std::to_string(a.col_var);
    // Row r's variable: declared once for the block when R = 1 (every expression may read
    // it there), in a scope of its own per row otherwise (this, only then).
    auto row_decl = [&](int r) { return "const int64_t " + i + " = lm_i0 + " + std::to_string(r) + "; "; };
    // lm_e: the chunk's scores (a row's kThreads together), then its weights key by key (a
    // key's R together: P V reads them in 16-byte loads where R is a multiple of 4, so
    // lm_e is 16-byte aligned); with C columns a thread, P V's key groups' sums (R x C x
    // kThreads) after the weights are read.
    s << "  __shared__ float lm_e[" << R * kThreads * C << "] __attribute__((aligned(16)));\n";
    s << "  __shared__ float lm_part[" << detail::attention_softmax_scratch(R, kThreads, arch_.warp)
      << "];\n";
    if (q_cached) s << "  __shared__ float lm_qs[" << R * *dk_const << "];\n";
    if (split) s << "  __shared__ int lm_last;\n";
    s << "  const int64_t lm_m = " << ix(a.m) << ", lm_n = " << ix(a.n) << ", lm_dk = " << ix(a.dk)
      << ", lm_dv = " << ix(a.dv) << ", lm_batches = " << ix(batches) << ", lm_groups = " << ix(groups)
      << ";\n";
    s << "  const float lm_c = " << float_literal(a.exp2_scale) << ";\n";
    s << "  const float lm_ninf = lm_u2f(0xff800000u);\n";
    s << "  /* the rows are the same for every thread of the block: barriers stay uniform */\n";
    if (split) {
      s << "  const int64_t lm_ranges = " << ix(attention_splits(a.n))
        << ", lm_chunk = " << ix(attention_chunk(a.n)) << ";\n";
      s << "  for (int64_t lm_bt = blockIdx.x; lm_bt < lm_batches * lm_groups * lm_ranges; lm_bt += "
           "lm_gx) "
           "{\n";
      s << "    const int64_t lm_tg = lm_bt / lm_ranges, lm_rg = lm_bt % lm_ranges;\n";
      s << "    const int64_t lm_jb = lm_rg * lm_chunk < lm_n ? lm_rg * lm_chunk : lm_n;\n";
      s << "    const int64_t lm_je = (lm_rg + 1) * lm_chunk < lm_n ? (lm_rg + 1) * lm_chunk : lm_n;\n";
    } else {
      s << "  for (int64_t lm_tg = blockIdx.x; lm_tg < lm_batches * lm_groups; lm_tg += lm_gx) {\n";
      s << "    const int64_t lm_jb = 0, lm_je = lm_n;\n";
    }
    // The block's first row, and its number among all rows (batch point * m + row).
    s << "    const int64_t lm_i0 = lm_tg % lm_groups * " << R
      << ", lm_t0 = lm_tg / lm_groups * lm_m + lm_i0;\n";
    if (R == 1) s << "    const int64_t " << i << " = lm_i0;\n";
    delinearize(s, "    ", k_.loops, "lm_tg / lm_groups");
    s << "    const int64_t lm_ov = " << ix(a.v.offset) << ", lm_rv = " << ix(a.v.row_stride)
      << ", lm_cv = " << ix(a.v.col_stride) << ";\n";
    // A segmented V: keys [j0_s, j0_s+1) from segment s, at its own offset and row stride
    // (the column stride is V's).
    for (size_t sgi = 0; sgi < a.v_more.size(); ++sgi) {
      const KeySegment& sg = a.v_more[sgi];
      const std::string n = std::to_string(sgi + 1);
      s << "    const int64_t lm_ov" << n << " = " << ix(sg.v.offset) << ", lm_rv" << n << " = "
        << ix(sg.v.row_stride) << ", lm_vs" << n << " = " << ix(sg.j0) << ";\n";
    }
    s << "    const int64_t lm_oo = " << ix(a.out.offset) << ", lm_ro = " << ix(a.out.row_stride) << ";\n";
    const std::string p = "v" + std::to_string(a.depth_var);
    if (q_cached) {
      // The rows' q (with its RoPE prologue) once per row, not once per key.
      for (int r = 0; r < R; ++r) {
        s << "    for (int64_t " << p << " = threadIdx.x; " << p << " < lm_dk; " << p << " += " << kThreads
          << ") {\n";
        if (R > 1) s << "      " << row_decl(r) << "\n";
        std::map<const ExprNode*, std::string> memo;
        const std::string qv = value(a.q, memo, s, "      ");
        s << "      lm_qs[" << r * *dk_const << " + " << p << "] = " << qv << ";\n";
        s << "    }\n";
      }
      s << "    lm_sync();\n";
    }
    // The chunk's scores: K's segments one after another, each over the chunk's keys in its
    // range (the key variable counted from the segment's first key). A segment of K rows
    // read whole (key_rows: a plain load along the depth) takes lanes across keys where
    // its rows are aligned (dots_wide, E elements a lane, a key's dot product over G
    // lanes); others a warp per key, lanes across the depth (dots_across_depth).
    const std::vector<KeyExprSegment> ksegs = key_segments(a);
    const int64_t E = q_cached ? key_vector(a, ksegs, *dk_const, R) : 1;
    const int64_t G = E > 1 ? *dk_const / E : 0;
    // Each lane's share of the rows' q in registers when it is small (q_steps depths a
    // row): the dot products then read no shared memory. With lanes across keys, the
    // lane's E depths of each row instead.
    const int64_t q_steps = q_cached ? (*dk_const + warp - 1) / warp : 0;
    const bool q_regs = E == 1 && q_cached && q_steps * R <= kMaxQRegisters;
    if (q_regs)
      for (int r = 0; r < R; ++r)
        for (int64_t t = 0; t < q_steps; ++t) {
          const std::string at = "threadIdx.x % " + std::to_string(warp) + " + " + std::to_string(t * warp);
          s << "    const float " << q_reg(r, t) << " = ";
          if ((t + 1) * warp > *dk_const) s << "(" << at << " < lm_dk) ? ";
          s << "lm_qs[" << r * *dk_const << " + " << at << "]";
          if ((t + 1) * warp > *dk_const) s << " : 0.0f";
          s << ";\n";
        }
    if (E > 1)
      for (int r = 0; r < R; ++r)
        for (int64_t e = 0; e < E; ++e)
          s << "    const float lm_qw" << r << "_" << e << " = lm_qs[" << r * *dk_const << " + threadIdx.x % "
            << G << " * " << E << " + " << e << "];\n";
    s << "    for (int64_t lm_d0 = 0; lm_d0 < lm_dv; lm_d0 += " << dvb << ") {\n";
    s << "      const int64_t " << d << " = lm_d0 + threadIdx.x % " << dvb << ";\n";
    if (kg > 1) s << "      const int64_t lm_kg = threadIdx.x / " << dvb << ";\n";
    const std::string own = kg > 1 ? "lm_kg == 0 && " + d + " < lm_dv" : d + " < lm_dv";
    for (int r = 0; r < R; ++r)
      s << "      float " << nm("lm_mx", r) << " = lm_ninf, " << nm("lm_l", r) << " = 0.0f, " << nm("lm_o", r)
        << " = 0.0f;\n";
    s << "      for (int64_t lm_j0 = lm_jb; lm_j0 < lm_je; lm_j0 += " << kThreads << ") {\n";
    s << "        const int64_t lm_nj = lm_je - lm_j0 < " << kThreads << " ? lm_je - lm_j0 : " << kThreads
      << ";\n";
    for (size_t si = 0; si < ksegs.size(); ++si) {
      // A segment whose keys are computed (a decode step's new key through its RoPE: a
      // key, ~90 operations an element) is emitted once, a key a trip, its depths in a
      // loop: unrolled it would be most of the kernel's source and of NVRTC's time.
      const bool light = expr_nodes(ksegs[si].k) <= kLightKeyNodes;
      const std::string j0 = ix(ksegs[si].j0), j1 = si + 1 < ksegs.size() ? ix(ksegs[si + 1].j0) : "lm_n";
      s << "        {\n";
      s << "          const int64_t lm_klo = " << j0 << " - lm_j0 > 0 ? " << j0
        << " - lm_j0 : 0, lm_khi = " << j1 << " - lm_j0 < lm_nj ? " << j1 << " - lm_j0 : lm_nj;\n";
      const int U = light ? static_cast<int>(detail::attention_key_unroll(R, warp)) : 1;
      const std::optional<KeyRows> rows = E > 1 ? wide_rows(a, ksegs, si, E, R) : std::nullopt;
      if (rows) {
        // The segment's rows where they lie: row j at lm_kb + j * stride; the vector loads
        // where its first row is aligned (the row stride a multiple of E, key_rows) -- the
        // same for the whole block, a uniform branch -- lanes across the depth otherwise.
        const int64_t bytes = E * elem_bytes(rows->buffer);
        s << "          int64_t lm_kb;\n";
        s << "          {\n";
        s << "            const int64_t " << j << " = 0, " << p << " = 0; (void)" << j << "; (void)" << p
          << ";\n";
        s << "            lm_kb = " << ix(rows->index) << ";\n";
        s << "          }\n";
        s << "          if (lm_aligned" << bytes << "(b" << rows->buffer << " + lm_kb)) {\n";
        dots_wide(s, *rows, j0, R, E, G);
        s << "          } else {\n";
        dots_across_depth(s, a, ksegs[si], j0, R, U, false, q_cached ? *dk_const : 0, q_steps);
        s << "          }\n";
      } else {
        dots_across_depth(s, a, ksegs[si], j0, R, U, q_regs && light, q_cached ? *dk_const : 0, q_steps);
      }
      s << "        }\n";
    }
    s << "        lm_sync();\n";
    // Each thread then owns one key's score per row (and later its weight, in the same
    // slot).
    s << "        const int64_t " << j << " = lm_j0 + threadIdx.x;\n";
    if (R > 1) {
      softmax_rows(s, R, j, row_decl);
    } else {
      for (int r = 0; r < R; ++r) {
        s << "        float " << nm("lm_new", r) << ", " << nm("lm_lo", r) << ", " << nm("lm_ln", r) << ", "
          << nm("lm_f", r) << ";\n";
        s << "        {\n";
        if (R > 1) s << "          " << row_decl(r) << "\n";
        s << "          float lm_s = lm_ninf;\n";
        s << "          if (" << j << " < lm_je) {\n";
        s << "            const float acc = lm_e[" << r * kThreads << " + threadIdx.x];\n";
        if (a.score.valid()) {
          std::map<const ExprNode*, std::string> memo;
          const std::string v = value(a.score, memo, s, "            ");
          s << "            lm_s = " << v << ";\n";
        } else {
          s << "            lm_s = acc;\n";
        }
        s << "          }\n";
        const std::string mx = nm("lm_mx", r), nw = nm("lm_new", r);
        s << "          const float lm_cmax = lm_block_max_f32(lm_s, lm_part);\n";
        s << "          " << nw << " = lm_max(" << mx << ", lm_cmax);\n";
        s << "          const float lm_alpha = " << mx << " == " << nw
          << " ? 1.0f : " << exp2_of("(" + mx + " - " + nw + ") * lm_c") << ";\n";
        s << "          const float lm_ej = " << j << " < lm_je ? (" << nw
          << " == lm_ninf ? 0.0f : " << exp2_of("(lm_s - " + nw + ") * lm_c") << ") : 0.0f;\n";
        // l_new = 0: nothing visible yet (o and the weights stay 0); NaN propagates.
        s << "          " << nm("lm_lo", r) << " = " << nm("lm_l", r) << " * lm_alpha;\n";
        s << "          " << nm("lm_ln", r) << " = " << nm("lm_lo", r)
          << " + lm_block_sum_f32(lm_ej, lm_part);\n";
        s << "          " << nm("lm_f", r) << " = " << nm("lm_ln", r) << " == 0.0f ? 0.0f : 1.0f / "
          << nm("lm_ln", r) << ";\n";
        s << "          lm_e[" << r * kThreads << " + threadIdx.x] = lm_ej * " << nm("lm_f", r) << ";\n";
        s << "        }\n";
      }
    }
    s << "        lm_sync();\n";
    if (C > 1) {
      attention_values_wide(s, R, C, dvb, own);
    } else {
      // P V: a thread's column d over its key group's keys (every KG-th of the chunk), U_V
      // of them a trip with their loads first; V's segments one after another, so each
      // thread takes its keys in increasing order. A key past the end is neither loaded nor
      // multiplied (0 * inf would be NaN).
      const int uv = static_cast<int>(detail::kAttentionValueUnroll);
      for (int r = 0; r < R; ++r) s << "        float " << nm("lm_sum", r) << " = 0.0f;\n";
      s << "        if (" << d << " < lm_dv) {\n";
      std::vector<std::string> v_seg{ld(a.v, "lm_ov + lm_jq * lm_rv + " + d + " * lm_cv")};
      std::vector<std::string> v_start{"0"};
      for (size_t sgi = 0; sgi < a.v_more.size(); ++sgi) {
        const std::string n = std::to_string(sgi + 1);
        v_seg.push_back(ld(a.v_more[sgi].v,
                           "lm_ov" + n + " + (lm_jq - lm_vs" + n + ") * lm_rv" + n + " + " + d + " * lm_cv"));
        v_start.push_back("lm_vs" + n);
      }
      for (size_t sgi = 0; sgi < v_seg.size(); ++sgi) {
        const std::string end = sgi + 1 < v_seg.size() ? v_start[sgi + 1] : "lm_n";
        s << "          {\n";
        s << "            const int64_t lm_qb = " << v_start[sgi] << " - lm_j0 > 0 ? " << v_start[sgi]
          << " - lm_j0 : 0, lm_qe = " << end << " - lm_j0 < lm_nj ? " << end << " - lm_j0 : lm_nj;\n";
        // The first key of the segment in this thread's group.
        s << "            int64_t lm_q = lm_qb";
        if (kg > 1) s << " + ((lm_kg - lm_qb % " << kg << ") % " << kg << " + " << kg << ") % " << kg;
        s << ";\n";
        s << "            for (; lm_q < lm_qe; lm_q += " << uv * kg << ") {\n";
        for (int u = 0; u < uv; ++u) {
          s << "              float lm_v" << u << " = 0.0f;\n";
          s << "              {\n";
          s << "                const int64_t lm_jq = lm_j0 + lm_q + " << u * kg << ";\n";
          if (u > 0)
            s << "                if (lm_q + " << u * kg << " < lm_qe) ";
          else
            s << "                ";
          s << "lm_v" << u << " = " << v_seg[sgi] << ";\n";
          s << "              }\n";
        }
        for (int u = 0; u < uv; ++u) {
          const std::string q = u == 0 ? "lm_q" : "lm_q + " + std::to_string(u * kg);
          if (u > 0) s << "              if (" << q << " < lm_qe) {\n";
          for (int r = 0; r < R; ++r)
            s << "              " << (u > 0 ? "  " : "") << nm("lm_sum", r) << " = LM_FMA(lm_e[(" << q
              << ") * " << R << " + " << r << "], lm_v" << u << ", " << nm("lm_sum", r) << ");\n";
          if (u > 0) s << "              }\n";
        }
        s << "            }\n";
        s << "          }\n";
      }
      if (kg > 1) {
        s << "        }\n";
        // The key groups' sums meet in the first group's threads, in group order, through
        // lm_e (its weights read by now).
        s << "        lm_sync();\n";
        s << "        if (lm_kg > 0 && " << d << " < lm_dv) {\n";
        for (int r = 0; r < R; ++r)
          s << "          lm_e[((lm_kg - 1) * " << R << " + " << r << ") * " << dvb << " + threadIdx.x % "
            << dvb << "] = " << nm("lm_sum", r) << ";\n";
        s << "        }\n";
        s << "        lm_sync();\n";
        s << "        if (" << own << ") {\n";
        s << "          for (int64_t lm_g = 1; lm_g < " << kg << "; ++lm_g) {\n";
        for (int r = 0; r < R; ++r)
          s << "            " << nm("lm_sum", r) << " = " << nm("lm_sum", r) << " + lm_e[((lm_g - 1) * " << R
            << " + " << r << ") * " << dvb << " + threadIdx.x % " << dvb << "];\n";
        s << "          }\n";
      }
    }
    for (int r = 0; r < R; ++r)
      s << "          " << nm("lm_o", r) << " = " << nm("lm_o", r) << " * (" << nm("lm_ln", r)
        << " == 0.0f ? 1.0f : " << nm("lm_lo", r) << " * " << nm("lm_f", r) << ") + " << nm("lm_sum", r)
        << ";\n";
    s << "        }\n";
    s << "        lm_sync();\n";
    for (int r = 0; r < R; ++r)
      s << "        " << nm("lm_mx", r) << " = " << nm("lm_new", r) << ";\n"
        << "        " << nm("lm_l", r) << " = " << nm("lm_ln", r) << ";\n";
    s << "      }\n";
    if (split) {
      // Each row's range state: o (normalised), then m and l (Attention::Split's layout).
      for (int r = 0; r < R; ++r) {
        s << "      {\n";
        s << "        float* lm_st = b" << a.split->partial << " + ((lm_t0 + " << r << ") * "
          << kAttentionMaxSplits << " + lm_rg) * (lm_dv + 2);\n";
        s << "        if (" << own << ") lm_st[" << d << "] = " << nm("lm_o", r) << ";\n";
        s << "        if (lm_d0 == 0 && threadIdx.x == 0) {\n";
        s << "          lm_st[lm_dv] = " << nm("lm_mx", r) << ";\n";
        s << "          lm_st[lm_dv + 1] = " << nm("lm_l", r) << ";\n";
        s << "        }\n";
        s << "      }\n";
      }
      s << "    }\n";
      // Counted: the block's states stored and fenced, one thread counts them (one count
      // for the block's rows, at its first row); the block that completes the count merges
      // the rows and leaves the count zero for the next call. (The barriers stay uniform:
      // lm_last is the block's.)
      const std::string cnt = "b" + std::to_string(a.split->counter) + "[lm_t0]";
      s << "    lm_threadfence();\n";
      s << "    lm_sync();\n";
      s << "    if (threadIdx.x == 0) lm_last = lm_atomic_add_i32(&" << cnt << ", 1) == lm_ranges - 1;\n";
      s << "    lm_sync();\n";
      s << "    if (lm_last) {\n";
      s << "      lm_threadfence();\n";
      for (int r = 0; r < R; ++r) {
        s << "      {\n";
        s << "        const int64_t lm_t = lm_t0 + " << r << ";\n";
        if (R > 1) s << "        " << row_decl(r) << "\n";
        attention_merge_row(s, "        ", i, d);
        s << "      }\n";
      }
      s << "      if (threadIdx.x == 0) " << cnt << " = 0;\n";
      s << "    }\n";
      s << "    lm_sync();\n";
      s << "  }\n";
      return;
    }
    s << "      if (" << own << ") {\n";
    // l = 0: every key masked (NaN, as the body's exp2(-inf + inf)) or no keys (+0).
    for (int r = 0; r < R; ++r) {
      s << "        {\n";
      if (R > 1) s << "          " << row_decl(r) << "\n";
      attention_store(s, "          ", nm("lm_o", r), nm("lm_l", r), i, d);
      s << "        }\n";
    }
    s << "      }\n    }\n  }\n";
  }

  // Lane's q register of row r, depth step t (lanes across the depth).
  static std::string q_reg(int r, int64_t t) { return "lm_qr" + std::to_string(r) + "_" + std::to_string(t); }

  // K rows read whole: a segment's K expression that is a plain load along the depth (f16
  // or bf16 widened, or f32; no pad), its address affine in the key with a constant row
  // stride that is a multiple of `E` and a depth stride of 1.
  struct KeyRows {
    int buffer = -1;
    Index index;
    int64_t row_stride = 0;
  };
  std::optional<KeyRows> key_rows(const Expr& k, int64_t E) const {
    const Attention& a = *k_.attention;
    const ExprNode* n = &k.node();
    if (n->op == ExprOp::Cast && n->dtype == DType::f32) n = &n->args[0].node();
    if (n->op != ExprOp::Load || n->valid) return std::nullopt;
    const DType dt = p_.buffers[static_cast<size_t>(n->buffer)].dtype;
    if (n->dtype != dt || (dt != DType::f16 && dt != DType::bf16 && dt != DType::f32)) return std::nullopt;
    const std::optional<int64_t> depth = var_stride(n->index, a.depth_var),
                                 row = var_stride(n->index, a.key_var);
    if (!depth || *depth != 1 || !row || *row % E != 0) return std::nullopt;
    return KeyRows{n->buffer, n->index, *row};
  }

  // K segment `si`'s rows where it takes lanes across keys with E elements a lane: light,
  // read whole (key_rows), of E's element size, and not of fewer keys than a warp's trip
  // takes -- a decode step's new row keeps lanes across the depth, as the vector path and
  // its fallback would be twice the source, and NVRTC's time, for one key.
  std::optional<KeyRows> wide_rows(const Attention& a, const std::vector<KeyExprSegment>& ksegs, size_t si,
                                   int64_t E, int R) const {
    const KeyExprSegment& sg = ksegs[si];
    if (expr_nodes(sg.k) > kLightKeyNodes) return std::nullopt;
    const std::optional<KeyRows> rows = key_rows(sg.k, E);
    if (!rows ||
        detail::attention_key_vector(*a.dk.as_constant(), elem_bytes(rows->buffer), R, arch_.warp) != E)
      return std::nullopt;
    const int64_t G = *a.dk.as_constant() / E;
    const Index keys = (si + 1 < ksegs.size() ? ksegs[si + 1].j0 : a.n) - sg.j0;
    const std::optional<int64_t> few = keys.as_constant();
    if (few && *few < detail::attention_wide_key_unroll(R, G) * (arch_.warp / G)) return std::nullopt;
    return rows;
  }

  // Element e of `v`, one vector load (an lm_u32x2 or lm_u32x4) of f32, f16 or bf16, as
  // f32: a float's bits, or a half of a 32-bit word, the lower first.
  static std::string vector_element(const std::string& v, int64_t e, DType dt) {
    static const char* comp = "xyzw";
    std::string w = v;
    w.append(".").push_back(comp[dt == DType::f32 ? e : e / 2]);
    if (dt == DType::f32) return "lm_u2f(" + w + ")";
    std::string half = "((uint16_t)(";
    half.append(w).append(" >> ").append(std::to_string(16 * (e % 2))).append("))");
    return convert(half, dt, DType::f32);
  }

  int64_t elem_bytes(int buffer) const {
    return static_cast<int64_t>(dtype_size(p_.buffers[static_cast<size_t>(buffer)].dtype));
  }

  // E for the attention's lanes across keys (detail::attention_key_vector) where some K
  // segment takes them (wide_rows) -- every such segment of one element size -- else 1.
  int64_t key_vector(const Attention& a, const std::vector<KeyExprSegment>& ksegs, int64_t dk, int R) const {
    std::optional<int64_t> E;
    for (size_t si = 0; si < ksegs.size(); ++si) {
      const std::optional<KeyRows> rows = key_rows(ksegs[si].k, 1);
      if (!rows) continue;
      const int64_t e = detail::attention_key_vector(dk, elem_bytes(rows->buffer), R, arch_.warp);
      if (e == 1 || !wide_rows(a, ksegs, si, e, R)) continue;
      if (E && *E != e) return 1;
      E = e;
    }
    return E.value_or(1);
  }

  // A K segment's dots with lanes across keys (detail::attention_key_vector): the G = dk / E
  // lanes of a group take one key, lane l its E depths from l E in one vector load and its
  // q from registers (lm_qw), so a warp instruction reads warp / G whole rows; U keys a
  // group a trip (a warp's U x warp / G keys consecutive), their loads first, each at an
  // immediate offset from the trip's first row; a key past the segment's end is not loaded
  // (its sums are zeros, not stored). The lanes' U x R sums
  // meet over the group (warp_sums on G lanes). The trips' count is the warp's, so the
  // shuffles stay in warp-uniform control flow.
  void dots_wide(std::ostringstream& s, const KeyRows& kr, const std::string& j0, int R, int64_t E,
                 int64_t G) {
    const int warp = arch_.warp, warps = kThreads / warp;
    const int64_t KW = warp / G;
    const int U = static_cast<int>(detail::attention_wide_key_unroll(R, G));
    const int dots = static_cast<int>(detail::pow2_at_least(U * R));
    const DType dt = p_.buffers[static_cast<size_t>(kr.buffer)].dtype;
    const bool wide = E * elem_bytes(kr.buffer) == 16;
    const std::string ind = "            ", b = "b" + std::to_string(kr.buffer);
    s << ind << "const int64_t lm_g = threadIdx.x % " << warp << " / " << G << ", lm_gd = threadIdx.x % " << G
      << " * " << E << ";\n";
    s << ind << "for (int64_t lm_kk = lm_klo + (int64_t)(threadIdx.x / " << warp << ") * " << U * KW
      << "; lm_kk < lm_khi; lm_kk += " << U * KW * warps << ") {\n";
    // The trip's first row; key u's a constant number of rows on (an immediate offset of
    // one address), loaded where it is before the segment's end (its lanes' sums unused).
    s << ind << "  const auto lm_kp = " << b << " + lm_kb + (lm_j0 + lm_kk + lm_g - (" << j0 << ")) * "
      << kr.row_stride << " + lm_gd;\n";
    for (int u = 0; u < U; ++u) {
      s << ind << "  " << (wide ? "lm_u32x4" : "lm_u32x2") << " lm_kw" << u << " = {};\n";
      s << ind << "  if (lm_kk + " << u * KW << " + lm_g < lm_khi) lm_kw" << u << " = "
        << (wide ? "lm_ld128(" : "lm_ld64(") << "lm_kp + " << u * KW * kr.row_stride << ");\n";
    }
    for (int x = 0; x < dots; ++x) s << ind << "  float lm_dot" << x << " = 0.0f;\n";
    for (int u = 0; u < U; ++u)
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = vector_element("lm_kw" + std::to_string(u), e, dt);
        s << ind << "  {\n" << ind << "    const float lm_x = " << x << ";\n";
        for (int r = 0; r < R; ++r)
          s << ind << "    lm_dot" << u * R + r << " = LM_FMA(lm_qw" << r << "_" << e << ", lm_x, lm_dot"
            << u * R + r << ");\n";
        s << ind << "  }\n";
      }
    warp_sums(s, ind + "  ", U * R, static_cast<int>(G), R, "lm_kk + lm_g", KW);
    s << ind << "}\n";
  }

  // A K segment's dots with a warp per key, its lanes across the depth, so a key's row of
  // K is read by consecutive lanes (coalesced) and the lanes' partial dot products meet in
  // a warp sum; a warp takes U keys a trip (every warp's U-th), all their loads issued
  // before the first product waits on one -- a key past the segment's end repeats its last
  // key, whose dot is not stored. The trips' count is the same for every lane of a warp,
  // so the shuffles stay in warp-uniform control flow. `unrolled`: the lane's depths
  // unrolled, q from its registers (lm_qr); else a loop, q from lm_qs (dk > 0: cached) or
  // computed.
  void dots_across_depth(std::ostringstream& s, const Attention& a, const KeyExprSegment& seg,
                         const std::string& j0, int R, int U, bool unrolled, int64_t dk, int64_t q_steps) {
    const int warp = arch_.warp, warps = kThreads / warp;
    const int dots = static_cast<int>(detail::pow2_at_least(U * R));
    const std::string j = "v" + std::to_string(a.key_var), p = "v" + std::to_string(a.depth_var);
    auto nm = [](const char* base, int r) { return std::string(base) + std::to_string(r); };
    s << "          for (int64_t lm_kk = lm_klo + threadIdx.x / " << warp
      << "; lm_kk < lm_khi; lm_kk += " << U * warps << ") {\n";
    for (int u = 0; u < U; ++u)
      s << "            const int64_t lm_k" << u << " = lm_kk + " << u * warps << " < lm_khi ? lm_kk + "
        << u * warps << " : lm_khi - 1;\n";
    for (int x = 0; x < dots; ++x) s << "            float " << nm("lm_dot", x) << " = 0.0f;\n";
    // q and k are expressions over the row / key and depth variables (a RoPE prologue
    // is computed here, kernel_ir.hpp); q comes from the lane's registers or lm_qs when
    // it was cached.
    for (int u = 0; u < U; ++u) {
      s << "            {\n";
      s << "              const int64_t " << j << " = lm_j0 + lm_k" << u << " - (" << j0 << "); (void)" << j
        << ";\n";
      auto dot = [&](int r) { return nm("lm_dot", u * R + r); };
      if (unrolled) {
        for (int64_t t = 0; t < q_steps; ++t) {
          s << "              {\n"
            << "                const int64_t " << p << " = threadIdx.x % " << warp << " + " << t * warp
            << ";\n";
          const bool guard = (t + 1) * warp > dk;
          if (guard) s << "                if (" << p << " < lm_dk) {\n";
          const std::string in = guard ? "                  " : "                ";
          std::map<const ExprNode*, std::string> memo;
          const std::string kv = value(seg.k, memo, s, in);
          for (int r = 0; r < R; ++r)
            s << in << dot(r) << " = LM_FMA(" << q_reg(r, t) << ", " << kv << ", " << dot(r) << ");\n";
          if (guard) s << "                }\n";
          s << "              }\n";
        }
      } else {
        s << "              for (int64_t " << p << " = threadIdx.x % " << warp << "; " << p << " < lm_dk; "
          << p << " += " << warp << ") {\n";
        std::map<const ExprNode*, std::string> memo;
        const std::string kv = value(seg.k, memo, s, "                ");
        for (int r = 0; r < R; ++r) {
          const std::string qv = dk > 0 ? "lm_qs[" + std::to_string(r * dk) + " + " + p + "]"
                                        : value(a.q, memo, s, "                ");
          s << "                " << dot(r) << " = LM_FMA(" << qv << ", " << kv << ", " << dot(r) << ");\n";
        }
        s << "              }\n";
      }
      s << "            }\n";
    }
    warp_sums(s, "            ", U * R, warp, R, "lm_kk", warps);
    s << "          }\n";
  }

  // The n = U x R dot products lm_dot0.. of each lane (key u's row r in lm_dot{u R + r})
  // summed over groups of `lanes` consecutive lanes (the warp, or a key's lanes with
  // lanes across keys), each stored to lm_e[r * kThreads + key] with key = `key` + u
  // `step` when it is before lm_khi. n = 1 over the warp: the warp sum. Otherwise (padded
  // with zeros to a power of two P <= lanes): the first log2(P) butterfly levels exchange
  // half of the lane's values each (the lane whose mask bit is set keeps the upper half,
  // its partner the lower), so a level costs half as many shuffles as the values it has
  // left, until one is left per lane; the remaining levels are the sum's. Every addition
  // pairs the same two lanes' partial sums as n separate sums would -- the same results,
  // in P - 1 + log2(lanes / P) shuffles instead of n log2(lanes). Value x ends in the
  // group's lanes x lanes / P .. (x + 1) lanes / P - 1.
  void warp_sums(std::ostringstream& s, const std::string& ind, int n, int lanes, int R,
                 const std::string& key, int64_t step) {
    const int warp = arch_.warp;
    if (n == 1 && lanes == warp) {
      s << ind << "lm_dot0 = lm_warp_sum_f32(lm_dot0);\n";
      s << ind << "if (threadIdx.x % " << warp << " == 0) lm_e[" << key << "] = lm_dot0;\n";
      return;
    }
    const int P = static_cast<int>(detail::pow2_at_least(n));
    s << ind << "{\n";
    s << ind << "  const int lm_lane = (int)(threadIdx.x % " << warp << ");\n";
    int mask = lanes / 2;
    for (int c = P; c > 1; c /= 2, mask /= 2) {
      s << ind << "  {\n";
      s << ind << "    const bool lm_hi = (lm_lane & " << mask << ") != 0;\n";
      for (int q = 0; q < c / 2; ++q) {
        const std::string lo = "lm_dot" + std::to_string(q), hi = "lm_dot" + std::to_string(q + c / 2);
        s << ind << "    const float lm_send" << q << " = lm_hi ? " << lo << " : " << hi << ";\n";
        s << ind << "    " << lo << " = (lm_hi ? " << hi << " : " << lo << ") + lm_shfl_xor_f32(lm_send" << q
          << ", " << mask << ");\n";
      }
      s << ind << "  }\n";
    }
    for (; mask > 0; mask /= 2)
      s << ind << "  lm_dot0 = lm_dot0 + lm_shfl_xor_f32(lm_dot0, " << mask << ");\n";
    const int span = lanes / P;
    s << ind << "  const int lm_x = lm_lane % " << lanes << " / " << span << ";\n";
    s << ind << "  const int64_t lm_key = " << key << " + (int64_t)(lm_x / " << R << ") * " << step << ";\n";
    s << ind << "  if (lm_lane % " << span << " == 0 && lm_x < " << n << " && lm_key < lm_khi) lm_e[(lm_x % "
      << R << ") * " << kThreads << " + lm_key] = lm_dot0;\n";
    s << ind << "}\n";
  }

  // The rows an attention block reduces together in softmax_rows.
  int softmax_batch(int R) const {
    return static_cast<int>(detail::attention_softmax_batch(R, kThreads, arch_.warp));
  }

  // The online softmax's step for R > 1 rows: each thread's key score per row
  // (lm_s0..), the chunk's maxima, the weights, their sums, the rows' states -- with
  // each block reduction taking softmax_batch(R) rows at once (block_rows): the rows'
  // values meet in one transposed warp sum (as warp_sums: half of a lane's values
  // exchanged a level), the warps' partials, a row's in consecutive lanes, in one
  // warp reduction of log2(warps) levels, two barriers for them all where each row took
  // two.
  void softmax_rows(std::ostringstream& s, int R, const std::string& j,
                    const std::function<std::string(int)>& row_decl) {
    const Attention& a = *k_.attention;
    auto nm = [](const char* base, int r) { return std::string(base) + std::to_string(r); };
    for (int r = 0; r < R; ++r) {
      s << "        float " << nm("lm_s", r) << " = lm_ninf, " << nm("lm_new", r) << ", " << nm("lm_lo", r)
        << ", " << nm("lm_ln", r) << ", " << nm("lm_f", r) << ", " << nm("lm_ej", r) << ", " << nm("lm_cm", r)
        << ", " << nm("lm_cs", r) << ";\n";
      s << "        if (" << j << " < lm_je) {\n";
      s << "          " << row_decl(r) << "\n";
      s << "          const float acc = lm_e[" << r * kThreads << " + threadIdx.x];\n";
      if (a.score.valid()) {
        std::map<const ExprNode*, std::string> memo;
        const std::string v = value(a.score, memo, s, "          ");
        s << "          " << nm("lm_s", r) << " = " << v << ";\n";
      } else {
        s << "          " << nm("lm_s", r) << " = acc;\n";
      }
      s << "        }\n";
    }
    block_rows(s, R, "lm_s", "lm_cm", true);
    for (int r = 0; r < R; ++r) {
      const std::string mx = nm("lm_mx", r), nw = nm("lm_new", r);
      s << "        " << nw << " = lm_max(" << mx << ", " << nm("lm_cm", r) << ");\n";
      s << "        " << nm("lm_lo", r) << " = " << nm("lm_l", r) << " * (" << mx << " == " << nw
        << " ? 1.0f : " << exp2_of("(" + mx + " - " + nw + ") * lm_c") << ");\n";
      // (Built with append: GCC 12 warns falsely (-Wrestrict) on an operator+ chain here.)
      std::string arg = "(";
      arg.append(nm("lm_s", r)).append(" - ").append(nw).append(") * lm_c");
      s << "        " << nm("lm_ej", r) << " = " << j << " < lm_je ? (" << nw
        << " == lm_ninf ? 0.0f : " << exp2_of(arg) << ") : 0.0f;\n";
    }
    block_rows(s, R, "lm_ej", "lm_cs", false);
    // l_new = 0: nothing visible yet (o and the weights stay 0); NaN propagates.
    for (int r = 0; r < R; ++r) {
      s << "        " << nm("lm_ln", r) << " = " << nm("lm_lo", r) << " + " << nm("lm_cs", r) << ";\n";
      s << "        " << nm("lm_f", r) << " = " << nm("lm_ln", r) << " == 0.0f ? 0.0f : 1.0f / "
        << nm("lm_ln", r) << ";\n";
      s << "        lm_e[threadIdx.x * " << R << " + " << r << "] = " << nm("lm_ej", r) << " * "
        << nm("lm_f", r) << ";\n";
    }
  }

  // out0.. = the block's maximum (max) or sum of in0.. for each of R rows, every thread
  // holding every row's result, in batches of softmax_batch(R) rows through lm_part.
  void block_rows(std::ostringstream& s, int R, const std::string& in, const std::string& out, bool max) {
    const int W = arch_.warp, warps = kThreads / W, B = softmax_batch(R);
    const std::string id = max ? "lm_ninf" : "0.0f";
    auto op = [&](const std::string& x, const std::string& y) {
      return max ? "lm_max(" + x + ", " + y + ")" : x + " + " + y;
    };
    for (int r0 = 0; r0 < R; r0 += B) {
      const int n = std::min(B, R - r0), P = static_cast<int>(detail::pow2_at_least(n)), span = W / P;
      s << "        {\n";
      s << "          const int lm_lane = (int)(threadIdx.x % " << W << "), lm_wp = (int)(threadIdx.x / " << W
        << ");\n";
      for (int x = 0; x < P; ++x)
        s << "          float lm_a" << x << " = " << (x < n ? in + std::to_string(r0 + x) : id) << ";\n";
      int mask = W / 2;
      for (int c = P; c > 1; c /= 2, mask /= 2) {
        s << "          {\n";
        s << "            const bool lm_hi = (lm_lane & " << mask << ") != 0;\n";
        for (int q = 0; q < c / 2; ++q) {
          const std::string lo = "lm_a" + std::to_string(q), hi = "lm_a" + std::to_string(q + c / 2);
          s << "            const float lm_send" << q << " = lm_hi ? " << lo << " : " << hi << ";\n";
          s << "            " << lo << " = "
            << op("(lm_hi ? " + hi + " : " + lo + ")",
                  "lm_shfl_xor_f32(lm_send" + std::to_string(q) + ", " + std::to_string(mask) + ")")
            << ";\n";
        }
        s << "          }\n";
      }
      for (; mask > 0; mask /= 2)
        s << "          lm_a0 = " << op("lm_a0", "lm_shfl_xor_f32(lm_a0, " + std::to_string(mask) + ")")
          << ";\n";
      // Row x's warp partial is in lanes x * span ..; the partials of row x go to lanes
      // x * warps .. of the reducing warp.
      s << "          if (lm_lane % " << span << " == 0 && lm_lane / " << span << " < " << n
        << ") lm_part[(lm_lane / " << span << ") * " << warps << " + lm_wp] = lm_a0;\n";
      s << "          lm_sync();\n";
      s << "          float lm_b = lm_lane < " << n * warps << " ? lm_part[lm_lane] : " << id << ";\n";
      for (int m = warps / 2; m > 0; m /= 2)
        s << "          lm_b = " << op("lm_b", "lm_shfl_xor_f32(lm_b, " + std::to_string(m) + ")") << ";\n";
      s << "          if (lm_wp == 0 && lm_lane % " << warps << " == 0 && lm_lane / " << warps << " < " << n
        << ") lm_part[" << n * warps << " + lm_lane / " << warps << "] = lm_b;\n";
      s << "          lm_sync();\n";
      for (int x = 0; x < n; ++x)
        s << "          " << out << r0 + x << " = lm_part[" << n * warps + x << "];\n";
      s << "        }\n";
    }
  }

  // P V's columns a thread for attention `a` (detail::attention_value_columns): more than
  // one where every V segment's columns are contiguous (a column stride of 1) and of one
  // f16, bf16 or f32 buffer type.
  int64_t value_columns(const Attention& a, std::optional<int64_t> dv, int64_t dvb, int R,
                        int64_t other_shared) const {
    if (!dv) return 1;
    std::optional<DType> dt;
    for (const KeySegment& sg : value_segments(a)) {
      const std::optional<int64_t> cs = sg.v.col_stride.as_constant();
      if (!cs || *cs != 1) return 1;
      const DType t = p_.buffers[static_cast<size_t>(sg.v.buffer)].dtype;
      if (t != DType::f16 && t != DType::bf16 && t != DType::f32) return 1;
      if (dt && *dt != t) return 1;
      dt = t;
    }
    return detail::attention_value_columns(*dv, dvb, dt == DType::f32 ? 4 : 2, R, kThreads, other_shared);
  }

  // P V with C columns a thread (value_columns): the pass's dvb columns taken by dvb / C
  // threads, the block's threads in kThreads C / dvb key groups (every KG-th key of the
  // chunk), U_V keys a trip with their loads first, one 8-byte load for a key's C columns
  // where the segment's first element is 8-byte aligned and its row stride a multiple of
  // C (the same for the whole block: a uniform branch) -- C scalar loads otherwise, a key
  // a trip -- each key's weights read once for all C columns. The key groups' R x C
  // sums meet in lm_e (every weight read by then), and each column's owner (`own`, a column
  // a thread as the softmax state's) adds them in group order. Leaves `own`'s block open
  // with lm_sum0.. set, as the one-column path does.
  void attention_values_wide(std::ostringstream& s, int R, int64_t C, int64_t dvb, const std::string& own) {
    const Attention& a = *k_.attention;
    const int64_t ct = dvb / C, G = kThreads / ct;
    auto sum = [](int r, int64_t c) { return "lm_sum" + std::to_string(r) + "_" + std::to_string(c); };
    for (int r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) s << "        float " << sum(r, c) << " = 0.0f;\n";
    s << "        {\n";
    s << "          const int64_t lm_pc = threadIdx.x % " << ct << " * " << C << ", lm_pg = threadIdx.x / "
      << ct << ";\n";
    struct Seg {
      const MatrixView* v;
      std::string off, rs, start;
    };
    std::vector<Seg> segs{{&a.v, "lm_ov", "lm_rv", "0"}};
    for (size_t sgi = 0; sgi < a.v_more.size(); ++sgi) {
      const std::string n = std::to_string(sgi + 1);
      segs.push_back({&a.v_more[sgi].v, "lm_ov" + n, "lm_rv" + n, "lm_vs" + n});
    }
    for (size_t si = 0; si < segs.size(); ++si) {
      const Seg& sg = segs[si];
      const DType dt = p_.buffers[static_cast<size_t>(sg.v->buffer)].dtype;
      const std::string b = "b" + std::to_string(sg.v->buffer);
      const std::string end = si + 1 < segs.size() ? segs[si + 1].start : "lm_n";
      const std::string row = sg.start == "0" ? "lm_jq" : "(lm_jq - " + sg.start + ")";
      s << "          {\n";
      s << "            const int64_t lm_qb = " << sg.start << " - lm_j0 > 0 ? " << sg.start
        << " - lm_j0 : 0, lm_qe = " << end << " - lm_j0 < lm_nj ? " << end << " - lm_j0 : lm_nj;\n";
      s << "            const int64_t lm_q0 = lm_qb + ((lm_pg - lm_qb % " << G << ") % " << G << " + " << G
        << ") % " << G << ";\n";
      // vec: U_V keys a trip; the scalar loads (an unaligned V, rare) a key a trip, short.
      auto loop = [&](bool vec, const std::string& ind) {
        const int uv = vec ? static_cast<int>(detail::kAttentionWideValueUnroll) : 1;
        s << ind << "for (int64_t lm_q = lm_q0; lm_q < lm_qe; lm_q += " << uv * G << ") {\n";
        const std::string in = ind + "  ";
        for (int u = 0; u < uv; ++u) {
          const std::string un = std::to_string(u);
          if (vec)
            s << in << "lm_u32x2 lm_w" << un << " = {0u, 0u};\n";
          else
            for (int64_t c = 0; c < C; ++c) s << in << "float lm_v" << un << "_" << c << " = 0.0f;\n";
          s << in << "{\n";
          s << in << "  const int64_t lm_jq = lm_j0 + lm_q + " << u * G << ";\n";
          std::string guard = u > 0 ? "if (lm_q + " + std::to_string(u * G) + " < lm_qe) " : "";
          const std::string at = sg.off + " + " + row + " * " + sg.rs + " + ";
          if (vec) {
            s << in << "  " << guard << "lm_w" << un << " = lm_ld64(" << b << " + " << at
              << "lm_d0 + lm_pc);\n";
          } else {
            if (!guard.empty()) s << in << "  " << guard << "{\n";
            for (int64_t c = 0; c < C; ++c)
              s << in << (guard.empty() ? "  " : "    ") << "lm_v" << un << "_" << c << " = "
                << convert(b + "[" + at + "(lm_d0 + lm_pc + " + std::to_string(c) + ") * lm_cv]", dt,
                           DType::f32)
                << ";\n";
            if (!guard.empty()) s << in << "  }\n";
          }
          s << in << "}\n";
        }
        for (int u = 0; u < uv; ++u) {
          const std::string q = u == 0 ? "lm_q" : "lm_q + " + std::to_string(u * G);
          const std::string un = std::to_string(u);
          s << in << (u > 0 ? "if (" + q + " < lm_qe) " : "") << "{\n";
          if (R % 4 == 0) {
            for (int r = 0; r < R; r += 4) {
              const std::string pw = "lm_pw" + std::to_string(r / 4);
              s << in << "  const lm_f32x4 " << pw << " = lm_lds128f(lm_e + (" << q << ") * " << R << " + "
                << r << ");\n";
              for (int c = 0; c < 4; ++c)
                s << in << "  const float lm_p" << r + c << " = " << pw << "."
                  << "xyzw"[c] << ";\n";
            }
          } else {
            for (int r = 0; r < R; ++r)
              s << in << "  const float lm_p" << r << " = lm_e[(" << q << ") * " << R << " + " << r << "];\n";
          }
          for (int64_t c = 0; c < C; ++c) {
            std::string x;
            if (!vec) {
              x = "lm_v" + un + "_" + std::to_string(c);
            } else {
              x = vector_element("lm_w" + un, c, dt);
            }
            s << in << "  {\n" << in << "    const float lm_x = " << x << ";\n";
            for (int r = 0; r < R; ++r)
              s << in << "    " << sum(r, c) << " = LM_FMA(lm_p" << r << ", lm_x, " << sum(r, c) << ");\n";
            s << in << "  }\n";
          }
          s << in << "}\n";
        }
        s << ind << "}\n";
      };
      s << "            if (lm_aligned8(" << b << " + " << sg.off << ") && " << sg.rs << " % " << C
        << " == 0) {\n";
      loop(true, "              ");
      s << "            } else {\n";
      loop(false, "              ");
      s << "            }\n";
      s << "          }\n";
    }
    s << "          lm_sync();\n";
    for (int r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c)
        s << "          lm_e[(lm_pg * " << R << " + " << r << ") * " << dvb << " + lm_pc + " << c
          << "] = " << sum(r, c) << ";\n";
    s << "        }\n";
    s << "        lm_sync();\n";
    s << "        if (" << own << ") {\n";
    for (int r = 0; r < R; ++r)
      s << "          float lm_sum" << r << " = lm_e[" << r * dvb << " + threadIdx.x % " << dvb << "];\n";
    s << "          for (int64_t lm_g = 1; lm_g < " << G << "; ++lm_g) {\n";
    for (int r = 0; r < R; ++r)
      s << "            lm_sum" << r << " = lm_sum" << r << " + lm_e[(lm_g * " << R << " + " << r << ") * "
        << dvb << " + threadIdx.x % " << dvb << "];\n";
    s << "          }\n";
  }

  // Rows per block of attention `a` (attention() above): the rows of one batch point take
  // attention_block_rows(m) to a block (cost/gpu_launch.hpp) -- when q is cached in
  // shared memory and nothing but q, the scores and the epilogue depends on the row: K,
  // V and the output's placement.
  static int block_rows(const Attention& a, bool q_cached) {
    if (!q_cached) return 1;
    const std::optional<int64_t> m = a.m.as_constant();
    if (!m || *m < 2) return 1;
    const int64_t row = a.row_var;
    for (const KeyExprSegment& sg : key_segments(a))
      if (expr_uses_var(sg.k, row)) return 1;
    for (const KeySegment& sg : value_segments(a))
      if (uses_var(sg.v.offset, row) || uses_var(sg.v.row_stride, row) || uses_var(sg.v.col_stride, row))
        return 1;
    if (uses_var(a.out.offset, row) || uses_var(a.out.row_stride, row)) return 1;
    return static_cast<int>(detail::attention_block_rows(*m));
  }

  // Distinct nodes of expression `e`.
  static std::size_t expr_nodes(const Expr& e) {
    std::set<const ExprNode*> seen;
    std::function<void(const Expr&)> walk = [&](const Expr& x) {
      if (!x.valid() || !seen.insert(&x.node()).second) return;
      for (const Expr& arg : x.node().args) walk(arg);
    };
    walk(e);
    return seen.size();
  }

  // Whether `e` reads loop variable `var` (a load's address or validity, an index value).
  static bool expr_uses_var(const Expr& e, int64_t var) {
    std::set<const ExprNode*> seen;
    std::function<bool(const Expr&)> walk = [&](const Expr& x) {
      if (!x.valid() || !seen.insert(&x.node()).second) return false;
      const ExprNode& n = x.node();
      if ((n.op == ExprOp::Load || n.op == ExprOp::IndexValue) && uses_var(n.index, var)) return true;
      if (n.valid && uses_var(*n.valid, var)) return true;
      for (const Expr& arg : n.args)
        if (walk(arg)) return true;
      return false;
    };
    return walk(e);
  }

  // The attention's output element: acc = `o` normalised by `total` (0: NaN, every key
  // masked, or +0, no keys), then the epilogue, stored at row `i`, column `d` of out.
  void attention_store(std::ostringstream& s, const std::string& ind, const std::string& o,
                       const std::string& total, const std::string& i, const std::string& d) {
    const Attention& a = *k_.attention;
    s << ind << "const float acc = " << total << " != 0.0f ? " << o
      << " : lm_n == 0 ? 0.0f : lm_u2f(0x7fc00000u);\n";
    std::string v = "acc";
    if (a.epilogue.valid()) {
      std::map<const ExprNode*, std::string> memo;
      v = value(a.epilogue, memo, s, ind);
      const DType od = p_.buffers[static_cast<size_t>(a.out.buffer)].dtype;
      if (a.epilogue.dtype() != od) v = convert(v, a.epilogue.dtype(), od);
    }
    s << ind << "b" << a.out.buffer << "[lm_oo + " << i << " * lm_ro + " << d << "] = " << v << ";\n";
  }

  // Row lm_t's merge of its ranges' states (Attention::Split), writing the output's row
  // `i` (columns `d`, over the block's threads): the last range block's, which reads the
  // states other blocks stored through volatile loads (never an L1 line of this SM's).
  void attention_merge_row(std::ostringstream& s, const std::string& ind, const std::string& i,
                           const std::string& d) {
    const Attention& a = *k_.attention;
    s << ind << "const volatile float* lm_st = b" << a.split->partial << " + lm_t * " << kAttentionMaxSplits
      << " * (lm_dv + 2);\n";
    s << ind << "float lm_big = lm_ninf;\n";
    s << ind << "for (int64_t lm_rg = 0; lm_rg < lm_ranges; ++lm_rg) {\n";
    s << ind << "  const float lm_mr = lm_st[lm_rg * (lm_dv + 2) + lm_dv];\n";
    s << ind << "  lm_big = (lm_mr > lm_big || lm_mr != lm_mr) ? lm_mr : lm_big;\n";
    s << ind << "}\n";
    // A range's weight l_r exp2((m_r - M) c): 0 for a range with nothing visible.
    const std::string w =
        "(lm_st[lm_rg * (lm_dv + 2) + lm_dv + 1] * (lm_st[lm_rg * (lm_dv + 2) + lm_dv] == lm_ninf "
        "? 0.0f : " +
        exp2_of("(lm_st[lm_rg * (lm_dv + 2) + lm_dv] - lm_big) * lm_c") + "))";
    s << ind << "float lm_tot = 0.0f;\n";
    s << ind << "for (int64_t lm_rg = 0; lm_rg < lm_ranges; ++lm_rg) lm_tot = lm_tot + " << w << ";\n";
    s << ind << "const float lm_f = lm_tot == 0.0f ? 0.0f : 1.0f / lm_tot;\n";
    s << ind << "for (int64_t " << d << " = threadIdx.x; " << d << " < lm_dv; " << d << " += " << kThreads
      << ") {\n";
    s << ind << "  float lm_o = 0.0f;\n";
    s << ind << "  for (int64_t lm_rg = 0; lm_rg < lm_ranges; ++lm_rg)\n";
    s << ind << "    lm_o = lm_o + (" << w << " * lm_f) * lm_st[lm_rg * (lm_dv + 2) + " << d << "];\n";
    // L = 0: every key masked (NaN, as the body) or no keys (+0).
    attention_store(s, ind + "  ", "lm_o", "lm_tot", i, d);
    s << ind << "}\n";
  }

  // A GEMM operand element as f32 (half operands decoded).
  std::string operand(int buffer, const std::string& idx) const {
    std::string x = "b";
    x.append(std::to_string(buffer)).append("[").append(idx).append("]");
    return convert(x, p_.buffers[static_cast<size_t>(buffer)].dtype, DType::f32);
  }

  // f16/bf16 operands on a matrix engine; one skeleton (k-pair shared tiles, staging, the
  // k loop, the epilogue) for both dialects, which differ only in the lane layouts of
  // their fragment helpers (gpu_prelude.hpp):
  //  * CUDA sm_80+: 8 warps (2 x 4) per block, each a (bm/2) x (bn/4) warp tile of m16n8k16
  //    tensor-core products through lm_mma_m16n8k16_*;
  //  * CDNA (gfx908/gfx90a, `Mfma`): 4 wavefronts of 64 (2 x 2), each a (bm/2) x (bn/2) wave
  //    tile of 16x16x16 MFMA products through lm_mfma_16x16x16_*;
  //  * RDNA3 (gfx11, `Wmma`): 4 wavefronts of 32 (2 x 2, a block of 128 threads), each a
  //    (bm/2) x (bn/2) wave tile of 16x16x16 WMMA products through lm_wmma_16x16x16_*.
  // The shared tiles hold k-pairs as 32-bit words -- A as [m][k/2], B as [n][k/2] -- so
  // every fragment register is one aligned word; BK is 32 (two k16 steps per tile).
  // Out-of-range rows, columns and k are zero-filled.
  enum class MatrixIsa { MmaSync, Mfma, Wmma };
  void gemm_matrix(std::ostringstream& s, LaunchShape& shape, int64_t bm, int64_t bn, DType dt, bool v128,
                   MatrixIsa isa) {
    const Gemm& g = *k_.gemm;
    const bool mfma = isa == MatrixIsa::Mfma, wmma = isa == MatrixIsa::Wmma;
    // BK = 32 halves = 16 words; AMD's 16x16 products tile a (bm/2) x (bn/2) wave tile
    const int64_t mt = bm / 2 / 16, nt = isa == MatrixIsa::MmaSync ? bn / 4 / 8 : bn / 2 / 16, words = 16;
    // accumulators a lane holds per product; A and B words a lane loads per k16 step
    const int acc = wmma ? 8 : 4, a_words = wmma ? 8 : mfma ? 2 : 4, b_words = wmma ? 8 : 2;
    const int threads = wmma ? 128 : kThreads;
    const Index batches = product(k_.loops);
    const std::string half = dt == DType::bf16 ? "bf16" : "f16";
    const char* isa_name = wmma ? "wmma" : mfma ? "mfma" : "mma";
    const std::string op = std::string(wmma   ? "lm_wmma_16x16x16_"
                                       : mfma ? "lm_mfma_16x16x16_"
                                              : "lm_mma_m16n8k16_") +
                           half;
    shape.sync = true;
    shape.block[0] = threads;
    shape.static_shared = static_cast<int>((bm + bn) * words * 4);
    shape.min_blocks = mt * nt > 4 ? 1 : 2;
    shape.schedule = std::string(wmma   ? "gemm, matrix cores (wmma 16x16x16 "
                                 : mfma ? "gemm, matrix cores (mfma 16x16x16 "
                                        : "gemm, tensor cores (mma.sync m16n8k16 ") +
                     half + "), tiles " + std::to_string(bm) + "x" + std::to_string(bn) + "x32, " +
                     (isa == MatrixIsa::MmaSync ? "8 warps of " : "4 wavefronts of ") + std::to_string(mt) +
                     "x" + std::to_string(nt) + " " + isa_name + " tiles" +
                     (v128 ? ", 128-bit staging loads" : "");
    shape.grid[0] = ceil_div(g.n, bn);
    shape.grid[1] = capped(ceil_div(g.m, bm), 65535);
    shape.grid[2] = capped(batches, 65535);
    s << "  __shared__ uint32_t lm_a2[" << bm * words << "];  /* [m][k/2]: k pairs */\n";
    s << "  __shared__ uint32_t lm_b2[" << bn * words << "];  /* [n][k/2] */\n";
    s << "  const int64_t lm_m = " << ix(g.m) << ", lm_n = " << ix(g.n) << ", lm_k = " << ix(g.k)
      << ", lm_batches = " << ix(batches) << ";\n";
    if (mfma) {  // 2 x 2 wavefronts; lane = 16 g + r
      s << "  const unsigned int lm_w = threadIdx.x / 64, lm_lane = threadIdx.x % 64, lm_r = lm_lane % 16, lm_g = lm_lane / 16;\n";
      s << "  const int lm_wm = (lm_w / 2) * " << bm / 2 << ", lm_wn = (lm_w % 2) * " << bn / 2 << ";\n";
    } else if (wmma) {  // 2 x 2 wavefronts of 32; lane = 16 h + r
      s << "  const unsigned int lm_w = threadIdx.x / 32, lm_lane = threadIdx.x % 32, lm_r = lm_lane % 16, "
           "lm_h = lm_lane / 16;\n";
      s << "  const int lm_wm = (lm_w / 2) * " << bm / 2 << ", lm_wn = (lm_w % 2) * " << bn / 2 << ";\n";
    } else {  // 2 x 4 warps; lane = 4 g + t
      s << "  const unsigned int lm_w = threadIdx.x / 32, lm_lane = threadIdx.x % 32, lm_g = lm_lane / 4, lm_t = lm_lane % 4;\n";
      s << "  const int lm_wm = (lm_w / 4) * " << bm / 2 << ", lm_wn = (lm_w % 4) * " << bn / 4 << ";\n";
    }
    s << "  /* loop bounds depend on block indices only: barriers and " << isa_name << " stay uniform */\n";
    gemm_batch_head(s, g, true);
    s << "    for (int64_t lm_ti = blockIdx.y; lm_ti * " << bm << " < lm_m; lm_ti += gridDim.y) {\n";
    s << "      const int64_t lm_i0 = lm_ti * " << bm << ", lm_j0 = (int64_t)blockIdx.x * " << bn << ";\n";
    s << "      float lm_c[" << mt << "][" << nt << "][" << acc << "];\n";
    s << "      for (int i = 0; i < " << mt << "; ++i)\n";
    s << "        for (int j = 0; j < " << nt << "; ++j)\n";
    s << "          for (int q = 0; q < " << acc << "; ++q) lm_c[i][j][q] = 0.0f;\n";
    s << "      for (int64_t lm_k0 = 0; lm_k0 < lm_k; lm_k0 += 32) {\n";
    stage_half(s, "lm_a2", bm, g.a.buffer, "lm_oa", "lm_ra", "lm_ca", "lm_i0", "lm_m",
               v128 ? contiguity(g.a.row_stride, g.a.col_stride) : 0, threads);
    stage_half(s, "lm_b2", bn, g.b.buffer, "lm_ob", "lm_cb", "lm_rb", "lm_j0", "lm_n",
               v128 ? contiguity(g.b.col_stride, g.b.row_stride) : 0, threads);
    s << "        lm_sync();\n";
    s << "        for (int kk = 0; kk < 2; ++kk) {\n";
    s << "          uint32_t a[" << mt << "][" << a_words << "], b[" << nt << "][" << b_words << "];\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << mt << "; ++i) {\n";
    if (mfma) {  // row r, the k-pairs 2g and 2g + 1
      s << "            const int r0 = lm_wm + i * 16 + lm_r;\n";
      s << "            a[i][0] = lm_a2[r0 * " << words << " + kk * 8 + 2 * lm_g];\n";
      s << "            a[i][1] = lm_a2[r0 * " << words << " + kk * 8 + 2 * lm_g + 1];\n";
    } else if (wmma) {  // row r, all 8 k-pairs of the k16 step (both half-waves alike)
      s << "            const int r0 = lm_wm + i * 16 + lm_r;\n";
      s << "            for (int w = 0; w < 8; ++w) a[i][w] = lm_a2[r0 * " << words << " + kk * 8 + w];\n";
    } else {  // rows g and g + 8, the k-pairs t and t + 4
      s << "            const int r0 = lm_wm + i * 16 + lm_g;\n";
      s << "            a[i][0] = lm_a2[r0 * " << words << " + kk * 8 + lm_t];\n";
      s << "            a[i][1] = lm_a2[(r0 + 8) * " << words << " + kk * 8 + lm_t];\n";
      s << "            a[i][2] = lm_a2[r0 * " << words << " + kk * 8 + lm_t + 4];\n";
      s << "            a[i][3] = lm_a2[(r0 + 8) * " << words << " + kk * 8 + lm_t + 4];\n";
    }
    s << "          }\n";
    s << "#pragma unroll\n";
    s << "          for (int j = 0; j < " << nt << "; ++j) {\n";
    if (mfma) {
      s << "            const int c0 = lm_wn + j * 16 + lm_r;\n";
      s << "            b[j][0] = lm_b2[c0 * " << words << " + kk * 8 + 2 * lm_g];\n";
      s << "            b[j][1] = lm_b2[c0 * " << words << " + kk * 8 + 2 * lm_g + 1];\n";
    } else if (wmma) {  // column r, all 8 k-pairs
      s << "            const int c0 = lm_wn + j * 16 + lm_r;\n";
      s << "            for (int w = 0; w < 8; ++w) b[j][w] = lm_b2[c0 * " << words << " + kk * 8 + w];\n";
    } else {
      s << "            const int c0 = lm_wn + j * 8 + lm_g;\n";
      s << "            b[j][0] = lm_b2[c0 * " << words << " + kk * 8 + lm_t];\n";
      s << "            b[j][1] = lm_b2[c0 * " << words << " + kk * 8 + lm_t + 4];\n";
    }
    s << "          }\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << mt << "; ++i)\n";
    s << "#pragma unroll\n";
    s << "            for (int j = 0; j < " << nt << "; ++j) " << op << "(lm_c[i][j], a[i], b[j], lm_c[i][j]);\n";
    s << "        }\n";
    s << "        lm_sync();\n";
    s << "      }\n";
    matrix_epilogue(s, mt, nt, acc, isa);
    s << "    }\n  }\n";
  }

  // f16/bf16 operands on CUDA sm_80+ (the MmaAsync alternative): (bm/wm) x (bn/wn) warps,
  // each a wm x wn warp tile of m16n8k16 products whose fragments ldmatrix reads from
  // shared memory; a ring of `stages` shared k-tiles (32 deep) that cp.async fills while
  // the tensor cores work on an earlier one, so a K step waits for its loads only when the
  // ring runs dry. Each operand is staged along its contiguous side -- [row][k] when k is
  // (ldmatrix), [k][row] when its rows are (ldmatrix .trans) -- its 16-byte chunks
  // swizzled (swizzled()) so every ldmatrix phase's eight rows hit distinct banks without
  // padding: 128 x 128 tiles take 16 KB a stage, three stages in the 48 KB of static
  // shared memory. The 16-byte copies need every tile row 16-byte aligned: a uniform
  // run-time check per batch point; otherwise (and for operands with neither side
  // contiguous) plain stores fill the same ring, zero-filled outside the matrix like the
  // copies' src-size tails.
  void gemm_mma_async(std::ostringstream& s, LaunchShape& shape, const detail::GpuGemmLaunch& L, DType dt) {
    const Gemm& g = *k_.gemm;
    const int64_t bm = L.bm, bn = L.bn, wm = L.wm, wn = L.wn, st = std::max<int64_t>(2, L.stages);
    const int64_t warps_n = bn / wn, warps = (bm / wm) * warps_n, threads = warps * 32;
    const int64_t mt = wm / 16, nt = wn / 8;
    // 1: k contiguous ([row][k] tile), 2: rows contiguous ([k][row] tile), 0: neither
    const int a_mode = contiguity(g.a.row_stride, g.a.col_stride),
              b_mode = contiguity(g.b.col_stride, g.b.row_stride);
    // Halves per tile row (32 k, or the operand's rows) and per stage of each operand.
    const int64_t pa = a_mode == 2 ? bm : 32, pb = b_mode == 2 ? bn : 32;
    const int64_t sa = 32 * bm, sb = 32 * bn;
    const Index batches = product(k_.loops);
    const std::string half = dt == DType::bf16 ? "bf16" : "f16";
    shape.sync = true;
    shape.block[0] = threads;
    shape.static_shared = static_cast<int>((sa + sb) * st * 2);
    shape.min_blocks = 1;
    shape.schedule = "gemm, tensor cores (mma.sync m16n8k16 " + half + "), tiles " + std::to_string(bm) +
                     "x" + std::to_string(bn) + "x32, " + std::to_string(warps) + " warps of " +
                     std::to_string(wm) + "x" + std::to_string(wn) + ", ldmatrix, cp.async " +
                     std::to_string(st) + "-stage ring";
    shape.grid[0] = ceil_div(g.n, bn);
    shape.grid[1] = capped(ceil_div(g.m, bm), 65535);
    shape.grid[2] = capped(batches, 65535);
    const std::string A = "b" + std::to_string(g.a.buffer), B = "b" + std::to_string(g.b.buffer);
    s << "  __shared__ lm_u32x4 lm_sa4[" << st * sa / 8 << "];  /* " << st << " stages of A as "
      << (a_mode == 2 ? "[k][m]" : "[m][k]") << ", rows of " << pa << " halves, 16-byte chunks swizzled */\n";
    s << "  __shared__ lm_u32x4 lm_sb4[" << st * sb / 8 << "];  /* B as "
      << (b_mode == 2 ? "[k][n]" : "[n][k]") << ", rows of " << pb << " halves */\n";
    s << "  uint16_t* const lm_sa = (uint16_t*)lm_sa4;\n  uint16_t* const lm_sb = (uint16_t*)lm_sb4;\n";
    s << "  const int64_t lm_m = " << ix(g.m) << ", lm_n = " << ix(g.n) << ", lm_k = " << ix(g.k)
      << ", lm_batches = " << ix(batches) << ";\n";
    s << "  const int64_t lm_nk = (lm_k + 31) / 32;\n";
    s << "  const unsigned int lm_w = threadIdx.x / 32, lm_lane = threadIdx.x % 32, lm_g = lm_lane / 4, lm_t "
         "= lm_lane % 4;\n";
    s << "  const int lm_wm = (lm_w / " << warps_n << ") * " << wm << ", lm_wn = (lm_w % " << warps_n
      << ") * " << wn << ";\n";
    s << "  /* ldmatrix: lane 8q + i addresses row i of matrix q */\n";
    s << "  const int lm_q = lm_lane / 8, lm_i = lm_lane % 8;\n";
    s << "  /* loop bounds depend on block indices only: barriers, ldmatrix and mma stay uniform */\n";
    gemm_batch_head(s, g, true);
    // The 16-byte copies: the contiguous side's stride is 1 (static), the other a
    // multiple of 8 halves, the operand's first element 16-byte aligned.
    auto fast = [](int mode, const std::string& b, const std::string& off, const std::string& other) {
      return mode == 0 ? std::string("false")
                       : "lm_aligned16(" + b + " + " + off + ") && " + other + " % 8 == 0";
    };
    s << "    const bool lm_fa = " << fast(a_mode, A, "lm_oa", a_mode == 1 ? "lm_ra" : "lm_ca") << ";\n";
    s << "    const bool lm_fb = " << fast(b_mode, B, "lm_ob", b_mode == 1 ? "lm_cb" : "lm_rb") << ";\n";
    s << "    for (int64_t lm_ti = blockIdx.y; lm_ti * " << bm << " < lm_m; lm_ti += gridDim.y) {\n";
    s << "      const int64_t lm_i0 = lm_ti * " << bm << ", lm_j0 = (int64_t)blockIdx.x * " << bn << ";\n";
    s << "      float lm_c[" << mt << "][" << nt << "][4];\n";
    s << "      for (int i = 0; i < " << mt << "; ++i)\n";
    s << "        for (int j = 0; j < " << nt << "; ++j)\n";
    s << "          for (int q = 0; q < 4; ++q) lm_c[i][j][q] = 0.0f;\n";
    // Issues k-tile `kt` into ring slot `slot` (both expressions), both operands.
    auto stage = [&](const std::string& ind, const std::string& kt, const std::string& slot) {
      s << ind << "{\n";
      s << ind << "  const int64_t lm_kb = (" << kt << ") * 32;\n";
      stage_async(s, ind + "  ", "lm_sa + (" + slot + ") * " + std::to_string(sa), a_mode, bm, pa, A, "lm_oa",
                  "lm_ra", "lm_ca", "lm_i0", "lm_m", "lm_fa", threads);
      stage_async(s, ind + "  ", "lm_sb + (" + slot + ") * " + std::to_string(sb), b_mode, bn, pb, B, "lm_ob",
                  "lm_cb", "lm_rb", "lm_j0", "lm_n", "lm_fb", threads);
      s << ind << "}\n";
    };
    s << "      for (int lm_s = 0; lm_s < " << st - 1 << "; ++lm_s) {\n";
    s << "        if (lm_s < lm_nk)\n";
    stage("        ", "lm_s", "lm_s");
    s << "        lm_cp_async_commit();\n";
    s << "      }\n";
    s << "      for (int64_t lm_kt = 0; lm_kt < lm_nk; ++lm_kt) {\n";
    s << "        lm_cp_async_wait<" << st - 2 << ">();  /* this thread's copies of tile lm_kt landed */\n";
    s << "        lm_sync();                            /* ... and every thread's; slot lm_kt - 1 is free "
         "*/\n";
    s << "        if (lm_kt + " << st - 1 << " < lm_nk)\n";
    stage("        ", "lm_kt + " + std::to_string(st - 1),
          "(lm_kt + " + std::to_string(st - 1) + ") % " + std::to_string(st));
    s << "        lm_cp_async_commit();\n";
    s << "        const uint16_t* const lm_ta = lm_sa + (lm_kt % " << st << ") * " << sa << ";\n";
    s << "        const uint16_t* const lm_tb = lm_sb + (lm_kt % " << st << ") * " << sb << ";\n";
    s << "#pragma unroll\n";
    s << "        for (int kk = 0; kk < 2; ++kk) {\n";
    s << "          uint32_t a[" << mt << "][4], b[" << nt << "][2];\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << mt << "; ++i)\n";
    // A: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15), q = 2 (k half) + (row half) gives
    // a[i][q] as the mma layout wants (gpu_prelude.hpp).
    if (a_mode == 2)
      s << "            lm_ldmatrix_x4_trans(a[i], lm_ta + "
        << swizzled(pa, "kk * 16 + (lm_q / 2) * 8 + lm_i", "(lm_wm + i * 16 + (lm_q % 2) * 8) / 8") << ");\n";
    else
      s << "            lm_ldmatrix_x4(a[i], lm_ta + "
        << swizzled(pa, "lm_wm + i * 16 + (lm_q % 2) * 8 + lm_i", "kk * 2 + lm_q / 2") << ");\n";
    // B: two n8 tiles at once, matrices (k 0-7, tile j), (k 8-15, j), (k 0-7, j + 1), (k 8-15, j + 1).
    s << "#pragma unroll\n";
    s << "          for (int j = 0; j < " << nt << "; j += 2) {\n";
    s << "            uint32_t r[4];\n";
    if (b_mode == 2)
      s << "            lm_ldmatrix_x4_trans(r, lm_tb + "
        << swizzled(pb, "kk * 16 + (lm_q % 2) * 8 + lm_i", "(lm_wn + j * 8 + (lm_q / 2) * 8) / 8") << ");\n";
    else
      s << "            lm_ldmatrix_x4(r, lm_tb + "
        << swizzled(pb, "lm_wn + j * 8 + (lm_q / 2) * 8 + lm_i", "kk * 2 + lm_q % 2") << ");\n";
    s << "            b[j][0] = r[0];\n            b[j][1] = r[1];\n            b[j + 1][0] = r[2];\n"
      << "            b[j + 1][1] = r[3];\n";
    s << "          }\n";
    s << "#pragma unroll\n";
    s << "          for (int i = 0; i < " << mt << "; ++i)\n";
    s << "#pragma unroll\n";
    s << "            for (int j = 0; j < " << nt << "; ++j) lm_mma_m16n8k16_" << half
      << "(lm_c[i][j], a[i], b[j], lm_c[i][j]);\n";
    s << "        }\n";
    s << "      }\n";
    s << "      lm_cp_async_wait<0>();\n";
    s << "      lm_sync();  /* the next output tile refills the ring */\n";
    matrix_epilogue(s, mt, nt, 4, MatrixIsa::MmaSync);
    s << "    }\n  }\n";
  }

  // Where 16-byte chunk `c` of tile row `r` lies (in halves) in a ring slot of rows of
  // `pitch` halves: the chunk index XOR-swizzled by the row so that the 8 rows one
  // ldmatrix phase reads (and the 8 chunks a phase of cp.async writes) fall in 8
  // distinct 16-byte bank groups. Rows of 64 bytes (two to a 128-byte bank line): c ^
  // ((r / 2) % 4); rows of 128 bytes or more: c ^ (r % 8).
  static std::string swizzled(int64_t pitch, const std::string& r, const std::string& c) {
    const std::string x = pitch >= 64 ? "((" + r + ") & 7)" : "(((" + r + ") >> 1) & 3)";
    return "(" + r + ") * " + std::to_string(pitch) + " + 8 * ((" + c + ") ^ " + x + ")";
  }

  // One k-tile of a half operand into ring slot `dst`: element (r, k) of the operand is
  // b[off + r * srow + k * sk], rows from r0 up to rlim, k from lm_kb up to lm_k. mode 1:
  // dst is [row][k] (rows of `pitch` halves), a 16-byte cp.async per 8 k; mode 2: dst is
  // [k][row], one per 8 rows; the copies' src-size zero-fills what lies outside the
  // matrix. Chunks are placed by swizzled(). When `fast` is false at run time (or mode 0), plain stores of
  // each half.
  void stage_async(std::ostringstream& s, const std::string& ind, const std::string& dst, int mode,
                   int64_t rows, int64_t pitch, const std::string& b, const std::string& off,
                   const std::string& srow, const std::string& sk, const std::string& r0,
                   const std::string& rlim, const std::string& fast, int64_t threads) {
    s << ind << "{\n";
    s << ind << "  uint16_t* const lm_d = " << dst << ";\n";
    if (mode != 0) {
      s << ind << "  if (" << fast << ") {\n";
      if (mode == 1) {
        s << ind << "    for (int lm_e = threadIdx.x; lm_e < " << rows * 4 << "; lm_e += " << threads
          << ") {\n";
        s << ind << "      const int64_t gr = " << r0 << " + lm_e / 4, gk = lm_kb + 8 * (lm_e % 4);\n";
        s << ind << "      const int64_t lm_left = gr < " << rlim << " ? lm_k - gk : 0;\n";
        s << ind << "      const int lm_nb = lm_left <= 0 ? 0 : lm_left >= 8 ? 16 : (int)(2 * lm_left);\n";
        s << ind << "      lm_cp_async16(lm_d + " << swizzled(pitch, "lm_e / 4", "lm_e % 4") << ", " << b
          << " + " << off << " + (lm_nb ? gr * " << srow << " + gk : 0), lm_nb);\n";
      } else {
        const int64_t groups = rows / 8;
        s << ind << "    for (int lm_e = threadIdx.x; lm_e < " << 32 * groups << "; lm_e += " << threads
          << ") {\n";
        s << ind << "      const int64_t gr = " << r0 << " + 8 * (lm_e % " << groups
          << "), gk = lm_kb + lm_e / " << groups << ";\n";
        s << ind << "      const int64_t lm_left = gk < lm_k ? " << rlim << " - gr : 0;\n";
        s << ind << "      const int lm_nb = lm_left <= 0 ? 0 : lm_left >= 8 ? 16 : (int)(2 * lm_left);\n";
        s << ind << "      lm_cp_async16(lm_d + "
          << swizzled(pitch, "lm_e / " + std::to_string(groups), "lm_e % " + std::to_string(groups)) << ", "
          << b << " + " << off << " + (lm_nb ? gr + gk * " << sk << " : 0), lm_nb);\n";
      }
      s << ind << "    }\n";
      s << ind << "  } else {\n";
    }
    const std::string in = mode != 0 ? ind + "    " : ind + "  ";
    s << in << "for (int lm_e = threadIdx.x; lm_e < " << rows * 32 << "; lm_e += " << threads << ") {\n";
    if (mode == 2) {
      s << in << "  const int lm_r = lm_e % " << rows << ", lm_kq = lm_e / " << rows << ";\n";
    } else {
      s << in << "  const int lm_r = lm_e / 32, lm_kq = lm_e % 32;\n";
    }
    s << in << "  const int64_t gr = " << r0 << " + lm_r, gk = lm_kb + lm_kq;\n";
    s << in << "  lm_d["
      << (mode == 2 ? swizzled(pitch, "lm_kq", "lm_r / 8") + " + lm_r % 8"
                    : swizzled(pitch, "lm_r", "lm_kq / 8") + " + lm_kq % 8")
      << "] = gr < " << rlim << " && gk < lm_k ? " << b << "[" << off << " + gr * " << srow << " + gk * "
      << sk << "] : (uint16_t)0;\n";
    s << in << "}\n";
    if (mode != 0) s << ind << "  }\n";
    s << ind << "}\n";
  }

  // Every lane's accumulators lm_c[mt][nt][acc] of the (lm_i0 + lm_wm, lm_j0 + lm_wn) warp
  // tile, by `isa`'s accumulator layout, through the epilogue into C (rows and columns
  // beyond the matrix skipped).
  void matrix_epilogue(std::ostringstream& s, int64_t mt, int64_t nt, int acc, MatrixIsa isa) {
    const Gemm& g = *k_.gemm;
    const bool mfma = isa == MatrixIsa::Mfma, wmma = isa == MatrixIsa::Wmma;
    s << "#pragma unroll\n";
    s << "      for (int i = 0; i < " << mt << "; ++i)\n";
    s << "#pragma unroll\n";
    s << "        for (int j = 0; j < " << nt << "; ++j)\n";
    s << "#pragma unroll\n";
    s << "          for (int q = 0; q < " << acc << "; ++q) {\n";
    if (wmma)  // D[2q + h][r]
      s << "            const int64_t v" << g.row_var << " = lm_i0 + lm_wm + i * 16 + 2 * q + lm_h, v"
        << g.col_var << " = lm_j0 + lm_wn + j * 16 + lm_r;\n";
    else if (mfma)  // D[4g + q][r]
      s << "            const int64_t v" << g.row_var << " = lm_i0 + lm_wm + i * 16 + 4 * lm_g + q, v" << g.col_var
        << " = lm_j0 + lm_wn + j * 16 + lm_r;\n";
    else  // c0..c3: (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
      s << "            const int64_t v" << g.row_var << " = lm_i0 + lm_wm + i * 16 + lm_g + 8 * (q / 2), v" << g.col_var
        << " = lm_j0 + lm_wn + j * 8 + 2 * lm_t + q % 2;\n";
    s << "            if (v" << g.row_var << " >= lm_m || v" << g.col_var << " >= lm_n) continue;\n";
    s << "            const float acc = lm_c[i][j][q];\n";
    std::string v = "acc";
    if (g.epilogue.valid()) {
      std::map<const ExprNode*, std::string> memo;
      v = value(g.epilogue, memo, s, "            ");
      const DType cd = p_.buffers[static_cast<size_t>(g.c.buffer)].dtype;
      if (g.epilogue.dtype() != cd) v = convert(v, g.epilogue.dtype(), cd);
    }
    s << "            b" << g.c.buffer << "[lm_oc + v" << g.row_var << " * lm_rc + v" << g.col_var << "] = " << v
      << ";\n";
    s << "          }\n";
  }

  // How an operand's 128-bit loads can run: 1 when k is its contiguous side (8 k-consecutive
  // halves per load), 2 when its rows (m of A, n of B) are (8 row-consecutive halves at k
  // and at k + 1, paired), 0 when neither stride is a constant 1.
  static int contiguity(const Index& row_stride, const Index& k_stride) {
    if (k_stride.as_constant() == int64_t{1}) return 1;
    if (row_stride.as_constant() == int64_t{1}) return 2;
    return 0;
  }

  // Stages a rows x 32 tile of a half operand into `sh` as [row][k/2] 32-bit k-pairs
  // (low half = the lower k), zero outside the matrix. Element (r, k) of the operand is
  // b<buffer>[off + r * srow + k * sk], rows from r0 up to rlim. mode 0: a scalar load per
  // half; mode 1 / 2 (contiguity()): lm_ld128 where the whole vector lies inside the
  // matrix and the block's base address and the other stride keep it 16-byte aligned (a
  // uniform run-time check per tile), the scalar loads otherwise.
  void stage_half(std::ostringstream& s, const std::string& sh, int64_t rows, int buffer,
                  const std::string& off, const std::string& srow, const std::string& sk,
                  const std::string& r0, const std::string& rlim, int mode, int threads) {
    const std::string b = "b" + std::to_string(buffer);
    auto at = [&](const std::string& r, const std::string& k) {
      return "(uint32_t)" + b + "[" + off + " + (" + r + ") * " + srow + " + (" + k + ") * " + sk + "]";
    };
    // one 32-bit k-pair (row r, halves k and k + 1), zero-filled
    auto pair = [&](const std::string& ind, const std::string& dst, const std::string& r, const std::string& k) {
      s << ind << "{\n";
      s << ind << "  const uint32_t lo = (" << r << " < " << rlim << " && " << k << " < lm_k) ? " << at(r, k)
        << " : 0u;\n";
      s << ind << "  const uint32_t hi = (" << r << " < " << rlim << " && " << k << " + 1 < lm_k) ? "
        << at(r, k + " + 1") << " : 0u;\n";
      s << ind << "  " << dst << " = lo | (hi << 16);\n";
      s << ind << "}\n";
    };
    auto scalar = [&](const std::string& ind) {
      s << ind << "for (int lm_e = threadIdx.x; lm_e < " << rows * 16 << "; lm_e += " << threads << ") {\n";
      s << ind << "  const int64_t gr = " << r0 << " + lm_e / 16, gk = lm_k0 + 2 * (lm_e % 16);\n";
      pair(ind + "  ", sh + "[lm_e]", "gr", "gk");
      s << ind << "}\n";
    };
    if (mode == 0) {
      scalar("        ");
      return;
    }
    const std::string other = mode == 1 ? srow : sk;
    s << "        if (lm_aligned16(" << b << " + " << off << ") && " << other << " % 8 == 0) {\n";
    if (mode == 1) {
      s << "          for (int lm_e = threadIdx.x; lm_e < " << rows * 4 << "; lm_e += " << threads << ") {\n";
      s << "            const int64_t gr = " << r0 << " + lm_e / 4, gk = lm_k0 + 8 * (lm_e % 4);\n";
      s << "            uint32_t* lm_d = " << sh << " + (lm_e / 4) * 16 + 4 * (lm_e % 4);\n";
      s << "            if (gr < " << rlim << " && gk + 8 <= lm_k) {\n";
      s << "              const lm_u32x4 v = lm_ld128(" << b << " + " << off << " + gr * " << srow << " + gk);\n";
      s << "              lm_d[0] = v.x;\n              lm_d[1] = v.y;\n              lm_d[2] = v.z;\n"
        << "              lm_d[3] = v.w;\n";
      s << "            } else {\n";
      s << "              for (int q = 0; q < 4; ++q)\n";
      pair("                ", "lm_d[q]", "gr", "gk + 2 * q");
      s << "            }\n          }\n";
    } else {
      const int64_t groups = rows / 8;
      s << "          for (int lm_e = threadIdx.x; lm_e < " << groups * 16 << "; lm_e += " << threads
        << ") {\n";
      s << "            const int64_t gr = " << r0 << " + 8 * (lm_e % " << groups << "), gk = lm_k0 + 2 * (lm_e / "
        << groups << ");\n";
      s << "            uint32_t* lm_d = " << sh << " + 8 * (lm_e % " << groups << ") * 16 + lm_e / " << groups << ";\n";
      s << "            if (gr + 8 <= " << rlim << " && gk + 1 < lm_k) {\n";
      s << "              const lm_u32x4 v0 = lm_ld128(" << b << " + " << off << " + gr + gk * " << sk << ");\n";
      s << "              const lm_u32x4 v1 = lm_ld128(" << b << " + " << off << " + gr + (gk + 1) * " << sk << ");\n";
      s << "              const uint32_t w0[4] = {v0.x, v0.y, v0.z, v0.w}, w1[4] = {v1.x, v1.y, v1.z, v1.w};\n";
      s << "#pragma unroll\n";
      s << "              for (int i = 0; i < 8; ++i)\n";
      s << "                lm_d[i * 16] = ((w0[i / 2] >> (16 * (i % 2))) & 0xffffu) | "
        << "(((w1[i / 2] >> (16 * (i % 2))) & 0xffffu) << 16);\n";
      s << "            } else {\n";
      s << "              for (int i = 0; i < 8; ++i)\n";
      pair("                ", "lm_d[i * 16]", "gr + i", "gk");
      s << "            }\n          }\n";
    }
    s << "        } else {\n";
    scalar("          ");
    s << "        }\n";
  }

  // The skinny GEMM's row prologue (Gemm::a_prologue) for the block's rows lm_i0.. (bm of
  // them, those below lm_m), in two parts. First each row's statistic (where the prologue
  // has one) by the whole block, a block reduction -- the loop bounds depend on the block
  // only, so its barriers are uniform -- kept by every thread in lm_stv[row].
  void gemm_prologue_stats(std::ostringstream& s, const GemmRowPrologue& pr, int64_t bm) {
    const Gemm& g = *k_.gemm;
    const bool sum = pr.stat.op == ReduceOp::Sum;
    s << "      /* each row's statistic, by the whole block */\n";
    s << "      float lm_stv[" << bm << "];\n";
    s << "      for (int lm_r = 0; lm_r < " << bm << " && lm_i0 + lm_r < lm_m; ++lm_r) {\n";
    s << "        const int64_t v" << g.row_var << " = lm_i0 + lm_r;\n";
    s << "        float lm_st = " << (sum ? "0.0f" : "lm_u2f(0xff800000u)") << ";\n";
    s << "        for (int64_t lm_q = threadIdx.x; lm_q < " << ix(pr.stat.loops[0].extent)
      << "; lm_q += " << kThreads << ") {\n";
    s << "          const int64_t v" << pr.stat.loops[0].var << " = lm_q;\n";
    {
      std::map<const ExprNode*, std::string> memo;
      const std::string v = value(pr.stat.value, memo, s, "          ");
      s << "          lm_st = " << (sum ? "lm_st + " + v : "lm_max(lm_st, " + v + ")") << ";\n";
    }
    s << "        }\n";
    s << "        lm_stv[lm_r] = lm_block_" << (sum ? "sum" : "max") << "_f32(lm_st, lm_red);\n";
    s << "      }\n";
  }

  // Then, for the K chunk [lm_kc, lm_ke) (at most `chunk` long), each row's A elements
  // into lm_ap[row][k - lm_kc], between barriers: the one before lets the previous chunk's
  // readers finish, the one after publishes the chunk.
  void gemm_prologue_chunk(std::ostringstream& s, const GemmRowPrologue& pr, int64_t bm, int64_t chunk) {
    const Gemm& g = *k_.gemm;
    s << "        lm_sync();\n";
    s << "        for (int lm_r = 0; lm_r < " << bm << " && lm_i0 + lm_r < lm_m; ++lm_r) {\n";
    s << "          const int64_t v" << g.row_var << " = lm_i0 + lm_r;\n";
    if (!pr.stat.loops.empty()) s << "          const float acc = lm_stv[lm_r];\n";
    s << "          for (int64_t lm_q = threadIdx.x; lm_q < lm_ke - lm_kc; lm_q += " << kThreads << ") {\n";
    s << "            const int64_t v" << pr.depth_var << " = lm_kc + lm_q;\n";
    {
      std::map<const ExprNode*, std::string> memo;
      const std::string v = value(pr.a, memo, s, "            ");
      s << "            lm_ap[lm_r * " << chunk << " + lm_q] = " << v << ";\n";
    }
    s << "          }\n";
    s << "        }\n";
    s << "        lm_sync();\n";
  }

  // Decode-shaped GEMMs (M = 1..8, large K; the search's Skinny alternative): a block
  // computes bm (<= 8) rows x bn columns; its 256 threads are bn columns x ks slices of K
  // (split-K inside the block: consecutive threads take consecutive K positions when B is
  // K-contiguous, consecutive columns otherwise, so loads coalesce), each accumulating
  // its rows' partial dot products in f32 registers; the partials meet in shared memory
  // and are summed in slice order (deterministic), then the epilogue and the only store.
  // With 128-bit loads (vec > 1; A and B both K-contiguous and of one type) each thread
  // reads 16 bytes of B and of each A row per step, guarded per thread by alignment and
  // by the end of K (scalar loads there). A computed by a row prologue is read from the
  // block's shared rows instead (gemm_row_prologue), B's type setting the step.
  void gemm_skinny(std::ostringstream& s, LaunchShape& shape, const detail::GpuGemmLaunch& L) {
    const Gemm& g = *k_.gemm;
    int64_t bm = std::clamp<int64_t>(L.bm, 1, 8), bn = L.bn, ks = L.ks;
    if (bn < 1 || ks < 1 || bn * ks != kThreads) {
      bn = 32;
      ks = 8;
    }
    // A computed by the block from its rows (Gemm::a_prologue) is f32 in shared memory,
    // a chunk of K at a time: lm_ap[row of the block][k - lm_kc].
    const GemmRowPrologue* pro = g.a_prologue ? &*g.a_prologue : nullptr;
    const bool stat = pro && !pro->stat.loops.empty();
    const DType da = pro ? DType::f32 : p_.buffers[static_cast<size_t>(g.a.buffer)].dtype;
    const DType db = p_.buffers[static_cast<size_t>(g.b.buffer)].dtype;
    const bool a_kc = pro || g.a.col_stride.as_constant() == int64_t{1};
    // B's column j, from its segment where B is segmented (matmul-siblings: Wq | Wk | Wv
    // read where each lies); every segment has B's dtype.
    bool b_kc = g.b.row_stride.as_constant() == int64_t{1};
    for (const GemmSegment& sg : g.b_segments) b_kc = b_kc && sg.b.row_stride.as_constant() == int64_t{1};
    const bool v128 = L.vec > 1 && a_kc && b_kc && (pro || da == db);
    const int64_t ve = db == DType::f32 ? 4 : 8;  // elements per 128-bit load
    const int64_t chunk =
        pro ? detail::skinny_prologue_chunk(bm, ks * (v128 ? ve : 1), g.k.as_constant().value_or(0)) : 0;
    // The K loop below runs over [lm_kc, lm_ke) with a prologue (a chunk), else all of K.
    const std::string kb = pro ? "lm_kc + " : "", ke = pro ? "lm_ke" : "lm_k";
    const Index batches = product(k_.loops);
    shape.sync = true;
    shape.static_shared = static_cast<int>(bm * bn * ks * 4 + bm * chunk * 4 + (stat ? 32 * 4 : 0));
    shape.min_blocks = 4;
    shape.schedule =
        "gemm, skinny: " + std::to_string(bm) + " rows x " + std::to_string(bn) +
        " columns a block, K split " + std::to_string(ks) + " ways across its threads" +
        (v128 ? ", 128-bit loads" : "") +
        (pro ? ", A computed from its rows in shared memory, " + std::to_string(chunk) + " of K at a time"
             : "");
    shape.grid[0] = ceil_div(g.n, bn);
    shape.grid[1] = capped(ceil_div(g.m, bm), 65535);
    shape.grid[2] = capped(batches, 65535);
    auto A = [&](const std::string& r, const std::string& k) {
      if (pro) return "lm_ap[(" + r + " - lm_i0) * " + std::to_string(chunk) + " + (" + k + ") - lm_kc]";
      return operand(g.a.buffer, "lm_oa + (" + r + ") * lm_ra + (" + k + ") * lm_ca");
    };
    // (lm_bp, lm_ob, lm_rb, lm_cb, lm_jc: this thread's column's buffer, view and column
    // in it; set per row tile below)
    auto B = [&](const std::string& k) {
      return convert("lm_bp[lm_ob + (" + k + ") * lm_rb + lm_jc * lm_cb]", db, DType::f32);
    };
    auto unpack = [&](const std::string& ind, const std::string& v, const std::string& out) {
      s << ind << "float " << out << "[" << ve << "];\n";
      s << ind << "{\n" << ind << "  const uint32_t w[4] = {" << v << ".x, " << v << ".y, " << v << ".z, " << v
        << ".w};\n";
      s << "#pragma unroll\n";
      s << ind << "  for (int e = 0; e < " << ve << "; ++e) " << out << "[e] = ";
      // (B's type: the 128-bit path loads A's rows as vectors only when A has it too)
      if (db == DType::f32)
        s << "lm_u2f(w[e]);\n";
      else
        s << convert("(uint16_t)(w[e / 2] >> (16 * (e % 2)))", db, DType::f32) << ";\n";
      s << ind << "}\n";
    };
    // Row i's A elements [k0, k0 + ve) as floats in `out` (the 128-bit path): unpacked
    // from the vector `v` loaded from A, or read from the prologue's shared rows.
    auto a_vector = [&](const std::string& ind, const std::string& v, const std::string& k0,
                        const std::string& out) {
      if (!pro) return unpack(ind, v, out);
      s << ind << "float " << out << "[" << ve << "];\n";
      s << "#pragma unroll\n";
      s << ind << "for (int e = 0; e < " << ve << "; ++e) " << out << "[e] = lm_ap[i * " << chunk << " + "
        << k0 << " - lm_kc + e];\n";
    };
    s << "  __shared__ float lm_part[" << bm * bn * ks << "];  /* [row][column][slice] */\n";
    if (pro) s << "  __shared__ float lm_ap[" << bm * chunk << "];  /* A: [row of the block][k - lm_kc] */\n";
    if (stat) s << "  __shared__ float lm_red[32];\n";
    s << "  const int64_t lm_m = " << ix(g.m) << ", lm_n = " << ix(g.n) << ", lm_k = " << ix(g.k)
      << ", lm_batches = " << ix(batches) << ";\n";
    if (b_kc)
      s << "  const int lm_s = threadIdx.x % " << ks << ", lm_c = threadIdx.x / " << ks << ";\n";
    else
      s << "  const int lm_c = threadIdx.x % " << bn << ", lm_s = threadIdx.x / " << bn << ";\n";
    s << "  /* loop bounds depend on block indices only: barriers stay uniform */\n";
    gemm_batch_head(s, g, false);
    s << "    for (int64_t lm_ti = blockIdx.y; lm_ti * " << bm << " < lm_m; lm_ti += gridDim.y) {\n";
    s << "      const int64_t lm_i0 = lm_ti * " << bm << ", lm_j0 = (int64_t)blockIdx.x * " << bn
      << ", lm_j = lm_j0 + lm_c;\n";
    // B's column lm_j: the buffer and view of the segment holding it (the last whose first
    // column is at or before it), the column counted from the segment's first.
    s << "      const " << c_type(db) << "* lm_bp = b" << g.b.buffer << ";\n";
    s << "      int64_t lm_ob = " << ix(g.b.offset) << ", lm_rb = " << ix(g.b.row_stride)
      << ", lm_cb = " << ix(g.b.col_stride) << ", lm_jc = lm_j;\n";
    for (size_t i = 1; i < g.b_segments.size(); ++i) {
      const GemmSegment& sg = g.b_segments[i];
      s << "      if (lm_j >= " << ix(sg.n0) << ") { lm_bp = b" << sg.b.buffer
        << "; lm_ob = " << ix(sg.b.offset) << "; lm_rb = " << ix(sg.b.row_stride)
        << "; lm_cb = " << ix(sg.b.col_stride) << "; lm_jc = lm_j - " << ix(sg.n0) << "; }\n";
    }
    if (stat) gemm_prologue_stats(s, *pro, bm);
    s << "      float lm_acc[" << bm << "];\n";
    s << "#pragma unroll\n      for (int i = 0; i < " << bm << "; ++i) lm_acc[i] = 0.0f;\n";
    // With a prologue, K in chunks (bounds uniform across the block: its barriers are);
    // a chunk's length is a multiple of the threads' step along K, so each thread takes
    // the K positions, in the order, that one pass over all of K would.
    if (pro) {
      s << "      for (int64_t lm_kc = 0; lm_kc < lm_k; lm_kc += " << chunk << ") {\n";
      s << "        const int64_t lm_ke = lm_k - lm_kc < " << chunk << " ? lm_k : lm_kc + " << chunk << ";\n";
      gemm_prologue_chunk(s, *pro, bm, chunk);
    }
    s << "      if (lm_j < lm_n) {\n";
    auto scalar_k = [&](const std::string& ind, const std::string& start, const std::string& end,
                        const std::string& step) {
      s << ind << "for (int64_t lm_kk = " << start << "; lm_kk < " << end << "; lm_kk += " << step << ") {\n";
      s << ind << "  const float lm_bv = " << B("lm_kk") << ";\n";
      s << "#pragma unroll\n";
      s << ind << "  for (int i = 0; i < " << bm << "; ++i)\n";
      s << ind << "    if (lm_i0 + i < lm_m) lm_acc[i] = LM_FMA(" << A("lm_i0 + i", "lm_kk") << ", lm_bv, lm_acc[i]);\n";
      s << ind << "}\n";
    };
    if (v128) {
      if (pro)
        s << "        const int lm_vok = lm_aligned16(lm_bp + lm_ob + lm_jc * lm_cb);\n";
      else
        s << "        const int lm_vok = lm_aligned16(b" << g.a.buffer << " + lm_oa) && lm_ra % " << ve
          << " == 0 && lm_aligned16(lm_bp + lm_ob + lm_jc * lm_cb);\n";
      s << "        if (lm_vok) {\n";
      // With at most kSkinnyPairRows rows, two steps a trip while both are whole: every
      // load of the pair is issued before the first FMA waits on one (two 16-byte loads
      // in flight per operand row), then the FMAs in the steps' order, so the sums are
      // the one-step loop's. (With more rows the pair's registers would spill.)
      const std::string next = std::to_string(ks * ve);
      s << "          int64_t lm_k0 = " << kb << "(int64_t)lm_s * " << ve << ";\n";
      if (bm <= detail::kSkinnyPairRows) {
        s << "          for (; lm_k0 + " << next << " + " << ve << " <= " << ke
          << "; lm_k0 += " << 2 * ks * ve << ") {\n";
        s << "            const lm_u32x4 lm_vb0 = lm_ld128(lm_bp + lm_ob + lm_jc * lm_cb + lm_k0);\n";
        s << "            const lm_u32x4 lm_vb1 = lm_ld128(lm_bp + lm_ob + lm_jc * lm_cb + lm_k0 + " << next
          << ");\n";
        if (!pro) {
          s << "            lm_u32x4 lm_va0[" << bm << "], lm_va1[" << bm << "];\n";
          s << "#pragma unroll\n";
          s << "            for (int i = 0; i < " << bm << "; ++i) {\n";
          s << "              if (lm_i0 + i >= lm_m) continue;\n";
          s << "              lm_va0[i] = lm_ld128(b" << g.a.buffer
            << " + lm_oa + (lm_i0 + i) * lm_ra + lm_k0);\n";
          s << "              lm_va1[i] = lm_ld128(b" << g.a.buffer
            << " + lm_oa + (lm_i0 + i) * lm_ra + lm_k0 + " << next << ");\n";
          s << "            }\n";
        }
        for (const char* half : {"0", "1"}) {
          unpack("            ", std::string("lm_vb") + half, std::string("lm_fb") + half);
          s << "#pragma unroll\n";
          s << "            for (int i = 0; i < " << bm << "; ++i) {\n";
          s << "              if (lm_i0 + i >= lm_m) continue;\n";
          a_vector("              ", std::string("lm_va") + half + "[i]",
                   *half == '0' ? std::string("lm_k0") : "lm_k0 + " + next, "lm_fa");
          s << "#pragma unroll\n";
          s << "              for (int e = 0; e < " << ve << "; ++e) lm_acc[i] = LM_FMA(lm_fa[e], lm_fb"
            << half << "[e], lm_acc[i]);\n";
          s << "            }\n";
        }
        s << "          }\n";
      }
      s << "          for (; lm_k0 < " << ke << "; lm_k0 += " << ks * ve << ") {\n";
      s << "            if (lm_k0 + " << ve << " <= " << ke << ") {\n";
      s << "              const lm_u32x4 lm_vb = lm_ld128(lm_bp + lm_ob + lm_jc * lm_cb + lm_k0);\n";
      unpack("              ", "lm_vb", "lm_fb");
      s << "#pragma unroll\n";
      s << "              for (int i = 0; i < " << bm << "; ++i) {\n";
      s << "                if (lm_i0 + i >= lm_m) continue;\n";
      if (!pro)
        s << "                const lm_u32x4 lm_va = lm_ld128(b" << g.a.buffer
          << " + lm_oa + (lm_i0 + i) * lm_ra + lm_k0);\n";
      a_vector("                ", "lm_va", "lm_k0", "lm_fa");
      s << "#pragma unroll\n";
      s << "                for (int e = 0; e < " << ve << "; ++e) lm_acc[i] = LM_FMA(lm_fa[e], lm_fb[e], lm_acc[i]);\n";
      s << "              }\n";
      s << "            } else {\n";
      scalar_k("              ", "lm_k0", ke, "1");
      s << "            }\n";
      s << "          }\n";
      s << "        } else {\n";
      scalar_k("          ", kb + "lm_s", ke, std::to_string(ks));
      s << "        }\n";
    } else {
      scalar_k("        ", kb + "lm_s", ke, std::to_string(ks));
    }
    s << "      }\n";
    if (pro) s << "      }\n";
    s << "#pragma unroll\n";
    s << "      for (int i = 0; i < " << bm << "; ++i) lm_part[(i * " << bn << " + lm_c) * " << ks
      << " + lm_s] = lm_acc[i];\n";
    s << "      lm_sync();\n";
    s << "      for (int lm_o = threadIdx.x; lm_o < " << bm * bn << "; lm_o += " << kThreads << ") {\n";
    s << "        const int i = lm_o / " << bn << ", c = lm_o % " << bn << ";\n";
    s << "        float lm_sum = 0.0f;\n";
    s << "        for (int q = 0; q < " << ks << "; ++q) lm_sum = lm_sum + lm_part[lm_o * " << ks << " + q];\n";
    s << "        const int64_t v" << g.row_var << " = lm_i0 + i, v" << g.col_var << " = lm_j0 + c;\n";
    s << "        if (v" << g.row_var << " >= lm_m || v" << g.col_var << " >= lm_n) continue;\n";
    s << "        const float acc = lm_sum;\n";
    std::string v = "acc";
    if (g.epilogue.valid()) {
      std::map<const ExprNode*, std::string> memo;
      v = value(g.epilogue, memo, s, "        ");
      const DType cd = p_.buffers[static_cast<size_t>(g.c.buffer)].dtype;
      if (g.epilogue.dtype() != cd) v = convert(v, g.epilogue.dtype(), cd);
    }
    s << "        b" << g.c.buffer << "[lm_oc + v" << g.row_var << " * lm_rc + v" << g.col_var << "] = " << v << ";\n";
    s << "      }\n";
    s << "      lm_sync();\n";
    s << "    }\n  }\n";
    (void)db;
  }

  void epilogue(std::ostringstream& s, const std::string& ind, const std::string& reg, const std::string& row,
                const std::string& col, int64_t tm, int64_t tn) {
    const Gemm& g = *k_.gemm;
    s << "#pragma unroll\n" << ind << "for (int i = 0; i < " << tm << "; ++i)\n";
    s << "#pragma unroll\n" << ind << "  for (int j = 0; j < " << tn << "; ++j) {\n";
    s << ind << "    const int64_t v" << g.row_var << " = " << row << ", v" << g.col_var << " = " << col << ";\n";
    s << ind << "    if (v" << g.row_var << " >= lm_m || v" << g.col_var << " >= lm_n) continue;\n";
    s << ind << "    const float acc = " << reg << ";\n";
    std::string v = "acc";
    const std::string in = ind + "    ";
    if (g.epilogue.valid()) {
      std::map<const ExprNode*, std::string> memo;
      v = value(g.epilogue, memo, s, in);
      const DType cd = p_.buffers[static_cast<size_t>(g.c.buffer)].dtype;
      if (g.epilogue.dtype() != cd) v = convert(v, g.epilogue.dtype(), cd);
    }
    s << in << "b" << g.c.buffer << "[lm_oc + v" << g.row_var << " * lm_rc + v" << g.col_var << "] = " << v
      << ";\n";
    s << ind << "  }\n";
  }

  const Program& p_;
  mutable std::optional<std::size_t> padded_addresses_;  // unconditional_pad's count, once
  const Kernel& k_;
  const GpuArch& arch_;
  std::vector<int64_t> launch_;
  std::map<std::string, int> sym_ids_;
  std::set<int> reads_, writes_, touched_;
  int tmp_ = 0;
};

// The emulator's BLAS: the column-major strided GEMM of gpu/blas_gemm.hpp (one batch
// point a call), products summed in f32 in k order, the sum rounded to D's type.
std::string emulated_blas() {
  return R"(/* ---- emulated BLAS (gpu/blas_gemm.hpp: BlasCall) ---- */
static void lm_blas_out(float* d, float v, int) { *d = v; }
static void lm_blas_out(uint16_t* d, float v, int bf16) { *d = bf16 ? lm_f32_to_bf16(v) : lm_f32_to_f16(v); }
static float lm_blas_get(const float* p, int64_t i, int) { return p[i]; }
static float lm_blas_get(const uint16_t* p, int64_t i, int bf16) {
  return bf16 ? lm_bf16_to_f32(p[i]) : lm_f16_to_f32(p[i]);
}
/* The leading dimension a stored rows x cols matrix declares: any for one column (the
   smallest the library accepts), else at least its rows. */
static int64_t lm_blas_leading(int64_t ld, int64_t rows, int64_t cols, const char* what) {
  const int64_t least = rows > 1 ? rows : 1;
  if (cols <= 1) return least;
  if (ld < least) {
    fprintf(stderr, "[luminal emulator] BLAS %s: leading dimension %lld below its %lld rows\n", what,
            (long long)ld, (long long)rows);
    abort();
  }
  return ld;
}
template <class TA, class TD>
static void lm_blas_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const TA* a, int64_t lda,
                         const TA* b, int64_t ldb, TD* d, int64_t ldd, int bf16_ab, int bf16_d) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      float acc = 0.0f;
      for (int64_t l = 0; l < k; ++l) {
        const float x = lm_blas_get(a, ta ? l + i * lda : i + l * lda, bf16_ab);
        const float y = lm_blas_get(b, tb ? j + l * ldb : l + j * ldb, bf16_ab);
        acc = __builtin_fmaf(x, y, acc);
      }
      lm_blas_out(d + i + j * ldd, acc, bf16_d);
    }
}
)";
}

// A library GEMM's host entry: the calls of blas_calls (gpu/blas_gemm.cpp), one per
// point of every batch loop.
std::string emulated_blas_entry(const LaunchShape& l, const Program& p) {
  const BlasKernel& bk = *l.blas;
  std::ostringstream s;
  auto ix = [&](const Index& i) { return render_index(i, p); };
  s << "extern \"C\" void " << l.name
    << "_emu(void* const* lm_bufs, const int64_t* lm_syms, const void* lm_rt, void* lm_cx) {\n"
    << "  (void)lm_rt; (void)lm_cx; (void)lm_syms;\n";
  for (size_t i = 0; i < p.symbols.size(); ++i) s << "  const int64_t s" << i << " = lm_syms[" << i << "];\n";
  for (const Loop& lp : bk.loops) s << "  int64_t v" << lp.var << " = 0;\n";
  s << "  const int64_t lm_m = " << ix(bk.m) << ", lm_n = " << ix(bk.n) << ", lm_k = " << ix(bk.k) << ";\n"
    << "  if (lm_m <= 0 || lm_n <= 0) return;\n";
  const std::string ta = bk.trans_a ? "1" : "0", tb = bk.trans_b ? "1" : "0";
  s << "  const int64_t lm_lda = lm_blas_leading(" << ix(bk.lda) << ", " << (bk.trans_a ? "lm_k" : "lm_m")
    << ", " << (bk.trans_a ? "lm_m" : "lm_k") << ", \"A\");\n"
    << "  const int64_t lm_ldb = lm_blas_leading(" << ix(bk.ldb) << ", " << (bk.trans_b ? "lm_n" : "lm_k")
    << ", " << (bk.trans_b ? "lm_k" : "lm_n") << ", \"B\");\n"
    << "  const int64_t lm_ldd = lm_blas_leading(" << ix(bk.ldd) << ", lm_m, lm_n, \"D\");\n";
  std::string ind = "  ";
  for (const Loop& lp : bk.loops) {
    s << ind << "for (v" << lp.var << " = 0; v" << lp.var << " < " << ix(lp.extent) << "; ++v" << lp.var
      << ")\n";
    ind += "  ";
  }
  const std::string tab = c_type(bk.ab), td = c_type(bk.d_type);
  s << ind << "lm_blas_gemm(" << ta << ", " << tb << ", lm_m, lm_n, lm_k, (const " << tab << "*)lm_bufs["
    << bk.a << "] + (" << ix(bk.off_a) << "), lm_lda, (const " << tab << "*)lm_bufs[" << bk.b << "] + ("
    << ix(bk.off_b) << "), lm_ldb, (" << td << "*)lm_bufs[" << bk.d << "] + (" << ix(bk.off_d)
    << "), lm_ldd, " << (bk.ab == DType::bf16 ? 1 : 0) << ", " << (bk.d_type == DType::bf16 ? 1 : 0)
    << ");\n";
  s << "}\n";
  return s.str();
}

}  // namespace

std::string render_index(const Index& i, const Program& p) {
  std::map<std::string, int> ids;
  for (size_t k = 0; k < p.symbols.size(); ++k) ids[p.symbols[k]] = static_cast<int>(k);
  return index_expr(i, ids);
}

std::vector<KernelResources> in_launch_order(const GpuSource& src, const std::vector<KernelResources>& reported) {
  std::vector<KernelResources> out;
  for (const auto& l : src.launches)
    for (const auto& r : reported)
      if (r.name == l.name) out.push_back(r);
  return out;
}

GpuSource render_gpu(const Program& p, const GpuArch& arch, const ScheduleOf& schedule) {
  validate(p);
  GpuSource out;
  out.prelude = device_prelude(arch) + common_device_code(native_half_conversions(arch));
  std::ostringstream ks;
  ks << "/* ---- generated kernels (" << dialect_name(arch.dialect) << ", " << arch.arch << ", warp "
     << arch.warp << ") ---- */\n";
  for (const Kernel& k : p.kernels) {
    LaunchShape shape;
    shape.grid[1] = Index(1);
    shape.grid[2] = Index(1);
    // A library GEMM the BLAS convention cannot express is rendered as a generated one.
    if (auto bk = arch.dialect == Dialect::Cuda ? blas_kernel(p, k) : std::nullopt) {
      shape.name = k.name;
      shape.grid[0] = Index(1);
      shape.buffers = {bk->a, bk->b, bk->d};
      std::sort(shape.buffers.begin(), shape.buffers.end());
      shape.buffers.erase(std::unique(shape.buffers.begin(), shape.buffers.end()), shape.buffers.end());
      shape.schedule = "library gemm (cuBLASLt)";
      shape.blas = std::make_shared<const BlasKernel>(std::move(*bk));
      ks << "/* " << k.name << ": " << shape.schedule << " */\n\n";
      out.launches.push_back(std::move(shape));
      continue;
    }
    Writer w(p, k, arch, schedule ? schedule(k) : std::vector<int64_t>{});
    ks << w.render(shape);
    out.launches.push_back(std::move(shape));
  }
  out.kernels = ks.str();
  return out;
}

detail::FoldedLaunches folded_launches(const GpuSource& src) {
  detail::FoldedLaunches f;
  for (const LaunchShape& l : src.launches) {
    f.side_kernels += l.side_kernels;
    f.tail_hosts += l.tails.empty() ? 0 : 1;
    f.tails.insert(f.tails.end(), l.tails.begin(), l.tails.end());
  }
  return f;
}

std::string emulation_source(const GpuSource& src, const Program& p, const GpuArch& arch) {
  std::ostringstream s;
  s << emulation_header(arch) << common_device_code() << emulated_fast_math();
  if (arch.mma_m16n8k16) s << emulation_mma_helpers();
  if (arch.async_copy) s << emulation_async_helpers();
  if (arch.mfma_f16) s << emulation_mfma_helpers();
  if (arch.wmma) s << emulation_wmma_helpers();
  s << src.kernels;
  if (library_calls(src)) s << emulated_blas();
  s << "/* ---- host entries (CPU kernel ABI) ---- */\n";
  for (const LaunchShape& l : src.launches) {
    if (l.blas) {
      s << emulated_blas_entry(l, p);
      continue;
    }
    s << "extern \"C\" void " << l.name
      << "_emu(void* const* lm_bufs, const int64_t* lm_syms, const void* lm_rt, void* lm_cx) {\n";
    s << "  (void)lm_rt; (void)lm_cx;\n";
    for (size_t i = 0; i < p.symbols.size(); ++i) s << "  const int64_t s" << i << " = lm_syms[" << i << "];\n";
    s << "  const int64_t lm_g[3] = {" << render_index(l.grid[0], p) << ", " << render_index(l.grid[1], p) << ", "
      << render_index(l.grid[2], p) << "};\n";
    s << "  if (lm_g[0] <= 0 || lm_g[1] <= 0 || lm_g[2] <= 0) return;\n";
    s << "  const dim3 lm_grid = {(unsigned int)lm_g[0], (unsigned int)lm_g[1], (unsigned int)lm_g[2]};\n";
    s << "  const dim3 lm_block = {" << l.block[0] << "u, " << l.block[1] << "u, " << l.block[2] << "u};\n";
    s << "  auto lm_body = [&]() { " << l.name << "(";
    bool first = true;
    for (int b : l.buffers) {
      s << (first ? "" : ", ") << "(" << c_type(p.buffers[static_cast<size_t>(b)].dtype) << "*)lm_bufs[" << b << "]";
      first = false;
    }
    for (size_t i = 0; i < p.symbols.size(); ++i) {
      s << (first ? "" : ", ") << "s" << i;
      first = false;
    }
    s << "); };\n";
    s << "  lm_emu::launch(lm_grid, lm_block, " << (l.sync ? 1 : 0) << ", \"" << l.name << "\", lm_body);\n";
    s << "}\n";
  }
  // The same kernels behind the driver's launch ABI (cuLaunchKernel / hipModuleLaunchKernel:
  // the grid, the block, one pointer per kernel parameter -- a 64-bit device address per
  // buffer, then the symbols), so the device runtime itself runs on the host
  // (tests/gpu/host_device_api.hpp).
  s << "/* ---- host entries (the driver's launch ABI) ---- */\n";
  for (const LaunchShape& l : src.launches) {
    if (l.blas) continue;  // the runtime calls the BLAS (DeviceApi::blas_gemm)
    s << "extern \"C\" void " << l.name
      << "_launch(const unsigned* lm_gd, const unsigned* lm_bd, void** lm_args) {\n";
    s << "  const dim3 lm_grid = {lm_gd[0], lm_gd[1], lm_gd[2]}, lm_block = {lm_bd[0], lm_bd[1], "
         "lm_bd[2]};\n";
    s << "  auto lm_body = [&]() { " << l.name << "(";
    size_t a = 0;
    for (int b : l.buffers) {
      s << (a ? ", " : "") << "(" << c_type(p.buffers[static_cast<size_t>(b)].dtype)
        << "*)(uintptr_t)*(const uint64_t*)lm_args[" << a << "]";
      ++a;
    }
    for (size_t i = 0; i < p.symbols.size(); ++i, ++a)
      s << (a ? ", " : "") << "*(const int64_t*)lm_args[" << a << "]";
    s << "); };\n";
    s << "  lm_emu::launch(lm_grid, lm_block, " << (l.sync ? 1 : 0) << ", \"" << l.name << "\", lm_body);\n";
    s << "}\n";
    // How many parameters (8 bytes each) a launch passes: what a graph capture copies.
    s << "extern \"C\" const int " << l.name << "_nargs = " << a << ";\n";
  }
  if (src.collective_kernels) s << collective_kernel_entries();
  return s.str();
}

}  // namespace luminal::gpu
