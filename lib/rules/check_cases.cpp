// The rule checker's case generator (see check_cases.hpp).
#include "rules/check_cases.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "backends/reference/kernels.hpp"
#include "graph/graph_impl.hpp"
#include "ir/build.hpp"
#include "luminal/error.hpp"

namespace luminal::rules::check {

namespace rf = detail::reference;
using ir::Attr;
using ir::Op;

const char* regime_name(int r) {
  static const char* names[] = {"mixed", "positive", "special", "wide", "extreme"};
  return r >= 0 && r < kRegimes ? names[r] : "?";
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}
std::vector<Dim> dims_of(const Shape& s) { return std::vector<Dim>(s.begin(), s.end()); }
std::optional<Shape> concrete(const std::vector<Dim>& s, const DimBindings& dims) {
  Shape o;
  for (const Dim& d : s) {
    try {
      o.push_back(d.evaluate(dims));
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  return o;
}
int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// ------------------------------------------------------------------ random choices

int64_t Rng::dim(bool high_rank) {
  static const int64_t pool[] = {1, 2, 2, 2, 3, 3, 3, 4, 4};
  if (zero_dims && chance(0.2)) return 0;
  const int64_t d = pool[below(9)];
  return high_rank ? std::min<int64_t>(d, 3) : d;
}

Shape Rng::shape() {
  static const int ranks[] = {0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4, 5};
  Shape s(static_cast<size_t>(ranks[below(14)]));
  for (auto& d : s) d = dim(s.size() >= 4);
  return s;
}

std::vector<int> Rng::perm(size_t n) {
  std::vector<int> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int>(i);
  std::shuffle(p.begin(), p.end(), g);
  return p;
}

Shape Rng::factor(int64_t n) {
  if (n == 0) {  // an empty tensor: one dim 0, the others anything
    Shape s(static_cast<size_t>(1 + below(4)));
    for (auto& d : s) d = 1 + below(3);
    s[static_cast<size_t>(below(static_cast<int>(s.size())))] = 0;
    return s;
  }
  std::vector<int64_t> primes;
  for (int64_t p = 2; n > 1; ++p)
    while (n % p == 0) {
      primes.push_back(p);
      n /= p;
    }
  int rank = below(5) + (primes.empty() ? 0 : 1);
  if (rank == 0) return {};
  Shape s(static_cast<size_t>(rank), 1);
  for (int64_t p : primes) s[static_cast<size_t>(below(rank))] *= p;
  return s;
}

// ------------------------------------------------------------------ instances

namespace {

Dim symbolize(const Instance& inst, const Dim& d) {
  return inst.sym_value > 0 && d.as_constant() == inst.sym_value ? inst.sym : d;
}

Id add_node(Instance& inst, Op op, Attr a, std::vector<Id> kids) {
  for (Dim& d : a.shape) d = symbolize(inst, d);
  a.a = symbolize(inst, a.a);
  a.b = symbolize(inst, a.b);
  const uint32_t p = inst.g.analysis().attrs().intern(a);
  return inst.g.add(op, p, std::span<const Id>(kids));
}
Id plain_node(ir::EGraph& g, Op op, std::vector<Id> kids) { return g.add(op, 0u, std::span<const Id>(kids)); }


}  // namespace

Id Builder::var_leaf(int var, const Want& w, int64_t index_bound) {
  if (var >= 0 && bound_[static_cast<size_t>(var)]) {
    const Bound& b = *bound_[static_cast<size_t>(var)];
    if (b.want.shape != w.shape || b.want.dtype != w.dtype) throw Reject{"variable used at two types"};
    if (index_bound > 0 && b.index_bound != index_bound) throw Reject{"index bound"};
    return b.id;
  }
  Id id = fresh_leaf(w, index_bound);
  if (var >= 0) bound_[static_cast<size_t>(var)] = Bound{id, w, index_bound};
  return id;
}


// The constant a pattern variable may become: the values that make conditions ("k is
// 0", "k is 1") come true, and in their regimes the edges (-0, subnormals, values near
// overflow, inf, NaN, the i32 extremes).
double Builder::constant_value(DType dt) {
  if (dt == DType::boolean) return rng_.below(2);
  if (dt == DType::i32) {
    static const double pool[] = {0, 1, -1, 2, 3, 5};
    static const double extreme[] = {INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1, 1 << 30, -1};
    if (regime_ == kExtreme && rng_.chance(0.4)) return extreme[rng_.below(6)];
    return pool[rng_.below(6)];
  }
  static const double pool[] = {0, 1, -1, 2, 0.5, -3, 0.25, -0.0};
  static const double special[] = {INFINITY, -INFINITY, NAN};
  static const double extreme[] = {3e38, -3e38, 1e38, 0x1p-126, 1e-40, -1e-40, 0x1p-149, -0.0, 0x1p127};
  if (regime_ == kExtreme && rng_.chance(0.5)) return extreme[rng_.below(9)];
  if (regime_ == kSpecial && rng_.chance(0.3)) return special[rng_.below(3)];
  return rng_.chance(0.8) ? pool[rng_.below(8)] : std::round(rng_.uniform(-3, 3) * 64) / 64;
}

Id Builder::fresh_leaf(const Want& w, int64_t index_bound) {
  const bool scalar_type = w.dtype == DType::f32 || w.dtype == DType::i32 || w.dtype == DType::boolean;
  if (index_bound == 0 && scalar_type && rng_.chance(0.3)) {
    Attr c;
    c.dtype = w.dtype;
    c.value = constant_value(w.dtype);
    Id id = add_node(inst_, Op::Constant, c, {});
    if (w.shape.empty()) return id;
    Attr r;
    r.shape = dims_of(Shape(w.shape.size(), 1));
    id = add_node(inst_, Op::Reshape, r, {id});
    if (numel(w.shape) == 1) return id;
    Attr e;
    e.shape = dims_of(w.shape);
    return add_node(inst_, Op::Expand, e, {id});
  }
  // A view of a fresh input (permuted, broadcast from size-1 axes, reshaped, sliced with a
  // step): a rule whose variable meets a view -- a permute under a permute, an expand under
  // a reduction -- is checked there too, not only on dense inputs. One level: the view's
  // own operand is a plain leaf.
  if (index_bound == 0 && !w.shape.empty() && !in_view_leaf_ && rng_.chance(0.2)) {
    static const Op views[] = {Op::Permute, Op::Expand, Op::Reshape, Op::Slice};
    Pat view;
    view.nodes.resize(2);
    view.nodes[0].op = Op::Input;
    view.nodes[1].op = views[rng_.below(4)];
    view.nodes[1].nkids = 1;
    view.kids = {0};
    in_view_leaf_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{in_view_leaf_};
    const Id id = build(view, 1, w);
    // With a symbolic dim a view's shape may equal the wanted one only numerically (a
    // slice ending at n giving n - 1 where 3 is wanted): a program no graph would build.
    std::vector<Dim> want = dims_of(w.shape);
    for (Dim& d : want) d = symbolize(inst_, d);
    const std::vector<Dim>& got = inst_.g.data(id).shape;
    if (!std::equal(got.begin(), got.end(), want.begin(), want.end(),
                    [](const Dim& x, const Dim& y) { return x.same_as(y); }))
      throw Reject{"a view leaf's symbolic shape"};
    return id;
  }
  Leaf l{cat("x", inst_.leaves.size()), w.dtype, w.shape, index_bound};
  Attr a;
  a.dtype = w.dtype;
  a.shape = dims_of(w.shape);
  a.name = l.name;
  inst_.leaves.push_back(l);
  return add_node(inst_, Op::Input, a, {});
}

Id Builder::build(const Pat& p, uint32_t i, const Want& w) {
  const auto& n = p.nodes[i];
  if (n.var >= 0) return var_leaf(n.var, w);
  auto kid = [&](uint32_t k) { return p.kids[n.kid_begin + k]; };
  auto need_kids = [&](uint32_t k) {
    if (n.nkids != k) throw Reject{"arity"};
  };
  const size_t rank = w.shape.size();
  ir::EGraph& g = inst_.g;
  switch (n.op) {
    case Op::Input:
    case Op::Param:
      return fresh_leaf(w);
    case Op::Constant: {
      if (!w.shape.empty()) throw Reject{"constant of rank > 0"};
      Attr c;
      c.dtype = w.dtype;
      c.value = w.dtype == DType::boolean ? rng_.below(2) : rng_.below(7) - 3;
      return add_node(inst_, Op::Constant, c, {});
    }
    case Op::Iota: {
      if (w.dtype != DType::i32 || rank != 1) throw Reject{"iota"};
      Attr a;
      a.shape = {Dim(w.shape[0])};
      a.dtype = DType::i32;  // as ir::add_iota fills it
      return add_node(inst_, Op::Iota, a, {});
    }
      LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_IROP) {
        need_kids(1);
        if (!detail::accepts_dtype(ir::to_prim(n.op), w.dtype)) throw Reject{"unary dtype"};
        return plain_node(g, n.op, {build(p, kid(0), w)});
      }
    case Op::Add:
    case Op::Mul:
    case Op::Mod:
    case Op::Max: {
      need_kids(2);
      if (!detail::accepts_dtype(ir::to_prim(n.op), w.dtype)) throw Reject{"binary dtype"};
      Id a = build(p, kid(0), w);
      Id b = build(p, kid(1), w);
      return plain_node(g, n.op, {a, b});
    }
    case Op::LessThan:
    case Op::Equal: {
      need_kids(2);
      if (w.dtype != DType::boolean) throw Reject{"comparison dtype"};
      static const DType dts[] = {DType::f32, DType::f32, DType::i32, DType::boolean};
      DType in = dts[rng_.below(detail::accepts_dtype(ir::to_prim(n.op), DType::boolean) ? 4 : 3)];
      Want cw{w.shape, in};
      Id a = build(p, kid(0), cw);
      Id b = build(p, kid(1), cw);
      return plain_node(g, n.op, {a, b});
    }
    case Op::Where: {
      need_kids(3);
      Id c = build(p, kid(0), Want{w.shape, DType::boolean});
      Id a = build(p, kid(1), w);
      Id b = build(p, kid(2), w);
      return plain_node(g, n.op, {c, a, b});
    }
    case Op::Cast: {
      need_kids(1);
      static const DType dts[] = {DType::f32,     DType::f32, DType::i32,
                                  DType::boolean, DType::f16, DType::bf16};
      Attr a;
      a.dtype = w.dtype;
      return add_node(inst_, Op::Cast, a, {build(p, kid(0), Want{w.shape, dts[rng_.below(6)]})});
    }
    case Op::SumReduce:
    case Op::MaxReduce: {
      need_kids(1);
      if (!detail::accepts_dtype(ir::to_prim(n.op), w.dtype)) throw Reject{"reduce dtype"};
      const int axis = rng_.below(static_cast<int>(rank) + 1);
      Shape cs = w.shape;
      // In instances with zero dims, half of the reductions are over an empty axis.
      cs.insert(cs.begin() + axis, rng_.zero_dims && rng_.chance(0.5) ? 0 : rng_.dim(rank >= 4));
      Attr a;
      a.axis = axis;
      return add_node(inst_, n.op, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::Gather: {
      need_kids(2);
      const size_t split = static_cast<size_t>(rng_.below(static_cast<int>(rank) + 1));
      Shape ids(w.shape.begin(), w.shape.begin() + static_cast<long>(split));
      Shape table(w.shape.begin() + static_cast<long>(split), w.shape.end());
      const int64_t v = 1 + rng_.below(4);  // ids index a non-empty table
      table.insert(table.begin(), v);
      Id t = build(p, kid(0), Want{table, w.dtype});
      const auto& kn = p.nodes[kid(1)];
      if (kn.var < 0) throw Reject{"gather ids must be a variable"};
      Id x = var_leaf(kn.var, Want{ids, DType::i32}, v);
      return plain_node(g, Op::Gather, {t, x});
    }
    case Op::Reshape: {
      need_kids(1);
      Attr a;
      a.shape = dims_of(w.shape);
      return add_node(inst_, Op::Reshape, a,
                      {build(p, kid(0), Want{rng_.factor(numel(w.shape)), w.dtype})});
    }
    case Op::Permute: {
      need_kids(1);
      Attr a;
      a.perm = rng_.perm(rank);
      Shape cs(rank);
      for (size_t i2 = 0; i2 < rank; ++i2) cs[static_cast<size_t>(a.perm[i2])] = w.shape[i2];
      return add_node(inst_, Op::Permute, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::Expand: {
      need_kids(1);
      Shape cs = w.shape;
      for (auto& d : cs)
        if (rng_.chance(0.5)) d = 1;  // broadcast from 1 (to any size, 0 included)
      Attr a;
      a.shape = dims_of(w.shape);
      return add_node(inst_, Op::Expand, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::Slice: {
      need_kids(1);
      if (rank == 0) throw Reject{"slice of a scalar"};
      Attr a;
      a.axis = rng_.below(static_cast<int>(rank));
      const int64_t out = w.shape[static_cast<size_t>(a.axis)];
      a.step = rng_.chance(0.6) ? 1 : 1 + rng_.below(2) + 1;
      const int64_t start = rng_.below(3);
      // `out` elements, the last at start + (out - 1) * step; none: end = start.
      const int64_t end =
          out == 0 ? start : start + (out - 1) * a.step + 1 + rng_.below(static_cast<int>(a.step));
      a.a = Dim(start);
      a.b = Dim(end);
      Shape cs = w.shape;
      cs[static_cast<size_t>(a.axis)] = end + rng_.below(3);
      return add_node(inst_, Op::Slice, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::Pad: {
      need_kids(1);
      if (rank == 0) throw Reject{"pad of a scalar"};
      Attr a;
      a.axis = rng_.below(static_cast<int>(rank));
      const int64_t out = w.shape[static_cast<size_t>(a.axis)];
      int64_t lo = rng_.below(3), hi = rng_.below(3);
      // The padded axis keeps an element, except in instances with zero dims.
      const int64_t keep = rng_.zero_dims ? 0 : 1;
      while (lo + hi > out - keep && lo + hi > 0) (lo > 0 ? lo : hi) -= 1;
      a.a = Dim(lo);
      a.b = Dim(hi);
      static const double fills[] = {0, 0, 1, -1.5, -0.0, 2};
      a.value = w.dtype == DType::boolean ? rng_.below(2) : fills[rng_.below(6)];
      Shape cs = w.shape;
      cs[static_cast<size_t>(a.axis)] = out - lo - hi;
      if (cs[static_cast<size_t>(a.axis)] < 0) throw Reject{"pad wider than its result"};
      return add_node(inst_, Op::Pad, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::AllReduce:
    case Op::AllGather:
    case Op::ReduceScatter: {
      need_kids(1);
      const int64_t P = inst_.world;
      if (P < 2) throw Reject{"collective without ranks"};
      if (!detail::accepts_dtype(ir::to_prim(n.op), w.dtype)) throw Reject{"collective dtype"};
      Attr a;
      a.step = P;
      Shape cs = w.shape;
      if (n.op != Op::AllReduce) {
        if (rank == 0) throw Reject{"collective of a scalar"};
        a.axis = rng_.below(static_cast<int>(rank));
        int64_t& d = cs[static_cast<size_t>(a.axis)];
        if (n.op == Op::AllGather) {
          if (d % P != 0) throw Reject{"all_gather: dim not a multiple of the ranks"};
          d /= P;
        } else {
          d *= P;
        }
      }
      return add_node(inst_, n.op, a, {build(p, kid(0), Want{cs, w.dtype})});
    }
    case Op::MatMul: {
      need_kids(2);
      if (rank < 2 || (w.dtype != DType::f32 && w.dtype != DType::i32)) throw Reject{"matmul"};
      const int64_t k = rng_.dim(rank >= 4);
      Shape as = w.shape, bs = w.shape;
      as[rank - 1] = k;
      bs[rank - 2] = k;
      Id a = build(p, kid(0), Want{as, w.dtype});
      Id b = build(p, kid(1), Want{bs, w.dtype});
      return plain_node(g, Op::MatMul, {a, b});
    }
    case Op::Kernel:
      throw Reject{"kernel node in a left side"};
  }
  throw Reject{"unknown op"};
}

Want random_want(Rng& rng) {
  static const DType dts[] = {DType::f32, DType::f32, DType::f32,     DType::f32,     DType::f32, DType::f32,
                              DType::i32, DType::i32, DType::boolean, DType::boolean, DType::f16};
  return Want{rng.shape(), dts[rng.below(11)]};
}

// A random program (as a pattern whose variables become leaves) for pass rules.
void random_pattern(Rng& rng, Pat& p, int depth) {
  // Every unary math primitive from the op table (a new one joins the random programs by
  // itself), then the rest, the common ones twice.
#define LUMINAL_UNARY_OP(e, ...) Op::e,
  static const Op ops[] = {LUMINAL_PRIM_UNARY_OPS(LUMINAL_UNARY_OP)  //
                           Op::Add,      Op::Mul,       Op::Max,       Op::Add,       Op::Mul,
                           Op::LessThan, Op::Where,     Op::Cast,      Op::SumReduce, Op::MaxReduce,
                           Op::SumReduce, Op::Reshape,  Op::Permute,   Op::Expand,    Op::Slice,
                           Op::Pad,      Op::MatMul,    Op::Mod};
#undef LUMINAL_UNARY_OP
  if (depth == 0 || rng.chance(0.25)) {
    Pat::Node v;
    v.var = rng.below(3);
    p.nodes.push_back(v);
    return;
  }
  Op op = ops[rng.below(static_cast<int>(std::size(ops)))];
  uint32_t arity = ir::is_unary(op) || op == Op::Cast || ir::is_reduce(op) || ir::is_view(op) ? 1
                   : op == Op::Where                                                          ? 3
                                                                                              : 2;
  std::vector<uint32_t> kids;
  for (uint32_t k = 0; k < arity; ++k) {
    random_pattern(rng, p, depth - 1);
    kids.push_back(static_cast<uint32_t>(p.nodes.size() - 1));
  }
  Pat::Node n;
  n.op = op;
  n.kid_begin = static_cast<uint32_t>(p.kids.size());
  n.nkids = arity;
  p.kids.insert(p.kids.end(), kids.begin(), kids.end());
  p.nodes.push_back(n);
}

// Loads a GraphImpl (RuleInfo::example) into the instance's e-graph.
// Its named dims (Graph::dim) are bound to random values in their range (at most 4).
void load_example(Instance& inst, Rng& rng, const detail::GraphImpl& gi) {
  for (const detail::DimDecl& d : gi.dims) {
    const int64_t hi = std::max(d.lo, std::min<int64_t>(d.hi, 4));
    inst.dims[d.name] = d.lo + rng.below(static_cast<int>(hi - d.lo + 1));
  }
  for (const auto* list : {&gi.inputs, &gi.params})
    for (uint32_t id : *list) {
      const detail::Node& n = gi.nodes[id];
      auto s = concrete(n.shape, inst.dims);
      if (!s) throw Reject{"example with a symbolic shape"};
      inst.leaves.push_back(Leaf{n.name, n.dtype, *s, 0});
    }
  // An example with collectives is a program over their number of ranks.
  for (const detail::Node& n : gi.nodes)
    if (detail::op_info(n.op).cls == detail::OpClass::Collective) {
      inst.world = n.step;
      inst.g.analysis().set_world(n.step);
    }
  for (const auto& [name, cls] : ir::load_graph(inst.g, gi).outputs) inst.roots.push_back(cls);
}

// ------------------------------------------------------------------ values

namespace {

// A NaN with a random payload and sign (the interpreter may propagate any of them).
float random_nan(Rng& rng) {
  uint32_t bits = 0x7fc00000u | static_cast<uint32_t>(rng.g() & 0x3fffffu);
  if (rng.chance(0.5)) bits |= 0x80000000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

double sign(Rng& rng) { return rng.chance(0.5) ? -1.0 : 1.0; }

double f32_value(Rng& rng, int regime, DType dt) {
  const bool half = dt == DType::f16;
  switch (regime) {
    case kPositive:
      return rng.uniform(0.25, 4);
    case kWide: {
      // Magnitudes 2^-24 .. 2^24 (2^-8 .. 2^8 in f16): large terms next to small ones
      // (cancellation, exp2 past its range), yet products of four stay finite.
      const int span = half ? 8 : 24;
      return std::ldexp(rng.uniform(1, 2), rng.below(2 * span + 1) - span) * sign(rng);
    }
    case kExtreme: {
      // The edges of the format: signed zeros, subnormals, the smallest normals, values
      // within a factor 4 of overflow (a product or sum of two overflows), NaN payloads.
      const int k = rng.below(20);
      const int min_exp = half ? -14 : -126, sub_bits = half ? 10 : 23, max_exp = half ? 15 : 127;
      if (k < 3) return sign(rng) * 0.0;
      if (k < 7) {  // subnormal, log-uniform: most of them far below the smallest normal
        const double m = std::floor(std::ldexp(1.0, rng.below(sub_bits)) * rng.uniform(1, 2));
        return std::ldexp(std::max(1.0, m), min_exp - sub_bits) * sign(rng);
      }
      if (k < 9) return std::ldexp(rng.uniform(1, 2), min_exp + rng.below(4)) * sign(rng);
      if (k < 14) return std::ldexp(rng.uniform(1, 2), max_exp - rng.below(2)) * sign(rng);
      if (k < 15) return random_nan(rng);
      if (k < 16) return sign(rng) * INFINITY;
      return rng.uniform(-3, 3);
    }
    default: {  // mixed, special
      const int k = rng.below(20);
      double x = k < 3 ? sign(rng) * 0.0 : k < 7 ? rng.below(5) - 2 : rng.uniform(-3, 3);
      if (regime == kSpecial && rng.chance(0.35)) {
        const int s = rng.below(3);
        x = s == 0 ? INFINITY : s == 1 ? -INFINITY : random_nan(rng);
      }
      return x;
    }
  }
}

double i32_value(Rng& rng, int regime) {
  switch (regime) {
    case kPositive:
      return rng.below(13);
    case kWide:
      return std::ldexp(1.0, rng.below(24)) * sign(rng) + rng.below(7) - 3;
    case kExtreme: {
      // The whole range: the extremes and their neighbours (wrap-around), random words.
      static const double edges[] = {INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN + 1.0, INT32_MAX - 1.0, 0, 1, -1};
      if (rng.chance(0.75)) return edges[rng.below(9)];
      return static_cast<double>(static_cast<int32_t>(static_cast<uint32_t>(rng.g())));
    }
    default:
      return rng.below(13) - 6;
  }
}

}  // namespace

rf::View leaf_value(Rng& rng, const Leaf& l, int regime) {
  std::byte* data = nullptr;
  rf::View v = rf::allocate(l.dtype, l.shape, &data);
  const int64_t n = v.numel();
  const size_t es = dtype_size(l.dtype);
  // In some instances the f32 leaves draw from a small pool instead, so that coincidences independent
  // draws almost never produce happen often: in the mixed regime ties of -0 and +0 as
  // the largest value (max and its reductions must resolve them as the interpreter does),
  // in the wide regime terms that cancel (2^25 - 2^25 + 1: regrouped, the 1 is lost).
  static const float zero_pool[] = {0.0f, -0.0f, -0.0f, -1.0f, -2.0f};
  static const float cancel_pool[] = {0x1p25f, -0x1p25f, 1.0f, -1.0f, 3.0f};
  const float* pool = nullptr;
  if (l.dtype == DType::f32 && l.index_bound == 0 && rng.pools) {
    if (regime == kMixed) pool = zero_pool;
    if (regime == kWide) pool = cancel_pool;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::byte* p = data + static_cast<size_t>(i) * es;
    if (l.index_bound > 0) {
      rf::store_scalar(l.dtype, rng.below(static_cast<int>(l.index_bound)), p);
    } else if (l.dtype == DType::i32) {
      rf::store_scalar(l.dtype, i32_value(rng, regime), p);
    } else if (l.dtype == DType::boolean) {
      rf::store_scalar(l.dtype, rng.below(2), p);
    } else if (l.dtype == DType::f32) {
      const float x = pool ? pool[rng.below(5)] : static_cast<float>(f32_value(rng, regime, l.dtype));
      std::memcpy(p, &x, 4);  // bit for bit: keeps -0 and NaN payloads
    } else {
      rf::store_scalar(l.dtype, f32_value(rng, regime, l.dtype), p);
    }
  }
  return v;
}

}  // namespace luminal::rules::check
