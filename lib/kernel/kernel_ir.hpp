// The kernel IR: the one loop-nest form that every renderer (C for CPU, CUDA, HIP) and
// the IR evaluator share. The compiler core lowers each extracted kernel node into one
// `Kernel`; a `Program` is the ordered list of kernels plus the buffers they touch.
//
//   Program  = buffers (dtype, element count) + symbols (dynamic dims) + kernels, in order
//   Kernel   = loops (outer -> inner) and one of
//                Elementwise: store(buffer, index, value)              at every point
//                Reduction:   acc = init; for reduce loops: acc op= value;
//                             store(buffer, index, epilogue(acc))      at every outer point
//                Gemm:        C[i,j] = epilogue(sum_p A[i,p] * B[p,j]) inside the loops
//                             (the loops are batch loops; A/B/C are strided views)
//                Attention:   out = epilogue(softmax_j(score(Q K^T)) V), streamed over the
//                             keys (online softmax); see struct Attention
//   Index    = int64 expression over loop variables and symbols: + - * floordiv mod min
//              max, comparisons, && and select (pad validity). Views fold into these.
//   Expr     = scalar expression: const, load (with an optional validity predicate and
//              fill value, for pad), acc (the reduction/GEMM accumulator; a reduction
//              kernel may keep several over one loop, acc 0, 1, ...), index value
//              (iota), unary, binary, where, cast.
//
// Values are typed by DType; in C, f16/bf16 values are their uint16_t bit patterns (only
// cast converts), booleans are uint8_t 0/1. Loop variables are small integer ids unique
// within a kernel; symbols are dims bound at call time (the order of Program::symbols is
// the order of the int64 array every kernel receives).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cost/gpu_launch.hpp"
#include "graph/op_table.hpp"
#include "luminal/dtype.hpp"

namespace luminal::kernel {

// ------------------------------------------------------------------ index expressions
enum class IndexOp : uint8_t {
  Const,
  Var,
  Sym,  // leaves
  Add,
  Sub,
  Mul,
  FloorDiv,
  Mod,  // arithmetic; FloorDiv/Mod round toward -inf (Python)
  Min,
  Max,
  Lt,
  Le,
  Eq,
  And,     // 0/1 valued
  Select,  // args[0] ? args[1] : args[2]
};

struct IndexNode;

/// An immutable int64 expression (shared nodes; light constant folding on build).
class Index {
 public:
  Index(int64_t c = 0);  // NOLINT(google-explicit-constructor): constants read naturally
  Index(int c) : Index(static_cast<int64_t>(c)) {}  // NOLINT
  static Index var(int id);
  static Index sym(const std::string& name);

  IndexOp op() const;
  std::optional<int64_t> as_constant() const;
  /// True when the value is >= 0 for every binding (loop vars and symbols are >= 0).
  bool non_negative() const;
  int64_t evaluate(const std::vector<int64_t>& vars, const std::map<std::string, int64_t>& syms) const;
  std::string to_string() const;
  const IndexNode& node() const { return *node_; }

  friend Index operator+(const Index& a, const Index& b);
  friend Index operator-(const Index& a, const Index& b);
  friend Index operator*(const Index& a, const Index& b);

 private:
  explicit Index(std::shared_ptr<const IndexNode> n) : node_(std::move(n)) {}
  friend Index make_index(IndexOp, std::vector<Index>);
  std::shared_ptr<const IndexNode> node_;
};

struct IndexNode {
  IndexOp op;
  int64_t value = 0;  // Const value, Var id
  std::string name;   // Sym name
  std::vector<Index> args;
};

Index floordiv(const Index& a, const Index& b);
Index mod(const Index& a, const Index& b);
Index min(const Index& a, const Index& b);
Index max(const Index& a, const Index& b);
Index lt(const Index& a, const Index& b);
Index le(const Index& a, const Index& b);
Index eq(const Index& a, const Index& b);
Index land(const Index& a, const Index& b);
Index select(const Index& c, const Index& a, const Index& b);
/// Row-major linear index of `vars` in a tensor of `dims`: ((v0*d1 + v1)*d2 + v2)...
Index row_major(const std::vector<Index>& vars, const std::vector<Index>& dims);
/// Whether `i` reads loop variable `var` (any loop variable when var < 0).
bool uses_var(const Index& i, int64_t var = -1);
/// The constant step of `i` per unit of loop variable `var`: 0 when `i` does not read it;
/// nullopt unless `i` is affine in it through +, - and products by constants.
std::optional<int64_t> var_stride(const Index& i, int64_t var);

// ------------------------------------------------------------------ scalar expressions
enum class ExprOp : uint8_t { Const, Load, Acc, IndexValue, Unary, Binary, Where, Cast };

// Scalar ops. Each backend spells every one of them in a table whose coverage the compiler
// checks (kernel/op_spelling.hpp): a new op here stops the build until each has a row.
//
// Unary: the unary math primitives of the op table (graph/op_table.hpp, same enumerators
// and meaning: LUMINAL_PRIM_UNARY_OPS), then Not (boolean), then Exp: e^x of an f32, what
// the graph's exp2(x * k log2 e) means (graph/natural_exp.hpp; 1 ulp, where exp2 of the
// rounded product was 60 ulp off).
enum class UnaryOp : uint8_t {
#define LUMINAL_KERNEL_UNARY_ENUMERATOR(e, ...) e,
  LUMINAL_PRIM_UNARY_OPS(LUMINAL_KERNEL_UNARY_ENUMERATOR)
#undef LUMINAL_KERNEL_UNARY_ENUMERATOR
      Not,
  Exp,
};
inline constexpr std::size_t kNumUnaryOps = static_cast<std::size_t>(UnaryOp::Exp) + 1;

/// The kernel-IR op of a unary math primitive (detail::is_unary_math(p)).
constexpr UnaryOp unary_of(detail::PrimOp p) {
  switch (p) {
#define LUMINAL_KERNEL_UNARY_CASE(e, ...) \
  case detail::PrimOp::e:                 \
    return UnaryOp::e;
    LUMINAL_PRIM_UNARY_OPS(LUMINAL_KERNEL_UNARY_CASE)
#undef LUMINAL_KERNEL_UNARY_CASE
    default:
      return UnaryOp::Not;
  }
}
/// The primitive a unary op computes (every op but Not and Exp).
constexpr std::optional<detail::PrimOp> prim_of(UnaryOp op) {
  switch (op) {
#define LUMINAL_KERNEL_PRIM_CASE(e, ...) \
  case UnaryOp::e:                       \
    return detail::PrimOp::e;
    LUMINAL_PRIM_UNARY_OPS(LUMINAL_KERNEL_PRIM_CASE)
#undef LUMINAL_KERNEL_PRIM_CASE
    default:
      return std::nullopt;
  }
}
/// A call of the prelude's polynomial functions in generated code (the op table's
/// Transcendental class): renderers stage chains of them, the cost model counts them.
constexpr bool is_transcendental(UnaryOp op) {
  if (op == UnaryOp::Exp) return true;
  const auto p = prim_of(op);
  return p && detail::is_transcendental(*p);
}

// Binary: X(Enumerator, "printed name"). Mod floors (sign of the divisor, like
// torch.remainder); LessThan and Equal produce bool; And and Or take bool.
#define LUMINAL_KERNEL_BINARY_OPS(X) \
  X(Add, "add")                      \
  X(Sub, "sub")                      \
  X(Mul, "mul")                      \
  X(Max, "max")                      \
  X(Min, "min")                      \
  X(Mod, "mod")                      \
  X(LessThan, "lt")                  \
  X(Equal, "eq")                     \
  X(And, "and")                      \
  X(Or, "or")
enum class BinaryOp : uint8_t {
#define LUMINAL_KERNEL_BINARY_ENUMERATOR(e, name) e,
  LUMINAL_KERNEL_BINARY_OPS(LUMINAL_KERNEL_BINARY_ENUMERATOR)
#undef LUMINAL_KERNEL_BINARY_ENUMERATOR
};
inline constexpr std::size_t kNumBinaryOps = static_cast<std::size_t>(BinaryOp::Or) + 1;

/// Printed names ("exp2", "not", "lt", ...).
std::string_view op_name(UnaryOp op);
std::string_view op_name(BinaryOp op);

struct ExprNode;

class Expr {
 public:
  Expr() = default;
  DType dtype() const;
  ExprOp op() const;
  const ExprNode& node() const { return *node_; }
  bool valid() const { return node_ != nullptr; }
  std::string to_string() const;

 private:
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  friend Expr make_expr(ExprNode);
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  ExprOp op = ExprOp::Const;
  DType dtype = DType::f32;
  double constant = 0;         // Const
  int buffer = -1;             // Load: index into Program::buffers
  Index index;                 // Load address (elements) / IndexValue
  std::optional<Index> valid;  // Load: read only where valid != 0 ...
  double fill = 0;             // ... else this value (pad)
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  int slot = 0;  // Acc: which accumulator (0: the kernel's; i > 0: Reduction::more[i - 1])
  std::vector<Expr> args;
};

Expr constant(double v, DType dt = DType::f32);
Expr load(int buffer, DType dt, Index index);
Expr load_padded(int buffer, DType dt, Index index, Index valid, double fill);
/// The accumulator of a Reduction (after the reduce loops) or of a Gemm (the dot product);
/// slot i > 0: a reduction kernel's further accumulator Reduction::more[i - 1].
Expr acc(DType dt = DType::f32, int slot = 0);
/// An index expression as an i32 value (iota, positions).
Expr index_value(Index i);
Expr unary(UnaryOp op, Expr a);
Expr binary(BinaryOp op, Expr a, Expr b);
Expr where(Expr cond, Expr a, Expr b);
Expr cast(Expr a, DType to);

// ------------------------------------------------------------------ kernels
struct Loop {
  int var = 0;
  Index extent;
  bool parallel = false;   // OpenMP worksharing (consecutive parallel loops collapse)
  bool vectorize = false;  // the loop a renderer maps to SIMD lanes / threads in a warp
};

enum class KernelKind : uint8_t { Elementwise, Reduction, Gemm, Gather, Attention };
enum class ReduceOp : uint8_t { Sum, Max };

/// One more accumulator of a reduction kernel, over the same loops as the first.
struct Accumulator {
  ReduceOp op = ReduceOp::Sum;
  Expr value;
  DType acc_dtype = DType::f32;
};

struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  std::vector<Loop> loops;  // inside the kernel's loops
  Expr value;               // accumulated at each point of loops
  DType acc_dtype = DType::f32;
  // A reduction kernel's further accumulators over the same loops, read by the store as
  // acc(dtype, 1 + i): sibling reductions of one row computed in one pass -- SwiGLU's gate
  // and up products over the same x -- instead of a kernel per reduction
  // (lower::Options::row_accumulators; only the GPU renderers take them). At most
  // kMaxAccumulators - 1; none in a GEMM row prologue's statistic.
  std::vector<Accumulator> more = {};
};
inline constexpr std::size_t kMaxAccumulators = 4;
/// Every accumulator of `r` in slot order: r's own (op, value, acc_dtype), then r.more.
std::vector<Accumulator> accumulators(const Reduction& r);

struct Store {
  int buffer = -1;
  Index index;
  Expr value;  // Reduction: may use acc()
};

/// A strided matrix view: element (r, c) at offset + r*row_stride + c*col_stride.
struct MatrixView {
  int buffer = -1;
  Index offset;  // may use the kernel's (batch) loop variables
  Index row_stride;
  Index col_stride;
};

enum class GemmImpl : uint8_t { Generated, Library };

/// Tile sizes of the generated GEMM: micro tile mr x nr held in registers, cache blocks
/// mc x kc (packed A, L2) and kc x nc (packed B, L3).
struct GemmTile {
  int mr = 8, nr = 32, mc = 128, kc = 256, nc = 2048;
};

/// One column range of a segmented B: columns [n0, next segment's n0 (or n)) of B are
/// the columns 0.. of `b`.
struct GemmSegment {
  MatrixView b;
  Index n0;
};

/// A computed from its rows inside the GEMM (the few-rows GPU GEMM, GpuGemmEngine::Skinny):
/// for every row i < m (and batch point), the row's statistic
///   stat(i) = stat.op over stat.loops of stat.value   (row_var = i)
/// and then A(i, p) = `a` at row_var = i, depth_var = p, acc() = stat(i), for p < k --
/// RMSNorm's mean square and normalization computed by each block for its own rows,
/// where a statistic kernel and an operand copy would each cost a launch. Without a
/// statistic (stat.loops empty, stat.value invalid) A(i, p) = `a`, which reads no acc():
/// an elementwise operand such as SwiGLU's silu(gate) * up before the down projection,
/// computed once per block instead of by a kernel of its own. `stat.value` and `a` are
/// f32 and may also use the batch variables.
struct GemmRowPrologue {
  Reduction stat;  // one loop (or none: no statistic); acc_dtype f32
  Expr a;
  int depth_var = -1;
};

struct Gemm {
  Index m, n, k;
  // A and B are f32, or both f16 or both bf16 (products summed in f32: tensor cores on a
  // GPU; only the GPU renderer takes half A operands), or A f32 with B f16/bf16 (a
  // half-precision weight read through a cast: the CPU GEMM converts it as it packs).
  // C is f32, or f16/bf16 on the GPU (the epilogue rounds; lower::Options::half_results).
  MatrixView a;                  // m x k
  MatrixView b;                  // k x n
  MatrixView c;                  // m x n, col_stride must be 1
  int row_var = 0, col_var = 1;  // loop ids the epilogue may index with (i, j)
  Expr epilogue;                 // over acc() (f32); invalid Expr means acc() itself
  GemmTile tile;
  GemmImpl impl = GemmImpl::Generated;
  // A segmented B (empty: B is `b`): B is the concatenation along n of these f32 views,
  // each read from its own buffer (sibling products merged into one, matmul-siblings:
  // B = [Wq | Wk | Wv] is never stored). Segment 0 starts at column 0 and is `b`;
  // the n0 increase. At most kMaxGemmSegments.
  std::vector<GemmSegment> b_segments;
  // A computed by the kernel itself (`a` then unused: buffer -1). Only the GPU renderer's
  // few-rows GEMM takes one (lower::Options::gemm_row_prologue).
  std::optional<GemmRowPrologue> a_prologue;
};
inline constexpr std::size_t kMaxGemmSegments = 4;

/// Row lookup (embedding): out[i, :] = table[ids[i], :] for i < count, rows of `row`
/// elements copied as they are (any dtype, the same in table and out). An id outside
/// [0, rows) is the caller's RuntimeError: backends check the ids before the kernel runs
/// (the evaluator throws), and generated code never reads outside the table.
struct Gather {
  int table = -1, ids = -1, out = -1;  // ids: i32
  Index count;                         // number of ids
  Index rows;                          // the table's first dim
  Index row;                           // elements per row
  std::string op_name = "gather";      // for the error message ("embedding")
};

/// Keys [j0, the next segment's j0 (or n)) of a segmented V are the rows 0.. of `v`.
struct KeySegment {
  MatrixView v;
  Index j0;
};

/// Keys [j0, the next segment's j0 (or n)) of a segmented K: `k` over key_var counted from
/// j0 (the segment's own row), depth_var and the batch variables.
struct KeyExprSegment {
  Expr k;
  Index j0;
};

/// Attention as one streaming kernel (flash attention; the compiler core finds it in the
/// e-graph, ir/attention_match.hpp). For every point of the kernel's loops (batch loops)
/// and every query row i < m:
///
///   s_j  = score(acc = sum_p q(i, p) * k(j, p))           for every key j < n
///   M    = max_j s_j  (NaN propagates);   e_j = exp2((s_j - M) * exp2_scale)
///   out[i, d] = epilogue(acc = sum_j (e_j * (1 / sum_j e_j)) * V[j, d])     d < dv
///   (no keys, n = 0: acc = +0, the sum over nothing)
///
/// q and k are expressions over row_var (i) resp. key_var (j), depth_var (p) and the
/// batch variables: a prologue (RoPE) is computed while the kernel stages its Q rows and
/// K tiles, never stored. `score` sees row_var, key_var and the batch variables; the
/// epilogue row_var, col_var (d) and the batch variables. This is softmax(Q K^T) V of the
/// body up to rounding: a renderer streams over blocks of keys with a running max m and
/// rescales its partial sums by exp2((m_old - m_new) * exp2_scale) (the online-softmax
/// identity; ir/online_softmax.hpp states it, with its guards, as the rule checker
/// checks it), never storing s or e; the CPU renderer keeps its partial output
/// normalised, a convex combination of values, so it overflows only where the
/// definition does. A fully masked row (every s_j = -inf) gives NaN, as
/// the body does (0 * inf).
///
/// key_end (optional, an Index over row_var and the batch variables) states that every
/// key j >= key_end has score -inf (a causal mask): such keys contribute e_j = 0, so a
/// renderer may skip them -- except that 0 * V[j, d] is NaN when V[j, d] is inf or NaN,
/// so out[i, d] must still become NaN when a skipped key's V[j, d] is not finite. The
/// evaluator visits every key and throws InternalError if a key at or past key_end does
/// not score -inf, so a wrong key_end cannot pass its tests.
///
/// Expressible on a GPU as one thread block per (batch point, block of query rows), Q
/// rows and K/V tiles staged through shared memory (the q/k expressions evaluated while
/// staging).
struct Attention {
  Index m, n, dk, dv;  // query rows, keys, q.k depth, value width
  Expr q;              // f32 (f16/bf16 loads under a cast), over row_var, depth_var (and batch variables)
  Expr k;              // f32 (likewise), over key_var, depth_var (and batch variables)
  MatrixView v;        // n x dv; f32, or f16/bf16 widened to f32 as it is read
  // A segmented V (empty: V is `v`): V is the concatenation along the keys of `v` (keys
  // from 0) and these views, each read where it lies -- a decode step's KV cache and its
  // new row, concat(v_cache, v_new), never copied. The j0 increase; every view has v's
  // dtype and column stride. At most kMaxKeySegments - 1.
  std::vector<KeySegment> v_more;
  // A segmented K (empty: K is `k` for every key): keys from each j0 on through their own
  // expression -- the cache's rows a plain load, the step's new row through its RoPE --
  // so concat(k_cache, rope(k_new)) is never computed into a buffer. The j0 increase; at
  // most kMaxKeySegments - 1.
  std::vector<KeyExprSegment> k_more;
  MatrixView out;      // m x dv, col_stride must be 1; the epilogue's dtype (f32, f16, bf16)
  int row_var = 0, key_var = 1, col_var = 2, depth_var = 3;
  Expr score;          // over acc() (f32); invalid Expr means acc() itself
  double exp2_scale = 1.4426950408889634;  // log2(e) for softmax; > 0
  std::optional<Index> key_end;
  Expr epilogue;       // over acc() (f32), stored as its own dtype; invalid Expr means acc() itself

  /// Flash-decoding: few query rows over many keys, the keys cut into
  /// attention_splits(n) ranges of attention_chunk(n) keys (the last may be shorter or
  /// empty) so that each (row, range) is a block of its own
  /// (make_counted_split_attention). Each block stores its range's softmax state into
  /// `partial` -- its running max m (NaN
  /// propagates; -inf when every key of the range is masked or it has none), l = sum_j
  /// e_j with e_j = exp2((s_j - m) exp2_scale) (0 when m = -inf), and the normalised
  /// partial output o[d] = sum_j (e_j / l) V[j, d] (the 1 / l taken as 0 when l = 0, so
  /// 0 * inf stays NaN as in the definition) -- as f32 at
  /// partial[((batch point * m + row) * kAttentionMaxSplits + range) * (dv + 2) + {d, dv, dv + 1}].
  /// The blocks of a row's ranges then count themselves in counter[batch point * m + row]
  /// (i32, zero when the kernel starts; a GPU block that takes several rows counts them
  /// once, at its first), and the last of them merges the row and sets its count back to
  /// zero (the GPU renderer: a fence, an atomic add, the merge reading the
  /// states) -- one launch, where a combine kernel after it was a second (until
  /// 2026-12-06; that form is gone). The merge: M = max m_r, w_r = exp2((m_r - M)
  /// exp2_scale) (0 for m_r = -inf), L = sum l_r w_r, acc = sum_r (l_r w_r / L) o_r[d]
  /// (1 / L taken as 0 when L = 0); then as the unsplit kernel: L = 0 gives NaN (every key
  /// masked) or +0 (no keys), and the epilogue stores acc into `out`.
  struct Split {
    int partial = -1;  ///< f32 buffer of rows x kAttentionMaxSplits x (dv + 2)
    int counter = -1;  ///< i32 buffer of rows (BufferRole::State)
  };
  std::optional<Split> split;
};

/// Ranges of keys a split attention uses at most, keys per range at least (but one
/// range): the GPU targets' policy, cost/gpu_launch.hpp, which the cost model prices.
inline constexpr int64_t kAttentionMaxSplits = detail::kAttentionMaxSplits;
inline constexpr int64_t kAttentionSplitKeys = detail::kAttentionSplitKeys;
/// Ranges of a split attention over n keys: clamp(ceil(n / kAttentionSplitKeys), 1, kAttentionMaxSplits).
Index attention_splits(const Index& n);
/// Keys per range: ceil(n / attention_splits(n)) (0 when n = 0).
Index attention_chunk(const Index& n);

inline constexpr std::size_t kMaxKeySegments = 4;
/// Every view of V with the key it starts at: (a.v, 0) and then a.v_more.
std::vector<KeySegment> value_segments(const Attention& a);
/// Every expression of K with the key it starts at: (a.k, 0) and then a.k_more.
std::vector<KeyExprSegment> key_segments(const Attention& a);

struct Kernel {
  std::string name;  // a C identifier, unique in the program
  KernelKind kind = KernelKind::Elementwise;
  std::vector<Loop> loops;
  Store store;                                  // Elementwise, Reduction
  std::optional<Reduction> reduce;              // Reduction
  std::optional<Gemm> gemm;                     // Gemm
  std::optional<Gather> gather = std::nullopt;  // Gather (no loops)
  std::optional<Attention> attention = std::nullopt;  // Attention
  // Side work: small elementwise kernels that depend on nothing this kernel computes, run
  // by extra blocks of its launch, where each would cost a launch of its own
  // (lower::Options::side_work; GPU renderers only). Each is an Elementwise kernel
  // without side or tail work of its own; the host is not a Gemm.
  std::vector<Kernel> side = {};
  // Tail work: small elementwise kernels run after this kernel (and its side work), in
  // order, by the last of its launch's blocks to finish -- each block fences its stores
  // and counts itself in `tail_counter` (an i32 BufferRole::State buffer of one element,
  // zero when the kernel starts; the last block sets it back to zero). A decode step's
  // new K and V rows, slices of the QKV projection's result, are its tail instead of
  // launches of their own. Each is an Elementwise kernel without side or tail work.
  std::vector<Kernel> tail = {};
  int tail_counter = -1;
};

/// The one kernel of attention kernel `k` split over key ranges whose last range block of
/// each row merges it (Attention::Split): the states in `partial`, which needs
/// split_attention_partial_elements(k) f32 elements, the counts in `counter`, an i32
/// BufferRole::State buffer of split_attention_rows(k).
Kernel make_counted_split_attention(const Kernel& k, int partial, int counter);
Index split_attention_partial_elements(const Kernel& k);
Index split_attention_rows(const Kernel& k);

/// The message of an out-of-range id, shared by every backend and the interpreter.
std::string gather_id_error(const std::string& op_name, int64_t id, int64_t position, int64_t rows);

/// State: zero before a program's first call and left zero by every call (a counted
/// split attention's counts, which its last blocks reset): the runtimes zero it when
/// they allocate it, keep it apart from every other buffer, and keep it between calls.
enum class BufferRole : uint8_t { Input, Param, Output, Intermediate, State };

struct Buffer {
  std::string name;
  DType dtype = DType::f32;
  Index elements;
  BufferRole role = BufferRole::Intermediate;
};

/// A param stored as a block of its declared shape (a rank's weight shard,
/// docs/distributed.md): the buffer holds only the elements [start, start + dims) of the
/// declared shape, row-major over dims, so element i of the declared shape lies at
/// row_major(i - start, dims).
struct BufferBlock {
  std::vector<int64_t> start, dims;
  bool operator==(const BufferBlock&) const = default;
};

/// Params stored one after another in one buffer (lower::Options::pack_params): a GEMM
/// whose B is their concat reads `buffer` as one strided matrix (ir::stacked_params).
/// `buffer` holds every member's elements in order, nothing between; a runtime places the
/// members there (the GPU's resident params are sub-ranges of it, uploaded as usual; the
/// host executable copies them in per call). A param is a member of one pack at most.
struct ParamPack {
  int buffer = -1;
  std::vector<int> members;
  bool operator==(const ParamPack&) const = default;
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<std::string> symbols;
  std::vector<Kernel> kernels;
  /// Buffers stored as a block of their declared shape, by buffer id (the rest: whole).
  std::map<int, BufferBlock> blocks;
  std::vector<ParamPack> packs;
  /// The pack `b` is a member of, or null.
  const ParamPack* pack_holding(int b) const {
    for (const ParamPack& p : packs)
      for (int m : p.members)
        if (m == b) return &p;
    return nullptr;
  }
  /// The pack whose buffer `b` is, or null.
  const ParamPack* pack(int b) const {
    for (const ParamPack& p : packs)
      if (p.buffer == b) return &p;
    return nullptr;
  }
  /// f32 exp2/exp/log2/sin/sqrt/recip may be approximated and subnormals flushed to zero
  /// (the plan's fast_math). The CUDA renderer then uses the special function units'
  /// instructions; the CPU and HIP renderers compute them exactly, which is allowed.
  bool approximate_math = false;
  const BufferBlock* block(int b) const {
    auto it = blocks.find(b);
    return it == blocks.end() ? nullptr : &it->second;
  }
};

/// Structural checks (buffer ids, dtypes of loads/stores, loop var uniqueness and scope,
/// symbols declared, kind-specific fields). Throws InternalError naming the kernel.
void validate(const Program& p);
/// A readable dump of the program, one loop per line.
std::string to_string(const Program& p);

}  // namespace luminal::kernel
