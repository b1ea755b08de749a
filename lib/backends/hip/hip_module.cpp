#include "backends/hip/hip_module.hpp"

#include "backends/gpu/module_cache.hpp"
#include "backends/hip/code_object.hpp"
#include "backends/hip/hiprtc.hpp"
#include "luminal/error.hpp"

namespace luminal::hip {

bool hiprtc_available(std::string* why) { return Hiprtc::get(why) != nullptr; }

HipModule compile_module(const std::string& source, const std::string& arch, const std::string& cache_dir) {
  std::string why;
  const Hiprtc* rtc = Hiprtc::get(&why);
  if (!rtc) throw CompileError("[hip] " + why);
  rtc->check_arch(arch);  // never a cached entry for an architecture this ROCm cannot build
  const std::string codegen = "hiprtc " + rtc->version() + " " + arch;
  gpu::DeviceModule d =
      gpu::cached_module(source + '\0' + codegen + '\0' + Hiprtc::options_string(), "hsaco", cache_dir, [&] {
        HiprtcOutput o = rtc->compile(source, arch);
        gpu::DeviceModule m;
        m.image = std::move(o.image);
        m.log = std::move(o.log);
        return m;
      });
  HipModule m;
  m.image = std::move(d.image);
  m.log = std::move(d.log);
  m.codegen = codegen;
  m.from_cache = d.from != gpu::DeviceModule::From::Compiler;
  // A hipRTC that prints resource remarks is read from its log; hipRTC 5.2 prints none, so
  // the code object's own metadata is the source there.
  m.resources = parse_amdgpu_remarks(m.log);
  if (m.resources.empty()) m.resources = code_object_resources(m.image);
  return m;
}

}  // namespace luminal::hip
