// luminal::Loc, the call site every op and graph method records for its error messages
// ("[matmul] ... (at your_file.cpp:42)"), filled in as a default argument at the caller's
// line. One type on every compiler, not std::source_location: clang before 15 with
// libstdc++ (clang 14 on Debian 12) has no std::source_location, and a type that differed
// by compiler would give the library's functions different symbols for a GCC-built
// library and a clang-built program. A std::source_location converts to it.
#pragma once

#include <cstdint>

#if __has_include(<source_location>)
#include <source_location>
#endif

namespace luminal {

class Loc {
 public:
  /// The location of the call whose default argument this is.
  static constexpr Loc current(const char* file = __builtin_FILE(),
                               const char* function = __builtin_FUNCTION(),
                               std::uint_least32_t line = __builtin_LINE()) noexcept {
    return Loc(file, function, line);
  }
  constexpr Loc() noexcept = default;
  constexpr Loc(const char* file, const char* function, std::uint_least32_t line) noexcept
      : file_(file), function_(function), line_(line) {}
#if defined(__cpp_lib_source_location)
  constexpr Loc(const std::source_location& s) noexcept  // NOLINT: implicit, as the standard type
      : file_(s.file_name()), function_(s.function_name()), line_(s.line()) {}
#endif

  constexpr std::uint_least32_t line() const noexcept { return line_; }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  std::uint_least32_t line_ = 0;
};

}  // namespace luminal
