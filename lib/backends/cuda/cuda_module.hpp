// A CUDA module (every kernel of one program) compiled by NVRTC, cached in memory and
// on disk. The key is the hash of (source, arch, output kind, NVRTC version, options);
// the disk entry is the JIT cache's format (payload + checksummed trailer, atomic
// rename), holding the NVRTC log (so a cached compile reports the same registers,
// shared memory and spills) and the image.
#pragma once

#include <string>
#include <vector>

#include "luminal/callable.hpp"

namespace luminal::cuda {

struct CudaModule {
  std::string image;  ///< CUBIN or PTX
  bool cubin = true;
  std::string log;
  std::vector<KernelResources> resources;
  std::string codegen;  ///< "nvrtc 13.0 cubin sm_90"
  enum class From { Compiler, Memory, Disk } from = From::Compiler;
};

/// Throws CompileError when NVRTC is missing, rejects the arch, or fails (with its log).
/// `cache_dir` empty: the default cache folder (LUMINAL_CACHE_DIR, ~/.cache/luminal).
CudaModule compile_module(const std::string& source, const std::string& arch, bool cubin,
                          const std::string& cache_dir = {});

/// Whether NVRTC loads here (the reason otherwise).
bool nvrtc_available(std::string* why = nullptr);

}  // namespace luminal::cuda
