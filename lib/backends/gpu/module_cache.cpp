#include "backends/gpu/module_cache.hpp"

#include <cstring>
#include <map>
#include <mutex>

#include "backends/cpu/jit.hpp"
#include "luminal/error.hpp"

namespace luminal::gpu {

namespace fs = std::filesystem;

namespace {

std::string encode(const DeviceModule& m) {
  std::string s;
  const uint64_t n = m.log.size();
  s.append(reinterpret_cast<const char*>(&n), sizeof n);
  s += m.log;
  s += m.image;
  return s;
}

bool decode(const std::string& payload, DeviceModule& m) {
  uint64_t n = 0;
  if (payload.size() < sizeof n) return false;
  std::memcpy(&n, payload.data(), sizeof n);
  if (payload.size() - sizeof n < n) return false;
  m.log = payload.substr(sizeof n, n);
  m.image = payload.substr(sizeof n + n);
  return !m.image.empty();
}

}  // namespace

namespace {
std::mutex mu;
std::map<std::string, DeviceModule> memory;
}  // namespace

void clear_module_memory_cache() {
  std::lock_guard<std::mutex> lock(mu);
  memory.clear();
}

DeviceModule cached_module(const std::string& key_material, const std::string& ext, const std::string& cache_dir,
                           const std::function<DeviceModule()>& compile) {
  const std::string key = cpu::hash_hex(key_material);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = memory.find(key); it != memory.end()) {
      DeviceModule m = it->second;
      m.from = DeviceModule::From::Memory;
      return m;
    }
  }
  fs::path dir = cache_dir.empty() ? cpu::JitConfig::from_env().cache_dir : fs::path(cache_dir);
  std::error_code ec;
  if (!dir.empty()) {
    fs::create_directories(dir, ec);
    if (!cpu::untrusted_folder_reason(dir).empty()) dir.clear();  // not ours: no disk cache
  }
  const fs::path entry = dir.empty() ? fs::path() : dir / (key + "." + ext);
  DeviceModule m;
  std::string payload;
  if (!entry.empty() && cpu::read_cache_entry(entry, key, payload) && decode(payload, m)) {
    m.from = DeviceModule::From::Disk;
  } else {
    m = compile();
    m.from = DeviceModule::From::Compiler;
    if (!entry.empty()) {
      try {
        cpu::write_cache_entry(entry, key, encode(m));
      } catch (const CompileError& e) {
        cpu::warn_once(std::string("cannot write to the disk cache: ") + e.what());
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  memory.emplace(key, m);
  return m;
}

}  // namespace luminal::gpu
