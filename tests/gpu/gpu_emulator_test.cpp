// The emulator against the kernel IR evaluator, kernel by kernel: every schedule of the
// GPU renderer (rows per thread / warp / block, GEMM tiles, grid-stride loops, symbolic
// dims, padding), wave32 and wave64, and the tensor-core helper's lane layout. Then the
// translation-validation graphs and the backend-ops graph on the emulated targets.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <set>

#include "backends/cpu/cpu_program.hpp"
#include "backends/gpu/emu_header.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/gpu/gpu_prelude.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "compiler/translation_models.hpp"
#include "cost/gpu_launch.hpp"
#include "cpu/harness.hpp"
#include "gpu/gpu_test_util.hpp"
#include "support/scoped_env.hpp"

namespace k = luminal::kernel;
using namespace luminal;
using cpu_test::buf;
using gpu_test::arch_of;

namespace {

// Renders `p` for `arch`, runs it on the emulator, compares every written buffer with the
// evaluator. Returns the device source; `vector_loads`, when given, receives the 128-bit
// and 64-bit loads the run made.
std::string check_emulated(const k::Program& p, const std::map<std::string, int64_t>& syms,
                           const gpu::GpuArch& arch, std::vector<int64_t> launch = {}, double rtol = 2e-5,
                           double atol = 2e-6, const std::function<void(cpu_test::HostBuffers&)>& fill = {},
                           unsigned long long* vector_loads = nullptr) {
  cpu_test::HostBuffers ref = cpu_test::allocate(p, syms, 42), got = cpu_test::allocate(p, syms, 42);
  if (fill) {
    fill(ref);
    fill(got);
  }
  k::evaluate(p, ref.ptrs(), syms);
  const gpu::GpuSource src = gpu::render_gpu(p, arch, [&](const k::Kernel&) { return launch; });
  auto lib = gpu::emulator_jit().compile(gpu::emulation_source(src, p, arch));
  std::vector<int64_t> sv;
  for (const auto& s : p.symbols) sv.push_back(syms.at(s));
  auto ptrs = got.ptrs();
  for (const auto& l : src.launches) lib->function<cpu::KernelFn>(l.name + "_emu")(ptrs.data(), sv.data(), nullptr, nullptr);
  for (size_t bi = 0; bi < p.buffers.size(); ++bi) {
    const auto& b = p.buffers[bi];
    if (b.role == k::BufferRole::Input || b.role == k::BufferRole::Param) continue;
    const int64_t n = b.elements.evaluate({}, syms);
    for (int64_t i = 0; i < n; ++i) {
      const double r = cpu_test::element(b, ref.bytes[bi], i), g = cpu_test::element(b, got.bytes[bi], i);
      if ((std::isnan(r) && std::isnan(g)) || r == g) continue;
      if (!(std::abs(r - g) <= atol + rtol * std::abs(r))) {
        INFO("buffer " << b.name << " element " << i << ": evaluator " << r << ", emulated " << g);
        INFO(src.kernels);
        REQUIRE(std::abs(r - g) <= atol + rtol * std::abs(r));
      }
    }
  }
  if (vector_loads) *vector_loads = lib->function<unsigned long long (*)()>("lm_emu_ld128_count")();
  return src.device_source();
}

k::Loop loop(int var, k::Index extent) {
  k::Loop l;
  l.var = var;
  l.extent = extent;
  return l;
}

// out[r] = epilogue(reduce_j x[r * len + j]) over `rows` x `len`.
k::Program row_reduction(k::Index rows, k::Index len, k::ReduceOp op, DType dt) {
  k::Program p;
  p.buffers.push_back(buf("x", dt, rows * len, k::BufferRole::Input));
  p.buffers.push_back(buf("y", dt == DType::i32 ? DType::i32 : DType::f32, rows, k::BufferRole::Output));
  k::Kernel kk;
  kk.name = "red";
  kk.kind = k::KernelKind::Reduction;
  kk.loops.push_back(loop(0, rows));
  k::Reduction r;
  r.op = op;
  r.acc_dtype = dt == DType::i32 ? DType::i32 : DType::f32;
  r.loops.push_back(loop(1, len));
  k::Expr x = k::load(0, dt, k::Index::var(0) * len + k::Index::var(1));
  r.value = dt == DType::i32 ? x : k::unary(k::UnaryOp::Sin, x);
  kk.reduce = r;
  kk.store.buffer = 1;
  kk.store.index = k::Index::var(0);
  kk.store.value = dt == DType::i32 ? k::acc(DType::i32)
                                    : k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.5));
  p.kernels.push_back(kk);
  return p;
}

}  // namespace

TEST_CASE("emulated reductions: a row per thread, warp and block, wave32 and wave64", "[gpu][emu]") {
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    const gpu::GpuArch arch = arch_of(t);
    INFO(t);
    for (int64_t per : {1, 3, 2})  // thread, warp, block
      for (auto [rows, len] : {std::pair<int64_t, int64_t>{1000, 7}, {300, 300}, {5, 5000}, {3, 0}, {0, 4}}) {
        INFO("per " << per << " rows " << rows << " len " << len);
        check_emulated(row_reduction(rows, len, k::ReduceOp::Sum, DType::f32), {}, arch, {per}, 1e-4, 1e-4);
        check_emulated(row_reduction(rows, len, k::ReduceOp::Max, DType::f32), {}, arch, {per});
        check_emulated(row_reduction(rows, len, k::ReduceOp::Sum, DType::i32), {}, arch, {per});
      }
  }
  // symbolic rows and lengths: dims are kernel arguments
  k::Program p = row_reduction(k::Index::sym("R"), k::Index::sym("L"), k::ReduceOp::Sum, DType::f32);
  p.symbols = {"L", "R"};
  check_emulated(p, {{"R", 77}, {"L", 129}}, arch_of("cuda:sm_80+emu"), {}, 1e-4, 1e-4);
}

namespace {

// Three accumulators over one walk of each row (kernel::Reduction::more): sum of sin(x)
// (f32), max of x (f32, NaN propagating), sum of n (i32, wrapping), the store reading all
// three: y[r] = acc * 0.5 + acc1 + f32(acc2).
k::Program row_accumulators_program(k::Index rows, k::Index len) {
  k::Program p;
  p.buffers.push_back(buf("x", DType::f32, rows * len, k::BufferRole::Input));
  p.buffers.push_back(buf("n", DType::i32, rows * len, k::BufferRole::Input));
  p.buffers.push_back(buf("y", DType::f32, rows, k::BufferRole::Output));
  k::Kernel kk;
  kk.name = "red3";
  kk.kind = k::KernelKind::Reduction;
  kk.loops.push_back(loop(0, rows));
  const k::Index at = k::Index::var(0) * len + k::Index::var(1);
  const k::Expr x = k::load(0, DType::f32, at);
  k::Reduction r;
  r.op = k::ReduceOp::Sum;
  r.loops.push_back(loop(1, len));
  r.value = k::unary(k::UnaryOp::Sin, x);
  r.more.push_back({k::ReduceOp::Max, x, DType::f32});
  r.more.push_back({k::ReduceOp::Sum, k::load(1, DType::i32, at), DType::i32});
  kk.reduce = r;
  kk.store.buffer = 2;
  kk.store.index = k::Index::var(0);
  kk.store.value =
      k::binary(k::BinaryOp::Add,
                k::binary(k::BinaryOp::Add, k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.5)),
                          k::acc(DType::f32, 1)),
                k::cast(k::acc(DType::i32, 2), DType::f32));
  p.kernels.push_back(kk);
  k::validate(p);
  return p;
}

}  // namespace

TEST_CASE("emulated row reductions with several accumulators: each its op and type", "[gpu][emu]") {
  // A NaN in row 1 (the max propagates it; the sum of sines too), i32 values that wrap.
  auto fill = [](cpu_test::HostBuffers& b) {
    auto* x = reinterpret_cast<float*>(b.bytes[0].data());
    auto* n = reinterpret_cast<int32_t*>(b.bytes[1].data());
    const size_t xs = (b.bytes[0].size() - 64) / 4;
    for (size_t i = 0; i < xs; ++i) n[i] = i % 3 == 0 ? 2147483647 : static_cast<int32_t>(i % 7) - 3;
    if (xs > 40) x[37] = std::numeric_limits<float>::quiet_NaN();
  };
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    const gpu::GpuArch arch = arch_of(t);
    INFO(t);
    for (int64_t per : {1, 3, 2})  // thread, warp, block
      for (auto [rows, len] : {std::pair<int64_t, int64_t>{300, 30}, {5, 5000}, {3, 0}, {0, 4}}) {
        INFO("per " << per << " rows " << rows << " len " << len);
        const std::string src =
            check_emulated(row_accumulators_program(rows, len), {}, arch, {per}, 1e-4, 1e-4, fill);
        CHECK(src.find("lm_acc2") != std::string::npos);
      }
  }
  // The checker counts them: a store reading acc3 of three accumulators is an error.
  k::Program bad = row_accumulators_program(4, 4);
  bad.kernels[0].store.value = k::acc(DType::f32, 3);
  CHECK_THROWS_WITH(k::validate(bad), Catch::Contains("acc3 read where the kernel has 3 accumulator(s)"));
}

TEST_CASE("emulated row reductions read contiguous rows 128 bits at a time, where aligned", "[gpu][emu]") {
  // y[r] = sum_j f32(x[r, j]) * w[j] + max_j f32(x[r, j]): x f16 along the rows (8 halves
  // a vector), w f32 shared by the rows (4 floats a vector). A row of 4100 halves puts
  // every odd row 8 bytes off 16: those rows, and the last len % 8 elements of every row,
  // go element by element.
  auto program = [](int64_t rows, int64_t len) {
    k::Program p;
    p.buffers.push_back(buf("x", DType::f16, k::Index(rows * len), k::BufferRole::Input));
    p.buffers.push_back(buf("w", DType::f32, k::Index(len), k::BufferRole::Input));
    p.buffers.push_back(buf("y", DType::f32, k::Index(rows), k::BufferRole::Output));
    k::Kernel kk;
    kk.name = "rowdot";
    kk.kind = k::KernelKind::Reduction;
    kk.loops.push_back(loop(0, rows));
    const k::Expr x =
        k::cast(k::load(0, DType::f16, k::Index::var(0) * k::Index(len) + k::Index::var(1)), DType::f32);
    k::Reduction r;
    r.loops.push_back(loop(1, len));
    r.value = k::binary(k::BinaryOp::Mul, x, k::load(1, DType::f32, k::Index::var(1)));
    r.more.push_back({k::ReduceOp::Max, x, DType::f32});
    kk.reduce = r;
    kk.store = {2, k::Index::var(0), k::binary(k::BinaryOp::Add, k::acc(), k::acc(DType::f32, 1))};
    p.kernels.push_back(kk);
    return p;
  };
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    const gpu::GpuArch arch = arch_of(t);
    for (int64_t per : {3, 2})  // warp, block
      for (auto [rows, len] : {std::pair<int64_t, int64_t>{6, 4096}, {5, 4100}, {4, 13}, {3, 5}}) {
        INFO(t << " per " << per << " rows " << rows << " len " << len);
        unsigned long long loads = 0;
        const std::string src = check_emulated(program(rows, len), {}, arch, {per}, 1e-4, 1e-4, {}, &loads);
        CHECK(src.find("128-bit loads") != std::string::npos);
        // x: one vector per 8 elements, w: two; only aligned rows, whole groups.
        const int64_t aligned_rows = len % 8 == 0 ? rows : len == 4100 ? (rows + 1) / 2 : 1;  // (13: row 0)
        CHECK(loads == static_cast<unsigned long long>(aligned_rows * (len / 8) * 3));
      }
  }
}

TEST_CASE("emulated i32 sums wrap around like PyTorch", "[gpu][emu]") {
  k::Program p = row_reduction(2, 4, k::ReduceOp::Sum, DType::i32);
  const gpu::GpuSource src = gpu::render_gpu(p, arch_of("cuda:sm_90"));
  const gpu::GpuArch arch = arch_of("cuda:sm_90+emu");
  auto lib = gpu::emulator_jit().compile(gpu::emulation_source(src, p, arch));
  std::vector<int32_t> x{2147483647, 1, 0, 0, -2147483647 - 1, -1, 5, -5};
  std::vector<int32_t> y(2, 7);
  void* bufs[] = {x.data(), y.data()};
  lib->function<cpu::KernelFn>("red_emu")(bufs, nullptr, nullptr, nullptr);
  CHECK(y[0] == -2147483647 - 1);  // INT_MAX + 1 wraps
  CHECK(y[1] == 2147483647);       // INT_MIN - 1 wraps
}

TEST_CASE("emulated GEMMs: every tile alternative, edges, strides, batches, epilogue", "[gpu][emu]") {
  const int64_t M = 37, N = 45, K = 29, B = 2;
  k::Program p;
  p.buffers.push_back(buf("a", DType::f32, B * M * K, k::BufferRole::Input));
  p.buffers.push_back(buf("b", DType::f32, K * N, k::BufferRole::Input));
  p.buffers.push_back(buf("bias", DType::f32, N, k::BufferRole::Input));
  p.buffers.push_back(buf("c", DType::f32, B * M * N, k::BufferRole::Output));
  k::Kernel kk;
  kk.name = "mm";
  kk.kind = k::KernelKind::Gemm;
  kk.loops.push_back(loop(0, B));
  k::Gemm g;
  g.m = M;
  g.n = N;
  g.k = K;
  // A transposed: element (i, p) of batch b at b*M*K + p*M + i
  g.a = {0, k::Index::var(0) * (M * K), 1, M};
  g.b = {1, 0, N, 1};
  g.c = {3, k::Index::var(0) * (M * N), N, 1};
  g.row_var = 1;
  g.col_var = 2;
  g.epilogue = k::unary(k::UnaryOp::Sin, k::binary(k::BinaryOp::Add, k::acc(), k::load(2, DType::f32, k::Index::var(2))));
  kk.gemm = g;
  p.kernels.push_back(kk);
  for (const auto& tile : std::vector<std::vector<int64_t>>{{}, {64, 128, 32}, {32, 64, 16}, {16, 16, 16}, {128, 128, 8}})
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      INFO(t << " tile " << (tile.empty() ? 0 : tile[0]));
      const std::string src = check_emulated(p, {}, arch_of(t), tile, 1e-4, 1e-4);
      CHECK(src.find("lm_sync()") != std::string::npos);
    }
}

TEST_CASE("emulated elementwise: symbolic extents, padding, grid-stride loops", "[gpu][emu]") {
  // y[i, j] = x[i, j - 1] (0 outside) * 2 over [N, W + 2]; N, W symbols; 300000 elements
  // exceed one grid-stride pass of the capped grid only on huge sizes, so also a big case.
  k::Program p;
  p.symbols = {"N", "W"};
  const k::Index N = k::Index::sym("N"), W = k::Index::sym("W");
  p.buffers.push_back(buf("x", DType::f16, N * W, k::BufferRole::Input));
  p.buffers.push_back(buf("y", DType::f32, N * (W + 2), k::BufferRole::Output));
  k::Kernel kk;
  kk.name = "pad";
  kk.loops = {loop(0, N), loop(1, W + 2)};
  const k::Index j = k::Index::var(1) - 1;
  const k::Index valid = k::land(k::le(0, j), k::lt(j, W));
  k::Expr x = k::load_padded(0, DType::f16, k::Index::var(0) * W + j, valid, 0.0);
  kk.store.buffer = 1;
  kk.store.index = k::Index::var(0) * (W + 2) + k::Index::var(1);
  kk.store.value = k::binary(k::BinaryOp::Mul, k::cast(x, DType::f32), k::constant(2.0));
  p.kernels.push_back(kk);
  for (auto [n, w] : {std::pair<int64_t, int64_t>{3, 5}, {1000, 301}, {0, 4}})
    check_emulated(p, {{"N", n}, {"W", w}}, arch_of("cuda:sm_90+emu"));
}

TEST_CASE("the emulated tensor-core helper follows its documented lane layout", "[gpu][emu][mma]") {
  // One warp multiplies a 16x16 f16 A by a 16x8 f16 B plus C, fragments packed by the
  // layout in gpu_prelude.hpp, then writes D by the same layout.
  const gpu::GpuArch arch = arch_of("cuda:sm_90+emu");
  const std::string kernel = R"(
extern "C" __global__ void mma_test(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const unsigned int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t a[4], b[2];
  float c[4], d[4];
  for (int r = 0; r < 4; ++r) {
    const unsigned int row = g + 8 * (r % 2), col = 2 * t + 8 * (r / 2);
    a[r] = (uint32_t)A[row * 16 + col] | ((uint32_t)A[row * 16 + col + 1] << 16);
  }
  for (int r = 0; r < 2; ++r) {
    const unsigned int kr = 2 * t + 8 * r;
    b[r] = (uint32_t)B[kr * 8 + g] | ((uint32_t)B[(kr + 1) * 8 + g] << 16);
  }
  for (int i = 0; i < 4; ++i) c[i] = C[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  lm_mma_m16n8k16_f16(d, a, b, c);
  for (int i = 0; i < 4; ++i) D[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}
extern "C" void mma_test_emu(const uint16_t* A, const uint16_t* B, const float* C, float* D) {
  const dim3 grid = {1, 1, 1}, block = {32, 1, 1};
  auto body = [&]() { mma_test(A, B, C, D); };
  lm_emu::launch(grid, block, 1, "mma_test", body);
}
)";
  const std::string tu = gpu::emulation_header(arch) + gpu::common_device_code() + gpu::emulation_mma_helpers() + kernel;
  auto lib = gpu::emulator_jit().compile(tu);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<uint16_t> A(256), B(128);
  std::vector<float> C(128), D(128, 0);
  for (auto& x : A) x = k::f32_to_f16_bits(d(rng));
  for (auto& x : B) x = k::f32_to_f16_bits(d(rng));
  for (auto& x : C) x = d(rng);
  using Fn = void (*)(const uint16_t*, const uint16_t*, const float*, float*);
  lib->function<Fn>("mma_test_emu")(A.data(), B.data(), C.data(), D.data());
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double s = C[i * 8 + j];
      for (int q = 0; q < 16; ++q) s += double(k::f16_bits_to_f32(A[i * 16 + q])) * k::f16_bits_to_f32(B[q * 8 + j]);
      INFO("D[" << i << "][" << j << "]");
      CHECK(std::abs(D[i * 8 + j] - s) <= 1e-5 * (1 + std::abs(s)));
    }
}

TEST_CASE("the emulated ldmatrix and cp.async follow their documented layouts", "[gpu][emu][mma][async]") {
  // One warp: cp.async fills four 8 x 8 matrices of distinct 16-bit values (rows 16 bytes
  // each, the last chunk's src-size 6: 3 values then zeros), then ldmatrix reads them with
  // and without .trans; the test states the layout of gpu_prelude.hpp once more.
  const gpu::GpuArch arch = arch_of("cuda:sm_90+emu");
  const std::string kernel = R"(
extern "C" __global__ void ldm_test(const uint16_t* src, uint32_t* out, uint32_t* early) {
  __shared__ lm_u32x4 sh4[32];
  uint16_t* sh = (uint16_t*)sh4;
  const unsigned int lane = threadIdx.x % 32;
  /* 32 rows of 8: lane l copies row l (the last one short) */
  lm_cp_async16(sh + 8 * lane, src + 8 * lane, lane == 31 ? 6 : 16);
  lm_cp_async_commit();
  early[lane] = sh[8 * lane];  /* before the wait: not yet written */
  lm_cp_async_wait<0>();
  lm_sync();
  uint32_t r[4], t[4];
  lm_ldmatrix_x4(r, sh + 8 * lane);       /* lane 8q + i: row i of matrix q = row lane */
  lm_ldmatrix_x4_trans(t, sh + 8 * lane);
  for (int q = 0; q < 4; ++q) {
    out[lane * 8 + q] = r[q];
    out[lane * 8 + 4 + q] = t[q];
  }
}
extern "C" void ldm_test_emu(const uint16_t* src, uint32_t* out, uint32_t* early) {
  const dim3 grid = {1, 1, 1}, block = {32, 1, 1};
  auto body = [&]() { ldm_test(src, out, early); };
  lm_emu::launch(grid, block, 1, "ldm_test", body);
}
)";
  const std::string tu = gpu::emulation_header(arch) + gpu::common_device_code() +
                         gpu::emulation_mma_helpers() + gpu::emulation_async_helpers() + kernel;
  auto lib = gpu::emulator_jit().compile(tu);
  std::vector<uint16_t> src(256);
  for (int i = 0; i < 256; ++i) src[i] = static_cast<uint16_t>(1000 + i);
  std::vector<uint32_t> out(256, 0xdeadbeefu), early(32, 0xdeadbeefu);
  using Fn = void (*)(const uint16_t*, uint32_t*, uint32_t*);
  lib->function<Fn>("ldm_test_emu")(src.data(), out.data(), early.data());
  // Matrix q, row i, column c as copied: row 8q + i of src; the last row has 3 values.
  auto m = [&](int q, int i, int c) -> uint32_t {
    const int row = 8 * q + i;
    return row == 31 && c >= 3 ? 0u : src[static_cast<size_t>(row * 8 + c)];
  };
  for (int l = 0; l < 32; ++l) {
    INFO("lane " << l);
    CHECK(early[l] == 0);  // the emulator zero-initializes shared memory; the copy is not in yet
    for (int q = 0; q < 4; ++q) {
      const int a = l / 4, b = 2 * (l % 4);
      CHECK(out[l * 8 + q] == (m(q, a, b) | (m(q, a, b + 1) << 16)));
      CHECK(out[l * 8 + 4 + q] == (m(q, b, a) | (m(q, b + 1, a) << 16)));
    }
  }
}

namespace {
// rel = 0: test::compare_outputs' default tolerances; else compare_to_scale's.
void check_translation(const Graph& g, const Target& t, const char* name, double rel = 0,
                       const CompileOptions& o = {}) {
  auto inputs = test::random_inputs(*g.impl(), 1);
  std::map<std::string, const HostTensor*> ptrs;
  for (const auto& [k, v] : inputs) ptrs.emplace(k, &v);
  auto want = detail::reference::run(*g.impl(), {}, ptrs);
  Callable f = compile(g, t, o);
  std::map<std::string, HostTensor> feed, params;
  for (uint32_t id : g.impl()->params) f.bind(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
  for (uint32_t id : g.impl()->inputs)
    feed.emplace(g.impl()->nodes[id].name, inputs.at(g.impl()->nodes[id].name));
  auto got = f(feed);
  INFO(name << " on " << t.to_string() << ": " << f.report().to_string());
  CHECK((rel > 0 ? test::compare_to_scale(got, want, rel) : test::compare_outputs(got, want)) <= 1.0);
  CHECK(f.report().interpreted_kernels == 0);
}
}  // namespace

TEST_CASE("translation validation on the emulated GPU targets", "[gpu][emu][translation]") {
  const auto check = [](const Graph& g, const Target& t, const char* name, double rel = 0) {
    check_translation(g, t, name, rel);
  };
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu", "hip:gfx1030+emu"}) {
    const Target target = Target::parse(t);
    for (const auto& c : test::translation_cases()) {
      Graph g;
      c.build(g);
      check(g, target, c.name);
    }
    Graph mlp;
    test::build_mlp(mlp, 4, 16, 32);
    check(mlp, target, "mlp");
    Graph block;
    test::build_model(block, test::BlockConfig{}, 1);
    check(block, target, "decoder block");
  }
  Graph stack;
  test::BlockConfig c;
  c.seq = 4;
  c.d_model = 32;
  c.ffn = 48;
  test::build_model(stack, c, 4);
  check(stack, Target::parse("cuda:sm_90+emu"), "stack of 4 blocks");
  // A decode step in f16 at small sizes: the forms only a single query row takes (the
  // skinny GEMM of the merged Q|K|V, flash-decoding over the cache and the new row, dot
  // products with their residual in the epilogue).
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    Graph decode;
    test::build_decode_block_f16(decode, 37, test::DecodeSizes{256, 4, 2, 64, 384});
    check(decode, Target::parse(t), "decode step", 1.0 / 256);  // 4 ulps of f16 at the largest
    // An f16 prefill of 64 tokens: Q|K|V and gate|up merged, each a skinny GEMM over 8-row
    // blocks reading its weights in segments (at Llama sizes tensor-core tiles over packed
    // weights: library_gemm_test's "stored packed" runs those on the emulator).
    Graph prefill;
    test::build_prefill_block_f16(prefill, 64, test::DecodeSizes{256, 4, 2, 64, 384});
    check(prefill, Target::parse(t), "f16 prefill", 1.0 / 256);
  }
}

TEST_CASE("a decode step's attention found without the fusion policies runs as one streaming kernel",
          "[gpu][emu][translation]") {
  // Without the policies the search fuses the attention along the extracted program's
  // edges (absorb-producers). The product of the softmax and V takes the softmax and the
  // scores at once (ir::nest: the softmax cannot hold the scores' reduction alone), and
  // the scores are read as the vector product spells them, [.., keys, 1] reshaped to
  // [.., keys]: the streaming kernel indexes them by the product's axes
  // (AttentionMatch::r1_axis_of). (sm_90 priced as the H200 of the issue's figures.)
  const testsupport::ScopedEnv model("LUMINAL_GPU_MODEL", "H200");
  for (const auto& [past, sizes] : {std::pair{int64_t{37}, test::DecodeSizes{256, 4, 2, 64, 384}},
                                    std::pair{int64_t{600}, test::DecodeSizes{512, 8, 2, 64, 768}}})
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      Graph decode;
      test::build_decode_block_f16(decode, past, sizes);
      CompileOptions o = test::unhurried();
      o.skip_rules = {"fuse-producers"};
      CompileOptions only = o;
      only.compile_only = true;
      const auto plan = compiler::compile_graph(*decode.impl(), Target::parse(t), only);
      INFO(t << ", " << past << " cached tokens: " << plan.report.to_string() << "\n" << plan.dot);
      CHECK(test::count_kind(plan, ir::KernelKind::Attention) == 1);
      // ... and the GPU lowering builds it as one (not as loops over materialized scores).
      const cpu::LoweredPlan lp = cpu::lower_plan(*plan.plan, gpu::gpu_lower_options());
      CHECK(std::count_if(lp.prog.kernels.begin(), lp.prog.kernels.end(),
                          [](const kernel::Kernel& k) { return k.attention.has_value(); }) == 1);
      check_translation(decode, Target::parse(t), "decode step without the policies", 1.0 / 256, o);
    }
}

namespace {
// One causal Attention kernel, bottom-right aligned (row i sees keys j < i + n - m + 1):
// q [B, m, dk], k [B, n, dk] and v [B, n, dv] (or each batch's V transposed in memory) of
// dtype `dt`, widened to f32 as read, into o [B, m, dv] of `dt`. batches = 0: no batch
// loop (one of each). The score is the dot product times `scale`; `epilogue` maps the
// output's accumulator (none: stored as it is).
struct AttentionShape {
  int64_t batches, m, n, dk, dv;
};
// v_splits: a segmented V (Attention::v_more), keys from each split on in a buffer of its own.
k::Program causal_attention(DType dt, AttentionShape s, bool v_transposed, double scale,
                            std::optional<k::Expr> epilogue, const std::vector<int64_t>& v_splits = {}) {
  const auto [B, m, n, dk, dv] = s;
  const int64_t copies = std::max<int64_t>(B, 1);
  k::Program p;
  p.buffers.push_back(buf("q", dt, copies * m * dk, k::BufferRole::Input));
  p.buffers.push_back(buf("k", dt, copies * n * dk, k::BufferRole::Input));
  p.buffers.push_back(buf("v", dt, copies * n * dv, k::BufferRole::Input));
  p.buffers.push_back(buf("o", dt, copies * m * dv, k::BufferRole::Output));
  std::vector<int64_t> seg_rows;
  for (size_t i = 0; i < v_splits.size(); ++i) {
    seg_rows.push_back((i + 1 < v_splits.size() ? v_splits[i + 1] : n) - v_splits[i]);
    p.buffers.push_back(buf(i == 0 ? "v_seg0" : i == 1 ? "v_seg1" : "v_seg2", dt, copies * seg_rows.back() * dv,
                            k::BufferRole::Input));
  }
  k::Kernel kk;
  kk.name = "att";
  kk.kind = k::KernelKind::Attention;
  if (B > 0) kk.loops.push_back(loop(0, B));
  const k::Index b = B > 0 ? k::Index::var(0) : k::Index(0), pd = k::Index::var(4);
  auto widened = [&](k::Expr e) { return dt == DType::f32 ? e : k::cast(e, DType::f32); };
  k::Attention a;
  a.m = m;
  a.n = n;
  a.dk = dk;
  a.dv = dv;
  a.q = widened(k::load(0, dt, b * (m * dk) + k::Index::var(1) * dk + pd));
  a.k = widened(k::load(1, dt, b * (n * dk) + k::Index::var(2) * dk + pd));
  a.depth_var = 4;
  a.v = v_transposed ? k::MatrixView{2, b * (n * dv), 1, n} : k::MatrixView{2, b * (n * dv), dv, 1};
  for (size_t i = 0; i < v_splits.size(); ++i)
    a.v_more.push_back({k::MatrixView{4 + static_cast<int>(i), b * (seg_rows[i] * dv), dv, 1}, v_splits[i]});
  a.out = {3, b * (m * dv), dv, 1};
  a.row_var = 1;
  a.key_var = 2;
  a.col_var = 3;
  const k::Index i = k::Index::var(1), j = k::Index::var(2);
  const k::Expr score = scale == 1.0 ? k::acc() : k::binary(k::BinaryOp::Mul, k::acc(), k::constant(scale));
  a.score = k::where(k::binary(k::BinaryOp::LessThan, k::index_value(j), k::index_value(i + (n - m + 1))),
                     score, k::constant(-INFINITY));
  a.key_end = i + (n - m + 1);
  if (epilogue) a.epilogue = *epilogue;
  kk.attention = a;
  p.kernels.push_back(kk);
  return p;
}
// K's rows one element into their buffer (causal_attention's K), so no row is aligned.
void misalign_k(k::Program& p) {
  k::Attention& a = *p.kernels[0].attention;
  const DType dt = p.buffers[1].dtype;
  const int64_t n = a.n.as_constant().value(), dk = a.dk.as_constant().value();
  const k::Index b = p.kernels[0].loops.empty() ? k::Index(0) : k::Index::var(0);
  p.buffers[1].elements = p.buffers[1].elements + 1;
  const k::Expr ld = k::load(1, dt, b * (n * dk) + k::Index::var(2) * dk + k::Index::var(4) + 1);
  a.k = dt == DType::f32 ? ld : k::cast(ld, DType::f32);
}

// An attention of one element type with V in segments (causal_attention), the output
// rounded to that type; and the vector path's check on both emulated targets: equal to
// the evaluator, `marker` in its source (the path rendered), vector loads counted by the
// emulator where everything is aligned and none where the case misaligned its operands;
// on hip:gfx90a+emu too unless `wave64` is false (a path that wave64 does not take there).
struct VectorCase {
  DType dt;
  AttentionShape shape;
  std::vector<int64_t> splits;
};
k::Program vector_case_program(const VectorCase& c) {
  return causal_attention(c.dt, c.shape, false, 0.5,
                          c.dt == DType::f32 ? std::nullopt : std::optional(k::cast(k::acc(), c.dt)),
                          c.splits);
}
void check_vector_path(const k::Program& p, const VectorCase& c, const std::string& marker, bool misaligned,
                       const char* what, bool wave64 = true) {
  const auto [B, m, n, dk, dv] = c.shape;
  INFO(dtype_name(c.dt) << " m " << m << " n " << n << " dk " << dk << " dv " << dv
                        << (misaligned ? what : ""));
  const double rtol = c.dt == DType::f16 ? 2e-3 : c.dt == DType::bf16 ? 1.6e-2 : 1e-4;
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    INFO(t);
    if (!wave64 && std::string(t).rfind("hip", 0) == 0) continue;
    unsigned long long vector_loads = 0;
    const std::string src = check_emulated(p, {}, arch_of(t), {}, rtol, 1e-5, {}, &vector_loads);
    CHECK(src.find(marker) != std::string::npos);
    if (misaligned)
      CHECK(vector_loads == 0);
    else
      CHECK(vector_loads > 0);
  }
}
}  // namespace

TEST_CASE("emulated attention: online softmax over key chunks, causal mask, batches",
          "[gpu][emu][attention]") {
  // out[b, i, d] = softmax_j(where(j <= i + n - m, q.k * scale, -inf)) V, over B batches.
  // m > n: the first rows see no key (NaN, as the body); n = 0: no keys at all (+0).
  // dk = 1100: deeper than the renderer keeps q in shared memory (kMaxCachedDepth), so q
  // is computed in the dot loop, a row a block; otherwise a block takes the rows up to 8
  // dividing m (5, 3, 1, 5, 2; 8 of 24 at depth 128: q's four depths a lane in registers,
  // a prefill's shape; 8 of 16 at depth 96 over 700 keys, three chunks).
  for (auto [m, n, dk, dv] : {std::array<int64_t, 4>{5, 7, 4, 3},
                              {3, 600, 16, 300},
                              {1, 1, 2, 2},
                              {5, 3, 4, 3},
                              {2, 0, 4, 3},
                              {2, 5, 1100, 3},
                              {24, 24, 128, 128},
                              {16, 700, 96, 72}}) {
    // V transposed in memory; the epilogue adds 1.
    const k::Program p = causal_attention(DType::f32, {2, m, n, dk, dv}, true, 0.5,
                                          k::binary(k::BinaryOp::Add, k::acc(), k::constant(1.0)));
    INFO("m " << m << " n " << n << " dk " << dk << " dv " << dv);
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
      check_emulated(p, {}, arch_of(t), {}, 1e-4, 1e-5);
  }
}

// V in segments, each read where it lies (a decode step's KV cache and its new row):
// splits inside and on the edge of a key chunk, at the last key, several.
TEST_CASE("emulated attention: V in segments from separate buffers", "[gpu][emu][attention]") {
  struct SegCase {
    AttentionShape shape;
    std::vector<int64_t> splits;
    DType dt;
  };
  const SegCase cases[] = {{{2, 1, 600, 16, 40}, {599}, DType::f32},
                           {{2, 5, 7, 4, 3}, {2, 5}, DType::f32},
                           {{0, 3, 300, 16, 40}, {128, 256, 299}, DType::f32},
                           {{2, 1, 300, 16, 40}, {299}, DType::f16},
                           {{2, 3, 300, 16, 40}, {100}, DType::bf16}};
  for (const SegCase& c : cases) {
    const auto [B, m, n, dk, dv] = c.shape;
    const k::Program p = causal_attention(c.dt, c.shape, false, 0.5, c.dt == DType::f32 ? std::nullopt
                                                                                        : std::optional(k::cast(k::acc(), c.dt)),
                                          c.splits);
    INFO(dtype_name(c.dt) << " m " << m << " n " << n << " dk " << dk << " dv " << dv << " segments "
                          << c.splits.size() + 1);
    const double rtol = c.dt == DType::f16 ? 2e-3 : c.dt == DType::bf16 ? 1.6e-2 : 1e-4;
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) check_emulated(p, {}, arch_of(t), {}, rtol, 1e-5);
  }
}

// P V with C columns a thread (detail::attention_value_columns): 8 bytes of V a load --
// 2 floats, 4 halves -- over passes of 32, 64, 128 and 256 columns (32, 8, 8 and 4 key
// groups on wave32), a segmented V, 8 rows a block; and the same with every V segment one
// element into its buffer, where the block takes C scalar loads a key (an 8-byte load
// there aborts the emulator, as it faults on the device).
TEST_CASE(
    "emulated attention: P V takes several columns a thread, 8-byte loads or scalar where V is unaligned",
    "[gpu][emu][attention]") {
  const VectorCase cases[] = {{DType::f32, {2, 4, 300, 16, 64}, {}},
                              {DType::f16, {2, 3, 600, 32, 128}, {599}},
                              {DType::bf16, {1, 8, 300, 128, 256}, {}},
                              {DType::f16, {2, 2, 100, 8, 32}, {}}};
  for (const VectorCase& c : cases)
    for (bool misaligned : {false, true}) {
      k::Program p = vector_case_program(c);
      if (misaligned) {
        // V and K (whose rows lanes across keys would read 16 bytes at a time) one element
        // into their buffers: no vector load at all.
        k::Attention& a = *p.kernels[0].attention;
        misalign_k(p);
        p.buffers[2].elements = p.buffers[2].elements + 1;
        a.v.offset = a.v.offset + 1;
        for (size_t i = 0; i < a.v_more.size(); ++i) {
          p.buffers[4 + i].elements = p.buffers[4 + i].elements + 1;
          a.v_more[i].v.offset = a.v_more[i].v.offset + 1;
        }
      }
      // (A 32-column pass is a 64-lane pass on wave64: one column a thread there.)
      check_vector_path(p, c, "lm_ld64(", misaligned, ", V misaligned", c.shape.dv != 32);
    }
}

// Lanes across keys (the renderer's dots_wide): a K row's depth split among dk / E lanes,
// E elements a lane in one 16-byte load (8 halves, 4 floats) or 8-byte where the rows'
// q registers would pass 32; rows 1 to 8 a block, depths from 4 to 256, V in segments;
// aligned (the vector loads counted by the emulator) and K one element into its buffer
// (lanes across the depth, no vector load of K -- V's one-column path has none).
TEST_CASE("emulated attention: lanes across keys read K rows 16 bytes at a time, scalar where unaligned",
          "[gpu][emu][attention]") {
  const VectorCase cases[] = {{DType::f16, {2, 4, 600, 128, 40}, {599}},   // a decode step's shape: E 8, G 16
                              {DType::bf16, {1, 8, 300, 128, 24}, {}},     // 8 rows: 8-byte loads, E 4
                              {DType::f32, {2, 3, 300, 64, 40}, {}},       // 4 floats, G 16, 3 rows
                              {DType::f32, {1, 1, 70, 4, 3}, {}},          // a lane a key (G 1)
                              {DType::f16, {2, 2, 100, 16, 8}, {40, 90}},  // G 2, K's keys past the end
                              {DType::bf16, {1, 2, 260, 256, 8}, {}}};     // G 32
  for (const VectorCase& c : cases)
    for (bool misaligned : {false, true}) {
      k::Program p = vector_case_program(c);
      if (misaligned) misalign_k(p);
      check_vector_path(p, c, "lm_kw0", misaligned, ", K misaligned");
    }
  // The elements a lane (detail::attention_key_vector, which the cost model prices too):
  // none where a row's lanes are not a power of two of at least the rows, nor at most a
  // warp -- lanes across the depth then, equal to the evaluator as well.
  CHECK(detail::attention_key_vector(128, 2, 4, 32) == 8);
  CHECK(detail::attention_key_vector(128, 2, 8, 32) == 4);
  CHECK(detail::attention_key_vector(16, 2, 4, 32) == 4);
  CHECK(detail::attention_key_vector(64, 4, 3, 32) == 4);
  CHECK(detail::attention_key_vector(96, 2, 4, 32) == 1);
  CHECK(detail::attention_key_vector(256, 2, 8, 32) == 1);
  CHECK(detail::attention_key_vector(256, 2, 8, 64) == 4);
  CHECK(detail::attention_key_vector(128, 1, 4, 32) == 1);
  for (const AttentionShape& shape : {AttentionShape{1, 4, 300, 96, 8}, AttentionShape{1, 8, 300, 256, 8}}) {
    const k::Program p = causal_attention(DType::f16, shape, false, 0.5, k::cast(k::acc(), DType::f16));
    INFO("dk " << shape.dk << ", " << shape.m << " rows");
    const std::string src = check_emulated(p, {}, arch_of("cuda:sm_90+emu"), {}, 2e-3, 1e-5);
    CHECK(src.find("lm_kw0") == std::string::npos);
  }
}

// f16/bf16 attention: q and k widened as they are staged, V widened as it is read, the
// output rounded as it is stored (the epilogue's cast); the kernel against the evaluator
// and the compiled op against the interpreter, grouped heads, causal, rows that see no key.
TEST_CASE("emulated attention: f16 and bf16 operands and output", "[gpu][emu][attention][half]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    for (auto [m, n, dk, dv] : {std::array<int64_t, 4>{5, 7, 4, 3}, {3, 300, 16, 40}, {5, 3, 4, 3}}) {
      const k::Program p = causal_attention(dt, {2, m, n, dk, dv}, false, 0.5, k::cast(k::acc(), dt));
      INFO(dtype_name(dt) << " m " << m << " n " << n << " dk " << dk << " dv " << dv);
      const double rtol = dt == DType::f16 ? 2e-3 : 1.6e-2;  // the rounding of one f32 result
      for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
        check_emulated(p, {}, arch_of(t), {}, rtol, 1e-5);
    }
    // The op, compiled: one attention kernel in the plan, against the interpreter.
    Graph g;
    Tensor q = g.input("q", {4, 6, 8}, dt), kt = g.input("k", {2, 9, 8}, dt), v = g.input("v", {2, 9, 8}, dt);
    auto rep = [](const Tensor& t) {
      return reshape(expand(reshape(t, {2, 1, 9, 8}), {2, 2, 9, 8}), {4, 9, 8});
    };
    g.output("y", scaled_dot_product_attention(q, rep(kt), rep(v), true));
    auto inputs = test::random_inputs(*g.impl(), 3);
    std::map<std::string, const HostTensor*> ptrs;
    for (const auto& [name, x] : inputs) ptrs.emplace(name, &x);
    auto want = detail::reference::run(*g.impl(), {}, ptrs);
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      Callable f = compile(g, Target::parse(t));
      INFO(t << ": " << f.report().to_string());
      CHECK(f.report().kernels == 1);
      CHECK(f.report().interpreted_kernels == 0);
      const double tol = dt == DType::f16 ? 2e-3 : 1.6e-2;
      CHECK(test::compare_outputs(f(inputs), want, tol, tol) <= 1.0);
    }
    // Written by hand on halves (the weights rounded before the second product): one
    // streaming kernel only under fast_math, within the weights' rounding.
    Graph h;
    Tensor hq = h.input("q", {4, 6, 8}, dt), hk = h.input("k", {4, 9, 8}, dt),
           hv = h.input("v", {4, 9, 8}, dt);
    Tensor sc = where(tril_mask(Dim(6), Dim(9)), matmul(hq, transpose(hk, 1, 2)) * 0.35f, -INFINITY);
    h.output("y", matmul(softmax(sc, -1), hv));
    auto hin = test::random_inputs(*h.impl(), 4);
    std::map<std::string, const HostTensor*> hptrs;
    for (const auto& [name, x] : hin) hptrs.emplace(name, &x);
    auto hwant = detail::reference::run(*h.impl(), {}, hptrs);
    CompileOptions fm;
    fm.fast_math = true;
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      Callable f = compile(h, Target::parse(t), fm);
      INFO("hand-written, fast_math, " << t << ": " << f.report().to_string());
      CHECK(f.report().kernels == 1);
      CHECK(f.report().interpreted_kernels == 0);
      const double tol = dt == DType::f16 ? 4e-3 : 3e-2;
      CHECK(test::compare_outputs(f(hin), hwant, tol, tol) <= 1.0);
    }
  }
}

// Values near FLT_MAX and large logits: the output is a convex combination of values
// (the definition's sum of P_j V_j), finite wherever the values are. A renderer that sums
// e_j V_j and divides by the sum of weights at the end overflows here (n keys of equal
// weight: n * 3e38 = inf) where the evaluator and the interpreter do not.
TEST_CASE("emulated attention: values near FLT_MAX and large logits stay finite", "[gpu][emu][attention]") {
  for (auto [m, n, dk, dv] : {std::array<int64_t, 4>{3, 7, 4, 3}, {2, 300, 8, 5}}) {
    for (bool equal_scores : {true, false}) {
      const k::Program p = causal_attention(DType::f32, {0, m, n, dk, dv}, false, 1.0, std::nullopt);
      // The structured bindings by copy: clang before 16 cannot capture them by reference.
      auto fill = [&, m = m, n = n, dk = dk, dv = dv](cpu_test::HostBuffers& hb) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(0.0f, 1.0f);
        auto put = [&](int b, int64_t e, float x) {
          std::memcpy(hb.bytes[static_cast<size_t>(b)].data() + 4 * e, &x, 4);
        };
        // Equal scores (q = 0): every visible key weighs the same. Otherwise logits of
        // hundreds (q, k up to 8 in magnitude over dk terms): weights span many decades.
        for (int64_t e = 0; e < m * dk; ++e) put(0, e, equal_scores ? 0.0f : 16.0f * u(rng) - 8.0f);
        for (int64_t e = 0; e < n * dk; ++e) put(1, e, 16.0f * u(rng) - 8.0f);
        for (int64_t e = 0; e < n * dv; ++e) put(2, e, 3.0e38f + 3.0e37f * u(rng));
      };
      INFO("m " << m << " n " << n << " equal scores " << equal_scores);
      for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
        INFO(t);
        check_emulated(p, {}, arch_of(t), {}, 1e-4, 0, fill);
      }
      // The evaluator (the definition) is finite here: the test is not vacuous.
      cpu_test::HostBuffers ref = cpu_test::allocate(p, {}, 42);
      fill(ref);
      k::evaluate(p, ref.ptrs(), {});
      for (int64_t e = 0; e < m * dv; ++e)
        CHECK(std::isfinite(cpu_test::element(p.buffers[3], ref.bytes[3], e)));
    }
  }
}

// The attention of `p` split over key ranges, the last range block of each row merging it,
// counting in a state buffer (which the comparison with the evaluator then finds zero
// again: the kernel resets it).
k::Program split_attention(k::Program p) {
  const k::Kernel whole = p.kernels.at(0);
  p.buffers.push_back(
      buf("partial", DType::f32, k::split_attention_partial_elements(whole), k::BufferRole::Intermediate));
  const int partial = static_cast<int>(p.buffers.size() - 1);
  p.buffers.push_back(buf("count", DType::i32, k::split_attention_rows(whole), k::BufferRole::State));
  p.kernels = {k::make_counted_split_attention(whole, partial, static_cast<int>(p.buffers.size() - 1))};
  k::validate(p);
  return p;
}

TEST_CASE("emulated flash-decoding: key ranges and their merge against the evaluator",
          "[gpu][emu][attention]") {
  // Every buffer is compared, the ranges' states (max, sum, normalised output) included.
  // 1000 keys: 8 ranges of 125; 600 keys, 300 value columns: 5 ranges, two column passes;
  // 4100 keys: 32 ranges of 129; m > n: rows that see no key (NaN) and, at 257 keys in 3
  // ranges, rows whose later ranges are all masked (max -inf, sum 0) -- 260 rows have
  // both; 3 keys: 1 range; none: +0. The last range block of a block's
  // rows merges them; the counts end at zero. A block takes the most rows up to 8 that
  // divide m (gpu_launch.hpp): 1, 3 (its dot products padded to 16 for the transposed
  // warp sum), 2, 5 (padded to 16), 5 and 2 here, on warps of 32 and 64 lanes; then a
  // decode step's shape (4 rows, depth 128: four depths a lane, q in registers; 128 value
  // columns, two key groups) and 8 rows at depth 40 (a second depth step guarded), 64
  // columns (four key groups).
  for (auto [B, m, n, dk, dv] : {std::array<int64_t, 5>{2, 1, 1000, 16, 40},
                                 {2, 3, 600, 16, 300},
                                 {1, 2, 4100, 8, 8},
                                 {0, 260, 257, 4, 4},
                                 {2, 5, 3, 4, 3},
                                 {2, 2, 0, 4, 3},
                                 {2, 4, 700, 128, 128},
                                 {1, 8, 300, 40, 64}}) {
    const k::Program p = split_attention(causal_attention(
        DType::f32, {B, m, n, dk, dv}, true, 0.5, k::binary(k::BinaryOp::Add, k::acc(), k::constant(1.0))));
    INFO("B " << B << " m " << m << " n " << n << " dk " << dk << " dv " << dv);
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
      const std::string src = check_emulated(p, {}, arch_of(t), {}, 1e-4, 1e-5);
      CHECK(src.find("lm_atomic_add_i32(&") != std::string::npos);
      const int64_t rows = detail::attention_block_rows(m);
      CHECK((src.find("a block per " + std::to_string(rows) + " query rows sharing K and V") !=
             std::string::npos) == (rows > 1));
    }
  }
  // NaN in a query (its row is NaN) and inf in a value of a masked key (0 * inf: NaN in
  // that column of the rows that do not see the key), f16 with the output's cast, V in
  // segments.
  {
    const k::Program p =
        split_attention(causal_attention(DType::f32, {0, 3, 700, 8, 6}, false, 0.5, std::nullopt));
    auto fill = [](cpu_test::HostBuffers& hb) {
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      std::memcpy(hb.bytes[0].data() + 4 * (1 * 8 + 2), &nan, 4);    // q[row 1][2]
      std::memcpy(hb.bytes[2].data() + 4 * (699 * 6 + 4), &inf, 4);  // v[key 699][4]: row 2 only sees it
    };
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
      check_emulated(p, {}, arch_of(t), {}, 1e-4, 1e-5, fill);
  }
  for (DType dt : {DType::f16, DType::bf16}) {
    const k::Program p =
        split_attention(causal_attention(dt, {2, 1, 900, 16, 40}, false, 0.5, k::cast(k::acc(), dt), {899}));
    INFO(dtype_name(dt));
    const double rtol = dt == DType::f16 ? 2e-3 : 1.6e-2;
    for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"})
      check_emulated(p, {}, arch_of(t), {}, rtol, 1e-5);
  }
}

TEST_CASE("a decode step's attention takes flash-decoding's key ranges, equal to the interpreter",
          "[gpu][emu][attention][graph]") {
  Graph g;
  test::build_decode_attention(g, 8, 2, 16);
  const std::string dump = (std::filesystem::temp_directory_path() / "luminal_decode_attention.cu").string();
  for (const char* t : {"cuda:sm_90+emu", "hip:gfx90a+emu"}) {
    INFO(t);
    Callable f;
    {
      const testsupport::ScopedEnv env("LUMINAL_DUMP_GPU", dump.c_str());
      f = compile(g, Target::parse(t));
    }
    std::ifstream in(dump);
    const std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(src.find("flash-decoding") != std::string::npos);
    CHECK(src.find("the last range block merging") != std::string::npos);
    // No cache, a short one (one range), several ranges, the most ranges.
    for (int64_t past : {0, 5, 700, 4000}) {
      INFO("past " << past);
      const DimBindings dims{{"past", past}};
      const auto inputs = test::random_inputs(*g.impl(), static_cast<uint64_t>(past) + 3, dims);
      std::map<std::string, const HostTensor*> ptrs;
      for (const auto& [name, x] : inputs) ptrs.emplace(name, &x);
      CHECK(test::compare_outputs(f(inputs), detail::reference::run(*g.impl(), dims, ptrs)) <= 1.0);
    }
  }
  std::filesystem::remove(dump);
}

TEST_CASE("two equal split attentions count in buffers of their own", "[gpu][emu][attention][graph]") {
  // Two attentions of one spec: the second step's kernels are the first's copied onto its
  // buffers (cpu::lower_plan's repeated steps), its count buffer included -- each its own
  // state buffer, and the results the interpreter's.
  Graph g;
  const Dim P = g.dim("P", 1, 2048);
  Tensor k = g.input("k", {4, P, 16}), v = g.input("v", {4, P, 16});
  g.output("y1", scaled_dot_product_attention(g.input("q1", {4, 1, 16}), k, v));
  g.output("y2", scaled_dot_product_attention(g.input("q2", {4, 1, 16}), k, v));
  const auto plan = compiler::compile_graph(*g.impl(), Target::parse("cuda:sm_90"), {}).plan;
  const cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu::gpu_lower_options());
  k::validate(lp.prog);
  std::set<int> counters;
  for (const k::Kernel& kk : lp.prog.kernels)
    if (kk.attention && kk.attention->split) {
      REQUIRE(kk.attention->split->counter >= 0);
      CHECK(lp.prog.buffers[static_cast<size_t>(kk.attention->split->counter)].role == k::BufferRole::State);
      counters.insert(kk.attention->split->counter);
    }
  CHECK(counters.size() == 2);
  Callable f = compile(g, Target::parse("cuda:sm_90+emu"));
  for (int64_t past : {700, 1500}) {
    const DimBindings dims{{"P", past}};
    const auto inputs = test::random_inputs(*g.impl(), static_cast<uint64_t>(past), dims);
    std::map<std::string, const HostTensor*> ptrs;
    for (const auto& [name, x] : inputs) ptrs.emplace(name, &x);
    CHECK(test::compare_outputs(f(inputs), detail::reference::run(*g.impl(), dims, ptrs)) <= 1.0);
  }
}

TEST_CASE("emulated tensor-core GEMMs: f16 and bf16 operands, every tile, edges, batches", "[gpu][emu][mma]") {
  for (DType dt : {DType::f16, DType::bf16}) {
    const int64_t M = 37, N = 45, K = 29, B = 2;
    k::Program p;
    p.buffers.push_back(buf("a", dt, B * M * K, k::BufferRole::Input));
    p.buffers.push_back(buf("b", dt, K * N, k::BufferRole::Input));
    p.buffers.push_back(buf("c", DType::f32, B * M * N, k::BufferRole::Output));
    k::Kernel kk;
    kk.name = "mm";
    kk.kind = k::KernelKind::Gemm;
    kk.loops.push_back(loop(0, B));
    k::Gemm g;
    g.m = M;
    g.n = N;
    g.k = K;
    g.a = {0, k::Index::var(0) * (M * K), K, 1};
    g.b = {1, 0, 1, K};  // B stored transposed (n-major)
    g.c = {2, k::Index::var(0) * (M * N), N, 1};
    g.row_var = 1;
    g.col_var = 2;
    g.epilogue = k::binary(k::BinaryOp::Mul, k::acc(), k::constant(0.25));
    kk.gemm = g;
    p.kernels.push_back(kk);
    // {bm, bn, bk, engine 1}: tensor cores (cost/gpu_launch.hpp) where the tile allows them
    for (const auto& tile : std::vector<std::vector<int64_t>>{
             {128, 128, 32, 1}, {64, 64, 32, 1}, {32, 32, 32, 1}, {16, 16, 16, 1}}) {
      INFO((dt == DType::f16 ? "f16" : "bf16") << " tile " << tile[0]);
      const std::string src = check_emulated(p, {}, arch_of("cuda:sm_90+emu"), tile, 1e-4, 1e-4);
      CHECK((src.find("gemm, tensor cores (mma.sync") != std::string::npos) == (tile[0] >= 32));
      // The same program without tensor cores (HIP here) converts and uses f32 FMAs.
      check_emulated(p, {}, arch_of("hip:gfx90a+emu"), tile, 1e-4, 1e-4);
    }
  }
}

TEST_CASE("translation validation on the CUDA device, where there is one", "[gpu][device]") {
  const Target t = Target::cuda();
  if (!t.is_available()) {
    WARN("no CUDA device here (" << t.unavailable_reason() << "); skipped");
    return;
  }
  for (const auto& c : test::translation_cases()) {
    Graph g;
    c.build(g);
    check_translation(g, t, c.name);
  }
  Graph block;
  test::build_model(block, test::BlockConfig{}, 1);
  check_translation(block, t, "decoder block");
}
