// Fast math on the GPU targets (CompileOptions::fast_math, docs/cuda.md "Fast math"):
// CUDA kernels compute f32 exp2/exp/log2/sin/sqrt/1/x on the special function units
// (one MUFU instruction each, subnormals flushed) and tanh with two of them and a
// polynomial; the emulator computes the same formulas
// with exact functions, so an emulated fast-math program is checked here against the exact
// CPU program: within rounding where both are normal, flushed where the device flushes,
// and the same infinities and NaNs where the instructions define them. The cost model
// prices those instructions on their own units.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/compile_graph.hpp"
#include "cost/target_desc.hpp"
#include "gpu/gpu_test_util.hpp"
#include "luminal/luminal.hpp"
#include "runtime/aot.hpp"

using namespace luminal;

namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

// Every transcendental the renderer has a fast spelling for, and the compositions of
// them (log = log2 * ln 2, cos = sin(x + pi/2), rsqrt = 1 / sqrt).
Graph transcendentals(int64_t n) {
  Graph g;
  Tensor x = g.input("x", {n});
  g.output("exp", exp(x));
  g.output("exp2", exp2(x));
  g.output("log2", log2(x));
  g.output("log", log(x));
  g.output("sin", sin(x));
  g.output("cos", cos(x));
  g.output("tanh", tanh(x));
  g.output("sqrt", sqrt(x));
  g.output("rsqrt", rsqrt(x));
  g.output("recip", recip(x));
  return g;
}

// Generated kernels of `g` for `target` as the device compiles them.
std::string device_source(const Graph& g, const char* target, bool fast_math) {
  CompileOptions o;
  o.fast_math = fast_math;
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse(target), o).plan;
  CHECK(plan->fast_math == fast_math);
  const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
  CHECK(lp.prog.approximate_math == fast_math);
  return gpu::render_gpu(lp.prog, gpu::arch_for(Target::parse(target)), gpu::plan_schedules(*plan))
      .device_source();
}

std::string kernels_of(const std::string& source) {
  const size_t at = source.find("/* ---- generated kernels");
  REQUIRE(at != std::string::npos);
  return source.substr(at);
}

}  // namespace

TEST_CASE("fast math: emulated special-function formulas against the exact program",
          "[gpu][emu][fast-math]") {
  std::vector<float> xs = {0.0f,  -0.0f,  1.0f,     -1.0f,   0.5f,     2.0f,   3.14159265f, -3.14159265f,
                           10.0f, -10.0f, 87.0f,    -87.0f,  100.0f,   1e4f,   65504.0f,    -65504.0f,
                           1e-3f, 1e-30f, 1e-40f,   -1e-40f, -130.0f,  1e30f,  kInf,        -kInf,
                           kNaN,  0.1f,   123.456f, -7.25f,  1.5e-38f, 6.0e3f, 0.75f,       42.0f};
  for (int i = 0; i < 96; ++i) xs.push_back(-24.0f + 0.5f * static_cast<float>(i) + 0.123f);
  const auto n = static_cast<int64_t>(xs.size());
  const Graph g = transcendentals(n);
  const std::map<std::string, HostTensor> in = {{"x", HostTensor::from(xs, {n})}};

  CompileOptions exact_o, fast_o;
  fast_o.fast_math = true;
  const auto want = compile(g, Target::cpu(), exact_o)(in);
  const Callable fast = compile(g, Target::parse("cuda:sm_90+emu"), fast_o);
  INFO(fast.report().to_string());
  const auto got = fast(in);
  const float kMinNormal = std::numeric_limits<float>::min();
  for (const auto& [name, w] : want) {
    const std::vector<float> wv = w.to_f32(), gv = got.at(name).to_f32();
    REQUIRE(wv.size() == gv.size());
    for (size_t i = 0; i < wv.size(); ++i) {
      // A subnormal input is flushed to a zero of its sign: the exact value there (xs[0]
      // is +0, xs[1] -0) -- but by tanh, whose small arguments take plain FMAs (tanh(x) = x).
      const float x = xs[i];
      const bool flushed = x != 0.0f && std::fabs(x) < kMinNormal && name != "tanh";
      const float r = flushed ? wv[x > 0 ? 0 : 1] : wv[i], v = gv[i];
      INFO(name << "(" << x << "): exact " << wv[i] << ", fast " << v);
      if ((name == "sin" || name == "cos") && std::fabs(x) > 1e5f && std::isfinite(x)) {
        CHECK(std::fabs(v) <= 1.0f);  // beyond the reduction's range: some value of a sine
      } else if (std::isnan(r)) {
        CHECK(std::isnan(v));
      } else if (std::isinf(r)) {
        CHECK(v == r);  // ex2(+-inf), lg2(+-0), rcp(+-0), sqrt(inf): the instructions' values
      } else if (std::fabs(r) < kMinNormal) {
        CHECK(v == (name == "tanh" ? r : 0.0f));  // a subnormal result is flushed too
      } else {
        // exp is ex2(x log2 e): the product's rounding is |x| 2^-24 ln 2 relative. A sine's
        // argument is rounded before it is reduced (cos(x) = sin(x + pi/2)), which the
        // exact program need not do: |x| 2^-23 absolute.
        const double rtol = name == "exp" ? 2e-5 + std::fabs(x) * 6e-8 : 2e-5;
        const double atol = name == "sin" || name == "cos" ? 1e-6 + std::fabs(x) * 0x1p-23 : 1e-6;
        CHECK(std::fabs(v - r) <= atol + rtol * std::fabs(r));
      }
    }
  }
  // Without fast math the same program is the exact one on the emulator too: the
  // subnormals survive.
  const auto exact_emu = compile(g, Target::parse("cuda:sm_90+emu"), exact_o)(in);
  const std::vector<float> sq = exact_emu.at("sqrt").to_f32(), e2 = exact_emu.at("exp2").to_f32();
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == 1e-40f) CHECK(sq[i] == std::sqrt(1e-40f));
    if (xs[i] == -130.0f) CHECK(e2[i] == std::ldexp(1.0f, -130));
  }
}

TEST_CASE("fast math: CUDA kernels call the special-function helpers; HIP and exact programs do not",
          "[gpu][fast-math]") {
  const Graph g = transcendentals(1024);
  const std::string fast = kernels_of(device_source(g, "cuda:sm_90", true));
  for (const char* f :
       {"lm_fast_exp", "lm_fast_log2", "lm_fast_sin", "lm_fast_sqrt", "lm_fast_rcp", "lm_fast_tanh"}) {
    INFO(f);
    CHECK(fast.find(f) != std::string::npos);
  }
  CHECK(fast.find("lm_sin(") == std::string::npos);
  const std::string exact = kernels_of(device_source(g, "cuda:sm_90", false));
  CHECK(exact.find("lm_fast_") == std::string::npos);
  CHECK(exact.find("lm_sin(") != std::string::npos);
  CHECK(exact.find("lm_tanh(") != std::string::npos);
  // HIP spells the helpers as the exact functions (allowed: an approximation may be exact).
  const std::string hip = device_source(g, "hip:gfx90a", true);
  CHECK(hip.find("#define lm_fast_sin(x) lm_sin(x)") != std::string::npos);
  CHECK(hip.find("#define lm_fast_tanh(x) lm_tanh(x)") != std::string::npos);
}

TEST_CASE("fast math: the special-function helpers are one MUFU instruction each in PTX",
          "[gpu][nvrtc][fast-math]") {
  if (!gpu_test::have_nvrtc()) return;
  const Graph g = transcendentals(1024);
  auto ptx_of = [&](bool fast_math) {
    const cuda::CudaModule m =
        cuda::compile_module(device_source(g, "cuda:sm_90", fast_math), "sm_90", false);
    return std::string(m.image.begin(), m.image.end());
  };
  auto count = [](const std::string& s, const std::string& what) {
    size_t c = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++c;
    return c;
  };
  // PTX instructions: the lines that end with ';' and are not declarations.
  auto instructions = [](const std::string& ptx) {
    size_t c = 0;
    std::istringstream in(ptx);
    for (std::string line; std::getline(in, line);) {
      const size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line.back() != ';' || line[b] == '.' || line[b] == '/') continue;
      ++c;
    }
    return c;
  };
  const std::string fast = ptx_of(true), exact = ptx_of(false);
  for (const char* op : {"ex2.approx.ftz.f32", "lg2.approx.ftz.f32", "sin.approx.ftz.f32",
                         "sqrt.approx.ftz.f32", "rcp.approx.ftz.f32"}) {
    INFO(op);
    CHECK(count(fast, op) >= 1);
    CHECK(count(exact, op) == 0);
  }
  // tanh's quotient and 1/x take an IEEE division exactly, none under fast math.
  CHECK(count(exact, "div.rn.f32") >= 1);
  CHECK(count(fast, "div.rn.f32") == 0);
  INFO("PTX instructions: exact " << instructions(exact) << ", fast " << instructions(fast));
  CHECK(instructions(fast) * 2 < instructions(exact));
}

TEST_CASE(
    "fast math: the cost model prices transcendentals on the special function units where they are used",
    "[gpu][cost][fast-math]") {
  // Published figures: 16 results a clock per SM; H100 132 SMs at 1.98 GHz, A100 108 at 1.41.
  const detail::TargetDesc h100 = detail::describe_gpu("sm_90"), a100 = detail::describe_gpu("sm_80");
  CHECK(h100.special_function_rate == Approx(132 * 16 * 1.98e9).epsilon(0.01));
  CHECK(a100.special_function_rate == Approx(108 * 16 * 1.41e9).epsilon(0.01));
  const detail::TargetDesc fast = detail::with_fast_math(h100);
  CHECK(fast.approximate_math);
  CHECK(fast.transcendental_flops < h100.transcendental_flops);
  // HIP computes them exactly under fast math, and the CPU too: priced as without it.
  for (const detail::TargetDesc& t : {detail::describe_gpu("gfx90a"), detail::describe_host_cpu()}) {
    const detail::TargetDesc f = detail::with_fast_math(t);
    CHECK_FALSE(f.approximate_math);
    CHECK(f.transcendental_flops == t.transcendental_flops);
  }
  // A chain of transcendentals over 16M floats: compute-bound exactly, memory-bound on the
  // special function units.
  Graph g;
  Tensor x = g.input("x", {int64_t{1} << 24});
  g.output("y", sin(exp(sin(exp(x)))));
  auto estimate = [&](const char* target, bool fast_math) {
    CompileOptions o;
    o.compile_only = true;
    o.fast_math = fast_math;
    return compile(g, Target::parse(target), o).report().estimated_seconds;
  };
  const double cuda_exact = estimate("cuda:sm_90", false), cuda_fast = estimate("cuda:sm_90", true);
  INFO("sm_90: exact " << cuda_exact << " s, fast " << cuda_fast << " s");
  CHECK(cuda_fast < 0.75 * cuda_exact);
  // Not below the units' own bound: 4 transcendentals an element.
  CHECK(cuda_fast >= 4.0 * (1 << 24) / h100.special_function_rate);
  CHECK(estimate("hip:gfx90a", true) == Approx(estimate("hip:gfx90a", false)).epsilon(1e-9));

  // tanh takes two special-function ops (ex2, rcp) and fast_tanh_flops plain ones: four
  // of them an element are bound by the units at 8, and by the plain pipe at 4 x 16.
  Graph gt;
  Tensor xt = gt.input("x", {int64_t{1} << 24});
  gt.output("y", tanh(tanh(tanh(tanh(xt)))));
  CompileOptions fo;
  fo.compile_only = true;
  fo.fast_math = true;
  const double tanh_fast = compile(gt, Target::parse("cuda:sm_90"), fo).report().estimated_seconds;
  INFO("4 tanh, sm_90 fast: " << tanh_fast << " s");
  CHECK(tanh_fast >= 8.0 * (1 << 24) / h100.special_function_rate);
  CHECK(tanh_fast >= 4.0 * fast.fast_tanh_flops * (1 << 24) / (fast.peak_flops_f32 * fast.loop_efficiency));
  // and less than the exact polynomial's price
  fo.fast_math = false;
  CHECK(tanh_fast < compile(gt, Target::parse("cuda:sm_90"), fo).report().estimated_seconds);
}

TEST_CASE("fast math: a plan keeps its fast_math through serialization", "[gpu][fast-math]") {
  Graph g;
  g.output("y", exp(g.input("x", {8})));
  CompileOptions o;
  o.fast_math = true;
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse("cuda:sm_90"), o).plan;
  REQUIRE(plan->fast_math);
  CHECK(aot::deserialize_plan(aot::serialize_plan(*plan)).fast_math);
  compiler::KernelPlan exact = *plan;
  exact.fast_math = false;
  CHECK_FALSE(aot::deserialize_plan(aot::serialize_plan(exact)).fast_math);
}
