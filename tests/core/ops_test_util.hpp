// Helpers for the high-level op tests: run a graph through the reference interpreter and
// compare against hand-computed values.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <luminal/luminal.hpp>

namespace ops_test {

namespace lm = luminal;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// Marks y as the output "y", compiles for the reference target and runs it.
inline lm::HostTensor eval(lm::Graph& g, const lm::Tensor& y,
                           const std::map<std::string, lm::HostTensor>& in = {}) {
  g.output("y", y);
  lm::Callable fn = lm::compile(g, lm::Target::reference());
  return fn(in).at("y");
}

inline lm::HostTensor f32(std::vector<float> v, std::vector<int64_t> shape) {
  return lm::HostTensor::from(v, std::move(shape));
}
inline lm::HostTensor i32(std::vector<int32_t> v, std::vector<int64_t> shape) {
  return lm::HostTensor::from(v, std::move(shape));
}

/// Every element within abs + rel * |expected|; NaN matches NaN, inf matches inf.
inline void check_close(const std::vector<float>& got, const std::vector<double>& want, double abs_tol = 0,
                        double rel_tol = 0) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(static_cast<double>(got[i]) == want[i]);
    } else {
      CHECK(std::abs(static_cast<double>(got[i]) - want[i]) <= abs_tol + rel_tol * std::abs(want[i]));
    }
  }
}

inline void check_exact(const lm::HostTensor& t, const std::vector<double>& want) {
  check_close(t.to_f32(), want);
}

}  // namespace ops_test
