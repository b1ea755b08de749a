// Algebra rules: constant folding, identities, reassociation, factoring, reductions of
// reductions and of broadcasts, comparisons and where. Each rule states an identity of the
// primitives' semantics (graph/primitives.hpp); docs/rules.md says why each one holds and
// why the fast-math ones are tagged. The rule checker (tests/compiler/rule_check_test.cpp)
// verifies every one of them on random instances.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include "graph/graph_impl.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "rules/algebra_dsl.hpp"

namespace luminal::rules {
namespace {

using namespace dsl;

// A class whose every element is known (the analysis folds elementwise ops over uniform
// operands with the interpreter's kernels) also gets the broadcast constant as a node.
void fold_class(ir::EGraph& g, const Match& m) {
  const ir::ClassData& d = g.data(m.root());
  if (!d.constant || !d.valid) return;
  if (d.dtype != DType::f32 && d.dtype != DType::i32 && d.dtype != DType::boolean) return;
  const double v = *d.constant;
  const DType dt = d.dtype;
  const std::vector<Dim> shape = d.shape;
  g.merge(m.root(), broadcast_const(g, v, dt, shape));
}

void mul_zero(ir::EGraph& g, const Match& m) {
  if (is_const(g, m[b], 0))
    g.merge(m.root(), m[b]);
  else if (is_const(g, m[a], 0))
    g.merge(m.root(), m[a]);
}
bool is_float(const ir::EGraph& g, Id cls) { return g.data(cls).dtype == DType::f32; }
// Rule variants that hold exactly for wrap-around integers (and bool) but not for f32.
bool not_float(ir::EGraph& g, const Match& m) { return !is_float(g, m.root()); }

// The additive identity of x's dtype: for f32 that is -0 (x + -0 = x for every x, -0
// included), not +0 (-0 + +0 = +0, which recip can tell from -0).
bool is_additive_identity(const ir::EGraph& g, Id k, Id x) {
  const auto& c = g.data(k).constant;
  if (!c || *c != 0) return false;
  return g.data(x).dtype != DType::f32 || std::signbit(*c);
}

// x + (+0): what a float sum over one element (or n equal ones) adds to its first term,
// turning -0 into +0 and leaving every other value as it is.
Id plus_zero(ir::EGraph& g, Id x) {
  if (g.data(x).dtype != DType::f32) return x;
  const std::vector<Dim> shape = g.data(x).shape;
  return ir::add_plain(g, Op::Add, {x, broadcast_const(g, 0.0, DType::f32, shape)});
}

// Pads of one axis whose data ranges [lo, lo + n) do not overlap: summed, every element
// is one piece's value or a fill, never two values.
bool disjoint_pads(const ir::Attr& p, const Dim& n1, const ir::Attr& q, const Dim& n2) {
  auto ends_before = [](const Dim& lo, const Dim& n, const Dim& other) {
    const Dim end = lo + n;
    if (end.same_as(other)) return true;
    const auto e = end.as_constant(), o = other.as_constant();
    return e && o && *e <= *o;
  };
  return p.axis == q.axis && (ends_before(p.a, n1, q.a) || ends_before(q.a, n2, p.a));
}

// Whether every element of the f32 class `x` is a value of the half type `h` (so
// cast_f32(cast_h(x)) = x): a half widened, a view of such a value, or a pad of one whose
// fill h holds (an integer up to 256 in magnitude: f16 and bf16 hold those). Proven by
// any node of the class, to a bounded depth.
// (`seen`: the classes this query explored, each once: a class with several views of
// several views would otherwise be walked exponentially often.)
bool holds_halves(const ir::EGraph& g, Id x, DType h, int depth, std::vector<Id>& seen) {
  x = g.find(x);
  if (depth > 8 || g.data(x).dtype != DType::f32) return false;
  if (std::find(seen.begin(), seen.end(), x) != seen.end()) return false;
  seen.push_back(x);
  for (const ir::AttrNode& n : attr_nodes(g, x, Op::Cast))
    if (g.data(n.kid).dtype == h) return true;
  for (Op v : {Op::Reshape, Op::Permute, Op::Expand, Op::Slice})
    for (const ir::AttrNode& n : attr_nodes(g, x, v))
      if (holds_halves(g, n.kid, h, depth + 1, seen)) return true;
  for (const ir::AttrNode& n : attr_nodes(g, x, Op::Pad)) {
    const double fill = attr(g, n.payload).value;
    if (fill == std::trunc(fill) && std::fabs(fill) <= 256 && holds_halves(g, n.kid, h, depth + 1, seen))
      return true;
  }
  return false;
}
bool holds_halves(const ir::EGraph& g, Id x, DType h, int depth) {
  std::vector<Id> seen;
  return holds_halves(g, x, h, depth, seen);
}

// Whether p + q holds h values only: both pads filled with +-0 over disjoint ranges of
// one axis (a concat, as ops' concat builds one), their pieces holding h values: each
// element is one piece's value plus a zero, which is exact.
bool concat_holds_halves(const ir::EGraph& g, Id p, Id q, DType h) {
  for (const ir::AttrNode& pn : attr_nodes(g, g.find(p), Op::Pad))
    for (const ir::AttrNode& qn : attr_nodes(g, g.find(q), Op::Pad)) {
      const ir::Attr pa = attr(g, pn.payload), qa = attr(g, qn.payload);
      if (pa.value != 0 || qa.value != 0) continue;  // +0 or -0
      const auto ax = static_cast<size_t>(pa.axis);
      if (ax >= g.data(pn.kid).shape.size() || ax >= g.data(qn.kid).shape.size()) continue;
      if (!disjoint_pads(pa, g.data(pn.kid).shape[ax], qa, g.data(qn.kid).shape[ax])) continue;
      if (holds_halves(g, pn.kid, h, 1) && holds_halves(g, qn.kid, h, 1)) return true;
    }
  return false;
}

// cast_f32(cast_h(x)) = x where `holds(h)` proves x holds h values only.
template <class Holds>
void merge_half_round_trip(ir::EGraph& g, Id root, Id x, Holds holds) {
  x = g.find(x);
  if (x == egraph::kNoId || g.data(x).dtype != DType::f32) return;
  for (const ir::AttrNode& outer : attr_nodes(g, root, Op::Cast)) {
    if (attr(g, outer.payload).dtype != DType::f32) continue;
    for (const ir::AttrNode& inner : attr_nodes(g, outer.kid, Op::Cast)) {
      const DType h = attr(g, inner.payload).dtype;
      if (inner.kid != x || (h != DType::f16 && h != DType::bf16) || !holds(h)) continue;
      g.merge(root, x);
      return;
    }
  }
}

void half_round_trip(ir::EGraph& g, const Match& m) {
  merge_half_round_trip(g, m.root(), m[a], [&](DType h) { return holds_halves(g, m[a], h, 0); });
}

// Fast math: a value computed in f32, rounded to a half and widened again, is kept in
// f32 -- the intermediate roundings of an elementwise chain on halves dropped, as
// torch.compile (upcast to f32 inside a fused kernel) and nvcc's excess precision do.
void half_excess_precision(ir::EGraph& g, const Match& m) {
  merge_half_round_trip(g, m.root(), m[a], [](DType) { return true; });
}

void half_concat_round_trip(ir::EGraph& g, const Match& m) {
  const Id sum = g.lookup(Op::Add, 0u, std::vector<Id>{m[a], m[b]});
  if (sum == egraph::kNoId) return;
  merge_half_round_trip(g, m.root(), sum, [&](DType h) { return concat_holds_halves(g, m[a], m[b], h); });
}

// Half tensors concatenated (ops' concat widens them, pads with +0 and adds, then
// rounds back), sometimes viewed or padded, sometimes with an f32 piece (no round trip
// then), read back as f32: a decode step's concat(k_cache, k_new) under attention.
std::shared_ptr<detail::GraphImpl> half_concat_example(std::mt19937_64& rng) {
  Graph g;
  const DType h = rng() % 2 == 0 ? DType::f16 : DType::bf16;
  if (rng() % 4 == 0) {
    // Pads whose ranges overlap (no concat: the middle elements are sums of two halves,
    // which h may not hold): the rule must not fire.
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3);
    Tensor x = cast(g.input("x0", {Dim(n)}, h), DType::f32), y = cast(g.input("x1", {Dim(n)}, h), DType::f32);
    Tensor s = pad(x, {{Dim(0), Dim(1)}}, 0.0f) + pad(y, {{Dim(1), Dim(0)}}, 0.0f);
    g.output("y", cast(cast(s, h), DType::f32));
    return g.impl();
  }
  const int rank = 1 + static_cast<int>(rng() % 3),
            axis = static_cast<int>(rng() % static_cast<uint64_t>(rank));
  const Dim n = g.dim("n", 0, 6);
  std::vector<Tensor> pieces;
  const int count = 2 + static_cast<int>(rng() % 2);
  for (int i = 0; i < count; ++i) {
    std::vector<Dim> shape;
    for (int d = 0; d < rank; ++d)
      shape.push_back(d == axis ? (rng() % 3 == 0 ? n : Dim(static_cast<int64_t>(rng() % 3))) : Dim(2));
    const DType dt = rng() % 6 == 0 ? DType::f32 : h;
    std::string name = "x";
    name.append(std::to_string(i));
    pieces.push_back(g.input(name, shape, dt));
  }
  Tensor c = concat(pieces, axis);
  if (c.dtype() != h) c = cast(c, h);  // an f32 piece: the round trip is not exact
  if (rng() % 3 == 0) {
    std::vector<std::pair<Dim, Dim>> lo_hi(static_cast<size_t>(rank), {Dim(0), Dim(0)});
    lo_hi[0] = {Dim(0), Dim(1)};
    c = pad(c, lo_hi, 0.0f);
  }
  Tensor y = cast(c, DType::f32);
  if (rng() % 3 == 0) {
    Dim total(1);
    for (const Dim& d : y.shape()) total = total * d;
    y = reshape(y, {total});
  }
  g.output("y", y);
  return g.impl();
}

// x + (-x): zero for every finite x; inf - inf is NaN, so only fast-math for f32.
void sub_self(ir::EGraph& g, const Match& m) {
  const ir::ClassData& d = g.data(m.root());
  const DType dt = d.dtype;
  const std::vector<Dim> shape = d.shape;
  g.merge(m.root(), broadcast_const(g, 0, dt, shape));
}

void const_bool(ir::EGraph& g, const Match& m, bool v) {
  const std::vector<Dim> shape = g.data(m.root()).shape;
  g.merge(m.root(), broadcast_const(g, v ? 1 : 0, DType::boolean, shape));
}

// sum_i sum_j x = sum_j sum_i x: the same elements added in another order.
void swap_reductions(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), op)) {
    const Id inner_cls = g.find(outer.kid);
    for (const ir::AttrNode& inner : attr_nodes(g, inner_cls, op)) {
      if (g.find(inner.kid) != g.find(m[a])) continue;
      const int j = attr(g, inner.payload).axis;
      const int i = attr(g, outer.payload).axis;
      const int first = i < j ? i : i + 1;  // the outer axis, numbered in x
      const int second = j < first ? j : j - 1;
      Id t = ir::add_reduce(g, op, m[a], first);
      g.merge(m.root(), ir::add_reduce(g, op, t, second));
    }
  }
}

// Reducing an axis that expand broadcast from size 1: every term is the same x. The rest
// of the expand (other broadcast axes) is kept.
void reduce_of_expand(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& red : attr_nodes(g, m.root(), op)) {
    const Id e_cls = g.find(red.kid);
    for (const ir::AttrNode& ex : attr_nodes(g, e_cls, Op::Expand)) {
      if (g.find(ex.kid) != g.find(m[a])) continue;
      const int axis = attr(g, red.payload).axis;
      std::vector<Dim> xs = g.data(m[a]).shape;
      std::vector<Dim> target = attr(g, ex.payload).shape;
      const DType dt = g.data(m[a]).dtype;
      if (static_cast<size_t>(axis) >= xs.size() || !is_one(xs[static_cast<size_t>(axis)])) continue;
      const auto n = cdim(target[static_cast<size_t>(axis)]);
      if (!n || *n < 1) continue;  // the sum of an empty axis is 0, its max -inf
      xs.erase(xs.begin() + axis);
      target.erase(target.begin() + axis);
      Id r = ir::add_reshape(g, m[a], xs);
      if (!same_shape(xs, target)) r = ir::add_expand(g, r, target);
      if (op == Op::SumReduce && *n != 1)
        r = ir::add_plain(g, Op::Mul, {r, broadcast_const(g, static_cast<double>(*n), dt, target)});
      if (op == Op::SumReduce) r = plus_zero(g, r);  // the sum starts at +0
      g.merge(m.root(), r);
    }
  }
}

// Reducing an axis of size 1: 0 + x = x, max(-inf, x) = x.
void reduce_unit_axis(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& red : attr_nodes(g, m.root(), op)) {
    if (g.find(red.kid) != g.find(m[a])) continue;
    const int axis = attr(g, red.payload).axis;
    std::vector<Dim> xs = g.data(m[a]).shape;
    if (static_cast<size_t>(axis) >= xs.size() || !is_one(xs[static_cast<size_t>(axis)])) continue;
    xs.erase(xs.begin() + axis);
    const Id r = ir::add_reshape(g, m[a], xs);
    g.merge(m.root(), op == Op::SumReduce ? plus_zero(g, r) : r);  // the sum starts at +0
  }
}

// One folding row per elementwise primitive of the op table (graph/op_table.hpp).
std::vector<RuleInfo> fold_rules() {
  std::vector<RuleInfo> rows;
  for (const detail::OpInfo& info : detail::kOpTable) {
    if (!detail::is_elementwise(info.cls)) continue;
    const Op op = ir::to_op(info.op);
    const std::string name = "fold-" + kebab(info.name), call = std::string(info.name);
    switch (info.arity) {
      case 1:
        rows.push_back(math_rule(name, op1(op, a), fold_class, Exact, call + "(k) = constant"));
        break;
      case 2:
        rows.push_back(math_rule(name, op2(op, a, b), fold_class, Exact, call + "(k1, k2) = constant"));
        break;
      default:
        rows.push_back(math_rule(name, egraph::pnode<L>(op, a, b, c), fold_class, Exact,
                                 call + "(k, x, y) = constant (k constant, or x, y the same constant)"));
        break;
    }
  }
  return rows;
}

}  // namespace

RuleSet algebra_rules() {
  return {"algebra", concat(fold_rules(),  // constant folding, from the op table
                            {
          // ------------------------------ identities
          math_rule(
              "add-zero", add_(a, b),
              [](ir::EGraph& g, const Match& m) {
                if (is_additive_identity(g, m[b], m[a]))
                  g.merge(m.root(), m[a]);
                else if (is_additive_identity(g, m[a], m[b]))
                  g.merge(m.root(), m[b]);
              },
              Exact, "x + (-0) = x (f32), x + 0 = x (i32); x + (+0) is not x at x = -0"),
          math_rule(
              "mul-one", mul_(a, b),
              [](ir::EGraph& g, const Match& m) {
                if (is_const(g, m[b], 1))
                  g.merge(m.root(), m[a]);
                else if (is_const(g, m[a], 1))
                  g.merge(m.root(), m[b]);
              },
              Exact, "x * 1 = x, 1 * x = x"),
          math_rule("mul-zero", mul_(a, b), mul_zero, FastMath, "x * 0 = 0 (f32: inf*0 and NaN*0 are NaN)"),
          math_rule(
              "mul-zero-exact", mul_(a, b),
              [](ir::EGraph& g, const Match& m) {
                if (!is_float(g, m.root())) mul_zero(g, m);
              },
              Exact, "x * 0 = 0 for i32 and bool"),
          math_rule("neg-neg", neg_(neg_(a)), a, Exact, ""),
          // Not fast-math: NaN, +-inf and +-0 round-trip exactly; a normal x comes back within an
          // ulp; for |x| > 2^126, 1/x is subnormal (>= 21 bits), still within 2^-20 relative; a
          // subnormal x comes back as 0 (1/x overflows), an absolute error below 2^-126 -- and
          // 1/x is inf either way, so no later op can tell.
          math_rule("recip-recip", recip_(recip_(a)), a, FastMath,
                    "|x| < 2^-128 (subnormal): 1/x = inf, so the left side is 0"),
          math_rule("exp2-log2", exp2_(log2_(a)), a, FastMath, "x < 0 gives NaN on the left"),
          math_rule("log2-exp2", log2_(exp2_(a)), a, FastMath,
                    "exp2 overflows for x >= 128, underflows below -149"),
          math_rule(
              "div-by-constant", mul_(a, recip_(b)),
              [](ir::EGraph& g, const Match& m) {
                const auto& k = g.data(m[b]).constant;
                if (!k || g.data(m[b]).dtype != DType::f32) return;
                // The recip kernel computes 1.0f / k in f32; so does this (k is an f32 value).
                const float r = 1.0f / static_cast<float>(*k);
                const std::vector<Dim> shape = g.data(m[b]).shape;
                Id kc = broadcast_const(g, r, DType::f32, shape);
                g.merge(m.root(), ir::add_plain(g, Op::Mul, {m[a], kc}));
              },
              Exact, "x * recip(k) = x * (1/k): the reciprocal of a constant is computed once"),
          math_rule("max-self", max_(a, a), a, Exact, ""),
          math_rule(
              "cast-same", cast_(a),
              [](ir::EGraph& g, const Match& m) {
                for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Cast))
                  if (g.find(n.kid) == g.find(m[a]) && attr(g, n.payload).dtype == g.data(m[a]).dtype)
                    g.merge(m.root(), m[a]);
              },
              Exact, "cast(x, dtype of x) = x"),
          with_example(math_rule("half-round-trip", cast_(cast_(a)), half_round_trip, Exact,
                                 "cast_f32(cast_h(x)) = x for x of f16/bf16 values only: a half "
                                 "widened, its views, its pads with a small integer fill"),
                       half_concat_example),
          [] {
            RuleInfo r = math_rule("half-excess-precision", cast_(cast_(a)), half_excess_precision, FastMath,
                                   "cast_f32(cast_h(x)) = x for any f32 x: within the half's rounding "
                                   "(2^-11 f16, 2^-8 bf16 relative), and |x| past the half's range stays finite");
            r.declared_error = 0x1p-8;
            return r;
          }(),
          with_example(math_rule("half-concat-round-trip", cast_(cast_(add_(a, b))), half_concat_round_trip, Exact,
                                 "cast_f32(cast_h(p + q)) = p + q for pads p, q of +-0 over disjoint ranges "
                                 "of one axis (a concat) whose pieces hold f16/bf16 values only"),
                       half_concat_example),
          math_rule("sub-self", add_(a, neg_(a)), sub_self, FastMath,
                    "x - x = 0 (f32: inf - inf and NaN - NaN are NaN)"),
          math_rule(
              "sub-self-exact", add_(a, neg_(a)),
              [](ir::EGraph& g, const Match& m) {
                if (!is_float(g, m.root())) sub_self(g, m);
              },
              Exact, "x - x = 0 for i32 (two's complement)"),
          math_rule("mul-neg", mul_(neg_(a), b), neg_(mul_(a, b)), Exact, ""),
          math_rule("add-neg-neg", add_(neg_(a), neg_(b)), neg_(add_(a, b)), FastMath,
                    "f32: x = +0, y = -0 gives +0 on the left, -0 on the right"),
          math_rule("add-neg-neg-exact", add_(neg_(a), neg_(b)), rhs_if(neg_(add_(a, b)), not_float), Exact,
                    "i32 only: two's complement"),

          // ------------------------------ commutativity, associativity
          math_rule("add-comm", add_(a, b), add_(b, a), Exact, ""),
          math_rule("mul-comm", mul_(a, b), mul_(b, a), Exact, ""),
          // max returns its second operand on a tie, and -0 ties +0: max(-0, +0) = +0 but
          // max(+0, -0) = -0.
          math_rule("max-comm", max_(a, b), max_(b, a), FastMath, "f32: max(-0, +0) = +0, max(+0, -0) = -0"),
          math_rule("max-comm-exact", max_(a, b), rhs_if(max_(b, a), not_float), Exact, "i32 and bool only"),
          math_rule("equal-comm", eq_(a, b), eq_(b, a), Exact, ""),
          // Float addition is not associative beyond rounding: with cancellation the regrouped sum
          // can lose every significant bit of the result ((x - m) - l vs x - (m + l) for a large m
          // broke log_softmax on large inputs against PyTorch). So float reassociation is
          // fast-math, while i32 (a ring modulo 2^32) reassociates exactly.
          math_rule("add-assoc", add_(add_(a, b), c), add_(a, add_(b, c)), FastMath,
                    "f32: cancellation makes the error unbounded"),
          math_rule(
              "add-assoc-exact", add_(add_(a, b), c),
              rhs_if(add_(a, add_(b, c)),
                     [](ir::EGraph& g, const Match& m) { return g.data(m.root()).dtype == DType::i32; }),
              Exact, "i32 only: a ring modulo 2^32"),
          // (x * 2) * 0.5 overflows to inf at x = 3e38 where x * (2 * 0.5) = x does not (and
          // (x * 1e-30) * 1e30 underflows): not a rounding difference.
          math_rule("mul-assoc", mul_(mul_(a, b), c), mul_(a, mul_(b, c)), FastMath,
                    "f32: an overflow or underflow on one side only (3e38 * 2 * 0.5)"),
          math_rule("mul-assoc-exact", mul_(mul_(a, b), c), rhs_if(mul_(a, mul_(b, c)), not_float), Exact,
                    "i32 (a ring modulo 2^32) and bool only"),
          math_rule("max-assoc", max_(max_(a, b), c), max_(a, max_(b, c)), Exact, ""),

          // ------------------------------ distributing and factoring
          math_rule("factor", add_(mul_(a, b), mul_(a, c)), mul_(a, add_(b, c)), FastMath,
                    "f32: x = inf, y = 1, z = 0 gives NaN vs inf"),
          math_rule(
              "factor-exact", add_(mul_(a, b), mul_(a, c)),
              rhs_if(mul_(a, add_(b, c)),
                     [](ir::EGraph& g, const Match& m) { return g.data(m.root()).dtype == DType::i32; }),
              Exact, "i32 only: a ring modulo 2^32"),
          math_rule("distribute", mul_(a, add_(b, c)), add_(mul_(a, b), mul_(a, c)), FastMath,
                    "f32: NaN/inf results differ, see factor"),

          // ------------------------------ comparisons and where
          math_rule("where-same", where_(a, b, b), b, Exact, ""),
          math_rule(
              "where-const-cond", where_(a, b, c),
              [](ir::EGraph& g, const Match& m) {
                if (is_const(g, m[a], 1))
                  g.merge(m.root(), m[b]);
                else if (is_const(g, m[a], 0))
                  g.merge(m.root(), m[c]);
              },
              Exact, "where(true, x, y) = x, where(false, x, y) = y"),
          math_rule("where-not", where_(eq_(a, d), b, c),
                    rhs_if(where_(a, c, b),
                           [](ir::EGraph& g, const Match& m) {
                             return g.data(m[a]).dtype == DType::boolean && is_const(g, m[d], 0);
                           }),
                    Exact, "x boolean, w = false"),
          math_rule(
              "less-than-self", lt_(a, a), [](ir::EGraph& g, const Match& m) { const_bool(g, m, false); },
              Exact, "(x < x) = false (also for NaN)"),
          math_rule(
              "equal-self", eq_(a, a), [](ir::EGraph& g, const Match& m) { const_bool(g, m, true); },
              FastMath, "(x == x) = true (f32: NaN == NaN is false)"),
          math_rule(
              "equal-self-exact", eq_(a, a),
              [](ir::EGraph& g, const Match& m) {
                if (!is_float(g, m[a])) const_bool(g, m, true);
              },
              Exact, "(x == x) = true for i32 and bool"),

          // ------------------------------ reductions
          math_rule(
              "sum-swap", sum_(sum_(a)),
              [](ir::EGraph& g, const Match& m) { swap_reductions(g, m, Op::SumReduce); }, FastMath,
              "f32: the terms are added in another order (cancellation, as float add-assoc)"),
          math_rule(
              "sum-swap-exact", sum_(sum_(a)),
              [](ir::EGraph& g, const Match& m) {
                if (!is_float(g, m.root())) swap_reductions(g, m, Op::SumReduce);
              },
              Exact, "i32 only: a ring modulo 2^32"),
          math_rule(
              "max-reduce-swap", maxr_(maxr_(a)),
              [](ir::EGraph& g, const Match& m) { swap_reductions(g, m, Op::MaxReduce); }, FastMath,
              "f32: ties of -0 and +0 are resolved in another order"),
          math_rule(
              "max-reduce-swap-exact", maxr_(maxr_(a)),
              [](ir::EGraph& g, const Match& m) {
                if (!is_float(g, m.root())) swap_reductions(g, m, Op::MaxReduce);
              },
              Exact, "i32 only"),
          math_rule(
              "sum-expand", sum_(expand_(a)),
              [](ir::EGraph& g, const Match& m) { reduce_of_expand(g, m, Op::SumReduce); }, Exact,
              "sum over an axis expanded from 1 to n of x = n * x + (+0) (f32: rounds differently)"),
          math_rule(
              "max-expand", maxr_(expand_(a)),
              [](ir::EGraph& g, const Match& m) { reduce_of_expand(g, m, Op::MaxReduce); }, Exact,
              "max over an axis expanded from 1 to n >= 1 of x = x"),
          math_rule(
              "sum-unit-axis", sum_(a),
              [](ir::EGraph& g, const Match& m) { reduce_unit_axis(g, m, Op::SumReduce); }, Exact,
              "sum over an axis of size 1 = reshape x + (+0) (the sum starts at +0)"),
          math_rule(
              "max-unit-axis", maxr_(a),
              [](ir::EGraph& g, const Match& m) { reduce_unit_axis(g, m, Op::MaxReduce); }, Exact,
              "max over an axis of size 1 = reshape (max(-inf, x) = x)"),
                            })};
}

}  // namespace luminal::rules
