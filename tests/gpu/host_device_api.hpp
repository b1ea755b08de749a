// A DeviceApi whose "device" is this process: device memory is host memory, a module is
// the emulation source of the program (gpu::emulation_source) compiled by the emulator's
// JIT, and a launch calls the kernel's entry with the driver's launch ABI (`<name>_launch`:
// grid, block, one pointer per kernel parameter). So gpu::DeviceExecutable -- the device
// runtime: its memory plan, arena, pinned staging, launch order and collectives -- runs
// and is checked on machines without a GPU. With `capture`, it records what is queued
// between begin_capture and end_capture as CUDA Graphs do -- nothing runs; a launch's
// parameter values are copied then (`<name>_nargs` of 8 bytes each), a copy keeps its
// addresses and reads their contents when replayed -- and launch_graph replays it; so
// the captured path the CUDA runtime takes is checked too. Without, begin_capture answers
// false and the executable queues the program on every call, as on APIs without graphs.
// With `blas` (the default, as the CUDA driver with cuBLASLt), it has a BLAS: blas_gemm
// computes each call on the host, straight from gpu::BlasCall's column-major description;
// without, library GEMMs are generated.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "backends/gpu/blas_gemm.hpp"
#include "backends/gpu/device_api.hpp"
#include "backends/gpu/device_executable.hpp"
#include "backends/gpu/device_collectives.hpp"
#include "backends/gpu/gpu_arch.hpp"
#include "backends/gpu/gpu_backend.hpp"
#include "backends/gpu/gpu_program.hpp"
#include "backends/gpu/gpu_renderer.hpp"
#include "runtime/half.hpp"

namespace gpu_test {

class HostDeviceApi final : public luminal::gpu::DeviceApi {
 public:
  explicit HostDeviceApi(std::string arch, bool capture = false, bool blas = true)
      : arch_(std::move(arch)), capture_(capture), blas_(blas) {}

  const char* name() const override { return "host"; }
  std::string arch(int) const override { return arch_; }
  void make_current(int) const override {}

  void* load_module(const std::string& image) const override {
    auto lib = luminal::gpu::emulator_jit().compile(image);
    std::lock_guard<std::mutex> lock(mu_);
    void* handle = const_cast<luminal::cpu::JitLibrary*>(lib.get());
    modules_[handle] = std::move(lib);
    return handle;
  }
  void unload_module(void* module) const noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    modules_.erase(module);
  }
  void* function(void* module, const std::string& kernel) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& lib = modules_.at(module);
    kernels_.push_back(std::make_unique<Kernel>(
        Kernel{lib->function<LaunchFn>(kernel + "_launch"), *lib->function<const int*>(kernel + "_nargs")}));
    return kernels_.back().get();
  }

  // Device memory comes uninitialized: filled with a pattern here, so that a runtime
  // relying on zeroed memory (a state buffer it forgot to clear) gets garbage.
  std::uint64_t alloc(std::size_t bytes) const override {
    ++allocations;
    const std::size_t rounded = (bytes + 255) / 256 * 256;
    void* p = std::aligned_alloc(256, rounded);
    if (p) std::memset(p, 0xa5, rounded);
    return reinterpret_cast<std::uint64_t>(p);
  }
  void free(std::uint64_t ptr) const noexcept override { std::free(reinterpret_cast<void*>(ptr)); }
  void* alloc_pinned(std::size_t bytes) const override { return std::malloc(bytes); }
  void free_pinned(void* ptr) const noexcept override { std::free(ptr); }

  void* create_stream() const override { return new int(0); }
  void destroy_stream(void* stream) const noexcept override { delete static_cast<int*>(stream); }
  void copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void*) const override {
    queue([this, dst, src, bytes] {
      bytes_in += bytes;
      std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    });
  }
  void copy_out(void* dst, std::uint64_t src, std::size_t bytes, void*) const override {
    queue([this, dst, src, bytes] {
      bytes_out += bytes;
      std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    });
  }
  void copy_device(std::uint64_t dst, std::uint64_t src, std::size_t bytes, void*) const override {
    queue([this, dst, src, bytes] {
      bytes_device += bytes;
      std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    });
  }
  void launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void* stream,
              const char*) const override {
    launch_streams.insert(stream);
    const Kernel* k = static_cast<const Kernel*>(fn);
    // The parameter values now (the caller's argument storage may change before a replay).
    std::vector<std::uint64_t> values(static_cast<std::size_t>(k->nargs));
    for (std::size_t i = 0; i < values.size(); ++i) std::memcpy(&values[i], args[i], 8);
    const std::array<unsigned, 6> dims{grid[0], grid[1], grid[2], block[0], block[1], block[2]};
    queue([this, k, values, dims]() mutable {
      ++launches;
      std::vector<void*> ptrs;
      for (auto& v : values) ptrs.push_back(&v);
      k->fn(dims.data(), dims.data() + 3, ptrs.data());
    });
  }
  void synchronize(void*, const char*) const override { ++synchronizations; }
  // Everything runs when queued, so events only count: the tests check the runtime joins
  // a caller's stream (recorded there, waited for on its own, and back).
  void* create_event() const override { return new int(0); }
  void destroy_event(void* event) const noexcept override { delete static_cast<int*>(event); }
  void record_event(void*, void* stream) const override { recorded_on.push_back(stream); }
  void wait_event(void* stream, void*) const override { waited_on.push_back(stream); }

  bool begin_capture(void*) const override {
    if (!capture_) return false;
    recording_ = std::make_unique<Graph>();
    return true;
  }
  void* end_capture(void*) const override {
    ++captures;
    return recording_.release();
  }
  void abort_capture(void*) const noexcept override { recording_.reset(); }
  void launch_graph(void* graph, void* stream) const override {
    ++graph_launches;
    launch_streams.insert(stream);
    for (const auto& op : static_cast<const Graph*>(graph)->ops) op();
  }
  void destroy_graph(void* graph) const noexcept override { delete static_cast<Graph*>(graph); }

  std::string blas(std::string* why = nullptr) const override {
    if (blas_) return "host BLAS";
    return DeviceApi::blas(why);
  }
  std::size_t blas_workspace() const override { return blas_ ? 1024 : 0; }
  void blas_gemm(int, const luminal::gpu::BlasCall& c, std::uint64_t a, std::uint64_t b, std::uint64_t d,
                 std::uint64_t workspace, void*) const override {
    if (!blas_) return DeviceApi::blas_gemm(0, c, a, b, d, workspace, nullptr);
    blas_workspaces.insert(workspace);
    queue([this, c, a, b, d] {
      ++blas_calls;
      auto get = [](std::uint64_t base, luminal::DType t, std::int64_t i) -> float {
        if (t == luminal::DType::f32) return reinterpret_cast<const float*>(base)[i];
        const std::uint16_t h = reinterpret_cast<const std::uint16_t*>(base)[i];
        return t == luminal::DType::f16 ? luminal::detail::f16_to_f32(h) : luminal::detail::bf16_to_f32(h);
      };
      const std::size_t es = luminal::dtype_size(c.ab), ds = luminal::dtype_size(c.d);
      for (std::int64_t q = 0; q < c.batch; ++q)
        for (std::int64_t j = 0; j < c.n; ++j)
          for (std::int64_t i = 0; i < c.m; ++i) {
            // f32 FMAs in k order, as the emulator's BLAS: the emulated and the runtime's
            // calls agree to the bit when they describe the same products.
            float v = 0.0f;
            for (std::int64_t l = 0; l < c.k; ++l)
              v = std::fma(get(a + std::uint64_t(q * c.stride_a) * es, c.ab,
                               c.trans_a ? l + i * c.lda : i + l * c.lda),
                           get(b + std::uint64_t(q * c.stride_b) * es, c.ab,
                               c.trans_b ? j + l * c.ldb : l + j * c.ldb),
                           v);
            const std::uint64_t at = d + std::uint64_t(q * c.stride_d + i + j * c.ldd) * ds;
            if (c.d == luminal::DType::f32)
              *reinterpret_cast<float*>(at) = v;
            else
              *reinterpret_cast<std::uint16_t*>(at) = c.d == luminal::DType::f16
                                                          ? luminal::detail::f32_to_f16(v)
                                                          : luminal::detail::f32_to_bf16(v);
          }
    });
  }

  // What the runtime asked for (the tests check the work it queued).
  mutable std::size_t launches = 0, synchronizations = 0, allocations = 0, bytes_in = 0, bytes_out = 0;
  mutable std::size_t bytes_device = 0;
  mutable std::set<void*> launch_streams;             // streams kernels and graphs were queued on
  mutable std::vector<void*> recorded_on, waited_on;  // events: the stream of each record, wait
  mutable std::size_t captures = 0, graph_launches = 0;
  mutable std::size_t blas_calls = 0;               // BLAS calls run (replays included)
  mutable std::set<std::uint64_t> blas_workspaces;  // the workspaces they were given

 private:
  using LaunchFn = void (*)(const unsigned*, const unsigned*, void**);
  struct Kernel {
    LaunchFn fn;
    int nargs;
  };
  struct Graph {
    std::vector<std::function<void()>> ops;
  };
  // Runs `op` now, or records it while capturing.
  template <class Op>
  void queue(Op op) const {
    if (recording_)
      recording_->ops.emplace_back(std::move(op));
    else
      op();
  }
  std::string arch_;
  bool capture_ = false;
  bool blas_ = false;
  mutable std::unique_ptr<Graph> recording_;
  mutable std::mutex mu_;
  mutable std::map<void*, std::shared_ptr<const luminal::cpu::JitLibrary>> modules_;
  mutable std::vector<std::unique_ptr<Kernel>> kernels_;
};

// What cuda::make_executable hands the runtime, with the emulation source as the "image"
// (HostDeviceApi::load_module compiles it).
inline luminal::gpu::DeviceBuildFn host_build(const luminal::Target& target) {
  return [target](const luminal::kernel::Program& prog, const luminal::compiler::KernelPlan& plan,
                  const std::string&) {
    const luminal::gpu::GpuArch arch = luminal::gpu::arch_for(target);
    luminal::gpu::DeviceBuild b;
    b.src = luminal::gpu::render_gpu(prog, arch, luminal::gpu::plan_schedules(plan));
    if (luminal::gpu::has_collectives(plan))
      luminal::gpu::add_collective_kernels(b.src);  // as the backends do
    b.image = luminal::gpu::emulation_source(b.src, prog, arch);
    b.codegen = "host emulator";
    return b;
  };
}

inline std::map<std::string, const luminal::HostTensor*> pointers(
    const std::map<std::string, luminal::HostTensor>& data) {
  std::map<std::string, const luminal::HostTensor*> p;
  for (const auto& [name, t] : data) p.emplace(name, &t);
  return p;
}

}  // namespace gpu_test
