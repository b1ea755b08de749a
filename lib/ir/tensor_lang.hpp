// The tensor language of the compiler's e-graph (docs/design.md "From graph to kernels").
//
// Two sorts of nodes share one e-graph:
//  * math nodes -- one op per PrimOp (same numbering, see to_op/to_prim), plus MatMul (a
//    derived contraction the contraction rules may introduce). They define meaning and are
//    never executed (extraction gives them cost +infinity, except the Input/Param leaves,
//    which are buffers the caller provides).
//  * kernel nodes -- Op::Kernel. A kernel node in class C says "one kernel computes C's
//    value reading only the buffers of my child classes". Its payload's KernelSpec holds
//    the kind, the launch parameters and the body: a small primitive graph (a GraphImpl)
//    whose Input nodes named "%0", "%1", ... are the slots (slot i = child class i, read
//    whole; views on a slot are nodes of the body) and whose single output "out" is C.
//
// CONTRACT for rule authors (lib/rules/*.cpp):
//  * A node's payload is a 32-bit id of interned attributes (`Attr`) in the AttrStore that
//    the e-graph's analysis owns: `g.analysis().attrs()`. Payload 0 is "no attributes",
//    which is what every elementwise op (unary, binary, where, gather, matmul) carries, so
//    plain patterns such as `rule("comm-add", add(a, b), add(b, a))` build correct nodes.
//    Ops with attributes (Constant, Cast, reductions, views, Iota, Input, Param, Kernel)
//    must be built by a custom applier: `g.add(Op::Cast, g.analysis().attrs().intern(a), {x})`
//    -- use the helpers in ir/build.hpp (add_cast, add_reshape, ...), which fill Attr
//    correctly. Never put derived facts (shapes of elementwise ops, dtypes) in an Attr:
//    equal nodes must have equal payloads.
//  * Shapes, dtype and a uniform constant value of every class are in the analysis data:
//    `g.data(cls).shape`, `.dtype`, `.constant` (set when every element of the class is
//    known to equal that value; propagated through views and elementwise ops by folding
//    with the reference interpreter's own kernels, so it is exact).
//  * A pattern can only bind classes, not nodes: to read the attributes of a matched
//    attribute-carrying node (views, reductions, Cast, leaves), use the class's
//    `g.data(cls).attributed` list -- every such node of the class as (op, payload, child)
//    -- e.g. `for (auto& an : g.data(m[x]).attributed) if (an.op == Op::Permute) ...`;
//    `g.find(an.kid)` is its canonical child. Kernel nodes are not listed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <span>
#include <vector>

#include "graph/graph_impl.hpp"
#include "luminal/dim.hpp"
#include "luminal/dtype.hpp"
#include "luminal/egraph/egraph.hpp"

namespace luminal::ir {

using detail::PrimOp;
using egraph::Id;

/// Ops of the tensor language: the primitives (same numbering as PrimOp), MatMul, Kernel.
enum class Op : uint8_t {
#define LUMINAL_PRIM_ENUMERATOR(name, ...) name,
  LUMINAL_PRIM_OPS(LUMINAL_PRIM_ENUMERATOR)
#undef LUMINAL_PRIM_ENUMERATOR
  /// a [..., m, k] x b [..., k, n] -> [..., m, n] (same batch dims, same dtype); means
  /// sum_reduce(mul(expand(a'), expand(b')), axis=-2) with a' = a[..., m, k, 1],
  /// b' = b[..., 1, k, n]: the contraction the rules find inside that form.
  MatMul,
  /// An executable kernel (payload: Attr::kernel); children are the slot classes.
  Kernel,
};
/// `case` labels for a group of op-table rows: LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_IROP)
#define LUMINAL_CASE_IROP(e, ...) case ::luminal::ir::Op::e:
inline constexpr std::size_t kNumOps = static_cast<std::size_t>(Op::Kernel) + 1;

static_assert(static_cast<int>(Op::Pad) == static_cast<int>(PrimOp::Pad),
              "Op and PrimOp numbering must agree");
inline constexpr Op to_op(PrimOp p) { return static_cast<Op>(p); }
inline constexpr bool is_prim(Op o) { return static_cast<int>(o) <= static_cast<int>(Op::Pad); }
inline constexpr PrimOp to_prim(Op o) { return static_cast<PrimOp>(o); }
/// Printable name ("add", "kernel", "matmul", ...).
const char* op_name(Op o);

// Classification, from the op table's class column (graph/op_table.hpp).
inline constexpr bool has_class(Op o, detail::OpClass c) {
  return is_prim(o) && detail::op_info(to_prim(o)).cls == c;
}
/// Unary math (not cast).
inline constexpr bool is_unary(Op o) { return is_prim(o) && detail::is_unary_math(to_prim(o)); }
inline constexpr bool is_binary(Op o) { return has_class(o, detail::OpClass::Binary); }
inline constexpr bool is_reduce(Op o) { return has_class(o, detail::OpClass::Reduction); }
inline constexpr bool is_view(Op o) { return has_class(o, detail::OpClass::View); }
inline constexpr bool is_leaf(Op o) { return has_class(o, detail::OpClass::Leaf); }
/// all_reduce, all_gather, reduce_scatter (SPMD, graph/primitives.hpp).
inline constexpr bool is_collective(Op o) { return has_class(o, detail::OpClass::Collective); }
/// Computes each element from the elements at the same index of its operands.
inline constexpr bool is_elementwise(Op o) {
  return is_prim(o) && detail::is_elementwise(detail::op_info(to_prim(o)).cls);
}

// ------------------------------------------------------------------ kernels

enum class KernelKind : uint8_t {
  Elementwise,  ///< no reduction in the body (views, elementwise ops, constants)
  Reduction,    ///< reductions over one row (softmax/norm row kernels) with prologue/epilogue
  Gemm,         ///< sum(mul(expand a, expand b)) with prologue (row reductions allowed)/epilogue
  LibraryGemm,  ///< the same body, executed by a BLAS library call (CPU target)
  Gather,       ///< gather(table, ids)
  /// matmul, masked softmax over the keys, matmul: one streaming kernel (online
  /// softmax, ir/attention_match.hpp); S and P are never materialized. Its value is the
  /// online-softmax recurrence over blocks of keys (ir/online_softmax.hpp), not the
  /// body's two passes: only the rule online-softmax makes one (rules/fusion.cpp), beside
  /// an AttentionTwoPass node of the same body, and the rule checker compares the two.
  Attention,
  /// one collective over a slot (all_reduce, all_gather, reduce_scatter): a host step
  /// that calls the communicator between generated kernels (docs/distributed.md)
  Collective,
  /// The same body as its math defines it: a max over the keys, then the sums (two
  /// passes). What fusion builds from matmul, masked softmax, matmul; no backend runs it
  /// as one kernel (its cost is infinite), the online-softmax rule gives its class the
  /// streaming Attention node.
  /// (Last, so the numbers of the kinds a plan or an AOT file holds did not change.)
  AttentionTwoPass,
};
const char* kind_name(KernelKind k);

/// A Collective kernel's launch for an all_reduce that exchanges blocks all-to-all, adds
/// its own block of every rank's operand in rank order, and all_gathers the sums: 2(P-1)/P
/// of the operand per rank instead of P-1 times it, the same bits (lib/dist/collectives.cpp).
inline constexpr int64_t kAllReduceScatterGather = 1;

/// What a kernel node computes and how it is launched. Immutable once interned.
struct KernelSpec {
  KernelKind kind = KernelKind::Elementwise;
  /// Slots are Input nodes named slot_name(i) with the shape/dtype of child class i; the
  /// one output is named "out". Every node is live, in topological order.
  std::shared_ptr<const detail::GraphImpl> body;
  uint32_t slots = 0;
  /// Kind-specific launch parameters: Gemm {tile_m, tile_n, tile_k}; Collective of an
  /// all_reduce: {} (gather every rank's operand, add in rank order) or
  /// {kAllReduceScatterGather} (docs/distributed.md); others {} for now.
  std::vector<int64_t> launch;
  uint64_t hash = 0;  ///< structural hash of kind, body and launch (fill with finalize())

  /// Computes `hash`; call once the spec is complete.
  void finalize();
  /// Structural equality (op, attributes, wiring of the body; kind; launch).
  bool operator==(const KernelSpec& o) const;
};
std::string slot_name(uint32_t i);
/// Structural hash/equality of one body node (op, inputs, attributes; not op_name/loc).
uint64_t hash_body_node(const detail::Node& n);
bool same_body_node(const detail::Node& a, const detail::Node& b);
/// The same, for `n` (`b`) with its inputs replaced by `inputs` (`b_inputs`): a node being
/// copied into another body is looked up there before it is copied.
uint64_t hash_body_node(const detail::Node& n, std::span<const uint32_t> inputs);
bool same_body_node(const detail::Node& a, const detail::Node& b, std::span<const uint32_t> b_inputs);

// ------------------------------------------------------------------ attributes

/// Attributes of a node; which fields matter depends on the op (as in detail::Node).
struct Attr {
  DType dtype = DType::f32;                  // Constant, Cast (target), Input, Param
  int axis = 0;                              // SumReduce/MaxReduce/Slice/Pad/AllGather/ReduceScatter
  int64_t step = 1;                          // Slice; collectives: the number of ranks
  double value = 0;                          // Constant; Pad fill value
  std::vector<int> perm;                     // Permute
  std::vector<Dim> shape;                    // Reshape/Expand target, Input/Param shape, Iota {n}
  Dim a, b;                                  // Slice [start, end); Pad lo, hi
  std::string name;                          // Input/Param
  std::shared_ptr<const KernelSpec> kernel;  // Kernel

  bool operator==(const Attr& o) const;
  uint64_t hash() const;
};

/// Interns attributes: equal attributes get the same id, so payload equality is id
/// equality. Id 0 is Attr{} ("no attributes"). Not thread-safe (one per e-graph).
class AttrStore {
 public:
  AttrStore();
  uint32_t intern(const Attr& a);
  const Attr& get(uint32_t id) const { return attrs_[id]; }
  std::size_t size() const { return attrs_.size(); }

 private:
  std::vector<Attr> attrs_;
  std::unordered_multimap<uint64_t, uint32_t> index_;
};

// ------------------------------------------------------------------ the language

struct TensorLang {
  using Op = ir::Op;
  using Payload = uint32_t;
  static constexpr std::size_t kNumOps = ir::kNumOps;
  static uint64_t hash_payload(Payload p) { return p; }
};

/// One attribute-carrying node of a class (see the contract above).
struct AttrNode {
  Op op = Op::Input;
  uint32_t payload = 0;
  Id kid = egraph::kNoId;  ///< its child (stale id: call find), kNoId for a leaf
  bool operator==(const AttrNode&) const = default;
  auto operator<=>(const AttrNode&) const = default;
};

/// Per-class facts: the result's symbolic shape and dtype, and a uniform constant value.
struct ClassData {
  /// Sorted set, joined by union; child ids may be stale (call find) and one node may be
  /// listed under several stale ids of its child (rules/algebra_dsl.hpp attr_nodes()
  /// canonicalizes).
  std::vector<AttrNode> attributed;
  std::vector<Dim> shape;
  DType dtype = DType::f32;
  std::optional<double> constant;  ///< every element equals this (as the dtype stores it)
  bool valid = false;              ///< false only for a class whose node is malformed
  /// Equal on every rank of an SPMD program (graph/primitives.hpp): known when some node
  /// of the class reads no rank-dependent slice or reduce_scatter result (joined by or).
  bool replicated = true;
};

/// The e-class analysis: owns the AttrStore; infers shape/dtype/constant per node.
class TensorAnalysis {
 public:
  using Data = ClassData;
  TensorAnalysis() : attrs_(std::make_shared<AttrStore>()) {}

  AttrStore& attrs() { return *attrs_; }
  const AttrStore& attrs() const { return *attrs_; }

  /// Merges of two classes whose shapes or dtypes differ: only a wrong rule merges such
  /// classes. Strict (the default in debug builds) throws
  /// InternalError on the first; otherwise they are counted here and the first is
  /// described (the compiler names the count in CompileReport::stop_reason).
  std::size_t wrong_merges() const { return wrong_merges_; }
  const std::string& first_wrong_merge() const { return first_wrong_merge_; }
  void set_strict_merges(bool strict) { strict_merges_ = strict; }
  /// Ranks of the SPMD program this e-graph compiles (CompileOptions::communicator's
  /// size; 1 without one). The sharding rules (rules/sharding.cpp) split work over it.
  int64_t world() const { return world_; }
  void set_world(int64_t w) { world_ = w < 1 ? 1 : w; }
  const std::shared_ptr<AttrStore>& attrs_ptr() const { return attrs_; }

  template <class G>
  Data make(const G& g, egraph::NodeView<TensorLang> n) const {
    std::vector<const Data*> kids;
    kids.reserve(n.kids.size());
    for (Id k : n.kids) kids.push_back(&g.data(k));
    Data d = infer(n.op, attrs_->get(n.payload), kids);
    if (n.op != Op::Kernel &&
        (is_leaf(n.op) || is_view(n.op) || is_reduce(n.op) || is_collective(n.op) || n.op == Op::Cast))
      d.attributed.push_back(AttrNode{n.op, n.payload, n.kids.empty() ? egraph::kNoId : n.kids[0]});
    return d;
  }
  egraph::DidMerge merge(Data& a, Data b) const;

  /// Shape/dtype/constant of `op` with attributes `at` over children `kids`. Throws
  /// InternalError on a malformed node (wrong arity, bad axis).
  static Data infer(Op op, const Attr& at, const std::vector<const Data*>& kids);

 private:
  std::shared_ptr<AttrStore> attrs_;
#ifdef NDEBUG
  bool strict_merges_ = false;
#else
  bool strict_merges_ = true;
#endif
  mutable std::size_t wrong_merges_ = 0;
  mutable std::string first_wrong_merge_;
  int64_t world_ = 1;
};

/// True when `d` depends on the rank variable "%rank" (a shard's offset).
bool mentions_rank(const Dim& d);

using EGraph = egraph::EGraph<TensorLang, TensorAnalysis>;
using NodeView = egraph::NodeView<TensorLang>;

}  // namespace luminal::ir
