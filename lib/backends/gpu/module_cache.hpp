// The cache of device modules (every kernel of one program, compiled by NVRTC or
// hipRTC), in memory and on disk. The key is the hash of everything that decides the
// image: source, arch, output kind, compiler and version, options. A disk entry is the
// CPU JIT cache's format and code (cpu::write_cache_entry: payload + checksummed trailer,
// written to a unique temp file and renamed; entries of another owner refused); its
// payload holds the compiler's log beside the image, so a cached compile reports the
// same registers, shared memory and spills.
#pragma once

#include <functional>
#include <string>

namespace luminal::gpu {

struct DeviceModule {
  std::string image;  ///< CUBIN, PTX or an AMDGPU code object
  std::string log;    ///< the compiler's log
  enum class From { Compiler, Memory, Disk } from = From::Compiler;
};

/// The module for `key_material`: from memory, else from `cache_dir` (empty: the default
/// cache folder, LUMINAL_CACHE_DIR or ~/.cache/luminal) as <hash>.<ext>, else
/// `compile()` (which throws CompileError on failure), stored in both.
DeviceModule cached_module(const std::string& key_material, const std::string& ext, const std::string& cache_dir,
                           const std::function<DeviceModule()>& compile);

/// Forgets the in-memory modules (benchmarks of a cold or disk-cached compile).
void clear_module_memory_cache();

}  // namespace luminal::gpu
