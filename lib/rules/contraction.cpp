// Contraction rules: find the matrix product inside sum(mul(expand a, expand b)) -- the
// form ops::matmul, linear and attention build -- as a MatMul node (batched and transposed
// operands included), transpose products, and reassociate chains of products so the cost
// model can pick the order with fewer FLOPs. docs/rules.md explains each rule.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <random>

#include "graph/graph_impl.hpp"
#include "luminal/graph.hpp"
#include "luminal/ops.hpp"
#include "rules/algebra_dsl.hpp"

namespace luminal::rules {
namespace {

using namespace dsl;

// One operand of the product as seen through an optional expand: the class x whose
// elements are broadcast to the product's shape S.
struct Operand {
  Id x;
  std::vector<Dim> shape;  // rank of S; 1 where x is broadcast
};

std::vector<Operand> operands(const ir::EGraph& g, Id cls) {
  std::vector<Operand> out{{g.find(cls), g.data(cls).shape}};
  for (const ir::AttrNode& e : attr_nodes(g, cls, Op::Expand))
    out.push_back({g.find(e.kid), g.data(e.kid).shape});
  return out;
}

// sum over `ax` of A'*B' (both of shape S) as a MatMul, or kNoId when the axes do not split
// into batch axes (both vary), one m axis (only A varies), one n axis (only B varies) and
// the contracted axis (both vary).
Id contraction(ir::EGraph& g, const std::vector<Dim>& S, int ax, const Operand& A, const Operand& B) {
  const size_t R = S.size();
  if (A.shape.size() != R || B.shape.size() != R) return egraph::kNoId;
  auto bcast = [&](const Operand& o, size_t i) { return is_one(o.shape[i]) && !is_one(S[i]); };
  std::vector<int> batch, ms, ns;
  for (size_t i = 0; i < R; ++i) {
    const bool ba = bcast(A, i), bb = bcast(B, i);
    if (static_cast<int>(i) == ax) {
      if (ba || bb) return egraph::kNoId;
      continue;
    }
    if (ba && bb) return egraph::kNoId;  // the product does not depend on this axis
    if (!ba && !bb)
      batch.push_back(static_cast<int>(i));
    else if (bb)
      ms.push_back(static_cast<int>(i));
    else
      ns.push_back(static_cast<int>(i));
  }
  if (ms.size() > 1 || ns.size() > 1 || ms.size() + ns.size() == 0) return egraph::kNoId;
  const Dim K = S[static_cast<size_t>(ax)];
  const Dim M = ms.empty() ? Dim(1) : S[static_cast<size_t>(ms[0])];
  const Dim N = ns.empty() ? Dim(1) : S[static_cast<size_t>(ns[0])];
  std::vector<Dim> bshape;
  for (int i : batch) bshape.push_back(S[static_cast<size_t>(i)]);

  // Brings operand o's axes into `order` and reshapes the result to `target`.
  auto arrange = [&](const Operand& o, std::vector<int> order, std::vector<Dim> target) {
    Id x = o.x;
    bool ident = true;
    for (size_t i = 0; i < order.size(); ++i) ident = ident && order[i] == static_cast<int>(i);
    std::vector<Dim> cur;
    for (int i : order) cur.push_back(o.shape[static_cast<size_t>(i)]);
    if (!ident) x = ir::add_permute(g, x, order);
    if (!same_shape(cur, target)) x = ir::add_reshape(g, x, target);
    return x;
  };
  std::vector<int> oa = batch, ob = batch;
  oa.insert(oa.end(), ms.begin(), ms.end());
  oa.insert(oa.end(), ns.begin(), ns.end());
  oa.push_back(ax);
  ob.push_back(ax);
  ob.insert(ob.end(), ns.begin(), ns.end());
  ob.insert(ob.end(), ms.begin(), ms.end());
  std::vector<Dim> ta = bshape, tb = bshape;
  ta.insert(ta.end(), {M, K});
  tb.insert(tb.end(), {K, N});
  Id mm = ir::add_plain(g, Op::MatMul, {arrange(A, oa, ta), arrange(B, ob, tb)});

  // mm is [batch, M, N]; the sum is S without ax, in S's order.
  std::vector<int> ours = batch;
  std::vector<Dim> squeezed = bshape;
  if (!ms.empty()) {
    ours.push_back(ms[0]);
    squeezed.push_back(M);
  }
  if (!ns.empty()) {
    ours.push_back(ns[0]);
    squeezed.push_back(N);
  }
  std::vector<Dim> mm_shape = bshape;
  mm_shape.insert(mm_shape.end(), {M, N});
  Id r = same_shape(mm_shape, squeezed) ? mm : ir::add_reshape(g, mm, squeezed);
  std::vector<int> perm;
  for (size_t i = 0; i < R; ++i) {
    if (static_cast<int>(i) == ax) continue;
    perm.push_back(static_cast<int>(std::find(ours.begin(), ours.end(), static_cast<int>(i)) - ours.begin()));
  }
  bool ident = true;
  for (size_t i = 0; i < perm.size(); ++i) ident = ident && perm[i] == static_cast<int>(i);
  return ident ? r : ir::add_permute(g, r, perm);
}

void recognize_matmul(ir::EGraph& g, const Match& m) {
  const Id mul = g.lookup(Op::Mul, 0u, std::vector<Id>{m[a], m[b]});
  if (mul == egraph::kNoId) return;
  const DType dt = g.data(mul).dtype;
  if (dt != DType::f32 && dt != DType::i32) return;
  for (const ir::AttrNode& red : attr_nodes(g, m.root(), Op::SumReduce)) {
    if (g.find(red.kid) != g.find(mul)) continue;
    const int ax = attr(g, red.payload).axis;
    const std::vector<Dim> S = g.data(mul).shape;
    const std::vector<Operand> as = operands(g, m[a]), bs = operands(g, m[b]);
    for (const Operand& A : as)
      for (const Operand& B : bs) {
        Id r = contraction(g, S, ax, A, B);
        if (r != egraph::kNoId) g.merge(m.root(), r);
      }
  }
}

// A matmul as ops::matmul builds it, on random shapes: plain, batched, with a transposed
// right operand (linear), or vector operands; half the time with a symbolic batch/row dim.
std::shared_ptr<detail::GraphImpl> matmul_example(std::mt19937_64& rng) {
  auto dim = [&] { return Dim(static_cast<int64_t>(1 + rng() % 4)); };
  Graph g;
  const Dim K = dim(), N = dim();
  const bool sym = rng() % 2 == 0;
  const Dim M = sym ? g.dim("M", 1, 8) : dim();
  const Dim B = sym ? g.dim("B", 1, 8) : dim();
  Tensor y;
  switch (rng() % 5) {
    case 0:
      y = matmul(g.input("a", {M, K}), g.input("b", {K, N}));
      break;
    case 1:
      y = matmul(g.input("a", {B, M, K}), g.input("b", {B, K, N}));
      break;
    case 2:
      y = matmul(g.input("a", {M, K}), transpose(g.input("b", {N, K}), 0, 1));
      break;
    case 3:
      y = matmul(g.input("a", {B, M, K}), g.input("b", {K, N}));
      break;
    default:
      y = matmul(g.input("a", {K}), g.input("b", {K, N}));
      break;
  }
  g.output("y", y);
  return g.impl();
}

// (A.B)^T = B^T.A^T on the last two axes: the same products, summed in the same order.
void transpose_product(ir::EGraph& g, const Match& m) {
  const Id mm = g.lookup(Op::MatMul, 0u, std::vector<Id>{m[a], m[b]});
  if (mm == egraph::kNoId) return;
  for (const ir::AttrNode& pn : attr_nodes(g, m.root(), Op::Permute)) {
    if (g.find(pn.kid) != g.find(mm)) continue;
    const std::vector<int> p = attr(g, pn.payload).perm;
    const size_t r = p.size();
    bool swap_last = r >= 2 && p[r - 1] == static_cast<int>(r - 2) && p[r - 2] == static_cast<int>(r - 1);
    for (size_t i = 0; i + 2 < r; ++i) swap_last = swap_last && p[i] == static_cast<int>(i);
    if (!swap_last) continue;
    g.merge(m.root(),
            ir::add_plain(g, Op::MatMul, {ir::add_permute(g, m[b], p), ir::add_permute(g, m[a], p)}));
  }
}

// Sibling products: matmul(x, w1), matmul(x, w2), ... read the same left operand; they
// are the column slices of one matmul(x, concat(w1, w2, ...)) along n (every output
// element is the same dot product over the same k, summed in the same order). The
// concat is a sum of pads filled with -0 (x + -0 = x for every x, NaN and -0 included),
// so the identity is exact. Only stored operands (a weight, or a permuted/reshaped view
// of one, or such a view of an f16/bf16 weight cast to f32) of one storage type are
// concatenated: the GEMM reads each column range from its own buffer
// (kernel::Gemm::b_segments), so the concat costs nothing at run time -- and a concat,
// being computed, is never a sibling itself, which keeps the rule from nesting.

bool stored_tensor(const ir::EGraph& g, Id cls) {
  return !attr_nodes(g, cls, Op::Param).empty() || !attr_nodes(g, cls, Op::Input).empty();
}
// The dtype b is stored in when it is a stored tensor, a permuted/reshaped view of one,
// or such a view of an f16/bf16 one widened to f32 (linear(x, w) over a half weight:
// the GEMM converts each segment as it reads it, emit_gemm.cpp).
std::optional<DType> stored_operand(const ir::EGraph& g, Id b, int depth = 6) {
  if (stored_tensor(g, b)) return g.data(b).dtype;
  if (depth == 0) return std::nullopt;
  for (Op view : {Op::Permute, Op::Reshape})
    for (const ir::AttrNode& n : attr_nodes(g, b, view))
      if (auto d = stored_operand(g, n.kid, depth - 1)) return d;
  if (g.data(b).dtype == DType::f32)
    for (const ir::AttrNode& n : attr_nodes(g, b, Op::Cast)) {
      const DType from = g.data(n.kid).dtype;
      if (from != DType::f16 && from != DType::bf16) continue;
      if (auto d = stored_operand(g, n.kid, depth - 1)) return d;  // == from: views keep the dtype
    }
  return std::nullopt;
}

void merge_siblings(ir::EGraph& g, const Match& m, std::size_t count) {
  std::vector<Id> roots, bs;
  for (std::size_t i = 0; i < count; ++i) {
    roots.push_back(g.find(m.root(i)));
    bs.push_back(g.find(m.var(static_cast<int>(i) + 1)));  // b, c, d
  }
  // Each set of siblings once, in class order, and only products of f32 values of stored
  // operands that agree on every axis but n.
  for (std::size_t i = 0; i + 1 < count; ++i)
    if (!(roots[i] < roots[i + 1])) return;

  // Tensor parallel (several ranks): each rank reads a shard of every weight, and a
  // column shard of [Wq | Wk | Wv] is not the concat of the shards, so the sharding rules
  // could no longer split the products; merging is for single-process programs.
  if (g.analysis().world() > 1) return;
  const Id x = g.find(m[a]);
  if (g.data(x).dtype != DType::f32) return;
  const std::vector<Dim> s0 = g.data(bs[0]).shape;
  if (s0.size() < 2) return;
  Dim total(0);
  // One storage type for every piece: the GEMM reads each segment in place with one
  // conversion (f32, or f16/bf16 widened as it packs), so mixed pieces would be copied.
  std::optional<DType> stored;
  for (Id b : bs) {
    const auto& d = g.data(b);
    if (d.dtype != DType::f32 || d.shape.size() != s0.size()) return;
    const auto sd = stored_operand(g, b);
    if (!sd || (stored && *stored != *sd)) return;
    stored = sd;
    for (std::size_t k = 0; k + 1 < s0.size(); ++k)
      if (!d.shape[k].same_as(s0[k])) return;
    total = total + d.shape.back();
  }
  const int ax = static_cast<int>(s0.size()) - 1;
  Id cat = egraph::kNoId;
  Dim off(0);
  std::vector<std::pair<Dim, Dim>> cols;
  for (Id b : bs) {
    const Dim n = g.data(b).shape.back();
    const Dim hi = total - off - n;
    const Id p = ir::add_pad(g, b, ax, off, hi, -0.0);
    cat = cat == egraph::kNoId ? p : ir::add_plain(g, Op::Add, {cat, p});
    cols.emplace_back(off, off + n);
    off = off + n;
  }
  const Id mm = ir::add_plain(g, Op::MatMul, {x, cat});
  for (std::size_t i = 0; i < count; ++i)
    g.merge(roots[i], ir::add_slice(g, mm, ax, cols[i].first, cols[i].second, 1));
}

// Products sharing their left operand, as linear layers reading one activation build them
// (Q/K/V projections, SwiGLU's gate and up), on random shapes; sometimes batched, or a
// third sibling.
std::shared_ptr<detail::GraphImpl> siblings_example(std::mt19937_64& rng) {
  auto dim = [&] { return Dim(static_cast<int64_t>(rng() % 8 == 0 ? 0 : 1 + rng() % 4)); };
  Graph g;
  const Dim m = rng() % 3 == 0 ? g.dim("M", 1, 8) : dim(), k = dim();
  Tensor x = rng() % 3 == 0 ? g.input("x", {Dim(2), m, k}) : g.input("x", {m, k});
  const int n = rng() % 2 == 0 ? 3 : 2;
  // Weights stored as f32, f16 or bf16 (linear widens a half weight to f32), sometimes
  // one of each (pieces of different storage are not merged).
  constexpr std::array kStored{DType::f32, DType::f16, DType::bf16};
  const int store = static_cast<int>(rng() % 4);  // 3: one of each
  for (int i = 0; i < n; ++i) {
    const DType dt = kStored[static_cast<size_t>(store == 3 ? i : store)];
    g.output("y" + std::to_string(i), linear(x, g.param("w" + std::to_string(i), {dim(), k}, dt)));
  }
  return g.impl();
}

}  // namespace

RuleSet contraction_rules() {
  return {"contraction",
          {
              with_example(math_rule("matmul-recognize", sum_(mul_(a, b)), recognize_matmul, Exact,
                                     "sum_k(mul(expand a, expand b)) = matmul(a', b') (a', b': a, b "
                                     "permuted/reshaped to [batch, m, k], [batch, k, n])"),
                           matmul_example),
              [] {
                RuleInfo r;
                r.name = "matmul-siblings";
                r.doc = "matmul(x, b), matmul(x, c) = slices along n of matmul(x, concat_n(b, c)) (b, c stored, "
                        "as f32 or as halves cast to f32; the concat is pads filled with -0, added)";
                r.rule = make_rule(egraph::multi_rule("matmul-siblings", egraph::patterns(matmul_(a, b), matmul_(a, c)),
                                                      [](ir::EGraph& g, const Match& m) { merge_siblings(g, m, 2); }));
                r.example = siblings_example;
                return r;
              }(),
              [] {
                RuleInfo r;
                r.name = "matmul-siblings-3";
                r.doc = "matmul(x, b), matmul(x, c), matmul(x, d) = slices along n of matmul(x, concat_n(b, c, d))";
                r.rule = make_rule(egraph::multi_rule(
                    "matmul-siblings-3", egraph::patterns(matmul_(a, b), matmul_(a, c), matmul_(a, d)),
                    [](ir::EGraph& g, const Match& m) { merge_siblings(g, m, 3); }));
                r.example = siblings_example;
                return r;
              }(),
              math_rule("matmul-transpose", permute_(matmul_(a, b)), transpose_product, Exact,
                        "transpose(a.b) = transpose(b).transpose(a) (last two axes)"),
              // Reassociation distributes sums over products, which changes NaN/inf results (an
              // inf times a zero sum is NaN one way, inf the other): fast-math, like "factor".
              math_rule("matmul-assoc", matmul_(matmul_(a, b), c), matmul_(a, matmul_(b, c)), FastMath,
                        "f32: rounds differently; NaN/inf results differ"),
              math_rule("matmul-assoc-rev", matmul_(a, matmul_(b, c)), matmul_(matmul_(a, b), c), FastMath,
                        "f32: rounds differently; NaN/inf results differ"),
          }};
}

}  // namespace luminal::rules
