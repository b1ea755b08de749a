// GEMMs with an f16/bf16 weight: linear(x, cast(w, f32)) on the CPU reads the weight as
// stored (the generated GEMM converts while packing; decode-shaped products convert in
// the GEMM's few-rows dot products, with F16C on AVX-512) and must equal the reference
// interpreter, which converts the whole weight exactly first. Shapes cover the packed path (edge tiles
// included), the few-rows path and the single-row path.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "backends/cpu/cpu_executable.hpp"
#include "luminal/luminal.hpp"
#include "runtime/executable.hpp"

namespace lm = luminal;

namespace {

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("GEMMs with f16 and bf16 weights match the interpreter", "[cpu][gemm]") {
  struct Shape {
    int64_t m, n, k;
  };
  for (lm::DType wt : {lm::f16, lm::bf16}) {
    // M <= 4 takes the few-rows path (dot products over columns of W^T): K of 64, and 300 and
    // 100 with a tail of 16-wide steps and then single elements.
    for (Shape sh : {Shape{128, 96, 80}, Shape{37, 70, 300}, Shape{3, 100, 64}, Shape{1, 512, 256},
                     Shape{2, 70, 300}, Shape{1, 33, 100}}) {
      INFO(lm::dtype_name(wt) << " M " << sh.m << " N " << sh.n << " K " << sh.k);
      lm::Graph g;
      lm::Tensor x = g.input("x", {sh.m, sh.k});
      lm::Tensor w = g.param("w", {sh.n, sh.k}, wt);
      g.output("y", lm::silu(lm::linear(x, lm::cast(w, lm::f32))) + 0.5f);
      const auto xs = random_values(static_cast<size_t>(sh.m * sh.k), 1);
      const auto ws =
          lm::HostTensor::from_f32(random_values(static_cast<size_t>(sh.n * sh.k), 2), {sh.n, sh.k}, wt);
      std::vector<float> ref;
      for (const lm::Target& t : {lm::Target::reference(), lm::Target::cpu()}) {
        lm::Callable fn = lm::compile(g, t);
        fn.bind("w", ws);
        auto out = fn({{"x", lm::HostTensor::from(xs, {sh.m, sh.k})}});
        auto v = out.at("y").values<float>();
        if (ref.empty()) {
          ref.assign(v.begin(), v.end());
          continue;
        }
        for (size_t i = 0; i < v.size(); ++i)
          REQUIRE(std::fabs(v[i] - ref[i]) <= 1e-4f * (1.0f + std::fabs(ref[i])));
        // Every shape reads the half weight where it is used, never through an f32 copy:
        // one kernel. Several rows: in the GEMM itself (converted as it packs). One row:
        // the extraction picks a GEMM (its dot-product path) or a dot-product reduction,
        // both converting in the loop.
        CHECK(fn.report().kernels == 1);
        const auto* exe = dynamic_cast<const lm::cpu::CpuExecutable*>(fn.state()->exe.get());
        REQUIRE(exe);
        if (sh.m > 1)
          CHECK(exe->c_source().find(wt == lm::f16 ? "_b_f16(" : "_b_bf16(") != std::string::npos);
      }
    }
  }
}
