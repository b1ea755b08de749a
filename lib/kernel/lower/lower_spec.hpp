// Kernel bodies (ir::KernelSpec: a small primitive DAG over input slots) -> kernel IR.
//
// Every element of a body node is an expression of the element's multi-index, so a body
// lowers by walking it from the root with symbolic loop indices:
//  * views fold into the index (permute swaps, expand pins to 0, slice scales and
//    shifts, reshape regroups -- without div/mod where the grouping allows it);
//  * pad becomes a validity predicate: loads under it are guarded, and the pad's fill is
//    selected where the index falls outside;
//  * reductions become reduction loops; the reduction the root reaches through
//    elementwise ops is the kernel's accumulator (its epilogue fused), any other one is
//    materialized first by its own kernel into a temporary buffer;
//  * a GEMM body (sum over mul of two strided loads) becomes the Gemm kind with the
//    elementwise tail as its epilogue; where the strides are not affine it falls back to
//    a generic reduction loop (slow, never wrong);
//  * symbolic dims become symbols bound at call time.
// A body that cannot be expressed (gather: the index depends on loaded data) is reported
// so the caller runs that kernel with the interpreter.
//
// Each kernel kind is a recogniser (recognize.hpp: match the body, return a plan or why
// not) and an emitter (emit_*.cpp: the plan -> kernel IR). Nothing is thrown: what
// cannot be expressed comes back as a Failure with its reason, and the caller runs that
// kernel on the interpreter. The lowering is the same for every backend (the CPU's C
// renderer, the GPU renderers): what is backend-specific comes in through Options (the
// GEMM tile a spec's launch parameters mean on that backend).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor_lang.hpp"
#include "kernel/kernel_ir.hpp"

namespace luminal::kernel::lower {

/// Index expression of a symbolic dim; registers its variables in `prog.symbols`.
Index dim_index(const Dim& d, Program& prog);

/// Which GEMM implementation a Gemm or LibraryGemm spec becomes.
enum class GemmChoice : uint8_t {
  FromSpec,   ///< the spec's kind: LibraryGemm -> library call, Gemm -> generated
  Library,    ///< always the library call (measurements)
  Generated,  ///< always the generated GEMM (measurements)
};

struct Options {
  GemmChoice gemm = GemmChoice::FromSpec;
  /// The tile of a generated GEMM from its spec (the launch parameters the search chose;
  /// the backend knows what fits its registers). Unset: GemmTile's defaults.
  std::function<GemmTile(const ir::KernelSpec&)> gemm_tile;
  /// The renderer reads a segmented GEMM B (Gemm::b_segments): a B operand that is a
  /// concat of stored tensors (ir::stored_concat) is read where it lies instead of being
  /// copied into one buffer first.
  bool segmented_b = false;
  /// The same for a GEMM whose spec's launch is the GPU's skinny GEMM only (the GPU
  /// renderers read a segmented B there; their tiled GEMMs get the concat copied).
  bool segmented_b_skinny = false;
  /// A GEMM B that is a concat of whole params stacked along their outermost axis
  /// (ir::stacked_params) and that the renderer would otherwise copy reads the params
  /// stored one after another (kernel::Program::packs) as one buffer: the GPU runtime
  /// keeps params resident, so placing siblings adjacent costs nothing per call.
  bool pack_params = false;
  /// The renderer takes f16/bf16 GEMM operands on both sides (the GPU renderers: tensor
  /// cores, or conversion while staging tiles): a product of two operands cast from the
  /// same half type keeps both as halves -- read in place where they are strided views,
  /// copied as halves (exactly) otherwise -- instead of widening A to an f32 copy.
  bool half_operands = false;
  /// The renderer stores a GEMM's C as f16/bf16 too (the GPU renderers: the epilogue
  /// rounds the f32 sum before the only store): a product rounded to a half type is a
  /// GEMM kernel, not loops. The CPU's GEMM stores f32.
  bool half_results = false;
  /// Flash-decoding (the GPU renderers): an attention over few query rows (at most
  /// kSplitAttentionRows, constant) and many keys (symbolic, or more than two ranges'
  /// worth) becomes two kernels, the keys cut into ranges (kernel::Attention::Split), so
  /// a decode step's handful of rows still fills the device.
  bool split_attention = false;
  /// An attention's Q (ir::attention_q_operand) is evaluated as the kernel stages its
  /// query rows, nothing under it hoisted into a kernel of its own (the GPU renderers: a
  /// RoPE table is a few hundred values, cheaper recomputed per block than launched).
  bool attention_q_inline = false;
  /// A GEMM whose launch is the GPU's skinny engine computes an operand with a row
  /// prologue (ir::row_prologue: RMSNorm's statistic and normalization) itself, each block
  /// for its rows (kernel::Gemm::a_prologue), where a statistic kernel and an operand copy
  /// would each cost a launch (the GPU renderers).
  bool gemm_row_prologue = false;
  /// A row-reduction kernel computes every reduction of ir::row_accumulators in one walk
  /// of the row (kernel::Reduction::more: SwiGLU's gate and up products), where each but
  /// the first would be a kernel of its own (the GPU renderers).
  bool row_accumulators = false;
  /// A small elementwise kernel rides in the next kernel's launch as side work
  /// (kernel::Kernel::side, detail::kSideWorkMaxElements) where nothing between needs
  /// its result: the GPU renderers, whose launches cost microseconds (cpu::lower_plan).
  bool side_work = false;
};

/// The most query rows (batch points x rows) an attention has that split_attention splits.
inline constexpr int64_t kSplitAttentionRows = detail::kAttentionSplitRows;

/// Why a spec could not be lowered (its kernel then runs on the interpreter).
struct Failure {
  std::string why;
};

/// Appends the kernels computing `spec` to `prog`: slot i reads buffer `args[i]`, the
/// result is stored row-major into buffer `result`; temporaries are appended to
/// `prog.buffers` (role Intermediate). Kernel names start with `name`. On failure returns
/// the reason and leaves `prog` unchanged.
std::optional<Failure> lower_spec(const ir::KernelSpec& spec, const std::vector<int>& args, int result,
                                  const std::string& name, Program& prog, const Options& opt = {});

}  // namespace luminal::kernel::lower
