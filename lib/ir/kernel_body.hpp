// Kernel bodies: building them (with common-subexpression sharing), substituting a
// producer's body into a consumer's slot (fusion), deciding which kind of kernel a body
// is -- or that no kernel can run it -- and counting its work for the cost model.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "cost/cost_model.hpp"
#include "ir/attention_match.hpp"
#include "ir/tensor_lang.hpp"

namespace luminal::ir {

/// A kernel node before it is added: its spec and the classes of its slots.
struct Variant {
  std::shared_ptr<const KernelSpec> spec;
  std::vector<Id> kids;
};

/// Builds one body: slots deduplicated by class, equal nodes shared.
class BodyBuilder {
 public:
  explicit BodyBuilder(const EGraph& g) : g_(g) {}
  /// The slot node reading class `cls` (created on first use).
  uint32_t slot(Id cls);
  /// Appends `n` unless an equal node exists; returns its index.
  uint32_t add(detail::Node n);
  /// Copies `body` (slots j -> slot(kids[j]), or `subst_slot` -> `subst_value`).
  uint32_t copy(const detail::GraphImpl& body, const std::vector<Id>& kids, int subst_slot = -1,
                uint32_t subst_value = 0);
  /// Appends a node computing `op` with attributes `at` over body nodes `kids`.
  uint32_t emit_op(Op op, const Attr& at, const std::vector<uint32_t>& kids);
  /// The variant computing body node `root`, classified; nullopt if no kernel kind can
  /// run it (see classify) or it exceeds `max_nodes`. Spends the builder: its nodes move
  /// into the variant's body. `classify_body` false: the body as it is, whatever kernels
  /// can run it (its KernelSpec::kind means nothing), only to be substituted further
  /// (nest).
  std::optional<Variant> finish(uint32_t root, std::size_t max_nodes, bool classify_body = true);
  /// What body node `root` computes with body node `node` read from class `cls` instead
  /// (a slot): the nodes between them that read `node` are added again over the slot;
  /// returns the new root. (`node` itself stays, dead unless something else reads it.)
  uint32_t rewire(uint32_t root, uint32_t node, Id cls);
  /// Whether body node `root` reads body node `node`, directly or not.
  bool reaches(uint32_t root, uint32_t node) const;

 private:
  const EGraph& g_;
  detail::GraphImpl body_;
  std::vector<Id> slots_;
  std::unordered_map<Id, uint32_t> slot_of_;
  std::unordered_multimap<uint64_t, uint32_t> memo_;
  // The node equal to `n` with inputs `inputs` (hash `h`), if the body has one.
  std::optional<uint32_t> find(uint64_t h, const detail::Node& n, std::span<const uint32_t> inputs) const;
};

/// The kind of kernel that can run `body` (root = its output), or nullopt:
///  * Gather: a gather of two slots, nothing else;
///  * Elementwise: no reduction;
///  * Attention: matmul, softmax over the keys, matmul (ir/attention_match.hpp);
///  * Gemm: one contraction, a sum over mul(expand, expand), reached from the root only
///    through elementwise ops and reshapes (an epilogue at the output index); other
///    reductions only inside its operands, none of them a contraction (a prologue such
///    as RMSNorm's row statistic, computed once per operand row);
///  * Reduction: reductions that all share one input shape and axis (a row kernel:
///    softmax, norms), reached from the root through elementwise ops, reshapes, expands.
std::optional<KernelKind> classify(const detail::GraphImpl& body);

/// Whether `body`, a GEMM (classify), is also a row kernel: its contraction (and any other
/// reduction) a product of a matrix and a vector -- one operand's expand adds nothing, one
/// token -- so each output element is one row's dot product, and every reduction shares one
/// input shape and axis. The same body then runs as KernelKind::Reduction (a row per
/// thread, warp or block) as well as on a GEMM engine; which is cheaper is the cost model's
/// (rules/fusion.cpp, gemm-as-rows).
bool gemm_as_rows(const detail::GraphImpl& body);

/// The other way (rules/schedule_gpu.cpp, gpu-rows-as-gemm): a row-kernel body whose one
/// reduction is a matrix-vector product, spelled with the matrix as a view of its own --
/// mul(expand(x), reshape(W)), as the fusion policies build a decode projection -- as the
/// same body with that operand under an expand that adds nothing (the identity, the
/// spelling classify reads as a contraction), when the result is a GEMM that gemm_as_rows
/// accepts. Null otherwise.
std::shared_ptr<const detail::GraphImpl> rows_as_gemm_body(const detail::GraphImpl& body);

/// The direct kernel of math node `node` (slots = its children; Constant/Iota children are
/// inlined). nullopt for Input/Param/Kernel nodes.
std::optional<Variant> lower_node(const EGraph& g, Id node);

/// `consumer` with slot `slot` replaced by `producer`'s body: one kernel that computes the
/// producer's value inline. nullopt when the result is not a legal kernel.
std::optional<Variant> substitute(const EGraph& g, const Variant& consumer, std::size_t slot,
                                  const Variant& producer, std::size_t max_nodes);

/// `producer` with slot `slot` replaced by `inner`'s body, whether or not a kernel can
/// run the result: a piece only to be substituted into a consumer, which substitute then
/// classifies whole. Fusing a chain P2 -> P1 -> C where P1 cannot take P2 by itself (a
/// softmax cannot compute the scores it reads: their reduction has another shape) but C
/// can take both (the product of the softmax and V with the scores: an attention).
/// nullopt only when the result exceeds `max_nodes`.
std::optional<Variant> nest(const EGraph& g, const Variant& producer, std::size_t slot, const Variant& inner,
                            std::size_t max_nodes);

/// `consumer` reading class `cls` where its body computes what `computed` (a kernel of
/// `cls`) computes, that part of its body replaced by a slot of `cls`: a kernel computing
/// inline a value the program stores anyway reads it instead. nullopt when the body does
/// not hold `computed`'s (node for node, over the same slots) or the result is no kernel.
std::optional<Variant> read_computed(const EGraph& g, const Variant& consumer, Id cls,
                                     const Variant& computed, std::size_t max_nodes);

/// True when class `cls` holds an Input or Param of the program (one of its leaves).
bool is_leaf_class(const EGraph& g, Id cls);
/// True when class `cls` holds a Param of the program (a weight, bound once).
bool is_param_class(const EGraph& g, Id cls);

/// Typical values of the dim variables, for costing symbolic shapes.
using DimGuess = DimBindings;

/// Elements of `shape` at the guessed dims (a dim they do not bind: its bound, at most 1024).
double guessed_numel(const std::vector<Dim>& shape, const DimGuess& dims);

/// What a backend's lowering does differently that kernel_work mirrors (the GPU
/// renderers' kernel::lower::Options of the same names; the CPU's are the defaults).
struct LoweringTraits {
  /// An attention's Q is evaluated as its rows are staged, nothing under it hoisted
  /// (see attention_q_operand).
  bool attention_q_inline = false;
  /// A product of two casts from one half type keeps both operands as halves: read in
  /// place where they are strided views of stored halves, copied as halves otherwise.
  bool half_operands = false;
  /// A skinny GEMM computes an operand with a row prologue itself (ir::row_prologue).
  bool gemm_row_prologue = false;
  /// A row-reduction kernel keeps several accumulators in one pass (ir::row_accumulators).
  bool row_accumulators = false;
  /// Params a GEMM's B reads as a concat, stacked whole along their outermost axis, are
  /// stored one after another (kernel::Program::packs; ir::stacked_params): the concat is
  /// the packed buffer, read in place.
  bool packed_params = false;
  /// The GPU renderers' traits.
  static LoweringTraits gpu() { return {true, true, true, true, true}; }
};

/// FLOPs, bytes and parallelism of one execution of the kernel `spec` over `kids` (the
/// slots' classes; empty: not known, and no bytes counted as the program's leaves).
/// `param_slots` (per slot, 1 for a param) says which slots are params where there are no
/// classes to ask (a plan's steps).
detail::KernelWork kernel_work(const EGraph& g, const KernelSpec& spec, const std::vector<Id>& kids,
                               const DimGuess& dims, const LoweringTraits& traits = {},
                               std::span<const uint8_t> param_slots = {});

/// kernel_work in two parts, so that a cost model can compute the first once for all the
/// launch twins of a body (a GPU GEMM's tile configurations: thousands of nodes, a few
/// hundred bodies). body_work reads of `spec.launch` only body_launch_key(spec, traits);
/// add_launch_work adds what the launch itself decides (the tiles' utilization).
detail::KernelWork body_work(const EGraph& g, const KernelSpec& spec, const std::vector<Id>& kids,
                             const DimGuess& dims, const LoweringTraits& traits = {},
                             std::span<const uint8_t> param_slots = {});
std::vector<int64_t> body_launch_key(const KernelSpec& spec, const LoweringTraits& traits);
void add_launch_work(detail::KernelWork& w, const KernelSpec& spec);

/// Inside a GEMM operand (below the broadcast feeding the product): true when body node
/// `id` is an expand that repeats a value computed with transcendentals (a RoPE sin/cos
/// table broadcast over heads). Backends compute such a value once into scratch before
/// preparing the operand, and the cost model charges it that way: one predicate, so
/// the two cannot disagree.
bool hoists_broadcast(const detail::GraphImpl& body, uint32_t id);

/// A concatenation of stored tensors along one axis, as matmul-siblings builds it: an add
/// tree of pads (fill +-0) on `axis`, each padding a view of a slot out to the full
/// length, the pieces consecutive: piece i covers [lo_i, lo_i + size_i) and lo_0 = 0,
/// lo_{i+1} = lo_i + size_i, the last ending at the full length. A slot may also be an
/// f16/bf16 one widened to f32 (a half weight under linear); every slot has one dtype.
struct StoredConcat {
  int axis = 0;
  DType stored = DType::f32;   ///< the slots' dtype as stored
  std::vector<uint32_t> pads;  ///< the pad nodes, in column order (by start, whatever the add's order)
  std::vector<uint32_t> adds;  ///< the add nodes joining them
};
/// Body node `id` as a StoredConcat, or nullopt. A GEMM whose B operand is one reads each
/// column range from its own buffer (kernel::Gemm::b_segments), so the concat is never
/// computed: the cost model charges it nothing, the lowering emits segments. One
/// predicate for both, so they cannot disagree.
std::optional<StoredConcat> stored_concat(const detail::GraphImpl& body, uint32_t id);

/// The pieces of `cat` are whole params of its stored type (`is_param` of each leaf; an
/// f16/bf16 one widened to f32 by a cast), each under the same views (permutes, unit dims
/// in or out) that take the concat's axis to the param's outermost one. Stored one after
/// another in one buffer (the GPU runtime's param packs, kernel::Program::packs), they are
/// the concat itself: a GEMM reads it as one strided operand -- of halves only in a
/// product of two halves (half_concat). The cost model charges no copy for it where the
/// lowering packs params (LoweringTraits::packed_params); the lowering (emit_gemm.cpp,
/// gemm_packed) packs it.
bool stacked_params(const detail::GraphImpl& body, const StoredConcat& cat,
                    const std::function<bool(const detail::Node& leaf)>& is_param);

/// Body node `id` under views is a StoredConcat of f16/bf16 slots widened to f32 (siblings'
/// half weights merged): its type, as an operand cast from that half type is -- its values
/// are halves, so a product with another such operand runs on halves (tensor cores), the
/// concat read packed or copied as halves. f32 otherwise.
DType half_concat(const detail::GraphImpl& body, uint32_t id);

/// The views from body node `top` down its first inputs to `bottom` only broadcast,
/// permute, or insert and remove unit dims: a GEMM's B reaching a StoredConcat through
/// them reads each segment in place (emit_gemm.cpp's gemm_b_segments maps its index
/// down them; the cost model charges no copy). Anything else copies the concat whole.
bool segment_views(const detail::GraphImpl& body, uint32_t top, uint32_t bottom);

/// A skinny GEMM's row prologue (kernel::Gemm::a_prologue, lower::Options::gemm_row_prologue):
/// a GEMM body whose launch is the GPU's few-rows engine (GpuGemmEngine::Skinny), one of
/// whose contraction's operands is computed inside the GEMM, each block its own rows,
/// instead of by kernels of its own:
///  - from one row statistic -- the body's only reduction besides the contraction, itself
///    none, with none below it and none under the other operand (RMSNorm before a
///    projection): no statistic kernel, no operand copy;
///  - or, with no reduction but the contraction, elementwise -- an operand broadcast
///    along the other's columns (an expand), computing something (an op besides views and
///    casts; no gather), the smaller of the two (SwiGLU's silu(gate) * up before the down
///    projection): no operand copy.
/// The renderer computes it a chunk of K at a time (detail::skinny_prologue_chunk); the
/// cost model charges neither launch but the blocks' recomputation. One predicate for both.
struct RowPrologue {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t contraction = 0;  ///< the GEMM's sum
  uint32_t operand = 0;      ///< the product's input (an expand) holding the prologue
  uint32_t stat = kNone;     ///< the statistic's reduction (kNone: an elementwise prologue)
};
std::optional<RowPrologue> row_prologue(const detail::GraphImpl& body, const std::vector<int64_t>& launch);

/// The accumulators of a row-reduction kernel (KernelKind::Reduction) whose renderer keeps
/// several over one walk of the row (kernel::Reduction::more, lower::Options::
/// row_accumulators): the reductions the root reaches through elementwise ops and reshapes
/// of unit dims, in the order the lowering meets them (the first is the kernel's
/// accumulator), with the first one's input shape and axis, none under another, at most
/// kMaxRowAccumulators -- SwiGLU's gate and up products over one normalized x, one launch
/// instead of one per product. Empty when the root reaches no reduction. The lowering emits
/// them, the cost model charges no kernel of their own: one predicate for both.
inline constexpr std::size_t kMaxRowAccumulators = 4;  // kernel::kMaxAccumulators
std::vector<uint32_t> row_accumulators(const detail::GraphImpl& body, uint32_t root);

/// The GEMM's product as the Gemm lowering sees it (kernel/lower/recognize.cpp,
/// recognize_gemm): the one sum reduction the root reaches through elementwise ops and
/// reshapes, every path from the root to it passing only those (they become the
/// epilogue, a reshape folded into C's view). `why` says what stops it otherwise. The
/// cost model charges such a GEMM no kernel for its product: one predicate for both.
struct EpilogueReduction {
  std::optional<uint32_t> reduce;
  const char* why = "";
};
EpilogueReduction epilogue_reduction(const detail::GraphImpl& body, uint32_t root);

/// Attention's K operand read as segments (kernel::Attention::k_more): `operand` (the
/// score product's K side) is, through reshapes, permutes and expands (the repeat of a KV
/// head over its query heads), a concatenation along one axis of at most
/// kMaxKeyConcatPieces pieces, stored or computed -- a decode step's
/// concat(k_cache, rope(k_new)). The lowering emits each piece through its own expression
/// when the axis is the keys'; the model then charges the views no hoisted round trip
/// (hoists_broadcast would otherwise compute the whole concat into scratch). One
/// predicate for both.
inline constexpr std::size_t kMaxKeyConcatPieces = 4;  // kernel::kMaxKeySegments
struct KeyConcat {
  std::vector<uint32_t> views;  ///< operand down to the concat, the concat excluded
  uint32_t concat = 0;
  StoredConcat pieces;          ///< its pads and adds (`stored` unused)
};
std::optional<KeyConcat> key_concat(const detail::GraphImpl& body, uint32_t operand);

/// Whether a contraction's operand `side` (0 or 1: the input of its product) is, down
/// its views to a stored or computed value, a strided matrix over the contraction's axis
/// and its own output axis, as the lowering reads a GEMM operand in place (kernel/lower,
/// affine). False when a reshape merges axes whose strides do not nest: the operand is
/// then copied first. The cost model's predicate for that copy.
bool strided_operand(const detail::GraphImpl& body, uint32_t contraction, int side);

/// The input of an attention body's score product that is Q: the operand broadcast along
/// the keys (K varies with them), or nullopt. A GPU attention evaluates Q while it stages
/// a block's query rows, so nothing under it is hoisted there (lower::Options::
/// attention_q_inline, LoweringTraits::attention_q_inline): one predicate for both.
std::optional<uint32_t> attention_q_operand(const detail::GraphImpl& body, const AttentionMatch& att);

/// True when the score `score` of an attention body is masked by where(cond, s, -inf)
/// with a condition computed from indices only (a causal mask).
bool causal_mask(const detail::GraphImpl& body, uint32_t score);

/// True when the body has no arithmetic (views, constants, casts only): absorbing it
/// never duplicates work.
bool is_cheap(const KernelSpec& spec);
/// Number of reduction nodes in the body.
int count_reductions(const KernelSpec& spec);
/// Per slot: true when the body reads it under an expand that broadcasts (each element is
/// used many times, so a producer inlined there is recomputed many times).
std::vector<bool> broadcast_slots(const KernelSpec& spec);

}  // namespace luminal::ir
