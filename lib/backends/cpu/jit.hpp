// The CPU backend's JIT: one C translation unit -> shared object -> dlopen.
//
// The system C compiler is found at run time (LUMINAL_CC, else cc, gcc, clang on PATH),
// so a program that links Luminal needs no compiler at build time and picks up the host's
// best vector ISA through -march=native. Results are cached twice:
//  * in memory, per Jit instance, so compiling the same program twice is free;
//  * on disk (LUMINAL_CACHE_DIR, default ~/.cache/luminal), keyed by a 128-bit hash of
//    (source, compiler identity + `--version`, flags, CPU model + feature flags). An entry
//    is the compiler's .so followed by a 32-byte trailer {magic, payload size, checksum,
//    key}; the ELF loader ignores trailing bytes, so the file is dlopen'ed in place. A
//    truncated or corrupt entry fails the trailer check (or dlopen) and is rebuilt.
//    Writes go to a unique temp file that is renamed over the entry: readers never see a
//    half-written file, and concurrent writers of the same key both produce valid files.
// Thread-safe: concurrent compiles of the same source wait for one compiler run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace luminal::cpu {

/// A loaded shared object. Symbols stay valid while any shared_ptr to it is alive.
class JitLibrary {
 public:
  JitLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~JitLibrary();
  JitLibrary(const JitLibrary&) = delete;
  JitLibrary& operator=(const JitLibrary&) = delete;

  /// Address of `name`; throws CompileError naming the symbol and the file when absent.
  void* symbol(const std::string& name) const;
  /// Address of `name` cast to a function pointer type F.
  template <class F>
  F function(const std::string& name) const {
    return reinterpret_cast<F>(symbol(name));
  }
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

struct JitConfig {
  /// Compiler command, split on spaces ("gcc", "ccache gcc", "/opt/x/bin/clang").
  std::string compiler;
  /// Flags before the source file. Default: default_flags().
  std::vector<std::string> flags;
  /// Disk cache folder; empty disables the disk cache.
  std::filesystem::path cache_dir;

  /// LUMINAL_CC / LUMINAL_CACHE_DIR (or ~/.cache/luminal) and the default flags.
  static JitConfig from_env();
  /// -O3 -march=native -fopenmp -ffp-contract=off -fno-math-errno ... (see jit.cpp).
  static std::vector<std::string> default_flags();
};

struct JitStats {
  uint64_t compiler_runs = 0;    ///< times the C compiler was started
  uint64_t memory_hits = 0;      ///< compile() answered from this instance's memory cache
  uint64_t disk_hits = 0;        ///< loaded from a valid disk cache entry
  uint64_t corrupt_entries = 0;  ///< disk entries rejected (trailer or dlopen) and rebuilt
};

class Jit {
 public:
  explicit Jit(JitConfig config = JitConfig::from_env());
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  /// Compile (or fetch from cache) one C translation unit. Throws CompileError carrying
  /// the compiler's command line and log when compilation fails.
  std::shared_ptr<const JitLibrary> compile(const std::string& c_source);
  /// The disk cache file that `c_source` maps to (exists only after a compile, and only
  /// when the disk cache is enabled).
  std::filesystem::path cache_path(const std::string& c_source) const;

  JitStats stats() const;
  const JitConfig& config() const { return config_; }
  /// "gcc (Debian 12.2.0-14) 12.2.0": first line of `compiler --version`, cached per
  /// process and compiler command. Throws CompileError when the compiler cannot run.
  std::string compiler_identity() const;

  /// The process-wide instance (configured from the environment on first use).
  static Jit& global();

 private:
  struct Entry;
  std::string cache_key(const std::string& c_source) const;
  std::shared_ptr<const JitLibrary> build(const std::string& key, const std::string& src);

  JitConfig config_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  JitStats stats_;
};

/// 128-bit content hash as 32 hex digits (two independent 64-bit mixes).
std::string hash_hex(const std::string& data);
/// 64-bit FNV-1a based checksum used in cache entry trailers.
uint64_t checksum64(const void* data, size_t n);
/// "AMD EPYC|fpu vme ... avx512f ..." from /proc/cpuinfo (model + flags), cached.
const std::string& cpu_signature();

}  // namespace luminal::cpu
