// What NVRTC and hipRTC share: the same program life cycle (create, compile with options,
// read the log, fetch the image, destroy) behind C entry points of the same shapes, loaded
// with dlopen and bound by name.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <string>
#include <vector>

#include "luminal/error.hpp"

namespace luminal::gpu {

/// Binds `f` to the symbol `name` of the library `h`; false when it is missing.
template <class F>
bool bind_symbol(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

/// The options joined with spaces (what module caches key on).
template <std::size_t N>
std::string join_options(const char* const (&opts)[N]) {
  std::string s;
  for (const char* o : opts) s += std::string(s.empty() ? "" : " ") + o;
  return s;
}

struct RtcResult {
  std::string image;
  std::string log;
};

/// Compiles `source` as one program with `options`. `Api` has Prog, create, destroy,
/// compile, log_size, log and error_string as NVRTC and hipRTC declare them; `fetch(prog,
/// image)` reads the compiled image. A failure is a CompileError "<who> failed to compile
/// the generated kernels for <arch> (<error>):" followed by the log. The program is
/// destroyed on every path.
template <class Api, class Fetch>
RtcResult rtc_compile(const Api& a, const std::string& source, const char* program_name,
                      const std::vector<std::string>& options, const std::string& who, const std::string& arch,
                      Fetch&& fetch) {
  typename Api::Prog prog = nullptr;
  if (int rc = a.create(&prog, source.c_str(), program_name, 0, nullptr, nullptr); rc != 0)
    throw CompileError(who + ": creating the program failed: " + a.error_string(rc));
  struct Destroy {
    const Api& a;
    typename Api::Prog& p;
    ~Destroy() { a.destroy(&p); }
  } destroy{a, prog};
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const int rc = a.compile(prog, static_cast<int>(argv.size()), argv.data());
  RtcResult out;
  std::size_t n = 0;
  if (a.log_size(prog, &n) == 0 && n > 1) {
    out.log.resize(n);
    a.log(prog, out.log.data());
    while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  }
  if (rc != 0)
    throw CompileError(who + " failed to compile the generated kernels for " + arch + " (" + a.error_string(rc) +
                       "):\n" + out.log);
  fetch(prog, out.image);
  return out;
}

}  // namespace luminal::gpu
