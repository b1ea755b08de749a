// A DeviceApi whose "device" is this process: device memory is host memory, a module is
// the emulation source of the program (gpu::emulation_source) compiled by the emulator's
// JIT, and a launch calls the kernel's entry with the driver's launch ABI (`<name>_launch`:
// grid, block, one pointer per kernel parameter). So gpu::DeviceExecutable -- the device
// runtime: its memory plan, arena, pinned staging, launch order and collectives -- runs
// and is checked on machines without a GPU. It does not capture (begin_capture answers
// false): the executable then queues the program on every call, as it does on APIs
// without graphs.
#pragma once

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/gpu/device_api.hpp"
#include "backends/gpu/gpu_backend.hpp"

namespace gpu_test {

class HostDeviceApi final : public luminal::gpu::DeviceApi {
 public:
  explicit HostDeviceApi(std::string arch) : arch_(std::move(arch)) {}

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
    return reinterpret_cast<void*>(modules_.at(module)->function<LaunchFn>(kernel + "_launch"));
  }

  std::uint64_t alloc(std::size_t bytes) const override {
    ++allocations;
    return reinterpret_cast<std::uint64_t>(std::aligned_alloc(256, (bytes + 255) / 256 * 256));
  }
  void free(std::uint64_t ptr) const noexcept override { std::free(reinterpret_cast<void*>(ptr)); }
  void* alloc_pinned(std::size_t bytes) const override { return std::malloc(bytes); }
  void free_pinned(void* ptr) const noexcept override { std::free(ptr); }

  void* create_stream() const override { return new int(0); }
  void destroy_stream(void* stream) const noexcept override { delete static_cast<int*>(stream); }
  void copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void*) const override {
    bytes_in += bytes;
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  }
  void copy_out(void* dst, std::uint64_t src, std::size_t bytes, void*) const override {
    bytes_out += bytes;
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  }
  void launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void*,
              const char*) const override {
    ++launches;
    reinterpret_cast<LaunchFn>(fn)(grid, block, args);
  }
  void synchronize(void*, const char*) const override { ++synchronizations; }

  bool begin_capture(void*) const override { return false; }
  void* end_capture(void*) const override { return nullptr; }
  void abort_capture(void*) const noexcept override {}
  void launch_graph(void*, void*) const override {}
  void destroy_graph(void*) const noexcept override {}

  // What the runtime asked for (the tests check the work it queued).
  mutable std::size_t launches = 0, synchronizations = 0, allocations = 0, bytes_in = 0, bytes_out = 0;

 private:
  using LaunchFn = void (*)(const unsigned*, const unsigned*, void**);
  std::string arch_;
  mutable std::mutex mu_;
  mutable std::map<void*, std::shared_ptr<const luminal::cpu::JitLibrary>> modules_;
};

}  // namespace gpu_test
