// Sharding rules (docs/distributed.md): identities of the SPMD semantics
// (graph/primitives.hpp) that split work over the ranks of a distributed program. They
// run in their own phase after the math rules when the e-graph's world
// (TensorAnalysis::world) is above one; extraction then weighs each shard's smaller
// kernels against the collectives' link cost.
//
//   shard(x, ax)  = this rank's block of x along ax: x' when x = all_gather(x', ax) (the
//                   block a rank contributed), the constant or the broadcast itself for
//                   a uniform or broadcast x, else slice(x, ax, %rank*n/P, (%rank+1)*n/P)
//                   for an input or weight (a computed value waits for its all_gather).
//
// all_gather is injective, so a class holds at most one all_gather per axis: a second
// form of the same gathered value merges with the first's operand (gather_into).
//
//   matmul(a, b)                    = all_gather(matmul(a, shard(b, 1)), -1)   column split
//   matmul(all_gather(a, -1), b)    = all_reduce(matmul(a, shard(b, 0)))       row split
//   op(all_gather(x, ax), ...)      = all_gather(op(x, shard(y, ax)...), ax')  elementwise,
//                                     reductions and views away from ax, batched matmul
//
// And one pass over the lowered kernels: an all_reduce kernel gets its second form (the
// reduce-scatter + all_gather exchange, same bits, fewer bytes at 3+ ranks); the cost
// model picks per all_reduce by its size and the link.
//
// "Replicated" (equal on every rank, ClassData::replicated) is each rule's condition
// where a value read on one rank stands for every rank's: the weight of a split matmul,
// the other operand of an elementwise op. With them the search finds Megatron-style
// tensor parallelism: QKV and gate/up split by columns, the gathered heads flow through
// RoPE, attention (batched over heads) and SwiGLU, and o_proj / down take the row split,
// one all_reduce each.
#include <optional>
#include <random>

#include "graph/primitives.hpp"
#include "ir/build.hpp"
#include "ir/kernel_body.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "rules/algebra_dsl.hpp"
#include "rules/kernel_twins.hpp"

namespace luminal::rules {
namespace {

using namespace dsl;

int64_t world(const ir::EGraph& g) { return g.analysis().world(); }

template <PatternExpr X>
constexpr auto all_gather_(X x) {
  return op1(Op::AllGather, x);
}
template <PatternExpr X>
constexpr auto all_reduce_(X x) {
  return op1(Op::AllReduce, x);
}

uint32_t collective_payload(ir::EGraph& g, int axis, int64_t P) {
  ir::Attr a;
  a.axis = axis;
  a.step = P;
  return g.analysis().attrs().intern(a);
}

// The class all_gather(x, ax) over the e-graph's ranks, if it exists.
std::optional<Id> gathered(ir::EGraph& g, Id x, int ax) {
  const Id c = g.lookup(Op::AllGather, collective_payload(g, ax, world(g)), std::span<const Id>(&x, 1));
  if (c == egraph::kNoId) return std::nullopt;
  return c;
}

// Whether class `root` holds the node op(kids...) (payload 0: elementwise, matmul).
bool holds(const ir::EGraph& g, Id root, Op op, std::vector<Id> kids) {
  return g.lookup(op, 0u, std::span<const Id>(kids)) == g.find(root);
}

// Whether class x holds an input or param, or a view (permute, reshape, slice, pad) of
// one. Pad: a KV cache (an input) padded to its place in concat(cache, new rows), which
// is how concat reaches the e-graph (a sum of padded pieces).
bool view_of_leaf(const ir::EGraph& g, Id x, int depth) {
  for (const ir::AttrNode& n : g.data(x).attributed) {
    if (n.op == Op::Param || n.op == Op::Input) return true;
    if (depth > 0 && (n.op == Op::Permute || n.op == Op::Reshape || n.op == Op::Slice || n.op == Op::Pad) &&
        view_of_leaf(g, g.find(n.kid), depth - 1))
      return true;
  }
  return false;
}

// This rank's block of x along ax (see the file comment), or nullopt when the dim is not
// a known multiple of the ranks.
std::optional<Id> shard(ir::EGraph& g, Id x, int ax) {
  const int64_t P = world(g);
  for (const ir::AttrNode& n : attr_nodes(g, x, Op::AllGather)) {
    const ir::Attr at = attr(g, n.payload);
    if (at.axis == ax && at.step == P) return g.find(n.kid);
  }
  std::vector<Dim> shape = g.data(x).shape;
  const Dim d = shape.at(static_cast<size_t>(ax));
  if (d.known_divisor() % P != 0 || d.upper_bound() < P) return std::nullopt;
  const Dim n = d / Dim(P), r = detail::rank_dim(P);
  shape[static_cast<size_t>(ax)] = n;
  // A block of a uniform constant is that constant, and a block of a broadcast along ax is
  // the broadcast to the block: the forms fused kernels (attention's scale and mask,
  // RoPE's tables) are recognised in, rather than a slice of them.
  if (const auto& k = g.data(x).constant) return broadcast_const(g, *k, g.data(x).dtype, shape);
  for (const ir::AttrNode& e : attr_nodes(g, x, Op::Expand)) {
    const Id src = g.find(e.kid);
    if (is_one(g.data(src).shape.at(static_cast<size_t>(ax)))) return ir::add_expand(g, src, shape);
  }
  // A slice only of an input or weight (through views): a computed value gets its shard
  // from the all_gather the rules give it (the shortcut above, on a later iteration). A
  // slice of it made earlier would be a view that fusion absorbs into every consumer,
  // which then reads the whole gathered value (an all_gather the plan does not need).
  if (!view_of_leaf(g, x, 4)) return std::nullopt;
  return ir::add_slice(g, x, ax, r * n, (r + Dim(1)) * n, 1);
}

// Adds root = all_gather(inner, ax). all_gather is injective -- rank r's operand is block r
// of the result -- so when root already is all_gather(s, ax), inner and s are one value
// and are merged instead: every class keeps one shard per axis, however many equal forms
// lead to it (without this the forms multiply along every chain of ops).
void gather_into(ir::EGraph& g, Id root, Id inner, int ax) {
  const int64_t P = world(g);
  for (const ir::AttrNode& n : attr_nodes(g, root, Op::AllGather)) {
    const ir::Attr at = attr(g, n.payload);
    if (at.axis == ax && at.step == P) {
      g.merge(g.find(n.kid), inner);
      return;
    }
  }
  g.merge(root, ir::add_collective(g, Op::AllGather, inner, ax, P));
}

int rank_of(const ir::EGraph& g, Id x) { return static_cast<int>(g.data(x).shape.size()); }
bool replicated(const ir::EGraph& g, Id x) { return g.data(x).replicated; }

// ---------------------------------------------------------------- matmul

// matmul(a, b) = all_gather(matmul(a, shard(b, -1)), -1) for a weight b (a view of a
// param; batched forms too): rank r computes the r-th block of output columns.
void matmul_columns(ir::EGraph& g, const Match& m) {
  const Id A = g.find(m[a]), B = g.find(m[b]);
  if (world(g) < 2 || rank_of(g, B) < 2 || !replicated(g, A) || !replicated(g, B)) return;
  // Any rank: a decode step's [1, d] rows reach the matmul with a unit batch axis.
  auto wb = shard(g, B, rank_of(g, B) - 1);
  if (!wb) return;
  const Id p = ir::add_plain(g, Op::MatMul, {A, *wb});
  gather_into(g, m.root(), p, rank_of(g, A) - 1);
}

// matmul(all_gather(a, ax), b), b replicated:
//   ax = -1 (the contracted axis): all_reduce(matmul(a, shard(b, -2)))  -- the row split;
//   ax = -2 (rows of the product):  all_gather(matmul(a, b), -2);
//   ax a batch axis:                all_gather(matmul(a, shard(b, ax)), ax).
void matmul_gathered_lhs(ir::EGraph& g, const Match& m, bool row_split) {
  const Id A = g.find(m[a]), B = g.find(m[b]);
  if (world(g) < 2 || !replicated(g, B)) return;
  const int R = rank_of(g, A);
  for (int ax = 0; ax < R; ++ax) {
    if ((ax == R - 1) != row_split) continue;
    auto c = gathered(g, A, ax);
    if (!c || !holds(g, m.root(), Op::MatMul, {*c, B})) continue;
    if (ax == R - 1) {
      if (auto wb = shard(g, B, R - 2))
        g.merge(m.root(), ir::add_collective(g, Op::AllReduce, ir::add_plain(g, Op::MatMul, {A, *wb}), 0, world(g)));
    } else if (ax == R - 2) {
      gather_into(g, m.root(), ir::add_plain(g, Op::MatMul, {A, B}), ax);
    } else if (auto wb = shard(g, B, ax)) {
      gather_into(g, m.root(), ir::add_plain(g, Op::MatMul, {A, *wb}), ax);
    }
  }
}

// matmul(a, all_gather(b, ax)), a replicated: the mirror image (ax = -1: columns of the
// product; ax = -2: the contracted axis, all_reduce with a's block of columns).
void matmul_gathered_rhs(ir::EGraph& g, const Match& m) {
  const Id A = g.find(m[a]), B = g.find(m[b]);
  if (world(g) < 2 || !replicated(g, A)) return;
  const int R = rank_of(g, B);
  for (int ax = 0; ax < R; ++ax) {
    auto c = gathered(g, B, ax);
    if (!c || !holds(g, m.root(), Op::MatMul, {A, *c})) continue;
    if (ax == R - 2) {
      if (auto wa = shard(g, A, R - 1))
        g.merge(m.root(), ir::add_collective(g, Op::AllReduce, ir::add_plain(g, Op::MatMul, {*wa, B}), 0, world(g)));
    } else if (ax == R - 1) {
      gather_into(g, m.root(), ir::add_plain(g, Op::MatMul, {A, B}), ax);
    } else if (auto wa = shard(g, A, ax)) {
      gather_into(g, m.root(), ir::add_plain(g, Op::MatMul, {*wa, B}), ax);
    }
  }
}

// ---------------------------------------------------------------- elementwise

// u(all_gather(x, ax)) = all_gather(u(x), ax): u maps each element.
void unary_through_gather(ir::EGraph& g, const Match& m, Op op) {
  const Id X = g.find(m[a]);
  for (int ax = 0; ax < rank_of(g, X); ++ax) {
    auto c = gathered(g, X, ax);
    if (!c) continue;
    if (op == Op::Cast) {
      for (const ir::AttrNode& n : attr_nodes(g, m.root(), Op::Cast))
        if (g.find(n.kid) == *c)
          gather_into(g, m.root(), g.add(Op::Cast, n.payload, {X}), ax);
    } else if (holds(g, m.root(), op, {*c})) {
      gather_into(g, m.root(), ir::add_plain(g, op, {X}), ax);
    }
  }
}

// b(all_gather(x, ax), y) = all_gather(b(x, shard(y, ax)), ax) for a replicated y (and
// the mirror image when the gathered operand is `gathered_side` 1).
void binary_through_gather(ir::EGraph& g, const Match& m, Op op, int gathered_side) {
  const Id X = g.find(gathered_side == 0 ? m[a] : m[b]), Y = g.find(gathered_side == 0 ? m[b] : m[a]);
  if (!replicated(g, Y)) return;
  for (int ax = 0; ax < rank_of(g, X); ++ax) {
    auto c = gathered(g, X, ax);
    if (!c) continue;
    if (!holds(g, m.root(), op, gathered_side == 0 ? std::vector<Id>{*c, Y} : std::vector<Id>{Y, *c})) continue;
    auto y = shard(g, Y, ax);
    if (!y) continue;
    const Id r = ir::add_plain(g, op, gathered_side == 0 ? std::vector<Id>{X, *y} : std::vector<Id>{*y, X});
    gather_into(g, m.root(), r, ax);
  }
}

// where(c, all_gather(x, ax), z) = all_gather(where(shard(c), x, shard(z)), ax): the
// branch a softmax mask selects from (c and z replicated).
void where_through_gather(ir::EGraph& g, const Match& m) {
  const Id C = g.find(m[a]), X = g.find(m[b]), Z = g.find(m[c]);
  if (!replicated(g, C) || !replicated(g, Z)) return;
  for (int ax = 0; ax < rank_of(g, X); ++ax) {
    auto gx = gathered(g, X, ax);
    if (!gx || !holds(g, m.root(), Op::Where, {C, *gx, Z})) continue;
    auto sc = shard(g, C, ax), sz = shard(g, Z, ax);
    if (!sc || !sz) continue;
    gather_into(g, m.root(), ir::add_plain(g, Op::Where, {*sc, X, *sz}), ax);
  }
}

// ---------------------------------------------------------------- reductions and views

// reduce_k(all_gather(x, ax)) = all_gather(reduce_k(x), ax') for k != ax.
void reduce_through_gather(ir::EGraph& g, const Match& m, Op op) {
  const Id X = g.find(m[a]);
  for (int ax = 0; ax < rank_of(g, X); ++ax) {
    auto c = gathered(g, X, ax);
    if (!c) continue;
    for (const ir::AttrNode& n : attr_nodes(g, m.root(), op)) {
      if (g.find(n.kid) != *c) continue;
      const int k = attr(g, n.payload).axis;
      if (k == ax) continue;
      gather_into(g, m.root(), ir::add_reduce(g, op, X, k), k < ax ? ax - 1 : ax);
    }
  }
}

Dim product(const std::vector<Dim>& s, size_t from, size_t to) {
  Dim p(1);
  for (size_t i = from; i < to; ++i) p = p * s[i];
  return p;
}

// view(all_gather(x, ax)) = all_gather(view'(x), ax') for a view that keeps the gathered
// blocks whole: a permute (ax' = where ax goes), an expand, slice or pad of another axis,
// a reshape whose output has an axis ax' with the same elements before it as ax and the
// same elements from it on, its dim a multiple of the ranks (splitting [S, H*D] into
// [S, H, D], merging [H, S, D]... into [S, H*D]).
void view_through_gather(ir::EGraph& g, const Match& m, Op vop) {
  const Id X = g.find(m[a]);
  const int64_t P = world(g);
  for (int ax = 0; ax < rank_of(g, X); ++ax) {
    auto c = gathered(g, X, ax);
    if (!c) continue;
    const std::vector<Dim> in = g.data(*c).shape;
    for (const ir::AttrNode& n : attr_nodes(g, m.root(), vop)) {
      if (g.find(n.kid) != *c) continue;
      ir::Attr at = attr(g, n.payload);
      std::optional<Id> v;
      int out_ax = ax;
      switch (vop) {
        case Op::Permute:
          for (size_t j = 0; j < at.perm.size(); ++j)
            if (at.perm[j] == ax) out_ax = static_cast<int>(j);
          v = ir::add_permute(g, X, at.perm);
          break;
        case Op::Expand:
          if (!at.shape[static_cast<size_t>(ax)].same_as(in[static_cast<size_t>(ax)])) break;
          at.shape[static_cast<size_t>(ax)] = g.data(X).shape[static_cast<size_t>(ax)];
          v = ir::add_expand(g, X, at.shape);
          break;
        case Op::Slice:
        case Op::Pad:
          if (at.axis != ax) v = g.add(vop, n.payload, {X});
          break;
        case Op::Reshape: {
          const std::vector<Dim>& out = at.shape;
          const Dim before = product(in, 0, static_cast<size_t>(ax));
          const Dim from = product(in, static_cast<size_t>(ax), in.size());
          for (size_t j = 0; j < out.size() && !v; ++j) {
            if (out[j].known_divisor() % P != 0 || !detail::dims_provably_equal(product(out, 0, j), before) ||
                !detail::dims_provably_equal(product(out, j, out.size()), from))
              continue;
            std::vector<Dim> s = out;
            s[j] = s[j] / Dim(P);
            out_ax = static_cast<int>(j);
            v = ir::add_reshape(g, X, s);
          }
          break;
        }
        default:
          break;
      }
      if (v) gather_into(g, m.root(), *v, out_ax);
    }
  }
}

// view(all_reduce(x)) = all_reduce(view(x)): a view moves elements, it never adds them, so
// each element is the same rank-order sum either way. Why it matters: a row split's
// all_reduce then sits in the class of the viewed value too (a decode step's
// [1, 1, d] partial products reshaped to the [1, d] residual stream), so the extractor
// can trade the column split's gathers for it by switching that one class; through the
// view's class alone it would take two switches at once, which local improvement of the
// greedy solution never tries.
void view_through_all_reduce(ir::EGraph& g, const Match& m, Op vop) {
  const Id X = g.find(m[a]);
  const Id c = g.lookup(Op::AllReduce, collective_payload(g, 0, world(g)), std::span<const Id>(&X, 1));
  if (c == egraph::kNoId) return;
  for (const ir::AttrNode& n : attr_nodes(g, m.root(), vop)) {
    if (g.find(n.kid) != g.find(c)) continue;
    g.merge(m.root(), ir::add_collective(g, Op::AllReduce, g.add(vop, n.payload, {X}), 0, world(g)));
  }
}

std::vector<RuleInfo> elementwise_rows() {
  std::vector<RuleInfo> rows;
  for (const detail::OpInfo& info : detail::kOpTable) {
    if (!detail::is_elementwise(info.cls) || info.arity != 1) continue;
    const Op op = ir::to_op(info.op);
    rows.push_back(math_rule(
        kebab(info.name) + "-through-all-gather", op1(op, all_gather_(a)),
        [op](ir::EGraph& g, const Match& m) { unary_through_gather(g, m, op); }, Exact,
        "u(all_gather(x, ax)) = all_gather(u(x), ax)"));
  }
  for (const detail::OpInfo& info : detail::kOpTable) {
    if (info.cls != detail::OpClass::Binary) continue;
    const Op op = ir::to_op(info.op);
    rows.push_back(math_rule(
        kebab(info.name) + "-through-all-gather", op2(op, all_gather_(a), b),
        [op](ir::EGraph& g, const Match& m) { binary_through_gather(g, m, op, 0); }, Exact,
        "b(all_gather(x, ax), y) = all_gather(b(x, shard(y, ax)), ax), y replicated"));
    // add, mul, max and equal reach the mirror image through their commutativity rules.
    if (op != Op::Mod && op != Op::LessThan) continue;
    rows.push_back(math_rule(
        kebab(info.name) + "-through-all-gather-rhs", op2(op, a, all_gather_(b)),
        [op](ir::EGraph& g, const Match& m) { binary_through_gather(g, m, op, 1); }, Exact,
        "b(y, all_gather(x, ax)) = all_gather(b(shard(y, ax), x), ax), y replicated"));
  }
  return rows;
}

// The two ways the runtime can run an all_reduce (lib/dist/collectives.cpp), both adding
// every element's P terms in rank order (the same bits): gather every rank's operand and
// add ((P-1) n bytes per rank, P-1 link steps), or exchange blocks all-to-all, add this
// rank's block and all_gather the sums (2(P-1)/P n bytes, 2(P-1) steps). Which is cheaper
// depends on n, P and the link: an alternative the cost model ranks, like a GEMM's tiles.
std::size_t all_reduce_forms(EGraph& g, const PassContext& ctx) {
  (void)ctx;
  return add_kernel_twins(g, ir::KernelKind::Collective, [](const ir::KernelSpec& spec) {
    std::vector<std::shared_ptr<ir::KernelSpec>> out;
    const auto& body = *spec.body;
    if (body.nodes.at(body.outputs.at(0).second).op != detail::PrimOp::AllReduce) return out;
    out.push_back(std::make_shared<ir::KernelSpec>(spec));
    out.back()->launch = {ir::kAllReduceScatterGather};
    return out;
  });
}

// all_reduce(f(x)) over 2-4 ranks (random shapes, sizes that P does not always divide,
// empty ones): the checker's random programs have no collectives.
std::shared_ptr<detail::GraphImpl> all_reduce_example(std::mt19937_64& rng) {
  const int64_t P = 2 + static_cast<int64_t>(rng() % 3);
  Graph g;
  const int64_t a = static_cast<int64_t>(rng() % 4), b = 1 + static_cast<int64_t>(rng() % 5);
  Tensor x = g.input("x", {a, b});
  Tensor y = rng() % 2 ? exp2(x) : x * x;
  g.output("y", detail::prim_collective(detail::PrimOp::AllReduce, y, 0, P, "all_reduce", Loc::current()));
  return g.impl();
}

// The rewrite rules, in the order the scheduler visits them.
RuleSet sharding_math_rules() {
  return {
      "sharding",
      concat(
          {
              math_rule("shard-matmul-columns", matmul_(a, b), matmul_columns, Exact,
                        "matmul(x, w) = all_gather(matmul(x, shard(w, 1)), -1) for a replicated matrix w "
                        "and x: each rank computes its block of columns"),
              math_rule(
                  "shard-matmul-rows", matmul_(all_gather_(a), b),
                  [](ir::EGraph& g, const Match& m) { matmul_gathered_lhs(g, m, true); }, ReordersSum,
                  "matmul(all_gather(x, -1), w) = all_reduce(matmul(x, shard(w, -2))), w replicated: "
                  "each rank's block of the contracted axis, partial products summed over ranks"),
              math_rule(
                  "matmul-through-all-gather", matmul_(all_gather_(a), b),
                  [](ir::EGraph& g, const Match& m) { matmul_gathered_lhs(g, m, false); }, Exact,
                  "matmul(all_gather(x, ax), y) = all_gather(matmul(x, shard(y, ax)), ax) for a batch "
                  "axis (y unsharded for the row axis), y replicated"),
              math_rule("matmul-through-all-gather-rhs", matmul_(a, all_gather_(b)), matmul_gathered_rhs,
                        ReordersSum,
                        "matmul(x, all_gather(y, ax)): all_gather over columns or batch axes, "
                        "all_reduce(matmul(shard(x, -1), y)) over the contracted axis; x replicated"),
              math_rule("where-through-all-gather", where_(a, all_gather_(b), c), where_through_gather, Exact,
                        "where(c, all_gather(x, ax), z) = all_gather(where(shard(c), x, shard(z)), ax), c "
                        "and z replicated"),
              math_rule(
                  "sum-reduce-through-all-gather", sum_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { reduce_through_gather(g, m, Op::SumReduce); }, Exact,
                  "sum_k(all_gather(x, ax)) = all_gather(sum_k(x), ax') for k != ax"),
              math_rule(
                  "max-reduce-through-all-gather", maxr_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { reduce_through_gather(g, m, Op::MaxReduce); }, Exact,
                  "max_k(all_gather(x, ax)) = all_gather(max_k(x), ax') for k != ax"),
              math_rule(
                  "permute-through-all-gather", permute_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_gather(g, m, Op::Permute); }, Exact,
                  "permute_p(all_gather(x, ax)) = all_gather(permute_p(x), p^-1(ax))"),
              math_rule(
                  "reshape-through-all-gather", reshape_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_gather(g, m, Op::Reshape); }, Exact,
                  "reshape(all_gather(x, ax)) = all_gather(reshape'(x), ax') when the output has an axis "
                  "ax' with the elements of ax's blocks whole"),
              math_rule(
                  "expand-through-all-gather", expand_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_gather(g, m, Op::Expand); }, Exact,
                  "expand(all_gather(x, ax)) = all_gather(expand'(x), ax) when ax is not broadcast"),
              math_rule(
                  "slice-through-all-gather", slice_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_gather(g, m, Op::Slice); }, Exact,
                  "slice_k(all_gather(x, ax)) = all_gather(slice_k(x), ax) for k != ax"),
              math_rule(
                  "pad-through-all-gather", pad_(all_gather_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_gather(g, m, Op::Pad); }, Exact,
                  "pad_k(all_gather(x, ax)) = all_gather(pad_k(x), ax) for k != ax"),
              math_rule(
                  "reshape-through-all-reduce", reshape_(all_reduce_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_all_reduce(g, m, Op::Reshape); }, Exact,
                  "reshape(all_reduce(x)) = all_reduce(reshape(x))"),
              math_rule(
                  "permute-through-all-reduce", permute_(all_reduce_(a)),
                  [](ir::EGraph& g, const Match& m) { view_through_all_reduce(g, m, Op::Permute); }, Exact,
                  "permute(all_reduce(x)) = all_reduce(permute(x))"),
          },
          elementwise_rows())};
}

}  // namespace

RuleSet sharding_rules() {
  RuleSet set = sharding_math_rules();
  // A pass over kernel nodes: runs in the lowering phase (compile_graph's pass sets).
  RuleInfo forms =
      pass_rule("all-reduce-scatter-gather", all_reduce_forms, Exact,
                "all_reduce kernel = the same all_reduce run as all_to_all, the ordered sum of this "
                "rank's block, all_gather (the same bits)");
  forms.example = all_reduce_example;
  set.rules.push_back(std::move(forms));
  return set;
}

}  // namespace luminal::rules
