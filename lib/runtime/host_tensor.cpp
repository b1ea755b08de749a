// HostTensor construction and conversion.
#include "luminal/host_tensor.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "runtime/half.hpp"

namespace luminal {

using namespace detail;

namespace {
std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + ")";
}

// Largest byte count a tensor may have: 2^48 bytes (256 TiB) is beyond any host's
// address space, and keeps every later sum of sizes far from wrapping.
constexpr int64_t kMaxBytes = int64_t{1} << 48;

// Element count of `shape`, checked so that its byte size (numel * dtype size, the
// figure every allocation and kernel uses) is representable: 2^62 f32 elements would
// otherwise wrap to 0 bytes and a kernel would write through an empty buffer.
int64_t count(const std::vector<int64_t>& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw RuntimeError("[HostTensor] shape " + shape_text(shape) + " has a negative dim");
    if (__builtin_mul_overflow(n, d, &n))
      throw RuntimeError("[HostTensor] shape " + shape_text(shape) + " has more than 2^63 elements");
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes) || bytes > kMaxBytes)
    throw RuntimeError("[HostTensor] shape " + shape_text(shape) + " of " + std::string(dtype_name(dtype)) +
                       " is too large (" + std::to_string(n) + " elements; at most " +
                       std::to_string(kMaxBytes) + " bytes)");
  return n;
}

void check_count(size_t got, const std::vector<int64_t>& shape) {
  const int64_t n = count(shape, DType::boolean);
  if (static_cast<int64_t>(got) != n)
    throw RuntimeError("[HostTensor] " + std::to_string(got) + " values do not fill shape " +
                       shape_text(shape) + " (" + std::to_string(n) + " elements)");
}

int32_t f32_to_i32(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (v <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(v);
}
}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  const size_t bytes = static_cast<size_t>(count(shape_, dtype_)) * dtype_size(dtype_);
  try {
    bytes_.assign(bytes, std::byte{0});
  } catch (const std::exception&) {  // bad_alloc / length_error: the caller's size, not our bug
    throw RuntimeError("[HostTensor] cannot allocate " + std::to_string(bytes) + " bytes for shape " +
                       shape_text(shape_) + " of " + std::string(dtype_name(dtype_)));
  }
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

HostTensor HostTensor::from(std::span<const float> values, std::vector<int64_t> shape) {
  check_count(values.size(), shape);
  HostTensor t(DType::f32, std::move(shape));
  if (!values.empty()) std::memcpy(t.bytes_.data(), values.data(), values.size_bytes());
  return t;
}

HostTensor HostTensor::from(std::span<const int32_t> values, std::vector<int64_t> shape) {
  check_count(values.size(), shape);
  HostTensor t(DType::i32, std::move(shape));
  if (!values.empty()) std::memcpy(t.bytes_.data(), values.data(), values.size_bytes());
  return t;
}

HostTensor HostTensor::from(std::span<const bool> values, std::vector<int64_t> shape) {
  check_count(values.size(), shape);
  HostTensor t(DType::boolean, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.bytes_[i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
  return t;
}

HostTensor HostTensor::from(const std::vector<bool>& values, std::vector<int64_t> shape) {
  check_count(values.size(), shape);
  HostTensor t(DType::boolean, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.bytes_[i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
  return t;
}

HostTensor HostTensor::from_f32(std::span<const float> values, std::vector<int64_t> shape, DType dtype) {
  check_count(values.size(), shape);
  HostTensor t(dtype, std::move(shape));
  std::byte* out = t.bytes_.data();
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    switch (dtype) {
      case DType::f32:
        std::memcpy(out + 4 * i, &v, 4);
        break;
      case DType::i32: {
        const int32_t x = f32_to_i32(v);
        std::memcpy(out + 4 * i, &x, 4);
        break;
      }
      case DType::f16: {
        const uint16_t h = f32_to_f16(v);
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::bf16: {
        const uint16_t h = f32_to_bf16(v);
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::boolean:
        out[i] = std::byte{v != 0.0f ? uint8_t{1} : uint8_t{0}};
        break;
    }
  }
  return t;
}

HostTensor HostTensor::from_bytes(DType dtype, std::vector<int64_t> shape, std::span<const std::byte> bytes) {
  // Checked before allocating: a corrupt shape (a crafted saved program) must not first
  // allocate and zero what it claims (found by fuzz_aot_load: 128 GiB).
  const size_t need = static_cast<size_t>(count(shape, dtype)) * dtype_size(dtype);
  if (bytes.size() != need)
    throw RuntimeError("[HostTensor] " + std::to_string(bytes.size()) + " bytes for shape " +
                       shape_text(shape) + " of " + std::string(dtype_name(dtype)) + " (needs " +
                       std::to_string(need) + ")");
  HostTensor t(dtype, std::move(shape));
  if (!bytes.empty()) std::memcpy(t.bytes_.data(), bytes.data(), bytes.size());
  return t;
}

HostTensor HostTensor::view(DType dtype, std::vector<int64_t> shape, const void* data) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.bytes_.clear();
  const int64_t n = count(t.shape_, dtype);
  if (data == nullptr && n > 0)
    throw RuntimeError("[HostTensor] view of a null pointer with shape " + shape_text(t.shape_));
  static const std::byte empty[8] = {};
  t.external_ = data ? static_cast<const std::byte*>(data) : empty;
  return t;
}

HostTensor::HostTensor(const HostTensor& o)
    : dtype_(o.dtype_), shape_(o.shape_), external_(o.external_), writable_(o.writable_), keep_(o.keep_) {
  if (o.adopted_) {
    // Owning semantics: the copy gets its own bytes, not a share of recycled storage.
    external_ = nullptr;
    writable_ = false;
    keep_.reset();
    bytes_.assign(o.data(), o.data() + o.nbytes());
  } else {
    bytes_ = o.bytes_;
  }
}

HostTensor& HostTensor::operator=(const HostTensor& o) {
  if (this != &o) {
    HostTensor copy(o);
    *this = std::move(copy);
  }
  return *this;
}

HostTensor HostTensor::view(DType dtype, std::vector<int64_t> shape, const void* data,
                            std::shared_ptr<const void> owner) {
  HostTensor t = view(dtype, std::move(shape), data);
  t.keep_ = std::move(owner);
  return t;
}

HostTensor HostTensor::adopt(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte> storage) {
  const int64_t n = count(shape, dtype);
  if (!storage && n > 0)
    throw RuntimeError("[HostTensor] adopt of null storage with shape " + shape_text(shape));
  HostTensor t = view(dtype, std::move(shape), static_cast<void*>(storage.get()));
  t.writable_ = true;
  t.adopted_ = true;
  t.keep_ = std::move(storage);
  return t;
}

HostTensor HostTensor::view(DType dtype, std::vector<int64_t> shape, void* data) {
  HostTensor t = view(dtype, std::move(shape), static_cast<const void*>(data));
  t.writable_ = data != nullptr;
  return t;
}

std::byte* HostTensor::mutable_data() {
  if (external_ && !writable_) throw Error("[HostTensor] this view of caller memory is read-only");
  // The pointer came from the caller as non-const (view(dtype, shape, void*)).
  return external_ ? const_cast<std::byte*>(external_) : bytes_.data();
}

std::vector<float> HostTensor::to_f32() const {
  const size_t n = static_cast<size_t>(numel());
  std::vector<float> out(n);
  const std::byte* p = data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype_) {
      case DType::f32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case DType::i32: {
        int32_t x;
        std::memcpy(&x, p + 4 * i, 4);
        out[i] = static_cast<float>(x);
        break;
      }
      case DType::f16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = f16_to_f32(h);
        break;
      }
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = bf16_to_f32(h);
        break;
      }
      case DType::boolean:
        out[i] = p[i] != std::byte{0} ? 1.0f : 0.0f;
        break;
    }
  }
  return out;
}

void HostTensor::type_mismatch(const char* requested) const {
  throw DTypeError(std::string("[HostTensor] values<") + requested + ">() of a " +
                   std::string(dtype_name(dtype_)) + " tensor of shape " + shape_text(shape_));
}

}  // namespace luminal
