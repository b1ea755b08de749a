// A HIP module (every kernel of one program) compiled by hipRTC for an AMD architecture
// checked against comgr first, cached like CUDA modules (gpu/module_cache.hpp; the key
// holds the arch and the hipRTC version).
#pragma once

#include <string>
#include <vector>

#include "luminal/callable.hpp"

namespace luminal::hip {

struct HipModule {
  std::string image;  ///< AMDGPU code object
  std::string log;
  std::vector<KernelResources> resources;
  std::string codegen;  ///< "hiprtc 5.2 gfx90a"
  bool from_cache = false;
};

/// Throws CompileError when hipRTC is missing, the arch unknown to this ROCm, or the
/// compile fails.
HipModule compile_module(const std::string& source, const std::string& arch, const std::string& cache_dir = {});

bool hiprtc_available(std::string* why = nullptr);

}  // namespace luminal::hip
