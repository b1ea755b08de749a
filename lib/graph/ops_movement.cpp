// Movement ops: reshape permute transpose expand squeeze unsqueeze flatten slice pad
// concat repeat. All are views (index maps) except concat, which pads and adds.
#include <algorithm>

#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

std::string ints_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool is_neg_one(const Dim& d) {
  auto v = d.as_constant();
  return v && *v == -1;
}

}  // namespace

Tensor reshape(const Tensor& x, const std::vector<Dim>& shape, Loc loc) {
  Ctx c{"reshape", loc};
  need(x, c, "x");
  int infer = -1;
  Dim known(1);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (is_neg_one(shape[i])) {
      if (infer >= 0) {
        raise<ShapeError>(c, "target shape " + shape_string(shape) + " of " + describe(x) +
                                 " has more than one -1 (axes " + std::to_string(infer) + " and " +
                                 std::to_string(i) + ")");
      }
      infer = static_cast<int>(i);
      continue;
    }
    if (shape[i].upper_bound() < 0) {
      raise<ShapeError>(c, "target shape " + shape_string(shape) + " of " + describe(x) +
                               " has a negative dim " + shape[i].to_string() + " at axis " +
                               std::to_string(i));
    }
    known = known * shape[i];
  }
  std::vector<Dim> target = shape;
  const Dim total = product(x.shape());
  if (infer >= 0) {
    auto kv = known.as_constant(), tv = total.as_constant();
    if ((kv && *kv == 0) || (kv && tv && *tv % *kv != 0)) {
      raise<ShapeError>(c, "cannot reshape " + describe(x) + " (" + total.to_string() + " elements) to " +
                               shape_string(shape) + ": -1 cannot be inferred");
    }
    target[static_cast<size_t>(infer)] = total / known;
  }
  return reshape_(x, target, c);
}

Tensor permute(const Tensor& x, const std::vector<int>& axes, Loc loc) {
  Ctx c{"permute", loc};
  need(x, c, "x");
  auto bad = [&] {
    raise<ShapeError>(c, "axes " + dim_list(axes) + " are not a permutation of the " +
                             std::to_string(x.rank()) + " axes of " + describe(x));
  };
  if (static_cast<int64_t>(axes.size()) != x.rank()) bad();
  std::vector<int> perm;
  std::vector<bool> seen(axes.size(), false);
  for (int a : axes) {
    if (a < -x.rank() || a >= x.rank()) bad();
    int n = a < 0 ? static_cast<int>(a + x.rank()) : a;
    if (seen[static_cast<size_t>(n)]) bad();
    seen[static_cast<size_t>(n)] = true;
    perm.push_back(n);
  }
  return permute_(x, perm, c);
}

Tensor transpose(const Tensor& x, int a, int b, Loc loc) {
  Ctx c{"transpose", loc};
  need(x, c, "x");
  int na = norm_axis(a, x.rank(), x, c), nb = norm_axis(b, x.rank(), x, c);
  std::vector<int> perm;
  for (int i = 0; i < x.rank(); ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(na)], perm[static_cast<size_t>(nb)]);
  return permute_(x, perm, c);
}

Tensor expand(const Tensor& x, const std::vector<Dim>& shape, Loc loc) {
  Ctx c{"expand", loc};
  need(x, c, "x");
  const auto& s = x.shape();
  if (shape.size() < s.size()) {
    raise<ShapeError>(c, "cannot expand " + describe(x) + " to fewer dims " + shape_string(shape));
  }
  const size_t lead = shape.size() - s.size();
  std::vector<Dim> target(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i].upper_bound() < 0) {
        raise<ShapeError>(c, "new leading dim " + shape[i].to_string() + " at axis " + std::to_string(i) +
                                 " of " + shape_string(shape) +
                                 " must be >= 0 (-1 only keeps an existing dim)");
      }
      target[i] = shape[i];
      continue;
    }
    const Dim& d = s[i - lead];
    if (is_neg_one(shape[i]) || dims_provably_equal(shape[i], d)) {
      target[i] = d;
    } else if (is_one(d)) {
      if (shape[i].upper_bound() < 0) {
        raise<ShapeError>(c, "target dim " + shape[i].to_string() + " at axis " + std::to_string(i) + " of " +
                                 shape_string(shape) + " is negative");
      }
      target[i] = shape[i];
    } else {
      raise<ShapeError>(c, "cannot expand " + describe(x) + " to " + shape_string(shape) + ": dim " +
                               d.to_string() + " at axis " + std::to_string(i) +
                               " is not 1 and differs from " + shape[i].to_string());
    }
  }
  return broadcast_to(x, target, c);
}

Tensor squeeze(const Tensor& x, int axis, Loc loc) {
  Ctx c{"squeeze", loc};
  need(x, c, "x");
  int a = norm_axis(axis, x.rank(), x, c);
  if (!is_one(x.shape()[static_cast<size_t>(a)])) return x;  // torch: a no-op unless the dim is 1
  std::vector<Dim> s = x.shape();
  s.erase(s.begin() + a);
  return prim_reshape(x, s, c.op, c.loc);
}

Tensor unsqueeze(const Tensor& x, int axis, Loc loc) {
  Ctx c{"unsqueeze", loc};
  need(x, c, "x");
  int a = norm_axis(axis, x.rank() + 1, x, c);
  std::vector<Dim> s = x.shape();
  s.insert(s.begin() + a, Dim(1));
  return prim_reshape(x, s, c.op, c.loc);
}

Tensor flatten(const Tensor& x, int start, int end, Loc loc) {
  Ctx c{"flatten", loc};
  need(x, c, "x");
  if (x.rank() == 0) return prim_reshape(x, {Dim(1)}, c.op, c.loc);
  int s = norm_axis(start, x.rank(), x, c), e = norm_axis(end, x.rank(), x, c);
  if (s > e) {
    raise<ShapeError>(c, "start axis " + std::to_string(start) + " comes after end axis " +
                             std::to_string(end) + " for " + describe(x));
  }
  const auto& xs = x.shape();
  std::vector<Dim> out(xs.begin(), xs.begin() + s);
  out.push_back(product(xs, static_cast<size_t>(s), static_cast<size_t>(e) + 1));
  out.insert(out.end(), xs.begin() + e + 1, xs.end());
  return reshape_(x, out, c);
}

Tensor slice(const Tensor& x, int axis, Dim start, Dim end, int64_t step, Loc loc) {
  Ctx c{"slice", loc};
  need(x, c, "x");
  int a = norm_axis(axis, x.rank(), x, c);
  if (step < 1) {
    raise<ShapeError>(c, "step must be >= 1, got " + std::to_string(step) + " (slicing " + describe(x) +
                             " on axis " + std::to_string(axis) + ")");
  }
  const Dim n = x.shape()[static_cast<size_t>(a)];
  // Python clamping: negative constants count from the end, then both ends are clamped
  // to [0, n] and start to at most end.
  auto clampd = [&](const Dim& v) -> Dim {
    auto cv = v.as_constant();
    auto nv = n.as_constant();
    if (cv && nv) return Dim(std::clamp<int64_t>(*cv < 0 ? *cv + *nv : *cv, 0, *nv));
    if (cv && *cv < 0) return max(n + v, Dim(0));
    if (v.lower_bound() >= 0 && (v - n).upper_bound() <= 0) return v;
    return min(v, n);
  };
  Dim s = clampd(start), e = clampd(end);
  if ((e - s).upper_bound() < 0) {
    s = e;
  } else if ((e - s).lower_bound() < 0) {
    s = min(s, e);
  }
  if (s.is_constant() && e.is_constant() && n.is_constant() && *s.as_constant() == 0 &&
      *e.as_constant() == *n.as_constant() && step == 1) {
    return x;
  }
  return slice_(x, a, s, e, step, c);
}

Tensor pad(const Tensor& x, const std::vector<std::pair<Dim, Dim>>& lo_hi_per_axis, float value, Loc loc) {
  Ctx c{"pad", loc};
  need(x, c, "x");
  if (static_cast<int64_t>(lo_hi_per_axis.size()) > x.rank()) {
    raise<ShapeError>(c, std::to_string(lo_hi_per_axis.size()) + " (before, after) pairs for " + describe(x) +
                             " of rank " + std::to_string(x.rank()));
  }
  DType comp = compute_dtype(x.dtype());
  Tensor t = to(x, comp, c);
  for (size_t i = 0; i < lo_hi_per_axis.size(); ++i) {
    const int axis = static_cast<int>(i);
    Dim lo = lo_hi_per_axis[i].first, hi = lo_hi_per_axis[i].second;
    // Negative constant amounts crop, as torch's F.pad.
    auto lv = lo.as_constant(), hv = hi.as_constant();
    if ((lv && *lv < 0) || (hv && *hv < 0)) {
      const Dim n = t.shape()[i];
      Dim s = (lv && *lv < 0) ? Dim(-*lv) : Dim(0);
      Dim e = (hv && *hv < 0) ? n + hi : n;
      if ((e - s).upper_bound() < 0) {
        raise<ShapeError>(c, "negative padding (" + lo.to_string() + ", " + hi.to_string() +
                                 ") removes more than the " + n.to_string() + " elements of axis " +
                                 std::to_string(i) + " of " + describe(x));
      }
      t = slice_(t, axis, s, e, 1, c);
      if (lv && *lv < 0) lo = Dim(0);
      if (hv && *hv < 0) hi = Dim(0);
    }
    if (lo.is_constant() && hi.is_constant() && *lo.as_constant() == 0 && *hi.as_constant() == 0) continue;
    t = prim_pad(t, axis, lo, hi, static_cast<double>(value), c.op, c.loc);
  }
  return to(t, x.dtype(), c);
}

Tensor concat(const std::vector<Tensor>& xs, int axis, Loc loc) {
  Ctx c{"concat", loc};
  if (xs.empty()) raise<ShapeError>(c, "needs at least one tensor");
  for (const auto& t : xs) need(t, c, "operand");
  const Tensor& first = xs[0];
  int a = norm_axis(axis, first.rank(), first, c);
  DType r = first.dtype();
  for (size_t i = 1; i < xs.size(); ++i) {
    const auto& s = xs[i].shape();
    bool ok = s.size() == first.shape().size();
    for (size_t d = 0; ok && d < s.size(); ++d) {
      ok = static_cast<int>(d) == a || dims_provably_equal(s[d], first.shape()[d]);
    }
    if (!ok) {
      raise<ShapeError>(c, "tensor " + std::to_string(i) + " " + shape_string(s) +
                               " does not match tensor 0 " + shape_string(first.shape()) + " outside axis " +
                               std::to_string(axis));
    }
    r = promote(r, xs[i].dtype());
  }
  DType comp = compute_dtype(r);
  std::vector<Tensor> ts;
  for (const auto& t : xs) ts.push_back(to(t, comp, c));
  return to(concat_(ts, a, c), r, c);
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& times, Loc loc) {
  Ctx c{"repeat", loc};
  need(x, c, "x");
  if (static_cast<int64_t>(times.size()) < x.rank()) {
    raise<ShapeError>(c,
                      "times " + ints_string(times) + " has fewer entries than the rank of " + describe(x));
  }
  for (int64_t t : times) {
    if (t < 0)
      raise<ShapeError>(c, "times " + ints_string(times) + " has a negative count for " + describe(x));
  }
  // [d0, d1, ...] -> [1, d0, 1, d1, ...] -> expand [t0, d0, t1, d1, ...] -> [t0*d0, t1*d1, ...]
  std::vector<Dim> s(times.size() - static_cast<size_t>(x.rank()), Dim(1));
  s.insert(s.end(), x.shape().begin(), x.shape().end());
  std::vector<Dim> inter, big, out;
  for (size_t i = 0; i < s.size(); ++i) {
    inter.insert(inter.end(), {Dim(1), s[i]});
    big.insert(big.end(), {Dim(times[i]), s[i]});
    out.push_back(Dim(times[i]) * s[i]);
  }
  Tensor t = prim_reshape(x, inter, c.op, c.loc);
  t = broadcast_to(t, big, c);
  return prim_reshape(t, out, c.op, c.loc);
}

}  // namespace luminal
