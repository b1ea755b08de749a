#include "backends/cpu/c_renderer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "backends/cpu/c_prelude.hpp"
#include "backends/cpu/dot_codegen.hpp"
#include "backends/cpu/simd_loads.hpp"
#include "kernel/kernel_eval.hpp"
#include "kernel/lower/affine.hpp"
#include "kernel/op_spelling.hpp"
#include "luminal/error.hpp"

namespace luminal::cpu {

using namespace luminal::kernel;

namespace {

// ---- how C spells each kernel-IR scalar op ("{0}", "{1}": the operands' C values)

constexpr std::array<OpRow<UnaryOp, std::string_view>, kNumUnaryOps> kCUnary = {{
    {UnaryOp::Exp2, "lm_exp2({0})"},
    {UnaryOp::Log2, "lm_log2({0})"},
    {UnaryOp::Sin, "lm_sin({0})"},
    {UnaryOp::Tanh, "lm_tanh({0})"},
    {UnaryOp::Sqrt, "lm_sqrt({0})"},
    {UnaryOp::Recip, "1.0f / {0}"},
    {UnaryOp::Neg, "-{0}"},
    {UnaryOp::Not, "(uint8_t)!{0}"},
    {UnaryOp::Exp, "lm_exp({0})"},
}};
static_assert(covers_every_op(kCUnary), "the C renderer spells every kernel-IR unary op, in enum order");

struct CBinary {
  std::string_view f32;    ///< f32 operands
  std::string_view other;  ///< i32, bool (and f16/bf16 bits, which only cast reads)
};
constexpr std::array<OpRow<BinaryOp, CBinary>, kNumBinaryOps> kCBinary = {{
    {BinaryOp::Add, {"{0} + {1}", "{0} + {1}"}},
    {BinaryOp::Sub, {"{0} - {1}", "{0} - {1}"}},
    {BinaryOp::Mul, {"{0} * {1}", "{0} * {1}"}},
    {BinaryOp::Max, {"lm_max({0}, {1})", "({0} > {1} ? {0} : {1})"}},
    {BinaryOp::Min, {"lm_min({0}, {1})", "({0} < {1} ? {0} : {1})"}},
    {BinaryOp::Mod, {"lm_fmod_floor({0}, {1})", "({1} == 0 ? 0 : lm_imod_floor({0}, {1}))"}},
    {BinaryOp::LessThan, {"(uint8_t)({0} < {1})", "(uint8_t)({0} < {1})"}},
    {BinaryOp::Equal, {"(uint8_t)({0} == {1})", "(uint8_t)({0} == {1})"}},
    {BinaryOp::And, {"(uint8_t)({0} && {1})", "(uint8_t)({0} && {1})"}},
    {BinaryOp::Or, {"(uint8_t)({0} || {1})", "(uint8_t)({0} || {1})"}},
}};
static_assert(covers_every_op(kCBinary), "the C renderer spells every kernel-IR binary op, in enum order");

// Horizontal sums of vw vectors of vw partial sums (key k's at p + k * vw) into out[0, vw):
// a transposing tree of lane shuffles and adds, about 3 operations per sum. Emitted once per
// translation unit (guarded) by the attention kernels' few-rows path.
constexpr const char* kHsum16 = R"(#ifndef LM_HSUM_16
#define LM_HSUM_16
static inline void lm_hsum_16(const float* p, float* out) {
  __m512 c[8], d[4], e[2];
  for (int i = 0; i < 8; ++i) {  /* [key 2i: 8 lanes | key 2i+1: 8 lanes] */
    const __m512 a = _mm512_loadu_ps(p + 32 * i), b = _mm512_loadu_ps(p + 32 * i + 16);
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
  for (int j = 0; j < 4; ++j)  /* 128-bit block q: key 4j+q, 4 lanes */
    d[j] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * j], c[2 * j + 1], 0x88),
                         _mm512_shuffle_f32x4(c[2 * j], c[2 * j + 1], 0xDD));
  for (int j = 0; j < 2; ++j)  /* block q: keys 8j+q, 8j+4+q, 2 lanes each */
    e[j] = _mm512_add_ps(_mm512_shuffle_ps(d[2 * j], d[2 * j + 1], 0x44),
                         _mm512_shuffle_ps(d[2 * j], d[2 * j + 1], 0xEE));
  /* lane 4q+i: the sum of key q+4i */
  const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], 0x88), _mm512_shuffle_ps(e[0], e[1], 0xDD));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  _mm512_storeu_ps(out, _mm512_permutexvar_ps(idx, f));
}
#endif
)";
constexpr const char* kHsum8 = R"(#ifndef LM_HSUM_8
#define LM_HSUM_8
static inline void lm_hsum_8(const float* p, float* out) {
  __m256 c[4], d[2];
  for (int i = 0; i < 4; ++i) {  /* [key 2i: 4 lanes | key 2i+1: 4 lanes] */
    const __m256 a = _mm256_loadu_ps(p + 16 * i), b = _mm256_loadu_ps(p + 16 * i + 8);
    c[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  }
  for (int j = 0; j < 2; ++j)  /* block h: keys 4j+h, 4j+2+h, 2 lanes each */
    d[j] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * j], c[2 * j + 1], 0x44),
                         _mm256_shuffle_ps(c[2 * j], c[2 * j + 1], 0xEE));
  /* block h: the sums of keys h, h+2, h+4, h+6 */
  const __m256 f = _mm256_add_ps(_mm256_shuffle_ps(d[0], d[1], 0x88), _mm256_shuffle_ps(d[0], d[1], 0xDD));
  _mm256_storeu_ps(out, _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}
#endif
)";

const char* kRuntimeDecls = R"LMC(
/* ---- kernel ABI: the host's services and the call's threads (no OpenMP runtime) ---- */
typedef void (*lm_task_fn)(void* env, int64_t lo, int64_t hi, int tid);
typedef struct lm_runtime {
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
  int (*threads)(void* cx);
  void (*parallel_for)(void* cx, int64_t n, int64_t chunk, lm_task_fn fn, const void* env,
                       int64_t env_bytes, int nowait);
  void* (*scratch)(void* cx, int tid, int64_t bytes);
  void (*barrier)(void* cx);
} lm_runtime;
/* What a kernel's task (its parallel loop, outlined) needs: the kernel's arguments. */
typedef struct { void* const* lm_bufs; const int64_t* lm_syms; const lm_runtime* lm_rt; void* lm_cx; } lm_kargs;
/* Query rows per task of an attention kernel: a block of up to `block` rows, fewer when
   the batch points (a grouped kernel's KV heads) leave threads idle -- each task then
   streams its KV head's keys again, which beats idle cores. */
LM_INLINE int64_t lm_attn_rows(const lm_runtime* rt, void* cx, int64_t batch, int64_t m, int64_t block) {
  int64_t rows = m < block ? m : block;
  const int64_t threads = (int64_t)rt->threads(cx);
  if (batch > 0 && rows > 1 && batch * ((m + rows - 1) / rows) < threads) {
    const int64_t per = (threads + batch - 1) / batch; /* tasks wanted per batch point */
    rows = (m + per - 1) / per;
  }
  return rows > 0 ? rows : 1;
}
/* Chunk size of a parallel loop of n iterations: about 8 chunks per thread (a multiple
   of `align`). On a shared machine the OS takes a core away for milliseconds at a time;
   with static halves the other thread then waits at the end, with chunks it takes over
   the descheduled thread's remaining share. */
LM_INLINE int64_t lm_chunk(const lm_runtime* rt, void* cx, int64_t n, int64_t align) {
  const int64_t parts = 8 * (int64_t)rt->threads(cx);
  int64_t c = (n + parts - 1) / parts;
  c = (c + align - 1) / align * align;
  return c > 0 ? c : 1;
}
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
    std::string name = "t" + std::to_string(tmp_++);
    out << ind << "const " << c_type(n.dtype) << " " << name << " = " << rhs_of(n, a) << ";\n";
    memo[&n] = name;
    return name;
  }

  // The C expression computing node `n` from its arguments' C values `a`.
  std::string rhs_of(const ExprNode& n, const std::vector<std::string>& a) const {
    std::string rhs;
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
        rhs = unary(n.unary, a[0]);
        break;
      case ExprOp::Binary:
        rhs = binary(n.binary, n.args[0].dtype(), a[0], a[1]);
        break;
      default:
        break;
    }
    return rhs;
  }

  static std::string unary(UnaryOp op, const std::string& x) {
    return kernel::fill_template(kernel::row_of(kCUnary, op).spelling, {x});
  }

  static std::string binary(BinaryOp op, DType t, const std::string& x, const std::string& y) {
    const CBinary& b = kernel::row_of(kCBinary, op).spelling;
    return kernel::fill_template(t == DType::f32 ? b.f32 : b.other, {x, y});
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

  // Whether a kernel's parallel loop is worth the team: kernels of fewer than 32768 loop
  // iterations in all (a decode step's norms, RoPE, softmax: a few thousand elements,
  // microseconds of work) run on the calling thread. A parallel loop costs a hand-off to
  // the workers and a wait at the next dependent kernel, and on a shared machine that wait
  // can be a scheduler slice for a descheduled worker. "1" when an extent depends on a
  // loop variable.
  std::string worth_parallel() const {
    std::string w = "1";
    auto add = [&](const std::vector<Loop>& ls) {
      for (const auto& l : ls) {
        if (uses_var(l.extent)) return false;
        w += " * (double)(" + ix(l.extent) + ")";
      }
      return true;
    };
    if (!add(k_.loops) || (k_.reduce && !add(k_.reduce->loops))) return "1";
    return "(" + w + " >= 32768.0)";
  }

  // The leading loops of `ls` that form the kernel's parallel range (the outlined task's
  // [lm_lo, lm_hi), over their collapsed iteration space): consecutive parallel loops from
  // the first, with extents free of loop variables. 0: the kernel runs serially (a
  // parallel loop inside a serial one would cost a hand-off per outer iteration).
  static size_t task_group(const std::vector<Loop>& ls) {
    size_t g = 0;
    while (g < ls.size() && ls[g].parallel && !uses_var(ls[g].extent)) ++g;
    return g;
  }

  // "1 * (e0) * (e1)": iterations of the first `g` loops of `ls` ("" when g == 0).
  std::string group_total(const std::vector<Loop>& ls, size_t g) const {
    if (g == 0) return {};
    std::string t = "1";
    for (size_t i = 0; i < g; ++i) t += " * (" + ix(ls[i].extent) + ")";
    return t;
  }

  // Opens the loops of `ls`; returns the closing braces. The first `group` loops iterate
  // the task's range [lm_lo, lm_hi) of their collapsed space: one loop over the range, or,
  // for several, rows of the innermost one (the outer indices decomposed once per row, so
  // the row loop stays a plain, vectorizable loop).
  // `before_last` (optional) writes code right before the innermost loop opens, with
  // every outer loop variable in scope, at the indentation it is given; it also gets the
  // C bounds [lo, hi) that loop will iterate.
  std::string open_loops(std::ostringstream& s, const std::vector<Loop>& ls, std::string& ind,
                         bool innermost_is_body, size_t group, const std::string& simd_clause = "",
                         const std::function<void(const std::string&, const std::string&,
                                                  const std::string&)>& before_last = {}) {
    std::string close;
    auto open = [&](const std::string& header) {
      s << ind << header << " {\n";
      ind += "  ";
      close = ind.substr(2) + "}\n" + close;
    };
    // Only the innermost loop of a body gets `omp simd` (a hint, -fopenmp-simd: no
    // OpenMP runtime): simd regions cannot nest, and a reduction's own loops carry theirs.
    auto simd = [&](size_t i) {
      if (ls[i].vectorize && i + 1 == ls.size() && innermost_is_body)
        s << ind << "#pragma omp simd" << simd_clause << "\n";
    };
    // not "v" + to_string: GCC 12 warns falsely (-Wrestrict) on that form
    auto var = [&](size_t i) { return std::to_string(ls[i].var).insert(0, 1, 'v'); };
    auto last = [&](size_t i, const std::string& lo, const std::string& hi) {
      if (before_last && i + 1 == ls.size()) before_last(ind, lo, hi);
    };
    size_t i = 0;
    if (group == 1) {
      last(0, "lm_lo", "lm_hi");
      simd(0);
      open("for (int64_t " + var(0) + " = lm_lo; " + var(0) + " < lm_hi; ++" + var(0) + ")");
      i = 1;
    } else if (group > 1) {
      const std::string e = "(" + ix(ls[group - 1].extent) + ")";
      open("for (int64_t lm_i = lm_lo; lm_i < lm_hi;)");
      s << ind << "int64_t lm_r = lm_i;\n"
        << ind << "const int64_t lm_s = lm_r % " << e << "; lm_r /= " << e << ";\n";
      for (size_t j = group - 1; j-- > 1;) {
        const std::string ej = "(" + ix(ls[j].extent) + ")";
        s << ind << "const int64_t " << var(j) << " = lm_r % " << ej << "; lm_r /= " << ej << ";\n";
      }
      s << ind << "const int64_t " << var(0) << " = lm_r;\n"
        << ind << "const int64_t lm_e = lm_hi - lm_i < " << e << " - lm_s ? lm_s + (lm_hi - lm_i) : " << e
        << ";\n"
        << ind << "lm_i += lm_e - lm_s;\n";
      last(group - 1, "lm_s", "lm_e");
      simd(group - 1);
      open("for (int64_t " + var(group - 1) + " = lm_s; " + var(group - 1) + " < lm_e; ++" + var(group - 1) +
           ")");
      i = group;
    }
    for (; i < ls.size(); ++i) {
      last(i, "0", "(" + ix(ls[i].extent) + ")");
      simd(i);
      open("for (int64_t " + var(i) + " = 0; " + var(i) + " < " + ix(ls[i].extent) + "; ++" + var(i) + ")");
    }
    return close;
  }

  // The kernel function around `body` (declarations and loops). With a parallel range
  // (`total` non-empty) the body becomes the kernel's task, called over [0, total) by the
  // call's team when `cond` holds, else inline; `align`: chunk multiple.
  std::string finish(const std::string& body, const std::string& total, int align, std::string cond = {}) {
    std::ostringstream s;
    if (total.empty()) {
      s << signature() << " {\n  (void)lm_rt; (void)lm_syms; (void)lm_cx;\n" << body << "}\n";
      return s.str();
    }
    if (cond.empty()) cond = worth_parallel();
    const std::string task = k_.name + "_task";
    s << "static void " << task << "(void* lm_env, int64_t lm_lo, int64_t lm_hi, int lm_tid) {\n"
      << "  const lm_kargs* lm_ka = (const lm_kargs*)lm_env;\n"
      << "  void* const* lm_bufs = lm_ka->lm_bufs; const int64_t* lm_syms = lm_ka->lm_syms;\n"
      << "  (void)lm_bufs; (void)lm_syms; (void)lm_tid;\n"
      << body << "}\n";
    s << signature() << " {\n  (void)lm_syms;\n";
    declare_symbols(s, "  ");
    s << "  const int64_t lm_total = " << total << ";\n"
      << "  const lm_kargs lm_ka = {lm_bufs, lm_syms, lm_rt, lm_cx};\n"
      << "  if (" << cond << ")\n"
      << "    lm_rt->parallel_for(lm_cx, lm_total, lm_chunk(lm_rt, lm_cx, lm_total, " << align << "), "
      << task << ", &lm_ka, sizeof lm_ka, 1);\n"
      << "  else if (lm_total > 0)\n"
      << "    " << task << "((void*)&lm_ka, 0, lm_total, 0);\n"
      << "}\n";
    return s.str();
  }

  std::string render() {
    switch (k_.kind) {
      case KernelKind::Elementwise:
        return elementwise();
      case KernelKind::Reduction:
        return reduction();
      case KernelKind::Gemm:
        return gemm();
      case KernelKind::Gather:
        return gather();
      case KernelKind::Attention:
        return attention();
    }
    return {};
  }

  std::string signature() const {
    return "void " + k_.name +
           "(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt, void* lm_cx)";
  }

  // True for a call of one of the prelude's polynomial functions (tens of dependent
  // vector instructions each).
  static bool heavy_node(const ExprNode& n) {
    return n.op == ExprOp::Unary && kernel::is_transcendental(n.unary);
  }

  static bool leaf(const ExprNode& n) {
    return n.op == ExprOp::Const || n.op == ExprOp::Acc || n.op == ExprOp::Load || n.op == ExprOp::IndexValue;
  }

  // The most heavy calls on one path from a load to the root (memoized per node).
  static int heavy_depth(const Expr& e, std::map<const ExprNode*, int>& memo) {
    const ExprNode& n = e.node();
    if (auto it = memo.find(&n); it != memo.end()) return it->second;
    int d = 0;
    for (const auto& a : n.args) d = std::max(d, heavy_depth(a, memo));
    d += heavy_node(n) ? 1 : 0;
    memo[&n] = d;
    return d;
  }

  // Assigns each interior node the stage that computes it: the latest stage among its
  // arguments, where a heavy call's result is only available in the next stage. Leaves
  // (loads, constants) are recomputed in every stage that uses them. `order` receives the
  // interior nodes in a topological order.
  static int assign_stage(const Expr& e, std::map<const ExprNode*, int>& stage,
                          std::vector<const ExprNode*>& order) {
    const ExprNode& n = e.node();
    if (leaf(n)) return 0;
    if (auto it = stage.find(&n); it == stage.end()) {
      int s = 0;
      for (const auto& a : n.args) s = std::max(s, assign_stage(a, stage, order));
      stage[&n] = s;
      order.push_back(&n);
    }
    const int s = stage.at(&n);
    return heavy_node(n) ? s + 1 : s;
  }

  // Elementwise kernel whose innermost loop is vectorized and whose body chains two or
  // more heavy calls (sin -> exp -> tanh ...). Fused into one loop, each element is one
  // dependent chain of hundreds of instructions: the out-of-order window holds only 2-3
  // of them, so the core idles on latency (measured ~150 cycles per 16 floats on a
  // 10-op chain whose calls alone take ~65). Instead, the loop runs in blocks of
  // kStageBlock elements, and each block in stages, one stage per heavy call: a short
  // `omp simd` loop over the block whose results go to an L1-resident stack array the
  // next stage reads. Each stage loop is throughput-bound again (measured 2.3x on that
  // chain). Every element is computed by the same operations in the same order, so the
  // results are bit-identical to the fused loop.
  static constexpr int kStageBlock = 512;
  std::string staged_elementwise(std::ostringstream& s, std::string ind) {
    std::map<const ExprNode*, int> stage;
    std::vector<const ExprNode*> order;
    assign_stage(k_.store.value, stage, order);
    const ExprNode* root = &k_.store.value.node();
    // Light operations after the last heavy call get a stage of their own: merged into
    // the sigmoid's loop, the chain's tail (relu, *2, +x, *y, the store) made that loop
    // slower by more than the extra pass through L1 costs (one thread: 16.7 vs 13.6 ms).
    const int last = stage.at(root);
    // interior nodes read by a later stage are kept in a block array
    std::map<const ExprNode*, std::string> spill;
    std::vector<const ExprNode*> spilled;  // in `order`: declarations must not depend on addresses
    for (const ExprNode* n : order)
      for (const auto& a : n->args) {
        const ExprNode* an = &a.node();
        if (!leaf(*an) && stage.at(an) < stage.at(n) && !spill.count(an)) {
          spill[an] = "lm_st" + std::to_string(spill.size());
          spilled.push_back(an);
        }
      }
    std::vector<Loop> outer(loops_.begin(), loops_.end() - 1);
    const Loop& in = loops_.back();
    // The parallel range: the outer loops' leading parallel group, else (no outer loop)
    // the blocks of the inner loop.
    const size_t g = task_group(outer);
    const bool block_range = outer.empty() && in.parallel && !uses_var(in.extent);
    std::string close = open_loops(s, outer, ind, false, g);
    const std::string v = "v" + std::to_string(in.var);
    s << ind << "{\n";
    std::string ind2 = ind + "  ";
    s << ind2 << "const int64_t lm_n = " << ix(in.extent) << ";\n";
    if (block_range)
      s << ind2 << "for (int64_t lm_b = lm_lo * " << kStageBlock << "; lm_b < lm_n && lm_b < lm_hi * "
        << kStageBlock << "; lm_b += " << kStageBlock << ") {\n";
    else
      s << ind2 << "for (int64_t lm_b = 0; lm_b < lm_n; lm_b += " << kStageBlock << ") {\n";
    const std::string ind3 = ind2 + "  ", ind4 = ind3 + "  ";
    s << ind3 << "const int64_t lm_len = lm_n - lm_b < " << kStageBlock << " ? lm_n - lm_b : " << kStageBlock
      << ";\n";
    for (const ExprNode* n : spilled)
      s << ind3 << c_type(n->dtype) << " " << spill.at(n) << "[" << kStageBlock
        << "] __attribute__((aligned(64)));\n";
    for (int st = 0; st <= last; ++st) {
      s << ind3 << "#pragma omp simd\n"
        << ind3 << "for (int64_t lm_j = 0; lm_j < lm_len; ++lm_j) {\n"
        << ind4 << "const int64_t " << v << " = lm_b + lm_j; (void)" << v << ";\n";
      std::map<const ExprNode*, std::string> memo;  // this stage's values (leaves included)
      for (const ExprNode* n : order) {
        if (stage.at(n) != st) continue;
        std::vector<std::string> a;
        for (const auto& arg : n->args) {
          const ExprNode* an = &arg.node();
          if (leaf(*an))
            a.push_back(value(arg, memo, s, ind4));
          else if (stage.at(an) < st)
            a.push_back(spill.at(an) + "[lm_j]");
          else
            a.push_back(memo.at(an));
        }
        std::string name = std::to_string(tmp_++).insert(0, 1, 't');  // not "t" + ...: GCC 12 -Wrestrict
        s << ind4 << "const " << c_type(n->dtype) << " " << name << " = " << rhs_of(*n, a) << ";\n";
        memo[n] = name;
        if (auto it = spill.find(n); it != spill.end())
          s << ind4 << it->second << "[lm_j] = " << name << ";\n";
      }
      if (st == last)
        s << ind4 << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << memo.at(root) << ";\n";
      s << ind3 << "}\n";
    }
    s << ind2 << "}\n" << ind << "}\n" << close;
    const std::string total = g > 0 ? group_total(outer, g)
                              : block_range
                                  ? "((" + ix(in.extent) + ") + " + std::to_string(kStageBlock - 1) + ") / " +
                                        std::to_string(kStageBlock)
                                  : std::string();
    return finish(s.str(), total, 1);
  }

  // Row copies; the host has checked every id before the call (CpuExecutable), the
  // clamp only guarantees no read outside the table whatever the buffer holds.
  std::string gather() {
    const Gather& g = *k_.gather;
    std::ostringstream s;
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", {g.table, g.ids}, {g.out});
    const std::string t = c_type(p_.buffers[static_cast<size_t>(g.out)].dtype);
    s << "  const int64_t lm_rows = " << ix(g.rows) << ", lm_row = " << ix(g.row) << ";\n"
      << "  for (int64_t i = lm_lo; i < lm_hi; ++i) {\n"
      << "    int64_t id = b" << g.ids << "[i];\n"
      << "    if (id < 0 || id >= lm_rows) id = 0;\n"
      << "    const " << t << "* restrict src = b" << g.table << " + id * lm_row;\n"
      << "    " << t << "* restrict dst = b" << g.out << " + i * lm_row;\n"
      << "    #pragma omp simd\n"
      << "    for (int64_t j = 0; j < lm_row; ++j) dst[j] = src[j];\n"
      << "  }\n";
    return finish(s.str(), ix(g.count), 1,
                  "(double)(" + ix(g.count) + ") * (double)(" + ix(g.row) + ") >= 65536.0");
  }

  // The loops of an elementwise kernel without those of constant extent 1 (their
  // variables are declared 0 in `s`). The lowering can leave a unit loop innermost and
  // mark it as the vectorized one (a trailing dim of size 1 after a reshape: SiLU and
  // RoPE in a decoder block), which leaves the real loop scalar: the next loop out is
  // vectorized instead, and keeps its OpenMP worksharing only when no outer loop has it.
  std::vector<Loop> drop_unit_loops(std::ostringstream& s) const {
    std::vector<Loop> out;
    bool vec = false;
    for (const auto& l : k_.loops) {
      auto n = l.extent.as_constant();
      if (n && *n == 1 && k_.loops.size() > 1) {
        s << "  const int64_t v" << l.var << " = 0; (void)v" << l.var << ";\n";
        vec |= l.vectorize;
        continue;
      }
      out.push_back(l);
    }
    if (out.empty()) return k_.loops;
    if (vec && !out.back().vectorize) {
      out.back().vectorize = true;
      bool outer_parallel = false;
      for (size_t i = 0; i + 1 < out.size(); ++i) outer_parallel |= out[i].parallel;
      if (outer_parallel) out.back().parallel = false;
    }
    return out;
  }

  std::string elementwise() {
    collect(k_.store.value);
    std::ostringstream s;
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    loops_ = drop_unit_loops(s);
    if (!loops_.empty() && loops_.back().vectorize && !reads_.count(k_.store.buffer)) {
      std::map<const ExprNode*, int> depth;
      auto n = loops_.back().extent.as_constant();
      if (heavy_depth(k_.store.value, depth) >= 2 && (!n || *n >= 64)) return staged_elementwise(s, ind);
    }
    const size_t g = task_group(loops_);
    std::string close = open_loops(s, loops_, ind, true, g);
    std::map<const ExprNode*, std::string> memo;
    std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close;
    const bool simd_range = g > 0 && g == loops_.size() && loops_.back().vectorize;
    return finish(s.str(), group_total(loops_, g), simd_range ? 64 : 1);
  }

  // ---- row dot products: sum_k x[k] * w[row, k] per output row (dot_codegen.hpp)

  // Whether expression `e` reads loop variable `var` (in an address, a validity
  // predicate or an index value).
  static bool expr_uses_var(const Expr& e, int64_t var) {
    const ExprNode& n = e.node();
    if ((n.op == ExprOp::Load || n.op == ExprOp::IndexValue) && uses_var(n.index, var)) return true;
    if (n.valid && uses_var(*n.valid, var)) return true;
    for (const auto& a : n.args)
      if (expr_uses_var(a, var)) return true;
    return false;
  }

  // Elements of a computed x kept on the stack (16 KiB); a longer one keeps the generic loop.
  static constexpr int64_t kRowDotStageMax = 4096;

  struct RowDot {
    Expr x;                       // f32, the same for every row of the innermost loop
    const ExprNode* w = nullptr;  // the weight row: a load, unit stride along k
    bool x_in_place = false;      // x is a unit-stride f32 load: read where it is
  };

  // A Sum reduction over one vectorized loop k whose value is x * w, where w is a load
  // (f32, or f16/bf16 under a cast to f32) with unit stride along k and x does not depend
  // on the kernel's innermost loop (the row): every one-row product x @ W^T, with what
  // fusion put around it. The store must not write a buffer the kernel reads (x is read
  // once for many rows).
  std::optional<RowDot> row_dot() const {
    const Reduction& r = *k_.reduce;
    if (r.op != ReduceOp::Sum || r.acc_dtype != DType::f32 || r.loops.size() != 1 || k_.loops.empty())
      return std::nullopt;
    const Loop& kl = r.loops[0];
    if (!kl.vectorize || uses_var(kl.extent) || reads_.count(k_.store.buffer)) return std::nullopt;
    const ExprNode& v = r.value.node();
    if (v.op != ExprOp::Binary || v.binary != BinaryOp::Mul || v.dtype != DType::f32) return std::nullopt;
    const int64_t kv = kl.var, row = k_.loops.back().var;
    auto unit_load = [&](const Expr& e, bool half_ok) -> const ExprNode* {
      const ExprNode* n = &e.node();
      if (half_ok && n->op == ExprOp::Cast && n->args.size() == 1 &&
          (n->args[0].dtype() == DType::f16 || n->args[0].dtype() == DType::bf16))
        n = &n->args[0].node();
      if (n->op != ExprOp::Load || n->valid || (!half_ok && n->dtype != DType::f32)) return nullptr;
      auto st = var_stride(n->index, kv);
      return st && *st == 1 ? n : nullptr;
    };
    for (size_t side = 0; side < 2; ++side) {
      const Expr& x = v.args[1 - side];
      const ExprNode* w = unit_load(v.args[side], true);
      if (!w || expr_uses_var(x, row)) continue;
      RowDot d{x, w, unit_load(x, false) != nullptr};
      auto n = kl.extent.as_constant();
      if (!d.x_in_place && (!n || *n > kRowDotStageMax)) continue;
      return d;
    }
    return std::nullopt;
  }

  // The row-dot reduction: x computed once per run of rows (before the innermost loop)
  // unless it is read in place, then per row one call of the generated dot product and
  // the store's epilogue.
  std::string row_dot_reduction(const RowDot& d) {
    const Loop& kl = k_.reduce->loops[0];
    const std::string kvar = std::to_string(kl.var).insert(0, 1, 'v');  // GCC 12 -Wrestrict on "v" + ...
    const DType wdt = d.w->dtype;
    dot_configs_.insert(wdt);
    std::ostringstream s;
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    const size_t g = task_group(k_.loops);
    auto stage = [&](const std::string& in, const std::string&, const std::string&) {
      if (d.x_in_place) return;
      const int64_t n = std::max<int64_t>(*kl.extent.as_constant(), 1);
      s << in << "float lm_x[" << n << "] __attribute__((aligned(64)));\n"
        << in << "#pragma omp simd\n"
        << in << "for (int64_t " << kvar << " = 0; " << kvar << " < " << ix(kl.extent) << "; ++" << kvar
        << ") {\n";
      std::map<const ExprNode*, std::string> memo;
      const std::string xv = value(d.x, memo, s, in + "  ");
      s << in << "  lm_x[" << kvar << "] = " << xv << ";\n" << in << "}\n";
    };
    std::string close = open_loops(s, k_.loops, ind, false, g, "", stage);
    // the row's operands at k = 0: their addresses with the reduce variable bound to 0
    auto at_k0 = [&](const ExprNode& ld) {
      return "b" + std::to_string(ld.buffer) + " + (" + ix(ld.index) + ")";
    };
    s << ind << "const float* lm_xp;\n"
      << ind << "const " << c_type(wdt) << "* lm_wp;\n"
      << ind << "{\n"
      << ind << "  const int64_t " << kvar << " = 0; (void)" << kvar << ";\n"
      << ind << "  lm_xp = " << (d.x_in_place ? at_k0(d.x.node()) : std::string("lm_x")) << ";\n"
      << ind << "  lm_wp = " << at_k0(*d.w) << ";\n"
      << ind << "}\n"
      << ind << "const float acc = " << dot_function_name(opt_.isa, wdt) << "(lm_xp, lm_wp, " << ix(kl.extent)
      << "); (void)acc;\n";
    std::map<const ExprNode*, std::string> memo;
    const std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close;
    return finish(s.str(), group_total(k_.loops, g), 1);
  }

  // ---- reductions vectorized along the rows: the reduce loop outside, the rows inside

  // Partial sums a stack block holds (4 KiB).
  static constexpr int64_t kRowsBlockMax = 1024;

  // The stride along `var` of the address a load reads where it is valid (a padded
  // load's index select(c, i, fallback), with c free of var, reads i).
  static std::optional<int64_t> read_stride(const ExprNode& ld, int64_t var) {
    const Index* i = &ld.index;
    if (i->node().op == IndexOp::Select && !uses_var(i->node().args[0], var)) i = &i->node().args[1];
    return var_stride(*i, var);
  }

  static void loads_of(const Expr& e, std::vector<const ExprNode*>& out) {
    if (e.op() == ExprOp::Load) out.push_back(&e.node());
    for (const auto& a : e.node().args) loads_of(a, out);
  }

  // A Sum reduction whose data runs along the rows rather than along k: a load is
  // unit-stride along the kernel's innermost loop (the row), and no load that changes
  // with the row is unit-stride along k. Attention's P.V for one query is one: the
  // probabilities run along the keys k (the same for every row), V[k, d] along the rows
  // d. Vectorized along k each lane would read another row of V; along the rows every
  // load is a contiguous vector or a broadcast. The rows (a constant extent of 8 to
  // kRowsBlockMax) keep their partial sums in a stack block.
  bool rows_vectorize() const {
    const Reduction& r = *k_.reduce;
    if (r.op != ReduceOp::Sum || r.acc_dtype != DType::f32 || r.loops.size() != 1 || k_.loops.empty())
      return false;
    const Loop& kl = r.loops[0];
    const Loop& rl = k_.loops.back();
    auto rows = rl.extent.as_constant();
    if (!kl.vectorize || uses_var(kl.extent) || !rows || *rows < 8 || *rows > kRowsBlockMax ||
        reads_.count(k_.store.buffer))
      return false;
    std::vector<const ExprNode*> lds;
    loads_of(r.value, lds);
    bool along_rows = false;
    for (const ExprNode* ld : lds) {
      auto sr = read_stride(*ld, rl.var), sk = read_stride(*ld, kl.var);
      if (sk && *sk == 1 && !(sr && *sr == 0)) return false;
      along_rows |= sr && *sr == 1;
    }
    return along_rows;
  }

  std::string rows_reduction() {
    const Reduction& r = *k_.reduce;
    const Loop& kl = r.loops[0];
    const Loop& rl = k_.loops.back();
    const std::string kvar = std::to_string(kl.var).insert(0, 1, 'v'),
                      rvar = std::to_string(rl.var).insert(0, 1, 'v');
    std::ostringstream s;
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    const size_t g = task_group(k_.loops);
    // the run of rows [lo, hi) the innermost loop will visit: its sums first, k outside
    auto block = [&](const std::string& in, const std::string& lo, const std::string& hi) {
      s << in << "float lm_acc[" << *rl.extent.as_constant() << "] __attribute__((aligned(64)));\n"
        << in << "const int64_t lm_r0 = " << lo << ", lm_rn = " << hi << " - lm_r0;\n"
        << in << "for (int64_t lm_j = 0; lm_j < lm_rn; ++lm_j) lm_acc[lm_j] = 0.0f;\n"
        << in << "for (int64_t " << kvar << " = 0; " << kvar << " < " << ix(kl.extent) << "; ++" << kvar
        << ") {\n"
        << in << "  #pragma omp simd\n"
        << in << "  for (int64_t lm_j = 0; lm_j < lm_rn; ++lm_j) {\n"
        << in << "    const int64_t " << rvar << " = lm_r0 + lm_j;\n";
      std::map<const ExprNode*, std::string> memo;
      std::string v = value(r.value, memo, s, in + "    ");
      if (r.value.dtype() != r.acc_dtype) v = convert(v, r.value.dtype(), r.acc_dtype);
      s << in << "    lm_acc[lm_j] = lm_acc[lm_j] + " << v << ";\n" << in << "  }\n" << in << "}\n";
    };
    std::string close = open_loops(s, k_.loops, ind, false, g, "", block);
    s << ind << "const float acc = lm_acc[" << rvar << " - lm_r0]; (void)acc;\n";
    std::map<const ExprNode*, std::string> memo;
    const std::string v = value(k_.store.value, memo, s, ind);
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close;
    return finish(s.str(), group_total(k_.loops, g), 1);
  }

  std::string reduction() {
    const Reduction& r = *k_.reduce;
    if (!r.more.empty())  // (lower::Options::row_accumulators)
      throw InternalError("[cpu] kernel " + k_.name + ": several accumulators are the GPU row reduction's");
    collect(k_.store.value);
    collect(r.value);
    if (rows_vectorize() && !row_dot()) return rows_reduction();
    if (auto d = row_dot()) return row_dot_reduction(*d);
    std::ostringstream s;
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads_, {k_.store.buffer});
    std::string ind = "  ";
    const size_t g = task_group(k_.loops);
    std::string close = open_loops(s, k_.loops, ind, false, g);
    const bool is_sum = r.op == ReduceOp::Sum;
    const std::string at = c_type(r.acc_dtype);
    std::string init = is_sum ? literal(0, r.acc_dtype)
                              : (r.acc_dtype == DType::f32 ? std::string("(-__builtin_inff())")
                                                           : std::string("((int32_t)(-2147483647 - 1))"));
    s << ind << at << " acc = " << init << ";\n";
    {
      std::string rind = ind;
      std::string clause = is_sum ? " reduction(+:acc)" : " reduction(max:acc)";
      std::string rclose = open_loops(s, r.loops, rind, true, 0, clause);
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
    s << ind << "b" << k_.store.buffer << "[" << ix(k_.store.index) << "] = " << v << ";\n" << close;
    return finish(s.str(), group_total(k_.loops, g), 1);
  }

  std::string gemm() {
    const Gemm& g = *k_.gemm;
    if (g.a_prologue)  // (lower::Options::gemm_row_prologue)
      throw InternalError("[cpu] kernel " + k_.name + ": a GEMM row prologue is the GPU skinny GEMM's");
    // The C GEMM drivers read f32 operands; half operands are the GPU renderer's.
    if (p_.buffers[static_cast<size_t>(g.a.buffer)].dtype != DType::f32)
      throw InternalError("[cpu] kernel " + k_.name + ": the C renderer takes f32 GEMM operands only");
    if (p_.buffers[static_cast<size_t>(g.c.buffer)].dtype != DType::f32)  // (lower::Options::half_results)
      throw InternalError("[cpu] kernel " + k_.name + ": the C renderer stores f32 GEMM results only");
    const GemmTile& t = g.tile;
    check_micro_tile(opt_.isa, t.mr, t.nr);
    // A half-precision B (an f16/bf16 weight) is converted by the generated GEMM as it packs.
    const DType bdt = p_.buffers[static_cast<size_t>(g.b.buffer)].dtype;
    const bool half_b = bdt != DType::f32;
    const std::string BT = half_b ? "uint16_t" : "float";
    // A segmented B (sibling products merged): each column range read from its own buffer
    // by the generated driver (no library call takes one).
    const bool seg_b = !g.b_segments.empty();
    gemm_configs_.insert({t.mr, t.nr, bdt});
    const std::string fn = gemm_function_name(opt_.isa, t.mr, t.nr, bdt);
    // The epilogue's context (buffers, symbols, batch loop variables) is copied by the
    // driver into its job, so it must fit LM_EPI_CTX_MAX (gemm_codegen.hpp).
    if (16 + 8 * k_.loops.size() > static_cast<size_t>(kGemmEpiContextMax))
      throw InternalError("[cpu] GEMM kernel " + k_.name + ": too many batch loops (" +
                          std::to_string(k_.loops.size()) + ") for the epilogue context");
    std::ostringstream s;
    const bool has_epi = g.epilogue.valid() && g.epilogue.op() != ExprOp::Acc;
    const std::string ctx = k_.name + "_ctx";
    // Context carrying what the epilogue needs: buffers, symbols, batch loop variables.
    s << "typedef struct { void* const* lm_bufs; const int64_t* lm_syms;";
    for (const auto& l : k_.loops) s << " int64_t v" << l.var << ";";
    s << " } " << ctx << ";\n";
    if (has_epi) {
      collect(g.epilogue);
      s << "static void " << k_.name
        << "_epi(void* lm_ctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {\n"
        << "  const " << ctx << "* lm_cx = (const " << ctx << "*)lm_ctx;\n"
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
      if (g.impl == GemmImpl::Library && !half_b && !seg_b) {
        // The library call's epilogue, in blocks of 8 rows on the call's threads.
        s << "typedef struct { " << ctx << " cx; float* c; int64_t ldc, M, N; } " << k_.name << "_lepi_env;\n"
          << "static void " << k_.name << "_lepi(void* lm_env, int64_t lm_lo, int64_t lm_hi, int lm_tid) {\n"
          << "  " << k_.name << "_lepi_env* e = (" << k_.name << "_lepi_env*)lm_env; (void)lm_tid;\n"
          << "  for (int64_t lm_k = lm_lo; lm_k < lm_hi; ++lm_k) {\n"
          << "    const int64_t i = lm_k * 8;\n"
          << "    " << k_.name
          << "_epi(&e->cx, e->c + i * e->ldc, e->ldc, i, 0, e->M - i < 8 ? e->M - i : 8, e->N);\n"
          << "  }\n}\n";
      }
    }
    // One product at the current batch variables, run by member `tid` ("-1": the caller,
    // which may hand the product's tasks to the team); `tail`: nothing follows it in the
    // kernel, so the product's tasks need not be waited for here.
    auto product = [&](std::ostringstream& o, const std::string& ind, const std::string& tid, bool tail) {
      o << ind << "const int64_t M = " << ix(g.m) << ", N = " << ix(g.n) << ", K = " << ix(g.k) << ";\n"
        << ind << "const float* a = A + " << ix(g.a.offset) << "; const int64_t rsa = " << ix(g.a.row_stride)
        << ", csa = " << ix(g.a.col_stride) << ";\n"
        << ind << "const " << BT << "* b = B + " << ix(g.b.offset) << "; const int64_t rsb = " << ix(g.b.row_stride)
        << ", csb = " << ix(g.b.col_stride) << ";\n"
        << ind << "float* c = C + " << ix(g.c.offset) << "; const int64_t ldc = " << ix(g.c.row_stride)
        << ";\n"
        << ind << ctx << " cx = {lm_bufs, lm_syms";
      for (const auto& l : k_.loops) o << ", v" << l.var;
      o << "}; (void)cx;\n";
      const std::string epi = has_epi ? k_.name + "_epi" : "(lm_epi_fn)0";
      if (seg_b) {
        const size_t ns = g.b_segments.size();
        std::string ptrs, rs, cs, n0;
        for (size_t i = 0; i < ns; ++i) {
          const GemmSegment& sg = g.b_segments[i];
          const std::string sep = i ? ", " : "";
          ptrs += sep + "(const " + BT + "*)lm_bufs[" + std::to_string(sg.b.buffer) + "] + " + ix(sg.b.offset);
          rs += sep + ix(sg.b.row_stride);
          cs += sep + ix(sg.b.col_stride);
          n0 += sep + ix(sg.n0);
        }
        o << ind << "const " << BT << "* lm_sb[" << ns << "] = {" << ptrs << "};\n"
          << ind << "const int64_t lm_srs[" << ns << "] = {" << rs << "}, lm_scs[" << ns << "] = {" << cs
          << "}, lm_sn0[" << ns << "] = {" << n0 << "};\n"
          << ind << "(void)b; (void)rsb; (void)csb;\n"
          << ind << fn << "_seg(M, N, K, a, rsa, csa, " << ns << ", lm_sb, lm_srs, lm_scs, lm_sn0, c, ldc, " << t.mc
          << ", " << t.nc << ", " << t.kc << ", " << epi << ", &cx, sizeof cx, lm_rt, lm_cx, " << tid << ", "
          << (tail ? "1" : "0") << ");\n";
        return;
      }
      const std::string gen_call = fn + "(M, N, K, a, rsa, csa, b, rsb, csb, c, ldc, " +
                                   std::to_string(t.mc) + ", " + std::to_string(t.nc) + ", " +
                                   std::to_string(t.kc) + ", " + epi + ", &cx, sizeof cx, lm_rt, lm_cx, " +
                                   tid + ", " + (tail ? "1" : "0") + ");";
      if (g.impl != GemmImpl::Library || half_b) {  // BLAS takes f32 operands only
        o << ind << gen_call << "\n";
        return;
      }
      o << ind << "int ta, tb; int64_t lda, ldb;\n"
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
        o << ind << "  " << k_.name << "_lepi_env lm_le = {cx, c, ldc, M, N};\n"
          << ind << "  const int64_t lm_nb = (M + 7) / 8;\n"
          << ind << "  lm_rt->parallel_for(lm_cx, lm_nb, lm_chunk(lm_rt, lm_cx, lm_nb, 1), " << k_.name
          << "_lepi, &lm_le, sizeof lm_le, " << (tail ? 1 : 0) << ");\n";
      o << ind << "} else {\n" << ind << "  " << gen_call << "\n" << ind << "}\n";
    };
    auto declare_matrices = [&](std::ostringstream& o) {
      o << "  const float* A = (const float*)lm_bufs[" << g.a.buffer << "];\n"
        << "  const " << BT << "* B = (const " << BT << "*)lm_bufs[" << g.b.buffer << "];\n"
        << "  float* C = (float*)lm_bufs[" << g.c.buffer << "];\n"
        << "  (void)A; (void)B; (void)C;\n";
    };
    // Batch loops: many small products (attention's per-head 128x128x128) run one per
    // thread, each single-threaded inside: split over two threads, a tiny product costs
    // a hand-off and a wait per head. Large products keep the batch loop serial and
    // parallelize inside.
    bool batch_range = !k_.loops.empty() && g.impl == GemmImpl::Generated && !uses_var(g.m) &&
                       !uses_var(g.n) && !uses_var(g.k);
    std::string nb = "1";
    for (const auto& l : k_.loops) {
      // each product must write its own part of C (else the batch loop is a race)
      batch_range = batch_range && !uses_var(l.extent) && uses_var(g.c.offset, l.var);
      nb += " * (" + ix(l.extent) + ")";
    }
    if (batch_range) {
      s << "static void " << k_.name << "_task(void* lm_env, int64_t lm_lo, int64_t lm_hi, int lm_tid) {\n"
        << "  const lm_kargs* lm_ka = (const lm_kargs*)lm_env;\n"
        << "  void* const* lm_bufs = lm_ka->lm_bufs; const int64_t* lm_syms = lm_ka->lm_syms;\n"
        << "  const lm_runtime* lm_rt = lm_ka->lm_rt; void* lm_cx = lm_ka->lm_cx;\n";
      declare_symbols(s, "  ");
      declare_matrices(s);
      s << "  for (int64_t lm_i = lm_lo; lm_i < lm_hi; ++lm_i) {\n    int64_t lm_r = lm_i;\n";
      for (size_t j = k_.loops.size(); j-- > 0;) {
        const std::string e = "(" + ix(k_.loops[j].extent) + ")";
        s << "    const int64_t v" << k_.loops[j].var << " = lm_r % " << e << "; lm_r /= " << e << ";\n";
      }
      product(s, "    ", "lm_tid", false);
      s << "  }\n}\n";
    }
    s << signature() << " {\n  (void)lm_rt; (void)lm_syms; (void)lm_cx;\n";
    declare_symbols(s, "  ");
    declare_matrices(s);
    if (batch_range) {
      s << "  const int64_t lm_batch = " << nb << ";\n"
        << "  const double lm_work = (double)(" << ix(g.m) << ") * (double)(" << ix(g.n) << ") * (double)("
        << ix(g.k) << ");\n"
        << "  if (lm_batch >= 2 && lm_work * (double)lm_batch >= 262144.0 && lm_work <= 16777216.0) {\n"
        << "    const lm_kargs lm_ka = {lm_bufs, lm_syms, lm_rt, lm_cx};\n"
        << "    lm_rt->parallel_for(lm_cx, lm_batch, 1, " << k_.name << "_task, &lm_ka, sizeof lm_ka, 1);\n"
        << "    return;\n  }\n";
    }
    std::string ind = "  ", close;
    for (const auto& l : k_.loops) {
      s << ind << "for (int64_t v" << l.var << " = 0; v" << l.var << " < " << ix(l.extent) << "; ++v" << l.var
        << ") {\n";
      ind += "  ";
      close = ind.substr(2) + "}\n" + close;
    }
    product(s, ind, "-1", k_.loops.empty());
    s << close << "}\n";
    return s.str();
  }

  // Flash attention on the CPU (kernel_ir.hpp, Attention): one task per (batch point,
  // block of kQB query rows), streaming over blocks of kKB keys. Per key block:
  //  * the K tile is stored transposed, so q.k vectorizes over keys: 4 query rows x kKB
  //    keys of accumulators stay in registers while the head dim is walked (FMA);
  //  * each row's scores go through the score expression, the running max and sum are
  //    updated (online softmax) and the row's partial output is rescaled;
  //  * e * V is accumulated in register chunks of the value dim, walking the block's
  //    keys (V rows are contiguous when the view allows, else strided).
  // Keys at or past every row's key_end are never visited; their V rows are only
  // scanned for inf/NaN (0 * inf is NaN, kernel_ir.hpp). Head dims are constants (the
  // lowering's condition), so the per-task arrays live on the stack.
  std::string attention() {
    const Attention& a = *k_.attention;
    if (a.split)  // the GPU lowering's form (Attention::Split); the CPU lowering never makes it
      throw InternalError("[cpu] kernel '" + k_.name + "': a split attention has no C rendering");
    constexpr int kQB = 64, kKB = 32;
    const int64_t dk = *a.dk.as_constant(), dv = *a.dv.as_constant();
    const int64_t dch = dv % 64 == 0 ? 64 : dv % 32 == 0 ? 32 : dv % 16 == 0 ? 16 : dv;  // value chunk
    // Half values (f16/bf16) are widened into an f32 tile per block of keys, read by
    // every query row of the task; that tile is unit-stride.
    const DType vdt = p_.buffers[static_cast<size_t>(a.v.buffer)].dtype;
    const bool v_half = vdt != DType::f32;
    const bool v_unit = v_half || a.v.col_stride.as_constant() == int64_t{1};
    auto widen = [](const std::string& x, DType dt) { return convert(x, dt, DType::f32); };
    // V's row of key j (an expression), where it lies: in `v`, or with a segmented V in
    // the segment holding j (a per-kernel macro choosing among the segments' pointers).
    const std::string vmacro = "LM_VROW_" + k_.name;
    auto vptr = [&](const std::string& j) {
      if (a.v_more.empty()) return "(lm_vp + (" + j + ") * (" + ix(a.v.row_stride) + "))";
      return vmacro + "(" + j + ")";
    };
    // Row jj of the current key block, as f32: in place, or the widened tile.
    auto vrow = [&](const std::string& jj) {
      return v_half ? "(lm_vt + " + jj + " * " + std::to_string(*a.dv.as_constant()) + ")"
                    : vptr("lm_j0 + " + jj);
    };
    const std::string vcs = v_half ? "1" : ix(a.v.col_stride);
    // AVX-512 / AVX2: explicit vector accumulators (GCC keeps array accumulators in
    // memory); rows per register tile chosen so accumulators + operands fit the file.
    const bool simd = opt_.isa == CpuIsa::Avx512 || opt_.isa == CpuIsa::Avx2;
    const int vw = opt_.isa == CpuIsa::Avx512 ? 16 : 8;
    const int rb = opt_.isa == CpuIsa::Avx512 ? 4 : 2;
    const bool simd_v = simd && v_unit && dch % vw == 0 && dch / vw <= 4;
    // f16 read along the head dim, vw halves at a time: widened by F16C's vcvtph2ps (one
    // instruction; every AVX-512 CPU has F16C, for AVX2 the compiler says) in place of the
    // prelude's integer routine (~8 vector operations); the same bits (c_prelude.cpp).
    auto widen_f16 = [&](const std::string& dst, const std::string& src) {
      return std::string(vw == 16 ? "_mm512_store_ps(" : "_mm256_store_ps(") + dst + ", " +
             simd_load_f32(vw, DType::f16, src) + ")";
    };
    // K of a segment as a plain f16 row, unit stride along the head dim: its buffer and
    // index (whose depth variable the caller sets to the first of the vw halves).
    auto half_k_row = [&](const Expr& k) -> std::optional<std::pair<int, Index>> {
      if (!k.valid() || k.op() != ExprOp::Cast || k.dtype() != DType::f32) return std::nullopt;
      const Expr& ld = k.node().args[0];
      if (ld.op() != ExprOp::Load || ld.node().valid || ld.dtype() != DType::f16) return std::nullopt;
      const auto af = kernel::lower::affine(ld.node().index, {a.depth_var});
      if (!af || kernel::lower::coef_of(*af, a.depth_var).as_constant() != int64_t{1}) return std::nullopt;
      return std::make_pair(ld.node().buffer, ld.node().index);
    };
    // At most rb query rows (a decode step: one row, or a KV head's group of query heads):
    // the tile machinery below stores a transposed K tile per block of keys, which for so
    // few rows costs more than the products. Instead each key's scores are dot products
    // along the head dim (vectorized, K read in place through its expression, once for
    // all the rows) and e * V updates the rows in registers.
    const std::optional<int64_t> m_const = a.m.as_constant();
    const int few = m_const && *m_const >= 1 && *m_const <= rb ? static_cast<int>(*m_const) : 0;
    const bool one_row = simd && v_unit && dv % vw == 0 && few > 0;
    // ... and with a head dim of whole vectors, its scores summed across lanes by a tree.
    const bool lane_sums = one_row && dk % vw == 0;
    const int64_t och = dv % (4 * vw) == 0 ? 4 * vw : dv % (2 * vw) == 0 ? 2 * vw : vw;  // its value chunk
    const std::string V = opt_.isa == CpuIsa::Avx512 ? "__m512" : "__m256";
    const std::string P = opt_.isa == CpuIsa::Avx512 ? "_mm512_" : "_mm256_";
    collect(a.score);
    collect(a.epilogue);
    collect(a.q);
    collect(a.k);
    for (const KeyExprSegment& sg : a.k_more) collect(sg.k);
    std::set<int> reads = reads_;
    reads.insert(a.v.buffer);
    for (const KeySegment& sg : a.v_more) reads.insert(sg.v.buffer);
    std::ostringstream s;
    if (simd) s << "#include <immintrin.h>\n";
    if (lane_sums) s << (vw == 16 ? kHsum16 : kHsum8);
    // The kernel's task: a range of (batch point, query block) pairs.
    const std::string task = k_.name + "_task";
    s << "static void " << task << "(void* lm_env, int64_t lm_lo, int64_t lm_hi, int lm_tid) {\n"
      << "  const lm_kargs* lm_ka = (const lm_kargs*)lm_env;\n"
      << "  void* const* lm_bufs = lm_ka->lm_bufs; const int64_t* lm_syms = lm_ka->lm_syms;\n"
      << "  (void)lm_bufs; (void)lm_syms; (void)lm_tid;\n";
    declare_symbols(s, "  ");
    declare_buffers(s, "  ", reads, {a.out.buffer});
    const std::string v = "b" + std::to_string(a.v.buffer), o = "b" + std::to_string(a.out.buffer);
    const std::string rv = "v" + std::to_string(a.row_var), kv = "v" + std::to_string(a.key_var),
                      cv = "v" + std::to_string(a.col_var), pv = "v" + std::to_string(a.depth_var);
    // K's row of key `jg` (a C expression): `rows` emits the depth loop reading K through
    // the expression it is given. A segmented K takes one branch per key (predicted: the
    // keys of a segment are consecutive), the key variable counted from its first key.
    auto per_k_segment = [&](std::ostringstream& out, const std::string& in, const std::string& jg,
                             const std::function<void(const std::string&, const Expr&)>& rows) {
      const std::vector<KeyExprSegment> segs = key_segments(a);
      out << in << "{\n" << in << "  const int64_t lm_jg = " << jg << ";\n";
      for (size_t i = segs.size(); i-- > 0;) {
        const std::string j0 = ix(segs[i].j0);
        out << in << "  " << (i + 1 == segs.size() ? "" : "else ") << (i > 0 ? "if (lm_jg >= " + j0 + ") " : "")
            << "{\n"
            << in << "    const int64_t " << kv << " = lm_jg - (" << j0 << "); (void)" << kv << ";\n";
        rows(in + "    ", segs[i].k);
        out << in << "  }\n";
      }
      out << in << "}\n";
    };
    const std::string DK = std::to_string(dk), DV = std::to_string(dv), QB = std::to_string(kQB),
                      KB = std::to_string(kKB), DCH = std::to_string(dch);
    std::string nb = "1";
    for (const auto& l : k_.loops) nb += " * (" + ix(l.extent) + ")";
    // Rows per task (lm_qbs <= kQB): the same formula in the entry, which counts tasks.
    s << "  const int64_t lm_m = " << ix(a.m) << ", lm_n = " << ix(a.n) << ";\n"
      << "  const int64_t lm_qbs = lm_attn_rows(lm_ka->lm_rt, lm_ka->lm_cx, " << nb << ", lm_m, " << kQB << ");\n"
      << "  const int64_t lm_qblocks = (lm_m + lm_qbs - 1) / lm_qbs;\n";
    s << "  for (int64_t lm_task_i = lm_lo; lm_task_i < lm_hi; ++lm_task_i) {\n"
      << "    int64_t lm_r = lm_task_i;\n"
      << "    const int64_t lm_qb = lm_r % lm_qblocks; lm_r /= lm_qblocks;\n";
    for (size_t j = k_.loops.size(); j-- > 0;) {
      const std::string e = "(" + ix(k_.loops[j].extent) + ")";
      s << "    const int64_t v" << k_.loops[j].var << " = lm_r % " << e << "; lm_r /= " << e << ";\n";
    }
    std::string ind = "    ", close = "  }\n";
    s << ind << "const int64_t lm_i0 = lm_qb * lm_qbs, lm_rows = lm_imin(lm_qbs, lm_m - lm_i0);\n"
      << ind << "float lm_q[" << QB << " * " << DK << "] __attribute__((aligned(64)));\n";
    if (!one_row) s << ind << "float lm_kt[" << DK << " * " << KB << "] __attribute__((aligned(64)));\n";
    if (lane_sums) s << ind << "float lm_pt[" << few * kKB * vw << "] __attribute__((aligned(64)));\n";
    if (v_half) s << ind << "float lm_vt[" << KB << " * " << DV << "] __attribute__((aligned(64)));\n";
    s << ind << "float lm_s[" << QB << " * " << KB << "] __attribute__((aligned(64)));\n"
      << ind << "float lm_o[" << QB << " * " << DV << "] __attribute__((aligned(64)));\n"
      << ind << "float lm_mx[" << QB << "], lm_l[" << QB << "], lm_al[" << QB << "];\n"
      << ind << "const " << c_type(vdt) << "* lm_vp = " << v << " + " << ix(a.v.offset) << ";\n";
    if (!a.v_more.empty()) {
      // Keys [j0_s, j0_s+1) from segment s: its pointer, first key and row stride.
      std::string pick = "lm_vp + (j) * (" + ix(a.v.row_stride) + ")";
      std::vector<std::string> alts{pick};
      for (size_t i = 0; i < a.v_more.size(); ++i) {
        const KeySegment& sg = a.v_more[i];
        const std::string n = std::to_string(i + 1);
        s << ind << "const " << c_type(vdt) << "* lm_vp" << n << " = b" << sg.v.buffer << " + " << ix(sg.v.offset)
          << "; const int64_t lm_vs" << n << " = " << ix(sg.j0) << ";\n";
        alts.push_back("lm_vp" + n + " + ((j) - lm_vs" + n + ") * (" + ix(sg.v.row_stride) + ")");
      }
      std::string e = alts.back();
      for (size_t i = a.v_more.size(); i-- > 0;)
        e = "(j) < lm_vs" + std::to_string(i + 1) + " ? " + alts[i] + " : " + e;
      s << "#ifndef " << vmacro << "\n#define " << vmacro << "(j) (" << e << ")\n#endif\n";
    }
    s
      << ind << "const int64_t lm_rows_padded = (lm_rows + " << rb - 1 << ") / " << rb << " * " << rb
      << ";\n"
      // Q rows staged through the q expression (a RoPE prologue computed here).
      << ind << "for (int64_t r = 0; r < lm_rows; ++r) {\n"
      << ind << "  const int64_t " << rv << " = lm_i0 + r; (void)" << rv << ";\n"
      << ind << "  for (int64_t " << pv << " = 0; " << pv << " < " << DK << "; ++" << pv << ") {\n";
    {
      std::map<const ExprNode*, std::string> memo;
      std::string qv = value(a.q, memo, s, ind + "    ");
      s << ind << "    lm_q[r * " << DK << " + " << pv << "] = " << qv << ";\n";
    }
    s << ind << "  }\n"
      << ind << "}\n"
      << ind << "for (int64_t r = lm_rows; r < lm_rows_padded; ++r)\n"
      << ind << "  for (int64_t p = 0; p < " << DK << "; ++p) lm_q[r * " << DK << " + p] = 0.0f;\n"
      << ind << "for (int64_t r = 0; r < lm_rows_padded; ++r) {\n"
      << ind << "  lm_mx[r] = -__builtin_inff(); lm_l[r] = 0.0f; lm_al[r] = 1.0f;\n"
      << ind << "  for (int64_t d = 0; d < " << DV << "; ++d) lm_o[r * " << DV << " + d] = 0.0f;\n"
      << ind << "}\n";
    // The keys each group of rb rows may see (lm_ge), and the block's (lm_kend).
    const std::string NG = std::to_string(kQB / rb);
    s << ind << "int64_t lm_ge[" << NG << "];\n"
      << ind << "int64_t lm_kend = 0, lm_gmin = lm_n;\n"
      << ind << "for (int64_t g = 0; g * " << rb << " < lm_rows; ++g) {\n"
      << ind << "  lm_ge[g] = " << (a.key_end ? "0" : "lm_n") << ";\n";
    if (a.key_end)
      s << ind << "  for (int64_t r = g * " << rb << "; r < lm_imin(lm_rows, (g + 1) * " << rb
        << "); ++r) {\n"
        << ind << "    const int64_t " << rv << " = lm_i0 + r; (void)" << rv << ";\n"
        << ind << "    lm_ge[g] = lm_imax(lm_ge[g], lm_imin(lm_n, " << ix(*a.key_end) << "));\n"
        << ind << "  }\n";
    s << ind << "  lm_kend = lm_imax(lm_kend, lm_ge[g]);\n"
      << ind << "  lm_gmin = lm_imin(lm_gmin, lm_ge[g]);\n"
      << ind << "}\n";
    const std::string in2 = ind + "  ";
    s << ind << "for (int64_t lm_j0 = 0; lm_j0 < lm_kend; lm_j0 += " << KB << ") {\n"
      << in2 << "const int64_t lm_cols = lm_imin(" << KB << ", lm_kend - lm_j0);\n";
    if (lane_sums) {
      // The rows' raw scores, q . k per key, the k expression evaluated along the head dim
      // in vw lanes: each key leaves a vector of vw partial sums per row, and a block's
      // keys are summed across lanes vw at a time by a transposing tree (lm_hsum_<vw>,
      // about 3 shuffles or adds per score). One horizontal sum per key and row, as GCC
      // writes an `omp simd reduction` that it cannot reassociate, is 16 dependent scalar
      // adds: most of a decode step's attention time before (docs/cpu-backend.md).
      const std::string VW = std::to_string(vw);
      s << in2 << "for (int64_t jj = 0; jj < lm_cols; ++jj) {\n"
        << in2 << "  const int64_t " << rv << " = lm_i0; (void)" << rv << ";\n"
        << in2 << "  float* lm_pj = lm_pt + jj * " << VW << ";\n"
        << in2 << "  for (int64_t lm_l = 0; lm_l < " << VW << "; ++lm_l)";
      for (int r = 0; r < few; ++r) s << " lm_pj[" << r * kKB * vw << " + lm_l] =";
      s << " 0.0f;\n";
      per_k_segment(s, in2 + "  ", "lm_j0 + jj", [&](const std::string& in, const Expr& k) {
        s << in << "for (int64_t lm_po = 0; lm_po < " << DK << "; lm_po += " << VW << ") {\n";
        const auto hk = half_k_row(k);
        if (hk) {
          // The vw halves at depths lm_po .. lm_po + vw - 1, widened into lm_kc.
          const std::string src = "b" + std::to_string(hk->first) + " + (" + ix(hk->second) + ")";
          s << in << "  float lm_kc[" << VW << "] __attribute__((aligned(64)));\n"
            << in << "  {\n"
            << in << "    const int64_t " << pv << " = lm_po; (void)" << pv << ";\n"
            << "#if defined(__F16C__)\n"
            << in << "    " << widen_f16("lm_kc", src) << ";\n"
            << "#else\n"
            << in << "    for (int64_t lm_l = 0; lm_l < " << VW << "; ++lm_l)\n"
            << in << "      lm_kc[lm_l] = lm_f16_to_f32((" << src << ")[lm_l]);\n"
            << "#endif\n"
            << in << "  }\n";
        }
        s << in << "  #pragma omp simd\n"
          << in << "  for (int64_t lm_l = 0; lm_l < " << VW << "; ++lm_l) {\n"
          << in << "    const int64_t " << pv << " = lm_po + lm_l;\n";
        std::map<const ExprNode*, std::string> memo;
        std::string kval = hk ? "lm_kc[lm_l]" : value(k, memo, s, in + "    ");
        for (int r = 0; r < few; ++r)
          s << in << "    lm_pj[" << r * kKB * vw << " + lm_l] += lm_q[" << r * dk << " + " << pv
            << "] * " << kval << ";\n";
        s << in << "  }\n" << in << "}\n";
      });
      s << in2 << "}\n"
        // The last group's keys past the block: zero partials, sums never read.
        << in2 << "for (int64_t jj = lm_cols; jj < (lm_cols + " << vw - 1 << ") / " << VW << " * " << VW
        << "; ++jj)\n"
        << in2 << "  for (int64_t lm_l = 0; lm_l < " << VW << "; ++lm_l)";
      for (int r = 0; r < few; ++r) s << " lm_pt[" << r * kKB * vw << " + jj * " << VW << " + lm_l] =";
      s << " 0.0f;\n"
        << in2 << "for (int64_t lm_g = 0; lm_g < lm_cols; lm_g += " << VW << ") {\n";
      for (int r = 0; r < few; ++r)
        s << in2 << "  lm_hsum_" << VW << "(lm_pt + " << r * kKB * vw << " + lm_g * " << VW << ", lm_s + "
          << r * kKB << " + lm_g);\n";
      s << in2 << "}\n";
    } else if (one_row) {
      // As above with one horizontal sum per key and row (a head dim that is not a whole
      // number of vectors).
      std::string accs;
      for (int r = 0; r < few; ++r) accs += (r ? ", lm_d" : "lm_d") + std::to_string(r);
      s << in2 << "for (int64_t jj = 0; jj < lm_cols; ++jj) {\n"
        << in2 << "  const int64_t " << rv << " = lm_i0; (void)" << rv << ";\n"
        << in2 << "  float " << accs << ";\n";
      for (int r = 0; r < few; ++r) s << in2 << "  lm_d" << r << " = 0.0f;\n";
      per_k_segment(s, in2 + "  ", "lm_j0 + jj", [&](const std::string& in, const Expr& k) {
        s << in << "#pragma omp simd reduction(+:" << accs << ")\n"
          << in << "for (int64_t " << pv << " = 0; " << pv << " < " << DK << "; ++" << pv << ") {\n";
        std::map<const ExprNode*, std::string> memo;
        std::string kval = value(k, memo, s, in + "  ");
        for (int r = 0; r < few; ++r)
          s << in << "  lm_d" << r << " += lm_q[" << r * dk << " + " << pv << "] * " << kval << ";\n";
        s << in << "}\n";
      });
      for (int r = 0; r < few; ++r) s << in2 << "  lm_s[" << r * kKB << " + jj] = lm_d" << r << ";\n";
      s << in2 << "}\n";
    } else {
      // The K tile, transposed, through the k expression (past the last key: a copy of
      // the block's first, whose scores are never read).
      s << in2 << "for (int64_t jj = 0; jj < " << KB << "; ++jj) {\n";
      per_k_segment(s, in2 + "  ", "lm_j0 + (jj < lm_cols ? jj : 0)", [&](const std::string& in, const Expr& k) {
        s << in << "for (int64_t " << pv << " = 0; " << pv << " < " << DK << "; ++" << pv << ") {\n";
        std::map<const ExprNode*, std::string> memo;
        std::string kval = value(k, memo, s, in + "  ");
        s << in << "  lm_kt[" << pv << " * " << KB << " + jj] = " << kval << ";\n" << in << "}\n";
      });
      s << in2 << "}\n"
        << in2 << "for (int64_t r0 = 0; r0 < lm_rows; r0 += " << rb << ") {\n";
      const std::string in3 = in2 + "  ";
      // A group whose rows see none of these keys: every score -inf (e = 0).
      s << in3 << "if (lm_ge[r0 / " << rb << "] <= lm_j0) {\n"
        << in3 << "  for (int64_t x = 0; x < " << rb * kKB << "; ++x) lm_s[r0 * " << KB
        << " + x] = -__builtin_inff();\n"
        << in3 << "  continue;\n"
        << in3 << "}\n";
      if (simd) {
        // rb rows x kKB keys of vector accumulators in registers, explicit FMAs.
        for (int r = 0; r < rb; ++r)
          for (int w = 0; w < kKB / vw; ++w)
            s << in3 << V << " lm_c" << r << "_" << w << " = " << P << "setzero_ps();\n";
        s << in3 << "for (int64_t p = 0; p < " << DK << "; ++p) {\n";
        for (int w = 0; w < kKB / vw; ++w)
          s << in3 << "  const " << V << " lm_k" << w << " = " << P << "load_ps(lm_kt + p * " << KB << " + "
            << w * vw << ");\n";
        for (int r = 0; r < rb; ++r) {
          s << in3 << "  { const " << V << " lm_qv = " << P << "set1_ps(lm_q[(r0 + " << r << ") * " << DK
            << " + p]);";
          for (int w = 0; w < kKB / vw; ++w)
            s << " lm_c" << r << "_" << w << " = " << P << "fmadd_ps(lm_qv, lm_k" << w << ", lm_c" << r << "_"
              << w << ");";
          s << " }\n";
        }
        s << in3 << "}\n";
        for (int r = 0; r < rb; ++r)
          for (int w = 0; w < kKB / vw; ++w)
            s << in3 << P << "store_ps(lm_s + (r0 + " << r << ") * " << KB << " + " << w * vw << ", lm_c" << r
              << "_" << w << ");\n";
      } else {
        s << in3 << "float";
        for (int r = 0; r < rb; ++r) s << (r ? ", " : " ") << "lm_a" << r << "[" << KB << "]";
        s << ";\n" << in3 << "for (int jj = 0; jj < " << KB << "; ++jj) {";
        for (int r = 0; r < rb; ++r) s << " lm_a" << r << "[jj] = 0.0f;";
        s << " }\n"
          << in3 << "for (int64_t p = 0; p < " << DK << "; ++p) {\n"
          << in3 << "  const float* lm_kr = lm_kt + p * " << KB << ";\n";
        for (int r = 0; r < rb; ++r)
          s << in3 << "  const float lm_q" << r << " = lm_q[(r0 + " << r << ") * " << DK << " + p];\n";
        s << in3 << "  #pragma omp simd\n" << in3 << "  for (int jj = 0; jj < " << KB << "; ++jj) {";
        for (int r = 0; r < rb; ++r)
          s << " lm_a" << r << "[jj] = LM_FMA(lm_q" << r << ", lm_kr[jj], lm_a" << r << "[jj]);";
        s << " }\n" << in3 << "}\n";
        for (int r = 0; r < rb; ++r)
          s << in3 << "for (int jj = 0; jj < " << KB << "; ++jj) lm_s[(r0 + " << r << ") * " << KB
            << " + jj] = lm_a" << r << "[jj];\n";
      }
      s << in2 << "}\n";
    }
    // scores, online softmax per row
    if (v_half) {
      const bool hw = simd && vdt == DType::f16 && a.v.col_stride.as_constant() == int64_t{1} && dv % vw == 0;
      if (hw)
        s << "#if defined(__F16C__)\n"
          << in2 << "for (int64_t jj = 0; jj < lm_cols; ++jj)\n"
          << in2 << "  for (int64_t d = 0; d < " << DV << "; d += " << vw << ")\n"
          << in2 << "    " << widen_f16("lm_vt + jj * " + DV + " + d", vptr("lm_j0 + jj") + " + d") << ";\n"
          << "#else\n";
      s << in2 << "for (int64_t jj = 0; jj < lm_cols; ++jj)\n"
        << in2 << "  for (int64_t d = 0; d < " << DV << "; ++d)\n"
        << in2 << "    lm_vt[jj * " << DV << " + d] = "
        << widen(vptr("lm_j0 + jj") + "[d * (" + ix(a.v.col_stride) + ")]", vdt)
        << ";\n";
      if (hw) s << "#endif\n";
    }
    const std::string c = float_literal(a.exp2_scale);
    s << in2 << "for (int64_t r = 0; r < lm_rows; ++r) {\n"
      << in2 << "  const int64_t " << rv << " = lm_i0 + r; (void)" << rv << ";\n"
      << in2 << "  float* lm_sr = lm_s + r * " << KB << ";\n";
    if (a.score.valid()) {
      s << in2 << "  for (int64_t jj = 0; jj < lm_cols; ++jj) {\n"
        << in2 << "    const int64_t " << kv << " = lm_j0 + jj; (void)" << kv << ";\n"
        << in2 << "    const float acc = lm_sr[jj];\n";
      std::map<const ExprNode*, std::string> memo;
      std::string sv = value(a.score, memo, s, in2 + "    ");
      s << in2 << "    lm_sr[jj] = " << sv << ";\n" << in2 << "  }\n";
    }
    s << in2 << "  float lm_bmax = -__builtin_inff();\n"
      << in2 << "  for (int64_t jj = 0; jj < lm_cols; ++jj) lm_bmax = lm_max(lm_bmax, lm_sr[jj]);\n"
      << in2 << "  const float lm_mold = lm_mx[r], lm_mnew = lm_max(lm_mold, lm_bmax);\n"
      << in2 << "  const float lm_alpha = lm_mold == lm_mnew ? 1.0f : lm_exp2((lm_mold - lm_mnew) * " << c
      << ");\n"
      << in2 << "  float lm_sum = 0.0f;\n"
      << in2 << "  for (int64_t jj = 0; jj < " << KB << "; ++jj) {\n"
      << in2 << "    const float lm_sv = jj < lm_cols ? lm_sr[jj] : -__builtin_inff();\n"
      << in2 << "    const float lm_e = lm_sv == -__builtin_inff() ? 0.0f : lm_exp2((lm_sv - lm_mnew) * " << c
      << ");\n"
      << in2 << "    lm_sr[jj] = lm_e;\n"
      << in2 << "    lm_sum += lm_e;\n"
      << in2 << "  }\n"
      // The output is kept normalised, a convex combination of values as the two-pass
      // sum of P_j V_j is (ir/online_softmax.hpp), so it overflows only where that does:
      // the old part scaled by l_old * alpha / l_new, this block's weights by 1 / l_new
      // (l_new = 0: nothing visible yet, o and e are 0; NaN propagates).
      << in2 << "  const float lm_lo = lm_l[r] * lm_alpha, lm_ln = lm_lo + lm_sum;\n"
      << in2 << "  const float lm_f = lm_ln == 0.0f ? 0.0f : 1.0f / lm_ln;\n"
      << in2 << "  for (int64_t jj = 0; jj < " << KB << "; ++jj) lm_sr[jj] *= lm_f;\n"
      << in2 << "  lm_l[r] = lm_ln;\n"
      << in2 << "  lm_mx[r] = lm_mnew;\n"
      << in2 << "  lm_al[r] = lm_ln == 0.0f ? 1.0f : lm_lo * lm_f;\n"
      << in2 << "}\n";
    // o = o * alpha + e V, a value chunk at a time in registers
    if (one_row) {
      const int nvec = static_cast<int>(och / vw);
      s << in2 << "for (int64_t d0 = 0; d0 < " << DV << "; d0 += " << och << ") {\n";
      const std::string in4 = in2 + "  ";
      for (int r = 0; r < few; ++r) {
        s << in4 << "const " << V << " lm_al" << r << " = " << P << "set1_ps(lm_al[" << r << "]);\n";
        for (int w = 0; w < nvec; ++w)
          s << in4 << V << " lm_o" << r << "_" << w << " = " << P << "mul_ps(" << P << "load_ps(lm_o + "
            << r * dv << " + d0 + " << w * vw << "), lm_al" << r << ");\n";
      }
      s << in4 << "for (int64_t jj = 0; jj < lm_cols; ++jj) {\n"
        << in4 << "  const float* lm_vr = " << vrow("jj") << " + d0;\n";
      for (int w = 0; w < nvec; ++w)
        s << in4 << "  const " << V << " lm_w" << w << " = " << P << "loadu_ps(lm_vr + " << w * vw << ");\n";
      for (int r = 0; r < few; ++r) {
        s << in4 << "  { const " << V << " lm_e = " << P << "set1_ps(lm_s[" << r * kKB << " + jj]);";
        for (int w = 0; w < nvec; ++w)
          s << " lm_o" << r << "_" << w << " = " << P << "fmadd_ps(lm_e, lm_w" << w << ", lm_o" << r << "_"
            << w << ");";
        s << " }\n";
      }
      s << in4 << "}\n";
      for (int r = 0; r < few; ++r)
        for (int w = 0; w < nvec; ++w)
          s << in4 << P << "store_ps(lm_o + " << r * dv << " + d0 + " << w * vw << ", lm_o" << r << "_" << w
            << ");\n";
      s << in2 << "}\n" << ind << "}\n";
    } else if (simd_v) {
      const int nvec = static_cast<int>(dch) / vw;
      s << in2 << "for (int64_t r0 = 0; r0 < lm_rows; r0 += " << rb << ") {\n"
        << in2 << "  for (int64_t d0 = 0; d0 < " << DV << "; d0 += " << DCH << ") {\n";
      const std::string in4 = in2 + "    ";
      s << in4 << "const int64_t lm_gc = lm_imin(lm_cols, lm_ge[r0 / " << rb << "] - lm_j0);\n"
        << in4 << "if (lm_gc <= 0) continue;\n";
      for (int r = 0; r < rb; ++r) {
        s << in4 << "const " << V << " lm_al" << r << " = " << P << "set1_ps(lm_al[r0 + " << r << "]);\n";
        for (int w = 0; w < nvec; ++w)
          s << in4 << V << " lm_o" << r << "_" << w << " = " << P << "mul_ps(" << P << "load_ps(lm_o + (r0 + "
            << r << ") * " << DV << " + d0 + " << w * vw << "), lm_al" << r << ");\n";
      }
      s << in4 << "for (int64_t jj = 0; jj < lm_gc; ++jj) {\n"
        << in4 << "  const float* lm_vr = " << vrow("jj") << " + d0;\n";
      for (int w = 0; w < nvec; ++w)
        s << in4 << "  const " << V << " lm_w" << w << " = " << P << "loadu_ps(lm_vr + " << w * vw << ");\n";
      for (int r = 0; r < rb; ++r) {
        s << in4 << "  { const " << V << " lm_e = " << P << "set1_ps(lm_s[(r0 + " << r << ") * " << KB << " + jj]);";
        for (int w = 0; w < nvec; ++w)
          s << " lm_o" << r << "_" << w << " = " << P << "fmadd_ps(lm_e, lm_w" << w << ", lm_o" << r << "_" << w << ");";
        s << " }\n";
      }
      s << in4 << "}\n";
      for (int r = 0; r < rb; ++r)
        for (int w = 0; w < nvec; ++w)
          s << in4 << P << "store_ps(lm_o + (r0 + " << r << ") * " << DV << " + d0 + " << w * vw << ", lm_o" << r << "_"
            << w << ");\n";
      s << in2 << "  }\n" << in2 << "}\n" << ind << "}\n";
    } else {
      s << in2 << "for (int64_t r = 0; r < lm_rows; ++r) {\n"
        << in2 << "  const float* lm_er = lm_s + r * " << KB << ";\n"
        << in2 << "  const float lm_alpha = lm_al[r];\n"
        << in2 << "  for (int64_t d0 = 0; d0 < " << DV << "; d0 += " << DCH << ") {\n"
        << in2 << "    float* lm_or = lm_o + r * " << DV << " + d0;\n"
        << in2 << "    float lm_t[" << DCH << "];\n"
        << in2 << "    for (int64_t dd = 0; dd < " << DCH << "; ++dd) lm_t[dd] = lm_or[dd] * lm_alpha;\n"
        << in2 << "    for (int64_t jj = 0; jj < lm_imin(lm_cols, lm_ge[r / " << rb << "] - lm_j0); ++jj) {\n"
        << in2 << "      const float lm_e = lm_er[jj];\n"
        << in2 << "      const float* lm_vr = " << vrow("jj") << " + d0 * (" << vcs << ");\n"
        << in2 << "      #pragma omp simd\n"
        << in2 << "      for (int64_t dd = 0; dd < " << DCH << "; ++dd) lm_t[dd] = LM_FMA(lm_e, lm_vr["
        << (v_unit ? std::string("dd") : "dd * (" + vcs + ")") << "], lm_t[dd]);\n"
        << in2 << "    }\n"
        << in2 << "    for (int64_t dd = 0; dd < " << DCH << "; ++dd) lm_or[dd] = lm_t[dd];\n"
        << in2 << "  }\n"
        << in2 << "}\n"
        << ind << "}\n";
    }
    // Keys a row group never visited (at or past lm_ge) contribute 0 * V: NaN where V is
    // not finite. One vector pass finds whether any such value exists (0 * v is NaN);
    // only then a second pass records, per column, the last key holding one.
    s << ind << "int64_t lm_vbad[" << DV << "];\n"
      << ind << "for (int64_t d = 0; d < " << DV << "; ++d) lm_vbad[d] = -1;\n";
    if (a.key_end) {
      s << ind << "{\n"
        << ind << "  float lm_z[" << DV << "];\n"
        << ind << "  for (int64_t d = 0; d < " << DV << "; ++d) lm_z[d] = 0.0f;\n"
        << ind << "  for (int64_t j = lm_gmin; j < lm_n; ++j) {\n"
        << ind << "    const " << c_type(vdt) << "* lm_vr = " << vptr("j") << ";\n"
        << ind << "    #pragma omp simd\n"
        << ind << "    for (int64_t d = 0; d < " << DV << "; ++d) lm_z[d] += 0.0f * "
        << widen("lm_vr[d * (" + ix(a.v.col_stride) + ")]", vdt) << ";\n"
        << ind << "  }\n"
        << ind << "  int lm_any = 0;\n"
        << ind << "  for (int64_t d = 0; d < " << DV << "; ++d) lm_any |= lm_z[d] != lm_z[d];\n"
        << ind << "  if (lm_any)\n"
        << ind << "    for (int64_t j = lm_gmin; j < lm_n; ++j)\n"
        << ind << "      for (int64_t d = 0; d < " << DV << "; ++d) {\n"
        << ind << "        const float lm_x = "
        << widen(vptr("j") + "[d * (" + ix(a.v.col_stride) + ")]", vdt) << ";\n"
        << ind << "        if (lm_x - lm_x != 0.0f) lm_vbad[d] = j;\n"
        << ind << "      }\n"
        << ind << "}\n";
    }
    s << ind << c_type(p_.buffers[static_cast<size_t>(a.out.buffer)].dtype) << "* lm_out = " << o << " + "
      << ix(a.out.offset) << ";\n"
      << ind << "for (int64_t r = 0; r < lm_rows; ++r) {\n"
      << ind << "  const int64_t " << rv << " = lm_i0 + r; (void)" << rv << ";\n"
      // l = 0: every key masked (NaN, as the body's exp2(-inf + inf)) or no keys (+0).
      << ind << "  const float lm_rl = lm_l[r] != 0.0f ? 1.0f : lm_n == 0 ? 0.0f : __builtin_nanf(\"\");\n"
      << ind << "  for (int64_t d = 0; d < " << DV << "; ++d) {\n"
      << ind << "    const int64_t " << cv << " = d; (void)" << cv << ";\n"
      // A key never visited holds an inf/NaN value: 0 * V is NaN there (kernel_ir.hpp).
      << ind << "    const float acc = lm_vbad[d] >= lm_ge[r / " << rb << "] ? __builtin_nanf(\"\") : lm_o[r * " << DV
      << " + d] * lm_rl;\n";
    {
      std::map<const ExprNode*, std::string> memo;
      std::string ev = a.epilogue.valid() ? value(a.epilogue, memo, s, ind + "    ") : "acc";
      s << ind << "    lm_out[(lm_i0 + r) * (" << ix(a.out.row_stride) << ") + d] = " << ev << ";\n";
    }
    s << ind << "  }\n" << ind << "}\n";
    s << close << "}\n";
    s << signature() << " {\n  (void)lm_syms;\n";
    declare_symbols(s, "  ");
    s << "  const int64_t lm_m = " << ix(a.m) << ", lm_n = " << ix(a.n) << ";\n"
      << "  const int64_t lm_qbs = lm_attn_rows(lm_rt, lm_cx, " << nb << ", lm_m, " << kQB << ");\n"
      << "  const int64_t lm_total = (" << nb << ") * ((lm_m + lm_qbs - 1) / lm_qbs);\n"
      << "  const lm_kargs lm_ka = {lm_bufs, lm_syms, lm_rt, lm_cx};\n"
      << "  if ((double)(" << nb << ") * (double)lm_m * (double)lm_n * " << dk << ".0 >= 131072.0)\n"
      << "    lm_rt->parallel_for(lm_cx, lm_total, 1, " << task << ", &lm_ka, sizeof lm_ka, 1);\n"
      << "  else if (lm_total > 0)\n"
      << "    " << task << "((void*)&lm_ka, 0, lm_total, 0);\n"
      << "}\n";
    return s.str();
  }

  const std::set<std::tuple<int, int, DType>>& gemm_configs() const { return gemm_configs_; }
  const std::set<DType>& dot_configs() const { return dot_configs_; }

 private:
  const Program& p_;
  const Kernel& k_;
  const RenderOptions& opt_;
  std::map<std::string, int> sym_ids_;
  std::set<int> reads_;
  int tmp_ = 0;
  std::vector<Loop> loops_;  // elementwise: the loops rendered (see drop_unit_loops)
  std::set<std::tuple<int, int, DType>> gemm_configs_;
  std::set<DType> dot_configs_;  // weight dtypes of the row-dot reductions
};

}  // namespace

CProgram render_c(const Program& p, const RenderOptions& opt) {
  validate(p);
  CProgram out;
  std::ostringstream body;
  std::set<std::tuple<int, int, DType>> configs;
  std::set<DType> dots;
  for (const auto& k : p.kernels) {
    // Side work is a GPU launch's (lower::Options::side_work): the CPU lowering never asks.
    if (!k.side.empty() || !k.tail.empty())
      throw InternalError("[cpu] kernel " + k.name + " carries side or tail work, a GPU launch's form");
    KernelWriter w(p, k, opt);
    body << "\n/* ---- kernel " << k.name << " ---- */\n" << w.render();
    configs.insert(w.gemm_configs().begin(), w.gemm_configs().end());
    dots.insert(w.dot_configs().begin(), w.dot_configs().end());
    out.kernels.push_back(k.name);
  }
  std::ostringstream s;
  s << c_prelude() << kRuntimeDecls;
  for (const auto& [mr, nr, bdt] : configs) s << gemm_source(opt.isa, mr, nr, bdt);
  for (DType dt : dots) s << dot_source(opt.isa, dt);
  s << body.str();
  // The entry runs every kernel in order, waiting for each (the executable calls the
  // kernels itself and waits only where a kernel depends on unfinished work).
  s << "\nvoid " << out.entry
    << "(void* const* lm_bufs, const int64_t* lm_syms, const lm_runtime* lm_rt, void* lm_cx) {\n";
  for (const auto& k : p.kernels)
    s << "  " << k.name << "(lm_bufs, lm_syms, lm_rt, lm_cx);\n  lm_rt->barrier(lm_cx);\n";
  s << "  (void)lm_bufs; (void)lm_syms; (void)lm_rt; (void)lm_cx;\n}\n";
  out.source = s.str();
  return out;
}

}  // namespace luminal::cpu
