// JIT latency: first compile of a program (C compiler run) vs a load from the disk cache
// (trailer check + dlopen) vs the in-memory cache, for an elementwise chain and for a
// program with a generated GEMM (immintrin.h makes that TU much heavier).
//   build-cpu/bench/cpu/cpu_jit_bench
#include "backends/cpu/c_renderer.hpp"
#include "kernel/kernel_math.hpp"
#include "backends/cpu/jit.hpp"
#include "kernel/kernel_ir.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unistd.h>

using namespace luminal::kernel;
namespace fs = std::filesystem;

namespace {

Program chain(int salt) {
  Program p;
  p.buffers = {{"x", luminal::DType::f32, 1 << 20, BufferRole::Input},
               {"y", luminal::DType::f32, 1 << 20, BufferRole::Output}};
  Index i = Index::var(0);
  Expr v = load(0, luminal::DType::f32, i);
  v = math::tanh(math::sigmoid(math::exp(unary(UnaryOp::Sin, v))));
  v = binary(BinaryOp::Add, v, constant(salt));  // a different source per run: a true first compile
  p.kernels = {Kernel{"chain", KernelKind::Elementwise, {{0, 1 << 20, true, true}}, {1, i, v}, {}, {}}};
  return p;
}

Program gemm(int salt) {
  Program p;
  p.buffers = {{"a", luminal::DType::f32, 64 * 64, BufferRole::Input},
               {"b", luminal::DType::f32, 64 * 64, BufferRole::Input},
               {"c", luminal::DType::f32, 64 * 64, BufferRole::Output}};
  Gemm g;
  g.m = g.n = g.k = 64;
  g.a = {0, 0, 64, 1};
  g.b = {1, 0, 64, 1};
  g.c = {2, 0, 64, 1};
  g.epilogue = math::tanh(binary(BinaryOp::Add, acc(), constant(salt)));
  auto d = luminal::cpu::default_gemm_tile(luminal::cpu::host_isa());
  g.tile = {d.mr, d.nr, d.mc, d.kc, d.nc};
  Kernel k{"gemm_kernel", KernelKind::Gemm, {}, {}, {}, g};
  p.kernels = {k};
  return p;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main() {
  std::string tmpl = (fs::temp_directory_path() / "luminal-jit-bench-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) return 1;
  const int salt = static_cast<int>(::getpid());
  for (auto [name, prog] :
       {std::pair{"elementwise chain", chain(salt)}, std::pair{"gemm + epilogue", gemm(salt)}}) {
    std::string src = luminal::cpu::render_c(prog).source;
    luminal::cpu::JitConfig cfg = luminal::cpu::JitConfig::from_env();
    cfg.cache_dir = tmpl;
    double first, disk, mem;
    {
      luminal::cpu::Jit jit(cfg);
      jit.compiler_identity();  // `cc --version` once per process, not part of a compile
      auto t0 = std::chrono::steady_clock::now();
      jit.compile(src);
      first = ms_since(t0);
      t0 = std::chrono::steady_clock::now();
      jit.compile(src);
      mem = ms_since(t0);
    }
    {
      luminal::cpu::Jit jit(cfg);
      jit.compiler_identity();
      auto t0 = std::chrono::steady_clock::now();
      jit.compile(src);
      disk = ms_since(t0);
    }
    std::printf(
        "%-18s source %6zu bytes: first compile %7.1f ms, disk cache %6.2f ms, memory cache %6.3f ms\n", name,
        src.size(), first, disk, mem);
  }
  fs::remove_all(tmpl);
  return 0;
}
