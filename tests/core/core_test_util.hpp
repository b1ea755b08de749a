// Helpers for the core tests: run a graph on the reference target.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/primitives.hpp"
#include "luminal/luminal.hpp"

namespace luminal::test {

inline std::map<std::string, HostTensor> run(const Graph& g, const std::map<std::string, HostTensor>& in) {
  return compile(g, Target::reference())(in);
}

/// The single output of `g`.
inline HostTensor run1(const Graph& g, const std::map<std::string, HostTensor>& in) {
  auto out = run(g, in);
  return out.begin()->second;
}

inline std::vector<float> f32(const HostTensor& t) { return t.to_f32(); }

}  // namespace luminal::test
