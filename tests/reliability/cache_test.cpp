// Issue 13, items 6 and 7: the JIT's disk cache.
//  6. authenticity, not only integrity: the folder is created 0700; a folder or entry
//     owned by another user or writable by others is refused (a planted .so with a
//     valid trailer never runs its constructor);
//  7. an entry that loads but lacks the expected symbols is evicted and rebuilt; a cache
//     that cannot be written (full disk) falls back to no cache instead of failing.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "backends/cpu/jit.hpp"
#include "luminal/error.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using luminal::cpu::Jit;
using luminal::cpu::JitConfig;

namespace {

// A fresh, empty folder per test case.
struct CacheDir : testsupport::TempDir {
  CacheDir() : testsupport::TempDir("rel-cache") {}
};

JitConfig config_in(const fs::path& dir) {
  JitConfig c = JitConfig::from_env();
  c.cache_dir = dir;
  return c;
}

const char* kAdd = "int lm_add(int a, int b) { return a + b; }\n";

// Builds `source` uncached and returns the object's bytes.
std::string object_of(const std::string& source) {
  JitConfig c = JitConfig::from_env();
  c.cache_dir.clear();
  Jit jit(c);
  return jit.compile(source)->bytes();
}

// Writes `so` as the cache entry `path` with a valid trailer: what anyone who can write
// into the folder can do (the trailer is a checksum, not a signature).
void plant(const fs::path& path, const std::string& so) {
  struct {
    std::array<char, 8> magic = {'L', 'M', 'J', 'I', 'T', 'v', '1', '\n'};
    uint64_t size, sum, key;
  } t;
  const std::string key = path.stem().string();
  t.size = so.size();
  t.sum = luminal::cpu::checksum64(so.data(), so.size());
  t.key = luminal::cpu::checksum64(key.data(), key.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(so.data(), static_cast<std::streamsize>(so.size()));
  out.write(reinterpret_cast<const char*>(&t), sizeof t);
}

// A library whose constructor creates `marker`: "code nobody compiled" if it ever runs.
std::string planted_object(const fs::path& marker) {
  std::string so = object_of("#include <stdio.h>\n__attribute__((constructor)) static void lm_planted(void) {\n"
                              "  FILE* f = fopen(\"" + marker.string() + "\", \"w\"); if (f) fclose(f);\n}\n"
                              "int lm_add(int a, int b) { return a - b; }\n");
  REQUIRE(fs::exists(marker));  // building it here loaded it once: the marker works
  fs::remove(marker);
  return so;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("the cache folder is created private", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "sub" / "luminal";
  Jit jit(config_in(cache));
  CHECK(jit.disk_cache_enabled());
  CHECK(mode_of(cache) == 0700);
  CHECK(jit.compile(kAdd)->function<int (*)(int, int)>("lm_add")(2, 3) == 5);
  CHECK((mode_of(jit.cache_path(kAdd)) & 022) == 0);  // entries are not writable by others
}

TEST_CASE("a folder writable by others is refused: a planted entry never runs", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "shared";
  fs::create_directory(cache);
  const fs::path marker = dir.path / "planted-ran";
  // The planted library goes where kAdd's entry would be.
  const fs::path entry = Jit(config_in(dir.path / "probe")).cache_path(kAdd);
  plant(cache / entry.filename(), planted_object(marker));
  SECTION("world-writable") { REQUIRE(::chmod(cache.c_str(), 0777) == 0); }
  SECTION("group-writable") { REQUIRE(::chmod(cache.c_str(), 0770) == 0); }
  SECTION("owned by another user") {
    if (::geteuid() != 0) return;  // only root can give a folder away
    REQUIRE(::chown(cache.c_str(), 65534, 65534) == 0);
  }
  Jit jit(config_in(cache));
  CHECK_FALSE(jit.disk_cache_enabled());
  CHECK(jit.compile(kAdd)->function<int (*)(int, int)>("lm_add")(2, 3) == 5);  // ours, compiled
  CHECK_FALSE(fs::exists(marker));
  CHECK(jit.stats().compiler_runs == 1);
  CHECK(jit.stats().disk_hits == 0);
}

TEST_CASE("an entry owned by another user, writable by others or a link is refused", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "cache";
  const fs::path marker = dir.path / "planted-ran";
  Jit probe(config_in(cache));
  const fs::path entry = probe.cache_path(kAdd);
  const std::string planted = planted_object(marker);
  SECTION("writable by others") {
    plant(entry, planted);
    REQUIRE(::chmod(entry.c_str(), 0666) == 0);
  }
  SECTION("owned by another user") {
    if (::geteuid() != 0) return;
    plant(entry, planted);
    REQUIRE(::chown(entry.c_str(), 65534, 65534) == 0);
  }
  SECTION("a symbolic link") {
    plant(dir.path / "elsewhere.so", planted);
    fs::create_symlink(dir.path / "elsewhere.so", entry);
  }
  Jit jit(config_in(cache));
  REQUIRE(jit.disk_cache_enabled());
  CHECK(jit.compile(kAdd)->function<int (*)(int, int)>("lm_add")(2, 3) == 5);
  CHECK_FALSE(fs::exists(marker));
  CHECK(jit.stats().untrusted_entries == 1);
  CHECK(jit.stats().compiler_runs == 1);
  // Our build replaced it: the next Jit loads it from disk.
  Jit again(config_in(cache));
  CHECK(again.compile(kAdd)->function<int (*)(int, int)>("lm_add")(2, 3) == 5);
  CHECK(again.stats().disk_hits == 1);
}

TEST_CASE("an entry that loads but lacks the expected symbols is evicted and rebuilt", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "cache";
  Jit probe(config_in(cache));
  // Intact (valid trailer), trusted (ours), loadable -- but another program's code.
  plant(probe.cache_path(kAdd), object_of("int lm_other(void) { return 1; }\n"));
  Jit jit(config_in(cache));
  auto lib = jit.compile(kAdd, {"lm_add"});
  CHECK(lib->function<int (*)(int, int)>("lm_add")(40, 2) == 42);
  CHECK(jit.stats().corrupt_entries == 1);
  CHECK(jit.stats().compiler_runs == 1);
  Jit again(config_in(cache));
  CHECK(again.compile(kAdd, {"lm_add"})->function<int (*)(int, int)>("lm_add")(1, 1) == 2);
  CHECK(again.stats().disk_hits == 1);
  // A fresh build that lacks a required symbol is the compiler's problem: CompileError.
  CHECK_THROWS_AS(jit.compile("int lm_x(void) { return 0; }\n", {"lm_y"}), luminal::CompileError);
}

TEST_CASE("a cache that cannot be written falls back to no cache", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "cache";
  // A full disk, simulated with a file-size limit of 4 KB for this process: the source
  // (small) is written, the copy into the cache (the object, ~15 KB) fails with EFBIG.
  // The compiler runs under a wrapper that lifts the limit again for itself.
  const fs::path wrapper = dir.path / "cc.sh";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\nulimit -f unlimited\nexec " << JitConfig::from_env().compiler << " \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  JitConfig cfg = config_in(cache);
  cfg.compiler = wrapper.string();
  Jit jit(cfg);
  REQUIRE(jit.disk_cache_enabled());
  (void)jit.compiler_identity();  // probed before the limit
  struct rlimit old {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  struct rlimit lim = old;
  lim.rlim_cur = 4096;
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
  std::shared_ptr<const luminal::cpu::JitLibrary> lib;
  std::string error;
  try {
    lib = jit.compile(kAdd, {"lm_add"});
  } catch (const std::exception& e) {
    error = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  CHECK(error.empty());
  REQUIRE(lib);
  CHECK(lib->function<int (*)(int, int)>("lm_add")(20, 22) == 42);
  CHECK(jit.stats().cache_write_failures == 1);
  // Nothing half-written is left in the cache.
  for (const auto& e : fs::directory_iterator(cache)) FAIL("left in the cache: " << e.path());
  // The program still saves (its bytes were kept).
  CHECK(lib->bytes().size() > 1000);
}

TEST_CASE("temp files of crashed runs are swept", "[reliability][cache]") {
  CacheDir dir;
  const fs::path cache = dir.path / "cache";
  { Jit make(config_in(cache)); }
  const fs::path stale = cache / "0123.4567-0-1.so.tmp", fresh = cache / "89ab.4567-1-1.so.tmp";
  std::ofstream(stale) << "half";
  std::ofstream(fresh) << "half";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  Jit jit(config_in(cache));
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh));  // may belong to a compile running now
}
