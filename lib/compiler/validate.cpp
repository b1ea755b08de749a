#include "compiler/validate.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/reference/interpreter.hpp"

namespace luminal::compiler {

ValidationResult validate_program(const detail::GraphImpl& g, const detail::Executable& exe, uint64_t seed) {
  DimBindings dims;
  for (const auto& d : g.dims) dims[d.name] = std::min(d.hi, std::max<int64_t>(d.lo, 3));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::map<std::string, HostTensor> data;
  auto fill = [&](uint32_t id) {
    const detail::Node& n = g.nodes[id];
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (const Dim& d : n.shape) {
      shape.push_back(d.evaluate(dims));
      count *= shape.back();
    }
    const auto cnt = static_cast<size_t>(count);
    if (n.dtype == DType::i32) {
      std::vector<int32_t> v(cnt);
      for (auto& x : v) x = static_cast<int32_t>(rng() % 4);
      data.emplace(n.name, HostTensor::from(v, shape));
    } else if (n.dtype == DType::boolean) {
      std::vector<bool> v(cnt);
      for (size_t i = 0; i < cnt; ++i) v[i] = (rng() & 1) != 0;
      data.emplace(n.name, HostTensor::from(v, shape));
    } else {
      std::vector<float> v(cnt);
      for (auto& x : v) x = u(rng);
      data.emplace(n.name, HostTensor::from_f32(v, shape, n.dtype));
    }
  };
  for (uint32_t id : g.inputs) fill(id);
  for (uint32_t id : g.params) fill(id);
  std::map<std::string, const HostTensor*> ptrs;
  for (const auto& [k, t] : data) ptrs.emplace(k, &t);
  auto want = detail::reference::run(g, dims, ptrs);
  auto got = exe.run(dims, ptrs);
  ValidationResult r;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.shape() != w.shape() || it->second.dtype() != w.dtype()) {
      r.ok = false;
      r.message = "output '" + name + "' is missing or has another shape/dtype";
      return r;
    }
    const bool low = w.dtype() == DType::f16 || w.dtype() == DType::bf16;
    const bool exact = w.dtype() == DType::i32 || w.dtype() == DType::boolean;
    const double tol = low ? 1e-2 : 1e-4;
    std::vector<float> x = it->second.to_f32(), y = w.to_f32();
    for (size_t i = 0; i < x.size(); ++i) {
      double err;
      if (std::isnan(y[i]) || std::isinf(y[i]) || exact) {
        const bool same = (std::isnan(x[i]) && std::isnan(y[i])) || x[i] == y[i];
        err = same ? 0 : 1e30;
      } else {
        err = std::abs(double(x[i]) - double(y[i])) / (tol + tol * std::abs(double(y[i])));
      }
      if (err > r.worst) r.worst = err;
      if (err > 1 && r.ok) {
        r.ok = false;
        r.message = "output '" + name + "' element " + std::to_string(i) + ": compiled " +
                    std::to_string(x[i]) + ", interpreter " + std::to_string(y[i]);
      }
    }
  }
  return r;
}

std::function<void(KernelPlan&)>& plan_hook_for_tests() {
  static std::function<void(KernelPlan&)> hook;
  return hook;
}

}  // namespace luminal::compiler
