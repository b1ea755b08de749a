// Element types. f16 and bf16 are storage types: high-level ops compute in f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace luminal {

enum class DType : uint8_t { f32, f16, bf16, i32, boolean };

inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i32 = DType::i32;
inline constexpr DType boolean = DType::boolean;

/// Bytes of one element as stored in a HostTensor or a device buffer.
constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::boolean:
      return 1;
  }
  return 0;
}

/// "f32", "f16", "bf16", "i32", "bool".
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::boolean:
      return "bool";
  }
  return "?";
}

constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

}  // namespace luminal
