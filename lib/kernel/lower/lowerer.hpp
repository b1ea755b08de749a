// The lowering of one kernel body (lower_spec.hpp) as a class shared by the emitters:
// the body, the program being extended, the per-kernel context and the failure state.
// Each kernel kind's emitter lives in its own file:
//   lower_spec.cpp      the entry point: which kind a body becomes, fresh starts
//   emit_expr.cpp       element expressions: a body node at an index, views folded in
//   emit_loops.cpp      elementwise and row-reduction kernels (loop nests), temporaries
//   emit_gemm.cpp       the Gemm kind (recognize_gemm's plan)
//   emit_attention.cpp  the Attention kind (ir::match_attention's plan)
//   emit_gather.cpp     the Gather kind (recognize_gather's plan)
// The recognisers (recognize.hpp) decide what a body is; the emitters build kernel IR.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/graph_impl.hpp"
#include "ir/tensor_lang.hpp"
#include "kernel/index_simplify.hpp"
#include "kernel/kernel_ir.hpp"
#include "kernel/lower/affine.hpp"
#include "kernel/lower/lower_spec.hpp"
#include "kernel/lower/recognize.hpp"

namespace luminal::kernel::lower {

// Operands read where they are stored (emit_gemm.cpp): an f32 load with no pad validity;
// an f16/bf16 load under a cast to f32 (the half load itself); either of the two.
bool plain_f32_load(const Expr& e);
std::optional<Expr> half_weight(const Expr& e);
std::optional<Expr> stored_load(const Expr& e);

using detail::Node;
using detail::PrimOp;

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

/// Whether index `i` has more than `budget` nodes (counted down as it is walked): index
/// trees are DAGs printed as trees, so their size is checked before one is used.
bool too_large(const Index& i, int64_t& budget);

struct GemmFrame;  // emit_gemm.cpp

class Lowerer {
 public:
  Lowerer(const ir::KernelSpec& spec, const std::vector<int>& args, const std::string& name,
          kernel::Program& prog, const Options& opt);

  /// Lowers the body into `kernels`; the reason when it cannot be expressed.
  std::optional<Failure> lower(int result);

  std::vector<kernel::Kernel> kernels;

 private:
  // Each kernel kind: a recogniser (recognize.hpp: match the body, return a plan or why
  // not) and an emitter; a body no specialised form takes is generic loops.
  void lower_once(int result);

  // ---------------------------------------------------------------- failures as values
  // Emission that meets what cannot be expressed records why (the first reason) and
  // carries on with a placeholder of the right dtype, so expression building stays
  // well-typed; every kernel-producing step checks stopped() before keeping its kernel.
  // A computed node inlined too often asks for a fresh start instead (remat_).
  std::optional<std::string> failure_;
  std::optional<uint32_t> remat_;
  // A GEMM's row prologue (ir::row_prologue) that the emission could not express (the
  // statistic not a per-row value of A): the lowering starts over without trying one.
  bool retry_without_prologue_ = false, no_row_prologue_ = false;
  bool stopped() const { return failure_.has_value() || remat_.has_value() || retry_without_prologue_; }
  Expr unsupported(const std::string& why, DType dt) {
    if (!failure_) failure_ = why;
    return kernel::constant(0, dt);
  }
  // After a speculative emission (a specialised kernel form): true when it failed, and the
  // failure is forgotten -- the caller falls back to another form. A pending fresh start
  // stays pending: the whole lowering starts over anyway.
  bool speculation_failed() {
    if (remat_ || retry_without_prologue_) return true;
    if (!failure_) return false;
    failure_.reset();
    return true;
  }

  // ---------------------------------------------------------------- per-kernel context
  struct Ctx {
    int acc_node = -1;
    DType acc_dtype = DType::f32;
    std::string acc_key;  // index at which acc() is the reduce node's value ("": any)
    // A row reduction's further accumulators (kernel::Reduction::more): acc(dtype, 1 + i)
    // is more_accs[i].node's value at the index of key more_accs[i].key.
    struct MoreAcc {
      int node;
      DType dtype;
      std::string key;
    };
    std::vector<MoreAcc> more_accs;
    std::vector<std::vector<Index>> acc_seen;  // the indices acc() stood for, in emission order
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

  static std::string key(uint32_t n, const std::vector<Index>& idx, const std::optional<Index>& valid);
  int slot_buffer(const detail::Node& n);

  // ---------------------------------------------------------------- expressions (emit_expr.cpp)
  std::vector<Index> reshape_index(uint32_t in, uint32_t out, const std::vector<Index>& idx);
  /// The index emit() reaches body node `target` with from node `from` at `idx`, along
  /// elementwise ops and reshapes of unit dims (ir::row_accumulators' walk); nullopt if it
  /// does not.
  std::optional<std::vector<Index>> index_along(uint32_t from, uint32_t target,
                                                const std::vector<Index>& idx);
  std::vector<Index> reshape_linear(uint32_t in, uint32_t out, const std::vector<Index>& idx);
  static std::vector<Index> delinearize(Index lin, const std::vector<Index>& dims);
  Expr emit(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid);
  Expr load_node(int b, uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) const;
  Expr load_block(int b, uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid) const;
  Expr emit_raw(uint32_t id, const std::vector<Index>& idx, const std::optional<Index>& valid);

  // ---------------------------------------------------------------- loop kernels (emit_loops.cpp)
  std::vector<kernel::Loop> loops_over(const std::vector<Index>& dims, std::vector<Index>& vars,
                                       bool parallel);
  void lower_generic(uint32_t id, int out);
  int materialize(uint32_t id);
  // A temporary buffer of this lowering (named after the step), its index.
  int temp_buffer(DType dtype, Index elements, kernel::BufferRole role = kernel::BufferRole::Intermediate);
  /// `keep_half`: a value cast from f16/bf16 is stored as that half type (exact), the
  /// buffer's dtype says which.
  int materialize_operand(uint32_t node, const std::vector<int>& keep, const std::vector<Index>& dims,
                          size_t rank, bool keep_half = false);
  /// The temporary buffer `value` (a plain load) reads exactly as a store at `store_index`
  /// of `elements` would lay it out -- the copy would change nothing -- or -1.
  int contiguous_copy_of(const Expr& value, const Index& store_index, const Index& elements) const;

  // ---------------------------------------------------------------- specialised kinds
  void emit_gather(const GatherBody& m, int result);  // emit_gather.cpp
  /// `half`: both operands are cast from the same f16/bf16 type and the renderer takes
  /// half operands (Options::half_operands): keep this one as halves.
  Affine gemm_operand(Expr& e, uint32_t node, int other_axis, const GemmFrame& f, bool b_side, bool half = false);
  std::optional<std::vector<kernel::GemmSegment>> gemm_b_segments(uint32_t node, int n_axis, const GemmFrame& f);
  /// gemm_b_segments without the renderer's leave; `cat` gets the concat's body node.
  std::optional<std::vector<kernel::GemmSegment>> b_segments(uint32_t node, int n_axis, const GemmFrame& f,
                                                             uint32_t* cat);
  /// An operand (B along `axis` = n, or A along m) as one strided view of the params it
  /// concatenates, stored packed (Options::pack_params); of halves only where `halves`
  /// (a product of two halves).
  std::optional<kernel::MatrixView> gemm_packed(uint32_t node, int axis, const GemmFrame& f, bool as_a,
                                                bool halves);
  /// The pack of `members` (in order): an existing one, or a new buffer; -1 when a member
  /// is already packed with others.
  int param_pack(const std::vector<int>& members);
  bool emit_gemm(const GemmBody& plan, int result);  // emit_gemm.cpp
  bool try_attention(int result);                    // emit_attention.cpp
  /// V (the value operand `node` at index `idx`) as a concat along the keys (key variable
  /// `jv`, value column `dvar`) of stored buffers, each read where it lies; nullopt when
  /// it is not one (ir::stored_concat, as the cost model prices it).
  std::optional<std::vector<kernel::KeySegment>> attention_v_segments(uint32_t node, std::vector<Index> idx, int jv,
                                                                      int dvar, const VarSet& interest);
  /// K (the score product's operand `node` at index `idx`) as a concat along the keys of
  /// pieces, each through its own expression with the key counted from its first row
  /// (ir::key_concat, as the cost model prices it); nullopt when it is not one. Checks
  /// the shape before emitting anything, so a refusal leaves no kernel behind.
  std::optional<std::vector<kernel::KeyExprSegment>> attention_k_segments(uint32_t node, std::vector<Index> idx,
                                                                          int jv);
  /// Down the views (reshape, permute, expand: the repeat of a KV head over its query
  /// heads) from `node` to the first add, carrying the index: the add and its index.
  std::optional<std::pair<uint32_t, std::vector<Index>>> down_views_to_add(uint32_t node, std::vector<Index> idx);

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
  int first_temp_buffer_ = 0;  // buffers from here on are this lowering's temporaries
};

}  // namespace luminal::kernel::lower
