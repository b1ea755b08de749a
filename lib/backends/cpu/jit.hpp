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
//    truncated or corrupt entry fails the trailer check (or dlopen), and an entry that
//    loads but lacks an expected symbol is evicted; both are rebuilt.
// Security: loading a cache entry runs its constructors, so the trailer (integrity) is not
// enough. The folder is created 0700; a folder or entry owned by another user or writable
// by group or others is refused (said once on stderr): the folder means no disk cache for
// this Jit, an entry is replaced by a fresh build.
// Faults: the compiler works in a private scratch folder; the result is then copied into
// the cache (unique temp file, renamed over the entry: readers never see a half-written
// file, concurrent writers of one key both produce valid files). A failed copy (full
// disk, read-only folder) is said once and the program is used uncached. Temp files left
// by crashed processes (older than an hour) are swept when a Jit opens its folder.
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
///
/// Unloading is safe: the libraries a generated object needs (libgomp and its worker
/// threads above all) are pinned when it is opened, so closing the object unmaps only
/// its own code, never a runtime whose threads outlive the call that used it. (Before,
/// the last Callable of a luminal::load()ed program unloaded libgomp under its parked
/// workers: SIGSEGV.) Callers must not close it while one of its functions runs; every
/// call of a generated kernel returns only after its parallel workers are done.
class JitLibrary {
 public:
  /// dlopen(path) with RTLD_NOW | RTLD_LOCAL and its dependencies pinned. `bytes`, when
  /// given, are the object file's bytes, kept for bytes() when the file is removed later.
  /// `fd`, when >= 0, is closed after the object is (an anonymous file's descriptor:
  /// it must stay open while its /proc/self/fd name is loaded, or a later object given
  /// the same number would be taken for this one). Throws CompileError `what: dlerror`.
  static std::shared_ptr<const JitLibrary> open(const std::string& path, const std::string& what,
                                                std::string bytes = {}, int fd = -1);
  /// Loads an object held in memory without giving it a name in the file system: an
  /// anonymous memory file (memfd_create), else O_EXCL in a private mkdtemp folder
  /// that is removed at once. Nothing is left behind, nothing predictable is opened.
  static std::shared_ptr<const JitLibrary> open_bytes(std::string bytes, const std::string& what);

  JitLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~JitLibrary();
  JitLibrary(const JitLibrary&) = delete;
  JitLibrary& operator=(const JitLibrary&) = delete;

  /// Address of `name`; throws CompileError naming the symbol and the file when absent.
  void* symbol(const std::string& name) const;
  /// Whether `name` is defined (no exception).
  bool has_symbol(const std::string& name) const;
  /// Address of `name` cast to a function pointer type F.
  template <class F>
  F function(const std::string& name) const {
    return reinterpret_cast<F>(symbol(name));
  }
  const std::string& path() const { return path_; }
  /// The object file's bytes (Callable::save): kept in memory when the file is gone,
  /// else read from path(). Throws RuntimeError when neither is possible.
  std::string bytes() const;

 private:
  void* handle_;
  std::string path_;
  std::string bytes_;
  int fd_ = -1;
};

struct JitConfig {
  /// Compiler command, split on spaces ("gcc", "ccache gcc", "/opt/x/bin/clang").
  std::string compiler;
  /// Flags before the source file. Default: default_flags().
  std::vector<std::string> flags;
  /// Disk cache folder; empty disables the disk cache.
  std::filesystem::path cache_dir;
  /// Size limit of the disk cache's entries: least recently used ones are removed when a
  /// new entry passes it (LUMINAL_CACHE_MAX_BYTES; default 2 GiB; 0: no limit).
  uint64_t cache_max_bytes = uint64_t{2} << 30;

  /// LUMINAL_CC / LUMINAL_CACHE_DIR (or ~/.cache/luminal) / LUMINAL_CACHE_MAX_BYTES and
  /// the default flags.
  static JitConfig from_env();
  /// -O3 -march=native -fopenmp-simd -ffp-contract=off -fno-math-errno ... (see jit.cpp).
  static std::vector<std::string> default_flags();
};

struct JitStats {
  uint64_t compiler_runs = 0;      ///< times the C compiler was started
  uint64_t memory_hits = 0;        ///< compile() answered from this instance's memory cache
  uint64_t disk_hits = 0;          ///< loaded from a valid disk cache entry
  uint64_t corrupt_entries = 0;    ///< disk entries rejected (trailer, dlopen, missing symbol) and rebuilt
  uint64_t untrusted_entries = 0;  ///< disk entries refused (another owner, writable by others, not a file)
  uint64_t cache_write_failures = 0;  ///< fresh builds that could not be stored (full disk...) and ran uncached
};

class Jit {
 public:
  explicit Jit(JitConfig config = JitConfig::from_env());
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  /// Compile (or fetch from cache) one C translation unit. Throws CompileError carrying
  /// the compiler's command line and log when compilation fails. A cached library that
  /// lacks one of `required_symbols` is evicted and rebuilt; a fresh build that lacks
  /// one is a CompileError.
  std::shared_ptr<const JitLibrary> compile(const std::string& c_source,
                                            const std::vector<std::string>& required_symbols = {});
  /// Whether the disk cache is in use (configured, and the folder passed the checks).
  bool disk_cache_enabled() const { return !config_.cache_dir.empty(); }
  /// The disk cache file that `c_source` maps to (exists only after a compile, and only
  /// when the disk cache is enabled).
  std::filesystem::path cache_path(const std::string& c_source) const;

  JitStats stats() const;
  const JitConfig& config() const { return config_; }
  /// "gcc (Debian 12.2.0-14) 12.2.0": first line of `compiler --version`, cached per
  /// process and compiler command. Throws CompileError when the compiler cannot run.
  std::string compiler_identity() const;
  /// "gcc 12.2.0", "clang 14.0.6": the compiler and its version from `--version`'s first
  /// line (CompileReport::codegen); the command alone when it does not run.
  std::string short_identity() const;

  /// The process-wide instance (configured from the environment on first use).
  static Jit& global();

 private:
  struct Entry;
  std::string cache_key(const std::string& c_source) const;
  std::shared_ptr<const JitLibrary> build(const std::string& key, const std::string& src,
                                          const std::vector<std::string>& required);
  std::shared_ptr<const JitLibrary> load_entry(const std::string& key, const std::vector<std::string>& required);
  bool store_entry(const std::string& key, const std::string& so_bytes);
  void count(uint64_t JitStats::*field);

  JitConfig config_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  JitStats stats_;
};

/// Cache entries of other code generators (NVRTC and hipRTC modules) in the format of
/// the JIT's own: the payload followed by the checksummed trailer for `key`. write
/// goes to a unique temp file renamed over `path` (readers never see half a file);
/// read returns false for a missing, truncated or corrupt entry.
void write_cache_entry(const std::filesystem::path& path, const std::string& key, const std::string& payload);
bool read_cache_entry(const std::filesystem::path& path, const std::string& key, std::string& payload);

/// 128-bit content hash as 32 hex digits (two independent 64-bit mixes).
std::string hash_hex(const std::string& data);
/// 64-bit FNV-1a based checksum used in cache entry trailers.
uint64_t checksum64(const void* data, size_t n);
/// "AMD EPYC|fpu vme ... avx512f ..." from /proc/cpuinfo (model + flags), cached.
const std::string& cpu_signature();

/// Why `dir` must not hold cached code ("" when it may): not a directory, owned by
/// another user, or writable by group or others. `what` names it in the message.
std::string untrusted_folder_reason(const std::filesystem::path& dir);
/// Prints "luminal: <message>" to stderr the first time `message` is seen in this process.
void warn_once(const std::string& message);

}  // namespace luminal::cpu
