// The rule checker's evaluator (see check_eval.hpp).
#include "rules/check_eval.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "backends/reference/collectives.hpp"
#include "backends/reference/interpreter.hpp"
#include "backends/reference/kernels.hpp"
#include "ir/attention_match.hpp"
#include "ir/build.hpp"
#include "ir/online_softmax.hpp"
#include "luminal/error.hpp"
#include "rules/check_cases.hpp"

namespace luminal::rules::check {

namespace rf = detail::reference;
using ir::Attr;
using ir::Op;

namespace {

rf::View dense(const rf::View& v) {
  rf::Stats st;
  return rf::contiguous(v, st);
}

rf::View from_host(const HostTensor& t) {
  std::byte* data = nullptr;
  rf::View v = rf::allocate(t.dtype(), t.shape(), &data);
  if (t.nbytes() > 0) std::memcpy(data, t.data(), t.nbytes());  // (empty: data may be null)
  return v;
}

void need(bool ok, const std::string& why) {
  if (!ok) throw Wrong{why};
}

// The value of an Attention kernel node: not its body's two passes but the online-softmax
// recurrence (ir/online_softmax.hpp) over blocks of kAttentionBlock keys, so the rule that
// makes such a node (online-softmax) is checked against the two-pass node beside it. The
// scores and values are read from the body at the summation's index (P's uses read S
// instead), the sum over keys is the recurrence, and what follows it in the body (an
// epilogue, reshapes) runs on the result.
//
// The recurrence sums the terms P_j V_j in another order than the two passes (blockwise,
// rescaled), so where they cancel the two differ by the rounding of a reordered sum: up
// to a few ulps of max_j |P_j V_j| (the cancel pool's 2^25 - 2^25 + 3 gives 0.75 one way
// and 0.5 the other), not of the result -- the freedom every backend's blocked GEMM or
// SIMD reduction takes. That is the one thing the comparison allows: where both sums are
// finite and differ by at most kReorderTol * sum_j |P_j V_j| (plus a few subnormal ulps
// per key: weights that are subnormal lose their relative precision in any order), the
// two-pass sum stands for the recurrence's. Everything else is compared exactly: NaN,
// infinities (masked blocks, inf values, overflow), -0 against +0, and any difference
// beyond rounding (a dropped or double-counted key, a wrong max).
constexpr int64_t kAttentionBlock = 2;  // small instances span several blocks
constexpr double kReorderTol = 1e-4;    // the checker's f32 tolerance, relative to sum |P_j V_j|

HostTensor attention_online(const detail::GraphImpl& body, const DimBindings& dims,
                            const std::map<std::string, const HostTensor*>& in, bool fast_math) {
  const auto mt = ir::match_attention(body);
  need(mt.has_value(), "attention kernel: its body is not matmul, softmax, matmul");
  const detail::Node& r2 = body.nodes[mt->out_reduce];
  const detail::Node& mul2 = body.nodes[r2.inputs[0]];
  need(mul2.dtype == DType::f32 && body.nodes[mt->score].dtype == DType::f32,
       "attention kernel: scores and products must be f32");
  // Weights rounded to a half before the product (the fast-math rule's bodies): the
  // streaming kernel never rounds them, so the rounded node is what reads S instead.
  const uint32_t weights = mt->rounded >= 0 ? static_cast<uint32_t>(mt->rounded) : mt->prob;
  detail::GraphImpl parts = body;
  for (detail::Node& nd : parts.nodes)
    for (uint32_t& x : nd.inputs)
      if (x == weights) x = mt->score;
  parts.outputs = {{"s", mul2.inputs[static_cast<size_t>(mt->p_side)]},
                   {"v", mul2.inputs[static_cast<size_t>(1 - mt->p_side)]}};
  auto sv = rf::run(parts, dims, in);
  const HostTensor &s = sv.at("s"), &v = sv.at("v");
  // The two-pass sum itself (the body's R2), for the reordering allowance above.
  detail::GraphImpl two = body;
  two.outputs = {{"r2", mt->out_reduce}};
  const HostTensor two_sum = std::move(rf::run(two, dims, in).at("r2"));
  need(s.shape() == v.shape(), "attention kernel: scores and values at different indices");
  const auto& sh = s.shape();
  const auto ax = static_cast<size_t>(r2.axis);
  need(ax < sh.size(), "attention kernel: summed axis out of range");
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < ax; ++i) outer *= sh[i];
  for (size_t i = ax + 1; i < sh.size(); ++i) inner *= sh[i];
  const int64_t n = sh[ax];
  std::vector<int64_t> rshape(sh.begin(), sh.end());
  rshape.erase(rshape.begin() + static_cast<std::ptrdiff_t>(ax));
  HostTensor r(DType::f32, rshape);
  auto out = r.mutable_values<float>();
  const float *sp = s.values<float>().data(), *vp = v.values<float>().data();
  const auto c = static_cast<float>(mt->exp2_scale);
  const float* tp = two_sum.values<float>().data();
  // The fast-math rule's bodies round each weight to a half, which the recurrence does
  // not: its declared inaccuracy, allowed on top of the reordering when a fast-math rule
  // is checked (untagged, the rule fails) -- half an ulp of the half per weight (2^-11
  // f16, 2^-8 bf16), and the spacing of f16 subnormal weights.
  const bool rounded = mt->rounded >= 0 && fast_math;
  const double weight_rounding = !rounded ? 0 : mt->rounded_to == DType::f16 ? 0x1p-11 : 0x1p-8;
  const double weight_floor = rounded && mt->rounded_to == DType::f16 ? 0x1p-24 : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* so = sp + o * n * inner + i;
      const float* vo = vp + o * n * inner + i;
      const float rec = ir::online_softmax_dot(so, vo, n, inner, c, kAttentionBlock);
      const float two_pass = tp[static_cast<size_t>(o * inner + i)];
      float value = rec;
      if (std::isfinite(rec) && std::isfinite(two_pass) &&
          !(rec == 0 && two_pass == 0 && std::signbit(rec) != std::signbit(two_pass))) {
        // sum_j |P_j V_j| with the two-pass weights, and sum_j |V_j|, in double.
        double mx = -INFINITY, l = 0, mag = 0, vsum = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(so[j * inner]));
        for (int64_t j = 0; j < n; ++j) l += std::exp2((so[j * inner] - mx) * c);
        for (int64_t j = 0; j < n; ++j) {
          mag += std::exp2((so[j * inner] - mx) * c) / l * std::fabs(static_cast<double>(vo[j * inner]));
          vsum += std::fabs(static_cast<double>(vo[j * inner]));
        }
        const double allowed = (kReorderTol + weight_rounding) * mag + std::ldexp(vsum + static_cast<double>(n), -146) +
                               weight_floor * vsum;
        if (std::fabs(static_cast<double>(rec) - two_pass) <= allowed) value = two_pass;
      }
      out[static_cast<size_t>(o * inner + i)] = value;
    }
  detail::GraphImpl epi = body;
  detail::Node& at = epi.nodes[mt->out_reduce];
  at.op = detail::PrimOp::Input;
  at.inputs.clear();
  at.name = "%attention";
  epi.inputs.push_back(mt->out_reduce);
  std::map<std::string, const HostTensor*> in2 = in;
  in2["%attention"] = &r;
  auto res = rf::run(epi, dims, in2);
  need(res.count("out") == 1, "attention kernel: its body has no output 'out'");
  return std::move(res.at("out"));
}

// Evaluates one node on its children's values: the interpreter's kernels for math nodes,
// the MatMul definition spelled out in primitives, the body graph for kernel nodes. Every
// precondition is checked first, so an ill-typed node is reported, never run.
}  // namespace

rf::View eval(const ir::EGraph& g, egraph::NodeView<ir::TensorLang> n, const std::vector<const rf::View*>& k,
              const std::map<std::string, rf::View>& leaves, const DimBindings& dims, bool fast_math) {
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
        LUMINAL_PRIM_BINARY_OPS(LUMINAL_CASE_IROP)
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
      case Op::AllReduce:
      case Op::AllGather:
      case Op::ReduceScatter:
        throw Wrong{op + ": a collective is evaluated over every rank (eval_all)"};
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
        if (a.kernel->kind == ir::KernelKind::Attention) return from_host(attention_online(*a.kernel->body, dims, in, fast_math));
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

// Compares `got` with the class value `ref` (see Agreement).
std::string compare(const rf::View& ref, const rf::View& got, Agreement how, int64_t& compared,
                    const rf::View* magnitude, double declared_error) {
  if (ref.shape != got.shape) return "shape " + shape_str(got.shape) + " vs class " + shape_str(ref.shape);
  if (ref.dtype != got.dtype)
    return "dtype " + std::string(dtype_name(got.dtype)) + " vs class " + std::string(dtype_name(ref.dtype));
  const double tol = ref.dtype == DType::f32    ? 1e-4
                     : ref.dtype == DType::f16  ? 2e-3
                     : ref.dtype == DType::bf16 ? 1.6e-2
                                                : 0;
  const double min_normal = ref.dtype == DType::f16 ? 0x1p-14 : 0x1p-126;  // f32 and bf16 share the exponent range
  const int64_t n = ref.numel();
  if (how == Agreement::ReorderedSum && (!magnitude || magnitude->numel() != n))
    return "no magnitude for a reordered sum's class";
  for (int64_t i = 0; i < n; ++i) {
    const double r = rf::storage_element(ref, i), x = rf::storage_element(got, i);
    bool ok;
    if (how == Agreement::ReorderedSum) {
      const double m = rf::storage_element(*magnitude, i);
      if (!std::isfinite(m)) continue;  // the order decides which partial sum overflows
      ++compared;
      if (std::isnan(r) || std::isnan(x) || std::isinf(r) || std::isinf(x))
        ok = (std::isnan(r) && std::isnan(x)) || r == x;
      else if (m == 0)  // every term is a zero: the sum is +0 in any order (it starts at +0)
        ok = r == x && std::signbit(r) == std::signbit(x);
      else
        ok = std::fabs(r - x) <= tol * std::max(m, min_normal);
    } else if (how == Agreement::FastMath) {
      // A fast-math rule may change NaN/inf results and signed zeros: compared where
      // both are finite, at the moderate magnitudes its regimes draw.
      if (!std::isfinite(r) || !std::isfinite(x)) continue;
      ++compared;
      ok = std::fabs(r - x) <= std::max(tol, declared_error) * (1 + std::max(std::fabs(r), std::fabs(x)));
    } else {
      ++compared;
      if (std::isnan(r) || std::isnan(x))
        ok = std::isnan(r) && std::isnan(x);
      else if (std::isinf(r) || std::isinf(x) || r == 0 || x == 0)
        ok = r == x && std::signbit(r) == std::signbit(x);  // inf, and -0 vs +0, exactly
      else  // below the smallest normal, the same tolerance as at it: a subnormal's last bit
            // is a large relative step, and one rounding there is not a wrong answer
        ok = std::fabs(r - x) <= tol * std::max({std::fabs(r), std::fabs(x), min_normal});
    }
    if (!ok) {
      std::ostringstream os;
      os.precision(9);
      os << "element " << i << ": " << x << (x == 0 && std::signbit(x) ? " (-0)" : "") << " vs class value " << r
         << (r == 0 && std::signbit(r) ? " (-0)" : "");
      if (how == Agreement::ReorderedSum)
        os << " (terms' magnitudes sum to " << rf::storage_element(*magnitude, i) << ")";
      return os.str();
    }
  }
  return {};
}

rf::View absolute(const rf::View& v) {
  std::byte* data = nullptr;
  rf::View out = rf::allocate(v.dtype, v.shape, &data);
  rf::copy_out(v, data);
  const size_t size = dtype_size(v.dtype);
  for (int64_t i = 0, n = out.numel(); i < n; ++i) {
    std::byte* p = data + static_cast<size_t>(i) * size;
    rf::store_scalar(v.dtype, std::fabs(rf::load_scalar(v.dtype, p)), p);
  }
  return out;
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

Vals eval_all(const ir::EGraph& g, egraph::NodeView<ir::TensorLang> n, const std::vector<const Vals*>& k,
              const std::map<std::string, rf::View>& leaves, const Instance& inst) {
  const auto R = static_cast<size_t>(inst.world);
  const Attr& a = g.analysis().attrs().get(n.payload);
  const std::string op = ir::op_name(n.op);
  if (ir::is_collective(n.op)) {
    if (k.size() != 1 || a.step != inst.world) throw Wrong{op + ": wrong ranks or children"};
    if (n.op != Op::AllReduce && (a.axis < 0 || static_cast<size_t>(a.axis) >= (*k[0])[0].shape.size()))
      throw Wrong{op + ": axis out of range"};
    std::vector<const rf::View*> xs;
    for (size_t r = 0; r < R; ++r) xs.push_back(&(*k[0])[r]);
    try {
      return rf::collective(ir::to_prim(n.op), a.axis, xs);
    } catch (const Error& e) {
      throw Wrong{op + ": the interpreter rejects it: " + e.what()};
    }
  }
  Vals out(R);
  if (R > 1 && n.op == Op::Kernel && a.kernel && a.kernel->body && rf::collective_world(*a.kernel->body) > 1) {
    if (k.size() != a.kernel->slots) throw Wrong{"kernel: slot count"};
    std::vector<std::vector<HostTensor>> slots(R);
    std::vector<std::map<std::string, const HostTensor*>> in(R);
    for (size_t r = 0; r < R; ++r) {
      for (size_t i = 0; i < k.size(); ++i) {
        HostTensor t((*k[i])[r].dtype, (*k[i])[r].shape);
        rf::copy_out((*k[i])[r], t.mutable_data());
        slots[r].push_back(std::move(t));
      }
      for (size_t i = 0; i < k.size(); ++i) in[r][ir::slot_name(static_cast<uint32_t>(i))] = &slots[r][i];
    }
    try {
      auto res = rf::run_spmd(*a.kernel->body, inst.world, inst.dims, in);
      for (size_t r = 0; r < R; ++r) out[r] = from_host(res[r].at("out"));
    } catch (const Error& e) {
      throw Wrong{std::string("kernel: the interpreter rejects it: ") + e.what()};
    }
    return out;
  }
  for (size_t r = 0; r < R; ++r) {
    std::vector<const rf::View*> kr;
    for (const Vals* v : k) kr.push_back(&(*v)[r]);
    DimBindings d = inst.dims;
    if (R > 1) d[std::string(detail::kRankDim)] = static_cast<int64_t>(r);
    out[r] = eval(g, n, kr, leaves, d, inst.fast_math);
  }
  return out;
}

std::string compare_all(const Vals& ref, const Vals& got, Agreement how, int64_t& compared,
                        const Vals* magnitude, double declared_error) {
  for (size_t r = 0; r < ref.size(); ++r) {
    std::string why =
        compare(ref[r], got[r], how, compared, magnitude ? &magnitude->at(r) : nullptr, declared_error);
    if (!why.empty()) return ref.size() > 1 ? cat("rank ", r, ": ", why) : why;
  }
  return {};
}

}  // namespace luminal::rules::check
