// The CPU backend's environment variables (see the header).
#include "backends/cpu/cpu_env.hpp"

#include <cstdlib>

namespace luminal::cpu {

CpuEnv CpuEnv::from_env() {
  CpuEnv e;
  if (const char* p = std::getenv("LUMINAL_CPU_PROFILE"); p && (*p == '1' || *p == '2')) {
    e.profile = true;
    e.profile_all = *p == '2';
  }
  if (const char* d = std::getenv("LUMINAL_DUMP_C"); d && *d) e.dump_c = d;
  return e;
}

}  // namespace luminal::cpu
