// Helpers for the core tests: run a graph on the reference interpreter directly (the
// semantics), independent of what compile() does for a target.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backends/reference/interpreter.hpp"
#include "graph/primitives.hpp"
#include "luminal/luminal.hpp"
#include "runtime/executable.hpp"

namespace luminal::test {

/// Validates the call like a Callable (dims bound from shapes, guards) and interprets.
inline std::map<std::string, HostTensor> run(const Graph& g, const std::map<std::string, HostTensor>& in) {
  const DimBindings dims = detail::validate_call(*g.impl(), in, {});
  std::map<std::string, const HostTensor*> t;
  for (const auto& [k, v] : in) t[k] = &v;
  return detail::reference::run(*g.impl(), dims, t);
}

/// The single output of `g`.
inline HostTensor run1(const Graph& g, const std::map<std::string, HostTensor>& in) {
  auto out = run(g, in);
  return out.begin()->second;
}

inline std::vector<float> f32(const HostTensor& t) { return t.to_f32(); }

}  // namespace luminal::test
