#include "backends/hip/hiprtc.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "backends/gpu/rtc.hpp"
#include "luminal/error.hpp"

namespace luminal::hip {

struct Hiprtc::Api {
  using Prog = void*;
  int (*create)(Prog*, const char*, const char*, int, const char**, const char**) = nullptr;
  int (*destroy)(Prog*) = nullptr;
  int (*compile)(Prog, int, const char**) = nullptr;
  int (*log_size)(Prog, size_t*) = nullptr;
  int (*log)(Prog, char*) = nullptr;
  int (*code_size)(Prog, size_t*) = nullptr;
  int (*code)(Prog, char*) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

namespace {

constexpr const char* kOptions[] = {"-O3", "-std=c++17", "-ffp-contract=off", "-w",
                                    "-Rpass-analysis=kernel-resource-usage"};

using gpu::bind_symbol;

}  // namespace

std::string rocm_supporting(const std::string& arch) {
  struct Row {
    const char* prefix;
    const char* rocm;
  };
  static const Row rows[] = {{"gfx940", "ROCm 5.3"}, {"gfx941", "ROCm 5.3"}, {"gfx942", "ROCm 5.7 (MI300X: ROCm 6.0)"},
                             {"gfx950", "ROCm 6.4"}, {"gfx1100", "ROCm 5.4"}, {"gfx1101", "ROCm 5.5"},
                             {"gfx1102", "ROCm 5.5"}, {"gfx1103", "ROCm 5.7"}, {"gfx1150", "ROCm 6.2"},
                             {"gfx1200", "ROCm 6.4"}, {"gfx1201", "ROCm 6.4"}};
  for (const Row& r : rows)
    if (arch == r.prefix) return std::string(r.rocm) + " or later";
  return "";
}

const Hiprtc* Hiprtc::get(std::string* why) {
  static std::once_flag once;
  static Hiprtc* instance = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    void* h = nullptr;
    for (const char* n : {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"})
      if ((h = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) {
      failure = "hipRTC not found (libamdhip64.so.6/.5); install libamdhip64-dev libhiprtc-builtins5 (Debian 12)";
      return;
    }
    auto* api = new Api();
    if (!(bind_symbol(h, "hiprtcCreateProgram", api->create) && bind_symbol(h, "hiprtcDestroyProgram", api->destroy) &&
          bind_symbol(h, "hiprtcCompileProgram", api->compile) && bind_symbol(h, "hiprtcGetProgramLogSize", api->log_size) &&
          bind_symbol(h, "hiprtcGetProgramLog", api->log) && bind_symbol(h, "hiprtcGetCodeSize", api->code_size) &&
          bind_symbol(h, "hiprtcGetCode", api->code) && bind_symbol(h, "hiprtcGetErrorString", api->error_string))) {
      failure = "libamdhip64 lacks the hipRTC entry points";
      delete api;
      return;
    }
    void* comgr = dlopen("libamd_comgr.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!comgr) {
      failure = "libamd_comgr.so.2 not found: without its ISA list no architecture can be checked";
      delete api;
      return;
    }
    int (*isa_count)(size_t*) = nullptr;
    int (*isa_name)(size_t, const char**) = nullptr;
    if (!bind_symbol(comgr, "amd_comgr_get_isa_count", isa_count) || !bind_symbol(comgr, "amd_comgr_get_isa_name", isa_name)) {
      failure = "libamd_comgr.so.2 lacks amd_comgr_get_isa_count/name";
      delete api;
      return;
    }
    auto* r = new Hiprtc();  // never destroyed, like the loaded libraries
    r->api_ = api;
    size_t n = 0;
    if (isa_count(&n) == 0)
      for (size_t i = 0; i < n; ++i) {
        const char* name = nullptr;
        if (isa_name(i, &name) != 0 || !name) continue;
        std::string s = name;  // "amdgcn-amd-amdhsa--gfx90a" (features after ':')
        const size_t dash = s.rfind("--");
        s = dash == std::string::npos ? s : s.substr(dash + 2);
        s = s.substr(0, s.find(':'));
        r->isas_.push_back(s);
      }
    int v = 0;
    int (*runtime_version)(int*) = nullptr;
    if (bind_symbol(h, "hipRuntimeGetVersion", runtime_version) && runtime_version(&v) == 0 && v > 0)
      r->version_ = std::to_string(v / 10000000) + '.' + std::to_string(v / 100000 % 100);
    else
      r->version_.assign(1, '?');
    instance = r;
  });
  if (!instance && why) *why = failure;
  return instance;
}

std::string Hiprtc::options_string() { return gpu::join_options(kOptions); }

void Hiprtc::check_arch(const std::string& arch) const {
  for (const auto& a : isas_)
    if (a == arch) return;
  std::string known;
  for (const auto& a : isas_) known += (known.empty() ? "" : ", ") + a;
  const std::string rocm = rocm_supporting(arch);
  throw CompileError("[hip] hipRTC " + version_ + " (ROCm " + version_ + ") cannot compile for " + arch +
                     (rocm.empty() ? std::string(": this ROCm does not know it")
                                   : ": it needs " + rocm + " (this ROCm's comgr would abort the process)") +
                     "; this ROCm knows " + known);
}

HiprtcOutput Hiprtc::compile(const std::string& source, const std::string& arch) const {
  check_arch(arch);  // before hipRTC: comgr aborts on an architecture it does not know
  // hipRTC 5.2 is not safe to call from two threads at once: two compiles in flight crash
  // inside libamdhip64 (ranks as threads compiling their programs together did, one time in
  // three). One compile at a time in the process; the module cache spares the repeats.
  static std::mutex one_at_a_time;
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  const Api& a = *api_;
  std::vector<std::string> opts = {"--gpu-architecture=" + arch};
  for (const char* o : kOptions) opts.push_back(o);
  gpu::RtcResult r = gpu::rtc_compile(a, source, "luminal.hip", opts, "[hip] hipRTC " + version_, arch,
                                      [&](Api::Prog prog, std::string& image) {
                                        size_t n = 0;
                                        a.code_size(prog, &n);
                                        image.resize(n);
                                        a.code(prog, image.data());
                                      });
  HiprtcOutput out;
  out.image = std::move(r.image);
  out.log = std::move(r.log);
  return out;
}

std::vector<KernelResources> parse_amdgpu_remarks(const std::string& log) {
  // remark: <file>:L:C: Function Name: k0_0 [-Rpass-analysis=kernel-resource-usage]
  // remark: ...: VGPRs: 12 ...   ScratchSize [bytes/lane]: 0 ...   LDS Size [bytes/block]: 1024
  std::vector<KernelResources> out;
  std::istringstream in(log);
  auto after = [](const std::string& line, const std::string& key, int& v) {
    const size_t p = line.find(key);
    if (p == std::string::npos) return false;
    v = std::atoi(line.c_str() + p + key.size());
    return true;
  };
  for (std::string line; std::getline(in, line);) {
    if (auto p = line.find("Function Name: "); p != std::string::npos) {
      KernelResources k;
      std::string name = line.substr(p + 15);
      k.name = name.substr(0, name.find(' '));
      out.push_back(k);
      continue;
    }
    if (out.empty()) continue;
    KernelResources& k = out.back();
    int v = 0;
    if (line.find("AGPRs") == std::string::npos && after(line, " VGPRs: ", v)) k.registers = v;
    if (after(line, "ScratchSize [bytes/lane]: ", v)) {
      k.stack_bytes = v;
      k.spill_bytes = v;  // scratch holds spilled registers (our kernels keep no stack arrays)
    }
    if (after(line, "LDS Size [bytes/block]: ", v)) k.shared_bytes = v;
  }
  return out;
}

}  // namespace luminal::hip
