// The generated packed GEMM (AVX-512, AVX2 and generic micro-kernels) and the BLAS library
// candidate, against the evaluator's naive double-accumulated loop: edge tiles (odd M, N,
// K), K = 0, transposed and batched views, and fused epilogues (bias + activation).
#include "backends/cpu/kernel_call.hpp"
#include "harness.hpp"
#include "kernel/kernel_math.hpp"

#include "backends/cpu/gemm_codegen.hpp"
#include "cost/target_desc.hpp"
#include "luminal/error.hpp"

#include <thread>

using namespace luminal::kernel;
using cpu_test::check_program;
using luminal::DType;
using luminal::cpu::CpuIsa;

namespace {

struct Case {
  int64_t m, n, k;
};

// Appends C[M, N] = epi(A[M, K] @ B[K, N]) to `p` (B stored transposed, [N, K], when
// `b_transposed`). All cases of a test share one program, hence one compiler run.
void add_gemm(Program& p, Case c, bool b_transposed, bool epilogue, GemmImpl impl, GemmTile tile) {
  const int base = static_cast<int>(p.buffers.size());
  const std::string id = std::to_string(p.kernels.size());
  p.buffers.push_back(Buffer{"a" + id, DType::f32, c.m * c.k, BufferRole::Input});
  p.buffers.push_back(Buffer{"b" + id, DType::f32, c.k * c.n, BufferRole::Param});
  p.buffers.push_back(Buffer{"bias" + id, DType::f32, c.n, BufferRole::Param});
  p.buffers.push_back(Buffer{"c" + id, DType::f32, c.m * c.n, BufferRole::Output});
  Gemm g;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.a = {base, 0, c.k, 1};
  g.b = b_transposed ? MatrixView{base + 1, 0, 1, c.k} : MatrixView{base + 1, 0, c.n, 1};
  g.c = {base + 3, 0, c.n, 1};
  g.row_var = 0;
  g.col_var = 1;
  if (epilogue) {
    // gelu(acc + bias[j]) in its tanh form, then * 0.5 where i is even (row-dependent)
    Expr x = binary(BinaryOp::Add, acc(), load(base + 2, DType::f32, Index::var(1)));
    Expr u = binary(BinaryOp::Mul, constant(0.7978845608),
                    binary(BinaryOp::Add, x,
                           binary(BinaryOp::Mul, constant(0.044715),
                                  binary(BinaryOp::Mul, x, binary(BinaryOp::Mul, x, x)))));
    Expr gelu = binary(BinaryOp::Mul, binary(BinaryOp::Mul, constant(0.5), x),
                       binary(BinaryOp::Add, constant(1.0), math::tanh(u)));
    Expr even = binary(BinaryOp::Equal, index_value(mod(Index::var(0), 2)), constant(0, DType::i32));
    g.epilogue = where(even, binary(BinaryOp::Mul, gelu, constant(0.5)), gelu);
  }
  g.tile = tile;
  g.impl = impl;
  Kernel k;
  k.name = "gemm" + id;
  k.kind = KernelKind::Gemm;
  k.gemm = g;
  p.kernels.push_back(k);
}

GemmTile tile_for(CpuIsa isa) {
  auto d = luminal::cpu::default_gemm_tile(isa);
  // small cache blocks so the test crosses several jc/pc/ic blocks at small sizes
  return GemmTile{d.mr, d.nr, d.mr * 3, 64, d.nr * 2};
}

}  // namespace

TEST_CASE("generated GEMM matches the naive loop on edge sizes", "[cpu][gemm]") {
  std::vector<CpuIsa> isas = {CpuIsa::Generic};
  if (luminal::cpu::host_isa() != CpuIsa::Generic) isas.push_back(CpuIsa::Avx2);
  if (luminal::cpu::host_isa() == CpuIsa::Avx512) isas.push_back(CpuIsa::Avx512);
  // M <= 4 takes the unpacked small-M path (B streamed in place), N <= 4 the small-N one
  // (dot products over rows of A), the rest the packed one.
  const std::vector<Case> cases = {{1, 1, 1},   {17, 33, 65},  {127, 5, 300}, {64, 64, 64},  {3, 100, 7},
                                   {40, 70, 0}, {1, 300, 257}, {4, 520, 33},  {300, 1, 257}, {70, 3, 33}};
  for (CpuIsa isa : isas) {
    Program p;
    for (Case c : cases)
      for (bool bt : {false, true})
        for (bool epi : {false, true}) add_gemm(p, c, bt, epi, GemmImpl::Generated, tile_for(isa));
    INFO("isa " << luminal::cpu::isa_name(isa));
    luminal::cpu::RenderOptions opt;
    opt.isa = isa;
    check_program(p, {}, 1e-4, 5e-4, 7, opt);
  }
}

TEST_CASE("library GEMM candidate (cblas_sgemm) with epilogue", "[cpu][gemm]") {
  Program p;
  auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  for (Case c : {Case{17, 33, 65}, Case{127, 5, 300}, Case{1, 1, 1}})
    for (bool bt : {false, true}) add_gemm(p, c, bt, true, GemmImpl::Library, {d.mr, d.nr, d.mc, d.kc, d.nc});
  std::string src = check_program(p, {}, 1e-4, 5e-4);
  CHECK(src.find("lm_rt->sgemm(") != std::string::npos);
}

TEST_CASE("batched GEMM with symbolic M and a strided A view", "[cpu][gemm]") {
  // out[b] = x[b] @ w for b < 3, with x[b] a [M, 24] view inside a [3, M, 32] buffer
  // (columns 4..28 of each row): offset and row stride are not the packed ones.
  Program p;
  p.symbols = {"M"};
  Index M = Index::sym("M");
  p.buffers = {Buffer{"x", DType::f32, M * 96, BufferRole::Input},
               Buffer{"w", DType::f32, 24 * 40, BufferRole::Param},
               Buffer{"out", DType::f32, M * 120, BufferRole::Output}};
  Gemm g;
  g.m = M;
  g.n = 40;
  g.k = 24;
  Index b = Index::var(2);
  g.a = {0, b * M * 32 + 4, 32, 1};
  g.b = {1, 0, 40, 1};
  g.c = {2, b * M * 40, 40, 1};
  g.row_var = 0;
  g.col_var = 1;
  g.epilogue = math::relu(binary(BinaryOp::Add, acc(), cast(index_value(b), DType::f32)));
  auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  g.tile = {d.mr, d.nr, d.mr * 2, 16, d.nr};
  Kernel k;
  k.name = "bgemm";
  k.kind = KernelKind::Gemm;
  k.loops = {{2, 3}};
  k.gemm = g;
  p.kernels = {k};
  for (int64_t m : {1, 9, 50}) check_program(p, {{"M", m}}, 1e-4, 5e-4);
}

TEST_CASE("GEMM micro tiles are checked against the register file", "[cpu][gemm]") {
  CHECK_THROWS_AS(luminal::cpu::check_micro_tile(CpuIsa::Avx2, 6, 12), luminal::InternalError);
  CHECK_THROWS_AS(luminal::cpu::check_micro_tile(CpuIsa::Avx2, 8, 32), luminal::InternalError);
  CHECK_NOTHROW(luminal::cpu::check_micro_tile(CpuIsa::Avx512, 12, 32));
  CHECK_THROWS_AS(luminal::cpu::check_micro_tile(CpuIsa::Avx512, 16, 32), luminal::InternalError);
}

TEST_CASE("compiled programs run concurrently from several threads", "[cpu][gemm]") {
  // A Callable may be called from many threads at once: the same compiled GEMM + chain
  // program, run by 4 threads on their own buffers, gives each thread the serial result.
  Program p;
  auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  add_gemm(p, Case{70, 90, 110}, false, true, GemmImpl::Generated, {d.mr, d.nr, d.mc, d.kc, d.nc});
  add_gemm(p, Case{2, 300, 64}, true, true, GemmImpl::Generated, {d.mr, d.nr, d.mc, d.kc, d.nc});
  luminal::cpu::CProgram c = luminal::cpu::render_c(p);
  auto lib = luminal::cpu::Jit::global().compile(c.source);
  auto fn = lib->function<luminal::cpu::KernelFn>(c.entry);
  auto serial = cpu_test::allocate(p, {}, 11);
  auto sp = serial.ptrs();
  fn(sp.data(), nullptr, luminal::cpu::runtime_table(), nullptr);  // no call context: one thread
  std::vector<cpu_test::HostBuffers> mine;
  for (int t = 0; t < 4; ++t) mine.push_back(cpu_test::allocate(p, {}, 11));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto ptrs = mine[static_cast<size_t>(t)].ptrs();
      for (int rep = 0; rep < 5; ++rep) luminal::cpu::run_generated(fn, ptrs.data(), nullptr);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(mine[static_cast<size_t>(t)].bytes == serial.bytes);
}

TEST_CASE("every GEMM tile the host's cost model offers fits and computes correctly", "[cpu][gemm]") {
  // The search picks among TargetDesc::gemm_tiles and the lowering honours the choice: each
  // must be a legal micro tile of this ISA and give the naive loop's results.
  const CpuIsa isa = luminal::cpu::host_isa();
  const auto tiles = luminal::detail::describe_host_cpu().gemm_tiles;
  REQUIRE(tiles.size() >= 2);
  Program p;
  for (const auto& t : tiles) {
    const int mr = static_cast<int>(t[0]), nr = static_cast<int>(t[1]);
    INFO("tile " << mr << "x" << nr);
    REQUIRE(luminal::cpu::micro_tile_fits(isa, mr, nr));
    for (Case c : {Case{37, 150, 70}, Case{12, 256, 33}})
      add_gemm(p, c, true, true, GemmImpl::Generated, GemmTile{mr, nr, mr * 3, 32, nr * 2});
  }
  std::string src = check_program(p, {}, 1e-4, 5e-4);
  for (const auto& t : tiles)
    CHECK(src.find(luminal::cpu::gemm_function_name(isa, static_cast<int>(t[0]), static_cast<int>(t[1]))) !=
          std::string::npos);
}
