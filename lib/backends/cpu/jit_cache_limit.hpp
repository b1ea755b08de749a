// The JIT disk cache's size limit: least recently used entries go first. An entry's
// modification time is its last use (Jit touches an entry it loads), so eviction needs
// no index file and works across processes sharing the folder.
#pragma once

#include <cstdint>
#include <filesystem>

namespace luminal::cpu {

/// Removes `<key>.so` entries of `dir`, least recently used first, until their sizes add
/// up to at most `max_bytes` (0: no limit). `keep` (the entry just written) is never
/// removed. Removing an entry a process has loaded is harmless: its mapping stays.
void evict_least_recent(const std::filesystem::path& dir, uint64_t max_bytes,
                        const std::filesystem::path& keep);

/// Marks an entry as just used.
void touch_entry(const std::filesystem::path& entry);

}  // namespace luminal::cpu
