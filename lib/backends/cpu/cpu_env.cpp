// The CPU backend's environment variables (see the header).
#include "backends/cpu/cpu_env.hpp"

#include <cstdlib>

namespace luminal::cpu {

CpuEnv CpuEnv::from_env() {
  CpuEnv e;
  if (const char* p = std::getenv("LUMINAL_CPU_PROFILE"); p && *p == '1') e.profile = true;
  if (const char* d = std::getenv("LUMINAL_DUMP_C"); d && *d) e.dump_c = d;
  return e;
}

}  // namespace luminal::cpu
