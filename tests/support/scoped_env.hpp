// An environment variable set for one scope, restored (or removed) when it ends. Tests
// that state a figure the library reads from the environment (a link's latency, a cache
// size) use it; tests in one process run one at a time, so the change is theirs alone.
#pragma once

#include <cstdlib>
#include <string>

namespace testsupport {

struct ScopedEnv {
  std::string name, saved;
  bool had = false;
  ScopedEnv(std::string var, const std::string& value) : name(std::move(var)) {
    if (const char* v = std::getenv(name.c_str())) {
      had = true;
      saved = v;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (had)
      ::setenv(name.c_str(), saved.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

}  // namespace testsupport
