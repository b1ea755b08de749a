// View construction (index-map rewrites) and materialization.
#include "backends/reference/view.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/reference/loops.hpp"
#include "luminal/error.hpp"
#include "runtime/half.hpp"

namespace luminal::detail::reference {

int64_t View::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool View::contiguous() const {
  if (masked()) return false;
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= shape[i];
  }
  return s;
}

View allocate(DType dtype, const std::vector<int64_t>& shape, std::byte** data) {
  View v;
  v.dtype = dtype;
  v.shape = shape;
  v.strides = row_major_strides(shape);
  const size_t bytes = static_cast<size_t>(v.numel()) * dtype_size(dtype);
  std::shared_ptr<std::byte[]> buf(new std::byte[bytes > 0 ? bytes : 1]);
  *data = buf.get();
  v.base = buf.get();
  v.owner = std::move(buf);
  return v;
}

void store_scalar(DType dtype, double value, std::byte* out) {
  switch (dtype) {
    case DType::f32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, 4);
      break;
    }
    case DType::i32: {
      int32_t x = 0;
      if (!std::isnan(value))
        x = value >= 2147483647.0    ? std::numeric_limits<int32_t>::max()
            : value <= -2147483648.0 ? std::numeric_limits<int32_t>::min()
                                     : static_cast<int32_t>(value);
      std::memcpy(out, &x, 4);
      break;
    }
    case DType::f16: {
      const uint16_t h = f32_to_f16(static_cast<float>(value));
      std::memcpy(out, &h, 2);
      break;
    }
    case DType::bf16: {
      const uint16_t h = f32_to_bf16(static_cast<float>(value));
      std::memcpy(out, &h, 2);
      break;
    }
    case DType::boolean:
      *out = std::byte{value != 0 ? uint8_t{1} : uint8_t{0}};
      break;
  }
}

double load_scalar(DType dtype, const std::byte* in) {
  switch (dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, in, 4);
      return f;
    }
    case DType::i32: {
      int32_t x;
      std::memcpy(&x, in, 4);
      return x;
    }
    case DType::boolean:
      return static_cast<uint8_t>(*in) != 0;
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      return f16_to_f32(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      return bf16_to_f32(h);
    }
  }
  return 0;
}

double storage_element(const View& v, int64_t i) {
  return load_scalar(v.dtype, v.base + (v.offset + i) * static_cast<int64_t>(dtype_size(v.dtype)));
}

namespace {

template <class T>
void copy_rows(const View& v, T* out) {
  const T* src = reinterpret_cast<const T*>(v.base);
  const std::vector<int64_t> ostrides = row_major_strides(v.shape);
  for_each_row<2>(v.shape, {&v.strides, &ostrides}, {v.offset, 0},
                  [&](const std::array<int64_t, 2>& o, int64_t n, const std::array<int64_t, 2>& s) {
                    const T* p = src + o[0];
                    T* q = out + o[1];
                    if (s[0] == 1 && s[1] == 1) {
                      std::memcpy(q, p, static_cast<size_t>(n) * sizeof(T));
                    } else {
                      for (int64_t i = 0; i < n; ++i) q[i * s[1]] = p[i * s[0]];
                    }
                  });
}

// Masked copy: per row, the real elements form one range [lo, hi) of the inner axis.
template <class T>
void copy_masked(const View& v, T* out) {
  T padv;
  store_scalar(v.dtype, v.pad, reinterpret_cast<std::byte*>(&padv));
  const T* src = reinterpret_cast<const T*>(v.base);
  const size_t nd = v.shape.size();
  if (v.numel() == 0) return;
  if (nd == 0) {
    *out = src[v.offset];
    return;
  }
  const int64_t n = v.shape[nd - 1];
  const int64_t lo = std::max<int64_t>(0, v.mlo[nd - 1]), hi = std::min(n, v.mhi[nd - 1]);
  std::vector<int64_t> idx(nd, 0);
  T* q = out;
  while (true) {
    bool real = true;
    int64_t off = v.offset;
    for (size_t d = 0; d + 1 < nd; ++d) {
      real = real && idx[d] >= v.mlo[d] && idx[d] < v.mhi[d];
      off += idx[d] * v.strides[d];
    }
    const int64_t s = v.strides[nd - 1];
    for (int64_t i = 0; i < n; ++i) q[i] = padv;
    if (real)
      for (int64_t i = lo; i < hi; ++i) q[i] = src[off + i * s];
    q += n;
    size_t d = nd - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
}

template <class T>
void copy_any(const View& v, std::byte* out) {
  if (v.masked()) {
    copy_masked<T>(v, reinterpret_cast<T*>(out));
  } else {
    copy_rows<T>(v, reinterpret_cast<T*>(out));
  }
}

}  // namespace

void copy_out(const View& v, std::byte* out) {
  switch (dtype_size(v.dtype)) {
    case 1:
      copy_any<uint8_t>(v, out);
      break;
    case 2:
      copy_any<uint16_t>(v, out);
      break;
    case 4:
      copy_any<uint32_t>(v, out);
      break;
    default:
      throw InternalError("[reference] unexpected element size");
  }
}

View contiguous(const View& v, Stats& stats) {
  if (v.contiguous()) return v;
  std::byte* data = nullptr;
  View out = allocate(v.dtype, v.shape, &data);
  copy_out(v, data);
  stats.copies += 1;
  stats.bytes_copied += v.numel() * static_cast<int64_t>(dtype_size(v.dtype));
  return out;
}

View unmasked(const View& v, Stats& stats) { return v.masked() ? contiguous(v, stats) : v; }

View reshape_view(const View& v0, const std::vector<int64_t>& shape, Stats& stats) {
  View v = unmasked(v0, stats);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != v.numel()) throw InternalError("[reference] reshape changes the element count");
  // Try to express the new shape with strides over the old map: group old and new axes
  // into runs with equal element counts; a run maps without copy when its old axes are
  // mutually contiguous (size-1 axes ignored).
  std::vector<int64_t> os, ost;
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (v.shape[i] != 1) {
      os.push_back(v.shape[i]);
      ost.push_back(v.strides[i]);
    }
  std::vector<int64_t> ns(shape.size(), 0);
  bool ok = true;
  size_t oi = 0, ni = 0;
  if (n != 0) {
    while (ni < shape.size() && ok) {
      if (shape[ni] == 1) {
        ns[ni] = 1;
        ++ni;
        continue;
      }
      // One run: old axes [oi, oj) and new axes [ni, nj) with equal products.
      if (oi >= os.size()) {
        ok = false;
        break;
      }
      size_t oj = oi + 1, nj = ni + 1;
      int64_t op = os[oi], np = shape[ni];
      while (op != np && ok) {
        if (op < np) {
          if (oj >= os.size())
            ok = false;
          else
            op *= os[oj++];
        } else {
          if (nj >= shape.size())
            ok = false;
          else
            np *= shape[nj++];
        }
      }
      if (!ok) break;
      for (size_t k = oi; k + 1 < oj; ++k)
        if (ost[k] != ost[k + 1] * os[k + 1]) ok = false;
      if (!ok) break;
      int64_t stride = ost[oj - 1];
      for (size_t k = nj; k-- > ni;) {
        ns[k] = stride;
        stride *= shape[k];
      }
      oi = oj;
      ni = nj;
    }
  }
  View out;
  if (ok && n != 0) {
    out = v;
    out.shape = shape;
    out.strides = ns;
    return out;
  }
  out = contiguous(v, stats);
  out.shape = shape;
  out.strides = row_major_strides(shape);
  return out;
}

View permute_view(const View& v, const std::vector<int>& perm) {
  View out = v;
  for (size_t i = 0; i < perm.size(); ++i) {
    const size_t p = static_cast<size_t>(perm[i]);
    out.shape[i] = v.shape[p];
    out.strides[i] = v.strides[p];
    if (v.masked()) {
      out.mlo[i] = v.mlo[p];
      out.mhi[i] = v.mhi[p];
    }
  }
  return out;
}

View expand_view(const View& v, const std::vector<int64_t>& shape) {
  View out = v;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (v.shape[i] == shape[i]) continue;
    if (v.shape[i] != 1) throw InternalError("[reference] expand of a dim that is not 1");
    out.shape[i] = shape[i];
    out.strides[i] = 0;
    if (v.masked()) {
      const bool real = v.mlo[i] <= 0 && v.mhi[i] >= 1;
      out.mlo[i] = 0;
      out.mhi[i] = real ? shape[i] : 0;
    }
  }
  return out;
}

View slice_view(const View& v, int axis, int64_t start, int64_t end, int64_t step) {
  View out = v;
  const size_t a = static_cast<size_t>(axis);
  const int64_t n = end > start ? (end - start + step - 1) / step : 0;
  out.shape[a] = n;
  if (!v.masked() || n == 0) {
    // A masked element may sit outside the buffer: its address is never formed.
    out.offset = v.offset + start * v.strides[a];
    out.strides[a] = v.strides[a] * step;
    if (v.masked()) {
      out.mlo[a] = 0;
      out.mhi[a] = 0;
    }
    return out;
  }
  out.offset = v.offset + start * v.strides[a];
  out.strides[a] = v.strides[a] * step;
  // New index i is old index start + i*step: real iff mlo <= start + i*step < mhi.
  auto ceil_div = [](int64_t x, int64_t y) { return x >= 0 ? (x + y - 1) / y : -((-x) / y); };
  int64_t lo = std::max<int64_t>(0, ceil_div(v.mlo[a] - start, step));
  int64_t hi = std::min<int64_t>(n, ceil_div(v.mhi[a] - start, step));
  if (hi < lo) hi = lo;
  out.mlo[a] = lo;
  out.mhi[a] = hi;
  return out;
}

View pad_view(const View& v0, int axis, int64_t lo, int64_t hi, double value, Stats& stats) {
  const bool same_value = v0.pad == value || (std::isnan(v0.pad) && std::isnan(value));
  View v = (v0.masked() && !same_value) ? contiguous(v0, stats) : v0;
  const size_t a = static_cast<size_t>(axis);
  View out = v;
  if (!v.masked()) {
    out.mlo.assign(v.shape.size(), 0);
    out.mhi = v.shape;
  }
  out.pad = value;
  out.shape[a] = v.shape[a] + lo + hi;
  out.offset = v.offset - lo * v.strides[a];
  out.mlo[a] = out.mlo[a] + lo;
  out.mhi[a] = out.mhi[a] + lo;
  return out;
}

}  // namespace luminal::detail::reference
