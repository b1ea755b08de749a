// Sibling products merged into one GEMM (rules: matmul-siblings; kernel IR:
// Gemm::b_segments): the generated driver reading B as column ranges of separate buffers
// against the evaluator, on every path of the driver (few rows, packed, several threads)
// and segment widths that cut its strips and column blocks unevenly; then the decoder
// block compiled for the CPU, where Q/K/V and gate/up each become one GEMM over their
// weights as stored, against the interpreter.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cpu/gemm_codegen.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "harness.hpp"
#include "luminal/luminal.hpp"

namespace k = luminal::kernel;
namespace lm = luminal;
using k::Index;

namespace {

// C[M, N] = (A[M, K] @ [B0 | B1 | B2]) * 0.5 + j, segment s of width w[s]: B0 stored
// transposed ([w0, K], x @ W^T as in every linear layer), B1 row-major [K, w1], B2
// transposed again, at an offset inside its buffer; every B stored as `bt` (f16/bf16:
// the driver widens each segment as it reads it).
void add_segmented(k::Program& p, int64_t m, int64_t kk, const std::vector<int64_t>& w, k::GemmTile tile,
                   lm::DType bt = lm::DType::f32) {
  const int base = static_cast<int>(p.buffers.size());
  const std::string id = std::to_string(p.kernels.size());
  int64_t n = 0;
  for (int64_t x : w) n += x;
  p.buffers.push_back({"a" + id, lm::DType::f32, Index(m * kk), k::BufferRole::Input});
  for (size_t s = 0; s < w.size(); ++s)
    p.buffers.push_back({"b" + id + "_" + std::to_string(s), bt, Index(kk * w[s] + 7), k::BufferRole::Param});
  const int cb = static_cast<int>(p.buffers.size());
  p.buffers.push_back({"c" + id, lm::DType::f32, Index(m * n), k::BufferRole::Output});
  k::Gemm g;
  g.m = m;
  g.n = n;
  g.k = kk;
  g.a = {base, 0, kk, 1};
  int64_t n0 = 0;
  for (size_t s = 0; s < w.size(); ++s) {
    k::GemmSegment sg;
    const int buf = base + 1 + static_cast<int>(s);
    sg.b = s % 2 == 0 ? k::MatrixView{buf, Index(s == 2 ? 7 : 0), 1, kk} : k::MatrixView{buf, 0, w[s], 1};
    sg.n0 = n0;
    n0 += w[s];
    g.b_segments.push_back(sg);
  }
  g.b = g.b_segments[0].b;
  g.c = {cb, 0, n, 1};
  g.row_var = 0;
  g.col_var = 1;
  g.epilogue = k::binary(k::BinaryOp::Add, k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.5)),
                         k::cast(k::index_value(Index::var(1)), lm::DType::f32));
  g.tile = tile;
  k::Kernel kern;
  kern.name = "seg" + id;
  kern.kind = k::KernelKind::Gemm;
  kern.gemm = g;
  p.kernels.push_back(kern);
}

}  // namespace

TEST_CASE("segmented GEMM B: generated C matches the evaluator", "[cpu][gemm][siblings]") {
  const auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  // Small cache blocks so the products cross several column blocks and K blocks.
  const k::GemmTile tile{d.mr, d.nr, d.mr * 3, 64, d.nr * 2};
  k::Program p;
  // M <= 4: the few-rows path (per-segment dot products or axpy); larger M: packed.
  for (int64_t m : {1, 3, 17, 70})
    for (const std::vector<int64_t>& w : {std::vector<int64_t>{37, 5, 70}, std::vector<int64_t>{64, 32},
                                           std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{100, 3, 33}})
      add_segmented(p, m, m == 70 ? 129 : 40, w, tile);
  k::validate(p);
  const std::string src = cpu_test::check_program(p, {}, 1e-4, 5e-4, 3);
  CHECK(src.find("_seg(M, N, K, a, rsa, csa, 3, lm_sb") != std::string::npos);
}

TEST_CASE("segmented GEMM B stored as f16 or bf16: generated C matches the evaluator", "[cpu][gemm][siblings]") {
  const auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  const k::GemmTile tile{d.mr, d.nr, d.mr * 3, 64, d.nr * 2};
  for (lm::DType bt : {lm::DType::f16, lm::DType::bf16}) {
    INFO(lm::dtype_name(bt));
    k::Program p;
    for (int64_t m : {1, 3, 17, 70})
      for (const std::vector<int64_t>& w : {std::vector<int64_t>{37, 5, 70}, std::vector<int64_t>{64, 32}})
        add_segmented(p, m, m == 70 ? 129 : 40, w, tile, bt);
    k::validate(p);
    const std::string src = cpu_test::check_program(p, {}, 1e-4, 5e-4, 3);
    CHECK(src.find("const uint16_t* lm_sb[3]") != std::string::npos);
  }
}

TEST_CASE("segmented GEMM B: a wrong segment table is refused by the validator", "[cpu][gemm][siblings]") {
  k::Program p;
  add_segmented(p, 3, 8, {4, 4}, {});
  p.kernels[0].gemm->b_segments[0].n0 = 1;
  CHECK_THROWS_AS(k::validate(p), lm::InternalError);
  // Segments of different storage types: one driver reads one element type.
  k::Program q;
  add_segmented(q, 3, 8, {4, 4}, {});
  q.buffers[static_cast<size_t>(q.kernels[0].gemm->b_segments[1].b.buffer)].dtype = lm::DType::f16;
  CHECK_THROWS_AS(k::validate(q), lm::InternalError);
}

TEST_CASE("decoder block with f32, f16 and bf16 weights: Q/K/V and gate/up are one GEMM each, weights as stored",
          "[cpu][siblings][e2e]") {
  for (lm::DType wt : {lm::DType::f32, lm::DType::f16, lm::DType::bf16})
    for (int64_t S : {1, 8}) {
      INFO(lm::dtype_name(wt) << " S " << S);
      lm::Graph g;
      lm::test::BlockConfig c;
      c.seq = S;
      c.weights = wt;
      lm::test::build_model(g, c, 1);
      auto compiled = lm::compiler::compile_graph(*g.impl(), lm::Target::cpu(), lm::test::unhurried());
      INFO(compiled.report.to_string() << "\n" << compiled.dot);
      std::printf("decoder block, %s weights, S %lld: %lld kernels\n", std::string(lm::dtype_name(wt)).c_str(),
                  static_cast<long long>(S), static_cast<long long>(compiled.report.kernels));
      // As with f32 weights (tests/compiler/fusion_test.cpp): 5 kernels, 7 at one row.
      CHECK(compiled.report.kernels <= (S > 1 ? 5 : 7));
      auto lowered = lm::cpu::lower_plan(*compiled.plan, lm::cpu::cpu_lower_options());
      std::vector<size_t> segments;
      for (const auto& kern : lowered.prog.kernels)
        if (kern.gemm && !kern.gemm->b_segments.empty()) {
          segments.push_back(kern.gemm->b_segments.size());
          // Each weight read as stored: no f32 copy of any of them.
          for (const auto& sg : kern.gemm->b_segments)
            CHECK(lowered.prog.buffers[static_cast<size_t>(sg.b.buffer)].dtype == wt);
        }
      std::sort(segments.begin(), segments.end());
      // The same plan shape whatever the weights' storage: at S = 1 gate and up stay two
      // GEMMs (the cost model prices that lower at one row).
      CHECK(segments == (S == 1 ? std::vector<size_t>{3} : std::vector<size_t>{2, 3}));
      lm::Callable f = lm::compile(g, lm::Target::cpu());
      CHECK(f.report().interpreted_kernels == 0);
      auto all = lm::test::random_inputs(*g.impl(), 9);
      std::map<std::string, const lm::HostTensor*> ptrs;
      for (const auto& [name, t] : all) ptrs.emplace(name, &t);
      auto want = lm::detail::reference::run(*g.impl(), {}, ptrs);
      for (const auto& name : f.param_names()) f.bind(name, all.at(name));
      std::map<std::string, lm::HostTensor> in;
      for (const auto& name : f.input_names()) in.emplace(name, all.at(name));
      CHECK(lm::test::compare_outputs(f(in), want) <= 1.0);
    }
}
