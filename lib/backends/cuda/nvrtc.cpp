#include "backends/cuda/nvrtc.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "backends/gpu/rtc.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

// The entry points, declared by hand (no CUDA header is needed to build Luminal).
struct Nvrtc::Api {
  using Prog = void*;
  int (*version)(int*, int*) = nullptr;
  int (*num_archs)(int*) = nullptr;
  int (*archs)(int*) = nullptr;
  int (*create)(Prog*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  int (*compile)(Prog, int, const char* const*) = nullptr;
  int (*log_size)(Prog, size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*ptx_size)(Prog, size_t*) = nullptr;
  int (*ptx)(Prog, char*) = nullptr;
  int (*cubin_size)(Prog, size_t*) = nullptr;
  int (*cubin)(Prog, char*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  void* handle = nullptr;
};

namespace {

// Every compile's options beside -arch (part of the module cache key).
constexpr const char* kOptions[] = {"-std=c++17", "--fmad=false", "-w", "-Xptxas=-v"};

using gpu::bind_symbol;

}  // namespace

const Nvrtc* Nvrtc::get(std::string* why) {
  static std::once_flag once;
  static Nvrtc* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* h = nullptr;
    std::string tried;
    const char* env = std::getenv("LUMINAL_NVRTC");
    std::vector<std::string> names;
    if (env && *env) names.push_back(env);
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "/usr/local/cuda/lib64/libnvrtc.so"})
      names.push_back(n);
    for (const auto& n : names) {
      h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      tried += (tried.empty() ? "" : ", ") + n;
    }
    if (!h) {
      failure = "NVRTC not found (tried " + tried + "); install the CUDA toolkit's NVRTC or set LUMINAL_NVRTC";
      return;
    }
    auto api = std::make_shared<Api>();
    api->handle = h;
    bool ok = bind_symbol(h, "nvrtcVersion", api->version) && bind_symbol(h, "nvrtcCreateProgram", api->create) &&
              bind_symbol(h, "nvrtcDestroyProgram", api->destroy) && bind_symbol(h, "nvrtcCompileProgram", api->compile) &&
              bind_symbol(h, "nvrtcGetProgramLogSize", api->log_size) && bind_symbol(h, "nvrtcGetProgramLog", api->log) &&
              bind_symbol(h, "nvrtcGetPTXSize", api->ptx_size) && bind_symbol(h, "nvrtcGetPTX", api->ptx) &&
              bind_symbol(h, "nvrtcGetErrorString", api->error_string);
    if (!ok) {
      failure = "the NVRTC library lacks nvrtcCompileProgram and friends";
      return;
    }
    bind_symbol(h, "nvrtcGetCUBINSize", api->cubin_size);
    bind_symbol(h, "nvrtcGetCUBIN", api->cubin);
    bind_symbol(h, "nvrtcGetNumSupportedArchs", api->num_archs);
    bind_symbol(h, "nvrtcGetSupportedArchs", api->archs);
    auto* n = new Nvrtc();  // never destroyed: compiled modules may outlive static objects
    n->api_ = api;
    api->version(&n->major_, &n->minor_);
    int count = 0;
    if (api->num_archs && api->archs && api->num_archs(&count) == 0 && count > 0) {
      n->archs_.resize(static_cast<size_t>(count));
      api->archs(n->archs_.data());
    }
    instance = n;
  });
  if (!instance && why) *why = failure;
  return instance;
}

std::string Nvrtc::options_string() { return gpu::join_options(kOptions); }

std::string Nvrtc::version() const { return std::to_string(major_) + "." + std::to_string(minor_); }

bool Nvrtc::supports(const std::string& arch) const {
  if (archs_.empty()) return true;  // an NVRTC that cannot list them: let it decide
  const int v = std::atoi(arch.c_str() + 3);
  for (int a : archs_)
    if (a == v) return true;
  return false;
}

std::string Nvrtc::supported_list() const {
  std::string s;
  for (int a : archs_) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s;
}

NvrtcOutput Nvrtc::compile(const std::string& source, const std::string& arch, bool cubin,
                           const std::string& program_name) const {
  const Api& a = *api_;
  if (!supports(arch))
    throw CompileError("[cuda] NVRTC " + version() + " cannot generate code for " + arch + "; it supports " +
                       supported_list());
  if (cubin && (!a.cubin_size || !a.cubin))
    throw CompileError("[cuda] NVRTC " + version() + " cannot return CUBIN (nvrtcGetCUBIN missing)");
  // sm_90a / sm_100a: architecture-specific features; PTX takes the compute_ form.
  const std::string target = cubin ? arch : "compute_" + arch.substr(3);
  std::vector<std::string> opts = {"-arch=" + target};
  for (const char* o : kOptions) opts.push_back(o);
  gpu::RtcResult r = gpu::rtc_compile(a, source, program_name.c_str(), opts, "[cuda] NVRTC " + version(), arch,
                                      [&](Api::Prog prog, std::string& image) {
                                        size_t n = 0;
                                        (cubin ? a.cubin_size : a.ptx_size)(prog, &n);
                                        image.resize(n);
                                        (cubin ? a.cubin : a.ptx)(prog, image.data());
                                      });
  NvrtcOutput out;
  out.cubin = cubin;
  out.image = std::move(r.image);
  out.log = std::move(r.log);
  out.resources = parse_ptxas_log(out.log);
  return out;
}

std::vector<KernelResources> parse_ptxas_log(const std::string& log) {
  // ptxas info    : Compiling entry function 'k0_0' for 'sm_90'
  // ptxas info    : Function properties for k0_0
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
  std::vector<KernelResources> out;
  std::istringstream in(log);
  KernelResources* cur = nullptr;
  auto number_before = [](const std::string& line, const std::string& word) -> int {
    const size_t p = line.find(word);
    if (p == std::string::npos) return -1;
    size_t e = p;
    while (e > 0 && line[e - 1] == ' ') --e;
    size_t b = e;
    while (b > 0 && std::isdigit(static_cast<unsigned char>(line[b - 1]))) --b;
    return b == e ? -1 : std::atoi(line.c_str() + b);
  };
  for (std::string line; std::getline(in, line);) {
    if (auto p = line.find("Compiling entry function '"); p != std::string::npos) {
      const size_t b = p + 26, e = line.find('\'', b);
      KernelResources k;
      k.name = line.substr(b, e - b);
      out.push_back(k);
      cur = &out.back();
      continue;
    }
    if (!cur) continue;
    if (line.find("bytes stack frame") != std::string::npos) {
      cur->stack_bytes = std::max(0, number_before(line, "bytes stack frame"));
      cur->spill_bytes = std::max(0, number_before(line, "bytes spill stores")) +
                         std::max(0, number_before(line, "bytes spill loads"));
    } else if (line.find("Used ") != std::string::npos && line.find("registers") != std::string::npos) {
      cur->registers = std::max(0, number_before(line, "registers"));
      cur->shared_bytes = std::max(0, number_before(line, "bytes smem"));
    }
  }
  return out;
}

}  // namespace luminal::cuda
