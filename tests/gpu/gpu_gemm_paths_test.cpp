// The GEMM paths the GPU search chooses between (cost/gpu_launch.hpp): tensor cores
// (mma.sync m16n8k16, f16/bf16 in, f32 accumulate) with scalar or 128-bit staging, and
// the skinny split-K GEMM for decode shapes, each run on the emulator of the very source
// NVRTC compiles and checked against the kernel IR evaluator at odd sizes, transposed
// operands, batches, aligned and misaligned operands; then whole graphs (an f16 matmul
// as PyTorch computes it on a GPU) compiled for cuda:sm_90+emu against the reference
// interpreter, with the schedule the cost model chose; then NVRTC's resource figures.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>
#include <random>
#include <set>

#include "backends/cpu/cpu_program.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/gpu/emu_header.hpp"
#include "backends/gpu/gpu_prelude.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/hip/hip_module.hpp"
#include "backends/hip/hiprtc.hpp"
#include "compiler/compile_graph.hpp"
#include "compiler/translation_models.hpp"
#include "cost/gpu_cost.hpp"
#include "cost/gpu_launch.hpp"
#include "cpu/harness.hpp"
#include "gpu/gpu_test_util.hpp"
#include "ir/tensor_lang.hpp"
#include "luminal/luminal.hpp"
#include "support/temp_dir.hpp"

namespace k = luminal::kernel;
using namespace luminal;
using gpu_test::arch_of;

namespace {

struct Layout {
  bool a_t = false;    // A stored [K][M] (m contiguous) instead of [M][K]
  bool b_kc = false;   // B stored [N][K] (k contiguous: x @ W^T) instead of [K][N]
  int64_t a_off = 0;   // first element of A inside its buffer (misaligns when not a multiple of 8)
  int64_t b_off = 0;
  // The stride of each operand's non-contiguous side, when larger than the matrix (a
  // slice of a wider one: rows aligned while K or M is not a multiple of 8); 0 = natural.
  int64_t a_pitch = 0, b_pitch = 0;
};

// Appends C[b] = A[b] @ B (+ epilogue) over `batches` batch points as a GEMM kernel named
// `name`, with its own buffers.
void add_gemm(k::Program& p, const std::string& name, DType dt, int64_t M, int64_t N, int64_t K, int64_t batches,
              const Layout& lay) {
  const int a = static_cast<int>(p.buffers.size());
  const int64_t pa = lay.a_pitch ? lay.a_pitch
                     : lay.a_t   ? M
                                 : K,
                pb = lay.b_pitch ? lay.b_pitch
                     : lay.b_kc  ? K
                                 : N;
  const int64_t a_batch = (lay.a_t ? K : M) * pa;
  p.buffers.push_back({name + "_a", dt, lay.a_off + batches * a_batch, k::BufferRole::Input});
  p.buffers.push_back({name + "_b", dt, lay.b_off + (lay.b_kc ? N : K) * pb, k::BufferRole::Input});
  p.buffers.push_back({name + "_c", DType::f32, batches * M * N, k::BufferRole::Output});
  k::Kernel kk;
  kk.name = name;
  kk.kind = k::KernelKind::Gemm;
  k::Loop l;
  l.var = 0;
  l.extent = batches;
  kk.loops.push_back(l);
  k::Gemm g;
  g.m = M;
  g.n = N;
  g.k = K;
  const k::Index b = k::Index::var(0);
  g.a = lay.a_t ? k::MatrixView{a, b * a_batch + lay.a_off, 1, pa}
                : k::MatrixView{a, b * a_batch + lay.a_off, pa, 1};
  g.b = lay.b_kc ? k::MatrixView{a + 1, lay.b_off, 1, pb} : k::MatrixView{a + 1, lay.b_off, pb, 1};
  g.c = {a + 2, b * (M * N), N, 1};
  g.row_var = 1;
  g.col_var = 2;
  // an epilogue that depends on the row, the column and the batch point
  g.epilogue = k::binary(k::BinaryOp::Add, k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.5)),
                         k::cast(k::index_value(k::Index::var(1) + k::Index::var(2) * 3 + b * 7), DType::f32));
  kk.gemm = g;
  p.kernels.push_back(kk);
}

// Two programs of four GEMMs each, one per orientation of A (a_t) and of B (b_kc): the
// aligned one, 37 x 72 x `k_aligned` over 2 batch points laid out by `aligned_layout`,
// and the misaligned one, 40 x 40 x 45 with operands starting at elements 3 and 5.
template <class AlignedLayout>
std::pair<k::Program, k::Program> layout_programs(DType dt, int64_t k_aligned, AlignedLayout aligned_layout) {
  k::Program aligned, misaligned;
  int n = 0;
  for (bool a_t : {false, true})
    for (bool b_kc : {false, true}) {
      const std::string id = std::to_string(n++);
      add_gemm(aligned, std::string("al").append(id), dt, 37, 72, k_aligned, 2, aligned_layout(a_t, b_kc));
      add_gemm(misaligned, std::string("mis").append(id), dt, 40, 40, 45, 1, Layout{a_t, b_kc, 3, 5});
    }
  return {std::move(aligned), std::move(misaligned)};
}

struct Emulated {
  std::string source;
  unsigned long long vector_loads = 0;  // lm_ld128 calls the emulator ran
  unsigned long long async_copies = 0;  // lm_cp_async16 calls
};

// Renders `p` with each kernel's launch from `launch_of`, runs it on the emulator and
// compares every output with the evaluator.
Emulated run_and_compare(const k::Program& p, const gpu::GpuArch& arch, const gpu::ScheduleOf& launch_of,
                         double rtol = 1e-4, double atol = 1e-4) {
  cpu_test::HostBuffers ref = cpu_test::allocate(p, {}, 7), got = cpu_test::allocate(p, {}, 7);
  k::evaluate(p, ref.ptrs(), {});
  const gpu::GpuSource src = gpu::render_gpu(p, arch, launch_of);
  auto lib = gpu::emulator_jit().compile(gpu::emulation_source(src, p, arch));
  auto ptrs = got.ptrs();
  for (const auto& l : src.launches) lib->function<cpu::KernelFn>(l.name + "_emu")(ptrs.data(), nullptr, nullptr, nullptr);
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const auto& b = p.buffers[bi];
    if (b.role != k::BufferRole::Output) continue;
    const int64_t n = b.elements.evaluate({}, {});
    for (int64_t i = 0; i < n; ++i) {
      const double r = cpu_test::element(b, ref.bytes[bi], i), g = cpu_test::element(b, got.bytes[bi], i);
      if ((std::isnan(r) && std::isnan(g)) || r == g) continue;
      if (!(std::abs(r - g) <= atol + rtol * std::abs(r))) {
        INFO("buffer " << b.name << " element " << i << ": evaluator " << r << ", emulated " << g);
        REQUIRE(std::abs(r - g) <= atol + rtol * std::abs(r));
      }
    }
  }
  Emulated e;
  e.source = src.kernels;
  using Count = unsigned long long (*)();
  e.vector_loads = lib->function<Count>("lm_emu_ld128_count")();
  if (arch.async_copy) e.async_copies = lib->function<Count>("lm_emu_cp_async_count")();
  return e;
}

gpu::ScheduleOf same_launch(std::vector<int64_t> l) {
  return [l](const k::Kernel&) { return l; };
}

}  // namespace

TEST_CASE("tensor-core GEMM: 128-bit staging for every operand layout, aligned or not", "[gpu][emu][mma][vector]") {
  // Odd M and N, K a multiple of 8 (rows aligned) or not, both operand orientations,
  // batches, operands starting at aligned (0, 8) and misaligned (3) elements.
  for (DType dt : {DType::f16, DType::bf16}) {
    const auto [aligned, misaligned] = layout_programs(dt, 48, [](bool a_t, bool b_kc) {
      return Layout{a_t, b_kc, a_t ? 0 : 8, b_kc ? 8 : 0};
    });
    const gpu::GpuArch sm90 = arch_of("cuda:sm_90+emu");
    for (int64_t bm : {64, 32}) {
      INFO((dt == DType::f16 ? "f16" : "bf16") << " tile " << bm);
      const Emulated al = run_and_compare(aligned, sm90, same_launch({bm, 64, 32, 1, 8}));
      CHECK(al.source.find("tensor cores (mma.sync") != std::string::npos);
      CHECK(al.source.find("128-bit staging loads") != std::string::npos);
      CHECK(al.vector_loads > 0);  // the vector path ran (aligned operands)
      // Misaligned starts and rows: every tile takes the scalar loads (a 128-bit load at a
      // misaligned address aborts the emulator, as it faults on the device).
      const Emulated mis = run_and_compare(misaligned, sm90, same_launch({bm, 64, 32, 1, 8}));
      CHECK(mis.vector_loads == 0);
      // Scalar staging: same results.
      const Emulated sc = run_and_compare(aligned, sm90, same_launch({bm, 64, 32, 1, 1}));
      CHECK(sc.vector_loads == 0);
    }
  }
}

TEST_CASE("tensor-core GEMM fed by ldmatrix from a cp.async ring: every layout, ring and warp tile",
          "[gpu][emu][mma][async]") {
  // Both orientations of each operand (ldmatrix and ldmatrix .trans), odd M and N, K
  // ending inside a 16-byte chunk (rows aligned by a wider pitch) and inside a k-tile,
  // batches, aligned and misaligned operands (the plain stores fill the ring), every ring
  // depth and warp tile the rules offer.
  for (DType dt : {DType::f16, DType::bf16}) {
    const auto [aligned, misaligned] = layout_programs(dt, 45, [](bool a_t, bool b_kc) {
      return Layout{a_t, b_kc, a_t ? 0 : 8, b_kc ? 8 : 0, a_t ? 40 : 48, b_kc ? 48 : 72};
    });
    const gpu::GpuArch sm90 = arch_of("cuda:sm_90+emu");
    for (std::vector<int64_t> l : {std::vector<int64_t>{128, 256, 32, 3, 8, 2, 64, 64},
                                   {128, 128, 32, 3, 8, 3, 64, 64},
                                   {128, 128, 32, 3, 8, 3, 64, 32},
                                   {128, 64, 32, 3, 8, 4, 64, 32},
                                   {64, 128, 32, 3, 8, 4, 32, 64},
                                   {64, 64, 32, 3, 8, 4, 32, 32},
                                   {32, 32, 32, 3, 8, 2, 16, 16}}) {
      INFO((dt == DType::f16 ? "f16" : "bf16")
           << " tile " << l[0] << "x" << l[1] << ", " << l[5] << " stages, warps of " << l[6] << "x" << l[7]);
      const Emulated al = run_and_compare(aligned, sm90, same_launch(l));
      CHECK(al.source.find("ldmatrix, cp.async " + std::to_string(l[5]) + "-stage ring") !=
            std::string::npos);
      CHECK(al.source.find("lm_ldmatrix_x4_trans(") != std::string::npos);
      CHECK(al.async_copies > 0);
      const Emulated mis = run_and_compare(misaligned, sm90, same_launch(l));
      CHECK(mis.async_copies == 0);
    }
    // Where the target has no cp.async the same alternative runs as its matrix tile.
    const Emulated cdna =
        run_and_compare(aligned, arch_of("hip:gfx90a+emu"), same_launch({64, 64, 32, 3, 8, 4, 32, 32}));
    CHECK(cdna.source.find("mfma 16x16x16") != std::string::npos);
  }
}

TEST_CASE("FMA tiles: 128-bit loads of f32 operands, every layout, aligned or not", "[gpu][emu][vector]") {
  k::Program aligned, misaligned;
  int n = 0;
  for (bool a_t : {false, true})
    for (bool b_kc : {false, true}) {
      const std::string id = std::to_string(n++);
      add_gemm(aligned, std::string("al").append(id), DType::f32, 37, 44, 40, 2, Layout{a_t, b_kc, 4, 8});
      add_gemm(misaligned, std::string("mis").append(id), DType::f32, 36, 36, 41, 1, Layout{a_t, b_kc, 1, 2});
    }
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
    for (int64_t bm : {64, 32}) {
      INFO(t << " tile " << bm);
      const Emulated al = run_and_compare(aligned, arch_of(t), same_launch({bm, 64, 32, 0, 4}), 2e-5, 2e-5);
      CHECK(al.source.find("f32 FMA, 128-bit loads") != std::string::npos);
      CHECK(al.vector_loads > 0);
      CHECK(run_and_compare(misaligned, arch_of(t), same_launch({bm, 64, 32, 0, 4}), 2e-5, 2e-5).vector_loads == 0);
      CHECK(run_and_compare(aligned, arch_of(t), same_launch({bm, 64, 32}), 2e-5, 2e-5).vector_loads == 0);
    }
}

namespace {

// A 16x16x16 product for a matrix helper's lane-layout test: random f16 or bf16 A and B
// (bits) and f32 C; check() holds D to A B + C computed in double precision.
struct FragmentProduct {
  bool bf16;
  std::vector<uint16_t> A, B;
  std::vector<float> C, D;
  FragmentProduct(bool bf, std::mt19937& rng) : bf16(bf), A(256), B(256), C(256), D(256) {
    std::uniform_real_distribution<float> d(-2.f, 2.f);
    for (auto& x : A) x = bf ? k::f32_to_bf16_bits(d(rng)) : k::f32_to_f16_bits(d(rng));
    for (auto& x : B) x = bf ? k::f32_to_bf16_bits(d(rng)) : k::f32_to_f16_bits(d(rng));
    for (auto& x : C) x = d(rng);
  }
  double dec(uint16_t h) const { return bf16 ? k::bf16_bits_to_f32(h) : k::f16_bits_to_f32(h); }
  void check() const {
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        double s = C[i * 16 + j];
        for (int q = 0; q < 16; ++q) s += dec(A[i * 16 + q]) * dec(B[q * 16 + j]);
        INFO("bf16 " << bf16 << " D[" << i << "][" << j << "]");
        CHECK(std::abs(D[i * 16 + j] - s) <= 1e-4 * (1 + std::abs(s)));
      }
  }
};

}  // namespace

TEST_CASE("the emulated MFMA helper follows its documented lane layout (wave64)", "[gpu][emu][mfma]") {
  // One wavefront multiplies a 16x16 A by a 16x16 B plus C, fragments packed by the layout
  // in gpu_prelude.hpp (lane l: r = l % 16, g = l / 16; A[r][4g + q], B[4g + q][r]; D[4g + q][r]).
  const char* kernel = R"(
extern "C" __global__ void mfma_test(const uint16_t* A, const uint16_t* B, const float* C, float* D, int bf) {
  const unsigned int l = threadIdx.x, r = l % 16, g = l / 16;
  uint32_t a[2], b[2];
  float c[4], d[4];
  for (int w = 0; w < 2; ++w) {
    a[w] = (uint32_t)A[r * 16 + 4 * g + 2 * w] | ((uint32_t)A[r * 16 + 4 * g + 2 * w + 1] << 16);
    b[w] = (uint32_t)B[(4 * g + 2 * w) * 16 + r] | ((uint32_t)B[(4 * g + 2 * w + 1) * 16 + r] << 16);
  }
  for (int q = 0; q < 4; ++q) c[q] = C[(4 * g + q) * 16 + r];
  if (bf) lm_mfma_16x16x16_bf16(d, a, b, c); else lm_mfma_16x16x16_f16(d, a, b, c);
  for (int q = 0; q < 4; ++q) D[(4 * g + q) * 16 + r] = d[q];
}
extern "C" void mfma_test_emu(const uint16_t* A, const uint16_t* B, const float* C, float* D, int bf) {
  const dim3 grid = {1u, 1u, 1u}, block = {64u, 1u, 1u};
  auto body = [&]() { mfma_test(A, B, C, D, bf); };
  lm_emu::launch(grid, block, 1, "mfma_test", body);
}
)";
  const gpu::GpuArch arch = arch_of("hip:gfx90a+emu");
  REQUIRE(arch.mfma_f16);
  REQUIRE(arch.mfma_bf16);
  const std::string tu = gpu::emulation_header(arch) + gpu::common_device_code() + gpu::emulation_mfma_helpers() + kernel;
  auto lib = gpu::emulator_jit().compile(tu);
  using Fn = void (*)(const uint16_t*, const uint16_t*, const float*, float*, int);
  std::mt19937 rng(5);
  for (int bf : {0, 1}) {
    FragmentProduct f(bf, rng);
    lib->function<Fn>("mfma_test_emu")(f.A.data(), f.B.data(), f.C.data(), f.D.data(), bf);
    f.check();
  }
}

TEST_CASE("MFMA GEMMs on the emulated gfx90a: f16 and bf16, odd sizes, layouts, 128-bit staging", "[gpu][emu][mfma]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    k::Program p;
    int n = 0;
    for (bool a_t : {false, true})
      for (bool b_kc : {false, true})
        add_gemm(p, std::string("m").append(std::to_string(n++)), dt, 37, 72, 48, 2, Layout{a_t, b_kc, 0, 8});
    add_gemm(p, "odd", dt, 21, 19, 45, 1, Layout{false, false, 3, 1});
    for (auto launch : std::vector<std::vector<int64_t>>{{64, 64, 32, 1, 8}, {32, 32, 32, 1, 1}, {128, 64, 32, 1, 8}}) {
      INFO(dtype_name(dt) << " tile " << launch[0] << "x" << launch[1] << " vec " << launch[4]);
      const Emulated e = run_and_compare(p, arch_of("hip:gfx90a+emu"), same_launch(launch));
      CHECK(e.source.find("matrix cores (mfma 16x16x16") != std::string::npos);
    }
  }
  // gfx908: bf16 through its 16x16x8 form (two per k16 step), f16 as on gfx90a
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO("gfx908 " << dtype_name(dt));
    k::Program p;
    add_gemm(p, "mm", dt, 33, 40, 48, 1, Layout{});
    add_gemm(p, "mt", dt, 37, 72, 32, 2, Layout{true, true, 0, 8});
    const Emulated e = run_and_compare(p, arch_of("hip:gfx908+emu"), same_launch({32, 32, 32, 1, 8}));
    CHECK(e.source.find("matrix cores (mfma 16x16x16") != std::string::npos);
  }
}

TEST_CASE("the emulated WMMA helper follows its documented lane layout (wave32)", "[gpu][emu][wmma]") {
  // One wavefront of 32 multiplies a 16x16 A by a 16x16 B plus C, fragments packed by the
  // layout in gpu_prelude.hpp (lane l: r = l % 16, h = l / 16; a[w] = A[r][2w..2w+1],
  // b[w] = B[2w..2w+1][r]; d[v] = D[2v + h][r]). `bad` makes the upper half-wave hold A
  // shifted by one k-pair, which the instruction does not allow.
  const char* kernel = R"(
extern "C" __global__ void wmma_test(const uint16_t* A, const uint16_t* B, const float* C, float* D, int bf, int bad) {
  const unsigned int l = threadIdx.x, r = l % 16, h = l / 16;
  uint32_t a[8], b[8];
  float c[8], d[8];
  for (int w = 0; w < 8; ++w) {
    const int wa = (bad && h) ? (w + 1) % 8 : w;
    a[w] = (uint32_t)A[r * 16 + 2 * wa] | ((uint32_t)A[r * 16 + 2 * wa + 1] << 16);
    b[w] = (uint32_t)B[(2 * w) * 16 + r] | ((uint32_t)B[(2 * w + 1) * 16 + r] << 16);
  }
  for (int v = 0; v < 8; ++v) c[v] = C[(2 * v + h) * 16 + r];
  if (bf) lm_wmma_16x16x16_bf16(d, a, b, c); else lm_wmma_16x16x16_f16(d, a, b, c);
  for (int v = 0; v < 8; ++v) D[(2 * v + h) * 16 + r] = d[v];
}
extern "C" void wmma_test_emu(const uint16_t* A, const uint16_t* B, const float* C, float* D, int bf, int bad) {
  const dim3 grid = {1u, 1u, 1u}, block = {32u, 1u, 1u};
  auto body = [&]() { wmma_test(A, B, C, D, bf, bad); };
  lm_emu::launch(grid, block, 1, "wmma_test", body);
}
)";
  const gpu::GpuArch arch = arch_of("hip:gfx1100+emu");
  REQUIRE(arch.wmma);
  REQUIRE(arch.warp == 32);
  REQUIRE(!arch.mfma_f16);
  const std::string tu =
      gpu::emulation_header(arch) + gpu::common_device_code() + gpu::emulation_wmma_helpers() + kernel;
  auto lib = gpu::emulator_jit().compile(tu);
  using Fn = void (*)(const uint16_t*, const uint16_t*, const float*, float*, int, int);
  const Fn fn = lib->function<Fn>("wmma_test_emu");
  std::mt19937 rng(6);
  for (int bf : {0, 1}) {
    FragmentProduct f(bf, rng);
    fn(f.A.data(), f.B.data(), f.C.data(), f.D.data(), bf, 0);
    f.check();
    // Half-waves holding different operands: the device would compute garbage, so the
    // emulator aborts (in a child process, so the abort is observed, not suffered).
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      if (std::FILE* null = std::freopen("/dev/null", "w", stderr)) (void)null;
      fn(f.A.data(), f.B.data(), f.C.data(), f.D.data(), bf, 1);
      std::_Exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT));
  }
}

TEST_CASE("WMMA GEMMs on the emulated gfx1100: f16 and bf16, odd sizes, layouts, 128-bit staging",
          "[gpu][emu][wmma]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    k::Program p;
    int n = 0;
    for (bool a_t : {false, true})
      for (bool b_kc : {false, true})
        add_gemm(p, std::string("w").append(std::to_string(n++)), dt, 37, 72, 48, 2, Layout{a_t, b_kc, 0, 8});
    add_gemm(p, "odd", dt, 21, 19, 45, 1, Layout{false, false, 3, 1});
    for (auto launch :
         std::vector<std::vector<int64_t>>{{64, 64, 32, 1, 8}, {32, 32, 32, 1, 1}, {128, 64, 32, 1, 8}}) {
      INFO(dtype_name(dt) << " tile " << launch[0] << "x" << launch[1] << " vec " << launch[4]);
      const Emulated e = run_and_compare(p, arch_of("hip:gfx1100+emu"), same_launch(launch));
      CHECK(e.source.find("matrix cores (wmma 16x16x16") != std::string::npos);
      CHECK(e.source.find("__launch_bounds__(128,") != std::string::npos);
      if (launch[4] > 1) CHECK(e.vector_loads > 0);
    }
  }
}

TEST_CASE("tensor cores only where asked and possible: FMA tiles otherwise", "[gpu][emu][mma]") {
  k::Program p;
  add_gemm(p, "mm", DType::f16, 21, 19, 23, 1, Layout{});
  const gpu::GpuArch sm90 = arch_of("cuda:sm_90+emu");
  // engine 0 (or no 4th element): the FMA tile, halves converted while staging
  CHECK(run_and_compare(p, sm90, same_launch({64, 64, 32})).source.find("f32 FMA") != std::string::npos);
  CHECK(run_and_compare(p, sm90, same_launch({32, 32, 32, 1})).source.find("tensor cores") != std::string::npos);
  // 16 x 16 cannot be split over 8 warps of m16n8 tiles: FMA
  CHECK(run_and_compare(p, sm90, same_launch({16, 16, 16, 1})).source.find("tensor cores") == std::string::npos);
  // HIP has no mma.sync: MFMA on CDNA (gfx90a), FMA on RDNA (gfx1030)
  CHECK(run_and_compare(p, arch_of("hip:gfx90a+emu"), same_launch({32, 32, 32, 1})).source.find("mfma") !=
        std::string::npos);
  CHECK(run_and_compare(p, arch_of("hip:gfx1030+emu"), same_launch({32, 32, 32, 1})).source.find("f32 FMA") !=
        std::string::npos);
  // RDNA3 (gfx1100): WMMA
  CHECK(run_and_compare(p, arch_of("hip:gfx1100+emu"), same_launch({32, 32, 32, 1})).source.find("wmma") !=
        std::string::npos);
}

TEST_CASE("skinny split-K GEMM: decode rows, odd K, both B layouts, scalar and 128-bit", "[gpu][emu][skinny][vector]") {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    k::Program p;
    int n = 0;
    for (int64_t M : {1, 5, 8, 11})
      for (int64_t K : {512, 301})
        for (bool b_kc : {true, false})
          add_gemm(p, std::string("g").append(std::to_string(n++)), dt, M, 45, K, M == 5 ? 2 : 1,
                   Layout{false, b_kc, 0, 0});
    // one with both operands misaligned: scalar loads only
    add_gemm(p, "mis", dt, 3, 40, 256, 1, Layout{false, true, 1, 3});
    for (auto [bn, ks] : {std::pair<int64_t, int64_t>{8, 32}, {32, 8}, {64, 4}})
      for (int64_t vec : {1, 8}) {
        INFO(dtype_name(dt) << " bn " << bn << " ks " << ks << " vec " << vec);
        const Emulated e = run_and_compare(p, arch_of("cuda:sm_90+emu"), same_launch({8, bn, 0, 2, ks, vec}), 2e-4, 2e-4);
        CHECK(e.source.find("gemm, skinny") != std::string::npos);
        CHECK((e.vector_loads > 0) == (vec > 1));
      }
    // Fewer rows per block (gpu_gemm_skinny offers the power of two that holds M): the
    // products of 5, 8 and 11 rows take several row blocks.
    for (int64_t bm : {1, 2, 4}) {
      INFO(dtype_name(dt) << " bm " << bm);
      run_and_compare(p, arch_of("cuda:sm_90+emu"), same_launch({bm, 16, 0, 2, 16, 8}), 2e-4, 2e-4);
    }
    // wave64
    run_and_compare(p, arch_of("hip:gfx90a+emu"), same_launch({8, 16, 0, 2, 16, 8}), 2e-4, 2e-4);
  }
}

TEST_CASE("skinny split-K GEMM: a segmented B, each column range read where it lies",
          "[gpu][emu][skinny][vector]") {
  // matmul-siblings' B = [Wq | Wk | Wv]: column ranges from three buffers (odd widths, so
  // a block's columns straddle segments), each with its own offset and layout; 128-bit
  // loads where a segment is k-contiguous and aligned, scalar where not.
  for (DType dt : {DType::f32, DType::f16}) {
    k::Program p;
    int n = 0;
    for (int64_t M : {1, 3, 8})
      for (bool b_kc : {true, false}) {
        const std::string name = std::string("s").append(std::to_string(n++));
        const int64_t K = 256, widths[3] = {37, 19, 26}, N = 37 + 19 + 26;
        add_gemm(p, name, dt, M, N, K, 1, Layout{false, b_kc, 0, 0});
        k::Gemm& g = *p.kernels.back().gemm;
        int64_t n0 = 0;
        for (int s = 0; s < 3; ++s) {
          const int64_t w = widths[s], off = s == 2 ? 3 : 0;  // the last misaligned
          const int buf = static_cast<int>(p.buffers.size());
          p.buffers.push_back({name + "_b" + std::to_string(s), dt, off + K * w, k::BufferRole::Input});
          k::GemmSegment sg;
          sg.b = b_kc ? k::MatrixView{buf, off, 1, K} : k::MatrixView{buf, off, w, 1};
          sg.n0 = n0;
          g.b_segments.push_back(sg);
          n0 += w;
        }
        g.b = g.b_segments.front().b;
      }
    for (int64_t vec : {1, 8}) {
      INFO(dtype_name(dt) << " vec " << vec);
      const Emulated e =
          run_and_compare(p, arch_of("cuda:sm_90+emu"), same_launch({8, 16, 0, 2, 16, vec}), 2e-4, 2e-4);
      CHECK(e.source.find("lm_j >= ") != std::string::npos);
      CHECK((e.vector_loads > 0) == (vec > 1));
    }
  }
  // Only the skinny GEMM takes one: a tiled launch of a segmented B is an internal error.
  k::Program p;
  add_gemm(p, "t", DType::f16, 16, 8, 32, 1, Layout{});
  p.kernels.back().gemm->b_segments.push_back({p.kernels.back().gemm->b, k::Index(0)});
  CHECK_THROWS_AS(gpu::render_gpu(p, arch_of("cuda:sm_90"), same_launch({32, 32, 32, 1, 8})), InternalError);
}

namespace {
// Turns the last GEMM of `p` (from add_gemm: A [M x K] row-major at offset 0, one batch
// point) into one whose A is computed by a row prologue from that buffer, x: RMSNorm's
// A(i, p) = x[i, p] / sqrt(mean_q x[i, q]^2 + 1e-6) * (1 + p / K) (a sum statistic);
// A(i, p) = x[i, p] - max_q x[i, q] (a max statistic); or, elementwise (no statistic),
// A(i, p) = x[i, p] * (1 + p / K). x stays a program input; B and C are add_gemm's.
enum class Prologue { Sum, Max, Elementwise };
void make_row_prologue(k::Program& p, Prologue kind) {
  const bool sum = kind == Prologue::Sum;
  k::Gemm& g = *p.kernels.back().gemm;
  const int x = g.a.buffer;
  const k::Index K = g.k;
  const DType xt = p.buffers[static_cast<size_t>(x)].dtype;
  auto xv = [&](int row_var, int col_var) {
    k::Expr e = k::load(x, xt, k::Index::var(row_var) * K + k::Index::var(col_var));
    return xt == DType::f32 ? e : k::cast(e, DType::f32);
  };
  k::GemmRowPrologue pr;
  pr.depth_var = 3;
  const k::Expr scale =
      k::binary(k::BinaryOp::Add, k::constant(1.0),
                k::binary(k::BinaryOp::Mul, k::cast(k::index_value(k::Index::var(3)), DType::f32),
                          k::constant(1.0 / static_cast<double>(*K.as_constant()))));
  if (kind == Prologue::Elementwise) {
    pr.a = k::binary(k::BinaryOp::Mul, xv(g.row_var, 3), scale);
    g.a = k::MatrixView{-1, k::Index(0), k::Index(0), k::Index(0)};
    g.a_prologue = pr;
    return;
  }
  k::Loop l;
  l.var = 4;
  l.extent = K;
  pr.stat.loops = {l};
  pr.stat.op = sum ? k::ReduceOp::Sum : k::ReduceOp::Max;
  pr.stat.value = sum ? k::binary(k::BinaryOp::Mul, xv(g.row_var, 4), xv(g.row_var, 4)) : xv(g.row_var, 4);
  pr.a =
      sum ? k::binary(
                k::BinaryOp::Mul,
                k::binary(k::BinaryOp::Mul, xv(g.row_var, 3),
                          k::unary(k::UnaryOp::Recip,
                                   k::unary(k::UnaryOp::Sqrt,
                                            k::binary(k::BinaryOp::Add,
                                                      k::binary(k::BinaryOp::Mul, k::acc(),
                                                                k::constant(1.0 / double(*K.as_constant()))),
                                                      k::constant(1e-6))))),
                scale)
          : k::binary(k::BinaryOp::Sub, xv(g.row_var, 3), k::acc());
  g.a = k::MatrixView{-1, k::Index(0), k::Index(0), k::Index(0)};
  g.a_prologue = pr;
}
}  // namespace

TEST_CASE("skinny GEMM with a row prologue: each block computes its rows' statistic and A itself",
          "[gpu][emu][skinny][prologue]") {
  // RMSNorm (a sum statistic), a max statistic and none (elementwise); one to three rows,
  // K a multiple of the 128-bit step or not (the scalar tail), and longer than the rows of
  // shared memory hold (8500 > 8192 f32 a row at one row, 4096 at two: A a chunk of K at a
  // time, detail::skinny_prologue_chunk), B f32 or f16 in both layouts and segmented,
  // against the evaluator, on wave32 and wave64.
  for (DType dt : {DType::f32, DType::f16}) {
    k::Program p;
    int n = 0;
    for (int64_t M : {1, 3})
      for (int64_t K : {256, 301, 8500})
        for (bool b_kc : {true, false})
          for (Prologue kind : {Prologue::Sum, Prologue::Max, Prologue::Elementwise}) {
            if (K == 8500 && !b_kc) continue;
            add_gemm(p, std::string("r").append(std::to_string(n++)), dt, M, 45, K, 1,
                     Layout{false, b_kc, 0, 0});
            make_row_prologue(p, kind);
          }
    add_gemm(p, "seg", dt, 2, 82, 256, 1, Layout{false, true, 0, 0});
    {
      k::Gemm& g = *p.kernels.back().gemm;
      int64_t n0 = 0;
      for (int64_t w : {37, 45}) {
        const int buf = static_cast<int>(p.buffers.size());
        p.buffers.push_back({"seg_b" + std::to_string(n0), dt, 256 * w, k::BufferRole::Input});
        g.b_segments.push_back({k::MatrixView{buf, 0, 1, 256}, k::Index(n0)});
        n0 += w;
      }
      g.b = g.b_segments.front().b;
    }
    make_row_prologue(p, Prologue::Sum);
    k::validate(p);
    for (int64_t bm : {1, 2})
      for (int64_t vec : {1, 8}) {
        INFO(dtype_name(dt) << " bm " << bm << " vec " << vec);
        const Emulated e =
            run_and_compare(p, arch_of("cuda:sm_90+emu"), same_launch({bm, 8, 0, 2, 32, vec}), 2e-4, 2e-4);
        CHECK(e.source.find("A computed from its rows in shared memory") != std::string::npos);
        // K = 8500 runs in chunks: 8192 at one row, 4096 at two.
        CHECK(e.source.find(bm == 1 ? "8192 of K at a time" : "4096 of K at a time") != std::string::npos);
        CHECK((e.vector_loads > 0) == (vec > 1));
      }
    run_and_compare(p, arch_of("hip:gfx90a+emu"), same_launch({2, 16, 0, 2, 16, 8}), 2e-4, 2e-4);
  }
  // Only the skinny GEMM takes one.
  k::Program p;
  add_gemm(p, "t", DType::f16, 16, 8, 32, 1, Layout{});
  make_row_prologue(p, Prologue::Sum);
  CHECK_THROWS_AS(gpu::render_gpu(p, arch_of("cuda:sm_90"), same_launch({32, 32, 32, 1, 8})), InternalError);
}

// ---------------------------------------------------------------- whole graphs

namespace {

// The launch of the plan's first generated GEMM for `target` (the cost model's choice).
// The generated GEMM paths: the vendor BLAS candidate (gpu-library-gemm, tested in
// library_gemm_test.cpp) is left out, so the search chooses among generated launches.
CompileOptions generated_only() {
  CompileOptions o;
  o.skip_rules = {"gpu-library-gemm"};
  return o;
}

std::vector<int64_t> chosen_launch(const Graph& g, const char* target) {
  compiler::CompiledProgram p = compiler::compile_graph(*g.impl(), Target::parse(target), generated_only());
  for (const auto& st : p.plan->steps)
    if (st.spec->kind == ir::KernelKind::Gemm) return st.spec->launch;
  return {};
}

// The kernel kinds of the program the GPU renderers get for `g` on `target`.
std::vector<k::KernelKind> lowered_kinds(const Graph& g, const char* target) {
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse(target), generated_only()).plan;
  std::vector<k::KernelKind> kinds;
  for (const auto& kn : cpu::lower_plan(*plan, gpu::gpu_lower_options()).prog.kernels) kinds.push_back(kn.kind);
  return kinds;
}

detail::GpuGemmEngine engine_of(const std::vector<int64_t>& l) { return detail::GpuGemmLaunch::from(l).engine; }
// mma.sync (plain or fed by the cp.async ring), MFMA or WMMA
bool tensor_cores(const std::vector<int64_t>& l) {
  const detail::GpuGemmEngine e = engine_of(l);
  return e == detail::GpuGemmEngine::Mma || e == detail::GpuGemmEngine::MmaAsync;
}

std::string launch_string(const std::vector<int64_t>& l) {
  std::string s;
  for (int64_t x : l) {
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(x));
  }
  return "{" + s + "}";
}

// Runs `g` compiled for `target` (an emulated GPU) and the reference interpreter on the
// same inputs (with `fill` applied to them), compares.
void check_graph(const Graph& g, const char* name, const std::function<void(HostTensor&)>& fill = {},
                 const char* target = "cuda:sm_90+emu") {
  auto inputs = test::random_inputs(*g.impl(), 3);
  if (fill)
    for (auto& [n, t] : inputs) fill(t);
  std::map<std::string, const HostTensor*> ptrs;
  for (const auto& [n, v] : inputs) ptrs.emplace(n, &v);
  auto want = detail::reference::run(*g.impl(), {}, ptrs);
  Callable f = compile(g, Target::parse(target), generated_only());
  std::map<std::string, HostTensor> feed;
  for (uint32_t id : g.impl()->params) f.bind(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
  for (uint32_t id : g.impl()->inputs) feed.emplace(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
  auto got = f(feed);
  INFO(name << " on " << target << ": " << f.report().to_string());
  // f16/bf16 results: the accumulation order differs from the interpreter's, so the final
  // rounding to a half may differ by one unit (2^-11 relative for f16, 2^-8 for bf16).
  CHECK(test::compare_outputs(got, want, 1e-2, 8e-3) <= 1.0);
  CHECK(f.report().interpreted_kernels == 0);
}

}  // namespace

TEST_CASE("f16 matmuls reach tensor cores in compiled graphs, chosen by the cost model", "[gpu][emu][mma][graph]") {
  // PyTorch's f16 matmul on a GPU: f16 operands, f32 accumulation, an f16 result. At
  // 512 x 256 x 512 the model prices the tensor-core tile below the FMA tiles and the
  // skinny path (smaller products are launch-bound and may go either way).
  for (DType dt : {DType::f16, DType::bf16}) {
    Graph g;
    g.output("y", matmul(g.input("a", {512, 256}, dt), g.input("b", {256, 512}, dt)));
    const auto l = chosen_launch(g, "cuda:sm_90");
    std::printf("%s 512x256x512 on sm_90: launch %s\n", std::string(dtype_name(dt)).c_str(), launch_string(l).c_str());
    CHECK(tensor_cores(l));
    // ... and the renderers get that GEMM: its f16/bf16 result rounded by the epilogue
    // (lower::Options::half_results), not a row reduction per output element.
    CHECK(lowered_kinds(g, "cuda:sm_90") == std::vector<k::KernelKind>{k::KernelKind::Gemm});
    check_graph(g, "512x256x512");
    // An A100 (sm_80) has mma.sync too, an MI210 (gfx90a) MFMA, an RDNA3 part (gfx1100)
    // WMMA; an RDNA2 part (gfx1030) none.
    CHECK(tensor_cores(chosen_launch(g, "cuda:sm_80")));
    CHECK(tensor_cores(chosen_launch(g, "hip:gfx90a")));
    CHECK(tensor_cores(chosen_launch(g, "hip:gfx908")));
    CHECK(!tensor_cores(chosen_launch(g, "hip:gfx1030")));
    const auto rdna3 = chosen_launch(g, "hip:gfx1100");
    std::printf("%s 512x256x512 on gfx1100: launch %s\n", std::string(dtype_name(dt)).c_str(),
                launch_string(rdna3).c_str());
    CHECK(tensor_cores(rdna3));
    check_graph(g, "512x256x512", {}, "hip:gfx1100+emu");
  }
  {  // MI100 (gfx908) runs bf16 MFMA at half its f16 rate (92.3 against 184.6 TFLOPS); an
     // MI210 (gfx90a) at one rate: a compute-bound product is priced so.
    auto estimate = [](DType dt, const char* target) {
      Graph g;
      g.output("y", matmul(g.input("a", {4096, 4096}, dt), g.input("b", {4096, 4096}, dt)));
      return compiler::compile_graph(*g.impl(), Target::parse(target), {}).report.estimated_seconds;
    };
    const double f16_908 = estimate(DType::f16, "hip:gfx908"), bf16_908 = estimate(DType::bf16, "hip:gfx908");
    std::printf("4096^3 on gfx908: f16 %.3g s, bf16 %.3g s (estimates)\n", f16_908, bf16_908);
    CHECK(bf16_908 > 1.5 * f16_908);
    CHECK(estimate(DType::bf16, "hip:gfx90a") == Approx(estimate(DType::f16, "hip:gfx90a")).epsilon(0.05));
  }
  {  // f32 operands never take tensor cores
    Graph g;
    g.output("y", matmul(g.input("a", {512, 256}), g.input("b", {256, 512})));
    CHECK(!tensor_cores(chosen_launch(g, "cuda:sm_90")));
  }
  {  // 4096^3 (compile only): tensor cores fed by the cp.async ring (sm_80+)
    Graph g;
    g.output("y", matmul(g.input("a", {4096, 4096}, DType::f16), g.param("w", {4096, 4096}, DType::f16)));
    for (const char* t : {"cuda:sm_90", "cuda:sm_80"}) {
      const auto l = chosen_launch(g, t);
      std::printf("f16 4096^3 on %s: launch %s\n", t, launch_string(l).c_str());
      CHECK(engine_of(l) == detail::GpuGemmEngine::MmaAsync);
    }
    // gfx1100: WMMA, in a tile within the 128 VGPRs a gfx11 thread gets (the larger ones
    // spill: "[clang][wmma]")
    const auto r = chosen_launch(g, "hip:gfx1100");
    std::printf("f16 4096^3 on gfx1100: launch %s\n", launch_string(r).c_str());
    CHECK(tensor_cores(r));
    CHECK(detail::GpuGemmLaunch::from(r).bm * detail::GpuGemmLaunch::from(r).bn <= 64 * 64);
  }
}

TEST_CASE("f16 matmuls on the emulator: odd sizes, transposed operands, batches, edge values", "[gpu][emu][mma][graph]") {
  {  // odd sizes, every side off the tile
    Graph g;
    g.output("y", matmul(g.input("a", {67, 45}, DType::f16), g.input("b", {45, 33}, DType::f16)));
    check_graph(g, "odd");
  }
  {  // transposed operands (views read in place as halves)
    Graph g;
    auto a = g.input("a", {40, 70}, DType::f16), b = g.input("b", {50, 40}, DType::f16);
    g.output("y", matmul(a.transpose(0, 1), b.transpose(0, 1)));
    check_graph(g, "transposed");
  }
  {  // batches, a broadcast weight, an f16 linear with bias
    Graph g;
    auto x = g.input("x", {3, 37, 48}, DType::f16);
    g.output("y", matmul(x, g.param("w", {48, 40}, DType::f16)));
    g.output("z", linear(x, g.param("w2", {24, 48}, DType::f16), g.param("bias", {24}, DType::f16)));
    check_graph(g, "batched + linear");
  }
  {  // edge values: +-0, inf, NaN, the largest halves (f32 accumulation does not overflow)
    Graph g;
    g.output("y", matmul(g.input("a", {33, 40}, DType::f16), g.input("b", {40, 35}, DType::f16)));
    check_graph(g, "edge values", [](HostTensor& t) {
      auto* h = reinterpret_cast<uint16_t*>(t.mutable_data());
      const uint16_t edges[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7bff, 0xfbff, 0x0001};
      for (int64_t i = 0; i < t.numel(); i += 97) h[i] = edges[(i / 97) % 8];
    });
  }
}

TEST_CASE("one token's RMSNorm and f32 projection: one skinny GEMM with a row prologue",
          "[gpu][emu][skinny][graph]") {
  // A vector times an f32 matrix on the few-rows engine (what the model prices) -- the
  // lowering once left it to generic loops, a statistic kernel and a row reduction.
  Graph g;
  Tensor x = g.input("x", {1, 512});
  g.output("y", linear(rms_norm(x, g.param("norm", {512})), g.param("w", {384, 512})));
  CHECK(engine_of(chosen_launch(g, "cuda:sm_90")) == detail::GpuGemmEngine::Skinny);
  CHECK(lowered_kinds(g, "cuda:sm_90") == std::vector<k::KernelKind>{k::KernelKind::Gemm});
  check_graph(g, "RMSNorm + f32 linear at one token");
  check_graph(g, "RMSNorm + f32 linear at one token", {}, "hip:gfx90a+emu");
}

TEST_CASE("one token's SwiGLU and down projection: one skinny GEMM computing A elementwise",
          "[gpu][emu][skinny][graph][prologue]") {
  // silu(gate) * up feeds the product: the few-rows GEMM computes it once per block, a
  // chunk of K at a time (8300 > 8192 floats of shared memory a row), where a row kernel
  // would compute silu once per weight element and a staged operand costs a launch. W
  // (53 MB) does not fit the H100's L2. Against the reference on both emulators.
  Graph g;
  Tensor gate = g.input("gate", {1, 8300}, DType::f16), up = g.input("up", {1, 8300}, DType::f16);
  g.output("y", linear(silu(gate) * up, g.param("w", {3200, 8300}, DType::f16)));
  CHECK(engine_of(chosen_launch(g, "cuda:sm_90")) == detail::GpuGemmEngine::Skinny);
  CHECK(lowered_kinds(g, "cuda:sm_90") == std::vector<k::KernelKind>{k::KernelKind::Gemm});
  check_graph(g, "SwiGLU + down at one token");
  check_graph(g, "SwiGLU + down at one token", {}, "hip:gfx90a+emu");
}

TEST_CASE("decode-shaped f16 GEMMs take the skinny split-K path with 128-bit loads", "[gpu][emu][skinny][graph]") {
  for (int64_t m : {2, 4, 8}) {
    Graph g;
    g.output("y", linear(g.input("x", {m, 1024}, DType::f16), g.param("w", {96, 1024}, DType::f16)));
    const auto l = chosen_launch(g, "cuda:sm_90");
    std::printf("linear M=%lld K=1024 N=96 f16 on sm_90: launch %s\n", static_cast<long long>(m), launch_string(l).c_str());
    CHECK(engine_of(l) == detail::GpuGemmEngine::Skinny);
    CHECK(detail::GpuGemmLaunch::from(l).vec > 1);
    check_graph(g, "decode linear");
  }
  {  // M = 1: the search forms a dot-product reduction (K split across a block's threads)
    Graph g;
    g.output("y", linear(g.input("x", {1, 1024}, DType::f16), g.param("w", {96, 1024}, DType::f16)));
    check_graph(g, "M = 1 linear");
  }
  {  // Llama-3-8B projection sizes (compile only): streaming the 117 MB of W bounds both
     // the skinny GEMM and the cp.async ring (112 blocks of 128 columns, the tensor pipe
     // idle on 124 of 128 rows but fast enough), which the model prices alike; never the
     // plain tiles, which wait for every k-tile's loads.
    Graph g;
    g.output("y", linear(g.input("x", {4, 4096}, DType::f16), g.param("w", {14336, 4096}, DType::f16)));
    const auto l = chosen_launch(g, "cuda:sm_90");
    std::printf("linear M=4 K=4096 N=14336 f16 on sm_90: launch %s\n", launch_string(l).c_str());
    CHECK((engine_of(l) == detail::GpuGemmEngine::Skinny || engine_of(l) == detail::GpuGemmEngine::MmaAsync));
  }
}

TEST_CASE("hipRTC: MFMA GEMMs compile for gfx90a and gfx908 (f16, bf16)", "[gpu][hiprtc][mfma]") {
  std::string why;
  if (!hip::hiprtc_available(&why)) {
    WARN("hipRTC is not available here (" << why << "); skipped");
    return;
  }
  for (const char* arch : {"gfx90a", "gfx908"}) {
    k::Program p;
    add_gemm(p, "f16_128", DType::f16, 4096, 4096, 4096, 1, Layout{false, true, 0, 0});
    add_gemm(p, "f16_64", DType::f16, 4096, 4096, 4096, 1, Layout{true, false, 0, 0});
    add_gemm(p, "bf16_64", DType::bf16, 4096, 4096, 4096, 1, Layout{});
    const gpu::GpuSource src =
        gpu::render_gpu(p, arch_of((std::string("hip:") + arch).c_str()), [&](const k::Kernel& kk) {
          return kk.name == "f16_128" ? std::vector<int64_t>{128, 128, 32, 1, 8} : std::vector<int64_t>{64, 64, 32, 1, 8};
        });
    REQUIRE(src.kernels.find("matrix cores (mfma") != std::string::npos);
    // The bf16 helper: the _1k form on gfx90a, two 16x16x8 products on gfx908.
    const std::string dev = src.device_source();
    CHECK((dev.find("mfma_f32_16x16x8bf16(") != std::string::npos) == (std::string(arch) == "gfx908"));
    CHECK((dev.find("mfma_f32_16x16x16bf16_1k(") != std::string::npos) == (std::string(arch) == "gfx90a"));
    const hip::HipModule m = hip::compile_module(src.device_source(), arch);
    CHECK(!m.image.empty());
    std::printf("hipRTC %s: MFMA GEMM module %zu bytes\n", arch, m.image.size());
    for (const auto& r : m.resources) {  // from the code object's metadata
      std::printf("  %s: %d VGPRs, %d B LDS, %d B spilled\n", r.name.c_str(), r.registers, r.shared_bytes, r.spill_bytes);
      CHECK(r.spill_bytes == 0);
    }
  }
}

TEST_CASE("clang: WMMA GEMMs compile for gfx1100 (f16, bf16), which ROCm 5.2's hipRTC refuses",
          "[gpu][clang][wmma]") {
  // hipRTC 5.2 refuses gfx11 (its comgr does not know it: a CompileError naming ROCm 5.4);
  // a hipRTC from ROCm 5.4 on compiles the same source. Here the device source is compiled
  // as hipRTC would (the HIP headers pre-included, device code only) by the AMDGPU clang
  // Debian's hipcc uses, and the WMMA instructions are checked in its assembly.
#ifndef LUMINAL_HIP_CLANG
  WARN("no AMDGPU clang was found at configure time (Debian: clang-15, with hipcc); skipped");
#else
  if (!std::filesystem::exists("/usr/include/hip/hip_runtime.h")) {
    WARN("the HIP headers are not installed (/usr/include/hip); skipped");
    return;
  }
  // Every tile of the rules (kMmaTiles), as the renderer emits it for gfx1100.
  const std::vector<std::vector<int64_t>> tiles{
      {128, 128, 32, 1, 8}, {128, 64, 32, 1, 8}, {64, 128, 32, 1, 1}, {64, 64, 32, 1, 8}, {32, 32, 32, 1, 1}};
  k::Program p;
  for (size_t i = 0; i < tiles.size(); ++i)
    add_gemm(p, std::string("t").append(std::to_string(i)), i % 2 ? DType::bf16 : DType::f16, 4096, 4096,
             4096, 1, Layout{i == 2, i != 1, 0, 0});
  add_gemm(p, "bf16_64", DType::bf16, 4096, 4096, 4096, 1, Layout{});
  const gpu::GpuSource src = gpu::render_gpu(p, arch_of("hip:gfx1100"), [&](const k::Kernel& kk) {
    return kk.name[0] == 't' ? tiles[static_cast<size_t>(kk.name[1] - '0')]
                             : std::vector<int64_t>{64, 64, 32, 1, 8};
  });
  REQUIRE(src.kernels.find("matrix cores (wmma") != std::string::npos);
  testsupport::TempDir dir("wmma");
  const auto hip = dir.path / "wmma.hip", asm_file = dir.path / "wmma.s", log = dir.path / "log.txt";
  {
    std::ofstream f(hip);
    f << src.device_source();
  }
  // The device libraries (ROCm 5.2 ships no gfx1100 ISA-version file, so the driver's own
  // device-library link fails): hip, ockl and ocml linked by hand, as hipRTC links them, so
  // barriers and threadIdx reads are not external calls (for which the backend reserves a 16 KiB
  // stack and report it as scratch).
  std::string libs;
  for (const char* bc : {"hip.bc", "ockl.bc", "ocml.bc", "oclc_wavefrontsize64_off.bc", "oclc_daz_opt_off.bc",
                         "oclc_finite_only_off.bc", "oclc_unsafe_math_off.bc",
                         "oclc_correctly_rounded_sqrt_on.bc", "oclc_abi_version_400.bc"}) {
    const std::filesystem::path f = std::filesystem::path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode") / bc;
    if (std::filesystem::exists(f)) libs += " -Xclang -mlink-builtin-bitcode -Xclang " + f.string();
  }
  const std::string cmd = std::string(LUMINAL_HIP_CLANG) +
                          " --rocm-path=/usr -x hip --offload-arch=gfx1100 --cuda-device-only -nogpulib"
                          " -include hip/hip_runtime.h -O3 -Rpass-analysis=kernel-resource-usage -S -o " +
                          asm_file.string() + libs + " " + hip.string() + " 2> " + log.string();
  const int rc = std::system(cmd.c_str());
  std::ifstream lf(log), af(asm_file);
  const std::string log_text((std::istreambuf_iterator<char>(lf)), {}),
      asm_text((std::istreambuf_iterator<char>(af)), {});
  INFO(cmd << "\n" << log_text.substr(0, 4000));
  REQUIRE(rc == 0);
  // Both helpers became the instruction (not a library call or an emulation).
  CHECK(asm_text.find("v_wmma_f32_16x16x16_f16") != std::string::npos);
  CHECK(asm_text.find("v_wmma_f32_16x16x16_bf16") != std::string::npos);
  // Symbols the kernels reach outside themselves (a call makes the backend reserve a stack).
  std::set<std::string> external;
  for (size_t at = asm_text.find("@rel32@lo"); at != std::string::npos;
       at = asm_text.find("@rel32@lo", at + 1)) {
    const size_t from = asm_text.find_last_of(" ,\t", at) + 1;
    external.insert(asm_text.substr(from, at - from));
  }
  std::string ext_list;
  for (const auto& e : external) ext_list += " " + e;
  INFO("symbols referenced:" << ext_list);
  CHECK(external.empty());
  // The cost model's register estimate against the compiler's: a tile it accepts (within
  // the 128 VGPRs LLVM 15 gives a gfx11 thread) compiles without spills in at most the
  // registers it was priced with; a tile that spills is one it prices +inf.
  const detail::TargetDesc t = detail::describe_gpu("gfx1100");
  const auto res = hip::parse_amdgpu_remarks(log_text);
  REQUIRE(res.size() == tiles.size() + 1);
  for (const auto& r : res) {
    const std::vector<int64_t> tile =
        r.name[0] == 't' ? tiles[static_cast<size_t>(r.name[1] - '0')] : tiles[3];
    const detail::GpuBlock b = detail::matrix_gemm_block(t, tile[0], tile[1]);
    const bool accepted = detail::resident_blocks(t, b) > 0;
    std::printf("clang gfx1100 %s (%lldx%lld): %d VGPRs (model %d, %s), %d B LDS, %d B spilled\n",
                r.name.c_str(), static_cast<long long>(tile[0]), static_cast<long long>(tile[1]), r.registers,
                b.registers, accepted ? "accepted" : "rejected", r.shared_bytes, r.spill_bytes);
    INFO(r.name);
    CHECK(r.shared_bytes == b.shared_bytes);
    if (accepted) {
      CHECK(r.spill_bytes == 0);
      CHECK(r.registers <= b.registers);
    }
    if (r.spill_bytes > 0) CHECK(!accepted);
  }
#endif
}

TEST_CASE("NVRTC: tensor-core, 128-bit and skinny GEMMs compile without spills", "[gpu][nvrtc][mma][skinny]") {
  if (!gpu_test::have_nvrtc()) return;
  k::Program p;
  add_gemm(p, "tc128", DType::f16, 4096, 4096, 4096, 1, Layout{false, true, 0, 0});
  add_gemm(p, "tc64", DType::bf16, 4096, 4096, 4096, 1, Layout{true, false, 0, 0});
  add_gemm(p, "skinny", DType::f16, 1, 14336, 4096, 1, Layout{false, true, 0, 0});
  // bm = 1 and 2: the pair loop (two K steps' loads in flight).
  add_gemm(p, "skinny1", DType::f16, 1, 14336, 4096, 1, Layout{false, true, 0, 0});
  add_gemm(p, "skinny2", DType::bf16, 2, 14336, 4096, 1, Layout{false, true, 0, 0});
  // A decode step's Q|K|V product: B in three segments (Wq, Wk, Wv where they lie).
  add_gemm(p, "qkv", DType::f16, 1, 6144, 4096, 1, Layout{false, true, 0, 0});
  {
    k::Gemm& g = *p.kernels.back().gemm;
    int64_t n0 = 0;
    for (int64_t w : {4096, 1024, 1024}) {
      const int buf = static_cast<int>(p.buffers.size());
      p.buffers.push_back({"qkv_w" + std::to_string(n0), DType::f16, w * 4096, k::BufferRole::Input});
      g.b_segments.push_back({k::MatrixView{buf, 0, 1, 4096}, k::Index(n0)});
      n0 += w;
    }
    g.b = g.b_segments.front().b;
  }
  // The same with RMSNorm computed by the blocks (Gemm::a_prologue): 16 KB of A in shared memory.
  add_gemm(p, "qkv_norm", DType::f16, 1, 6144, 4096, 1, Layout{false, true, 0, 0});
  make_row_prologue(p, Prologue::Sum);
  // A decode step's down product computing its A elementwise (SwiGLU's place), K = 14336
  // in two chunks of shared memory.
  add_gemm(p, "down_ew", DType::f16, 1, 4096, 14336, 1, Layout{false, true, 0, 0});
  make_row_prologue(p, Prologue::Elementwise);
  std::map<std::string, std::vector<int64_t>> launch{
      {"qkv_norm", {1, 8, 0, 2, 32, 8}}, {"down_ew", {1, 8, 0, 2, 32, 8}}, {"tc128", {128, 128, 32, 1, 8}},
      {"tc64", {64, 64, 32, 1, 8}},      {"skinny", {8, 16, 0, 2, 16, 8}}, {"skinny1", {1, 8, 0, 2, 32, 8}},
      {"skinny2", {2, 16, 0, 2, 16, 8}}, {"qkv", {1, 8, 0, 2, 32, 8}}};
  // Every ldmatrix + cp.async alternative the rules offer (schedule_gpu.cpp), x @ W^T
  // ([k] contiguous operands) and A @ B (B's rows contiguous: ldmatrix .trans).
  const std::vector<std::vector<int64_t>> rings{
      {128, 256, 32, 3, 8, 2, 64, 64}, {128, 128, 32, 3, 8, 3, 64, 64}, {128, 128, 32, 3, 8, 3, 64, 32},
      {128, 64, 32, 3, 8, 4, 64, 32},  {64, 128, 32, 3, 8, 4, 32, 64},  {64, 64, 32, 3, 8, 4, 32, 32}};
  for (size_t i = 0; i < rings.size(); ++i) {
    const std::string name = "ring" + std::to_string(i);
    add_gemm(p, name, i % 2 ? DType::bf16 : DType::f16, 4096, 4096, 4096, 1, Layout{false, i % 2 == 0, 0, 0});
    launch[name] = rings[i];
  }
  for (const char* arch : {"sm_80", "sm_90"}) {
    const gpu::GpuSource src = gpu::render_gpu(p, arch_of((std::string("cuda:") + arch).c_str()),
                                               [&](const k::Kernel& kk) { return launch.at(kk.name); });
    const cuda::CudaModule m = cuda::compile_module(src.device_source(), arch, true);
    REQUIRE(m.resources.size() == 8 + rings.size());
    const detail::TargetDesc t = detail::describe_gpu(arch);
    for (const auto& r : m.resources) {
      std::printf("%s %s: %d registers, %d B shared, %d B spilled\n", arch, r.name.c_str(), r.registers,
                  r.shared_bytes, r.spill_bytes);
      CHECK(r.spill_bytes == 0);
      if (r.name.rfind("ring", 0) != 0) continue;
      // The cost model's block for the ring: its shared ring as compiled, and as many
      // blocks resident on an SM as the compiled kernel's registers allow.
      const detail::GpuBlock model = detail::mma_async_block(detail::GpuGemmLaunch::from(launch.at(r.name)));
      detail::GpuBlock compiled = model;
      compiled.registers = r.registers;
      INFO(r.name << ": model " << model.registers << " registers");
      CHECK(r.shared_bytes == model.shared_bytes);
      CHECK(detail::resident_blocks(t, compiled) == detail::resident_blocks(t, model));
    }
    // The 128-bit loads are vector loads in the PTX (not split into scalars by ptxas).
    const cuda::CudaModule ptx = cuda::compile_module(src.device_source(), arch, false);
    CHECK(ptx.image.find(".v4.u32") != std::string::npos);
    CHECK(ptx.image.find("cp.async.cg.shared.global") != std::string::npos);
    CHECK(ptx.image.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") != std::string::npos);
    CHECK(ptx.image.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16") != std::string::npos);
  }
}
