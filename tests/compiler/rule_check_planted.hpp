// A corpus of planted wrong rules for the rule checker's own test. Each one is right
// almost everywhere and wrong at exactly one edge -- the edges a checker drawing small
// positive shapes and moderate values never reaches. The checker must catch every one.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ir/build.hpp"
#include "rules/algebra_dsl.hpp"
#include "rules/registry.hpp"

namespace planted_rules {

using namespace luminal;
using namespace luminal::rules;
using namespace luminal::rules::dsl;

struct Planted {
  RuleInfo rule;
  std::string edge;  ///< where it is wrong
};

inline RuleInfo in_set(RuleInfo r) {
  r.set = "planted";
  return r;
}

inline bool is_i32(const ir::EGraph& g, Id c) { return g.data(c).dtype == DType::i32; }
inline bool is_f32(const ir::EGraph& g, Id c) { return g.data(c).dtype == DType::f32; }

// permute_q(permute_p x) = permute_r x with r[i] = p[q[i]] -- except that from rank 4 on
// the last two axes of r come out swapped.
inline void compose_rank4(ir::EGraph& g, const Match& m) {
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Permute))
    for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Permute)) {
      if (g.find(inner.kid) != g.find(m[a])) continue;
      const std::vector<int> p = attr(g, inner.payload).perm, q = attr(g, outer.payload).perm;
      if (p.size() != q.size()) continue;
      std::vector<int> r(p.size());
      for (size_t i = 0; i < r.size(); ++i) r[i] = p[static_cast<size_t>(q[i])];
      if (r.size() >= 4) std::swap(r[r.size() - 1], r[r.size() - 2]);
      g.merge(m.root(), ir::add_permute(g, m[a], r));
    }
}

// reduce over an axis of expand(x): for max, x without that axis; for sum, n * x. `check_n`
// false forgets that an empty axis reduces to -inf (max); `check_broadcast` false forgets
// that the axis must have been broadcast from size 1.
inline void reduce_of_expand(ir::EGraph& g, const Match& m, Op op, bool check_n, bool check_broadcast) {
  for (const ir::AttrNode& red : attr_nodes(g, m.root(), op))
    for (const ir::AttrNode& ex : attr_nodes(g, g.find(red.kid), Op::Expand)) {
      if (g.find(ex.kid) != g.find(m[a])) continue;
      const int axis = attr(g, red.payload).axis;
      std::vector<Dim> xs = g.data(m[a]).shape, target = attr(g, ex.payload).shape;
      if (static_cast<size_t>(axis) >= xs.size()) continue;
      if (check_broadcast && !is_one(xs[static_cast<size_t>(axis)])) continue;
      const auto n = cdim(target[static_cast<size_t>(axis)]);
      if (!n || (check_n && *n < 1)) continue;
      xs.erase(xs.begin() + axis);
      target.erase(target.begin() + axis);
      Id r = ir::add_reshape(g, m[a], xs);
      if (!same_shape(xs, target)) r = ir::add_expand(g, r, target);
      if (op == Op::SumReduce) {
        const DType dt = g.data(m[a]).dtype;
        r = ir::add_plain(g, Op::Mul, {r, broadcast_const(g, static_cast<double>(*n), dt, target)});
        if (dt == DType::f32) r = ir::add_plain(g, Op::Add, {r, broadcast_const(g, 0.0, dt, target)});
      }
      g.merge(m.root(), r);
    }
}

// slice(slice x) on one axis with the composed step t1 + t2 - 1 instead of t1 * t2: the
// same whenever one of the steps is 1.
inline void slice_steps_added(ir::EGraph& g, const Match& m) {
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Slice))
    for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Slice)) {
      if (g.find(inner.kid) != g.find(m[a])) continue;
      const ir::Attr o = attr(g, outer.payload), in = attr(g, inner.payload);
      if (o.axis != in.axis) continue;
      const Dim n = g.data(m.root()).shape[static_cast<size_t>(o.axis)];
      if (n.lower_bound() < 1) continue;
      const Dim start = in.a + o.a * Dim(in.step);
      const int64_t step = in.step + o.step - 1;
      g.merge(m.root(), ir::add_slice(g, m[a], o.axis, start, start + (n - Dim(1)) * Dim(step) + Dim(1), step));
    }
}

// pad(pad(x, lo1, hi1, v1), lo2, hi2, v2) = pad(x, lo1 + lo2, hi1 + hi2, v2): right when
// the two fills are equal.
inline void pad_pad_any_fill(ir::EGraph& g, const Match& m) {
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Pad))
    for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Pad)) {
      if (g.find(inner.kid) != g.find(m[a])) continue;
      const ir::Attr o = attr(g, outer.payload), in = attr(g, inner.payload);
      if (o.axis != in.axis) continue;
      g.merge(m.root(), ir::add_pad(g, m[a], o.axis, in.a + o.a, in.b + o.b, o.value));
    }
}

inline void merge_bool(ir::EGraph& g, const Match& m, bool v) {
  const std::vector<Dim> shape = g.data(m.root()).shape;
  g.merge(m.root(), broadcast_const(g, v ? 1 : 0, DType::boolean, shape));
}

/// The corpus.
// cast_f32(cast_h(p + q)) = p + q for pads p, q of widened halves filled with zeros --
// without checking that their ranges are disjoint (the real rule, half-concat-round-trip,
// does: where two values overlap their sum need not be an h value).
inline void half_sum_round_trip(ir::EGraph& g, const Match& m) {
  const Id sum = g.lookup(Op::Add, 0u, std::vector<Id>{m[a], m[b]});
  if (sum == egraph::kNoId || g.data(sum).dtype != DType::f32) return;
  auto widened_half_pad = [&](Id p, DType& h) {
    for (const ir::AttrNode& pn : attr_nodes(g, g.find(p), Op::Pad)) {
      if (attr(g, pn.payload).value != 0) continue;
      for (const ir::AttrNode& cn : attr_nodes(g, pn.kid, Op::Cast)) {
        const DType from = g.data(cn.kid).dtype;
        if (from == DType::f16 || from == DType::bf16) {
          h = from;
          return true;
        }
      }
    }
    return false;
  };
  DType hp = DType::f32, hq = DType::f32;
  if (!widened_half_pad(m[a], hp) || !widened_half_pad(m[b], hq) || hp != hq) return;
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Cast))
    for (const ir::AttrNode& inner : attr_nodes(g, outer.kid, Op::Cast))
      if (inner.kid == g.find(sum) && attr(g, inner.payload).dtype == hp &&
          attr(g, outer.payload).dtype == DType::f32) {
        g.merge(m.root(), sum);
        return;
      }
}

inline std::vector<Planted> corpus() {
  std::vector<Planted> out;
  auto add = [&](RuleInfo r, const char* edge) { out.push_back({in_set(std::move(r)), edge}); };
  add(math_rule("planted-permute-rank4", permute_(permute_(a)), compose_rank4, Exact,
                "permute composition, last two axes swapped from rank 4"),
      "rank >= 4");
  add(math_rule(
          "planted-max-empty-axis", maxr_(expand_(a)),
          [](ir::EGraph& g, const Match& m) { reduce_of_expand(g, m, Op::MaxReduce, false, true); }, Exact,
          "max over an axis expanded from 1 to n = x, also for n = 0"),
      "an empty reduced axis (max over nothing is -inf)");
  add(math_rule(
          "planted-add-plus-zero", add_(a, b),
          [](ir::EGraph& g, const Match& m) {
            const auto& k = g.data(m[b]).constant;
            if (k && *k == 0 && !std::signbit(*k) && is_f32(g, m[a])) g.merge(m.root(), m[a]);
          },
          Exact, "x + (+0) = x"),
      "x = -0 (-0 + +0 = +0)");
  add(math_rule("planted-mul-assoc", mul_(mul_(a, b), c), rhs_if(mul_(a, mul_(b, c)),
                                                                  [](ir::EGraph& g, const Match& m) {
                                                                    return is_f32(g, m.root());
                                                                  }),
                Exact, "f32 multiplication regrouped"),
      "overflow or underflow on one side only (3e38 * 2 * 0.5)");
  add(math_rule(
          "planted-i32-successor", lt_(a, add_(a, b)),
          [](ir::EGraph& g, const Match& m) {
            if (is_i32(g, m[a]) && is_const(g, m[b], 1)) merge_bool(g, m, true);
          },
          Exact, "x < x + 1 for i32"),
      "i32 wrap-around at INT32_MAX");
  add(math_rule(
          "planted-i32-negative", lt_(neg_(a), b),
          [](ir::EGraph& g, const Match& m) {
            if (is_i32(g, m[a]) && is_const(g, m[b], 0)) g.merge(m.root(), ir::add_plain(g, Op::LessThan, {m[b], m[a]}));
          },
          Exact, "(-x < 0) = (0 < x) for i32"),
      "i32 wrap-around at INT32_MIN (-INT32_MIN = INT32_MIN)");
  add(math_rule("planted-slice-step", slice_(slice_(a)), slice_steps_added, Exact,
                "slice(slice x) with step t1 + t2 - 1"),
      "both slice steps > 1");
  add(math_rule("planted-pad-fill", pad_(pad_(a)), pad_pad_any_fill, Exact, "pad(pad x) whatever the fills"),
      "two pads with different fill values");
  add(math_rule(
          "planted-sum-any-axis", sum_(expand_(a)),
          [](ir::EGraph& g, const Match& m) { reduce_of_expand(g, m, Op::SumReduce, true, false); }, Exact,
          "sum over an axis of expand(x) = n * x, broadcast or not"),
      "the reduced axis was not broadcast from a size-1 dim");
  add(math_rule("planted-max-as-where", max_(a, b), rhs_if(where_(lt_(b, a), a, b),
                                                          [](ir::EGraph& g, const Match& m) {
                                                            return is_f32(g, m.root());
                                                          }),
                Exact, "max(x, y) = where(y < x, x, y)"),
      "x is NaN (max propagates it, the where picks y)");
  add(math_rule("planted-recip-recip", recip_(recip_(a)), a, Exact, "1/(1/x) = x"),
      "subnormal x (1/x = inf, so the left side is 0)");
  add(math_rule("planted-max-comm", max_(a, b), rhs_if(max_(b, a),
                                                      [](ir::EGraph& g, const Match& m) {
                                                        return is_f32(g, m.root());
                                                      }),
                Exact, "max(x, y) = max(y, x) for f32"),
      "a tie of -0 and +0 (max returns its second operand)");
  add(math_rule(
          "planted-equal-self", eq_(a, a),
          [](ir::EGraph& g, const Match& m) {
            if (is_f32(g, m[a])) merge_bool(g, m, true);
          },
          Exact, "(x == x) = true for f32"),
      "NaN (NaN == NaN is false)");
  {
    RuleInfo r =
        math_rule("planted-half-sum-round-trip", cast_(cast_(add_(a, b))), half_sum_round_trip, Exact,
                  "cast_f32(cast_h(p + q)) = p + q for zero pads of halves, overlapping or not");
    if (const RuleInfo* real = Registry::global().find("half-concat-round-trip")) r.example = real->example;
    add(std::move(r), "pads whose ranges overlap (a sum of two halves, which h may not hold)");
  }
  return out;
}

}  // namespace planted_rules
