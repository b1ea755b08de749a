// Elementwise, reduction and gather loops. Each op is written once as a scalar lambda
// and instantiated per dtype; the row loop has a unit-stride fast path so the compiler
// vectorizes the common case.
#include "kernel/kernel_ir.hpp"
#include "backends/reference/kernels.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/loops.hpp"
#include "luminal/error.hpp"
#include "runtime/half.hpp"

namespace luminal::detail::reference {

namespace {

template <class T>
const T* ptr(const View& v) {
  return reinterpret_cast<const T*>(v.base);
}

template <class In, class Out, class F>
View map1(const View& x, DType out_dtype, F f) {
  std::byte* data = nullptr;
  View out = allocate(out_dtype, x.shape, &data);
  Out* o = reinterpret_cast<Out*>(data);
  const In* p = ptr<In>(x);
  for_each_row<2>(x.shape, {&x.strides, &out.strides}, {x.offset, 0},
                  [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& s) {
                    const In* a = p + off[0];
                    Out* q = o + off[1];
                    if (s[0] == 1 && s[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) q[i] = f(a[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) q[i * s[1]] = f(a[i * s[0]]);
                    }
                  });
  return out;
}

template <class In, class Out, class F>
View map2(const View& x, const View& y, DType out_dtype, F f) {
  std::byte* data = nullptr;
  View out = allocate(out_dtype, x.shape, &data);
  Out* o = reinterpret_cast<Out*>(data);
  const In* px = ptr<In>(x);
  const In* py = ptr<In>(y);
  for_each_row<3>(x.shape, {&x.strides, &y.strides, &out.strides}, {x.offset, y.offset, 0},
                  [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& s) {
                    const In* a = px + off[0];
                    const In* b = py + off[1];
                    Out* q = o + off[2];
                    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
                      for (int64_t i = 0; i < n; ++i) q[i] = f(a[i], b[i]);
                    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {
                      const In bv = b[0];
                      for (int64_t i = 0; i < n; ++i) q[i] = f(a[i], bv);
                    } else {
                      for (int64_t i = 0; i < n; ++i) q[i * s[2]] = f(a[i * s[0]], b[i * s[1]]);
                    }
                  });
  return out;
}

float fmax_nan(float a, float b) {
  return (std::isnan(a) || std::isnan(b)) ? std::numeric_limits<float>::quiet_NaN() : (a > b ? a : b);
}

int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t wrap_mul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}
int32_t int_mod(int32_t a, int32_t b) {
  if (b == 0 || b == -1) return 0;  // defined: never a trap (see primitives.hpp)
  return a % b;
}

// Loads an element of any dtype as float (f32/f16/bf16/bool) -- exact.
template <class T>
float load_f(const T& x, DType t) {
  if constexpr (sizeof(T) == 2) {
    return t == DType::f16 ? f16_to_f32(x) : bf16_to_f32(x);
  } else if constexpr (sizeof(T) == 1) {
    return x ? 1.0f : 0.0f;
  } else {
    return x;
  }
}

int32_t f_to_i32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}

template <class In>
View cast_from(const View& x, DType to) {
  const DType from = x.dtype;
  if (from == DType::i32) {
    switch (to) {
      case DType::i32:
        return map1<int32_t, int32_t>(x, to, [](int32_t v) { return v; });
      case DType::boolean:
        return map1<int32_t, uint8_t>(x, to, [](int32_t v) -> uint8_t { return v != 0; });
      case DType::f32:
        return map1<int32_t, float>(x, to, [](int32_t v) { return static_cast<float>(v); });
      case DType::f16:
        return map1<int32_t, uint16_t>(x, to, [](int32_t v) { return f32_to_f16(static_cast<float>(v)); });
      case DType::bf16:
        return map1<int32_t, uint16_t>(x, to, [](int32_t v) { return f32_to_bf16(static_cast<float>(v)); });
    }
  }
  auto f = [from](In v) { return load_f<In>(v, from); };
  switch (to) {
    case DType::f32:
      return map1<In, float>(x, to, [f](In v) { return f(v); });
    case DType::i32:
      return map1<In, int32_t>(x, to, [f](In v) { return f_to_i32(f(v)); });
    case DType::boolean:
      return map1<In, uint8_t>(x, to, [f](In v) -> uint8_t { return f(v) != 0.0f; });
    case DType::f16:
      return map1<In, uint16_t>(x, to, [f](In v) { return f32_to_f16(f(v)); });
    case DType::bf16:
      return map1<In, uint16_t>(x, to, [f](In v) { return f32_to_bf16(f(v)); });
  }
  throw InternalError("[reference] bad cast");
}

template <class T, class F>
View reduce_impl(const View& x, int axis, T init, F f) {
  const size_t a = static_cast<size_t>(axis);
  std::vector<int64_t> oshape = x.shape, istr = x.strides;
  oshape.erase(oshape.begin() + axis);
  istr.erase(istr.begin() + axis);
  const int64_t K = x.shape[a], ks = x.strides[a];
  std::byte* data = nullptr;
  View out = allocate(x.dtype, oshape, &data);
  T* o = reinterpret_cast<T*>(data);
  const T* p = ptr<T>(x);
  // Each output element accumulates k = 0, 1, ..., K-1 in order; the loop order only
  // chooses which way memory is walked.
  for_each_row<2>(oshape, {&istr, &out.strides}, {x.offset, 0},
                  [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& s) {
                    const T* in = p + off[0];
                    T* q = o + off[1];
                    if (ks == 1 || n == 1) {
                      for (int64_t j = 0; j < n; ++j) {
                        T acc = init;
                        const T* r = in + j * s[0];
                        for (int64_t k = 0; k < K; ++k) acc = f(acc, r[k * ks]);
                        q[j * s[1]] = acc;
                      }
                    } else {
                      for (int64_t j = 0; j < n; ++j) q[j * s[1]] = init;
                      for (int64_t k = 0; k < K; ++k) {
                        const T* r = in + k * ks;
                        if (s[0] == 1 && s[1] == 1) {
                          for (int64_t j = 0; j < n; ++j) q[j] = f(q[j], r[j]);
                        } else {
                          for (int64_t j = 0; j < n; ++j) q[j * s[1]] = f(q[j * s[1]], r[j * s[0]]);
                        }
                      }
                    }
                  });
  return out;
}

}  // namespace

View sum_of_products(const View& a, const View& b, int axis) {
  const size_t ax = static_cast<size_t>(axis);
  std::vector<int64_t> oshape = a.shape, sa = a.strides, sb = b.strides;
  oshape.erase(oshape.begin() + axis);
  sa.erase(sa.begin() + axis);
  sb.erase(sb.begin() + axis);
  const int64_t K = a.shape[ax], ka = a.strides[ax], kb = b.strides[ax];
  std::byte* data = nullptr;
  View out = allocate(DType::f32, oshape, &data);
  float* o = reinterpret_cast<float*>(data);
  const float* pa = ptr<float>(a);
  const float* pb = ptr<float>(b);
  for_each_row<3>(oshape, {&sa, &sb, &out.strides}, {a.offset, b.offset, 0},
                  [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& s) {
                    const float* x = pa + off[0];
                    const float* y = pb + off[1];
                    float* q = o + off[2];
                    if ((ka == 1 && kb == 1) || n == 1) {
                      // Dot products along the contiguous reduction axis.
                      for (int64_t j = 0; j < n; ++j) {
                        const float* xr = x + j * s[0];
                        const float* yr = y + j * s[1];
                        float acc = 0.0f;
                        for (int64_t k = 0; k < K; ++k) {
                          const float p = xr[k * ka] * yr[k * kb];
                          acc += p;
                        }
                        q[j * s[2]] = acc;
                      }
                      return;
                    }
                    // Walk k outside, the row inside: rank-1 updates over contiguous rows.
                    for (int64_t j = 0; j < n; ++j) q[j * s[2]] = 0.0f;
                    for (int64_t k = 0; k < K; ++k) {
                      const float* xr = x + k * ka;
                      const float* yr = y + k * kb;
                      if (s[2] == 1 && s[0] == 0 && s[1] == 1) {
                        const float xv = xr[0];
                        for (int64_t j = 0; j < n; ++j) q[j] += xv * yr[j];
                      } else if (s[2] == 1 && s[0] == 1 && s[1] == 0) {
                        const float yv = yr[0];
                        for (int64_t j = 0; j < n; ++j) q[j] += xr[j] * yv;
                      } else {
                        for (int64_t j = 0; j < n; ++j) q[j * s[2]] += xr[j * s[0]] * yr[j * s[1]];
                      }
                    }
                  });
  return out;
}

View unary(PrimOp op, const View& x) {
  if (x.dtype == DType::i32) {
    if (op == PrimOp::Neg)
      return map1<int32_t, int32_t>(x, x.dtype, [](int32_t v) { return wrap_mul(v, -1); });
    throw InternalError("[reference] unary op on i32");
  }
  switch (op) {  // one instantiation per op, so unary_f32's switch folds away
#define LUMINAL_REFERENCE_UNARY(e, ...) \
  case PrimOp::e:                       \
    return map1<float, float>(x, x.dtype, [](float v) { return unary_f32(PrimOp::e, v); });
    LUMINAL_PRIM_UNARY_OPS(LUMINAL_REFERENCE_UNARY)
#undef LUMINAL_REFERENCE_UNARY
    default:
      break;
  }
  throw InternalError("[reference] not a unary op");
}

View natural_exp(const View& x, double k) {
  return map1<float, float>(x, x.dtype, [k](float v) { return static_cast<float>(std::exp(k * static_cast<double>(v))); });
}

View binary(PrimOp op, const View& a, const View& b) {
  const DType t = a.dtype;
  if (t == DType::f32) {
    switch (op) {
      case PrimOp::Add:
        return map2<float, float>(a, b, t, [](float x, float y) { return x + y; });
      case PrimOp::Mul:
        return map2<float, float>(a, b, t, [](float x, float y) { return x * y; });
      case PrimOp::Mod:
        return map2<float, float>(a, b, t, [](float x, float y) { return std::fmod(x, y); });
      case PrimOp::Max:
        return map2<float, float>(a, b, t, fmax_nan);
      case PrimOp::LessThan:
        return map2<float, uint8_t>(a, b, DType::boolean, [](float x, float y) -> uint8_t { return x < y; });
      case PrimOp::Equal:
        return map2<float, uint8_t>(a, b, DType::boolean, [](float x, float y) -> uint8_t { return x == y; });
      default:
        break;
    }
  } else if (t == DType::i32) {
    switch (op) {
      case PrimOp::Add:
        return map2<int32_t, int32_t>(a, b, t, wrap_add);
      case PrimOp::Mul:
        return map2<int32_t, int32_t>(a, b, t, wrap_mul);
      case PrimOp::Mod:
        return map2<int32_t, int32_t>(a, b, t, int_mod);
      case PrimOp::Max:
        return map2<int32_t, int32_t>(a, b, t, [](int32_t x, int32_t y) { return x > y ? x : y; });
      case PrimOp::LessThan:
        return map2<int32_t, uint8_t>(a, b, DType::boolean,
                                      [](int32_t x, int32_t y) -> uint8_t { return x < y; });
      case PrimOp::Equal:
        return map2<int32_t, uint8_t>(a, b, DType::boolean,
                                      [](int32_t x, int32_t y) -> uint8_t { return x == y; });
      default:
        break;
    }
  } else if (t == DType::boolean) {
    switch (op) {
      case PrimOp::Mul:
        return map2<uint8_t, uint8_t>(a, b, t, [](uint8_t x, uint8_t y) -> uint8_t { return x && y; });
      case PrimOp::Max:
        return map2<uint8_t, uint8_t>(a, b, t, [](uint8_t x, uint8_t y) -> uint8_t { return x || y; });
      case PrimOp::Equal:
        return map2<uint8_t, uint8_t>(a, b, t, [](uint8_t x, uint8_t y) -> uint8_t { return x == y; });
      default:
        break;
    }
  }
  throw InternalError("[reference] binary op " + std::string(prim_name(op)) + " on " +
                      std::string(dtype_name(t)));
}

View where(const View& c, const View& a, const View& b) {
  std::byte* data = nullptr;
  View out = allocate(a.dtype, a.shape, &data);
  const size_t es = dtype_size(a.dtype);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* o = reinterpret_cast<T*>(data);
    const uint8_t* pc = ptr<uint8_t>(c);
    const T* pa = ptr<T>(a);
    const T* pb = ptr<T>(b);
    for_each_row<4>(a.shape, {&c.strides, &a.strides, &b.strides, &out.strides},
                    {c.offset, a.offset, b.offset, 0},
                    [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& s) {
                      const uint8_t* cc = pc + off[0];
                      const T* aa = pa + off[1];
                      const T* bb = pb + off[2];
                      T* q = o + off[3];
                      for (int64_t i = 0; i < n; ++i)
                        q[i * s[3]] = cc[i * s[0]] ? aa[i * s[1]] : bb[i * s[2]];
                    });
  };
  if (es == 4)
    run(uint32_t{});
  else if (es == 2)
    run(uint16_t{});
  else
    run(uint8_t{});
  return out;
}

View cast(const View& x, DType to) {
  switch (dtype_size(x.dtype)) {
    case 4:
      return x.dtype == DType::i32 ? cast_from<int32_t>(x, to) : cast_from<float>(x, to);
    case 2:
      return cast_from<uint16_t>(x, to);
    default:
      return cast_from<uint8_t>(x, to);
  }
}

View reduce(PrimOp op, const View& x, int axis) {
  if (x.dtype == DType::f32) {
    if (op == PrimOp::SumReduce)
      return reduce_impl<float>(x, axis, 0.0f, [](float a, float v) { return a + v; });
    return reduce_impl<float>(x, axis, -std::numeric_limits<float>::infinity(), fmax_nan);
  }
  if (x.dtype == DType::i32) {
    if (op == PrimOp::SumReduce) return reduce_impl<int32_t>(x, axis, 0, wrap_add);
    return reduce_impl<int32_t>(x, axis, std::numeric_limits<int32_t>::min(),
                                [](int32_t a, int32_t v) { return a > v ? a : v; });
  }
  throw InternalError("[reference] reduce on " + std::string(dtype_name(x.dtype)));
}

View gather(const View& table0, const View& ids0, const std::string& op_name, Stats& stats) {
  const View table = contiguous(table0, stats);
  const View ids = contiguous(ids0, stats);
  std::vector<int64_t> shape = ids.shape;
  shape.insert(shape.end(), table.shape.begin() + 1, table.shape.end());
  std::byte* data = nullptr;
  View out = allocate(table.dtype, shape, &data);
  const int64_t V = table.shape[0];
  const size_t row = static_cast<size_t>(V > 0 ? table.numel() / V : 0) * dtype_size(table.dtype);
  const int32_t* id = ptr<int32_t>(ids) + ids.offset;
  const std::byte* src = table.base + table.offset * static_cast<int64_t>(dtype_size(table.dtype));
  const int64_t n = ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (id[i] < 0 || id[i] >= V) throw RuntimeError(kernel::gather_id_error(op_name, id[i], i, V));
    if (row) std::memcpy(data + static_cast<size_t>(i) * row, src + static_cast<size_t>(id[i]) * row, row);
  }
  return out;
}

View iota(int64_t n) {
  std::byte* data = nullptr;
  View out = allocate(DType::i32, {n}, &data);
  int32_t* o = reinterpret_cast<int32_t*>(data);
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<int32_t>(i);
  return out;
}

View constant(double value, DType dtype) {
  std::byte* data = nullptr;
  View out = allocate(dtype, {}, &data);
  store_scalar(dtype, value, data);
  return out;
}

}  // namespace luminal::detail::reference
