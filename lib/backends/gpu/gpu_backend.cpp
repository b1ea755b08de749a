#include "backends/gpu/gpu_backend.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>

#include "backends/cpu/cpu_executable.hpp"
#include "backends/cpu/cpu_program.hpp"
#include "backends/cpu/jit.hpp"
#include "backends/cuda/cuda_executable.hpp"
#include "backends/cuda/cuda_module.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "backends/hip/hip_executable.hpp"
#include "backends/hip/hip_module.hpp"
#include "luminal/error.hpp"

namespace luminal::gpu {

namespace {

// The host C++ compiler for emulation TUs: LUMINAL_CXX, else c++, g++, clang++.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string all = path;
  size_t b = 0;
  while (b <= all.size()) {
    size_t e = all.find(':', b);
    if (e == std::string::npos) e = all.size();
    const std::string dir = all.substr(b, e - b);
    if (!dir.empty() && std::ifstream(dir + "/" + name).good()) return true;
    b = e + 1;
  }
  return false;
}

}  // namespace

cpu::Jit& emulator_jit(const std::string& cache_dir) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<cpu::Jit>> jits;
  std::lock_guard<std::mutex> lock(mu);
  auto& j = jits[cache_dir];
  if (!j) {
    cpu::JitConfig c = cpu::JitConfig::from_env();
    if (!cache_dir.empty()) c.cache_dir = cache_dir;
    c.compiler.clear();
    if (const char* cxx = std::getenv("LUMINAL_CXX"); cxx && *cxx) {
      c.compiler = cxx;
    } else {
      for (const char* name : {"c++", "g++", "clang++"})
        if (on_path(name)) {
          c.compiler = name;
          break;
        }
    }
    // -ffp-contract=off: a*b+c rounds twice, as on the device (NVRTC --fmad=false); the
    // prelude's explicit FMAs are one instruction with -march=native. -Og: emulated
    // programs are compiled far more often than they run long -- a test's 16 skinny GEMM
    // kernels took g++ 12 2.1 s at -O1 and 1.2 s at -Og, and the tests that emulate the
    // most (attention over thousands of keys) ran as fast from -Og's code as from -O1's.
    c.flags = {
        "-x",    "c++",     "-std=gnu++17", "-Og", "-march=native", "-ffp-contract=off", "-fno-math-errno",
        "-fPIC", "-shared", "-pthread",     "-w"};
    j = std::make_unique<cpu::Jit>(c);
  }
  return *j;
}

GpuBuild build_gpu(std::shared_ptr<const compiler::KernelPlan> plan,
                   std::shared_ptr<const detail::GraphImpl> graph, const Target& target,
                   const CompileOptions& options, const std::map<std::string, ParamRegion>& param_blocks) {
  const auto t0 = std::chrono::steady_clock::now();
  const GpuArch arch = arch_for(target);
  GpuBuild out;
  if (target.is_emulated()) {
    cpu::Jit& jit = emulator_jit(options.cache_dir);
    cpu::CpuBuildOptions bo;
    bo.cache_dir = options.cache_dir;
    bo.jit = &jit;
    bo.render_lower = gpu_lower_options();
    bo.communicator = options.communicator;
    bo.param_blocks = param_blocks;
    const ScheduleOf schedule = plan_schedules(*plan);
    std::string* device_source = &out.source;
    bool* library = &out.library_calls;
    detail::FoldedLaunches* folded = &out.folded;
    bo.render = [arch, schedule, device_source, library, folded](const kernel::Program& prog) {
      const GpuSource src = render_gpu(prog, arch, schedule);
      *device_source = src.device_source();
      *folded = folded_launches(src);
      *library = *library || library_calls(src);
      dump_device_source(*device_source);
      cpu::CProgram cp;
      cp.source = emulation_source(src, prog, arch);
      for (const auto& l : src.launches) cp.kernels.push_back(l.name + "_emu");
      return cp;
    };
    auto exe = std::make_shared<const cpu::CpuExecutable>(plan, graph, bo);
    const cpu::CpuBuildInfo& info = exe->info();
    out.generated_kernels = info.generated_kernels;
    out.interpreted = info.interpreted;
    out.interpreted_why = info.interpreted_why;
    out.arena_bytes = info.arena_bytes;
    out.intermediate_bytes = info.intermediate_bytes;
    out.param_blocks = info.param_blocks;
    out.codegen = std::string("emulator ") + dialect_name(arch.dialect) + " " + arch.arch + " (" +
                  jit.short_identity() + ")" + (out.library_calls ? " + emulated BLAS" : "");
    out.exe = std::move(exe);
    // Counted per plan kernel (as CompileReport::kernels): the steps whose code was generated.
    out.generated_kernels = static_cast<int64_t>(plan->steps.size()) - out.interpreted;
  } else if (!options.compile_only) {
    // The device itself (compile() checked that it is available).
    auto exe = arch.dialect == Dialect::Cuda
                   ? cuda::make_executable(plan, graph, target, options, param_blocks)
                   : hip::make_executable(plan, graph, target, options, param_blocks);
    out.param_blocks = exe->param_blocks();
    out.codegen = exe->codegen();
    out.resources = exe->resources();
    out.folded = exe->folded();
    out.generated_kernels = static_cast<int64_t>(plan->steps.size());
    out.exe = std::move(exe);
  } else {
    cpu::LoweredPlan lp = cpu::lower_plan(*plan, gpu_lower_options());
    out.interpreted = lp.interpreted;
    out.interpreted_why = lp.interpreted_why;
    out.generated_kernels = static_cast<int64_t>(plan->steps.size()) - lp.interpreted;
    const GpuSource src = render_gpu(lp.prog, arch, plan_schedules(*plan));
    out.source = src.device_source();
    out.folded = folded_launches(src);
    out.library_calls = library_calls(src);
    dump_device_source(out.source);
    if (arch.dialect == Dialect::Cuda) {
      if (!lp.prog.kernels.empty()) {
        cuda::CudaModule m = cuda::compile_module(out.source, arch.arch, /*cubin=*/true, options.cache_dir);
        out.codegen = m.codegen;
        out.resources = in_launch_order(src, m.resources);
      } else {
        out.codegen = "nvrtc (no kernels) " + arch.arch;
      }
    } else if (!lp.prog.kernels.empty()) {
      hip::HipModule m = hip::compile_module(out.source, arch.arch, options.cache_dir);
      out.codegen = m.codegen;
      out.resources = in_launch_order(src, m.resources);
    } else {
      out.codegen = "hiprtc (no kernels) " + arch.arch;
    }
    if (out.library_calls) out.codegen += " + cuBLASLt calls";
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace luminal::gpu
