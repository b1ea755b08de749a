#include "backends/hip/hip_driver.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/gpu/rtc.hpp"
#include "luminal/error.hpp"

namespace luminal::hip {

namespace {
constexpr unsigned kStreamNonBlocking = 1;  // hipStreamNonBlocking
constexpr unsigned kEventDisableTiming = 2;  // hipEventDisableTiming
constexpr unsigned kHostMallocDefault = 0;  // hipHostMallocDefault
constexpr std::size_t kPropBytes = 4096;    // more than any hipDeviceProp_t layout (ROCm 5.2: 792)
constexpr int kCaptureThreadLocal = 1;      // hipStreamCaptureModeThreadLocal

using gpu::bind_symbol;
}  // namespace

std::string arch_from_gcn_name(const char* bytes, std::size_t max_len) {
  const std::size_t n = strnlen(bytes, max_len);
  if (n == max_len || n < 4 || std::strncmp(bytes, "gfx", 3) != 0) return "";
  std::string a(bytes, n);
  a = a.substr(0, a.find(':'));  // drop target features (":sramecc+:xnack-")
  for (std::size_t i = 3; i < a.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(a[i]))) return "";
  return a;
}

const Driver* Driver::get(std::string* why) {
  static std::once_flag once;
  static Driver* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    // The runtime's major version comes from the soname (0: unversioned, not known).
    struct Lib {
      const char* name;
      int major;
    };
    void* h = nullptr;
    int major = 0;
    for (const Lib& l : {Lib{"libamdhip64.so.6", 6}, Lib{"libamdhip64.so.5", 5}, Lib{"libamdhip64.so", 0}})
      if ((h = dlopen(l.name, RTLD_NOW | RTLD_LOCAL))) {  // stays loaded, like any driver
        major = l.major;
        break;
      }
    if (!h) {
      failure = "the HIP runtime (libamdhip64.so.6/.5) is not installed";
      return;
    }
    auto* d = new Driver();  // never destroyed, like the runtime itself
    const bool ok =
        bind_symbol(h, "hipInit", d->hipInit) && bind_symbol(h, "hipGetDeviceCount", d->hipGetDeviceCount) &&
        bind_symbol(h, "hipGetDeviceProperties", d->hipGetDeviceProperties) &&
        bind_symbol(h, "hipSetDevice", d->hipSetDevice) &&
        bind_symbol(h, "hipModuleLoadData", d->hipModuleLoadData) &&
        bind_symbol(h, "hipModuleUnload", d->hipModuleUnload) &&
        bind_symbol(h, "hipModuleGetFunction", d->hipModuleGetFunction) &&
        bind_symbol(h, "hipMalloc", d->hipMalloc) && bind_symbol(h, "hipFree", d->hipFree) &&
        bind_symbol(h, "hipHostMalloc", d->hipHostMalloc) && bind_symbol(h, "hipHostFree", d->hipHostFree) &&
        bind_symbol(h, "hipMemcpyHtoDAsync", d->hipMemcpyHtoDAsync) &&
        bind_symbol(h, "hipMemcpyDtoHAsync", d->hipMemcpyDtoHAsync) &&
        bind_symbol(h, "hipMemcpyDtoDAsync", d->hipMemcpyDtoDAsync) &&
        bind_symbol(h, "hipEventCreateWithFlags", d->hipEventCreateWithFlags) &&
        bind_symbol(h, "hipEventDestroy", d->hipEventDestroy) &&
        bind_symbol(h, "hipEventRecord", d->hipEventRecord) &&
        bind_symbol(h, "hipStreamWaitEvent", d->hipStreamWaitEvent) &&
        bind_symbol(h, "hipStreamCreateWithFlags", d->hipStreamCreateWithFlags) &&
        bind_symbol(h, "hipStreamDestroy", d->hipStreamDestroy) &&
        bind_symbol(h, "hipStreamSynchronize", d->hipStreamSynchronize) &&
        bind_symbol(h, "hipModuleLaunchKernel", d->hipModuleLaunchKernel) &&
        bind_symbol(h, "hipGetErrorString", d->hipGetErrorString);
    if (!ok) {
      failure = "libamdhip64 lacks entry points the runtime needs";
      delete d;
      return;
    }
    d->graphs = graphs_wanted(major, std::getenv("LUMINAL_HIP_GRAPHS")) && bind_graph_api(h, *d);
    if (hipError rc = d->hipInit(0); rc != 0) {
      const char* msg = d->hipGetErrorString(rc);
      failure = "hipInit failed: " + std::string(msg ? msg : "hipError " + std::to_string(rc));
      delete d;
      return;
    }
    int count = 0;
    if (hipError rc = d->hipGetDeviceCount(&count); rc != 0 || count == 0) {
      failure = "no HIP device";
      delete d;
      return;
    }
    instance = d;
  });
  if (!instance && why) *why = failure;
  return instance;
}

bool Driver::bind_graph_api(void* h, Driver& d) {
  const bool ok = bind_symbol(h, "hipStreamBeginCapture", d.hipStreamBeginCapture) &&
                  bind_symbol(h, "hipStreamEndCapture", d.hipStreamEndCapture) &&
                  bind_symbol(h, "hipGraphInstantiate", d.hipGraphInstantiate) &&
                  bind_symbol(h, "hipGraphLaunch", d.hipGraphLaunch) &&
                  bind_symbol(h, "hipGraphExecDestroy", d.hipGraphExecDestroy) &&
                  bind_symbol(h, "hipGraphDestroy", d.hipGraphDestroy);
  if (!ok) {
    d.hipStreamBeginCapture = nullptr;
    d.hipStreamEndCapture = nullptr;
    d.hipGraphInstantiate = nullptr;
    d.hipGraphLaunch = nullptr;
    d.hipGraphExecDestroy = nullptr;
    d.hipGraphDestroy = nullptr;
  }
  return ok;
}

bool Driver::graphs_wanted(int runtime_major, const char* env) {
  if (env && *env) return std::strcmp(env, "0") != 0;
  return runtime_major >= 6;
}

void Driver::check(hipError rc, const char* what) const {
  if (rc == 0) return;
  const char* msg = hipGetErrorString(rc);
  throw RuntimeError(std::string("[hip] ") + what + ": " + (msg ? msg : "hipError " + std::to_string(rc)));
}

std::string Driver::arch(int device) const {
  std::vector<char> prop(kPropBytes, 0);
  check(hipGetDeviceProperties(prop.data(), device), "hipGetDeviceProperties");
  std::string a = arch_from_gcn_name(prop.data() + kGcnArchNameOffset, 256);
  if (a.empty())
    throw RuntimeError("[hip] cannot read device " + std::to_string(device) +
                       "'s architecture from this HIP runtime's device properties");
  return a;
}

void Driver::make_current(int device) const { check(hipSetDevice(device), "hipSetDevice"); }
void* Driver::load_module(const std::string& image) const {
  void* m = nullptr;
  check(hipModuleLoadData(&m, image.data()), "hipModuleLoadData");
  return m;
}
void Driver::unload_module(void* module) const noexcept { hipModuleUnload(module); }
void* Driver::function(void* module, const std::string& kernel) const {
  void* f = nullptr;
  check(hipModuleGetFunction(&f, module, kernel.c_str()), kernel.c_str());
  return f;
}
std::uint64_t Driver::alloc(std::size_t bytes) const {
  void* p = nullptr;
  check(hipMalloc(&p, bytes), "device arena allocation");
  return reinterpret_cast<std::uint64_t>(p);
}
void Driver::free(std::uint64_t ptr) const noexcept { hipFree(reinterpret_cast<void*>(ptr)); }
void* Driver::alloc_pinned(std::size_t bytes) const {
  void* p = nullptr;
  check(hipHostMalloc(&p, bytes, kHostMallocDefault), "pinned staging allocation");
  return p;
}
void Driver::free_pinned(void* ptr) const noexcept { hipHostFree(ptr); }
void* Driver::create_stream() const {
  void* s = nullptr;
  check(hipStreamCreateWithFlags(&s, kStreamNonBlocking), "hipStreamCreateWithFlags");
  return s;
}
void Driver::destroy_stream(void* stream) const noexcept { hipStreamDestroy(stream); }
void Driver::copy_in(std::uint64_t dst, const void* src, std::size_t bytes, void* stream) const {
  check(hipMemcpyHtoDAsync(reinterpret_cast<void*>(dst), src, bytes, stream), "input copy");
}
void Driver::copy_out(void* dst, std::uint64_t src, std::size_t bytes, void* stream) const {
  check(hipMemcpyDtoHAsync(dst, reinterpret_cast<void*>(src), bytes, stream), "output copy");
}
void Driver::copy_device(std::uint64_t dst, std::uint64_t src, std::size_t bytes, void* stream) const {
  check(hipMemcpyDtoDAsync(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes, stream),
        "device copy");
}
void Driver::launch(void* fn, const unsigned grid[3], const unsigned block[3], void** args, void* stream,
                    const char* what) const {
  check(hipModuleLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, stream, args, nullptr),
        what);
}
void Driver::synchronize(void* stream, const char* what) const { check(hipStreamSynchronize(stream), what); }
void* Driver::create_event() const {
  void* e = nullptr;
  check(hipEventCreateWithFlags(&e, kEventDisableTiming), "hipEventCreateWithFlags");
  return e;
}
void Driver::destroy_event(void* event) const noexcept { hipEventDestroy(event); }
void Driver::record_event(void* event, void* stream) const {
  check(hipEventRecord(event, stream), "hipEventRecord");
}
void Driver::wait_event(void* stream, void* event) const {
  check(hipStreamWaitEvent(stream, event, 0), "hipStreamWaitEvent");
}
// A capture that fails at any step leaves the binding without a graph: the executable
// then enqueues the kernels directly on every call (device_executable.cpp).
bool Driver::begin_capture(void* stream) const {
  return graphs && hipStreamBeginCapture(stream, kCaptureThreadLocal) == 0;
}
void* Driver::end_capture(void* stream) const {
  void* g = nullptr;
  if (hipStreamEndCapture(stream, &g) != 0 || !g) return nullptr;
  void* exec = nullptr;
  const hipError rc = hipGraphInstantiate(&exec, g, nullptr, nullptr, 0);
  hipGraphDestroy(g);
  return rc == 0 ? exec : nullptr;
}
void Driver::abort_capture(void* stream) const noexcept {
  void* g = nullptr;
  hipStreamEndCapture(stream, &g);
  if (g) hipGraphDestroy(g);
}
void Driver::launch_graph(void* graph, void* stream) const { check(hipGraphLaunch(graph, stream), "hipGraphLaunch"); }
void Driver::destroy_graph(void* graph) const noexcept { hipGraphExecDestroy(graph); }

}  // namespace luminal::hip
