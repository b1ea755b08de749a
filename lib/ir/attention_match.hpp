// Recognising attention in a kernel body: matmul, masked softmax, matmul as one
// streaming kernel (KernelKind::Attention).
//
// The body is the math as the ops wrote it (scaled_dot_product_attention):
//
//   out = epilogue( sum_j P[.., i, j] * V[.., j, d] )                         R2
//   P   = E * recip(L),   L = sum_j E,   E = exp2((S - M) * c),   M = max_j S
//   S   = score epilogue( sum_k Q[.., i, k] * K[.., j, k] )                     R1
//
// (the score epilogue is elementwise: the 1/sqrt(d) scale, a causal mask written as
// where(j < i + off, s, -inf)). A kernel computing this body without materializing S or
// P streams over the keys with the online-softmax identity
//
//   exp2((s - M) c) = exp2((s - m) c) * exp2((m - M) c)     for a running max m <= M,
//
// rescaling its partial sums whenever the running max grows, and divides by L at the
// end (sum_j (E r) V = (sum_j E V) r for the row constant r = recip(L)). Both equalities
// are real-arithmetic identities, so the streaming kernel differs from the body by
// rounding only (as a blocked GEMM does); NaN and inf propagate as in the body (see
// kernel_ir.hpp, Attention). This file only states which nodes play which part; the
// backends' lowerings build the streaming loop from it.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "graph/graph_impl.hpp"

namespace luminal::ir {

struct AttentionMatch {
  uint32_t out_reduce = 0;    ///< R2: sum over keys of P * V (its mul's inputs: P side, V side)
  int p_side = 0;             ///< which input of R2's mul reads P (the other reads V)
  uint32_t prob = 0;          ///< P
  uint32_t expo = 0;          ///< E
  uint32_t score = 0;         ///< S
  uint32_t row_max = 0;       ///< M
  uint32_t row_sum = 0;       ///< L
  uint32_t score_reduce = 0;  ///< R1: the q.k contraction S is an epilogue of
  int key_axis = 0;           ///< the axis of S (and P) that M and L reduce
  /// For each axis of S: the axis of R1's output it is, or -1 for a unit axis a reshape
  /// between them inserted (S is R1 under elementwise ops and reshapes of unit dims: a
  /// vector's matmul spells R1 with a trailing unit column the scores drop).
  std::vector<int> r1_axis_of;
  /// For each axis of R2's input: the axis of P it indexes (-1: P is broadcast along it,
  /// the value dim d).
  std::vector<int> p_axis_of;
  double exp2_scale = 1;  ///< c (log2(e) for softmax), > 0
  /// Weights rounded to a half before the second product (a softmax and a matmul written
  /// on f16/bf16 tensors: P' = cast_f32(cast_half(P))): the node R2's P side reads
  /// through views (the outer cast), or -1. A streaming kernel cannot round weights it
  /// never finishes, so only a fast-math rule streams such a body (rules/fusion.cpp).
  int64_t rounded = -1;
  DType rounded_to = DType::f32;  ///< the half P is rounded to (when rounded >= 0)
};

/// The attention structure of `body` (its output is the root), or nullopt. Every
/// reduction of the body must be one of R1, M, L, R2; R1's operands, the V side and the
/// epilogues hold no reduction.
std::optional<AttentionMatch> match_attention(const detail::GraphImpl& body);

/// Whether the streaming kernel can store the output of match `m` of `body`: R2's output
/// (its input's axes without the keys) row-major, with at most one value axis d and
/// nothing but unit axes after it (the output's columns contiguous, as every renderer
/// writes them). A body whose epilogue moved d outward -- the transposed product an
/// absorbed view can give -- is an attention only in the two-pass form.
bool attention_output_contiguous(const detail::GraphImpl& body, const AttentionMatch& m);

}  // namespace luminal::ir
