#include "backends/cuda/cuda_module.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include "backends/cpu/jit.hpp"
#include "backends/cuda/nvrtc.hpp"
#include "luminal/error.hpp"

namespace luminal::cuda {

namespace fs = std::filesystem;

namespace {

std::string encode(const CudaModule& m) {
  std::string s;
  const uint64_t n = m.log.size();
  s.append(reinterpret_cast<const char*>(&n), sizeof n);
  s += m.log;
  s += m.image;
  return s;
}

bool decode(const std::string& payload, CudaModule& m) {
  uint64_t n = 0;
  if (payload.size() < sizeof n) return false;
  std::memcpy(&n, payload.data(), sizeof n);
  if (payload.size() - sizeof n < n) return false;
  m.log = payload.substr(sizeof n, n);
  m.image = payload.substr(sizeof n + n);
  return !m.image.empty();
}

}  // namespace

bool nvrtc_available(std::string* why) { return Nvrtc::get(why) != nullptr; }

CudaModule compile_module(const std::string& source, const std::string& arch, bool cubin,
                          const std::string& cache_dir) {
  std::string why;
  const Nvrtc* nv = Nvrtc::get(&why);
  if (!nv) throw CompileError("[cuda] " + why);
  const std::string codegen = "nvrtc " + nv->version() + (cubin ? " cubin " : " ptx ") + arch;
  const std::string key = cpu::hash_hex(source + '\0' + codegen + '\0' + Nvrtc::options_string());

  static std::mutex mu;
  static std::map<std::string, CudaModule> memory;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memory.find(key); it != memory.end()) {
      CudaModule m = it->second;
      m.from = CudaModule::From::Memory;
      return m;
    }
  }
  fs::path dir = cache_dir.empty() ? cpu::JitConfig::from_env().cache_dir : fs::path(cache_dir);
  std::error_code ec;
  if (!dir.empty()) fs::create_directories(dir, ec);
  const fs::path entry = dir.empty() ? fs::path() : dir / (key + (cubin ? ".cubin" : ".ptx"));

  CudaModule m;
  m.cubin = cubin;
  m.codegen = codegen;
  std::string payload;
  if (!entry.empty() && cpu::read_cache_entry(entry, key, payload) && decode(payload, m)) {
    m.from = CudaModule::From::Disk;
  } else {
    NvrtcOutput o = nv->compile(source, arch, cubin);
    m.image = std::move(o.image);
    m.log = std::move(o.log);
    m.from = CudaModule::From::Compiler;
    if (!entry.empty()) {
      try {
        cpu::write_cache_entry(entry, key, encode(m));
      } catch (const CompileError&) {
        // A read-only cache folder costs a recompile next time, nothing else.
      }
    }
  }
  m.resources = parse_ptxas_log(m.log);
  std::lock_guard<std::mutex> lock(mu);
  memory.emplace(key, m);
  return m;
}

}  // namespace luminal::cuda
