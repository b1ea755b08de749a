// Random chains of view primitives (reshape, permute, expand, slice, pad) checked against
// a naive dense implementation that copies at every step. The interpreter's index maps
// (strides, offsets, pad masks, no-copy reshapes) must agree exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>

#include "core_test_util.hpp"

using namespace luminal;
using namespace luminal::detail;

namespace {

struct Dense {
  std::vector<int64_t> shape;
  std::vector<float> v;
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

int64_t count(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Calls f(out_index_vector, flat_out) for every element of shape s.
template <class F>
void each(const std::vector<int64_t>& s, F f) {
  const int64_t n = count(s);
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t r = flat;
    for (size_t d = s.size(); d-- > 0;) {
      idx[d] = r % s[d];
      r /= s[d];
    }
    f(idx, flat);
  }
}

float at(const Dense& x, const std::vector<int64_t>& idx) {
  const auto st = strides_of(x.shape);
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * st[d];
  return x.v[static_cast<size_t>(o)];
}

Dense d_permute(const Dense& x, const std::vector<int>& p) {
  Dense y;
  for (int a : p) y.shape.push_back(x.shape[static_cast<size_t>(a)]);
  y.v.resize(static_cast<size_t>(count(y.shape)));
  each(y.shape, [&](const std::vector<int64_t>& i, int64_t f) {
    std::vector<int64_t> src(i.size());
    for (size_t d = 0; d < p.size(); ++d) src[static_cast<size_t>(p[d])] = i[d];
    y.v[static_cast<size_t>(f)] = at(x, src);
  });
  return y;
}

Dense d_expand(const Dense& x, const std::vector<int64_t>& s) {
  Dense y{s, std::vector<float>(static_cast<size_t>(count(s)))};
  each(s, [&](const std::vector<int64_t>& i, int64_t f) {
    std::vector<int64_t> src = i;
    for (size_t d = 0; d < s.size(); ++d)
      if (x.shape[d] == 1) src[d] = 0;
    y.v[static_cast<size_t>(f)] = at(x, src);
  });
  return y;
}

Dense d_slice(const Dense& x, size_t axis, int64_t start, int64_t end, int64_t step) {
  Dense y{x.shape, {}};
  y.shape[axis] = (end - start + step - 1) / step;
  y.v.resize(static_cast<size_t>(count(y.shape)));
  each(y.shape, [&](const std::vector<int64_t>& i, int64_t f) {
    std::vector<int64_t> src = i;
    src[axis] = start + i[axis] * step;
    y.v[static_cast<size_t>(f)] = at(x, src);
  });
  return y;
}

Dense d_pad(const Dense& x, size_t axis, int64_t lo, int64_t hi, float value) {
  Dense y{x.shape, {}};
  y.shape[axis] += lo + hi;
  y.v.resize(static_cast<size_t>(count(y.shape)));
  each(y.shape, [&](const std::vector<int64_t>& i, int64_t f) {
    std::vector<int64_t> src = i;
    src[axis] -= lo;
    y.v[static_cast<size_t>(f)] = (src[axis] < 0 || src[axis] >= x.shape[axis]) ? value : at(x, src);
  });
  return y;
}

}  // namespace

TEST_CASE("random view chains match a naive copy-per-step implementation", "[view][fuzz]") {
  std::mt19937 rng(20261129);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const auto L = Loc::current();
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int64_t> shape;
    const int64_t rank = pick(1, 3);
    for (int64_t i = 0; i < rank; ++i) shape.push_back(pick(1, 4));
    Graph g;
    std::vector<Dim> dshape(shape.begin(), shape.end());
    Tensor t = g.input("x", dshape);
    Dense ref{shape, std::vector<float>(static_cast<size_t>(count(shape)))};
    for (size_t i = 0; i < ref.v.size(); ++i) ref.v[i] = static_cast<float>(i + 1);
    const HostTensor input = HostTensor::from(ref.v, shape);
    const int64_t steps = pick(1, 6);
    std::string trace;
    for (int64_t s = 0; s < steps; ++s) {
      const size_t r = ref.shape.size();
      switch (pick(0, 4)) {
        case 0: {  // permute
          std::vector<int> p(r);
          for (size_t i = 0; i < r; ++i) p[i] = static_cast<int>(i);
          std::shuffle(p.begin(), p.end(), rng);
          t = prim_permute(t, p, "t", L);
          ref = d_permute(ref, p);
          trace += " permute";
          break;
        }
        case 1: {  // expand the size-1 axes
          std::vector<int64_t> ns = ref.shape;
          for (int64_t& d : ns)
            if (d == 1) d = pick(1, 3);
          t = prim_expand(t, std::vector<Dim>(ns.begin(), ns.end()), "t", L);
          ref = d_expand(ref, ns);
          trace += " expand";
          break;
        }
        case 2: {  // slice
          const size_t a = static_cast<size_t>(pick(0, static_cast<int64_t>(r) - 1));
          const int64_t n = ref.shape[a];
          const int64_t start = pick(0, n), end = pick(start, n), step = pick(1, 3);
          t = prim_slice(t, static_cast<int>(a), start, end, step, "t", L);
          ref = d_slice(ref, a, start, end, step);
          trace += " slice";
          break;
        }
        case 3: {  // pad (two fill values, so nested pads with different values occur)
          const size_t a = static_cast<size_t>(pick(0, static_cast<int64_t>(r) - 1));
          const int64_t lo = pick(0, 2), hi = pick(0, 2);
          const float value = pick(0, 1) ? -1.0f : -2.0f;
          t = prim_pad(t, static_cast<int>(a), lo, hi, value, "t", L);
          ref = d_pad(ref, a, lo, hi, value);
          trace += " pad";
          break;
        }
        case 4: {  // reshape: split or merge axes, or insert a 1
          std::vector<int64_t> ns = ref.shape;
          const int64_t kind = pick(0, 2);
          const size_t a = static_cast<size_t>(pick(0, static_cast<int64_t>(r) - 1));
          if (kind == 0 && a + 1 < ns.size()) {
            ns[a] *= ns[a + 1];
            ns.erase(ns.begin() + static_cast<std::ptrdiff_t>(a) + 1);
          } else if (kind == 1 && ns[a] % 2 == 0 && ns[a] > 0) {
            ns[a] /= 2;
            ns.insert(ns.begin() + static_cast<std::ptrdiff_t>(a) + 1, 2);
          } else {
            ns.insert(ns.begin() + static_cast<std::ptrdiff_t>(a), 1);
          }
          if (ns.size() > 4) break;
          t = prim_reshape(t, std::vector<Dim>(ns.begin(), ns.end()), "t", L);
          ref.shape = ns;
          trace += " reshape";
          break;
        }
      }
    }
    // Output the view itself, feed it to an elementwise kernel, or reduce one axis
    // (sum of a product: the fused path; or max).
    const int mode = trial % 4;
    std::vector<float> expect = ref.v;
    std::vector<int64_t> eshape = ref.shape;
    if (mode == 1) {
      t = prim_binary(PrimOp::Add, t, t, "t", L);
      for (float& v : expect) v += v;
    } else if (mode >= 2) {
      const size_t a = static_cast<size_t>(pick(0, static_cast<int64_t>(ref.shape.size()) - 1));
      const bool sum = mode == 2;
      t = sum ? prim_reduce(PrimOp::SumReduce, prim_binary(PrimOp::Mul, t, t, "t", L), static_cast<int>(a),
                            "t", L)
              : prim_reduce(PrimOp::MaxReduce, t, static_cast<int>(a), "t", L);
      eshape.erase(eshape.begin() + static_cast<std::ptrdiff_t>(a));
      expect.assign(static_cast<size_t>(count(eshape)), 0.0f);
      each(eshape, [&](const std::vector<int64_t>& i, int64_t f) {
        float acc = sum ? 0.0f : -std::numeric_limits<float>::infinity();
        std::vector<int64_t> src = i;
        src.insert(src.begin() + static_cast<std::ptrdiff_t>(a), 0);
        for (int64_t k = 0; k < ref.shape[a]; ++k) {
          src[a] = k;
          const float v = at(ref, src);
          acc = sum ? acc + v * v : std::max(acc, v);
        }
        expect[static_cast<size_t>(f)] = acc;
      });
      trace += sum ? " sum(mul)" : " max";
    }
    g.output("y", t);
    const HostTensor y = luminal::test::run1(g, {{"x", input}});
    INFO("trial " << trial << ":" << trace);
    REQUIRE(y.shape() == eshape);
    CHECK(y.to_f32() == expect);
    ++checked;
  }
  CHECK(checked == 400);
}
