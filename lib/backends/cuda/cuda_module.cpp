#include "backends/cuda/cuda_module.hpp"

#include "backends/cuda/nvrtc.hpp"
#include "backends/gpu/module_cache.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

bool nvrtc_available(std::string* why) { return Nvrtc::get(why) != nullptr; }

CudaModule compile_module(const std::string& source, const std::string& arch, bool cubin,
                          const std::string& cache_dir) {
  std::string why;
  const Nvrtc* nv = Nvrtc::get(&why);
  if (!nv) throw CompileError("[cuda] " + why);
  const std::string codegen = "nvrtc " + nv->version() + (cubin ? " cubin " : " ptx ") + arch;
  gpu::DeviceModule d = gpu::cached_module(source + '\0' + codegen + '\0' + Nvrtc::options_string(),
                                           cubin ? "cubin" : "ptx", cache_dir, [&] {
                                             NvrtcOutput o = nv->compile(source, arch, cubin);
                                             gpu::DeviceModule m;
                                             m.image = std::move(o.image);
                                             m.log = std::move(o.log);
                                             return m;
                                           });
  CudaModule m;
  m.image = std::move(d.image);
  m.log = std::move(d.log);
  m.cubin = cubin;
  m.codegen = codegen;
  m.from = d.from == gpu::DeviceModule::From::Memory ? CudaModule::From::Memory
           : d.from == gpu::DeviceModule::From::Disk ? CudaModule::From::Disk
                                                     : CudaModule::From::Compiler;
  m.resources = parse_ptxas_log(m.log);
  return m;
}

}  // namespace luminal::cuda
