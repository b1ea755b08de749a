// JIT disk cache size limit (see the header).
#include "backends/cpu/jit_cache_limit.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

namespace luminal::cpu {

namespace fs = std::filesystem;

void touch_entry(const fs::path& entry) { ::utimensat(AT_FDCWD, entry.c_str(), nullptr, 0); }

void evict_least_recent(const fs::path& dir, uint64_t max_bytes, const fs::path& keep) {
  if (max_bytes == 0 || dir.empty()) return;
  struct Entry {
    fs::path path;
    uint64_t bytes;
    timespec used;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".so") continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    entries.push_back({it->path(), static_cast<uint64_t>(st.st_size), st.st_mtim});
    total += static_cast<uint64_t>(st.st_size);
  }
  if (total <= max_bytes) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const Entry& e : entries) {
    if (total <= max_bytes) break;
    if (e.path == keep) continue;
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
}

}  // namespace luminal::cpu
