// dlopen/dlsym with Luminal's error style, for the communication libraries (MPI, NCCL,
// the CUDA runtime): never linked, so a program linking Luminal starts without them.
#pragma once

#include <dlfcn.h>

#include <initializer_list>
#include <string>

#include "luminal/error.hpp"

namespace luminal::dist {

/// The first of `names` that loads (one already in the process is reused); throws
/// RuntimeError naming `what` and every name tried.
inline void* open_library(std::initializer_list<const char*> names, const std::string& what, int flags) {
  std::string tried;
  for (const char* n : names) {
    if (void* h = dlopen(n, RTLD_NOLOAD | flags)) return h;
    if (void* h = dlopen(n, flags)) return h;
    const char* e = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (e ? e : n);
  }
  throw RuntimeError("[" + what + "] cannot load the library: " + tried);
}

template <class F>
F symbol(void* lib, const char* name, const std::string& what) {
  void* p = dlsym(lib, name);
  if (!p) throw RuntimeError("[" + what + "] the loaded library lacks " + std::string(name));
  return reinterpret_cast<F>(p);
}

}  // namespace luminal::dist
