// The rule checker (see check_support.hpp for what it proves and how).
#include "rules/check_support.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "backends/reference/interpreter.hpp"
#include "backends/reference/kernels.hpp"
#include "backends/reference/view.hpp"
#include "ir/build.hpp"
#include "luminal/error.hpp"
#include "runtime/half.hpp"

namespace luminal::rules::check {

namespace {

namespace rf = detail::reference;
using egraph::Id;
using ir::Attr;
using ir::Op;
using Shape = std::vector<int64_t>;
using Pat = egraph::Pattern<ir::TensorLang>;

enum Regime { kMixed = 0, kPositive = 1, kSpecial = 2, kWide = 3 };
const char* regime_name(int r) {
  return r == kMixed ? "mixed" : r == kPositive ? "positive" : r == kSpecial ? "special" : "wide";
}

// An instance that cannot be built or evaluated (ill-typed): regenerate, no verdict.
struct Reject {
  std::string why;
};
// A node that does not compute its class's value, or that the interpreter cannot run.
struct Wrong {
  std::string why;
};

// Concatenates anything streamable (operator+ on string literals trips GCC 12's
// -Wrestrict false positive).
template <class... T>
std::string cat(const T&... xs) {
  std::ostringstream os;
  (os << ... << xs);
  return os.str();
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}
std::vector<Dim> dims_of(const Shape& s) { return std::vector<Dim>(s.begin(), s.end()); }
std::optional<Shape> concrete(const std::vector<Dim>& s, const DimBindings& dims = {}) {
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

struct Rng {
  std::mt19937_64& g;
  int below(int n) { return static_cast<int>(g() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g) < p; }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(g); }
  int64_t dim() {
    static const int64_t pool[] = {1, 2, 2, 2, 3, 3, 3, 4, 4};
    return pool[below(9)];
  }
  Shape shape() {
    static const int ranks[] = {0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3};
    Shape s(static_cast<size_t>(ranks[below(11)]));
    for (auto& d : s) d = dim();
    return s;
  }
  std::vector<int> perm(size_t n) {
    std::vector<int> p(n);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<int>(i);
    std::shuffle(p.begin(), p.end(), g);
    return p;
  }
  // A random shape with `n` elements (n >= 1) of a random rank.
  Shape factor(int64_t n) {
    std::vector<int64_t> primes;
    for (int64_t p = 2; n > 1; ++p)
      while (n % p == 0) {
        primes.push_back(p);
        n /= p;
      }
    int rank = below(4) + (primes.empty() ? 0 : 1);
    if (rank == 0) return {};
    Shape s(static_cast<size_t>(rank), 1);
    for (int64_t p : primes) s[static_cast<size_t>(below(rank))] *= p;
    return s;
  }
};

// ------------------------------------------------------------------ instances

struct Leaf {
  std::string name;
  DType dtype;
  Shape shape;
  int64_t index_bound = 0;  // > 0: an index tensor, values in [0, bound)
};

struct Instance {
  ir::EGraph g;
  std::vector<Leaf> leaves;
  // A symbolic instance: every attribute dim equal to `sym_value` is the variable `sym`
  // instead (bound to that value when evaluating), so rules meet symbolic shapes.
  int64_t sym_value = 0;
  Dim sym;
  DimBindings dims;
};

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

struct Want {
  Shape shape;
  DType dtype;
};

// Instantiates pattern nodes top-down: each node receives the shape and dtype its parent
// needs and chooses attributes and child requirements that produce them.
class Builder {
 public:
  /// `special`: constants may also be inf, -inf or NaN (the special-value regime).
  Builder(Rng& rng, Instance& inst, bool special) : rng_(rng), inst_(inst), special_(special) {}

  Id var_leaf(int var, const Want& w, int64_t index_bound = 0) {
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

  Id fresh_leaf(const Want& w, int64_t index_bound = 0) {
    const bool scalar_type = w.dtype == DType::f32 || w.dtype == DType::i32 || w.dtype == DType::boolean;
    if (index_bound == 0 && scalar_type && rng_.chance(0.3)) {
      double v;
      if (w.dtype == DType::f32) {
        static const double pool[] = {0, 1, -1, 2, 0.5, -3, 0.25};
        static const double sp[] = {INFINITY, -INFINITY, NAN};
        v = rng_.chance(0.8) ? pool[rng_.below(7)] : std::round(rng_.uniform(-3, 3) * 64) / 64;
        if (special_ && rng_.chance(0.3)) v = sp[rng_.below(3)];
      } else if (w.dtype == DType::i32) {
        static const double pool[] = {0, 1, -1, 2, 3, 5};
        v = pool[rng_.below(6)];
      } else {
        v = rng_.below(2);
      }
      Attr c;
      c.dtype = w.dtype;
      c.value = v;
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
    Leaf l{cat("x", inst_.leaves.size()), w.dtype, w.shape, index_bound};
    Attr a;
    a.dtype = w.dtype;
    a.shape = dims_of(w.shape);
    a.name = l.name;
    inst_.leaves.push_back(l);
    return add_node(inst_, Op::Input, a, {});
  }

  Id build(const Pat& p, uint32_t i, const Want& w) {
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
        cs.insert(cs.begin() + axis, rng_.dim());
        Attr a;
        a.axis = axis;
        return add_node(inst_, n.op, a, {build(p, kid(0), Want{cs, w.dtype})});
      }
      case Op::Gather: {
        need_kids(2);
        const size_t split = static_cast<size_t>(rng_.below(static_cast<int>(rank) + 1));
        Shape ids(w.shape.begin(), w.shape.begin() + static_cast<long>(split));
        Shape table(w.shape.begin() + static_cast<long>(split), w.shape.end());
        const int64_t v = rng_.dim();
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
          if (rng_.chance(0.5)) d = 1;
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
        const int64_t end = start + (out - 1) * a.step + 1 + rng_.below(static_cast<int>(a.step));
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
        while (lo + hi >= out && lo + hi > 0) (lo > 0 ? lo : hi) -= 1;
        a.a = Dim(lo);
        a.b = Dim(hi);
        static const double fills[] = {0, 0, 1, -1.5};
        a.value = w.dtype == DType::boolean ? rng_.below(2) : fills[rng_.below(4)];
        Shape cs = w.shape;
        cs[static_cast<size_t>(a.axis)] = out - lo - hi;
        if (cs[static_cast<size_t>(a.axis)] < 1) throw Reject{"pad of an empty axis"};
        return add_node(inst_, Op::Pad, a, {build(p, kid(0), Want{cs, w.dtype})});
      }
      case Op::MatMul: {
        need_kids(2);
        if (rank < 2 || (w.dtype != DType::f32 && w.dtype != DType::i32)) throw Reject{"matmul"};
        const int64_t k = rng_.dim();
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

 private:
  struct Bound {
    Id id;
    Want want;
    int64_t index_bound;
  };
  Rng& rng_;
  Instance& inst_;
  bool special_;
  std::array<std::optional<Bound>, egraph::kMaxVars> bound_{};
};

Want random_want(Rng& rng) {
  static const DType dts[] = {DType::f32, DType::f32, DType::f32,     DType::f32,     DType::f32, DType::f32,
                              DType::i32, DType::i32, DType::boolean, DType::boolean, DType::f16};
  return Want{rng.shape(), dts[rng.below(11)]};
}

// A random program (as a pattern whose variables become leaves) for pass rules.
void random_pattern(Rng& rng, Pat& p, int depth) {
  static const Op ops[] = {Op::Exp2,   Op::Sin,       Op::Recip,     Op::Neg,       Op::Sqrt,     Op::Add,
                           Op::Mul,    Op::Max,       Op::Add,       Op::Mul,       Op::LessThan, Op::Where,
                           Op::Cast,   Op::SumReduce, Op::MaxReduce, Op::SumReduce, Op::Reshape,  Op::Permute,
                           Op::Expand, Op::Slice,     Op::Pad,       Op::MatMul,    Op::Mod,      Op::Log2};
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
  ir::load_graph(inst.g, gi);
}

// ------------------------------------------------------------------ values

rf::View dense(const rf::View& v) {
  rf::Stats st;
  return rf::contiguous(v, st);
}

rf::View leaf_value(Rng& rng, const Leaf& l, int regime) {
  std::byte* data = nullptr;
  rf::View v = rf::allocate(l.dtype, l.shape, &data);
  const int64_t n = v.numel();
  const size_t es = dtype_size(l.dtype);
  for (int64_t i = 0; i < n; ++i) {
    double x;
    if (l.index_bound > 0) {
      x = rng.below(static_cast<int>(l.index_bound));
    } else if (l.dtype == DType::i32) {
      x = rng.below(13) - (regime == kPositive ? 0 : 6);
    } else if (l.dtype == DType::boolean) {
      x = rng.below(2);
    } else if (regime == kPositive) {
      x = rng.uniform(0.25, 4);
    } else if (regime == kWide) {
      // Magnitudes 2^-24 .. 2^24 (2^-8 .. 2^8 in f16): large terms next to small ones
      // (cancellation, exp2 past its range), yet products of four stay finite.
      const int span = l.dtype == DType::f16 ? 8 : 24;
      x = std::ldexp(rng.uniform(1, 2), rng.below(2 * span + 1) - span) * (rng.chance(0.5) ? -1 : 1);
    } else {
      const int k = rng.below(20);
      x = k < 3 ? 0 : k < 7 ? rng.below(5) - 2 : rng.uniform(-3, 3);
      if (regime == kSpecial && rng.chance(0.35)) {
        static const double sp[] = {INFINITY, -INFINITY, NAN};
        x = sp[rng.below(3)];
      }
    }
    rf::store_scalar(l.dtype, x, data + static_cast<size_t>(i) * es);
  }
  return v;
}

rf::View from_host(const HostTensor& t) {
  std::byte* data = nullptr;
  rf::View v = rf::allocate(t.dtype(), t.shape(), &data);
  std::memcpy(data, t.data(), t.nbytes());
  return v;
}

void need(bool ok, const std::string& why) {
  if (!ok) throw Wrong{why};
}

// Evaluates one node on its children's values: the interpreter's kernels for math nodes,
// the MatMul definition spelled out in primitives, the body graph for kernel nodes. Every
// precondition is checked first, so an ill-typed node is reported, never run.
rf::View eval(const ir::EGraph& g, egraph::NodeView<ir::TensorLang> n, const std::vector<const rf::View*>& k,
              const std::map<std::string, rf::View>& leaves, const DimBindings& dims) {
  const Attr& a = g.analysis().attrs().get(n.payload);
  const std::string op = ir::op_name(n.op);
  auto arity = [&](size_t c) { need(k.size() == c, op + ": wrong number of children"); };
  auto same = [&](size_t i, size_t j) {
    need(k[i]->shape == k[j]->shape,
         op + ": operand shapes differ " + shape_str(k[i]->shape) + " vs " + shape_str(k[j]->shape));
  };
  auto axis_ok = [&](int axis) {
    need(axis >= 0 && static_cast<size_t>(axis) < k[0]->shape.size(), op + ": axis out of range");
  };
  auto cdim = [&](const Dim& d) {
    try {
      return d.evaluate(dims);
    } catch (const Error&) {
      throw Wrong{op + ": attribute " + d.to_string() + " has an unbound variable"};
    }
  };
  rf::Stats st;
  try {
    switch (n.op) {
      case Op::Input:
      case Op::Param: {
        auto it = leaves.find(a.name);
        need(it != leaves.end(), "no data for leaf " + a.name);
        return it->second;
      }
      case Op::Constant:
        return rf::constant(a.value, a.dtype);
      case Op::Iota:
        return rf::iota(cdim(a.shape.at(0)));
        LUMINAL_PRIM_UNARY_OPS(LUMINAL_CASE_IROP)
        arity(1);
        return rf::unary(ir::to_prim(n.op), *k[0]);
      case Op::Add:
      case Op::Mul:
      case Op::Mod:
      case Op::Max:
      case Op::LessThan:
      case Op::Equal:
        arity(2);
        same(0, 1);
        need(k[0]->dtype == k[1]->dtype, op + ": operand dtypes differ");
        return rf::binary(ir::to_prim(n.op), *k[0], *k[1]);
      case Op::Where:
        arity(3);
        same(0, 1);
        same(1, 2);
        need(k[0]->dtype == DType::boolean && k[1]->dtype == k[2]->dtype, "where: operand dtypes");
        return rf::where(*k[0], *k[1], *k[2]);
      case Op::Cast:
        arity(1);
        return rf::cast(*k[0], a.dtype);
      case Op::SumReduce:
      case Op::MaxReduce:
        arity(1);
        axis_ok(a.axis);
        return rf::reduce(ir::to_prim(n.op), *k[0], a.axis);
      case Op::Gather:
        arity(2);
        return rf::gather(*k[0], *k[1], "gather", st);
      case Op::Reshape: {
        arity(1);
        Shape s;
        for (const Dim& d : a.shape) s.push_back(cdim(d));
        need(numel(s) == k[0]->numel(), "reshape: element count changes");
        return dense(rf::reshape_view(*k[0], s, st));
      }
      case Op::Permute: {
        arity(1);
        std::vector<int> sorted = a.perm;
        std::sort(sorted.begin(), sorted.end());
        for (size_t i = 0; i < sorted.size(); ++i)
          need(sorted[i] == static_cast<int>(i), "permute: not a permutation");
        need(a.perm.size() == k[0]->shape.size(), "permute: wrong rank");
        return dense(rf::permute_view(*k[0], a.perm));
      }
      case Op::Expand: {
        arity(1);
        Shape s;
        for (const Dim& d : a.shape) s.push_back(cdim(d));
        need(s.size() == k[0]->shape.size(), "expand: rank changes");
        for (size_t i = 0; i < s.size(); ++i)
          need(k[0]->shape[i] == s[i] || k[0]->shape[i] == 1, "expand: dim is not 1");
        return dense(rf::expand_view(*k[0], s));
      }
      case Op::Slice: {
        arity(1);
        axis_ok(a.axis);
        const int64_t s = cdim(a.a), e = cdim(a.b);
        need(a.step >= 1 && 0 <= s && s <= e && e <= k[0]->shape[static_cast<size_t>(a.axis)],
             "slice: bad bounds");
        return dense(rf::slice_view(*k[0], a.axis, s, e, a.step));
      }
      case Op::Pad: {
        arity(1);
        axis_ok(a.axis);
        const int64_t lo = cdim(a.a), hi = cdim(a.b);
        need(lo >= 0 && hi >= 0, "pad: negative");
        return dense(rf::pad_view(*k[0], a.axis, lo, hi, a.value, st));
      }
      case Op::MatMul: {
        arity(2);
        const Shape& as = k[0]->shape;
        const Shape& bs = k[1]->shape;
        const size_t r = as.size();
        need(r >= 2 && bs.size() == r && k[0]->dtype == k[1]->dtype, "matmul: operands");
        need(std::equal(as.begin(), as.end() - 2, bs.begin()) && as[r - 1] == bs[r - 2],
             "matmul: shapes " + shape_str(as) + " x " + shape_str(bs));
        Shape full(as.begin(), as.end());
        full.push_back(bs[r - 1]);  // [..., m, k, n]
        Shape a1 = as;
        a1.push_back(1);
        Shape b1(bs.begin(), bs.end() - 2);
        b1.push_back(1);
        b1.push_back(bs[r - 2]);
        b1.push_back(bs[r - 1]);
        rf::View ae = rf::expand_view(rf::reshape_view(*k[0], a1, st), full);
        rf::View be = rf::expand_view(rf::reshape_view(*k[1], b1, st), full);
        return rf::reduce(detail::PrimOp::SumReduce, rf::binary(detail::PrimOp::Mul, ae, be),
                          static_cast<int>(r - 1));
      }
      case Op::Kernel: {
        need(a.kernel && a.kernel->body, "kernel without a body");
        need(k.size() == a.kernel->slots, "kernel: slot count");
        std::vector<HostTensor> slots;
        slots.reserve(k.size());
        std::map<std::string, const HostTensor*> in;
        for (size_t i = 0; i < k.size(); ++i) {
          HostTensor t(k[i]->dtype, k[i]->shape);
          rf::copy_out(*k[i], t.mutable_data());
          slots.push_back(std::move(t));
        }
        for (size_t i = 0; i < k.size(); ++i) in[ir::slot_name(static_cast<uint32_t>(i))] = &slots[i];
        auto out = rf::run(*a.kernel->body, dims, in);
        need(out.count("out") == 1, "kernel body has no output 'out'");
        return from_host(out.at("out"));
      }
    }
  } catch (const Error& e) {
    throw Wrong{op + ": the interpreter rejects it: " + e.what()};
  }
  throw Wrong{"unknown op"};
}

// Compares `got` with the class value `ref`; returns an empty string when they agree.
std::string compare(const rf::View& ref, const rf::View& got, bool fast_math, int64_t& compared) {
  if (ref.shape != got.shape) return "shape " + shape_str(got.shape) + " vs class " + shape_str(ref.shape);
  if (ref.dtype != got.dtype)
    return "dtype " + std::string(dtype_name(got.dtype)) + " vs class " + std::string(dtype_name(ref.dtype));
  const double tol = ref.dtype == DType::f32    ? 1e-4
                     : ref.dtype == DType::f16  ? 2e-3
                     : ref.dtype == DType::bf16 ? 1.6e-2
                                                : 0;
  const int64_t n = ref.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double r = rf::storage_element(ref, i), x = rf::storage_element(got, i);
    bool ok;
    // A fast-math rule may change NaN/inf results: it is compared where both are finite.
    if (fast_math && (!std::isfinite(r) || !std::isfinite(x))) continue;
    ++compared;
    if (std::isnan(r) || std::isnan(x))
      ok = std::isnan(r) && std::isnan(x);
    else if (std::isinf(r) || std::isinf(x))
      ok = r == x;
    else
      ok = std::fabs(r - x) <= tol * (1 + std::max(std::fabs(r), std::fabs(x)));
    if (!ok) {
      std::ostringstream os;
      os << "element " << i << ": " << x << " vs class value " << r;
      return os.str();
    }
  }
  return {};
}

std::string describe_node(const ir::EGraph& g, Id nid) {
  egraph::NodeView<ir::TensorLang> v = g.node(nid);
  std::string s = ir::op_name(v.op);
  const Attr& a = g.analysis().attrs().get(v.payload);
  if (v.payload != 0) {
    s += "{";
    if (!a.name.empty()) s += a.name + " ";
    if (!a.perm.empty()) {
      s += "perm=";
      for (int p : a.perm) s += std::to_string(p);
      s += " ";
    }
    if (!a.shape.empty()) {
      s += "shape=";
      for (const Dim& d : a.shape) s += d.to_string() + ",";
      s += " ";
    }
    s += cat("axis=", a.axis, " v=", a.value, " ", dtype_name(a.dtype));
    s += "}";
  }
  std::ostringstream os;
  os << s << '(';
  for (size_t i = 0; i < v.kids.size(); ++i) os << (i ? "," : "") << g.find(v.kids[i]);
  os << ')';
  return os.str();
}

// A printable dump of the instance's classes (for failure messages).
std::string dump(ir::EGraph& g) {
  std::string s;
  const auto& ix = g.index();
  for (Id c : ix.classes()) {
    s += cat("  c", c, ":");
    for (Id nid : ix.nodes(c)) s += cat(" ", describe_node(g, nid));
    s += "\n";
  }
  return s;
}

// ------------------------------------------------------------------ one instance

enum class Verdict { Rejected, NotApplied, Checked, Failed };

struct Checker {
  const RuleInfo& rule;
  const Registry& reg;
  const Options& opt;
  Rng rng;
  Result res;

  // Builds one random instance of the rule's left side (or a random program, or the
  // rule's example) into `inst`.
  void build(Instance& inst, int attempt, int regime) {
    // Every other instance: a pass rule's example (fusion's attention, prologues) does
    // not replace the random programs, it joins them.
    const bool use_example = rule.example && attempt % 2 == 0;
    if (use_example) {
      auto gi = rule.example(rng.g);
      if (!gi) throw Reject{"no example"};
      load_example(inst, rng, *gi);
      return;
    }
    if (rng.chance(1.0 / 3)) {
      inst.sym_value = 2 + rng.below(3);
      inst.sym = Dim::variable("n", 1, 8);
      inst.dims["n"] = inst.sym_value;
    }
    Builder b(rng, inst, regime == kSpecial);
    if (rule.rule) {
      for (const Pat& p : rule.rule->lhs()) b.build(p, p.root(), random_want(rng));
    } else {
      Pat p;
      random_pattern(rng, p, 1 + rng.below(3));
      b.build(p, p.root(), random_want(rng));
    }
  }

  // Rules that must run before this one so that it has something to act on.
  void prerequisites(Instance& inst) {
    // Passes other than the base lowering act on kernel nodes: give them some first.
    if (!rule.pass || rule.set == "lower_reference") return;
    for (const RuleInfo& r : reg.all())
      if (r.set == "lower_reference" && r.pass) apply_once(r, inst.g, opt.ctx);
  }

  Verdict run_one(int attempt, int regime) {
    Instance inst;
    try {
      build(inst, attempt, regime);
      inst.g.rebuild();
      for (Id c : inst.g.index().classes()) {
        const ir::ClassData& d = inst.g.data(c);
        if (!d.valid || !concrete(d.shape, inst.dims)) throw Reject{"invalid class"};
      }
      prerequisites(inst);
    } catch (const Reject&) {
      return Verdict::Rejected;
    } catch (const Error&) {
      return Verdict::Rejected;  // the analysis refused a malformed random node
    }
    ir::EGraph& g = inst.g;
    std::map<std::string, rf::View> leaves;
    for (const Leaf& l : inst.leaves) leaves.emplace(l.name, leaf_value(rng, l, regime));

    // Values of the instance before the rule: one per node (every class is one node,
    // except kernel nodes the prerequisites added, which are checked with the rest).
    const size_t n0 = g.num_node_ids();
    std::vector<std::optional<rf::View>> before(n0);
    try {
      for (Id nid = 0; nid < n0; ++nid) {
        if (!g.is_live(nid)) continue;
        egraph::NodeView<ir::TensorLang> v = g.node(nid);
        if (v.op == Op::Kernel) continue;
        std::vector<const rf::View*> kids;
        for (Id k : v.kids) {
          Id kn = k;  // before any merge, a class id is its one math node's id
          if (!before[kn]) throw Reject{"child without value"};
          kids.push_back(&*before[kn]);
        }
        before[nid] = eval(g, v, kids, leaves, inst.dims);
      }
    } catch (const Wrong& w) {
      return Verdict::Rejected;  // an ill-typed random instance, not the rule's fault
    } catch (const Reject&) {
      return Verdict::Rejected;
    }
    std::size_t applied = 0;
    try {
      applied = apply_once(rule, g, opt.ctx);
    } catch (const std::exception& e) {
      fail(regime, std::string("applying the rule threw: ") + e.what(), g);
      return Verdict::Failed;
    }
    if (applied == 0) return Verdict::NotApplied;

    // Reference value per class: the value of its first original node.
    const auto& ix = g.index();
    std::map<Id, rf::View> val;
    for (Id nid = 0; nid < n0; ++nid)
      if (before[nid]) val.try_emplace(g.find(nid), *before[nid]);
    // Classes the rule created: the value of any node computable from valued children.
    std::vector<std::pair<Id, Id>> todo;  // (class, node)
    for (Id c : ix.classes())
      for (Id nid : ix.nodes(c)) todo.emplace_back(c, nid);
    try {
      for (bool progress = true; progress;) {
        progress = false;
        for (auto [c, nid] : todo) {
          if (val.count(c)) continue;
          egraph::NodeView<ir::TensorLang> v = g.node(nid);
          std::vector<const rf::View*> kids;
          bool ready = true;
          for (Id k : v.kids) {
            auto it = val.find(g.find(k));
            if (it == val.end()) {
              ready = false;
              break;
            }
            kids.push_back(&it->second);
          }
          if (!ready) continue;
          val.emplace(c, eval(g, v, kids, leaves, inst.dims));
          progress = true;
        }
      }
    } catch (const Wrong& w) {
      fail(regime, "a node the rule added cannot be evaluated: " + w.why, g);
      return Verdict::Failed;
    }

    // Every node of every class against its class value.
    int checked = 0;
    // Elements compared in classes the rule touched (a new node, or several nodes): a
    // fast-math rule skips non-finite ones, and an instance with none is no evidence.
    int64_t compared = 0, elsewhere = 0;
    for (auto [c, nid] : todo) {
      const bool touched = nid >= n0 || ix.nodes(c).size() > 1;
      auto cv = val.find(c);
      if (cv == val.end()) continue;
      const ir::ClassData& d = g.data(c);
      auto ds = concrete(d.shape, inst.dims);
      if (!ds || *ds != cv->second.shape || d.dtype != cv->second.dtype) {
        fail(regime,
             cat("class c", c, ": analysis says ") + (ds ? shape_str(*ds) : "symbolic") + " " +
                 std::string(dtype_name(d.dtype)) + ", value is " + shape_str(cv->second.shape) + " " +
                 std::string(dtype_name(cv->second.dtype)),
             g);
        return Verdict::Failed;
      }
      egraph::NodeView<ir::TensorLang> v = g.node(nid);
      std::vector<const rf::View*> kids;
      bool ready = true;
      for (Id k : v.kids) {
        auto it = val.find(g.find(k));
        if (it == val.end()) {
          ready = false;
          break;
        }
        kids.push_back(&it->second);
      }
      if (!ready) continue;
      std::string why;
      try {
        why = compare(cv->second, eval(g, v, kids, leaves, inst.dims), rule.fast_math,
                      touched ? compared : elsewhere);
      } catch (const Wrong& w) {
        why = w.why;
      }
      if (!why.empty()) {
        fail(regime, cat("node ", describe_node(g, nid), " of class c", c, ": ", why), g);
        return Verdict::Failed;
      }
      ++checked;
    }
    if (compared == 0) return Verdict::NotApplied;  // nothing in the rule's domain: no evidence
    res.nodes_checked += checked;
    if (inst.sym_value > 0 || !inst.dims.empty()) ++res.symbolic;
    return Verdict::Checked;
  }

  void fail(int regime, const std::string& why, ir::EGraph& g) {
    ++res.failures;
    if (!res.first_failure.empty()) return;
    res.first_failure = std::string("[") + regime_name(regime) + " values] " + why + "\n";
    if (g.is_clean()) res.first_failure += dump(g);
  }
};

}  // namespace

Result check_rule(const RuleInfo& rule, const Registry& registry, const Options& opt) {
  std::mt19937_64 gen(opt.seed ^ std::hash<std::string>{}(rule.name));
  Checker ck{rule, registry, opt, Rng{gen}, Result{}};
  ck.res.name = rule.name;
  ck.res.set = rule.set;
  ck.res.fast_math = rule.fast_math;
  const int regimes = rule.fast_math ? 2 : 4;
  for (int attempt = 0; attempt < opt.max_attempts && ck.res.instances < opt.instances; ++attempt) {
    const int regime = attempt % regimes;
    switch (ck.run_one(attempt, regime)) {
      case Verdict::Rejected:
        ++ck.res.rejected;
        break;
      case Verdict::NotApplied:
        ++ck.res.attempts;
        ++ck.res.not_applied;
        break;
      case Verdict::Checked:
        ++ck.res.attempts;
        ++ck.res.instances;
        ++ck.res.per_regime[regime];
        break;
      case Verdict::Failed:
        ++ck.res.attempts;
        if (ck.res.failures >= 3) return ck.res;  // enough evidence
        break;
    }
  }
  return ck.res;
}

std::string to_string(const Result& r) {
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "%-28s %-15s %-9s instances=%3d (mixed %d, positive %d, special %d, wide %d; symbolic %d) nodes=%5d "
      "tried=%d not-applied=%d ill-typed=%d failures=%d",
      r.name.c_str(), r.set.c_str(), r.fast_math ? "fast-math" : "", r.instances, r.per_regime[0],
      r.per_regime[1], r.per_regime[2], r.per_regime[3], r.symbolic, r.nodes_checked, r.attempts,
      r.not_applied, r.rejected, r.failures);
  return buf;
}

}  // namespace luminal::rules::check
