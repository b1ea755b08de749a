// Shape and call-site formatting shared by every error message.
#include "graph/diagnostics.hpp"

namespace luminal::detail {

std::string shape_string(const std::vector<Dim>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += shape[i].to_string();
  }
  return s + ")";
}

std::string where_string(const Loc& loc) {
  std::string_view file = loc.file_name() ? loc.file_name() : "?";
  const size_t slash = file.find_last_of("/\\");
  if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
  return std::string(file) + ":" + std::to_string(loc.line());
}

}  // namespace luminal::detail
