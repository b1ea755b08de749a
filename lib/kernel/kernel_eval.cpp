#include "kernel/kernel_eval.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/kernels.hpp"
#include "kernel/op_spelling.hpp"
#include "luminal/error.hpp"

namespace luminal::kernel {

namespace {

// ---- what each kernel-IR binary op computes (unary ops: the reference kernels' unary_f32)
struct EvalBinary {
  double (*f32)(float, float);
  double (*other)(int64_t, int64_t);  ///< i32 (wrapping) and bool
};
constexpr std::array<OpRow<BinaryOp, EvalBinary>, kNumBinaryOps> kEvalBinary = {{
    {BinaryOp::Add,
     {[](float x, float y) -> double { return x + y; },
      [](int64_t i, int64_t j) -> double { return static_cast<int32_t>(i + j); }}},
    {BinaryOp::Sub,
     {[](float x, float y) -> double { return x - y; },
      [](int64_t i, int64_t j) -> double { return static_cast<int32_t>(i - j); }}},
    {BinaryOp::Mul,
     {[](float x, float y) -> double { return x * y; },
      [](int64_t i, int64_t j) -> double { return static_cast<int32_t>(i * j); }}},
    {BinaryOp::Max,
     {[](float x, float y) -> double { return (x > y || x != x) ? x : y; },
      [](int64_t i, int64_t j) -> double { return static_cast<double>(std::max(i, j)); }}},
    {BinaryOp::Min,
     {[](float x, float y) -> double { return (x < y || x != x) ? x : y; },
      [](int64_t i, int64_t j) -> double { return static_cast<double>(std::min(i, j)); }}},
    {BinaryOp::Mod,
     {[](float x, float y) -> double { return x - y * std::floor(x / y); },
      [](int64_t i, int64_t j) -> double {
        if (j == 0) return 0;
        const int64_t r = i % j;
        return static_cast<double>((r != 0 && ((r < 0) != (j < 0))) ? r + j : r);
      }}},
    {BinaryOp::LessThan,
     {[](float x, float y) -> double { return x < y; },
      [](int64_t i, int64_t j) -> double { return i < j; }}},
    {BinaryOp::Equal,
     {[](float x, float y) -> double { return x == y; },
      [](int64_t i, int64_t j) -> double { return i == j; }}},
    {BinaryOp::And,
     {[](float x, float y) -> double { return x != 0 && y != 0; },
      [](int64_t i, int64_t j) -> double { return i != 0 && j != 0; }}},
    {BinaryOp::Or,
     {[](float x, float y) -> double { return x != 0 || y != 0; },
      [](int64_t i, int64_t j) -> double { return i != 0 || j != 0; }}},
}};
static_assert(covers_every_op(kEvalBinary),
              "the kernel evaluator computes every kernel-IR binary op, in enum order");

}  // namespace

uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // f16 subnormal or zero: scale to units of 2^-24, round even
    double units = static_cast<double>(std::abs(f)) * 16777216.0;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(units)));
  }
  uint32_t odd = (ax >> 13) & 1u;
  return static_cast<uint16_t>(sign | ((ax - (112u << 23) + 0xfffu + odd) >> 13));
}

float f16_bits_to_f32(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float s = (h & 0x8000) ? -1.0f : 1.0f;
  if (e == 0) return s * std::ldexp(static_cast<float>(m), -24);
  if (e == 31) return m ? std::numeric_limits<float>::quiet_NaN() : s * INFINITY;
  return s * std::ldexp(static_cast<float>(1024 + m), e - 25);
}

uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float bf16_bits_to_f32(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

// Every value travels as a double: f32 values are exactly floats, f16/bf16 values are
// their bit patterns, i32 and bool are integers.
struct Evaluator {
  const Program& p;
  const std::vector<void*>& bufs;
  const std::map<std::string, int64_t>& syms;
  std::vector<int64_t> vars = std::vector<int64_t>(64, 0);
  double acc = 0;
  const Kernel* k = nullptr;
  std::vector<double> more_acc = {};  // a reduction kernel's accumulators 1, 2, ...

  [[noreturn]] void fail(const std::string& m) const {
    throw InternalError("[kernel eval] kernel '" + (k ? k->name : std::string("?")) + "': " + m);
  }

  int64_t ix(const Index& i) const { return i.evaluate(vars, syms); }

  int64_t checked(int b, int64_t i) const {
    int64_t n = p.buffers[static_cast<size_t>(b)].elements.evaluate(vars, syms);
    if (i < 0 || i >= n)
      fail("index " + std::to_string(i) + " outside buffer '" + p.buffers[static_cast<size_t>(b)].name +
           "' of " + std::to_string(n) + " elements");
    return i;
  }

  // Element i of buffer b as a number (f16/bf16 decoded; read() keeps their bits).
  double value(int b, int64_t i) const {
    const double x = read(b, i);
    switch (p.buffers[static_cast<size_t>(b)].dtype) {
      case DType::f16:
        return f16_bits_to_f32(static_cast<uint16_t>(x));
      case DType::bf16:
        return bf16_bits_to_f32(static_cast<uint16_t>(x));
      default:
        return x;
    }
  }

  double read(int b, int64_t i) const {
    i = checked(b, i);
    void* base = bufs[static_cast<size_t>(b)];
    switch (p.buffers[static_cast<size_t>(b)].dtype) {
      case DType::f32:
        return static_cast<float*>(base)[i];
      case DType::f16:
      case DType::bf16:
        return static_cast<uint16_t*>(base)[i];
      case DType::i32:
        return static_cast<int32_t*>(base)[i];
      case DType::boolean:
        return static_cast<uint8_t*>(base)[i] != 0;
    }
    return 0;
  }

  void write(int b, int64_t i, double v) const {
    i = checked(b, i);
    void* base = bufs[static_cast<size_t>(b)];
    switch (p.buffers[static_cast<size_t>(b)].dtype) {
      case DType::f32:
        static_cast<float*>(base)[i] = static_cast<float>(v);
        break;
      case DType::f16:
      case DType::bf16:
        static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v);
        break;
      case DType::i32:
        static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
        break;
      case DType::boolean:
        static_cast<uint8_t*>(base)[i] = v != 0;
        break;
    }
  }

  static float to_f32(double v, DType from) {
    switch (from) {
      case DType::f16:
        return f16_bits_to_f32(static_cast<uint16_t>(v));
      case DType::bf16:
        return bf16_bits_to_f32(static_cast<uint16_t>(v));
      default:
        return static_cast<float>(v);
    }
  }

  static double convert(double v, DType from, DType to) {
    if (from == to) return v;
    if (to == DType::boolean) return is_float(from) ? (to_f32(v, from) != 0.0f) : (v != 0);
    if (to == DType::i32) return is_float(from) ? std::trunc(to_f32(v, from)) : v;
    float f = to_f32(v, from);
    if (to == DType::f16) return f32_to_f16_bits(f);
    if (to == DType::bf16) return f32_to_bf16_bits(f);
    return f;
  }

  double eval(const Expr& e) {
    const ExprNode& n = e.node();
    switch (n.op) {
      case ExprOp::Const:
        return n.dtype == DType::f32 ? static_cast<double>(static_cast<float>(n.constant))
                                     : convert(n.constant, DType::f32, n.dtype);
      case ExprOp::Load:
        if (n.valid && ix(*n.valid) == 0) return convert(n.fill, DType::f32, n.dtype);
        return read(n.buffer, ix(n.index));
      case ExprOp::Acc:
        if (n.slot == 0) return acc;
        if (n.slot < 0 || static_cast<size_t>(n.slot) > more_acc.size()) fail("acc slot out of range");
        return more_acc[static_cast<size_t>(n.slot - 1)];
      case ExprOp::IndexValue:
        return static_cast<double>(ix(n.index));
      case ExprOp::Cast:
        return convert(eval(n.args[0]), n.args[0].dtype(), n.dtype);
      case ExprOp::Where:
        return eval(n.args[0]) != 0 ? eval(n.args[1]) : eval(n.args[2]);
      case ExprOp::Unary:
        return unary_op(n.unary, n.dtype, eval(n.args[0]));
      case ExprOp::Binary:
        return binary_op(n.binary, n.args[0].dtype(), eval(n.args[0]), eval(n.args[1]));
    }
    return 0;
  }

  static double unary_op(UnaryOp op, DType dt, double v) {
    if (op == UnaryOp::Not) return v == 0;
    if (op == UnaryOp::Exp) return static_cast<float>(std::exp(static_cast<double>(static_cast<float>(v))));
    if (dt != DType::f32) return op == UnaryOp::Neg ? -v : v;  // i32 neg: the op table's only non-f32 case
    return detail::reference::unary_f32(*prim_of(op), static_cast<float>(v));
  }

  static double binary_op(BinaryOp op, DType dt, double a, double b) {
    const EvalBinary& f = row_of(kEvalBinary, op).spelling;
    if (dt == DType::f32) return f.f32(static_cast<float>(a), static_cast<float>(b));
    return f.other(static_cast<int64_t>(a), static_cast<int64_t>(b));
  }

  template <class F>
  void nest(const std::vector<Loop>& loops, size_t d, F&& body) {
    if (d == loops.size()) {
      body();
      return;
    }
    const Loop& l = loops[d];
    if (l.var < 0 || l.var >= 64) fail("loop variable ids must be in [0, 64)");
    int64_t n = ix(l.extent);
    for (int64_t i = 0; i < n; ++i) {
      vars[static_cast<size_t>(l.var)] = i;
      nest(loops, d + 1, body);
    }
  }

  void reduction() {
    const Reduction& r = *k->reduce;
    // Every accumulator over the same points, in slot order.
    const std::vector<Accumulator> all = accumulators(r);
    std::vector<double> a;
    for (const Accumulator& x : all) a.push_back(x.op == ReduceOp::Sum ? 0.0 : -INFINITY);
    nest(r.loops, 0, [&] {
      for (size_t i = 0; i < all.size(); ++i) {
        const double v = eval(all[i].value);
        if (all[i].op == ReduceOp::Sum) {
          // (i32 sums wrap, as every add of the generated code does)
          a[i] = all[i].acc_dtype == DType::f32
                     ? static_cast<float>(static_cast<float>(a[i]) + static_cast<float>(v))
                     : binary_op(BinaryOp::Add, all[i].acc_dtype, a[i], v);
        } else {
          a[i] = (v > a[i] || v != v) ? v : a[i];
        }
      }
    });
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i].acc_dtype != DType::i32) a[i] = static_cast<float>(a[i]);
    acc = a[0];
    more_acc.assign(a.begin() + 1, a.end());
    write(k->store.buffer, ix(k->store.index), eval(k->store.value));
  }

  void gemm() {
    const Gemm& g = *k->gemm;
    int64_t m = ix(g.m), n = ix(g.n), kk = ix(g.k);
    int64_t oa = ix(g.a.offset), ob = ix(g.b.offset), oc = ix(g.c.offset);
    int64_t ra = ix(g.a.row_stride), ca = ix(g.a.col_stride);
    int64_t rb = ix(g.b.row_stride), cb = ix(g.b.col_stride), rc = ix(g.c.row_stride);
    // A segmented B: column j is column j - n0 of the last segment starting at or before j.
    std::vector<int64_t> n0s;
    for (const GemmSegment& sg : g.b_segments) n0s.push_back(ix(sg.n0));
    // A computed by the row prologue: each row's statistic, then the row (f32).
    std::vector<double> a_rows;
    if (g.a_prologue) {
      const GemmRowPrologue& pr = *g.a_prologue;
      const bool stat = !pr.stat.loops.empty();
      for (int v : {g.row_var, pr.depth_var, stat ? pr.stat.loops[0].var : 0})
        if (v < 0 || v >= 64) fail("loop variable ids must be in [0, 64)");
      a_rows.resize(static_cast<size_t>(m * kk));
      for (int64_t i = 0; i < m; ++i) {
        vars[static_cast<size_t>(g.row_var)] = i;
        if (stat) {
          double st = pr.stat.op == ReduceOp::Sum ? 0.0 : -INFINITY;
          nest(pr.stat.loops, 0, [&] {
            const double v = eval(pr.stat.value);
            st = pr.stat.op == ReduceOp::Sum
                     ? static_cast<float>(static_cast<float>(st) + static_cast<float>(v))
                     : ((v > st || v != v) ? v : st);
          });
          acc = static_cast<float>(st);
        }
        for (int64_t q = 0; q < kk; ++q) {
          vars[static_cast<size_t>(pr.depth_var)] = q;
          a_rows[static_cast<size_t>(i * kk + q)] = static_cast<float>(eval(pr.a));
        }
      }
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        int bbuf = g.b.buffer;
        int64_t obj = ob, rbj = rb, jj = j * cb;
        for (size_t sgi = n0s.size(); sgi-- > 0;)
          if (n0s[sgi] <= j) {
            const GemmSegment& sg = g.b_segments[sgi];
            bbuf = sg.b.buffer;
            obj = ix(sg.b.offset);
            rbj = ix(sg.b.row_stride);
            jj = (j - n0s[sgi]) * ix(sg.b.col_stride);
            break;
          }
        double s = 0;
        for (int64_t q = 0; q < kk; ++q)
          s += (g.a_prologue ? a_rows[static_cast<size_t>(i * kk + q)]
                             : value(g.a.buffer, oa + i * ra + q * ca)) *
               value(bbuf, obj + q * rbj + jj);
        acc = static_cast<float>(s);
        vars[static_cast<size_t>(g.row_var)] = i;
        vars[static_cast<size_t>(g.col_var)] = j;
        write(g.c.buffer, oc + i * rc + j, g.epilogue.valid() ? eval(g.epilogue) : acc);
      }
  }

  // The definition in kernel_ir.hpp, two passes over every key (no streaming, no
  // skipping): the oracle the renderers' online-softmax loops are tested against.
  void attention() {
    const Attention& a = *k->attention;
    const int64_t m = ix(a.m), n = ix(a.n), dk = ix(a.dk), dv = ix(a.dv);
    const int64_t oo = ix(a.out.offset), ro = ix(a.out.row_stride);
    // V row j: from the segment holding key j, at its own offset and strides.
    const std::vector<KeySegment> segs = value_segments(a);
    std::vector<int64_t> j0s;
    for (const KeySegment& sg : segs) j0s.push_back(ix(sg.j0));
    auto q_at = [&](int64_t i, int64_t p) {
      vars[static_cast<size_t>(a.row_var)] = i;
      vars[static_cast<size_t>(a.depth_var)] = p;
      return static_cast<float>(eval(a.q));
    };
    // K row j: the expression of the segment holding key j, at the segment's own row.
    const std::vector<KeyExprSegment> ksegs = key_segments(a);
    std::vector<int64_t> kj0s;
    for (const KeyExprSegment& sg : ksegs) kj0s.push_back(ix(sg.j0));
    auto k_at = [&](int64_t j, int64_t p) {
      size_t si = 0;
      while (si + 1 < ksegs.size() && j >= kj0s[si + 1]) ++si;
      vars[static_cast<size_t>(a.key_var)] = j - kj0s[si];
      vars[static_cast<size_t>(a.depth_var)] = p;
      return static_cast<float>(eval(ksegs[si].k));
    };
    // V may be stored as halves (widened exactly to f32, as the body's cast does).
    const DType vdt = p.buffers[static_cast<size_t>(a.v.buffer)].dtype;
    auto v_at = [&](int64_t j, int64_t d) {
      size_t si = 0;
      while (si + 1 < segs.size() && j >= j0s[si + 1]) ++si;
      const MatrixView& v = segs[si].v;
      const double x = read(v.buffer, ix(v.offset) + (j - j0s[si]) * ix(v.row_stride) + d * ix(v.col_stride));
      if (vdt == DType::f16) return f16_bits_to_f32(static_cast<uint16_t>(x));
      if (vdt == DType::bf16) return bf16_bits_to_f32(static_cast<uint16_t>(x));
      return static_cast<float>(x);
    };
    const float c = static_cast<float>(a.exp2_scale);
    // The batch point's row-major number (a split attention's partial states are laid
    // out by it).
    int64_t point = 0;
    for (const Loop& l : k->loops) point = point * ix(l.extent) + vars[static_cast<size_t>(l.var)];
    const int64_t width = dv + 2;
    auto state_at = [&](int64_t i, int64_t r) { return ((point * m + i) * kAttentionMaxSplits + r) * width; };
    auto store = [&](int64_t i, int64_t d, float value) {
      acc = value;
      vars[static_cast<size_t>(a.row_var)] = i;
      vars[static_cast<size_t>(a.col_var)] = d;
      write(a.out.buffer, oo + i * ro + d, a.epilogue.valid() ? eval(a.epilogue) : acc);
    };
    // Merge the ranges' states (Attention::Split): what the last range block of a row does
    // (the kernel leaves its counts zero).
    auto merge = [&] {
      const int64_t splits = ix(attention_splits(a.n));
      for (int64_t i = 0; i < m; ++i) {
        float big = -INFINITY;
        for (int64_t r = 0; r < splits; ++r) {
          const float mr = static_cast<float>(read(a.split->partial, state_at(i, r) + dv));
          big = (mr > big || mr != mr) ? mr : big;
        }
        std::vector<float> w(static_cast<size_t>(splits));
        float total = 0;
        for (int64_t r = 0; r < splits; ++r) {
          const float mr = static_cast<float>(read(a.split->partial, state_at(i, r) + dv));
          const float lr = static_cast<float>(read(a.split->partial, state_at(i, r) + dv + 1));
          w[static_cast<size_t>(r)] = lr * (mr == -INFINITY ? 0.0f : std::exp2((mr - big) * c));
          total += w[static_cast<size_t>(r)];
        }
        const float f = total == 0.0f ? 0.0f : 1.0f / total;
        for (int64_t d = 0; d < dv; ++d) {
          float o = 0;
          for (int64_t r = 0; r < splits; ++r)
            o += (w[static_cast<size_t>(r)] * f) *
                 static_cast<float>(read(a.split->partial, state_at(i, r) + d));
          store(i, d, total != 0.0f ? o : n == 0 ? 0.0f : NAN);
        }
      }
    };
    // The scores of keys [j0, j1) of row i into s; returns their max (NaN propagates).
    std::vector<float> s(static_cast<size_t>(std::max<int64_t>(n, 0)));
    auto scores = [&](int64_t i, int64_t j0, int64_t j1) {
      float mx = -INFINITY;
      for (int64_t j = j0; j < j1; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < dk; ++p)
          dot += static_cast<double>(q_at(i, p)) * static_cast<double>(k_at(j, p));
        acc = static_cast<float>(dot);
        vars[static_cast<size_t>(a.row_var)] = i;
        vars[static_cast<size_t>(a.key_var)] = j;
        const float sj = static_cast<float>(a.score.valid() ? eval(a.score) : acc);
        if (a.key_end && j >= ix(*a.key_end) && !(std::isinf(sj) && sj < 0))
          throw InternalError("[kernel eval] kernel '" + k->name + "': key " + std::to_string(j) +
                              " of row " + std::to_string(i) + " is at or past key_end " +
                              std::to_string(ix(*a.key_end)) + " but scores " + std::to_string(sj));
        s[static_cast<size_t>(j)] = sj;
        mx = (sj > mx || sj != sj) ? sj : mx;
      }
      return mx;
    };
    if (a.split) {
      // Each range's softmax state (Attention::Split).
      const int64_t splits = ix(attention_splits(a.n)), chunk = ix(attention_chunk(a.n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t r = 0; r < splits; ++r) {
          const int64_t j0 = std::min(n, r * chunk), j1 = std::min(n, (r + 1) * chunk);
          const float mx = scores(i, j0, j1);
          float l = 0;
          for (int64_t j = j0; j < j1; ++j) {
            float& e = s[static_cast<size_t>(j)];
            e = mx == -INFINITY ? 0.0f : std::exp2((e - mx) * c);
            l += e;
          }
          const float f = l == 0.0f ? 0.0f : 1.0f / l;
          const int64_t at = state_at(i, r);
          for (int64_t d = 0; d < dv; ++d) {
            float o = 0;
            for (int64_t j = j0; j < j1; ++j) o += (s[static_cast<size_t>(j)] * f) * v_at(j, d);
            write(a.split->partial, at + d, o);
          }
          write(a.split->partial, at + dv, mx);
          write(a.split->partial, at + dv + 1, l);
        }
      merge();  // the last range block's, which leaves the counts zero
      return;
    }
    for (int64_t i = 0; i < m; ++i) {
      const float mx = scores(i, 0, n);
      float l = 0;
      for (int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = std::exp2((s[static_cast<size_t>(j)] - mx) * c);
        l += s[static_cast<size_t>(j)];
      }
      const float r = 1.0f / l;
      for (int64_t d = 0; d < dv; ++d) {
        // sum_j P_j V_j with P_j = e_j / L, as the body (a convex combination: it
        // overflows only where the values do); no keys: +0, the sum over nothing.
        float o = 0;
        for (int64_t j = 0; j < n; ++j)
          o += (s[static_cast<size_t>(j)] * r) * v_at(j, d);
        store(i, d, o);
      }
    }
  }

  void gather() {
    const Gather& g = *k->gather;
    const int64_t n = ix(g.count), rows = ix(g.rows), row = ix(g.row);
    for (int64_t i = 0; i < n; ++i) {
      const auto id = static_cast<int64_t>(read(g.ids, i));
      if (id < 0 || id >= rows) throw RuntimeError(gather_id_error(g.op_name, id, i, rows));
      for (int64_t j = 0; j < row; ++j) write(g.out, i * row + j, read(g.table, id * row + j));
    }
  }

  void run() {
    for (const Kernel& kern : p.kernels) {
      one(kern);
      for (const Kernel& sd : kern.side) one(sd);  // independent of the host: any order
      for (const Kernel& tl : kern.tail) one(tl);  // after it, in order
    }
  }

  void one(const Kernel& kern) {
    k = &kern;
    nest(kern.loops, 0, [&] {
      switch (kern.kind) {
        case KernelKind::Elementwise:
          write(kern.store.buffer, ix(kern.store.index), eval(kern.store.value));
          break;
        case KernelKind::Reduction:
          reduction();
          break;
        case KernelKind::Gemm:
          gemm();
          break;
        case KernelKind::Gather:
          gather();
          break;
        case KernelKind::Attention:
          attention();
          break;
      }
    });
  }
};

}  // namespace

void evaluate(const Program& p, const std::vector<void*>& buffers,
              const std::map<std::string, int64_t>& symbols) {
  validate(p);
  if (buffers.size() != p.buffers.size())
    throw InternalError("[kernel eval] " + std::to_string(buffers.size()) + " buffers given, program has " +
                        std::to_string(p.buffers.size()));
  Evaluator ev{p, buffers, symbols};
  ev.run();
}

}  // namespace luminal::kernel
