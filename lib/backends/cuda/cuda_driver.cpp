#include "backends/cuda/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "backends/cuda/cublaslt.hpp"
#include "backends/gpu/rtc.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

namespace {
constexpr int kAttrMajor = 75, kAttrMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_*
constexpr int kCaptureThreadLocal = 1;           // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
constexpr unsigned kStreamNonBlocking = 1;       // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 2;      // CU_EVENT_DISABLE_TIMING

using gpu::bind_symbol;
}  // namespace

const Driver* Driver::get(std::string* why) {
  static std::once_flag once;
  static Driver* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // stays loaded: drivers are not unloaded
    if (!h) {
      failure = "the CUDA driver (libcuda.so.1) is not installed";
      return;
    }
    auto* d = new Driver();  // never destroyed, like the driver itself
    const bool ok =
        bind_symbol(h, "cuInit", d->cuInit) && bind_symbol(h, "cuDriverGetVersion", d->cuDriverGetVersion) &&
        bind_symbol(h, "cuDeviceGet", d->cuDeviceGet) &&
        bind_symbol(h, "cuDeviceGetAttribute", d->cuDeviceGetAttribute) &&
        bind_symbol(h, "cuDeviceGetName", d->cuDeviceGetName) &&
        bind_symbol(h, "cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain) &&
        bind_symbol(h, "cuCtxSetCurrent", d->cuCtxSetCurrent) &&
        bind_symbol(h, "cuModuleLoadData", d->cuModuleLoadData) &&
        bind_symbol(h, "cuModuleUnload", d->cuModuleUnload) &&
        bind_symbol(h, "cuModuleGetFunction", d->cuModuleGetFunction) &&
        bind_symbol(h, "cuMemAlloc_v2", d->cuMemAlloc) && bind_symbol(h, "cuMemFree_v2", d->cuMemFree) &&
        bind_symbol(h, "cuMemAllocHost_v2", d->cuMemAllocHost) &&
        bind_symbol(h, "cuMemFreeHost", d->cuMemFreeHost) &&
        bind_symbol(h, "cuMemcpyHtoDAsync_v2", d->cuMemcpyHtoDAsync) &&
        bind_symbol(h, "cuMemcpyDtoHAsync_v2", d->cuMemcpyDtoHAsync) &&
        bind_symbol(h, "cuMemcpyDtoDAsync_v2", d->cuMemcpyDtoDAsync) &&
        bind_symbol(h, "cuEventCreate", d->cuEventCreate) &&
        bind_symbol(h, "cuEventDestroy_v2", d->cuEventDestroy) &&
        bind_symbol(h, "cuEventRecord", d->cuEventRecord) &&
        bind_symbol(h, "cuStreamWaitEvent", d->cuStreamWaitEvent) &&
        bind_symbol(h, "cuStreamCreate", d->cuStreamCreate) &&
        bind_symbol(h, "cuStreamSynchronize", d->cuStreamSynchronize) &&
        bind_symbol(h, "cuStreamDestroy_v2", d->cuStreamDestroy) &&
        bind_symbol(h, "cuLaunchKernel", d->cuLaunchKernel) &&
        bind_symbol(h, "cuStreamBeginCapture_v2", d->cuStreamBeginCapture) &&
        bind_symbol(h, "cuStreamEndCapture", d->cuStreamEndCapture) &&
        bind_symbol(h, "cuGraphInstantiateWithFlags", d->cuGraphInstantiate) &&
        bind_symbol(h, "cuGraphLaunch", d->cuGraphLaunch) &&
        bind_symbol(h, "cuGraphExecDestroy", d->cuGraphExecDestroy) &&
        bind_symbol(h, "cuGraphDestroy", d->cuGraphDestroy) &&
        bind_symbol(h, "cuGetErrorString", d->cuGetErrorString);
    if (!ok) {
      failure = "libcuda.so.1 lacks entry points the runtime needs (a driver older than CUDA 11.4?)";
      delete d;
      return;
    }
    if (CUresult rc = d->cuInit(0); rc != 0) {
      failure = "cuInit failed with CUresult " + std::to_string(rc);
      delete d;
      return;
    }
    instance = d;
  });
  if (!instance && why) *why = failure;
  return instance;
}

void Driver::check(CUresult rc, const char* what) const {
  if (rc == 0) return;
  const char* msg = nullptr;
  cuGetErrorString(rc, &msg);
  throw RuntimeError(std::string("[cuda] ") + what + ": " + (msg ? msg : "error " + std::to_string(rc)));
}

std::string Driver::arch(int device) const {
  int dev = 0, major = 0, minor = 0;
  check(cuDeviceGet(&dev, device), "cuDeviceGet");
  check(cuDeviceGetAttribute(&major, kAttrMajor, dev), "compute capability");
  check(cuDeviceGetAttribute(&minor, kAttrMinor, dev), "compute capability");
  return "sm_" + std::to_string(major * 10 + minor);
}

void Driver::make_current(int device) const {
  void* ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(ctx_mu_);
    auto it = primary_ctx_.find(device);
    if (it == primary_ctx_.end()) {
      int dev = 0;
      check(cuDeviceGet(&dev, device), "cuDeviceGet");
      check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
      primary_ctx_.emplace(device, ctx);
    } else {
      ctx = it->second;
    }
  }
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

void* Driver::load_module(const std::string& image) const {
  void* m = nullptr;
  check(cuModuleLoadData(&m, image.data()), "cuModuleLoadData");
  return m;
}
void Driver::unload_module(void* module) const noexcept { cuModuleUnload(module); }
void* Driver::function(void* module, const std::string& kernel) const {
  void* f = nullptr;
  check(cuModuleGetFunction(&f, module, kernel.c_str()), kernel.c_str());
  return f;
}
std::uint64_t Driver::alloc(std::size_t bytes) const {
  CUdeviceptr p = 0;
  check(cuMemAlloc(&p, bytes), "device arena allocation");
  return p;
}
void Driver::free(std::uint64_t ptr) const noexcept { cuMemFree(ptr); }
void* Driver::alloc_pinned(std::size_t bytes) const {
  void* p = nullptr;
  check(cuMemAllocHost(&p, bytes), "pinned staging allocation");
  return p;
}
void Driver::free_pinned(void* ptr) const noexcept { cuMemFreeHost(ptr); }
void* Driver::create_stream() const {
  void* s = nullptr;
  check(cuStreamCreate(&s, kStreamNonBlocking), "cuStreamCreate");
  return s;
}
void Driver::destroy_stream(void* stream) const noexcept { cuStreamDestroy(stream); }
void Driver::copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void* stream) const {
  check(cuMemcpyHtoDAsync(dst, src, bytes, stream), "input copy");
}
void Driver::copy_out(void* dst, std::uint64_t src, std::size_t bytes, void* stream) const {
  check(cuMemcpyDtoHAsync(dst, src, bytes, stream), "output copy");
}
void Driver::copy_device(std::uint64_t dst, std::uint64_t src, std::size_t bytes, void* stream) const {
  check(cuMemcpyDtoDAsync(dst, src, bytes, stream), "device copy");
}
void Driver::launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void* stream,
                    const char* what) const {
  check(cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, stream, args, nullptr), what);
}
void Driver::synchronize(void* stream, const char* what) const { check(cuStreamSynchronize(stream), what); }
void* Driver::create_event() const {
  void* e = nullptr;
  check(cuEventCreate(&e, kEventDisableTiming), "cuEventCreate");
  return e;
}
void Driver::destroy_event(void* event) const noexcept { cuEventDestroy(event); }
void Driver::record_event(void* event, void* stream) const {
  check(cuEventRecord(event, stream), "cuEventRecord");
}
void Driver::wait_event(void* stream, void* event) const {
  check(cuStreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}
bool Driver::begin_capture(void* stream) const {
  check(cuStreamBeginCapture(stream, kCaptureThreadLocal), "cuStreamBeginCapture");
  return true;
}
void* Driver::end_capture(void* stream) const {
  void* g = nullptr;
  check(cuStreamEndCapture(stream, &g), "cuStreamEndCapture");
  void* exec = nullptr;
  const CUresult rc = cuGraphInstantiate(&exec, g, 0);
  cuGraphDestroy(g);
  check(rc, "cuGraphInstantiate");
  return exec;
}
void Driver::abort_capture(void* stream) const noexcept {
  void* g = nullptr;
  cuStreamEndCapture(stream, &g);
  if (g) cuGraphDestroy(g);
}
void Driver::launch_graph(void* graph, void* stream) const { check(cuGraphLaunch(graph, stream), "cuGraphLaunch"); }
void Driver::destroy_graph(void* graph) const noexcept { cuGraphExecDestroy(graph); }

std::string Driver::blas(std::string* why) const {
  const CublasLt* l = CublasLt::get(why);
  return l ? l->version() : std::string();
}

std::size_t Driver::blas_workspace() const { return CublasLt::kWorkspace; }

void Driver::blas_gemm(int device, const gpu::BlasCall& c, std::uint64_t a, std::uint64_t b, std::uint64_t d,
                       std::uint64_t workspace, void* stream) const {
  std::string why;
  const CublasLt* l = CublasLt::get(&why);
  if (!l) throw RuntimeError("[cuda] " + why);
  l->gemm(device, c, a, b, d, workspace, stream);
}

}  // namespace luminal::cuda
