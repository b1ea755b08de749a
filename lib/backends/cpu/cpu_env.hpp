// The CPU backend's diagnostic environment variables, read in one place (at each
// executable's construction, so a test or a tool may set them between compiles).
#pragma once

#include <string>

namespace luminal::cpu {

struct CpuEnv {
  /// LUMINAL_CPU_PROFILE=1: per-kernel wall time summed over calls, printed at exit
  /// (kernels over 1% of the total); =2: every kernel.
  bool profile = false;
  bool profile_all = false;
  /// LUMINAL_DUMP_C=path: write the generated translation unit (and the kernel IR) there.
  std::string dump_c;

  static CpuEnv from_env();
};

}  // namespace luminal::cpu
