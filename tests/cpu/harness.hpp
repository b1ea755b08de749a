// Test harness: run a kernel IR program both through the IR evaluator (the oracle) and
// through the C renderer + JIT, on the same random inputs, and compare every output and
// intermediate buffer within a tolerance.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/c_renderer.hpp"
#include "backends/cpu/jit.hpp"
#include "backends/cpu/kernel_call.hpp"
#include "kernel/kernel_eval.hpp"
#include "kernel/kernel_ir.hpp"

namespace cpu_test {

namespace k = luminal::kernel;

/// A buffer of a hand-written kernel program.
inline k::Buffer buf(const std::string& name, luminal::DType dt, k::Index n, k::BufferRole role) {
  return k::Buffer{name, dt, std::move(n), role};
}

struct HostBuffers {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<void*> ptrs() {
    std::vector<void*> p;
    for (auto& b : bytes) p.push_back(b.data());
    return p;
  }
};

inline HostBuffers allocate(const k::Program& p, const std::map<std::string, int64_t>& syms, uint32_t seed,
                            float lo = -2.0f, float hi = 2.0f) {
  HostBuffers hb;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (const auto& b : p.buffers) {
    int64_t n = b.elements.evaluate({}, syms);
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * luminal::dtype_size(b.dtype) + 64, 0);
    if (b.role == k::BufferRole::Input || b.role == k::BufferRole::Param) {
      for (int64_t i = 0; i < n; ++i) {
        float v = d(rng);
        switch (b.dtype) {
          case luminal::DType::f32:
            std::memcpy(bytes.data() + 4 * i, &v, 4);
            break;
          case luminal::DType::f16: {
            uint16_t h = k::f32_to_f16_bits(v);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
            break;
          }
          case luminal::DType::bf16: {
            uint16_t h = k::f32_to_bf16_bits(v);
            std::memcpy(bytes.data() + 2 * i, &h, 2);
            break;
          }
          case luminal::DType::i32: {
            int32_t x = static_cast<int32_t>(std::floor(v * 4));
            std::memcpy(bytes.data() + 4 * i, &x, 4);
            break;
          }
          case luminal::DType::boolean:
            bytes[static_cast<size_t>(i)] = v > 0;
            break;
        }
      }
    }
    hb.bytes.push_back(std::move(bytes));
  }
  return hb;
}

inline double element(const k::Buffer& b, const std::vector<uint8_t>& bytes, int64_t i) {
  switch (b.dtype) {
    case luminal::DType::f32: {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    case luminal::DType::f16: {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      return k::f16_bits_to_f32(h);
    }
    case luminal::DType::bf16: {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      return k::bf16_bits_to_f32(h);
    }
    case luminal::DType::i32: {
      int32_t x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      return x;
    }
    case luminal::DType::boolean:
      return bytes[static_cast<size_t>(i)];
  }
  return 0;
}

/// Renders, compiles and runs `p`; checks every non-input buffer against the evaluator.
/// Returns the rendered source (for tests that inspect it).
inline std::string check_program(const k::Program& p, const std::map<std::string, int64_t>& syms,
                                 double rtol = 2e-5, double atol = 2e-6, uint32_t seed = 42,
                                 luminal::cpu::RenderOptions opt = {}) {
  HostBuffers ref = allocate(p, syms, seed), got = allocate(p, syms, seed);
  k::evaluate(p, ref.ptrs(), syms);
  luminal::cpu::CProgram c = luminal::cpu::render_c(p, opt);
  auto lib = luminal::cpu::Jit::global().compile(c.source);
  std::vector<int64_t> sv;
  for (const auto& s : p.symbols) sv.push_back(syms.at(s));
  auto ptrs = got.ptrs();
  luminal::cpu::run_generated(lib->function<luminal::cpu::KernelFn>(c.entry), ptrs.data(), sv.data());
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const auto& b = p.buffers[bi];
    if (b.role == k::BufferRole::Input || b.role == k::BufferRole::Param) continue;
    int64_t n = b.elements.evaluate({}, syms);
    for (int64_t i = 0; i < n; ++i) {
      double r = element(b, ref.bytes[bi], i), g = element(b, got.bytes[bi], i);
      if (std::isnan(r) && std::isnan(g)) continue;
      double tol = atol + rtol * std::abs(r);
      if (b.dtype == luminal::DType::f16) tol += std::abs(r) * 1e-3;   // one f16 rounding step
      if (b.dtype == luminal::DType::bf16) tol += std::abs(r) * 8e-3;  // one bf16 rounding step
      if (!(std::abs(r - g) <= tol)) {
        INFO("buffer " << b.name << " element " << i << ": evaluator " << r << ", generated C " << g);
        INFO(k::to_string(p));
        REQUIRE(std::abs(r - g) <= tol);
      }
    }
  }
  return c.source;
}

}  // namespace cpu_test
