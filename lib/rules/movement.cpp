// Movement rules: composing and cancelling views (permute, reshape, expand, slice, pad),
// removing identity views, and moving views through elementwise ops and reductions, so
// that equal index maps meet in one class and fusion sees the views next to each other.
// The language has no copy op (views are free index maps; a kernel materializes what it
// needs), so "removing copies" is removing identity views. docs/rules.md explains each rule.
#include <array>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "backends/reference/kernels.hpp"
#include "graph/graph_impl.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "rules/algebra_dsl.hpp"
#include "runtime/half.hpp"

namespace luminal::rules {
namespace {

using namespace dsl;
namespace rf = detail::reference;

// The pad value an elementwise op produces from pad values `vs` (of dtype `dt`), computed
// with the interpreter's kernels so it is exactly what the op computes on padding.
std::optional<double> fold_pad_value(Op op, const std::vector<double>& vs, DType dt, DType cast_to) {
  try {
    std::vector<rf::View> in;
    for (double v : vs) in.push_back(rf::constant(v, dt));
    if (is_unary(op)) return rf::storage_element(rf::unary(ir::to_prim(op), in[0]), 0);
    if (is_binary(op)) return rf::storage_element(rf::binary(ir::to_prim(op), in[0], in[1]), 0);
    if (op == Op::Cast) return rf::storage_element(rf::cast(in[0], cast_to), 0);
  } catch (const Error&) {
  }
  return std::nullopt;
}

bool is_identity_perm(const std::vector<int>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int>(i)) return false;
  return true;
}

// Outer view of an inner view of the same kind collapses into one outer view over x:
// reshape(reshape x) = reshape x (both row-major); expand(expand x) = expand x (a dim
// of x is 1 or equal to the first target, which is 1 or equal to the second).
void collapse_same(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& outer : attr_nodes(g, m.root(), op))
    for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), op)) {
      if (g.find(inner.kid) != g.find(m[a])) continue;
      const Id x = m[a];
      const std::vector<Dim> target = attr(g, outer.payload).shape;
      if (same_shape(target, g.data(x).shape))
        g.merge(m.root(), x);
      else
        g.merge(m.root(), g.add(op, outer.payload, {x}));
    }
}

// A reshape or expand to the shape x already has.
void identity_shape_view(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& n : attr_nodes(g, m.root(), op))
    if (g.find(n.kid) == g.find(m[a]) && same_shape(attr(g, n.payload).shape, g.data(m[a]).shape))
      g.merge(m.root(), m[a]);
}

// reduce_k(permute_p x) = permute_{p'}(reduce_{p[k]} x): the same elements in the same
// order along the reduced axis.
void reduce_through_permute(ir::EGraph& g, const Match& m, Op op) {
  for (const ir::AttrNode& rn : attr_nodes(g, m.root(), op))
    for (const ir::AttrNode& pn : attr_nodes(g, g.find(rn.kid), Op::Permute)) {
      if (g.find(pn.kid) != g.find(m[a])) continue;
      const int k = attr(g, rn.payload).axis;
      const std::vector<int> p = attr(g, pn.payload).perm;
      if (k < 0 || static_cast<size_t>(k) >= p.size()) continue;
      const int ax = p[static_cast<size_t>(k)];
      std::vector<int> rest;
      for (size_t i = 0; i < p.size(); ++i)
        if (static_cast<int>(i) != k) rest.push_back(p[i] > ax ? p[i] - 1 : p[i]);
      Id r = ir::add_reduce(g, op, m[a], ax);
      g.merge(m.root(), is_identity_perm(rest) ? r : ir::add_permute(g, r, rest));
    }
}

constexpr Op kViewOps[] = {Op::Reshape, Op::Permute, Op::Expand, Op::Slice, Op::Pad};

// concat(x, x) along axis k -- add(pad(x, k, 0, n, z), pad(x, k, n, 0, z)) with z the
// zero a concat pads with (-0 for floats: x + -0 = x for every x; 0 for integers) -- is x
// tiled twice along k: reshape to [.., 1, n, ..], expand to [.., 2, n, ..], reshape to
// [.., 2n, ..] -- a view, so a kernel computes x once an element where the sum computed
// both pieces at every element (RoPE's cos and sin tables: concat(cos, cos)).
void concat_self(ir::EGraph& g, const Match& m) {
  for (const ir::AttrNode& pa : attr_nodes(g, m[a], Op::Pad))
    for (const ir::AttrNode& pb : attr_nodes(g, m[b], Op::Pad)) {
      const Id x = g.find(pa.kid);
      if (g.find(pb.kid) != x) continue;
      const ir::Attr A = attr(g, pa.payload), B = attr(g, pb.payload);
      const DType dt = g.data(x).dtype;
      const std::vector<Dim> xs = g.data(x).shape;
      if (A.axis != B.axis || A.axis < 0 || static_cast<size_t>(A.axis) >= xs.size()) continue;
      const bool floating = dt == DType::f32 || dt == DType::f16 || dt == DType::bf16;
      if (!floating && dt != DType::i32) continue;  // booleans concatenate with or
      const double z = -0.0;
      for (const ir::Attr* f : {&A, &B})
        if (floating ? std::memcmp(&f->value, &z, sizeof(double)) != 0 : f->value != 0) goto next;
      {
        const size_t k = static_cast<size_t>(A.axis);
        const Dim n = xs[k];
        const bool ab = cdim(A.a) == 0 && A.b.same_as(n) && B.a.same_as(n) && cdim(B.b) == 0;
        const bool ba = cdim(B.a) == 0 && B.b.same_as(n) && A.a.same_as(n) && cdim(A.b) == 0;
        if (!ab && !ba) continue;
        std::vector<Dim> one = xs, two = xs, out = xs;
        one.insert(one.begin() + static_cast<std::ptrdiff_t>(k), Dim(1));
        two.insert(two.begin() + static_cast<std::ptrdiff_t>(k), Dim(2));
        out[k] = n * Dim(2);
        if (!same_shape(out, g.data(m.root()).shape)) continue;
        g.merge(m.root(), ir::add_reshape(g, ir::add_expand(g, ir::add_reshape(g, x, one), two), out));
      }
    next:;
    }
}

// u(view x) = view(u x): a view only moves elements, an elementwise op maps each one; a
// pad's fill becomes u(fill).
void unary_through_view(ir::EGraph& g, const Match& m, Op op) {
  const Id x0 = g.find(m[a]);
  std::vector<DType> casts;  // a cast node's target dtypes (several casts of x0 may share the class)
  if (op == Op::Cast)
    for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Cast))
      if (g.find(n.kid) == x0) casts.push_back(attr(g, n.payload).dtype);
  if (op != Op::Cast) casts.push_back(DType::f32);  // unused
  for (Op vop : kViewOps)
    for (const ir::AttrNode& vn : attr_nodes(g, x0, vop))
      for (DType to : casts) {
        const Id x = g.find(vn.kid);
        const DType dt = g.data(x).dtype;
        Id u = op == Op::Cast ? ir::add_cast(g, x, to) : ir::add_plain(g, op, {x});
        if (vop != Op::Pad) {
          g.merge(m.root(), g.add(vop, vn.payload, {u}));
          continue;
        }
        ir::Attr pa = attr(g, vn.payload);
        auto fill = fold_pad_value(op, {pa.value}, dt, to);
        if (!fill) continue;
        g.merge(m.root(), ir::add_pad(g, u, pa.axis, pa.a, pa.b, *fill));
      }
}

// b(view x, view y) = view(b(x, y)) for the same view (same attributes) of equally shaped
// x and y; a pad's fill becomes b(fill, fill).
void binary_through_view(ir::EGraph& g, const Match& m, Op op) {
  for (Op vop : kViewOps)
    for (const ir::AttrNode& va : attr_nodes(g, m[a], vop))
      for (const ir::AttrNode& vb : attr_nodes(g, m[b], vop)) {
        if (va.payload != vb.payload) continue;
        const Id x = g.find(va.kid), y = g.find(vb.kid);
        if (!same_shape(g.data(x).shape, g.data(y).shape) || g.data(x).dtype != g.data(y).dtype) continue;
        const DType dt = g.data(x).dtype;
        Id r = ir::add_plain(g, op, {x, y});
        if (vop != Op::Pad) {
          g.merge(m.root(), g.add(vop, va.payload, {r}));
          continue;
        }
        ir::Attr pa = attr(g, va.payload);
        auto fill = fold_pad_value(op, {pa.value, pa.value}, dt, dt);
        if (!fill) continue;
        g.merge(m.root(), ir::add_pad(g, r, pa.axis, pa.a, pa.b, *fill));
      }
}

// concat(x, x) along a random axis of a random shape (empty dims, rank up to 4, a
// symbolic dim), of f32, f16, i32 or booleans; sometimes concat(x, y) or concat(x, -x),
// which the rule must leave alone.
std::shared_ptr<detail::GraphImpl> concat_self_example(std::mt19937_64& rng) {
  constexpr std::array kTypes{DType::f32, DType::f32, DType::f16, DType::i32, DType::boolean};
  const DType dt = kTypes[rng() % kTypes.size()];
  Graph g;
  const size_t rank = 1 + rng() % 4;
  std::vector<Dim> shape;
  for (size_t i = 0; i < rank; ++i)
    shape.push_back(Dim(static_cast<int64_t>(rng() % 6 == 0 ? 0 : 1 + rng() % 3)));
  if (rng() % 4 == 0) shape[rng() % rank] = g.dim("n", 1, 8);
  const int axis = static_cast<int>(rng() % rank);
  Tensor x = g.input("x", shape, dt);
  const int other = static_cast<int>(rng() % 6);
  Tensor y = other == 0 ? g.input("y", shape, dt) : other == 1 && dt != DType::boolean ? -x : x;
  g.output("out", luminal::concat({x, y}, axis));
  return g.impl();
}

// One row per elementwise primitive of the op table (graph/op_table.hpp) with one operand
// (unary math, cast), then one per binary primitive. (Where has no row: its condition
// would need the same view as both branches.)
std::vector<RuleInfo> through_view_rules() {
  std::vector<RuleInfo> rows;
  for (const detail::OpInfo& info : detail::kOpTable) {
    if (!detail::is_elementwise(info.cls) || info.arity != 1) continue;
    const Op op = ir::to_op(info.op);
    rows.push_back(math_rule(
        kebab(info.name) + "-through-view", op1(op, a),
        [op](ir::EGraph& g, const Match& m) { unary_through_view(g, m, op); }, Exact,
        "u(view x) = view(u x) for reshape, permute, expand, slice, pad (fill u(v))"));
  }
  for (const detail::OpInfo& info : detail::kOpTable) {
    if (info.cls != detail::OpClass::Binary) continue;
    const Op op = ir::to_op(info.op);
    rows.push_back(math_rule(
        kebab(info.name) + "-through-view", op2(op, a, b),
        [op](ir::EGraph& g, const Match& m) { binary_through_view(g, m, op); }, Exact,
        "b(view x, view y) = view(b(x, y)) for one view of equal-shaped x, y (pad fill b(v, v))"));
  }
  return rows;
}

}  // namespace

RuleSet movement_rules() {
  return {
      "movement",
      concat(
          {
              // ------------------------------ composing and cancelling views
              // permute_q(permute_p(x)) = permute_r(x) with r[i] = p[q[i]].
              math_rule(
                  "permute-permute", permute_(permute_(a)),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Permute))
                      for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Permute)) {
                        if (g.find(inner.kid) != g.find(m[a])) continue;
                        const std::vector<int> p = attr(g, inner.payload).perm,
                                               q = attr(g, outer.payload).perm;
                        if (p.size() != q.size()) continue;
                        std::vector<int> r(p.size());
                        for (size_t i = 0; i < r.size(); ++i) r[i] = p[static_cast<size_t>(q[i])];
                        g.merge(m.root(), is_identity_perm(r) ? m[a] : ir::add_permute(g, m[a], r));
                      }
                  },
                  Exact, "permute_q(permute_p x) = permute_{p[q[i]]} x"),
              math_rule(
                  "permute-identity", permute_(a),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Permute))
                      if (g.find(n.kid) == g.find(m[a]) && is_identity_perm(attr(g, n.payload).perm))
                        g.merge(m.root(), m[a]);
                  },
                  Exact, "permute by the identity = x"),
              math_rule(
                  "reshape-reshape", reshape_(reshape_(a)),
                  [](ir::EGraph& g, const Match& m) { collapse_same(g, m, Op::Reshape); }, Exact,
                  "reshape_s(reshape_t x) = reshape_s x"),
              math_rule(
                  "expand-expand", expand_(expand_(a)),
                  [](ir::EGraph& g, const Match& m) { collapse_same(g, m, Op::Expand); }, Exact,
                  "expand_s(expand_t x) = expand_s x"),
              math_rule(
                  "reshape-identity", reshape_(a),
                  [](ir::EGraph& g, const Match& m) { identity_shape_view(g, m, Op::Reshape); }, Exact,
                  "reshape of x to x's shape = x"),
              math_rule(
                  "expand-identity", expand_(a),
                  [](ir::EGraph& g, const Match& m) { identity_shape_view(g, m, Op::Expand); }, Exact,
                  "expand of x to x's shape = x"),
              // slice(slice(x, s1, e1, t1), s2, e2, t2) on one axis: element j is x[s1 + (s2 + j*t2)*t1].
              math_rule(
                  "slice-slice", slice_(slice_(a)),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Slice))
                      for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Slice)) {
                        if (g.find(inner.kid) != g.find(m[a])) continue;
                        const ir::Attr o = attr(g, outer.payload), in = attr(g, inner.payload);
                        if (o.axis != in.axis) continue;
                        const Dim n = g.data(m.root()).shape[static_cast<size_t>(o.axis)];
                        if (n.lower_bound() < 1) continue;
                        const Dim start = in.a + o.a * Dim(in.step);
                        const int64_t step = in.step * o.step;
                        const Dim end = start + (n - Dim(1)) * Dim(step) + Dim(1);
                        g.merge(m.root(), ir::add_slice(g, m[a], o.axis, start, end, step));
                      }
                  },
                  Exact, "slice(slice x) on one axis = one slice (start s1 + s2*t1, step t1*t2)"),
              math_rule(
                  "slice-identity", slice_(a),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Slice)) {
                      if (g.find(n.kid) != g.find(m[a])) continue;
                      const ir::Attr s = attr(g, n.payload);
                      const std::vector<Dim> xs = g.data(m[a]).shape;
                      if (static_cast<size_t>(s.axis) < xs.size() && s.step == 1 && cdim(s.a) == 0 &&
                          s.b.same_as(xs[static_cast<size_t>(s.axis)]))
                        g.merge(m.root(), m[a]);
                    }
                  },
                  Exact, "slice(x, axis, 0, dim, 1) = x"),
              math_rule(
                  "pad-pad", pad_(pad_(a)),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& outer : attr_nodes(g, m.root(), Op::Pad))
                      for (const ir::AttrNode& inner : attr_nodes(g, g.find(outer.kid), Op::Pad)) {
                        if (g.find(inner.kid) != g.find(m[a])) continue;
                        const ir::Attr o = attr(g, outer.payload), in = attr(g, inner.payload);
                        // The same fill (compared as stored: the bits of the double).
                        if (o.axis != in.axis || std::memcmp(&o.value, &in.value, sizeof(double)) != 0)
                          continue;
                        g.merge(m.root(), ir::add_pad(g, m[a], o.axis, in.a + o.a, in.b + o.b, o.value));
                      }
                  },
                  Exact, "pad(pad(x, lo1, hi1, v), lo2, hi2, v) on one axis = pad(x, lo1+lo2, hi1+hi2, v)"),
              math_rule(
                  "pad-identity", pad_(a),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Pad)) {
                      const ir::Attr p = attr(g, n.payload);
                      if (g.find(n.kid) == g.find(m[a]) && cdim(p.a) == 0 && cdim(p.b) == 0)
                        g.merge(m.root(), m[a]);
                    }
                  },
                  Exact, "pad(x, 0, 0) = x"),
              with_example(math_rule("concat-self", add_(a, b), concat_self, Exact,
                                     "add(pad(x, 0, n, -0), pad(x, n, 0, -0)) = x tiled twice (reshape, "
                                     "expand, reshape): concat(x, x) as a view"),
                           concat_self_example),
              math_rule(
                  "slice-pad-cancel", slice_(pad_(a)),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& s : attr_nodes(g, m.root(), Op::Slice))
                      for (const ir::AttrNode& p : attr_nodes(g, g.find(s.kid), Op::Pad)) {
                        if (g.find(p.kid) != g.find(m[a])) continue;
                        const ir::Attr sa = attr(g, s.payload), pa = attr(g, p.payload);
                        if (sa.axis != pa.axis || sa.step != 1) continue;
                        const Dim n = g.data(m[a]).shape[static_cast<size_t>(sa.axis)];
                        if (sa.a.same_as(pa.a) && sa.b.same_as(pa.a + n)) g.merge(m.root(), m[a]);
                      }
                  },
                  Exact, "slice(pad(x, lo, hi), lo, lo + n, 1) = x (n = x's dim)"),
              // permute_p(expand_s x) = expand_{s permuted}(permute_p x).
              math_rule(
                  "permute-expand-swap", permute_(expand_(a)),
                  [](ir::EGraph& g, const Match& m) {
                    for (const ir::AttrNode& pn : attr_nodes(g, m.root(), Op::Permute))
                      for (const ir::AttrNode& en : attr_nodes(g, g.find(pn.kid), Op::Expand)) {
                        if (g.find(en.kid) != g.find(m[a])) continue;
                        const std::vector<int> p = attr(g, pn.payload).perm;
                        const std::vector<Dim> s = attr(g, en.payload).shape;
                        if (p.size() != s.size()) continue;
                        std::vector<Dim> ps;
                        for (int i : p) ps.push_back(s[static_cast<size_t>(i)]);
                        g.merge(m.root(), ir::add_expand(g, ir::add_permute(g, m[a], p), ps));
                      }
                  },
                  Exact, "permute_p(expand_s x) = expand_{p(s)}(permute_p x)"),
              math_rule(
                  "sum-through-permute", sum_(permute_(a)),
                  [](ir::EGraph& g, const Match& m) { reduce_through_permute(g, m, Op::SumReduce); }, Exact,
                  "sum_k(permute_p x) = permute_p'(sum_{p[k]} x)"),
              math_rule(
                  "max-through-permute", maxr_(permute_(a)),
                  [](ir::EGraph& g, const Match& m) { reduce_through_permute(g, m, Op::MaxReduce); }, Exact,
                  "max_k(permute_p x) = permute_p'(max_{p[k]} x)"),

          },
          through_view_rules())};  // views through elementwise ops, from the op table
}

}  // namespace luminal::rules
