// Host memory with a dtype and a concrete shape: what a Callable takes and returns.
// A HostTensor owns its bytes (copying it copies them), or -- made with view() -- points
// at the caller's memory without copying (the caller keeps that memory alive, or hands
// the view an owner that keeps it alive: a file mapping, see load_safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "luminal/dtype.hpp"
#include "luminal/error.hpp"

namespace luminal {

class HostTensor {
 public:
  /// An empty f32 tensor of shape {0}.
  HostTensor() : HostTensor(DType::f32, {0}) {}
  /// Zero-filled.
  HostTensor(DType dtype, std::vector<int64_t> shape);
  /// Copying an owning tensor copies its bytes; copying a view copies the pointer (and
  /// shares the view's owner, if any).
  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;

  static HostTensor from(std::span<const float> values, std::vector<int64_t> shape);
  static HostTensor from(std::span<const int32_t> values, std::vector<int64_t> shape);
  static HostTensor from(std::span<const bool> values, std::vector<int64_t> shape);
  static HostTensor from(const std::vector<float>& values, std::vector<int64_t> shape) {
    return from(std::span<const float>(values), std::move(shape));
  }
  static HostTensor from(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
    return from(std::span<const int32_t>(values), std::move(shape));
  }
  static HostTensor from(const std::vector<bool>& values, std::vector<int64_t> shape);
  /// f32 values stored as `dtype`: rounded to nearest even for f16/bf16, truncated
  /// toward zero for i32, x != 0 for bool.
  static HostTensor from_f32(std::span<const float> values, std::vector<int64_t> shape, DType dtype);
  static HostTensor from_f32(const std::vector<float>& values, std::vector<int64_t> shape, DType dtype) {
    return from_f32(std::span<const float>(values), std::move(shape), dtype);
  }
  /// Raw element bits: f16/bf16 as uint16_t, f32 as float, i32 as int32_t, bool as 0/1 bytes.
  static HostTensor from_bytes(DType dtype, std::vector<int64_t> shape, std::span<const std::byte> bytes);
  /// A non-owning, read-only view of `data` (nbytes = numel * dtype_size); no copy is
  /// made.
  static HostTensor view(DType dtype, std::vector<int64_t> shape, const void* data);
  /// A non-owning, writable view: Callable::run writes outputs into such memory in place.
  static HostTensor view(DType dtype, std::vector<int64_t> shape, void* data);
  /// A read-only view that keeps `owner` alive while it or any copy of it lives (a
  /// mapped file: load_safetensors). Callable::bind keeps such a view without copying.
  static HostTensor view(DType dtype, std::vector<int64_t> shape, const void* data,
                         std::shared_ptr<const void> owner);
  /// An owning, writable tensor over `storage` (at least nbytes(), aligned for the
  /// dtype), whose deleter decides where the memory goes when the last reference to it
  /// is dropped (the runtime recycles output storage this way). Copies are deep.
  static HostTensor adopt(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte> storage);

  const std::vector<int64_t>& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_view() const { return external_ != nullptr && !adopted_; }
  /// A view whose memory is kept alive by an owner (view(..., owner)).
  bool has_owner() const { return is_view() && keep_ != nullptr; }
  /// Owning tensors and writable views.
  bool is_writable() const { return external_ == nullptr || writable_; }

  /// The elements; T must match the dtype (float: f32, int32_t: i32, bool: boolean,
  /// uint16_t: f16 or bf16 bits), else DTypeError.
  template <class T>
  std::span<const T> values() const {
    check_type<T>();
    return {reinterpret_cast<const T*>(data()), static_cast<size_t>(numel())};
  }
  /// Writable elements of an owning tensor or a writable view (else Error).
  template <class T>
  std::span<T> mutable_values() {
    check_type<T>();
    return {reinterpret_cast<T*>(mutable_data()), static_cast<size_t>(numel())};
  }
  /// Every element converted to float (f16/bf16 exactly, i32 rounded, bool 0/1).
  std::vector<float> to_f32() const;

  /// Raw bytes, row-major, contiguous.
  const std::byte* data() const { return external_ ? external_ : bytes_.data(); }
  std::byte* mutable_data();

 private:
  template <class T>
  void check_type() const {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, uint16_t>,
                  "HostTensor::values<T>: T must be float, int32_t, bool or uint16_t");
    bool ok;
    if constexpr (std::is_same_v<T, float>)
      ok = dtype_ == DType::f32;
    else if constexpr (std::is_same_v<T, int32_t>)
      ok = dtype_ == DType::i32;
    else if constexpr (std::is_same_v<T, bool>)
      ok = dtype_ == DType::boolean;
    else
      ok = dtype_ == DType::f16 || dtype_ == DType::bf16;
    if (!ok) type_mismatch(type_name<T>());
  }
  template <class T>
  static const char* type_name() {
    if constexpr (std::is_same_v<T, float>)
      return "float";
    else if constexpr (std::is_same_v<T, int32_t>)
      return "int32_t";
    else if constexpr (std::is_same_v<T, bool>)
      return "bool";
    else
      return "uint16_t";
  }
  [[noreturn]] void type_mismatch(const char* requested) const;

  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_;
  std::vector<std::byte> bytes_;
  const std::byte* external_ = nullptr;
  bool writable_ = false;  // external_ came from a non-const pointer
  std::shared_ptr<const void> keep_;  // keeps external_ alive (view owner or adopted storage)
  bool adopted_ = false;              // external_ is owned storage (adopt): copies are deep
};

}  // namespace luminal
