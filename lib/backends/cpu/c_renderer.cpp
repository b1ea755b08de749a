#include "backends/cpu/c_renderer.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "backends/cpu/c_prelude.hpp"
#include "kernel/kernel_eval.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

using namespace luminal::kernel;

namespace {

const char* kRuntimeDecls = R"LMC(
/* ---- kernel ABI ---- */
typedef struct lm_runtime {
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
} lm_runtime;
/* integer floor division / modulo (Python semantics) for index expressions */
LM_INLINE int64_t lm_fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
LM_INLINE int64_t lm_fmod_i(int64_t a, int64_t b) { return a - lm_fdiv(a, b) * b; }
LM_INLINE int64_t lm_imin(int64_t a, int64_t b) { return a < b ? a : b; }
LM_INLINE int64_t lm_imax(int64_t a, int64_t b) { return a > b ? a : b; }
/* cblas layout of a strided view: 1 and (trans, ld) when BLAS can read it */
LM_INLINE int lm_blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int* trans, int64_t* ld) {
  if (cs == 1 && (rows == 1 || rs >= cols)) { *trans = 111; *ld = rows == 1 ? (cols > 1 ? cols : 1) : rs; return *ld > 0; }
  if (rs == 1 && (cols == 1 || cs >= rows)) { *trans = 112; *ld = cols == 1 ? (rows > 1 ? rows : 1) : cs; return *ld > 0; }
  return 0;
}
)LMC";

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
  float f = static_cast<float>(v);
  if (std::isnan(f)) return "__builtin_nanf(\"\")";
  if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  s += "f";
  return f < 0 || std::signbit(f) ? "(" + s + ")" : s;
}

std::string literal(double v, DType t) {
  switch (t) {
    case DType::f32:
      return float_literal(v);
    case DType::f16:
      return "((uint16_t)" + std::to_string(f32_to_f16_bits(static_cast<float>(v))) + ")";
    case DType::bf16:
      return "((uint16_t)" + std::to_string(f32_to_bf16_bits(static_cast<float>(v))) + ")";
    case DType::i32:
      return "((int32_t)" + std::to_string(static_cast<int64_t>(v)) + ")";
    case DType::boolean:
      return v != 0 ? "((uint8_t)1)" : "((uint8_t)0)";
  }
  return "0";
}

// Converts a C value `x` of dtype `from` to dtype `to`.
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
      return is_float(from) ? "((int32_t)" + as_f32() + ")" : "((int32_t)" + x + ")";
    case DType::boolean:
      return is_float(from) ? "((uint8_t)(" + as_f32() + " != 0.0f))" : "((uint8_t)(" + x + " != 0))";
  }
  return x;
}

class KernelWriter {
 public:
  KernelWriter(const Program& p, const Kernel& k, const RenderOptions& opt) : p_(p), k_(k), opt_(opt) {
    for (size_t i = 0; i < p.symbols.size(); ++i) sym_ids_[p.symbols[i]] = static_cast<int>(i);
  }

  std::string ix(const Index& i) const {
    const auto& n = i.node();
    auto a = [&](int j) { return ix(n.args[static_cast<size_t>(j)]); };
    auto bin = [&](const char* op) {
      // Built with append: GCC 12 warns falsely (-Wrestrict) on chained operator+ here.
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
        return n.value < 0 ? "(" + std::to_string(n.value) + ")" : std::to_string(n.value);
      case IndexOp::Var:
        if (n.value == renamed_var_) return renamed_as_;
        return "v" + std::to_string(n.value);
      case IndexOp::Sym:
        return "s" + std::to_string(sym_ids_.at(n.name));
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
        return bin("<");
      case IndexOp::Le:
        return bin("<=");
      case IndexOp::Eq:
        return bin("==");
      case IndexOp::And:
        return bin("&&");
      case IndexOp::Select:
        return "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")";
    }
    return "0";
  }

  // Emits SSA temporaries for `e` into `out` (memoized per node) and returns the C value.
  std::string value(const Expr& e, std::map<const ExprNode*, std::string>& memo, std::ostringstream& out,
                    const std::string& ind) {
    const ExprNode& n = e.node();
    if (n.op == ExprOp::Const) return literal(n.constant, n.dtype);
    if (n.op == ExprOp::Acc) return "acc";
    if (auto it = memo.find(&n); it != memo.end()) return it->second;
    std::vector<std::string> a;
    for (const auto& arg : n.args) a.push_back(value(arg, memo, out, ind));
    std::string rhs;
    const bool f = n.dtype == DType::f32;
    switch (n.op) {
      case ExprOp::Load: {
        std::string ld = "b" + std::to_string(n.buffer) + "[" + ix(n.index) + "]";
        rhs = n.valid ? "(" + ix(*n.valid) + ") ? " + ld + " : " + literal(n.fill, n.dtype) : ld;
        break;
      }
      case ExprOp::IndexValue:
        rhs = "(int32_t)" + ix(n.index);
        break;
      case ExprOp::Cast:
        rhs = convert(a[0], n.args[0].dtype(), n.dtype);
        break;
      case ExprOp::Where:
        rhs = a[0] + " ? " + a[1] + " : " + a[2];
        break;
      case ExprOp::Unary:
        rhs = unary(n.unary, f, a[0]);
        break;
      case ExprOp::Binary:
        rhs = binary(n.binary, n.args[0].dtype(), a[0], a[1]);
        break;
      default:
        break;
    }
    std::string name = "t" + std::to_string(tmp_++);
    out << ind << "const " << c_type(n.dtype) << " " << name << " = " << rhs << ";\n";
    memo[&n] = name;
    return name;
  }

  static std::string unary(UnaryOp op, bool f, const std::string& x) {
    switch (op) {
      case UnaryOp::Neg:
        return "-" + x;
      case UnaryOp::Recip:
        return "1.0f / " + x;
      case UnaryOp::Sqrt:
        return "lm_sqrt(" + x + ")";
      case UnaryOp::Exp2:
        return "lm_exp2(" + x + ")";
      case UnaryOp::Log2:
        return "lm_log2(" + x + ")";
      case UnaryOp::Sin:
        return "lm_sin(" + x + ")";
      case UnaryOp::Exp:
        return "lm_exp(" + x + ")";
      case UnaryOp::Log:
        return "lm_log(" + x + ")";
      case UnaryOp::Cos:
        return "lm_cos(" + x + ")";
      case UnaryOp::Tanh:
        return "lm_tanh(" + x + ")";
      case UnaryOp::Sigmoid:
        return "lm_sigmoid(" + x + ")";
      case UnaryOp::Erf:
        return "lm_erf(" + x + ")";
      case UnaryOp::Relu:
        return f ? "lm_relu(" + x + ")" : "(" + x + " < 0 ? 0 : " + x + ")";
      case UnaryOp::Abs:
        return f ? "lm_abs(" + x + ")" : "(" + x + " < 0 ? -" + x + " : " + x + ")";
      case UnaryOp::Not:
        return "(uint8_t)!" + x;
    }
    return x;
  }

  static std::string binary(BinaryOp op, DType t, const std::string& x, const std::string& y) {
    const bool f = t == DType::f32;
    switch (op) {
      case BinaryOp::Add:
        return x + " + " + y;
      case BinaryOp::Sub:
        return x + " - " + y;
      case BinaryOp::Mul:
        return x + " * " + y;
      case BinaryOp::Div:
        return f ? x + " / " + y : "(" + y + " == 0 ? 0 : " + x + " / " + y + ")";
      case BinaryOp::Max:
        return f ? "lm_max(" + x + ", " + y + ")" : "(" + x + " > " + y + " ? " + x + " : " + y + ")";
      case BinaryOp::Min:
        return f ? "lm_min(" + x + ", " + y + ")" : "(" + x + " < " + y + " ? " + x + " : " + y + ")";
      case BinaryOp::Mod:
        return f ? "lm_fmod_floor(" + x + ", " + y + ")"
                 : "(" + y + " == 0 ? 0 : lm_imod_floor(" + x + ", " + y + "))";
      case BinaryOp::LessThan:
        return "(uint8_t)(" + x + " < " + y + ")";
      case BinaryOp::Equal:
        return "(uint8_t)(" + x + " == " + y + ")";
      case BinaryOp::And:
        return "(uint8_t)(" + x + " && " + y + ")";
      case BinaryOp::Or:
        return "(uint8_t)(" + x + " || " + y + ")";
    }
    return x;
  }

  // Buffers this kernel reads and writes.
  void collect(const Expr& e) {
    if (!e.valid()) return;
    if (e.op() == ExprOp::Load) reads_.insert(e.node().buffer);
    for (const auto& a : e.node().args) collect(a);
  }

  void declare_symbols(std::ostringstream& s, const std::string& ind) const {
    for (size_t i = 0; i < p_.symbols.size(); ++i)
      s << ind << "const int64_t s" << i << " = lm_syms[" << i << "]; (void)s" << i << ";\n";
  }

  void declare_buffers(std::ostringstream& s, const std::string& ind, const std::set<int>& reads,
                       const std::set<int>& writes) const {
    std::set<int> all = reads;
    all.insert(writes.begin(), writes.end());
    for (int b : all) {
      const std::string t = c_type(p_.buffers[static_cast<size_t>(b)].dtype);
      const bool w = writes.count(b) > 0, both = w && reads.count(b) > 0;
      s << ind << (w ? "" : "const ") << t << "* " << (both ? "" : "restrict ") << "b" << b << " = ("
        << (w ? "" : "const ") << t << "*)lm_bufs[" << b << "];\n";
    }
  }

  // Opens the loops [0, n) of `ls`; returns the closing braces.
  std::string open_loops(std::ostringstream& s, const std::vector<Loop>& ls, std::string& ind,
                         bool innermost_is_body, bool allow_parallel, const std::string& simd_clause = "") {
    std::string close;
    size_t i = 0;
    while (i < ls.size()) {
      const Loop& l = ls[i];
      size_t group = 1;
      if (allow_parallel && l.parallel && !parallel_used_) {
        while (i + group < ls.size() && ls[i + group].parallel) ++group;
        const Loop& lastg = ls[i + group - 1];
        bool simd = lastg.vectorize && i + group == ls.size() && innermost_is_body;
        s << ind << "#pragma omp parallel for" << (simd ? " simd" : "") << " schedule(static)";
        if (group > 1) s << " collapse(" << group << ")";
        s << (simd ? simd_clause : "") << "\n";
        parallel_used_ = true;
      } else if (l.vectorize && i + 1 == ls.size() && innermost_is_body) {
        // Only the innermost loop of a body gets `omp simd`: simd regions cannot nest,
        // and a reduction's own loops carry theirs.
        s << ind << "#pragma omp simd" << (i + 1 == ls.size() ? simd_clause : "") << "\n";
      }
      for (size_t g = 0; g < group; ++g) {
        const Loop& lg = ls[i + g];
        s << ind << "for (int64_t v" << lg.var << " = 0; v" << lg.var << " < " << ix(lg.extent) << "; ++v"
          << lg.var << ") {\n";
        ind += "  ";
        close = ind.substr(2) + "}\n" + close;
      }
      i += group;
    }
    return close;
  }

  std::string render() {
    switch (k_.kind) {
      case KernelKind::Elementwise:
        return elementwise();
      case KernelKind::Reduction:
        return reduction();
      case KernelKind::Gemm:
        return gemm();
    }
    return {};
  }

  std::string signature() const {
    return "void " + k_.name + "(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt)";
  }

  // True when the expression calls one of the prelude's polynomial functions: such bodies
  // are latency-bound (one long dependent chain per element), not bandwidth-bound.
  static bool heavy(const Expr& e) {
    const ExprNode& n = e.node();
    if (n.op == ExprOp::Unary) {
      switch (n.unary) {
        case UnaryOp::Exp2:
        case UnaryOp::Log2:
        case UnaryOp::Sin:
        case UnaryOp::Exp:
        case UnaryOp::Log:
        case UnaryOp::Cos:
        case UnaryOp::Tanh:
        case UnaryOp::Sigmoid:
        case UnaryOp::Erf:
          return true;
        default:
          break;
      }
    }
    for (const auto& a : n.args)
      if (heavy(a)) return true;
    return false;
  }

  // Elementwise kernel whose innermost loop is vectorized and whose body is heavy: the
  // loop is cut into kInterleave contiguous streams processed in the same iteration, with
  // the SSA statements of the streams interleaved. Each element's computation is a long
  // dependent chain (sin -> exp -> tanh ...); interleaving gives the out-of-order core
  // kInterleave independent chains in its window (measured 1.8x on a 10-op chain).
  static constexpr int kInterleave = 4;
  std::string interleaved_elementwise(std::ostringstream& s, std::string ind) {
    std::vector<Loop> outer(k_.loops.begin(), k_.loops.end() - 1);
    const Loop& in = k_.loops.back();
    std::string close = open_loops(s, outer, ind, false, true);
    const std::string v = "v" + std::to_string(in.var);
    s << ind << "{\n";
    const std::string ind2 = ind + "  ";
    s << ind2 << "const int64_t lm_n = " << ix(in.extent) << ", lm_q = lm_n / " << kInterleave << ";\n";
    if (in.parallel && !parallel_used_) {
      s << ind2 << "#pragma omp parallel for simd schedule(static)\n";
      parallel_used_ = true;
    } else {
      s << ind2 << "#pragma omp simd\n";
    }
    s << ind2 << "for (int64_t lm_i = 0; lm_i < lm_q; ++lm_i) {\n";
    const std::string ind3 = ind2 + "  ";
    std::vector<std::vector<std::string>> lines(kInterleave);
    for (int c = 0; c < kInterleave; ++c) {
      renamed_var_ = in.var;
      renamed_as_ = v + "_" + std::to_string(c);
      std::ostringstream body;
      std::map<const ExprNode*, std::string> memo;
      std::string val = value(k_.store.value, memo, body, ind3);
      body << ind3 << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << val << ";\n";
      std::istringstream in_lines(body.str());
      for (std::string l; std::getline(in_lines, l);) lines[static_cast<size_t>(c)].push_back(l);
      s << ind3 << "const int64_t " << renamed_as_ << " = lm_i + " << c << " * lm_q;\n";
    }
    renamed_var_ = -1;
    for (size_t l = 0; l < lines[0].size(); ++l)
      for (int c = 0; c < kInterleave; ++c) s << lines[static_cast<size_t>(c)][l] << "\n";
    s << ind2 << "}\n";
    // the remaining lm_n % kInterleave elements
    s << ind2 << "for (int64_t " << v << " = lm_q * " << kInterleave << "; " << v << " < lm_n; ++" << v
      << ") {\n";
    std::map<const ExprNode*, std::string> memo;
    std::string val = value(k_.store.value, memo, s, ind3);
    s << ind3 << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << val << ";\n";
    s << ind2 << "}\n" << ind << "}\n" << close << "}\n";
    return s.str();
  }

  std::string elementwise() {
    collect(k_.store.value);
    std::ostringstream s;
    s << signature() << " {\n  (void)lm_rt; (void)lm_syms;\n";
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    if (!k_.loops.empty() && k_.loops.back().vectorize && heavy(k_.store.value)) {
      auto n = k_.loops.back().extent.as_constant();
      if (!n || *n >= 64 * kInterleave) return interleaved_elementwise(s, ind);
    }
    std::string close = open_loops(s, k_.loops, ind, true, true);
    std::map<const ExprNode*, std::string> memo;
    std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close << "}\n";
    return s.str();
  }

  std::string reduction() {
    const Reduction& r = *k_.reduce;
    collect(k_.store.value);
    collect(r.value);
    std::ostringstream s;
    s << signature() << " {\n  (void)lm_rt; (void)lm_syms;\n";
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    std::string close = open_loops(s, k_.loops, ind, false, true);
    const bool is_sum = r.op == ReduceOp::Sum;
    const std::string at = c_type(r.acc_dtype);
    std::string init = is_sum ? literal(0, r.acc_dtype)
                              : (r.acc_dtype == DType::f32 ? std::string("(-__builtin_inff())")
                                                           : std::string("((int32_t)(-2147483647 - 1))"));
    s << ind << at << " acc = " << init << ";\n";
    {
      std::string rind = ind;
      std::string clause = is_sum ? " reduction(+:acc)" : " reduction(max:acc)";
      std::string rclose = open_loops(s, r.loops, rind, true, false, clause);
      std::map<const ExprNode*, std::string> memo;
      std::string v = value(r.value, memo, s, rind);
      if (r.value.dtype() != r.acc_dtype) v = convert(v, r.value.dtype(), r.acc_dtype);
      if (is_sum)
        s << rind << "acc = acc + " << v << ";\n";
      else if (r.acc_dtype == DType::f32)
        s << rind << "acc = lm_max(acc, " << v << ");\n";
      else
        s << rind << "acc = " << v << " > acc ? " << v << " : acc;\n";
      s << rclose;
    }
    std::map<const ExprNode*, std::string> memo;
    std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close << "}\n";
    return s.str();
  }

  std::string gemm() {
    const Gemm& g = *k_.gemm;
    const GemmTile& t = g.tile;
    check_micro_tile(opt_.isa, t.mr, t.nr);
    gemm_configs_.insert({t.mr, t.nr});
    const std::string fn = gemm_function_name(opt_.isa, t.mr, t.nr);
    std::ostringstream s;
    const bool has_epi = g.epilogue.valid() && g.epilogue.op() != ExprOp::Acc;
    // Context carrying what the epilogue needs: buffers, symbols, batch loop variables.
    s << "typedef struct { void* const* lm_bufs; const int64_t* lm_syms;";
    for (const auto& l : k_.loops) s << " int64_t v" << l.var << ";";
    s << " } " << k_.name << "_ctx;\n";
    if (has_epi) {
      collect(g.epilogue);
      s << "static void " << k_.name
        << "_epi(void* lm_ctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {\n"
        << "  const " << k_.name << "_ctx* lm_cx = (const " << k_.name << "_ctx*)lm_ctx;\n"
        << "  void* const* lm_bufs = lm_cx->lm_bufs; const int64_t* lm_syms = lm_cx->lm_syms; (void)lm_bufs; "
           "(void)lm_syms;\n";
      declare_symbols(s, "  ");
      std::set<int> epi_reads = reads_;
      epi_reads.erase(g.c.buffer);  // the epilogue reads C through acc
      declare_buffers(s, "  ", epi_reads, {});
      for (const auto& l : k_.loops)
        s << "  const int64_t v" << l.var << " = lm_cx->v" << l.var << "; (void)v" << l.var << ";\n";
      s << "  for (int64_t lm_r = 0; lm_r < rows; ++lm_r) {\n"
        << "    #pragma omp simd\n"
        << "    for (int64_t lm_c = 0; lm_c < cols; ++lm_c) {\n"
        << "      const int64_t v" << g.row_var << " = i0 + lm_r; (void)v" << g.row_var << ";\n"
        << "      const int64_t v" << g.col_var << " = j0 + lm_c; (void)v" << g.col_var << ";\n"
        << "      const float acc = c[lm_r * ldc + lm_c];\n";
      std::map<const ExprNode*, std::string> memo;
      std::string v = value(g.epilogue, memo, s, "      ");
      s << "      c[lm_r * ldc + lm_c] = " << v << ";\n    }\n  }\n}\n";
    }
    s << signature() << " {\n  (void)lm_rt; (void)lm_syms;\n";
    declare_symbols(s, "  ");
    s << "  const float* A = (const float*)lm_bufs[" << g.a.buffer << "];\n"
      << "  const float* B = (const float*)lm_bufs[" << g.b.buffer << "];\n"
      << "  float* C = (float*)lm_bufs[" << g.c.buffer << "];\n";
    std::string ind = "  ";
    // Batch loops run serially: the GEMM itself is the parallel region.
    std::string close;
    for (const auto& l : k_.loops) {
      s << ind << "for (int64_t v" << l.var << " = 0; v" << l.var << " < " << ix(l.extent) << "; ++v" << l.var
        << ") {\n";
      ind += "  ";
      close = ind.substr(2) + "}\n" + close;
    }
    s << ind << "const int64_t M = " << ix(g.m) << ", N = " << ix(g.n) << ", K = " << ix(g.k) << ";\n"
      << ind << "const float* a = A + " << ix(g.a.offset) << "; const int64_t rsa = " << ix(g.a.row_stride)
      << ", csa = " << ix(g.a.col_stride) << ";\n"
      << ind << "const float* b = B + " << ix(g.b.offset) << "; const int64_t rsb = " << ix(g.b.row_stride)
      << ", csb = " << ix(g.b.col_stride) << ";\n"
      << ind << "float* c = C + " << ix(g.c.offset) << "; const int64_t ldc = " << ix(g.c.row_stride) << ";\n"
      << ind << k_.name << "_ctx cx = {lm_bufs, lm_syms";
    for (const auto& l : k_.loops) s << ", v" << l.var;
    s << "}; (void)cx;\n";
    const std::string epi = has_epi ? k_.name + "_epi" : "(lm_epi_fn)0";
    std::string gen_call = fn + "(M, N, K, a, rsa, csa, b, rsb, csb, c, ldc, " + std::to_string(t.mc) + ", " +
                           std::to_string(t.nc) + ", " + std::to_string(t.kc) + ", " + epi + ", &cx);";
    if (g.impl == GemmImpl::Library) {
      s << ind << "int ta, tb; int64_t lda, ldb;\n"
        << ind
        << "if (lm_rt && lm_rt->sgemm && M > 0 && N > 0 && K > 0 && M < 2147483647 && N < 2147483647 && K < "
           "2147483647\n"
        << ind
        << "    && lm_blas_view(M, K, rsa, csa, &ta, &lda) && lm_blas_view(K, N, rsb, csb, &tb, &ldb)\n"
        << ind << "    && lda < 2147483647 && ldb < 2147483647 && ldc >= N && ldc < 2147483647) {\n"
        << ind
        << "  lm_rt->sgemm(101, ta, tb, (int)M, (int)N, (int)K, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, "
           "(int)ldc);\n";
      if (has_epi)
        s << ind << "  #pragma omp parallel for schedule(static)\n"
          << ind << "  for (int64_t i = 0; i < M; i += 8) " << epi
          << "(&cx, c + i * ldc, ldc, i, 0, M - i < 8 ? M - i : 8, N);\n";
      s << ind << "} else {\n" << ind << "  " << gen_call << "\n" << ind << "}\n";
    } else {
      s << ind << gen_call << "\n";
    }
    s << close << "}\n";
    return s.str();
  }

  const std::set<std::pair<int, int>>& gemm_configs() const { return gemm_configs_; }

 private:
  const Program& p_;
  const Kernel& k_;
  const RenderOptions& opt_;
  std::map<std::string, int> sym_ids_;
  std::set<int> reads_;
  int64_t renamed_var_ = -1;  // a loop variable rendered under another name (interleaving)
  std::string renamed_as_;
  int tmp_ = 0;
  bool parallel_used_ = false;
  std::set<std::pair<int, int>> gemm_configs_;
};

}  // namespace

CProgram render_c(const Program& p, const RenderOptions& opt) {
  validate(p);
  CProgram out;
  std::ostringstream body;
  std::set<std::pair<int, int>> configs;
  for (const auto& k : p.kernels) {
    KernelWriter w(p, k, opt);
    body << "\n/* ---- kernel " << k.name << " ---- */\n" << w.render();
    configs.insert(w.gemm_configs().begin(), w.gemm_configs().end());
    out.kernels.push_back(k.name);
  }
  std::ostringstream s;
  s << c_prelude() << kRuntimeDecls;
  for (const auto& [mr, nr] : configs) s << gemm_source(opt.isa, mr, nr);
  s << body.str();
  s << "\nvoid " << out.entry
    << "(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt) {\n";
  for (const auto& k : p.kernels) s << "  " << k.name << "(lm_bufs, lm_syms, lm_rt);\n";
  s << "  (void)lm_bufs; (void)lm_syms; (void)lm_rt;\n}\n";
  out.source = s.str();
  return out;
}

}  // namespace luminal::cpu
