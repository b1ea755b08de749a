// Error construction shared by the graph core and the high-level ops: every message
// starts with "[op]" and ends with the user's call site.
#pragma once

#include "luminal/source_location.hpp"
#include <string>
#include <string_view>
#include <vector>

#include "luminal/dim.hpp"
#include "luminal/error.hpp"

namespace luminal::detail {

/// "(B, 512)" -- the form used in every shape message.
std::string shape_string(const std::vector<Dim>& shape);

/// "file.cpp:42" of a call site (just the file name, not the whole path).
std::string where_string(const Loc& loc);

/// Throws E with "[op] message (at file.cpp:42)".
template <class E>
[[noreturn]] void fail(std::string_view op, const std::string& message, const Loc& loc) {
  throw E("[" + std::string(op) + "] " + message + " (at " + where_string(loc) + ")");
}

}  // namespace luminal::detail
