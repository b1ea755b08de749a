// Elementwise ops: unary math, binary arithmetic with NumPy broadcasting and PyTorch
// dtype promotion, comparisons, logical ops, where, clamp and the operators.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "graph/ops_common.hpp"

namespace luminal {

using namespace detail;

namespace {

// ------------------------------------------------------------------ operand promotion
Category scalar_category(Operand::Kind k) {
  switch (k) {
    case Operand::Kind::boolean:
      return Category::boolean;
    case Operand::Kind::integer:
      return Category::integer;
    default:
      return Category::floating;
  }
}

DType default_dtype(Category k) {
  switch (k) {
    case Category::boolean:
      return boolean;
    case Category::integer:
      return i32;
    default:
      return f32;
  }
}

std::string operand_string(const Operand& o) {
  if (o.is_tensor()) return o.tensor().valid() ? describe(o.tensor()) : "null Tensor";
  return "scalar " + std::to_string(o.value());
}

/// The dtype a binary op's result has before any op-specific rule (PyTorch: tensors
/// promote by dtype; a scalar only lifts the category).
DType result_dtype(const Operand& a, const Operand& b, const Ctx& c) {
  if (!a.is_tensor() && !b.is_tensor())
    raise<ShapeError>(c, "needs at least one tensor operand, got two scalars");
  if (a.is_tensor()) need(a.tensor(), c, "lhs");
  if (b.is_tensor()) need(b.tensor(), c, "rhs");
  if (a.is_tensor() && b.is_tensor()) return promote(a.tensor().dtype(), b.tensor().dtype());
  const Tensor& t = a.is_tensor() ? a.tensor() : b.tensor();
  const Operand& s = a.is_tensor() ? b : a;
  Category sc = scalar_category(s.kind());
  return sc > category(t.dtype()) ? default_dtype(sc) : t.dtype();
}

/// One operand as a tensor of dtype dt (a scalar becomes a rank-0 constant).
Tensor materialize(const Operand& o, const Operand& other, DType dt, const Ctx& c) {
  if (o.is_tensor()) return to(o.tensor(), dt, c);
  return scalar_like(other.tensor(), o.value(), dt, c);
}

struct Prepared {
  Tensor a, b;
  DType result;   // dtype of the op's result
  DType compute;  // dtype a and b are in
};

Prepared prepare(const Operand& a, const Operand& b, DType result, DType compute, const Ctx& c) {
  Prepared p{materialize(a, b, compute, c), materialize(b, a, compute, c), result, compute};
  // Shapes are checked here so the message names both operands as the user gave them.
  broadcast_shape(p.a.shape(), p.b.shape(), c);
  return p;
}

/// Arithmetic: numbers only; f16/bf16 computed in f32.
Prepared arith(const Operand& a, const Operand& b, const Ctx& c) {
  DType r = result_dtype(a, b, c);
  if (r == boolean) {
    raise<DTypeError>(c, "arithmetic on " + operand_string(a) + " and " + operand_string(b) +
                             ": bool operands need a cast to a number first");
  }
  return prepare(a, b, r, compute_dtype(r), c);
}

Tensor finish(const Tensor& t, DType result, const Ctx& c) { return to(t, result, c); }

/// Unary float math: numbers are computed in f32; f16/bf16 results are cast back, other
/// inputs (i32, bool) give f32 like torch.
template <class F>
Tensor float_unary(const Tensor& x, const Ctx& c, F f) {
  need(x, c, "x");
  DType out = is_float(x.dtype()) ? x.dtype() : f32;
  return to(f(to_f32(x, c)), out, c);
}

void need_number(const Tensor& x, const Ctx& c) {
  need(x, c, "x");
  if (x.dtype() == boolean) raise<DTypeError>(c, "needs a number, got " + describe(x));
}

/// Unary ops defined on i32 too (neg, abs, relu, square, sign): f16/bf16 via f32.
template <class F>
Tensor numeric_unary(const Tensor& x, const Ctx& c, F f) {
  need_number(x, c);
  return to(f(to(x, compute_dtype(x.dtype()), c)), x.dtype(), c);
}

Tensor pow_f(const Tensor& x, const Tensor& y, const Ctx& c) {
  // |x|^y = exp2(y log2|x|), then the cases exp2/log2 get wrong: y == 0 or x == 1 give
  // 1 (even for NaN, as torch); x < 0 needs an integer y (else NaN) and is negated when
  // y is odd. fmod-based tests work whatever the sign convention of mod.
  Tensor xneg = lt_(x, 0.0, c);
  Tensor ax = where_(xneg, neg_(x, c), x, c);
  Tensor r = un(PrimOp::Exp2, mul_(y, un(PrimOp::Log2, ax, c), c), c);
  Tensor y_int = eq_(bin(PrimOp::Mod, y, 1.0, c), 0.0, c);
  Tensor fm2 = bin(PrimOp::Mod, y, 2.0, c);
  Tensor y_odd = or_(eq_(fm2, 1.0, c), eq_(fm2, -1.0, c), c);
  Tensor neg_r = where_(y_int, where_(y_odd, neg_(r, c), r, c), std::nan(""), c);
  Tensor out = where_(xneg, neg_r, r, c);
  return where_(or_(eq_(y, 0.0, c), eq_(x, 1.0, c), c), 1.0, out, c);
}

/// torch.remainder from C's truncated mod: shift by b when r != 0 and signs differ.
Tensor remainder_(const Tensor& a, const Tensor& b, const Ctx& c) {
  Tensor r = bin(PrimOp::Mod, a, b, c);
  Tensor signs_differ = not_(eq_(lt_(r, 0.0, c), lt_(b, 0.0, c), c), c);
  Tensor fix = and_(not_(eq_(r, 0.0, c), c), signs_differ, c);
  return where_(fix, add_(r, b, c), r, c);
}

/// Comparison operands: promoted, then f16/bf16 -> f32; bool -> i32 unless `bool_ok`.
Prepared comparison(const Operand& a, const Operand& b, bool bool_ok, const Ctx& c) {
  DType r = result_dtype(a, b, c);
  DType comp = compute_dtype(r);
  if (comp == boolean && !bool_ok) comp = i32;
  return prepare(a, b, boolean, comp, c);
}

Prepared logical(const Operand& a, const Operand& b, const Ctx& c) {
  for (const Operand* o : {&a, &b}) {
    bool ok = o->is_tensor() ? (o->tensor().valid() && o->tensor().dtype() == boolean)
                             : o->kind() == Operand::Kind::boolean;
    if (o->is_tensor()) need(o->tensor(), c, o == &a ? "lhs" : "rhs");
    if (!ok) {
      raise<DTypeError>(
          c, "logical operands must be bool, got " + operand_string(a) + " and " + operand_string(b));
    }
  }
  if (!a.is_tensor() && !b.is_tensor())
    raise<ShapeError>(c, "needs at least one tensor operand, got two scalars");
  return prepare(a, b, boolean, boolean, c);
}

}  // namespace

// ------------------------------------------------------------------ unary
Tensor neg(const Tensor& x, Loc loc) {
  Ctx c{"neg", loc};
  return numeric_unary(x, c, [&](const Tensor& t) { return neg_(t, c); });
}

Tensor abs(const Tensor& x, Loc loc) {
  Ctx c{"abs", loc};
  return numeric_unary(x, c, [&](const Tensor& t) { return where_(lt_(t, 0.0, c), neg_(t, c), t, c); });
}

Tensor exp(const Tensor& x, Loc loc) {
  Ctx c{"exp", loc};
  return float_unary(x, c, [&](const Tensor& t) { return exp_f(t, c); });
}

Tensor exp2(const Tensor& x, Loc loc) {
  Ctx c{"exp2", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Exp2, t, c); });
}

Tensor log(const Tensor& x, Loc loc) {
  Ctx c{"log", loc};
  return float_unary(x, c, [&](const Tensor& t) { return log_f(t, c); });
}

Tensor log2(const Tensor& x, Loc loc) {
  Ctx c{"log2", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Log2, t, c); });
}

Tensor sqrt(const Tensor& x, Loc loc) {
  Ctx c{"sqrt", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Sqrt, t, c); });
}

Tensor rsqrt(const Tensor& x, Loc loc) {
  Ctx c{"rsqrt", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Recip, un(PrimOp::Sqrt, t, c), c); });
}

Tensor recip(const Tensor& x, Loc loc) {
  Ctx c{"recip", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Recip, t, c); });
}

Tensor sin(const Tensor& x, Loc loc) {
  Ctx c{"sin", loc};
  return float_unary(x, c, [&](const Tensor& t) { return un(PrimOp::Sin, t, c); });
}

Tensor cos(const Tensor& x, Loc loc) {
  Ctx c{"cos", loc};
  return float_unary(x, c, [&](const Tensor& t) { return cos_f(t, c); });
}

Tensor tanh(const Tensor& x, Loc loc) {
  Ctx c{"tanh", loc};
  return float_unary(x, c, [&](const Tensor& t) { return tanh_f(t, c); });
}

Tensor sigmoid(const Tensor& x, Loc loc) {
  Ctx c{"sigmoid", loc};
  return float_unary(x, c, [&](const Tensor& t) { return sigmoid_f(t, c); });
}

Tensor relu(const Tensor& x, Loc loc) {
  Ctx c{"relu", loc};
  return numeric_unary(x, c, [&](const Tensor& t) { return max_(t, scalar_like(t, 0.0, t.dtype(), c), c); });
}

Tensor square(const Tensor& x, Loc loc) {
  Ctx c{"square", loc};
  return numeric_unary(x, c, [&](const Tensor& t) { return mul_(t, t, c); });
}

Tensor sign(const Tensor& x, Loc loc) {
  Ctx c{"sign", loc};
  // (x > 0) - (x < 0): 0 for zeros and NaN, as torch.sign.
  return numeric_unary(x, c, [&](const Tensor& t) {
    return sub_(to(gt_(t, 0.0, c), t.dtype(), c), to(lt_(t, 0.0, c), t.dtype(), c), c);
  });
}

Tensor silu(const Tensor& x, Loc loc) {
  Ctx c{"silu", loc};
  return float_unary(x, c, [&](const Tensor& t) { return mul_(t, sigmoid_f(t, c), c); });
}

Tensor gelu(const Tensor& x, Loc loc) {
  Ctx c{"gelu", loc};
  return float_unary(x, c, [&](const Tensor& t) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const double k = std::sqrt(2.0 / std::numbers::pi);
    Tensor inner = mul_(add_(t, mul_(mul_(mul_(t, t, c), t, c), 0.044715, c), c), k, c);
    return mul_(mul_(t, 0.5, c), add_(tanh_f(inner, c), 1.0, c), c);
  });
}

Tensor gelu_erf(const Tensor& x, Loc loc) {
  Ctx c{"gelu_erf", loc};
  return float_unary(x, c, [&](const Tensor& t) {
    // 1 + erf(z) = 2 - erfc(z) for z >= 0 and erfc(-z) for z < 0: the negative side keeps
    // full relative accuracy instead of cancelling in 1 + erf.
    Tensor z = mul_(t, std::numbers::sqrt2 / 2.0, c);
    Tensor e = erfc_abs_f(z, c);
    Tensor one_plus_erf = where_(lt_(z, 0.0, c), e, sub_(2.0, e, c), c);
    return mul_(mul_(t, 0.5, c), one_plus_erf, c);
  });
}

Tensor erf(const Tensor& x, Loc loc) {
  Ctx c{"erf", loc};
  return float_unary(x, c, [&](const Tensor& t) {
    // sign(x) (1 - erfc|x|); below |x| = 0.5 its Maclaurin series keeps relative accuracy.
    Tensor e = sub_(1.0, erfc_abs_f(t, c), c);
    Tensor big = where_(lt_(t, 0.0, c), neg_(e, c), e, c);
    Tensor x2 = mul_(t, t, c);
    static constexpr double series[] = {1.0,       -1.0 / 3,    1.0 / 10,  -1.0 / 42,
                                        1.0 / 216, -1.0 / 1320, 1.0 / 9360};
    Tensor p = scalar_like(t, series[6], f32, c);
    for (int i = 5; i >= 0; --i) p = add_(mul_(p, x2, c), series[i], c);
    Tensor small = mul_(mul_(p, t, c), 2.0 / std::sqrt(std::numbers::pi), c);
    Tensor ax = where_(lt_(t, 0.0, c), neg_(t, c), t, c);
    return where_(lt_(ax, 0.5, c), small, big, c);
  });
}

Tensor logical_not(const Tensor& x, Loc loc) {
  Ctx c{"logical_not", loc};
  need(x, c, "x");
  if (x.dtype() != boolean) raise<DTypeError>(c, "logical operand must be bool, got " + describe(x));
  return not_(x, c);
}

// ------------------------------------------------------------------ binary arithmetic
Tensor add(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"add", loc};
  Prepared p = arith(a, b, c);
  return finish(add_(p.a, p.b, c), p.result, c);
}

Tensor sub(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"sub", loc};
  Prepared p = arith(a, b, c);
  return finish(sub_(p.a, p.b, c), p.result, c);
}

Tensor mul(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"mul", loc};
  Prepared p = arith(a, b, c);
  return finish(mul_(p.a, p.b, c), p.result, c);
}

Tensor div(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"div", loc};
  DType r = result_dtype(a, b, c);
  if (!is_float(r)) r = f32;  // true division, as torch
  Prepared p = prepare(a, b, r, f32, c);
  return finish(div_(p.a, p.b, c), p.result, c);
}

Tensor pow(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"pow", loc};
  Prepared p0 = arith(a, b, c);
  // Small integer scalar exponents are products (square-and-multiply: at most 2 log2|e|
  // roundings, exact signs for negative bases), negative ones their reciprocal; 0.5 and
  // -0.5 are sqrt and rsqrt. Everything else goes through exp2/log2.
  if (a.is_tensor() && !b.is_tensor()) {
    const double e = b.value();
    Tensor x = p0.a;
    const bool small_int = e == std::floor(e) && std::abs(e) >= 1 && std::abs(e) <= 16;
    if (small_int && (e > 0 || p0.compute == f32)) {
      auto n = static_cast<int64_t>(std::abs(e));
      Tensor result, base = x;
      while (true) {
        if (n & 1) result = result.valid() ? mul_(result, base, c) : base;
        n >>= 1;
        if (n == 0) break;
        base = mul_(base, base, c);
      }
      if (e < 0) result = un(PrimOp::Recip, result, c);
      return finish(result, p0.result, c);
    }
    if (p0.compute == f32) {
      if (e == 0.5) return finish(un(PrimOp::Sqrt, x, c), p0.result, c);
      if (e == -0.5) return finish(un(PrimOp::Recip, un(PrimOp::Sqrt, x, c), c), p0.result, c);
    }
  }
  if (p0.compute == f32) return finish(pow_f(p0.a, p0.b, c), p0.result, c);
  // i32 ** i32: computed in f32 and rounded to the nearest integer.
  Tensor r = pow_f(to_f32(p0.a, c), to_f32(p0.b, c), c);
  r = add_(r, where_(lt_(r, 0.0, c), -0.5, scalar_like(r, 0.5, f32, c), c), c);
  return to(r, i32, c);
}

Tensor maximum(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"maximum", loc};
  Prepared p = arith(a, b, c);
  return finish(max_(p.a, p.b, c), p.result, c);
}

Tensor minimum(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"minimum", loc};
  Prepared p = arith(a, b, c);
  return finish(min_(p.a, p.b, c), p.result, c);
}

Tensor mod(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"mod", loc};
  Prepared p = arith(a, b, c);
  return finish(remainder_(p.a, p.b, c), p.result, c);
}

// ------------------------------------------------------------------ comparisons
Tensor less(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"less", loc};
  Prepared p = comparison(a, b, false, c);
  return lt_(p.a, p.b, c);
}

Tensor greater(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"greater", loc};
  Prepared p = comparison(a, b, false, c);
  return lt_(p.b, p.a, c);
}

Tensor less_equal(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"less_equal", loc};
  Prepared p = comparison(a, b, false, c);
  return or_(lt_(p.a, p.b, c), eq_(p.a, p.b, c), c);  // false for NaN, unlike !(b < a)
}

Tensor greater_equal(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"greater_equal", loc};
  Prepared p = comparison(a, b, false, c);
  return or_(lt_(p.b, p.a, c), eq_(p.a, p.b, c), c);
}

Tensor equal(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"equal", loc};
  Prepared p = comparison(a, b, true, c);
  return eq_(p.a, p.b, c);
}

Tensor not_equal(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"not_equal", loc};
  Prepared p = comparison(a, b, true, c);
  return not_(eq_(p.a, p.b, c), c);
}

Tensor logical_and(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"logical_and", loc};
  Prepared p = logical(a, b, c);
  return and_(p.a, p.b, c);
}

Tensor logical_or(const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"logical_or", loc};
  Prepared p = logical(a, b, c);
  return or_(p.a, p.b, c);
}

Tensor where(const Tensor& cond, const Operand& a, const Operand& b, Loc loc) {
  Ctx c{"where", loc};
  need(cond, c, "cond");
  if (cond.dtype() != boolean) raise<DTypeError>(c, "cond must be bool, got " + describe(cond));
  DType r;
  Tensor ta, tb;
  if (!a.is_tensor() && !b.is_tensor()) {
    r = default_dtype(std::max(scalar_category(a.kind()), scalar_category(b.kind())));
    ta = scalar_like(cond, a.value(), r, c);
    tb = scalar_like(cond, b.value(), r, c);
  } else {
    r = result_dtype(a, b, c);
    DType comp = compute_dtype(r);
    const Operand& t = a.is_tensor() ? a : b;
    ta = materialize(a, t, comp, c);
    tb = materialize(b, t, comp, c);
  }
  return finish(where_(cond, ta, tb, c), r, c);
}

Tensor clamp(const Tensor& x, const Operand& lo, const Operand& hi, Loc loc) {
  Ctx c{"clamp", loc};
  need_number(x, c);
  // min(max(x, lo), hi); the intermediate cast back (f16/bf16) is exact.
  Prepared p = arith(x, lo, c);
  Tensor lower = finish(max_(p.a, p.b, c), p.result, c);
  Prepared q = arith(lower, hi, c);
  return finish(min_(q.a, q.b, c), q.result, c);
}

// ------------------------------------------------------------------ operators
Tensor operator+(const Operand& a, const Operand& b) { return add(a, b, a.loc()); }
Tensor operator-(const Operand& a, const Operand& b) { return sub(a, b, a.loc()); }
Tensor operator*(const Operand& a, const Operand& b) { return mul(a, b, a.loc()); }
Tensor operator/(const Operand& a, const Operand& b) { return div(a, b, a.loc()); }
Tensor operator-(const Operand& x) {
  if (!x.is_tensor()) fail<ShapeError>("neg", "needs a tensor operand", x.loc());
  return neg(x.tensor(), x.loc());
}
Tensor& operator+=(Tensor& a, const Operand& b) { return a = add(a, b, b.loc()); }
Tensor& operator-=(Tensor& a, const Operand& b) { return a = sub(a, b, b.loc()); }
Tensor& operator*=(Tensor& a, const Operand& b) { return a = mul(a, b, b.loc()); }
Tensor& operator/=(Tensor& a, const Operand& b) { return a = div(a, b, b.loc()); }

}  // namespace luminal
