// The online-softmax identity: what an Attention kernel node computes (KernelKind::
// Attention), stated as a recurrence over blocks of keys so that the rule online-softmax
// (rules/fusion.cpp) is checked, by the rule checker, against the two-pass definition
// its AttentionTwoPass twin computes.
//
// Two passes (the math of softmax(s) . v over keys j, as the body writes it):
//
//   M = max_j s_j,   e_j = exp2((s_j - M) c),   out = sum_j (e_j / sum_j e_j) v_j
//
// One pass over blocks B_1, B_2, ... of keys, never holding more than a block of scores,
// with m_b the running max and w_b the block's own softmax weights (relative to its own
// max, so they sum to >= 1 and never all underflow):
//
//   mx_b  = max_{j in B_b} s_j,        m_b = max(m_{b-1}, mx_b)         (m_0 = -inf)
//   W_b   = exp2((mx_b - m_b) c) sum_{j in B_b} exp2((s_j - mx_b) c)     the block's mass
//   L_b   = L_{b-1} exp2((m_{b-1} - m_b) c)  +  W_b                       (L_0 = 0)
//   o_b   = o_{b-1} (L_b - W_b) / L_b  +  a_b W_b / L_b,
//   a_b   = sum_{j in B_b} (exp2((s_j - mx_b) c) / sum_{j in B_b} exp2((s_j - mx_b) c)) v_j
//
// and out = o_last. In real arithmetic it equals the two-pass form (exp2(x - m) exp2(m -
// M) = exp2(x - M)); in f32 the two differ by rounding, as any reordered reduction does.
// o stays a convex combination of values at every step (as the two-pass sum of P_j v_j
// is), so it overflows exactly where the two-pass form does; a kernel that defers the
// division to the end (sum e_j v_j / L) overflows earlier, for |v| near FLT_MAX.
//
// The edges, where the naive recurrence is wrong, and how this one is guarded so it is
// exact there:
//  * a fully masked block (every s_j = -inf, a causal tile above the diagonal): with
//    m_{b-1} = -inf too, exp2((m_{b-1} - m_b) c) = exp2(-inf + inf) is NaN where the
//    two-pass form gives e_j = 0. Such a block is skipped: it adds nothing to L or o;
//  * a value v_j that is inf or NaN: the two-pass term P_j v_j is NaN where its weight
//    P_j is 0 (a masked key, or a weight that underflowed) or v_j is NaN, +-inf
//    otherwise, and +inf + -inf is NaN; so the output is decided from the non-finite
//    values' scores and the final max and sum (skipped blocks included), not from o;
//  * every key masked (a fully masked row): NaN, as the two-pass form (exp2(-inf + inf));
//  * no keys at all: +0, the two-pass sum over an empty axis (not 0 / 0);
//  * NaN scores propagate through the max (as MaxReduce); a +inf score gives NaN in both
//    (exp2(inf - inf)).
#pragma once

#include <cstdint>

namespace luminal::ir {

/// One output of softmax(s) . v over `n` keys by the recurrence above, with blocks of
/// `block` (>= 1) keys. Key j's score is s[j * stride], its value v[j * stride].
float online_softmax_dot(const float* s, const float* v, int64_t n, int64_t stride, float exp2_scale,
                         int64_t block);

}  // namespace luminal::ir
